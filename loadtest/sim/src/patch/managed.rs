//! Field ownership as structured-merge-diff keeps it in `metadata.managedFields`: field sets
//! (FieldsV1: `f:` fields, `k:{…}` associative-list items, `v:` set members, `.` for an item
//! itself), one entry per manager and operation; `Update` writes take the fields they change,
//! `Apply` writes own what they apply, conflict with other managers' fields they change, and drop
//! what they stopped applying unless someone else owns it.
//!
//! Left out (documented in docs/sim-cluster.md): the cap of ten Update managers
//! ("ancient-changes"), API version conversion of the sets, and unions.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::fields_v1;
use super::schema::{FieldDef, Schema, SchemaKind, Ssa, SsaKeys, SsaList};
use crate::value_memo::{self, Memo};

/// One path element, encoded as in FieldsV1: `f:name`, `k:{"name":"c"}`, `v:"x"`, `i:0`.
pub(crate) type Element = String;
/// A field path.
pub(crate) type FieldPath = Vec<Element>;

/// Fields structured-merge-diff never records (fieldmanager `stripmeta.go`).
const STRIPPED_ROOT: &[&str] = &["apiVersion", "kind"];
const STRIPPED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// Which part of the object a write may own: the main resource resets `status`, the status
/// subresource everything but `status` (the strategies' `GetResetFields`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// No status subresource: everything.
    All,
    Main,
    Status,
}

/// The value recorded for an associative-list item or set member itself: only its presence counts.
static PRESENT: Value = Value::Null;

/// Whether the root member `key` belongs to the fields `part` may own.
fn root_member_counts(key: &str, part: Part) -> bool {
    if STRIPPED_ROOT.contains(&key) {
        return false;
    }
    match (part, key) {
        (Part::Main, "status") => false,
        (Part::Status, "status") => true,
        (Part::Status, _) => false,
        _ => true,
    }
}

/// Which containers (maps, structs and lists that have members) a walk records as members of
/// the set, beside the leaves and the list items. structured-merge-diff's `Compare` adds a
/// container's own path when the other side lacks it (Added or Removed): that is the `"."` of
/// an `Update` entry for a map, struct or list the write brought. `ToFieldSet`, what an applier
/// owns, records none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marks {
    /// Leaves and list items only (`ToFieldSet`).
    Leaves,
    /// Every container too: the value is compared with another object.
    Containers,
    /// The containers the kind's zero value lacks: a create, which kube-apiserver compares with
    /// a new empty object (create.go), where `spec`, `status` and the fields marked
    /// [`FieldDef::in_zero_value`] are present already.
    BeyondZeroValue,
}

impl Marks {
    /// Whether a container at a place that is (`in_zero_value`) or is not in the zero value is
    /// recorded.
    fn records(self, in_zero_value: bool) -> bool {
        match self {
            Marks::Leaves => false,
            Marks::Containers => true,
            Marks::BeyondZeroValue => !in_zero_value,
        }
    }
}

/// Whether the root member `key` of an object of type `schema` is in the kind's zero value:
/// every built-in kind's `spec` and `status` are structs that are not pointers (a custom
/// resource's zero value is an empty object).
fn root_member_in_zero_value(schema: Schema, key: &str) -> bool {
    schema.is_listed()
        && (matches!(key, "spec" | "status") || schema.field(key).is_some_and(|f| f.in_zero_value))
}

/// Whether the member of a node (`parent_in_zero_value`) whose field is `field` is in the zero
/// value.
fn member_in_zero_value(parent_in_zero_value: bool, field: Option<&FieldDef>) -> bool {
    parent_in_zero_value && field.is_some_and(|f| f.in_zero_value)
}

/// The leaf paths of a value (and the paths of associative-list items), with their values:
/// [`field_paths`] as `ToFieldSet` gives them.
pub(crate) fn leaves(v: &Value, schema: Schema, part: Part) -> BTreeMap<FieldPath, &Value> {
    field_paths(v, schema, part, Marks::Leaves)
}

/// The paths of a value's leaves, list items and the containers `marks` records, with their
/// values (list items and containers as [`PRESENT`]).
pub(crate) fn field_paths(
    v: &Value,
    schema: Schema,
    part: Part,
    marks: Marks,
) -> BTreeMap<FieldPath, &Value> {
    let mut out = BTreeMap::new();
    let Value::Object(root) = v else { return out };
    for (k, v) in root {
        if v.is_null() || !root_member_counts(k, part) {
            continue;
        }
        let field = schema.field(k);
        let (sub, ..) = schema.lookup(k);
        let mut path = vec![format!("f:{k}")];
        // metadata itself is never recorded (stripmeta.go), its members are; none of them is in
        // the zero value.
        if k == "metadata"
            && let Value::Object(meta) = v
        {
            for (mk, mv) in meta {
                if mv.is_null() || STRIPPED_METADATA.contains(&mk.as_str()) {
                    continue;
                }
                path.push(format!("f:{mk}"));
                collect(mv, sub, sub.field(mk), &mut path, &mut out, marks, false);
                path.pop();
            }
            continue;
        }
        collect(v, sub, field, &mut path, &mut out, marks, root_member_in_zero_value(schema, k));
    }
    out
}

