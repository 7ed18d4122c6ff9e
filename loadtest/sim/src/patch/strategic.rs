//! Strategic merge patch, the server half of apimachinery `pkg/util/strategicpatch/patch.go`
//! (`StrategicMergeMapPatch` with `MergeParallelList` and `IgnoreUnmatchedNulls`, as of
//! apimachinery v0.36), ported function by function over `serde_json::Value`.
//!
//! Go mutates the original list's backing array in place while merging (deletions shift items
//! left, appends land in the freed slots); the order of a list carrying `$setElementOrder` is
//! computed against that mutated array, so [`merge_slice`] reproduces it (`OrderView`).

use serde_json::{Map, Value};

use super::goval::{self, GoKind};
use super::schema::Schema;

const DIRECTIVE_MARKER: &str = "$patch";
const DELETE_DIRECTIVE: &str = "delete";
const REPLACE_DIRECTIVE: &str = "replace";
const MERGE_DIRECTIVE: &str = "merge";
const RETAIN_KEYS_STRATEGY: &str = "retainKeys";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

/// The errors of `k8s.io/apimachinery/pkg/util/mergepatch`, as the apiserver classifies them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SmpError {
    /// mergepatch.ErrNoListOfLists (422).
    NoListOfLists,
    /// mergepatch.ErrBadPatchFormatForPrimitiveList (400).
    BadPatchFormatForPrimitiveList,
    /// mergepatch.ErrBadPatchFormatForRetainKeys (400).
    BadPatchFormatForRetainKeys,
    /// mergepatch.ErrBadPatchFormatForSetElementOrderList (400).
    BadPatchFormatForSetElementOrderList,
    /// Any other error: a plain Go error, which the apiserver answers with a 500.
    Other(String),
}

impl SmpError {
    pub fn text(&self) -> String {
        match self {
            SmpError::NoListOfLists => "lists of lists are not supported".into(),
            SmpError::BadPatchFormatForPrimitiveList => "invalid patch format of primitive list".into(),
            SmpError::BadPatchFormatForRetainKeys => "invalid patch format of retainKeys".into(),
            SmpError::BadPatchFormatForSetElementOrderList => {
                "invalid patch format of setElementOrder list".into()
            }
            SmpError::Other(s) => s.clone(),
        }
    }
}

type Result<T> = std::result::Result<T, SmpError>;

fn err_no_merge_key(m: &Map<String, Value>, key: &str) -> SmpError {
    SmpError::Other(format!(
        "map: {} does not contain declared merge key: {key}",
        goval::fmt(&Value::Object(m.clone()))
    ))
}

fn err_bad_arg_type(expected: &str, actual: &Value) -> SmpError {
    SmpError::Other(format!("expected a {expected}, but received a {}", goval::type_name(actual)))
}

fn err_bad_patch_type(t: &Value, m: &Map<String, Value>) -> SmpError {
    SmpError::Other(format!(
        "unknown patch type: {} in map: {}",
        goval::fmt(t),
        goval::fmt(&Value::Object(m.clone()))
    ))
}

const SLICE: &str = "[]interface {}";
const MAP: &str = "map[string]interface {}";

/// `StrategicMergeMapPatch(original, patch, schema)` as the apiserver calls it.
pub(crate) fn strategic_merge_map_patch(
    original: Map<String, Value>,
    patch: Map<String, Value>,
    schema: Schema,
) -> Result<Map<String, Value>> {
    merge_map(original, patch, schema)
}

fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: Schema,
) -> Result<Map<String, Value>> {
    if let Some(directive) = patch.get(DIRECTIVE_MARKER).cloned() {
        return handle_directive_in_merge_map(&directive, patch);
    }
    apply_retain_keys_directive(&mut original, &mut patch)?;
    merge_patch_into_original(&mut original, &mut patch, schema)?;

    for (k, patch_v) in patch {
        let (key, is_delete_list) = if k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
            (extract_key(&k, DELETE_FROM_PRIMITIVE_LIST_PREFIX)?, true)
        } else {
            (k, false)
        };

        // A null deletes the key (IgnoreUnmatchedNulls: nothing is kept when it is absent).
        if patch_v.is_null() {
            original.shift_remove(&key);
            continue;
        }

        let Some(original_v) = original.get_mut(&key) else {
            if !is_delete_list {
                take_patch_value(&mut original, key, patch_v);
            }
            continue;
        };
        if goval::kind(original_v) != goval::kind(&patch_v) {
            if !is_delete_list {
                take_patch_value(&mut original, key, patch_v);
            }
            continue;
        }
        match (original_v.take(), patch_v) {
            (Value::Object(o), Value::Object(p)) => {
                let (subschema, strategy, _) = schema.lookup(&key);
                let (_, strategy) = extract_retain_keys_patch_strategy(strategy)?;
                let merged = merge_map_handler(o, p, subschema, strategy)?;
                original.insert(key, Value::Object(merged));
            }
            (Value::Array(o), Value::Array(p)) => {
                let (subschema, strategy, merge_key) = schema.lookup(&key);
                let (_, strategy) = extract_retain_keys_patch_strategy(strategy)?;
                let merged = merge_slice_handler(o, p, subschema, strategy, merge_key, is_delete_list)?.0;
                original.insert(key, Value::Array(merged));
            }
            (_, p) => match remove_directives(p) {
                Some(v) => {
                    original.insert(key, v);
                }
                None => {
                    original.shift_remove(&key);
                }
            },
        }
    }
    Ok(original)
}

/// A patch value for a key the original lacks (or holds with another type): nulls discarded,
/// maps carrying `$patch` dropped.
fn take_patch_value(original: &mut Map<String, Value>, key: String, mut patch_v: Value) {
    discard_null_values_from_patch(&mut patch_v);
    match remove_directives(patch_v) {
        Some(v) => {
            original.insert(key, v);
        }
        None => {
            original.shift_remove(&key);
        }
    }
}

fn discard_null_values_from_patch(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(discard_null_values_from_patch);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_null_values_from_patch),
        _ => {}
    }
}

/// `removeDirectives`: `None` when the value is itself a `$patch` map.
fn remove_directives(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.contains_key(DIRECTIVE_MARKER) {
                return None;
            }
            Some(Value::Object(
                m.into_iter().filter_map(|(k, v)| remove_directives(v).map(|v| (k, v))).collect(),
            ))
        }
        Value::Array(items) => Some(Value::Array(items.into_iter().filter_map(remove_directives).collect())),
        other => Some(other),
    }
}

fn handle_directive_in_merge_map(
    directive: &Value,
    mut patch: Map<String, Value>,
) -> Result<Map<String, Value>> {
    match directive.as_str() {
        Some(REPLACE_DIRECTIVE) => {
            patch.shift_remove(DIRECTIVE_MARKER);
            Ok(patch)
        }
        Some(DELETE_DIRECTIVE) => Ok(Map::new()),
        _ => Err(err_bad_patch_type(directive, &patch)),
    }
}

fn extract_retain_keys_patch_strategy(tag: &'static str) -> Result<(bool, &'static str)> {
    let strategies: Vec<&'static str> = tag.split(',').collect();
    match strategies.as_slice() {
        [single] if *single == RETAIN_KEYS_STRATEGY => Ok((true, "")),
        [single] => Ok((false, single)),
        [a, b] if *a == RETAIN_KEYS_STRATEGY => Ok((true, b)),
        [a, b] if *b == RETAIN_KEYS_STRATEGY => Ok((true, a)),
        _ => Err(SmpError::Other(format!("unexpected patch strategy: [{}]", strategies.join(" ")))),
    }
}

fn extract_key(s: &str, prefix: &str) -> Result<String> {
    match s.split_once('/') {
        Some((p, rest)) if p == prefix => Ok(rest.to_string()),
        _ => Err(match prefix {
            DELETE_FROM_PRIMITIVE_LIST_PREFIX => SmpError::BadPatchFormatForPrimitiveList,
            SET_ELEMENT_ORDER_PREFIX => SmpError::BadPatchFormatForSetElementOrderList,
            _ => SmpError::Other(format!("fail to find unknown prefix {prefix:?} in {s}")),
        }),
    }
}

