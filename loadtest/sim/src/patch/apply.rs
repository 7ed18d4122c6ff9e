//! Server-side apply (`application/apply-patch+yaml`) as structured-merge-diff's `Updater.Apply`:
//! the applied configuration is merged into the live object by the list keys of the SSA schema;
//! fields the manager applied before and no longer does are removed unless another manager owns
//! them; changing a field another manager owns is a conflict unless forced (then the field changes
//! hands); the manager's `Apply` entry in `metadata.managedFields` records what it applied.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::error::PatchError;
use super::managed::{self, FieldPath, Marks, Part};
use super::schema::{FieldDef, Schema, SchemaKind, SsaKeys, SsaList};

/// Applies `applied` (the decoded apply-patch body) for `field_manager`. With no live object the
/// result is the applied object (the caller then creates it: HTTP 201). `now_rfc3339` stamps the
/// managedFields entry.
pub fn apply_server_side(
    live: Option<&Value>,
    applied: &Value,
    kind: Option<&SchemaKind>,
    field_manager: &str,
    now_rfc3339: &str,
    options: ApplyOptions,
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

    let part = options.part;
    let mut result = match live {
        Some(live) => merge(live.clone(), applied.clone(), schema, None),
        None => without_nulls(applied.clone()),
    };
    let mut managers = live.map(managed::entries).unwrap_or_default();
    if let Some(live) = live
        && managers.is_empty()
    {
        // skipNonAppliedManager: the fields of an object nobody tracked belong to
        // "before-first-apply" before the first apply, as an Update from the kind's zero value
        // to the live object would record them.
        let fields: BTreeSet<FieldPath> =
            managed::field_paths(live, schema, part, Marks::BeyondZeroValue).into_keys().collect();
        managers.push(managed::Entry {
            manager: "before-first-apply".into(),
            operation: "Update".into(),
            api_version: api_version.to_string(),
            time: now_rfc3339.to_string(),
            subresource: String::new(),
            fields,
        });
    }
    let mine = |e: &managed::Entry| e.manager == field_manager && e.operation == "Apply";
    let applied_set: BTreeSet<FieldPath> = managed::leaves(applied, schema, part).into_keys().collect();
    // Fields applied last time and not now go, unless another manager owns them.
    let last: BTreeSet<FieldPath> =
        managers.iter().filter(|e| mine(e)).flat_map(|e| e.fields.clone()).collect();
    let owned_by_others: BTreeSet<&FieldPath> =
        managers.iter().filter(|e| !mine(e)).flat_map(|e| e.fields.iter()).collect();
    // Only what `ToFieldSet` of the merged object holds is pruned (structured-merge-diff's
    // prune and addBackDanglingItems): a map or struct the last apply brought (a `"."` of the
    // entry it took over from an `Update`) is not removed whole, only the leaves below it
    // that nobody owns.
    let merged_set = managed::leaves(&result, schema, part);
    let mut dropped: Vec<&FieldPath> = last
        .iter()
        .filter(|p| merged_set.contains_key(*p) && !applied_set.contains(*p) && !owned_by_others.contains(p))
        .collect();
    dropped.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for path in dropped {
        remove_path(&mut result, path);
    }
    // As `Compare` tells it: a container the result lacks is removed from whoever had it.
    let before = live.map(|l| managed::field_paths(l, schema, part, Marks::Containers)).unwrap_or_default();
    let created = if live.is_some() { Marks::Containers } else { Marks::BeyondZeroValue };
    let after = managed::field_paths(&result, schema, part, created);
    let c = managed::compare(&before, &after);
    let changed: BTreeSet<&FieldPath> = c.added.iter().chain(c.modified.iter()).collect();
    let mut conflicts: Vec<(String, FieldPath)> = Vec::new();
    for e in managers.iter().filter(|e| !mine(e)) {
        for p in e.fields.iter().filter(|p| changed.contains(p)) {
            conflicts.push((e.printed(), p.clone()));
        }
    }
    if !conflicts.is_empty()
        && !options.force
        && !upgrades_client_side_apply(field_manager, live, &conflicts, schema, part)
    {
        conflicts.sort();
        return Err(PatchError::Conflicts(
            conflicts.into_iter().map(|(m, p)| (m, managed::path_string(&p))).collect(),
        ));
    }
    for e in managers.iter_mut() {
        if mine(e) {
            continue;
        }
        e.fields.retain(|p| !changed.contains(p) && !c.removed.contains(p));
    }
    managers.retain(|e| !mine(e));
    managers.push(managed::Entry {
        manager: field_manager.to_string(),
        operation: "Apply".into(),
        api_version: api_version.to_string(),
        time: now_rfc3339.to_string(),
        subresource: if part == Part::Status { "status".into() } else { String::new() },
        fields: applied_set,
    });
    managed::store_entries(&mut result, managers);
    Ok(result)
}