/// What changed from `old` to `new`: the same answer as comparing their [`field_paths`] with
/// [`Marks::Containers`], found by walking both at once and collecting paths only under members
/// that differ, so an update that changes one label does not enumerate (and allocate a path
/// for) every field of the object.
pub(crate) fn diff(old: &Value, new: &Value, schema: Schema, part: Part) -> Comparison {
    let mut c = Comparison::default();
    let (Value::Object(o), Value::Object(n)) = (old, new) else {
        return compare(
            &field_paths(old, schema, part, Marks::Containers),
            &field_paths(new, schema, part, Marks::Containers),
        );
    };
    let mut path = Vec::new();
    for (k, ov, nv) in members_of_both(o, n) {
        if !root_member_counts(k, part) {
            continue;
        }
        if crate::json::opt_equal(ov, nv) {
            continue;
        }
        let (sub, ..) = schema.lookup(k);
        path.push(format!("f:{k}"));
        match (k, ov, nv) {
            // metadata's own members are walked whatever they hold (some are never recorded).
            ("metadata", Some(Value::Object(om)), Some(Value::Object(nm))) => {
                for (mk, omv, nmv) in members_of_both(om, nm) {
                    if STRIPPED_METADATA.contains(&mk) || crate::json::opt_equal(omv, nmv) {
                        continue;
                    }
                    path.push(format!("f:{mk}"));
                    diff_at(omv, nmv, sub, sub.field(mk), &mut path, &mut c);
                    path.pop();
                }
            }
            // A metadata that is not an object on both sides: too rare to walk apart.
            ("metadata", ..) => {
                return compare(
                    &field_paths(old, schema, part, Marks::Containers),
                    &field_paths(new, schema, part, Marks::Containers),
                );
            }
            _ => diff_at(ov, nv, sub, schema.field(k), &mut path, &mut c),
        }
        path.pop();
    }
    c
}

/// A member's value unless it is absent or null (which record nothing).
fn present<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    m.get(k).filter(|v| !v.is_null())
}

/// Every key of `a`, then those of `b` that `a` lacks, each with its [`present`] value in `a`
/// and in `b`. Objects with the same keys in the same order (an object and its edited copy, the
/// common case) are paired by position, without looking any key up.
fn members_of_both<'a>(
    a: &'a Map<String, Value>,
    b: &'a Map<String, Value>,
) -> Vec<(&'a str, Option<&'a Value>, Option<&'a Value>)> {
    let not_null = |v: &'a Value| (!v.is_null()).then_some(v);
    if a.len() == b.len() && a.keys().zip(b.keys()).all(|(x, y)| x == y) {
        return a.iter().zip(b.values()).map(|((k, x), y)| (k.as_str(), not_null(x), not_null(y))).collect();
    }
    union_keys(a, b).map(|k| (k, present(a, k), present(b, k))).collect()
}

/// The keys of `a`, then those of `b` that `a` lacks.
fn union_keys<'a>(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> impl Iterator<Item = &'a str> {
    a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))).map(String::as_str)
}

/// Whether a create records nothing for `v` at a place in the zero value (`in_zero_value`): an
/// empty struct there (no member but nulls) equals the zero value's.
fn same_as_zero_value(v: &Value, in_zero_value: bool) -> bool {
    in_zero_value && matches!(v, Value::Object(m) if m.values().all(Value::is_null))
}

/// Whether [`collect`] records `v`'s members rather than `v` itself.
fn descends(v: &Value, field: Option<&FieldDef>) -> bool {
    let atomic_struct = field.is_some_and(|f| f.ssa == Ssa::AtomicStruct);
    matches!(v, Value::Object(m) if !atomic_struct && m.values().any(|v| !v.is_null()))
}

fn diff_at(
    old: Option<&Value>,
    new: Option<&Value>,
    schema: Schema,
    field: Option<&FieldDef>,
    path: &mut FieldPath,
    c: &mut Comparison,
) {
    if crate::json::opt_equal(old, new) {
        return;
    }
    if let (Some(ov @ Value::Object(o)), Some(nv @ Value::Object(n))) = (old, new)
        && descends(ov, field)
        && descends(nv, field)
    {
        for (k, ov, nv) in members_of_both(o, n) {
            if crate::json::opt_equal(ov, nv) {
                continue;
            }
            path.push(format!("f:{k}"));
            diff_at(ov, nv, schema.lookup(k).0, schema.field(k), path, c);
            path.pop();
        }
        return;
    }
    let mut before = BTreeMap::new();
    let mut after = BTreeMap::new();
    if let Some(o) = old {
        collect(o, schema, field, path, &mut before, Marks::Containers, false);
    }
    if let Some(n) = new {
        collect(n, schema, field, path, &mut after, Marks::Containers, false);
    }
    merge_comparison(c, compare(&before, &after));
}

fn merge_comparison(into: &mut Comparison, from: Comparison) {
    into.added.extend(from.added);
    into.modified.extend(from.modified);
    into.removed.extend(from.removed);
}

/// The key of an associative-list item (`protocol` defaults to TCP, as in the SSA schema),
/// with its keys sorted.
pub(crate) fn item_key(item: &Value, keys: SsaKeys) -> Map<String, Value> {
    let mut pairs: Vec<(String, Value)> = keys
        .iter()
        .filter_map(|k| match item.get(k) {
            Some(v) if !v.is_null() => Some((k.to_string(), v.clone())),
            _ if k == "protocol" => Some((k.to_string(), Value::from("TCP"))),
            _ => None,
        })
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    pairs.into_iter().collect()
}