/// `applyRetainKeysDirective`: clear the keys of `original` the `$retainKeys` list omits, after
/// checking every non-null key of the patch is in it.
fn apply_retain_keys_directive(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<()> {
    let Some(retain) = patch.shift_remove(RETAIN_KEYS_DIRECTIVE) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(SmpError::BadPatchFormatForRetainKeys);
    };
    let retained = |k: &str| retain.iter().any(|v| v.as_str() == Some(k));
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
            || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
        {
            continue;
        }
        if !retained(k) {
            return Err(SmpError::BadPatchFormatForRetainKeys);
        }
    }
    original.retain(|k, _| retained(k));
    Ok(())
}

/// `mergePatchIntoOriginal`: merge each list that has a `$setElementOrder/<list>` directive and
/// order it: `$setElementOrder` first, then the patch list, then the live list.
fn merge_patch_into_original(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: Schema,
) -> Result<()> {
    let keys: Vec<String> =
        patch.keys().filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX)).cloned().collect();
    for key in keys {
        let Some(order) = patch.shift_remove(&key) else { continue };
        let Value::Array(set_order) = order else {
            return Err(err_bad_arg_type(SLICE, &order));
        };
        let original_key = extract_key(&key, SET_ELEMENT_ORDER_PREFIX)?;
        let original_list = match original.get(&original_key) {
            None => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(other) => return Err(err_bad_arg_type(SLICE, other)),
        };
        let patch_list = match patch.get(&original_key) {
            None => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(other) => return Err(err_bad_arg_type(SLICE, other)),
        };
        let (subschema, strategy, merge_key) = schema.lookup(&original_key);
        let (_, strategy) = extract_retain_keys_patch_strategy(strategy)?;
        validate_patch_with_set_order_list(patch_list.as_deref().unwrap_or(&[]), &set_order, merge_key)?;

        // `original_field` is what Go's originalFieldValue slice shows once merging is done.
        let (merged, original_field) = match (original_list, patch_list.clone()) {
            (Some(o), None) => (o.clone(), o),
            (None, Some(p)) => {
                let merged = match remove_directives(Value::Array(p)) {
                    Some(Value::Array(items)) => items,
                    _ => continue,
                };
                (merged, Vec::new())
            }
            (Some(o), Some(p)) => merge_slice_handler(o, p, subschema, strategy, merge_key, false)?,
            (None, None) => continue,
        };

        let (patch_items, server_only) = if merge_key.is_empty() {
            partition_primitives_by_present_in_list(merged, &set_order)
        } else {
            partition_maps_by_present_in_list(merged, &set_order, merge_key)?
        };
        let elem = slice_element_type(&[&original_field, patch_list.as_deref().unwrap_or(&[])])?;
        let both =
            normalize_element_order(patch_items, server_only, &set_order, &original_field, merge_key, elem)?;
        original.insert(original_key.clone(), Value::Array(both));
        patch.shift_remove(&original_key);
    }
    Ok(())
}

fn merge_map_handler(
    original: Map<String, Value>,
    patch: Map<String, Value>,
    schema: Schema,
    strategy: &str,
) -> Result<Map<String, Value>> {
    if strategy == REPLACE_DIRECTIVE { Ok(patch) } else { merge_map(original, patch, schema) }
}

/// `mergeSliceHandler`. Also returns what the original list's backing array holds afterwards.
fn merge_slice_handler(
    original: Vec<Value>,
    patch: Vec<Value>,
    schema: Schema,
    strategy: &str,
    merge_key: &str,
    is_delete_list: bool,
) -> Result<(Vec<Value>, Vec<Value>)> {
    // Delete lists are handled the same way whatever the field's patch strategy.
    if strategy == MERGE_DIRECTIVE || is_delete_list {
        merge_slice(original, patch, schema, merge_key, is_delete_list)
    } else {
        Ok((patch, original))
    }
}

/// Go's view of the original slice's backing array (len == cap == n) while `mergeSlice` works:
/// deletions shift items left inside it, appends fill the freed tail until it is full.
struct OrderView {
    array: Vec<Value>,
    len: usize,
}

impl OrderView {
    fn new(items: Vec<Value>) -> Self {
        let len = items.len();
        OrderView { array: items, len }
    }

    fn live(&self) -> &[Value] {
        self.array.get(..self.len).unwrap_or(&[])
    }

