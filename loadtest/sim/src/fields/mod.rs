//! Fields as kube-apiserver's decoders treat them: unknown fields dropped, warned about or
//! rejected per `fieldValidation` (Ignore, Warn, Strict), duplicate JSON keys reported, nulls
//! dropped where the typed object has no place for them.
//!
//! Built-in kinds go through a typed round trip over their k8s-openapi structs (`typed.rs`);
//! what the round trip loses is unknown. Messages and their order follow sigs.k8s.io/json's
//! strict decoding as test/integration/apiserver/field_validation_test.go pins them.

pub mod json_keys;
mod schema_check;
pub mod typed;

use std::collections::HashMap;

use serde_json::Value;

pub use json_keys::KeyEvent;

/// The `fieldValidation` query parameter of create, update and patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop them with a `Warning` header each; the default since 1.23 (handlers/rest.go
    /// `fieldValidation("")`).
    #[default]
    Warn,
    /// Reject the request.
    Strict,
}

impl FieldValidation {
    /// Parses the parameter; `Err` holds the field error text of upstream's
    /// `ValidateFieldValidation` (the caller wraps it in `{Create,Update,Patch}Options`).
    pub fn parse(value: Option<&str>) -> Result<Self, String> {
        match value.unwrap_or("") {
            "" | "Warn" => Ok(Self::Warn),
            "Ignore" => Ok(Self::Ignore),
            "Strict" => Ok(Self::Strict),
            other => Err(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
            )),
        }
    }
}

/// The order unknown fields are reported in: a JSON body's own order, or sorted keys (YAML
/// bodies and patched documents, which upstream re-encodes from Go maps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Document,
    Sorted,
}

/// What the typed decode of an object drops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Paths of unknown fields (`spec.template.spec.containers[0].bogus`), in report order.
    pub unknown: Vec<String>,
}

/// Removes from `obj` what decoding it into its k8s-openapi type drops: unknown fields (listed
/// in the result) and null members; and what encoding the Go struct back omits: empty maps and
/// empty optional lists (`omitempty`: `labels: {}`, `finalizers: []`). `None` when the kind is
/// not typed here (custom resources); `Err` with the decoder's message when the object does not
/// decode (a wrong type somewhere), and then `obj` is left unchanged. `obj` must carry its
/// `apiVersion` and `kind`.
pub fn prune_unknown(obj: &mut Value, order: Order) -> Option<Result<Dropped, String>> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str)?.to_string();
    let kind = obj.get("kind").and_then(Value::as_str)?.to_string();
    let round_trip = typed::round_trip_for(&api_version, &kind)?;
    if !keeps_empties(&kind)
        && let Some(empties) = schema_check::clean_empties(obj, &api_version, &kind)
    {
        // Nothing to drop but what Go's encoder omits; the typed round trip is not needed.
        drop_omitted_empties(obj, empties, (&api_version, &kind), round_trip);
        return Some(Ok(Dropped::default()));
    }
    Some(prune_typed(obj, order, (&api_version, &kind), round_trip))
}

/// Whether decoding `obj` into `kind`'s type and encoding it back keeps it as it is: every
/// member known and of its field's type, none empty (`omitempty`); false when unsure. Members may
/// be partial (a patch): only what is there is checked.
pub fn kept_as_is(obj: &Value, api_version: &str, kind: &str) -> bool {
    schema_check::clean_empties(obj, api_version, kind).is_some_and(|empties| empties.is_empty())
}

/// [`prune_unknown`] by the typed round trip alone: the reference the schema walk must agree with.
fn prune_typed(
    obj: &mut Value,
    order: Order,
    (api_version, kind): (&str, &str),
    round_trip: typed::RoundTrip,
) -> Result<Dropped, String> {
    round_trip(obj).map(|typed| {
        let mut dropped = Dropped::default();
        let mut walker = Walker { order, path: String::new(), segments: Vec::new(), empties: Vec::new() };
        walker.walk(obj, &typed, &mut dropped.unknown);
        if !keeps_empties(kind) {
            drop_omitted_empties(obj, std::mem::take(&mut walker.empties), (api_version, kind), round_trip);
        }
        dropped
    })
}

/// A CRD's schema is free-form JSON (`default: {}` means something): its empties stay as sent.
fn keeps_empties(kind: &str) -> bool {
    kind == "CustomResourceDefinition"
}

/// One step of a path into a JSON document.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

fn pointer_mut<'a>(v: &'a mut Value, path: &[Segment]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, s| match s {
        Segment::Key(k) => v.get_mut(k.as_str()),
        Segment::Index(i) => v.get_mut(*i),
    })
}