fn list_kind(field: Option<&FieldDef>) -> SsaList {
    field.map_or(SsaList::Atomic, FieldDef::ssa_list)
}

/// Collects the leaves under `path` of value `v`, whose type is `schema` as field `field`, and
/// the containers `marks` records (`in_zero_value`: whether `v`'s place is in the zero value).
fn collect<'a>(
    v: &'a Value,
    schema: Schema,
    field: Option<&FieldDef>,
    path: &mut FieldPath,
    out: &mut BTreeMap<FieldPath, &'a Value>,
    marks: Marks,
    in_zero_value: bool,
) {
    match v {
        Value::Object(m) if descends(v, field) => {
            if marks.records(in_zero_value) {
                out.insert(path.clone(), &PRESENT);
            }
            for (k, v) in m {
                if v.is_null() {
                    continue;
                }
                path.push(format!("f:{k}"));
                let (sub, ..) = schema.lookup(k);
                let field = schema.field(k);
                collect(v, sub, field, path, out, marks, member_in_zero_value(in_zero_value, field));
                path.pop();
            }
        }
        // The zero value has this empty struct too: a create that leaves it empty changes
        // nothing there (`Compare` of two empty values).
        _ if marks == Marks::BeyondZeroValue && same_as_zero_value(v, in_zero_value) => {}
        Value::Array(items) => match list_kind(field) {
            SsaList::Map(keys) if items.iter().all(Value::is_object) && !items.is_empty() => {
                if marks.records(in_zero_value) {
                    out.insert(path.clone(), &PRESENT);
                }
                for item in items {
                    path.push(format!("k:{}", Value::Object(item_key(item, keys))));
                    out.insert(path.clone(), &PRESENT);
                    if let Value::Object(m) = item {
                        for (k, v) in m {
                            if v.is_null() {
                                continue;
                            }
                            path.push(format!("f:{k}"));
                            let (sub, ..) = schema.lookup(k);
                            collect(v, sub, schema.field(k), path, out, marks, false);
                            path.pop();
                        }
                    }
                    path.pop();
                }
            }
            SsaList::Set if !items.is_empty() => {
                if marks.records(in_zero_value) {
                    out.insert(path.clone(), &PRESENT);
                }
                for item in items {
                    path.push(format!("v:{item}"));
                    out.insert(path.clone(), &PRESENT);
                    path.pop();
                }
            }
            _ => {
                out.insert(path.clone(), v);
            }
        },
        _ => {
            out.insert(path.clone(), v);
        }
    }
}

/// What changed between two objects, as structured-merge-diff's `Compare` reports it.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Comparison {
    pub added: BTreeSet<FieldPath>,
    pub modified: BTreeSet<FieldPath>,
    pub removed: BTreeSet<FieldPath>,
}

impl Comparison {
    /// Nothing added, modified or removed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

pub(crate) fn compare(old: &BTreeMap<FieldPath, &Value>, new: &BTreeMap<FieldPath, &Value>) -> Comparison {
    let mut c = Comparison::default();
    for (p, v) in new {
        match old.get(p) {
            None => {
                c.added.insert(p.clone());
            }
            // A container on one side and an empty one (a leaf) on the other is no change of
            // the node itself: `Compare` records a node only when a side lacks it.
            Some(o) if o != v && !o.is_null() && !v.is_null() => {
                c.modified.insert(p.clone());
            }
            Some(_) => {}
        }
    }
    c.removed = old.keys().filter(|p| !new.contains_key(*p)).cloned().collect();
    c
}

/// One `managedFields` entry, its set decoded (or, for an edit in place, as FieldsV1).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry<Fields = BTreeSet<FieldPath>> {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub fields: Fields,
}

impl<Fields> Entry<Fields> {
    /// The entry `e` of `managedFields` with its set as `fields`.
    fn read(e: &Value, fields: Fields) -> Self {
        let text = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Entry {
            manager: text("manager"),
            operation: text("operation"),
            api_version: text("apiVersion"),
            time: text("time"),
            subresource: text("subresource"),
            fields,
        }
    }

    fn same_identity(&self, manager: &str, operation: &str, api_version: &str, subresource: &str) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource == subresource
            // Appliers are one manager whatever version they apply (BuildManagerIdentifier).
            && (operation == "Apply" || self.api_version == api_version)
    }

    /// How conflicts name the manager (fieldmanager `printManager`).
    pub fn printed(&self) -> String {
        if self.operation == "Update" {
            format!("{:?} using {}", self.manager, self.api_version)
        } else {
            format!("{:?}", self.manager)
        }
    }
}

/// The entries of `obj.metadata.managedFields`.
pub(crate) fn entries(obj: &Value) -> Vec<Entry> {
    let Some(items) = obj.pointer("/metadata/managedFields").and_then(Value::as_array) else {
        return Vec::new();
    };
    items
        .iter()
        .map(|e| {
            let mut fields = BTreeSet::new();
            if let Some(f) = e.get("fieldsV1") {
                decode_fields(f, &mut Vec::new(), &mut fields);
            }
            Entry::read(e, fields)
        })
        .collect()
}

fn decode_fields(v: &Value, path: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
    let Value::Object(m) = v else { return };
    if m.is_empty() && !path.is_empty() {
        out.insert(path.clone());
        return;
    }
    for (k, child) in m {
        if k == "." {
            if !path.is_empty() {
                out.insert(path.clone());
            }
            continue;
        }
        path.push(k.clone());
        decode_fields(child, path, out);
        path.pop();
    }
}