    /// `original = append(original[:i], original[i+1:]...)`
    fn remove(&mut self, i: usize) {
        if i < self.len {
            // copy(B[i:], B[i+1:len]); B[len-1] keeps the old last item.
            for j in i..self.len - 1 {
                let next = self.array[j + 1].clone();
                self.array[j] = next;
            }
            self.len -= 1;
        }
    }

    /// `append(original, v)` into the backing array while it has room.
    fn append_at(&mut self, index: usize, v: &Value) {
        if let Some(slot) = self.array.get_mut(index) {
            *slot = v.clone();
        }
    }
}

/// `mergeSlice`. Returns the merged list and the original slice's backing array afterwards.
fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    schema: Schema,
    merge_key: &str,
    is_delete_list: bool,
) -> Result<(Vec<Value>, Vec<Value>)> {
    if original.is_empty() && patch.is_empty() {
        return Ok((original.clone(), original));
    }
    let elem = slice_element_type(&[&original, &patch])?;

    if elem != GoKind::Map {
        if is_delete_list {
            return Ok((delete_from_slice(&original, &patch), original));
        }
        // `both := append(original, patch...)`: with nothing to append it is the original array,
        // deduplicated in place.
        let (merged, view) = if patch.is_empty() {
            let mut array = original;
            let len = deduplicate_scalars(&mut array);
            (array.get(..len).unwrap_or(&[]).to_vec(), array)
        } else {
            let mut both = original.clone();
            both.extend(patch.iter().cloned());
            let len = deduplicate_scalars(&mut both);
            both.truncate(len);
            (both, original)
        };
        let (patch_items, server_only) = partition_primitives_by_present_in_list(merged, &patch);
        let out = normalize_element_order(patch_items, server_only, &patch, &view, merge_key, elem)?;
        return Ok((out, view));
    }

    if merge_key.is_empty() {
        return Err(SmpError::Other(format!("cannot merge lists without merge key for {}", schema.name())));
    }

    // mergeSliceWithSpecialElements
    let capacity = original.len();
    let mut view = OrderView::new(original);
    let mut plain_patch = Vec::new();
    let mut replace = false;
    for v in &patch {
        let Value::Object(m) = v else { return Err(err_bad_arg_type(MAP, v)) };
        match m.get(DIRECTIVE_MARKER) {
            None => plain_patch.push(v.clone()),
            Some(directive) => match directive.as_str() {
                Some(DELETE_DIRECTIVE) => {
                    let Some(merge_value) = m.get(merge_key) else {
                        return Err(err_no_merge_key(m, merge_key));
                    };
                    while let Some(i) =
                        find_map_in_slice_based_on_key_value(view.live(), merge_key, merge_value)?
                    {
                        view.remove(i);
                    }
                }
                Some(REPLACE_DIRECTIVE) => replace = true,
                Some(MERGE_DIRECTIVE) => {
                    return Err(SmpError::Other("merging lists cannot yet be specified in the patch".into()));
                }
                _ => return Err(err_bad_patch_type(directive, m)),
            },
        }
    }
    let (base, patch_list) =
        if replace { (plain_patch, Vec::new()) } else { (view.live().to_vec(), plain_patch) };

    // mergeSliceWithoutSpecialElements
    let mut merged = base.clone();
    for v in &patch_list {
        let Value::Object(pm) = v else { return Err(err_bad_arg_type(MAP, v)) };
        let Some(merge_value) = pm.get(merge_key) else {
            return Err(err_no_merge_key(pm, merge_key));
        };
        match find_map_in_slice_based_on_key_value(&merged, merge_key, merge_value)? {
            Some(i) => {
                let Some(Value::Object(om)) = merged.get_mut(i).map(Value::take) else {
                    return Err(SmpError::Other(format!("value for key {i} is not a map")));
                };
                let m = merge_map(om, pm.clone(), schema)?;
                if let Some(slot) = merged.get_mut(i) {
                    *slot = Value::Object(m);
                }
            }
            None => {
                if !replace && merged.len() < capacity {
                    view.append_at(merged.len(), v);
                }
                merged.push(v.clone());
            }
        }
    }

    let (patch_items, server_only) = partition_maps_by_present_in_list(merged, &patch_list, merge_key)?;
    let out = normalize_element_order(patch_items, server_only, &patch_list, &base, merge_key, elem)?;
    Ok((out, view.array))
}