fn pointer<'a>(v: &'a Value, path: &[Segment]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, s| match s {
        Segment::Key(k) => v.get(k.as_str()),
        Segment::Index(i) => v.get(*i),
    })
}

/// A key no Kubernetes type has, to tell a map (which keeps it) from a struct (which drops it).
const PROBE_KEY: &str = "\u{0}omitempty-probe";

/// Whether an empty value at a place of a kind's schema is omitted, by `(apiVersion/kind,
/// place)`; a place is a path with list indices left out, since the type there does not depend on
/// them. What [`drop_omitted_empties`] learns by a round trip is asked once per place.
static OMITTED_AT: std::sync::LazyLock<parking_lot::RwLock<HashMap<String, bool>>> =
    std::sync::LazyLock::new(Default::default);

/// Places remembered at most; beyond it a place is learned again each time (still right).
const OMITTED_AT_CAPACITY: usize = 16_384;

fn place(kind: (&str, &str), path: &[Segment], array: bool) -> String {
    let mut out = format!("{}/{}", kind.0, kind.1);
    for s in path {
        match s {
            Segment::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Segment::Index(_) => out.push_str("[]"),
        }
    }
    out.push_str(if array { "=[]" } else { "={}" });
    out
}

/// Drops the empty objects and lists (found at `empties`, object members all) that Go's encoder
/// omits: maps (`omitempty` on every map field of the API) and lists that are optional. One more
/// round trip tells them apart from empty structs (`emptyDir: {}`, kept) and required lists
/// (`containers: []`, kept): in a copy, each empty list is removed and each empty object gets a
/// probe key; a list that does not come back was optional, an object that keeps the probe is a map.
/// The answer depends only on the place in the kind's schema, so it is remembered per place and
/// the round trip runs only for places not seen before.
fn drop_omitted_empties(
    obj: &mut Value,
    empties: Vec<Vec<Segment>>,
    kind: (&str, &str),
    round_trip: typed::RoundTrip,
) {
    if empties.is_empty() {
        return;
    }
    let places: Vec<String> = empties
        .iter()
        .map(|path| place(kind, path, pointer(obj, path).is_some_and(Value::is_array)))
        .collect();
    let mut omitted: Vec<Option<bool>> = {
        let known = OMITTED_AT.read();
        places.iter().map(|p| known.get(p).copied()).collect()
    };
    if omitted.iter().any(Option::is_none) {
        learn_omitted(obj, &empties, &mut omitted, round_trip);
        let mut known = OMITTED_AT.write();
        for (place, omitted) in places.into_iter().zip(&omitted) {
            if let Some(omitted) = omitted
                && known.len() < OMITTED_AT_CAPACITY
            {
                known.insert(place, *omitted);
            }
        }
    }
    // Deepest first, so removing a list does not shift a path still to visit.
    for (path, omitted) in empties.iter().zip(omitted).rev() {
        let Some((Segment::Key(last), parent_path)) = path.split_last() else { continue };
        if omitted == Some(true)
            && let Some(Value::Object(parent)) = pointer_mut(obj, parent_path)
        {
            parent.shift_remove(last);
        }
    }
}

/// Fills the unknown answers of `omitted` by the probe round trip.
fn learn_omitted(
    obj: &Value,
    empties: &[Vec<Segment>],
    omitted: &mut [Option<bool>],
    round_trip: typed::RoundTrip,
) {
    let mut probe = obj.clone();
    // Deepest first, so removing a list does not shift a path still to visit.
    for (path, _) in empties.iter().zip(omitted.iter()).rev().filter(|(_, o)| o.is_none()) {
        let (Some((Segment::Key(last), parent)), Some(value)) = (path.split_last(), pointer(obj, path))
        else {
            continue;
        };
        let Some(Value::Object(parent)) = pointer_mut(&mut probe, parent) else { continue };
        if value.is_array() {
            parent.shift_remove(last);
        } else if let Some(Value::Object(m)) = parent.get_mut(last) {
            m.insert(PROBE_KEY.to_string(), Value::String(String::new()));
        }
    }
    let Ok(typed) = round_trip(&probe) else { return };
    for (path, answer) in empties.iter().zip(omitted.iter_mut()).filter(|(_, o)| o.is_none()) {
        *answer = Some(match pointer(obj, path) {
            Some(Value::Array(_)) => pointer(&typed, path).is_none(),
            Some(Value::Object(_)) => pointer(&typed, path).and_then(|v| v.get(PROBE_KEY)).is_some(),
            _ => false,
        });
    }
}

struct Walker {
    order: Order,
    path: String,
    segments: Vec<Segment>,
    /// Empty objects and lists of known fields, in document order.
    empties: Vec<Vec<Segment>>,
}