/// A FieldsV1 tree: whether the path to it is a member of the set, and the elements below it.
#[derive(Default)]
struct FieldNode {
    member: bool,
    children: BTreeMap<String, FieldNode>,
}

impl FieldNode {
    fn child(&mut self, element: String) -> &mut FieldNode {
        self.children.entry(element).or_default()
    }

    /// FieldsV1: members as `{}`, or `".": {}` beside children; `f:` fields, then `k:` items,
    /// then `v:` members, each sorted.
    fn render(self) -> Value {
        let itself = self.member && !self.children.is_empty();
        let mut out = Map::with_capacity(self.children.len() + usize::from(itself));
        if itself {
            out.insert(".".into(), Value::Object(Map::new()));
        }
        // The children come in text order, so a stable sort by group alone is `element_order`.
        let mut children: Vec<(String, FieldNode)> = self.children.into_iter().collect();
        children.sort_by_key(|(k, _)| fields_v1::element_group(k));
        for (k, child) in children {
            out.insert(k, child.render());
        }
        Value::Object(out)
    }
}

/// FieldsV1 of a set.
pub(crate) fn encode_fields(set: &BTreeSet<FieldPath>) -> Value {
    let mut root = FieldNode::default();
    for path in set {
        let mut node = &mut root;
        for e in path {
            node = node.child(e.clone());
        }
        node.member = true;
    }
    root.render()
}

/// What a create records for its manager: `encode_fields` of the keys of [`field_paths`] with
/// [`Marks::BeyondZeroValue`], built in one walk straight into the value, without a path per
/// field or a tree in between.
pub(crate) fn encode_created(v: &Value, schema: Schema, part: Part) -> Value {
    encode_created_directly(v, schema, part)
        // Two items of a list with the same key share one node; merging them is left to the sets.
        .unwrap_or_else(|| {
            encode_fields(&field_paths(v, schema, part, Marks::BeyondZeroValue).into_keys().collect())
        })
}

/// [`encode_created`], or `None` where two list items have the same key.
fn encode_created_directly(v: &Value, schema: Schema, part: Part) -> Option<Value> {
    let mut members = Vec::new();
    if let Value::Object(root) = v {
        for (k, v) in root {
            if v.is_null() || !root_member_counts(k, part) {
                continue;
            }
            let (sub, ..) = schema.lookup(k);
            let fields = match v {
                Value::Object(meta) if k == "metadata" => {
                    let mut recorded = Vec::new();
                    for (mk, mv) in meta {
                        if mv.is_null() || STRIPPED_METADATA.contains(&mk.as_str()) {
                            continue;
                        }
                        recorded.push((field_element(mk), fields_of(mv, sub, sub.field(mk), false)?));
                    }
                    if recorded.is_empty() {
                        continue;
                    }
                    fields_node(recorded, false)?
                }
                _ => {
                    let in_zero_value = root_member_in_zero_value(schema, k);
                    if same_as_zero_value(v, in_zero_value) {
                        continue;
                    }
                    match schema.field(k) {
                        Some(field) => remembered_fields_of(v, sub, field, in_zero_value)?,
                        None => fields_of(v, sub, None, in_zero_value)?,
                    }
                }
            };
            members.push((field_element(k), fields));
        }
    }
    fields_node(members, false)
}

/// `f:name`.
fn field_element(name: &str) -> String {
    let mut element = String::with_capacity(name.len() + 2);
    element.push_str("f:");
    element.push_str(name);
    element
}

/// The FieldsV1 a create records at the place of `v` ([`collect`] with
/// [`Marks::BeyondZeroValue`] as a set; `in_zero_value`: whether the place is in the zero
/// value), or `None` where two list items have the same key. Reads nothing but its arguments:
/// [`remembered_fields_of`] remembers its answers by the value and the place alone.
fn fields_of(v: &Value, schema: Schema, field: Option<&FieldDef>, in_zero_value: bool) -> Option<Value> {
    let member = || Some(Value::Object(Map::new()));
    let members_of = |m: &Map<String, Value>,
                      schema: Schema,
                      in_zero_value: bool|
     -> Option<Vec<(String, Value)>> {
        m.iter()
            .filter(|(_, v)| !v.is_null())
            .filter_map(|(k, v)| {
                let field = schema.field(k);
                let in_zero_value = member_in_zero_value(in_zero_value, field);
                if same_as_zero_value(v, in_zero_value) {
                    return None;
                }
                Some(fields_of(v, schema.lookup(k).0, field, in_zero_value).map(|f| (field_element(k), f)))
            })
            .collect()
    };
    let container = !in_zero_value;
    match v {
        Value::Object(m) if descends(v, field) => {
            fields_node(members_of(m, schema, in_zero_value)?, container)
        }
        Value::Array(items) => match list_kind(field) {
            SsaList::Map(keys) if items.iter().all(Value::is_object) && !items.is_empty() => {
                let mut listed = Vec::with_capacity(items.len());
                for item in items {
                    let key = format!("k:{}", Value::Object(item_key(item, keys)));
                    let members = match item {
                        Value::Object(m) => members_of(m, schema, false)?,
                        _ => Vec::new(),
                    };
                    listed.push((key, fields_node(members, true)?));
                }
                fields_node(listed, container)
            }
            SsaList::Set if !items.is_empty() => fields_node(
                items.iter().map(|item| (format!("v:{item}"), Value::Object(Map::new()))).collect(),
                container,
            ),
            _ => member(),
        },
        _ => member(),
    }
}