fn find_map_in_slice_based_on_key_value(items: &[Value], key: &str, value: &Value) -> Result<Option<usize>> {
    for (i, item) in items.iter().enumerate() {
        let Value::Object(m) = item else {
            return Err(SmpError::Other(format!("value for key {i} is not a map")));
        };
        if m.get(key).is_some_and(|v| goval::eq(v, value)) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

fn delete_from_slice(current: &[Value], to_delete: &[Value]) -> Vec<Value> {
    current.iter().filter(|v| !to_delete.iter().any(|d| goval::eq(d, v))).cloned().collect()
}

/// Go's "clever" in-place deduplication; returns the new length.
fn deduplicate_scalars(s: &mut [Value]) -> usize {
    if s.is_empty() {
        return 0;
    }
    let mut length = s.len() - 1;
    let mut i = 0;
    while i < length {
        let mut j = i + 1;
        while j <= length {
            if goval::eq(&s[i], &s[j]) {
                s[j] = s[length].clone();
                length -= 1;
            } else {
                j += 1;
            }
        }
        i += 1;
    }
    length + 1
}

/// `sliceElementType`: the one dynamic type of all items, refusing lists of lists.
fn slice_element_type(lists: &[&[Value]]) -> Result<GoKind> {
    let mut prev: Option<GoKind> = None;
    for list in lists {
        for v in list.iter() {
            let current = goval::kind(v);
            match prev {
                None => {
                    if current == GoKind::Slice {
                        return Err(SmpError::NoListOfLists);
                    }
                    if current == GoKind::Nil {
                        // reflect.TypeOf(nil).Kind() panics in Go.
                        return Err(SmpError::Other("list contains a null item".into()));
                    }
                    prev = Some(current);
                }
                Some(p) if p != current => {
                    let rendered: Vec<String> =
                        lists.iter().map(|l| goval::fmt(&Value::Array(l.to_vec()))).collect();
                    return Err(SmpError::Other(format!(
                        "list element types are not identical: [{}]",
                        rendered.join(" ")
                    )));
                }
                Some(_) => {}
            }
        }
    }
    prev.ok_or_else(|| SmpError::Other("no elements in any of the given slices".into()))
}

fn merge_key_value_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool> {
    if merge_key.is_empty() {
        return Ok(goval::eq(left, right));
    }
    let Value::Object(l) = left else { return Err(err_bad_arg_type(MAP, left)) };
    let Value::Object(r) = right else { return Err(err_bad_arg_type(MAP, right)) };
    let Some(lv) = l.get(merge_key) else { return Err(err_no_merge_key(l, merge_key)) };
    let Some(rv) = r.get(merge_key) else { return Err(err_no_merge_key(r, merge_key)) };
    Ok(goval::eq(lv, rv))
}

/// `validatePatchWithSetOrderList`: the patch list must follow the `$setElementOrder` order.
fn validate_patch_with_set_order_list(
    patch_list: &[Value],
    set_order: &[Value],
    merge_key: &str,
) -> Result<()> {
    if set_order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let non_delete = if merge_key.is_empty() {
        patch_list.to_vec()
    } else {
        extract_to_delete_items(patch_list.to_vec())?.0
    };
    let (mut p, mut s) = (0, 0);
    while p < non_delete.len() && s < set_order.len() {
        if non_delete[p].as_object().is_some_and(|m| m.contains_key(DIRECTIVE_MARKER)) {
            p += 1;
            continue;
        }
        if merge_key_value_equal(&non_delete[p], &set_order[s], merge_key)? {
            p += 1;
        }
        s += 1;
    }
    if p < non_delete.len() && s >= set_order.len() {
        return Err(SmpError::Other(format!(
            "the order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER_PREFIX} list:\n{}",
            goval::fmt(&Value::Array(patch_list.to_vec())),
            goval::fmt(&Value::Array(set_order.to_vec()))
        )));
    }
    Ok(())
}

fn partition_primitives_by_present_in_list(items: Vec<Value>, by: &[Value]) -> (Vec<Value>, Vec<Value>) {
    items.into_iter().partition(|v| by.iter().any(|b| goval::eq(b, v)))
}

fn partition_maps_by_present_in_list(
    items: Vec<Value>,
    by: &[Value],
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let (mut patch, mut server_only) = (Vec::new(), Vec::new());
    for v in items {
        let Value::Object(m) = &v else { return Err(err_bad_arg_type(MAP, &v)) };
        let Some(merge_value) = m.get(merge_key) else { return Err(err_no_merge_key(m, merge_key)) };
        if find_map_in_slice_based_on_key_value(by, merge_key, merge_value)?.is_some() {
            patch.push(v);
        } else {
            server_only.push(v);
        }
    }
    Ok((patch, server_only))
}

/// `normalizeElementOrder`: sort the patch items by `patch_order`, the server-only items by
/// `server_order`, then interleave them.
fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    elem: GoKind,
) -> Result<Vec<Value>> {
    let patch = normalize_slice_order(patch, patch_order, merge_key, elem)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, elem)?;
    Ok(merge_sorted_slice(server_only, patch, server_order, merge_key, elem))
}