impl Walker {
    fn walk(&mut self, obj: &mut Value, typed: &Value, unknown: &mut Vec<String>) {
        match (obj, typed) {
            (Value::Object(o), Value::Object(t)) => {
                let mut keys: Vec<String> = o.keys().cloned().collect();
                if self.order == Order::Sorted {
                    keys.sort();
                }
                for k in keys {
                    let len = self.path.len();
                    if !self.path.is_empty() {
                        self.path.push('.');
                    }
                    self.path.push_str(&k);
                    self.segments.push(Segment::Key(k.clone()));
                    match (t.get(&k), o.get_mut(&k)) {
                        (Some(tv), Some(v)) => {
                            let empty = match v {
                                Value::Object(m) => m.is_empty(),
                                Value::Array(a) => a.is_empty(),
                                _ => false,
                            };
                            // managedFields' fieldsV1 is free-form: `{}` there is a value.
                            let free_form = self.path.starts_with("metadata.managedFields");
                            if empty && !free_form {
                                self.empties.push(self.segments.clone());
                            }
                            self.walk(v, tv, unknown);
                        }
                        (None, v) => {
                            if v.is_some_and(|v| !v.is_null()) {
                                unknown.push(self.path.clone());
                            }
                            o.shift_remove(&k);
                        }
                        (Some(_), None) => {}
                    }
                    self.segments.pop();
                    self.path.truncate(len);
                }
            }
            (Value::Array(o), Value::Array(t)) => {
                for (i, (v, tv)) in o.iter_mut().zip(t).enumerate() {
                    let len = self.path.len();
                    self.path.push_str(&format!("[{i}]"));
                    self.segments.push(Segment::Index(i));
                    self.walk(v, tv, unknown);
                    self.segments.pop();
                    self.path.truncate(len);
                }
            }
            _ => {}
        }
    }
}