thread_local! {
    static FIELDS_OF: RefCell<Memo<Value>> = const { RefCell::new(Memo::new()) };
}

/// [`fields_of`] of a root member with a listed `field`, remembered for a value identical to one
/// met before at the same place (the pods of a Job share their spec): see [`value_memo`]. A
/// listed root field is of one kind, so whether it is in the zero value follows from the place.
fn remembered_fields_of(
    v: &Value,
    schema: Schema,
    field: &'static FieldDef,
    in_zero_value: bool,
) -> Option<Value> {
    let place = (schema.address(), std::ptr::from_ref(field) as usize);
    value_memo::remembered(&FIELDS_OF, place, v, |v| fields_of(v, schema, Some(field), in_zero_value))
}

/// A FieldsV1 node of `children` (any order), with `"."` when it is a `member` itself and has
/// children. `None` when two children share an element and are not both plain members.
fn fields_node(mut children: Vec<(String, Value)>, member: bool) -> Option<Value> {
    children.sort_by(|a, b| fields_v1::element_order(&a.0, &b.0));
    let plain = |v: &Value| v.as_object().is_some_and(Map::is_empty);
    if children.windows(2).any(|w| w[0].0 == w[1].0 && !(plain(&w[0].1) && plain(&w[1].1))) {
        return None;
    }
    children.dedup_by(|a, b| a.0 == b.0);
    let itself = member && !children.is_empty();
    let mut out = Map::with_capacity(children.len() + usize::from(itself));
    if itself {
        out.insert(".".into(), Value::Object(Map::new()));
    }
    out.extend(children);
    Some(Value::Object(out))
}

/// A path as structured-merge-diff prints it: `.spec.containers[name="c"].image`.
pub(crate) fn path_string(path: &FieldPath) -> String {
    let mut out = String::new();
    for e in path {
        match e.split_at_checked(2) {
            Some(("f:", name)) => {
                out.push('.');
                out.push_str(name);
            }
            Some(("k:", key)) => {
                let parts: Vec<String> = serde_json::from_str::<Map<String, Value>>(key)
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default();
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            Some(("v:", value)) => out.push_str(&format!("[={value}]")),
            Some(("i:", index)) => out.push_str(&format!("[{index}]")),
            _ => out.push_str(e),
        }
    }
    out
}

/// Writes `entries` into `obj.metadata.managedFields`, empty sets dropped, sorted as
/// `sortEncodedManagedFields` does (operation, time, manager, apiVersion, subresource).
pub(crate) fn store_entries(obj: &mut Value, entries: Vec<Entry>) {
    store_entries_with(obj, entries, BTreeSet::is_empty, |fields| encode_fields(&fields));
}

/// [`store_entries`] of entries whose sets are held as `Fields`.
pub(crate) fn store_entries_with<Fields>(
    obj: &mut Value,
    mut entries: Vec<Entry<Fields>>,
    is_empty: impl Fn(&Fields) -> bool,
    encode: impl Fn(Fields) -> Value,
) {
    entries.retain(|e| !is_empty(&e.fields));
    entries.sort_by(|p, q| {
        (&p.operation, &p.time, &p.manager, &p.api_version, &p.subresource).cmp(&(
            &q.operation,
            &q.time,
            &q.manager,
            &q.api_version,
            &q.subresource,
        ))
    });
    let rendered: Vec<Value> = entries
        .into_iter()
        .map(|e| {
            render_entry(&e.manager, &e.operation, &e.api_version, &e.time, &e.subresource, encode(e.fields))
        })
        .collect();
    set_managed_fields(obj, rendered);
}

/// One `managedFields` entry as the apiserver writes it.
fn render_entry(
    manager: &str,
    operation: &str,
    api_version: &str,
    time: &str,
    subresource: &str,
    fields_v1: Value,
) -> Value {
    let mut m = Map::with_capacity(7);
    // A write with neither fieldManager nor User-Agent is tracked under no name: Go's
    // `omitempty` drops the empty manager.
    if !manager.is_empty() {
        m.insert("manager".into(), json!(manager));
    }
    m.insert("operation".into(), json!(operation));
    m.insert("apiVersion".into(), json!(api_version));
    m.insert("time".into(), json!(time));
    m.insert("fieldsType".into(), json!("FieldsV1"));
    m.insert("fieldsV1".into(), fields_v1);
    if !subresource.is_empty() {
        m.insert("subresource".into(), json!(subresource));
    }
    Value::Object(m)
}

/// Sets `obj.metadata.managedFields` to `rendered`, or removes it when there is none.
fn set_managed_fields(obj: &mut Value, rendered: Vec<Value>) {
    let Value::Object(root) = obj else { return };
    let meta = root.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(meta) = meta else { return };
    if rendered.is_empty() {
        meta.shift_remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(rendered));
    }
}

/// The manager of a write without `fieldManager`: the User-Agent up to its first `/`, printable
/// characters only, at most 128 bytes (handlers `prefixFromUserAgent`). `kubectl/v1.37.1 (…)` is
/// `kubectl`.
pub fn manager_from_user_agent(user_agent: &str) -> String {
    let prefix = user_agent.split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in prefix.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > 128 {
            break;
        }
        out.push(c);
    }
    out
}