/// `index`: position of `v` in `list`, matching maps by merge key.
fn index(list: &[Value], v: &Value, merge_key: &str, elem: GoKind) -> Option<usize> {
    let key_of = |item: &Value| -> Value {
        if elem == GoKind::Map {
            item.as_object().and_then(|m| m.get(merge_key)).cloned().unwrap_or(Value::Null)
        } else {
            item.clone()
        }
    };
    let wanted = key_of(v);
    list.iter().position(|item| goval::eq(&wanted, &key_of(item)))
}

fn merge_sorted_slice(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    merge_key: &str,
    elem: GoKind,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    while let (Some(l), Some(r)) = (left.peek(), right.peek()) {
        let li = index(server_order, l, merge_key, elem);
        let ri = index(server_order, r, merge_key, elem);
        let take_left = matches!((li, ri), (Some(li), Some(ri)) if li < ri);
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out.extend(left);
    out.extend(right);
    out
}

fn extract_to_delete_items(items: Vec<Value>) -> Result<(Vec<Value>, Vec<Value>)> {
    let (mut keep, mut delete) = (Vec::new(), Vec::new());
    for v in items {
        let Value::Object(m) = &v else { return Err(err_bad_arg_type(MAP, &v)) };
        if m.get(DIRECTIVE_MARKER).and_then(Value::as_str) == Some(DELETE_DIRECTIVE) {
            delete.push(v);
        } else {
            keep.push(v);
        }
    }
    Ok((keep, delete))
}

/// `normalizeSliceOrder`: stable-sort `to_sort` by position in `order` (Go's `sort.SliceStable`
/// with its comparator, which calls an item missing from `order` "less"), `$patch: delete` items last.
fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    elem: GoKind,
) -> Result<Vec<Value>> {
    let (mut to_sort, to_delete) = if elem == GoKind::Map {
        for item in to_sort.iter().chain(order.iter()) {
            let Value::Object(m) = item else { return Err(err_bad_arg_type(MAP, item)) };
            if !m.contains_key(merge_key) {
                return Err(err_no_merge_key(m, merge_key));
            }
        }
        extract_to_delete_items(to_sort)?
    } else {
        (to_sort, Vec::new())
    };
    let positions: Vec<Option<usize>> = to_sort.iter().map(|v| index(order, v, merge_key, elem)).collect();
    let mut idx: Vec<usize> = (0..to_sort.len()).collect();
    go_sort_slice_stable(&mut idx, |a, b| match (positions[*a], positions[*b]) {
        (Some(pa), Some(pb)) => pa < pb,
        _ => true,
    });
    let mut slots: Vec<Option<Value>> = to_sort.drain(..).map(Some).collect();
    let mut out: Vec<Value> =
        idx.into_iter().filter_map(|i| slots.get_mut(i).and_then(Option::take)).collect();
    out.extend(to_delete);
    Ok(out)
}

/// Go's `sort.SliceStable` (insertion sort on blocks of 20, then SymMerge), so that even an
/// inconsistent comparator orders items as Go would.
fn go_sort_slice_stable<T>(data: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let n = data.len();
    let lt = |d: &[T], i: usize, j: usize| less(&d[i], &d[j]);
    let insertion_sort = |d: &mut [T], a: usize, b: usize| {
        for i in a + 1..b {
            let mut j = i;
            while j > a && lt(d, j, j - 1) {
                d.swap(j, j - 1);
                j -= 1;
            }
        }
    };
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        insertion_sort(data, a, b);
        a = b;
        b += block;
    }
    insertion_sort(data, a, n);
    while block < n {
        a = 0;
        b = 2 * block;
        while b <= n {
            sym_merge(data, a, a + block, b, &lt);
            a = b;
            b += 2 * block;
        }
        let m = a + block;
        if m < n {
            sym_merge(data, a, m, n, &lt);
        }
        block *= 2;
    }
}