/// The strict decoding issues of a JSON body in kube-apiserver's order: each key as the decoder
/// meets it, `unknown field` at an unknown key's first occurrence, `duplicate field` at a known
/// key's repeat (keys under an unknown field are skipped, as Go skips the value).
pub fn issues_in_document_order(events: &[KeyEvent], unknown: &[String]) -> Vec<String> {
    let under_unknown = |path: &str| {
        unknown.iter().any(|u| {
            path.strip_prefix(u.as_str()).is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
    };
    let mut reported = std::collections::HashSet::new();
    let mut out = Vec::new();
    for e in events {
        if under_unknown(&e.path) {
            continue;
        }
        if unknown.contains(&e.path) {
            if reported.insert(e.path.as_str()) {
                out.push(unknown_field(&e.path));
            }
        } else if e.duplicate {
            out.push(duplicate_field(&e.path));
        }
    }
    // Unknown fields whose keys the events do not cover (a body decoded without them).
    for u in unknown {
        if !reported.contains(u.as_str()) && !events.iter().any(|e| e.path == *u) {
            out.push(unknown_field(u));
        }
    }
    out
}

/// `unknown field "spec.bogus"`.
pub fn unknown_field(path: &str) -> String {
    format!("unknown field \"{path}\"")
}

/// `duplicate field "spec.paused"`.
pub fn duplicate_field(path: &str) -> String {
    format!("duplicate field \"{path}\"")
}

/// `strict decoding error: a, b` (runtime.NewStrictDecodingError).
pub fn strict_decoding_error(issues: &[String]) -> String {
    format!("strict decoding error: {}", issues.join(", "))
}

#[cfg(test)]
#[path = "schema_check_tests.rs"]
mod schema_check_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The Deployment body of test/integration/apiserver/field_validation_test.go
    /// (`invalidBodyJSON`) and the strict error `testFieldValidationPost` expects.
    #[test]
    fn field_validation_post_strict_message() {
        let body = br#"{
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "dupename", "name": "d", "labels": {"app": "nginx"}, "unknownMeta": "metaVal"},
            "spec": {
                "unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2",
                "paused": true, "paused": false,
                "selector": {"matchLabels": {"app": "nginx"}},
                "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [{
                    "name": "nginx", "image": "nginx:latest", "unknownNested": "val1",
                    "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}
            }
        }"#;
        let (mut obj, events) = json_keys::parse(body).unwrap();
        let dropped = prune_unknown(&mut obj, Order::Document).unwrap().unwrap();
        let issues = issues_in_document_order(&events, &dropped.unknown);
        assert_eq!(
            strict_decoding_error(&issues),
            "strict decoding error: duplicate field \"metadata.name\", unknown field \"metadata.unknownMeta\", \
             unknown field \"spec.unknown1\", unknown field \"spec.unknownDupe\", duplicate field \"spec.paused\", \
             unknown field \"spec.template.spec.containers[0].unknownNested\", \
             duplicate field \"spec.template.spec.containers[0].imagePullPolicy\""
        );
        assert_eq!(obj["metadata"], json!({"name": "d", "labels": {"app": "nginx"}}));
        assert_eq!(obj["spec"]["paused"], false);
        assert!(obj["spec"].get("unknown1").is_none());
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"][0],
            json!({"name": "nginx", "image": "nginx:latest", "imagePullPolicy": "Never"})
        );
    }

    /// Patched documents are reported in sorted key order (`testFieldValidationPatchTyped`).
    #[test]
    fn sorted_order_for_patched_documents() {
        let mut obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"unknownDupe": "x", "unknown1": "y", "template": {"spec": {"containers": [
                {"name": "c", "unknownNested": 1}]}}}
        });
        let dropped = prune_unknown(&mut obj, Order::Sorted).unwrap().unwrap();
        assert_eq!(
            dropped.unknown,
            ["spec.template.spec.containers[0].unknownNested", "spec.unknown1", "spec.unknownDupe"]
        );
    }

    #[test]
    fn known_nulls_and_free_form_values_survive_as_upstream_decodes_them() {
        let mut obj = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": null, "annotations": {"a": "b"}},
            "data": {"k": "v"}, "bogus": null
        });
        let dropped = prune_unknown(&mut obj, Order::Document).unwrap().unwrap();
        assert!(dropped.unknown.is_empty(), "a null unknown field is dropped without a report");
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {"a": "b"}}, "data": {"k": "v"}})
        );
        // A CRD's schema is free-form JSON: nothing in it is unknown.
        let mut crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "ws.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "ws", "kind": "W"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"spec": {"type": "object", "default": {"a": null}}}}}}]}
        });
        let before = crd.clone();
        assert!(prune_unknown(&mut crd, Order::Document).unwrap().unwrap().unknown.is_empty());
        assert_eq!(crd, before);
    }

    /// Go's encoder omits empty maps and empty optional lists (`omitempty`), never empty structs
    /// or required lists.
    #[test]
    fn empty_maps_and_optional_lists_are_omitted() {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": []},
            "spec": {
                "containers": [{"name": "c", "image": "i", "env": [], "resources": {"limits": {}},
                    "securityContext": {}}],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "nodeSelector": {}, "tolerations": []
            },
            "status": {}
        });
        let dropped = prune_unknown(&mut pod, Order::Document).unwrap().unwrap();
        assert!(dropped.unknown.is_empty());
        assert_eq!(
            pod,
            json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {
                    "containers": [{"name": "c", "image": "i", "resources": {}, "securityContext": {}}],
                    "volumes": [{"name": "v", "emptyDir": {}}]
                },
                "status": {}
            })
        );
        // A required list stays, even empty (validation reports it).
        let mut job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"template": {"spec": {"containers": []}}}});
        prune_unknown(&mut job, Order::Document).unwrap().unwrap();
        assert_eq!(job["spec"]["template"]["spec"]["containers"], json!([]));
        // managedFields entries keep an empty fieldsV1.
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c",
            "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {}}]}});
        prune_unknown(&mut cm, Order::Document).unwrap().unwrap();
        assert_eq!(cm["metadata"]["managedFields"][0]["fieldsV1"], json!({}));
    }

    #[test]
    fn untyped_kinds_and_wrong_types() {
        let mut cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"x": 1}});
        assert!(prune_unknown(&mut cr, Order::Document).is_none());
        let mut bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": 5}});
        assert!(prune_unknown(&mut bad, Order::Document).unwrap().is_err());
    }

    /// Every kind in the table decodes a minimal object of its own (catches a wrong type in the
    /// table, which would make every write of that kind fail).
    #[test]
    fn every_typed_kind_round_trips_a_minimal_object() {
        for (api_version, kind) in typed::TYPED_KINDS {
            let mut obj = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
            let dropped = prune_unknown(&mut obj, Order::Document).unwrap();
            assert_eq!(dropped, Ok(Dropped::default()), "{api_version} {kind}");
        }
    }

    #[test]
    fn field_validation_values() {
        assert_eq!(FieldValidation::parse(None), Ok(FieldValidation::Warn));
        assert_eq!(FieldValidation::parse(Some("Strict")), Ok(FieldValidation::Strict));
        assert_eq!(FieldValidation::parse(Some("Ignore")), Ok(FieldValidation::Ignore));
        assert_eq!(
            FieldValidation::parse(Some("strict")).unwrap_err(),
            "fieldValidation: Unsupported value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
        );
    }
}