/// Who makes an `Update` write, and when.
pub struct Identity<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: &'a str,
    pub now: &'a str,
}

/// What [`track_update`] makes of the live entries `live` for the change `c`, each set edited
/// as FieldsV1 rather than decoded and encoded again. `None` (do it the decoding way) unless
/// every set is present and canonical and at most one entry is the writer's own.
pub(crate) fn edit_in_place(live: Vec<Value>, c: &Comparison, who: &Identity) -> Option<Vec<Entry<Value>>> {
    editable_in_place(&live, who).then(|| edit_editable(live, c, who))
}

/// Whether [`edit_in_place`] takes `live`: every set present and canonical, at most one entry
/// the writer's own `Update` ([`Entry::same_identity`], read from the values).
fn editable_in_place(live: &[Value], who: &Identity) -> bool {
    fn text<'v>(e: &'v Value, k: &str) -> &'v str {
        e.get(k).and_then(Value::as_str).unwrap_or("")
    }
    // `same_identity` of an `Update` (not an apply: the API version counts).
    let writers = |e: &&Value| {
        text(e, "manager") == who.manager
            && text(e, "operation") == "Update"
            && text(e, "subresource") == who.subresource
            && text(e, "apiVersion") == who.api_version
    };
    live.iter().all(|e| e.get("fieldsV1").is_some_and(fields_v1::canonical))
        && live.iter().filter(writers).count() <= 1
}

/// [`edit_in_place`] of entries [`editable_in_place`] takes.
fn edit_editable(live: Vec<Value>, c: &Comparison, who: &Identity) -> Vec<Entry<Value>> {
    let mut entries = Vec::with_capacity(live.len() + 1);
    let mut mine_at = None;
    for (i, mut e) in live.into_iter().enumerate() {
        let fields = e.get_mut("fieldsV1").map(std::mem::take).unwrap_or_default();
        let entry = Entry::read(&e, fields);
        if entry.same_identity(who.manager, "Update", who.api_version, who.subresource) {
            mine_at = Some(i);
        }
        entries.push(entry);
    }
    if c.is_empty() {
        // Nothing changed: the entries stay as they are (the writer's own is not re-timed).
        return entries;
    }
    let mut fields = match mine_at {
        Some(i) => entries.remove(i).fields,
        None => Value::Object(Map::new()),
    };
    let changed = || c.added.iter().chain(&c.modified);
    for e in &mut entries {
        for path in changed().chain(&c.removed) {
            fields_v1::remove(&mut e.fields, path);
        }
    }
    for path in &c.removed {
        fields_v1::remove(&mut fields, path);
    }
    for path in changed() {
        fields_v1::insert(&mut fields, path);
    }
    entries.push(Entry {
        manager: who.manager.to_string(),
        operation: "Update".into(),
        api_version: who.api_version.to_string(),
        time: who.now.to_string(),
        subresource: who.subresource.to_string(),
        fields,
    });
    entries
}

/// A non-apply write (create, update, JSON/merge/strategic patch) by `manager`: it takes every
/// field it adds or changes (from other managers too) and every manager loses the fields it
/// removed (`Updater.Update` with force). `old` is `None` on create. An update of an object that
/// has no managedFields is not tracked (`skipNonAppliedManager`).
///
/// Returns whether the update changes a field of `part` (the comparison of `old` and `new` the
/// sets are edited by is not empty): `new` then differs from `old`, and the caller need not
/// compare them whole to tell a write that changes nothing.
pub fn track_update(
    old: Option<&Value>,
    new: &mut Value,
    kind: Option<&SchemaKind>,
    part: Part,
    who: &Identity,
) -> bool {
    let schema = kind.map_or(Schema::OPAQUE, SchemaKind::schema);
    let Some(old) = old else {
        // A create: the manager owns every field the object has.
        let fields = encode_created(new, schema, part);
        let owned = fields.as_object().is_some_and(|f| !f.is_empty());
        let entry = owned
            .then(|| render_entry(who.manager, "Update", who.api_version, who.now, who.subresource, fields));
        set_managed_fields(new, entry.into_iter().collect());
        return false;
    };
    // A write that sends other managedFields than the live ones replaces them.
    let sent = managed_fields(new);
    let live = managed_fields(old);
    if sent.is_some() && !crate::json::opt_equal(sent, live) {
        return false;
    }
    let live = live.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if live.is_empty() {
        if let Some(Value::Object(meta)) = new.get_mut("metadata") {
            meta.shift_remove("managedFields");
        }
        return false;
    }
    let c = diff(old, new, schema, part);
    // The entries to edit: the written object's own copy when it sent one (equal to the live
    // ones, as checked above), moved out instead of copied; both ways below replace it.
    let entries = match new.get_mut("metadata").and_then(|m| m.get_mut("managedFields")) {
        Some(Value::Array(sent)) => std::mem::take(sent),
        _ => live.to_vec(),
    };
    match edit_in_place(entries, &c, who) {
        Some(edited) => store_entries_with(new, edited, |f| f.as_object().is_none_or(Map::is_empty), |f| f),
        None => update_decoded(old, new, &c, who),
    }
    !c.is_empty()
}