fn sym_merge<T>(data: &mut [T], a: usize, m: usize, b: usize, lt: &impl Fn(&[T], usize, usize) -> bool) {
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if lt(data, h, a) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        for k in a..i.saturating_sub(1) {
            data.swap(k, k + 1);
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !lt(data, m, h) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            data.swap(k, k - 1);
            k -= 1;
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !lt(data, p - c, c) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        rotate(data, start, m, end);
    }
    if a < start && start < mid {
        sym_merge(data, a, start, mid, lt);
    }
    if mid < end && end < b {
        sym_merge(data, mid, end, b, lt);
    }
}

/// Go's `rotate` (block swaps): swaps the blocks data[a:m] and data[m:b].
fn rotate<T>(data: &mut [T], a: usize, m: usize, b: usize) {
    let (mut i, mut j) = (m - a, b - m);
    let swap_range = |d: &mut [T], a: usize, b: usize, n: usize| {
        for k in 0..n {
            d.swap(a + k, b + k);
        }
    };
    while i != j {
        if i > j {
            swap_range(data, m - i, m, j);
            i -= j;
        } else {
            swap_range(data, m - i, m + j - i, i);
            j -= i;
        }
    }
    swap_range(data, m - i, m, i);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_stable_sort_matches_a_stable_sort_for_consistent_comparators() {
        // Deterministic pseudo-random keys with many ties, lengths across the 20-item block size.
        let mut seed: u64 = 0x9e3779b97f4a7c15;
        for n in [0, 1, 2, 19, 20, 21, 39, 40, 41, 64, 100, 257] {
            let mut items: Vec<(u64, usize)> = (0..n)
                .map(|i| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed % 7, i)
                })
                .collect();
            let mut expected = items.clone();
            expected.sort_by_key(|(k, _)| *k);
            go_sort_slice_stable(&mut items, |a, b| a.0 < b.0);
            assert_eq!(items, expected, "n={n}");
        }
    }

    #[test]
    fn go_stable_sort_with_go_comparator_moves_unknown_items_first() {
        // normalizeSliceOrder's comparator: an item missing from the order list is "less".
        let order = [Some(1), None, Some(0)];
        let mut idx = vec![0usize, 1, 2];
        go_sort_slice_stable(&mut idx, |a, b| match (order[*a], order[*b]) {
            (Some(x), Some(y)) => x < y,
            _ => true,
        });
        // Go: insertion sort: [0,1,2] → 1<0? true → [1,0,2]; 2<0? (0 vs 1) true → [1,2,0];
        // then 2<1? unknown → true → [2,1,0].
        assert_eq!(idx, vec![2, 1, 0]);
    }

    #[test]
    fn deduplicate_scalars_like_go() {
        let mut s: Vec<Value> = [1, 2, 1, 3, 2].iter().map(|n| Value::from(*n)).collect();
        let len = deduplicate_scalars(&mut s);
        // i=0: j=2 matches → s[2]=s[4]=2 → [1,2,2,3]; i=1: j=2 matches → s[2]=s[3]=3 → [1,2,3]
        assert_eq!(&s[..len], &[Value::from(1), Value::from(2), Value::from(3)]);
    }

    #[test]
    fn retain_keys_strategy_parsing() {
        assert_eq!(extract_retain_keys_patch_strategy("").unwrap(), (false, ""));
        assert_eq!(extract_retain_keys_patch_strategy("merge").unwrap(), (false, "merge"));
        assert_eq!(extract_retain_keys_patch_strategy("retainKeys").unwrap(), (true, ""));
        assert_eq!(extract_retain_keys_patch_strategy("merge,retainKeys").unwrap(), (true, "merge"));
        assert!(extract_retain_keys_patch_strategy("merge,replace").is_err());
    }
}
