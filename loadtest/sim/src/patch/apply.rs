//! A light server-side apply (`application/apply-patch+yaml`): an upsert that merges the applied
//! configuration into the live object by the list keys of the SSA schema, and records the
//! manager's `Apply` entry in `metadata.managedFields`.
//!
//! Left out: conflicts between managers, and removing fields the manager applied before but no
//! longer does (structured-merge-diff's ownership bookkeeping).

use serde_json::{Map, Value, json};

use super::error::PatchError;
use super::schema::{FieldDef, Schema, SchemaKind, SsaKeys, SsaList};

/// Fields structured-merge-diff never records in managedFields (fieldmanager `stripmeta.go`).
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

/// Applies `applied` (the decoded apply-patch body) for `field_manager`. With no live object the
/// result is the applied object (the caller then creates it: HTTP 201). `now_rfc3339` stamps the
/// managedFields entry.
pub fn apply_server_side(
    live: Option<&Value>,
    applied: &Value,
    kind: Option<&SchemaKind>,
    field_manager: &str,
    now_rfc3339: &str,
) -> Result<Value, PatchError> {
    if field_manager.is_empty() {
        // validation.ValidatePatchOptions, reported as an Invalid PatchOptions.
        let detail = "fieldManager: Required value: is required for apply patch";
        return Err(PatchError::Invalid {
            message: format!("PatchOptions.meta.k8s.io \"\" is invalid: {detail}"),
            detail: detail.into(),
        });
    }
    let Value::Object(applied_map) = applied else {
        return Err(PatchError::BadRequest(format!(
            "error decoding YAML: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            super::goval::json_kind_name(applied)
        )));
    };
    let api_version = applied_map.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if let Some(kind) = kind
        && api_version != kind.api_version()
    {
        return Err(PatchError::BadRequest(format!(
            "Incorrect version specified in apply patch. Specified patch version: {api_version}, expected: {}",
            kind.api_version()
        )));
    }
    let managed = applied_map.get("metadata").and_then(|m| m.get("managedFields"));
    if managed.is_some_and(|m| !m.is_null()) {
        return Err(PatchError::BadRequest("metadata.managedFields must be nil".into()));
    }
    let schema = kind.map_or(Schema::OPAQUE, SchemaKind::schema);

    let mut result = match live {
        Some(live) => merge(live.clone(), applied.clone(), schema, None),
        None => without_nulls(applied.clone()),
    };
    let entry = json!({
        "manager": field_manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": now_rfc3339,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1(applied_map, schema),
    });
    set_managed_fields(&mut result, field_manager, entry);
    Ok(result)
}

fn without_nulls(mut v: Value) -> Value {
    fn prune(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|_, v| !v.is_null());
                m.values_mut().for_each(prune);
            }
            Value::Array(items) => items.iter_mut().for_each(prune),
            _ => {}
        }
    }
    prune(&mut v);
    v
}

fn ssa_list(field: Option<&FieldDef>) -> SsaList {
    field.map_or(SsaList::Atomic, FieldDef::ssa_list)
}

fn atomic_struct(field: Option<&FieldDef>) -> bool {
    field.is_some_and(|f| f.ssa == super::schema::Ssa::AtomicStruct)
}

/// Merges `applied` into `live`: maps field by field (null removes), associative lists by key,
/// sets by value, everything else replaced.
fn merge(live: Value, applied: Value, schema: Schema, field: Option<&FieldDef>) -> Value {
    match (live, applied) {
        (Value::Object(mut l), Value::Object(a)) if !atomic_struct(field) => {
            for (k, av) in a {
                if av.is_null() {
                    l.shift_remove(&k);
                    continue;
                }
                let f = schema.field(&k);
                let (sub, ..) = schema.lookup(&k);
                match l.get_mut(&k) {
                    Some(lv) => {
                        let merged = merge(lv.take(), av, sub, f);
                        *lv = merged;
                    }
                    None => {
                        l.insert(k, without_nulls(av));
                    }
                }
            }
            Value::Object(l)
        }
        (Value::Array(l), Value::Array(a)) => match ssa_list(field) {
            SsaList::Map(keys) if l.iter().chain(a.iter()).all(Value::is_object) => {
                merge_associative(l, a, keys, schema)
            }
            SsaList::Set => {
                let mut out = l;
                for v in a {
                    if !out.contains(&v) {
                        out.push(v);
                    }
                }
                Value::Array(out)
            }
            _ => without_nulls(Value::Array(a)),
        },
        (_, a) => without_nulls(a),
    }
}