/// [`track_update`] of an update whose object holds `null` in place of its managedFields, which
/// stand for the live ones (a merge patch's result, made without copying them: see
/// `ApiServer::patch`). When the update changes a field and the live sets can be edited in
/// place, the live entries are moved out of `old` rather than copied: `old` has no
/// managedFields left then, and `true` tells the caller the objects differ without comparing
/// them. Otherwise the placeholder gets a copy of the live managedFields and the update is
/// [`track_update`]'s.
pub fn track_update_moving_live(
    old: &mut Value,
    new: &mut Value,
    kind: Option<&SchemaKind>,
    part: Part,
    who: &Identity,
) -> bool {
    let placeholder = managed_fields(new).is_some_and(Value::is_null);
    let live = managed_fields(old).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if placeholder && !live.is_empty() && editable_in_place(live, who) {
        let schema = kind.map_or(Schema::OPAQUE, SchemaKind::schema);
        // The placeholder is skipped as managedFields always are (`STRIPPED_METADATA`).
        let c = diff(old, new, schema, part);
        if !c.is_empty()
            && let Some(Value::Array(live)) = old.get_mut("metadata").and_then(|m| m.get_mut("managedFields"))
        {
            let edited = edit_editable(std::mem::take(live), &c, who);
            store_entries_with(new, edited, |f| f.as_object().is_none_or(Map::is_empty), |f| f);
            return true;
        }
    }
    if placeholder {
        put_back_live_managed_fields(old, new);
    }
    track_update(Some(old), new, kind, part, who)
}

/// `obj.metadata.managedFields` (`Value::pointer` splits and unescapes its path on every call).
fn managed_fields(obj: &Value) -> Option<&Value> {
    obj.get("metadata").and_then(|m| m.get("managedFields"))
}

/// Puts a copy of `old`'s managedFields where `new` holds `null` for them (see
/// [`track_update_moving_live`]): `new` is then what copying the live object whole would have
/// given.
pub fn put_back_live_managed_fields(old: &Value, new: &mut Value) {
    let Some(Value::Object(meta)) = new.get_mut("metadata") else { return };
    if !meta.get("managedFields").is_some_and(Value::is_null) {
        return;
    }
    match managed_fields(old) {
        Some(live) => meta.insert("managedFields".into(), live.clone()),
        None => meta.shift_remove("managedFields"),
    };
}

