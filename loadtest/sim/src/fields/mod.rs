//! Fields as kube-apiserver's decoders treat them: unknown fields dropped, warned about or
//! rejected per `fieldValidation` (Ignore, Warn, Strict), duplicate JSON keys reported, nulls
//! dropped where the typed object has no place for them.
//!
//! Built-in kinds go through a typed round trip over their k8s-openapi structs (`typed.rs`);
//! what the round trip loses is unknown. Messages and their order follow sigs.k8s.io/json's
//! strict decoding as test/integration/apiserver/field_validation_test.go pins them.

pub mod json_keys;
pub mod typed;

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
/// in the result) and null members. `None` when the kind is not typed here (custom resources);
/// `Err` with the decoder's message when the object does not decode (a wrong type somewhere).
/// `obj` must carry its `apiVersion` and `kind`.
pub fn prune_unknown(obj: &mut Value, order: Order) -> Option<Result<Dropped, String>> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str)?;
    let kind = obj.get("kind").and_then(Value::as_str)?;
    let round_trip = typed::round_trip_for(api_version, kind)?;
    Some(round_trip(obj).map(|typed| {
        let mut dropped = Dropped::default();
        let mut path = String::new();
        walk(obj, &typed, &mut path, order, &mut dropped.unknown);
        dropped
    }))
}

fn walk(obj: &mut Value, typed: &Value, path: &mut String, order: Order, unknown: &mut Vec<String>) {
    match (obj, typed) {
        (Value::Object(o), Value::Object(t)) => {
            let mut keys: Vec<String> = o.keys().cloned().collect();
            if order == Order::Sorted {
                keys.sort();
            }
            for k in keys {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&k);
                match t.get(&k) {
                    Some(tv) => {
                        if let Some(v) = o.get_mut(&k) {
                            walk(v, tv, path, order, unknown);
                        }
                    }
                    None => {
                        if o.get(&k).is_some_and(|v| !v.is_null()) {
                            unknown.push(path.clone());
                        }
                        o.shift_remove(&k);
                    }
                }
                path.truncate(len);
            }
        }
        (Value::Array(o), Value::Array(t)) => {
            for (i, (v, tv)) in o.iter_mut().zip(t).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(v, tv, path, order, unknown);
                path.truncate(len);
            }
        }
        _ => {}
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