/// The key of an associative-list item (`protocol` defaults to TCP, as in the SSA schema).
fn item_key(item: &Value, keys: SsaKeys) -> Map<String, Value> {
    keys.iter()
        .filter_map(|k| match item.get(k) {
            Some(v) if !v.is_null() => Some((k.to_string(), v.clone())),
            _ if k == "protocol" => Some((k.to_string(), Value::from("TCP"))),
            _ => None,
        })
        .collect()
}

fn merge_associative(live: Vec<Value>, applied: Vec<Value>, keys: SsaKeys, item_schema: Schema) -> Value {
    let mut out = live;
    for a in applied {
        let key = item_key(&a, keys);
        match out.iter().position(|l| item_key(l, keys) == key) {
            Some(i) => {
                if let Some(slot) = out.get_mut(i) {
                    let merged = merge(slot.take(), a, item_schema, None);
                    *slot = merged;
                }
            }
            None => out.push(without_nulls(a)),
        }
    }
    Value::Array(out)
}

/// A best-effort FieldsV1 rendering of the applied field set (`f:` fields, `k:` associative list
/// items with a `.` member, `v:` set members).
fn fields_v1(applied: &Map<String, Value>, schema: Schema) -> Value {
    let mut out = Map::new();
    for (k, v) in applied {
        if v.is_null() || STRIPPED_ROOT.contains(&k.as_str()) {
            continue;
        }
        if k == "metadata"
            && let Value::Object(meta) = v
        {
            let kept: Map<String, Value> = meta
                .iter()
                .filter(|(k, _)| !STRIPPED_METADATA.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if kept.is_empty() && !meta.is_empty() {
                continue;
            }
            let (sub, ..) = schema.lookup(k);
            out.insert(format!("f:{k}"), object_fields(&kept, sub));
            continue;
        }
        out.insert(format!("f:{k}"), value_fields(v, schema, k));
    }
    Value::Object(out)
}

fn object_fields(obj: &Map<String, Value>, schema: Schema) -> Value {
    let mut out = Map::new();
    for (k, v) in obj {
        if !v.is_null() {
            out.insert(format!("f:{k}"), value_fields(v, schema, k));
        }
    }
    Value::Object(out)
}

/// The field set below field `name` of a value of type `parent`.
fn value_fields(v: &Value, parent: Schema, name: &str) -> Value {
    let field = parent.field(name);
    let (sub, ..) = parent.lookup(name);
    match v {
        Value::Object(m) if !atomic_struct(field) => object_fields(m, sub),
        Value::Array(items) => match ssa_list(field) {
            SsaList::Map(keys) if items.iter().all(Value::is_object) => {
                let mut out = Map::new();
                for item in items {
                    let key = sort_keys(item_key(item, keys));
                    let mut fields = Map::new();
                    fields.insert(".".into(), json!({}));
                    if let Value::Object(m) = object_fields(item.as_object().unwrap_or(&Map::new()), sub) {
                        fields.extend(m);
                    }
                    out.insert(format!("k:{}", Value::Object(key)), Value::Object(fields));
                }
                Value::Object(out)
            }
            SsaList::Set => {
                let out: Map<String, Value> = items.iter().map(|i| (format!("v:{i}"), json!({}))).collect();
                Value::Object(out)
            }
            _ => json!({}),
        },
        _ => json!({}),
    }
}

fn sort_keys(m: Map<String, Value>) -> Map<String, Value> {
    let mut entries: Vec<(String, Value)> = m.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.into_iter().collect()
}

/// Replaces the manager's Apply entry and sorts the entries as fieldmanager's
/// `sortEncodedManagedFields` does: operation, time, manager, apiVersion, subresource.
fn set_managed_fields(obj: &mut Value, manager: &str, entry: Value) {
    let Value::Object(root) = obj else { return };
    let meta = root.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(meta) = meta else { return };
    let mut entries: Vec<Value> = match meta.shift_remove("managedFields") {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    entries.retain(|e| {
        !(text(e, "manager") == manager
            && text(e, "operation") == "Apply"
            && text(e, "subresource").is_empty())
    });
    entries.push(entry);
    entries.sort_by(|p, q| {
        let key =
            |e: &Value| ["operation", "time", "manager", "apiVersion", "subresource"].map(|k| text(e, k));
        key(p).cmp(&key(q))
    });
    meta.insert("managedFields".into(), Value::Array(entries));
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-01-02T03:04:05Z";

    fn job_kind() -> SchemaKind {
        SchemaKind::for_kind("batch/v1", "Job").unwrap()
    }

    #[test]
    fn create_when_absent_records_managed_fields() {
        let applied = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "labels": {"app": "x"}},
            "spec": {"template": {"spec": {
                "containers": [{"name": "main", "image": "busybox", "ports": [{"containerPort": 80}]}],
                "restartPolicy": "Never"
            }}}
        });
        let out = apply_server_side(None, &applied, Some(&job_kind()), "kubectl", NOW).unwrap();
        assert_eq!(out["spec"], applied["spec"]);
        let mf = &out["metadata"]["managedFields"];
        assert_eq!(mf.as_array().unwrap().len(), 1);
        assert_eq!(mf[0]["manager"], "kubectl");
        assert_eq!(mf[0]["operation"], "Apply");
        assert_eq!(mf[0]["apiVersion"], "batch/v1");
        assert_eq!(mf[0]["time"], NOW);
        assert_eq!(mf[0]["fieldsType"], "FieldsV1");
        let want = json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:template": {"f:spec": {
                "f:containers": {"k:{\"name\":\"main\"}": {
                    ".": {}, "f:image": {}, "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                }},
                "f:restartPolicy": {}
            }}}
        });
        assert_eq!(mf[0]["fieldsV1"], want);
    }

    #[test]
    fn merges_by_list_keys_and_keeps_other_managers() {
        let live = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["f1"],
                "managedFields": [{"manager": "kube-controller", "operation": "Update", "time": "2026-01-01T00:00:00Z"}]},
            "spec": {
                "containers": [
                    {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
                    {"name": "b", "image": "b:1"}
                ],
                "tolerations": [{"key": "k1"}]
            }
        });
        let applied = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"b": "3", "a": null}, "finalizers": ["f2", "f1"]},
            "spec": {
                "containers": [{"name": "a", "image": "a:2", "env": [{"name": "Y", "value": "2"}]}],
                "tolerations": [{"key": "k2"}]
            }
        });
        let pod = SchemaKind::for_kind("v1", "Pod").unwrap();
        let out = apply_server_side(Some(&live), &applied, Some(&pod), "mgr", NOW).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b": "3"}));
        assert_eq!(out["metadata"]["finalizers"], json!(["f1", "f2"]));
        assert_eq!(
            out["spec"]["containers"],
            json!([
                {"name": "a", "image": "a:2", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
                {"name": "b", "image": "b:1"}
            ])
        );
        // tolerations are atomic.
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "k2"}]));
        let managers: Vec<&str> = out["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["mgr", "kube-controller"], "Apply sorts before Update");
        assert_eq!(
            out["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"]["f:finalizers"],
            json!({"v:\"f2\"": {}, "v:\"f1\"": {}})
        );

        // Re-applying replaces the manager's entry instead of adding one.
        let again = apply_server_side(Some(&out), &applied, Some(&pod), "mgr", NOW).unwrap();
        assert_eq!(again["metadata"]["managedFields"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn job_status_conditions_are_atomic_for_apply() {
        let live = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "status": {"conditions": [{"type": "Suspended", "status": "True"}]}});
        let applied = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]}});
        let out = apply_server_side(Some(&live), &applied, Some(&job_kind()), "m", NOW).unwrap();
        assert_eq!(out["status"]["conditions"], json!([{"type": "Complete", "status": "True"}]));
    }

    #[test]
    fn custom_resources_merge_maps_and_replace_lists() {
        let live = json!({"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w"},
            "spec": {"a": 1, "items": [1, 2], "nested": {"x": 1}}});
        let applied = json!({"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w"},
            "spec": {"items": [3], "nested": {"y": 2}}});
        let out = apply_server_side(Some(&live), &applied, None, "m", NOW).unwrap();
        assert_eq!(out["spec"], json!({"a": 1, "items": [3], "nested": {"x": 1, "y": 2}}));
    }

    #[test]
    fn rejected_apply_requests() {
        let job = job_kind();
        let ok = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}});
        let err = apply_server_side(None, &ok, Some(&job), "", NOW).unwrap_err();
        assert_eq!(err.http_status(), 422);
        let wrong_version = json!({"apiVersion": "batch/v2", "kind": "Job"});
        assert_eq!(
            apply_server_side(None, &wrong_version, Some(&job), "m", NOW).unwrap_err().http_status(),
            400
        );
        let with_mf = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"managedFields": []}});
        let err = apply_server_side(None, &with_mf, Some(&job), "m", NOW).unwrap_err();
        assert_eq!(err.message(), "metadata.managedFields must be nil");
        assert_eq!(
            apply_server_side(None, &json!([1]), Some(&job), "m", NOW).unwrap_err().http_status(),
            400
        );
    }
}