/// [`track_update`] of an update by decoding every set into paths and encoding them again.
pub(crate) fn update_decoded(old: &Value, new: &mut Value, c: &Comparison, who: &Identity) {
    let mut managers = entries(old);
    if c.added.is_empty() && c.modified.is_empty() && c.removed.is_empty() {
        store_entries(new, managers);
        return;
    }
    let changed: BTreeSet<FieldPath> = c.added.union(&c.modified).cloned().collect();
    let mut mine = BTreeSet::new();
    for e in &mut managers {
        if e.same_identity(who.manager, "Update", who.api_version, who.subresource) {
            mine = std::mem::take(&mut e.fields);
            continue;
        }
        e.fields.retain(|p| !changed.contains(p) && !c.removed.contains(p));
    }
    managers.retain(|e| !e.same_identity(who.manager, "Update", who.api_version, who.subresource));
    mine.retain(|p| !c.removed.contains(p));
    mine.extend(changed);
    managers.push(Entry {
        manager: who.manager.to_string(),
        operation: "Update".into(),
        api_version: who.api_version.to_string(),
        time: who.now.to_string(),
        subresource: who.subresource.to_string(),
        fields: mine,
    });
    store_entries(new, managers);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::SchemaKind;

    /// An `Update` by `manager` in v1 at `now`.
    fn who<'a>(manager: &'a str, now: &'a str) -> Identity<'a> {
        Identity { manager, api_version: "v1", subresource: "", now }
    }

    fn pod() -> Schema {
        SchemaKind::for_kind("v1", "Pod").map(|k| k.schema()).unwrap_or(Schema::OPAQUE)
    }

    /// List items that share a key share a node: a create's FieldsV1 of such an object is still
    /// the encoding of its every leaf.
    #[test]
    fn encoded_leaves_merge_list_items_with_the_same_key() {
        let obj = json!({
            "metadata": {"name": "p", "finalizers": ["a", "b", "a"]},
            "spec": {"containers": [{"name": "c", "image": "i"}, {"name": "c", "args": ["x"]}],
                "tolerations": [{"key": "k"}, {"key": "k"}]}
        });
        let created = |obj, part| field_paths(obj, pod(), part, Marks::BeyondZeroValue).into_keys().collect();
        for part in [Part::All, Part::Main] {
            assert_eq!(encode_created(&obj, pod(), part), encode_fields(&created(&obj, part)));
            assert_eq!(encode_created_directly(&obj, pod(), part), None, "the containers share a key");
        }
        let distinct =
            json!({"metadata": {"finalizers": ["a", "a"]}, "spec": {"containers": [{"name": "c"}]}});
        assert_eq!(
            encode_created_directly(&distinct, pod(), Part::All),
            Some(encode_fields(&created(&distinct, Part::All)))
        );
    }

    /// FieldsV1 as kube-apiserver writes it for a created pod (`kubectl create`).
    #[test]
    fn field_sets_encode_as_fields_v1() {
        let obj = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "d", "labels": {"app": "x"}, "finalizers": ["a"]},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}], "args": ["x"]}]}
        });
        let set: BTreeSet<FieldPath> = leaves(&obj, pod(), Part::Main).into_keys().collect();
        // As structured-merge-diff's ToFieldSet: list items are members ("."), maps and structs
        // only through their fields.
        assert_eq!(
            encode_fields(&set),
            json!({
                "f:metadata": {"f:finalizers": {"v:\"a\"": {}}, "f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {
                    ".": {}, "f:args": {}, "f:image": {}, "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                }}}
            })
        );
        let mut decoded = BTreeSet::new();
        decode_fields(&encode_fields(&set), &mut Vec::new(), &mut decoded);
        assert_eq!(decoded, set, "FieldsV1 round-trips");
        assert_eq!(
            path_string(&vec![
                "f:spec".into(),
                "f:containers".into(),
                "k:{\"name\":\"c\"}".into(),
                "f:image".into()
            ]),
            ".spec.containers[name=\"c\"].image"
        );
    }

    /// structured-merge-diff's `Compare` adds a map, struct or list the other side lacks: an
    /// update that brings one owns it (`"."` beside its members); one that adds to a map that
    /// was there owns only what it adds. Seen on real clusters as `f:annotations: {.: {}, …}`
    /// and `f:ports: {.: {}, k:{…}: …}` in `Update` entries.
    #[test]
    fn an_update_owns_the_maps_and_lists_it_brings() {
        let kind = SchemaKind::for_kind("v1", "Pod");
        let schema = kind.as_ref();
        let mut live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        track_update(None, &mut live, schema, Part::Main, &who("creator", "t1"));
        let mut new = live.clone();
        new["metadata"]["labels"]["b"] = json!("2");
        new["metadata"]["annotations"] = json!({"n": "1"});
        new["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80}]);
        new["spec"]["containers"][0]["securityContext"] = json!({"runAsUser": 1});
        track_update(Some(&live), &mut new, schema, Part::Main, &who("updater", "t2"));
        let updater = entries(&new).into_iter().find(|e| e.manager == "updater").expect("an entry");
        assert_eq!(
            encode_fields(&updater.fields),
            json!({
                "f:metadata": {"f:annotations": {".": {}, "f:n": {}}, "f:labels": {"f:b": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {
                    "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}},
                    "f:securityContext": {".": {}, "f:runAsUser": {}}
                }}}
            })
        );
        // The creator keeps its labels map; taking the annotations away takes their map from
        // the updater too.
        let mut removed = new.clone();
        removed["metadata"].as_object_mut().unwrap().remove("annotations");
        track_update(Some(&new), &mut removed, schema, Part::Main, &who("remover", "t3"));
        let by = |m: &str| {
            entries(&removed).into_iter().find(|e| e.manager == m).map(|e| encode_fields(&e.fields))
        };
        assert_eq!(by("creator").unwrap()["f:metadata"], json!({"f:labels": {".": {}, "f:a": {}}}));
        assert_eq!(by("updater").unwrap()["f:metadata"], json!({"f:labels": {"f:b": {}}}));
        assert_eq!(by("remover"), None, "removing owns nothing");
    }

    #[test]
    fn updates_take_what_they_change_and_drop_what_they_remove() {
        let kind = SchemaKind::for_kind("v1", "ConfigMap");
        let schema = kind.as_ref();
        let mut created = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"a": "1", "b": "2"}});
        track_update(None, &mut created, schema, Part::All, &who("kubectl-create", "t1"));
        let e = entries(&created);
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].manager.as_str(), e[0].operation.as_str()), ("kubectl-create", "Update"));
        // The data map itself (`Compare` adds a container the zero value lacks: `"."`), a and b.
        assert_eq!(e[0].fields.len(), 3);
        assert_eq!(encode_fields(&e[0].fields), json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}}));

        let mut patched = created.clone();
        patched["data"] = json!({"a": "9", "c": "3"});
        track_update(Some(&created), &mut patched, schema, Part::All, &who("kubectl-patch", "t2"));
        let e = entries(&patched);
        let by = |m: &str| e.iter().find(|e| e.manager == m).map(|e| e.fields.clone()).unwrap_or_default();
        let path = |k: &str| vec!["f:data".to_string(), format!("f:{k}")];
        assert_eq!(
            by("kubectl-create"),
            [vec!["f:data".to_string()]].into_iter().collect(),
            "a was taken over, b removed; the map it brought stays its own"
        );
        assert_eq!(by("kubectl-patch"), [path("a"), path("c")].into_iter().collect());

        // A manager with nothing left is dropped.
        let mut emptied = patched.clone();
        emptied["data"] = json!({"a": "9", "c": "4"});
        emptied["metadata"]["annotations"] = json!({"x": "y"});
        track_update(Some(&patched), &mut emptied, schema, Part::All, &who("kubectl-create", "t3"));
        let e = entries(&emptied);
        assert_eq!(e.len(), 2, "{e:?}");
        let mut replaced = emptied.clone();
        replaced.as_object_mut().unwrap().remove("data");
        track_update(Some(&emptied), &mut replaced, schema, Part::All, &who("other", "t4"));
        let e = entries(&replaced);
        assert_eq!(
            e.iter().map(|e| e.manager.as_str()).collect::<Vec<_>>(),
            ["kubectl-create"],
            "the data map and its keys went with it: {e:?}"
        );

        // An object without managedFields is not tracked on update.
        let mut untracked =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "2"}});
        let old =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        track_update(Some(&old), &mut untracked, schema, Part::All, &who("m", "t"));
        assert!(untracked["metadata"].get("managedFields").is_none());
    }
}