/// How an apply runs: `force` takes conflicting fields over (`?force=true`); `part` is the part
/// of the object the request writes (main resource or status).
#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions {
    pub force: bool,
    pub part: Part,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        Self { force: false, part: Part::All }
    }
}

/// lastAppliedManager: `kubectl apply --server-side` (manager `kubectl`) may take over the fields
/// a client-side apply set (those in the last-applied annotation) without conflict.
fn upgrades_client_side_apply(
    manager: &str,
    live: Option<&Value>,
    conflicts: &[(String, FieldPath)],
    schema: Schema,
    part: Part,
) -> bool {
    if manager != "kubectl" {
        return false;
    }
    let last_applied = live
        .and_then(|l| l.pointer("/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"))
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str::<Value>(text).ok());
    let Some(last_applied) = last_applied else { return false };
    let allowed = managed::leaves(&last_applied, schema, part);
    conflicts.iter().all(|(_, p)| allowed.contains_key(p))
}

/// Removes the field at `path` (FieldsV1 elements) from `v`.
fn remove_path(v: &mut Value, path: &[managed::Element]) {
    let Some((first, rest)) = path.split_first() else { return };
    let Some((kind, text)) = first.split_at_checked(2) else { return };
    match (kind, v) {
        ("f:", Value::Object(m)) => {
            if rest.is_empty() {
                m.shift_remove(text);
            } else if let Some(child) = m.get_mut(text) {
                remove_path(child, rest);
            }
        }
        ("k:", Value::Array(items)) => {
            let Ok(key) = serde_json::from_str::<Map<String, Value>>(text) else { return };
            let matches = |item: &Value| {
                key.iter().all(|(k, want)| match item.get(k) {
                    Some(v) => v == want,
                    None => k == "protocol" && want == "TCP",
                })
            };
            if rest.is_empty() {
                items.retain(|i| !matches(i));
            } else if let Some(item) = items.iter_mut().find(|i| matches(i)) {
                remove_path(item, rest);
            }
        }
        ("v:", Value::Array(items)) if rest.is_empty() => {
            if let Ok(value) = serde_json::from_str::<Value>(text) {
                items.retain(|i| *i != value);
            }
        }
        ("i:", Value::Array(items)) => {
            if let Ok(i) = text.parse::<usize>()
                && let Some(item) = items.get_mut(i)
            {
                remove_path(item, rest);
            }
        }
        _ => {}
    }
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

use managed::item_key;

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        let out =
            apply_server_side(None, &applied, Some(&job_kind()), "kubectl", NOW, ApplyOptions::default())
                .unwrap();
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
                "managedFields": [{"manager": "kube-controller", "operation": "Update", "apiVersion": "v1",
                    "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:containers": {"k:{\"name\":\"b\"}": {".": {}, "f:image": {}}}}}}]},
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
        let out = apply_server_side(Some(&live), &applied, Some(&pod), "mgr", NOW, ApplyOptions::default())
            .unwrap();
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
        let again =
            apply_server_side(Some(&out), &applied, Some(&pod), "mgr", NOW, ApplyOptions::default()).unwrap();
        assert_eq!(again["metadata"]["managedFields"].as_array().unwrap().len(), 2);
    }

    /// Applying to an object nobody tracked conflicts with "before-first-apply", as upstream.
    #[test]
    fn first_apply_to_an_untracked_object_conflicts_with_before_first_apply() {
        let live =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        let kind = SchemaKind::for_kind("v1", "ConfigMap");
        let err = apply_server_side(
            Some(&live),
            &cm(json!({"a": "2"})),
            kind.as_ref(),
            "m",
            NOW,
            ApplyOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.message(),
            "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.a"
        );
    }

    #[test]
    fn job_status_conditions_are_atomic_for_apply() {
        let live = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "status": {"conditions": [{"type": "Suspended", "status": "True"}]}});
        let applied = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]}});
        let out = apply_server_side(
            Some(&live),
            &applied,
            Some(&job_kind()),
            "m",
            NOW,
            ApplyOptions { force: true, ..ApplyOptions::default() },
        )
        .unwrap();
        assert_eq!(out["status"]["conditions"], json!([{"type": "Complete", "status": "True"}]));
    }

    #[test]
    fn custom_resources_merge_maps_and_replace_lists() {
        let live = json!({"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w"},
            "spec": {"a": 1, "items": [1, 2], "nested": {"x": 1}}});
        let applied = json!({"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w"},
            "spec": {"items": [3], "nested": {"y": 2}}});
        let out = apply_server_side(
            Some(&live),
            &applied,
            None,
            "m",
            NOW,
            ApplyOptions { force: true, ..ApplyOptions::default() },
        )
        .unwrap();
        assert_eq!(out["spec"], json!({"a": 1, "items": [3], "nested": {"x": 1, "y": 2}}));
    }

    #[test]
    fn rejected_apply_requests() {
        let job = job_kind();
        let ok = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}});
        let err = apply_server_side(None, &ok, Some(&job), "", NOW, ApplyOptions::default()).unwrap_err();
        assert_eq!(err.http_status(), 422);
        let wrong_version = json!({"apiVersion": "batch/v2", "kind": "Job"});
        assert_eq!(
            apply_server_side(None, &wrong_version, Some(&job), "m", NOW, ApplyOptions::default())
                .unwrap_err()
                .http_status(),
            400
        );
        let with_mf = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"managedFields": []}});
        let err =
            apply_server_side(None, &with_mf, Some(&job), "m", NOW, ApplyOptions::default()).unwrap_err();
        assert_eq!(err.message(), "metadata.managedFields must be nil");
        assert_eq!(
            apply_server_side(None, &json!([1]), Some(&job), "m", NOW, ApplyOptions::default())
                .unwrap_err()
                .http_status(),
            400
        );
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
    }

    fn managers(obj: &Value) -> Vec<(String, String)> {
        managed::entries(obj).into_iter().map(|e| (e.manager, e.operation)).collect()
    }

    /// structured-merge-diff: a second applier that changes a field the first one owns
    /// conflicts; with force it takes the field over; setting the same value shares it.
    #[test]
    fn conflicts_between_appliers_and_force() {
        let kind = SchemaKind::for_kind("v1", "ConfigMap");
        let opts = ApplyOptions::default();
        let first =
            apply_server_side(None, &cm(json!({"a": "1", "b": "1"})), kind.as_ref(), "one", NOW, opts)
                .unwrap();
        let err = apply_server_side(Some(&first), &cm(json!({"a": "2"})), kind.as_ref(), "two", NOW, opts)
            .unwrap_err();
        assert_eq!((err.http_status(), err.reason()), (409, "Conflict"));
        assert_eq!(err.message(), "Apply failed with 1 conflict: conflict with \"one\": .data.a");
        // The same value: no conflict, both own it.
        let shared =
            apply_server_side(Some(&first), &cm(json!({"a": "1"})), kind.as_ref(), "two", NOW, opts).unwrap();
        assert_eq!(managers(&shared), [("one".into(), "Apply".into()), ("two".into(), "Apply".into())]);
        // Forced: the field changes hands.
        let forced = ApplyOptions { force: true, ..opts };
        let taken =
            apply_server_side(Some(&first), &cm(json!({"a": "2"})), kind.as_ref(), "two", NOW, forced)
                .unwrap();
        assert_eq!(taken["data"], json!({"a": "2", "b": "1"}));
        let one = managed::entries(&taken).into_iter().find(|e| e.manager == "one").unwrap();
        assert_eq!(one.fields, [vec!["f:data".to_string(), "f:b".to_string()]].into_iter().collect());
    }

    #[test]
    fn fields_no_longer_applied_are_removed_unless_owned_by_another() {
        let kind = SchemaKind::for_kind("v1", "ConfigMap");
        let opts = ApplyOptions::default();
        let first = apply_server_side(
            None,
            &cm(json!({"a": "1", "b": "1", "c": "1"})),
            kind.as_ref(),
            "one",
            NOW,
            opts,
        )
        .unwrap();
        // Another applier also owns c.
        let both =
            apply_server_side(Some(&first), &cm(json!({"c": "1"})), kind.as_ref(), "two", NOW, opts).unwrap();
        let out =
            apply_server_side(Some(&both), &cm(json!({"a": "1"})), kind.as_ref(), "one", NOW, opts).unwrap();
        assert_eq!(out["data"], json!({"a": "1", "c": "1"}), "b removed, c kept for its other owner");
    }

    #[test]
    fn conflicts_with_update_managers_name_their_version_and_are_sorted() {
        let kind = SchemaKind::for_kind("v1", "ConfigMap");
        let mut live = cm(json!({"a": "1", "b": "1"}));
        let who = managed::Identity {
            manager: "kubectl-client-side-apply",
            api_version: "v1",
            subresource: "",
            now: NOW,
        };
        managed::track_update(None, &mut live, kind.as_ref(), Part::All, &who);
        let err = apply_server_side(
            Some(&live),
            &cm(json!({"a": "2", "b": "2"})),
            kind.as_ref(),
            "ssa",
            NOW,
            ApplyOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.message(),
            "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using v1:\n- .data.a\n- .data.b"
        );
        // kubectl's own server-side apply may take over what its client-side apply set.
        let mut annotated = live.clone();
        annotated["metadata"]["annotations"] = json!({
            "kubectl.kubernetes.io/last-applied-configuration": cm(json!({"a": "1", "b": "1"})).to_string()
        });
        let upgraded = apply_server_side(
            Some(&annotated),
            &cm(json!({"a": "2", "b": "2"})),
            kind.as_ref(),
            "kubectl",
            NOW,
            ApplyOptions::default(),
        )
        .unwrap();
        assert_eq!(upgraded["data"], json!({"a": "2", "b": "2"}));
    }
}
