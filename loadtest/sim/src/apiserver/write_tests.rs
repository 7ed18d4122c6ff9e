//! A tracked merge patch leaves the live managedFields out of the copy it is applied to and
//! moves them over (`ManagedFieldsSent::Live`); these tables pin what it answers to the general
//! path: an update that writes the same merged object with the live managedFields in it.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{ApiServer, Subresource, Target, WriteOptions};
use crate::patch::{self, PatchType};
use crate::store::{HistoryConfig, Store};

fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}, "annotations": {"note": "x"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
    })
}

/// The object with what differs between two pods written alike (identity, version, times)
/// blanked in place, so that key order still shows when it is serialized.
fn comparable(mut obj: Value) -> String {
    for key in ["name", "uid", "creationTimestamp", "resourceVersion"] {
        if let Some(v) = obj["metadata"].get_mut(key) {
            *v = json!("");
        }
    }
    if let Some(Value::Array(entries)) = obj["metadata"].get_mut("managedFields") {
        for e in entries {
            e["time"] = json!("");
        }
    }
    serde_json::to_string(&obj).unwrap_or_default()
}

fn setup() -> (tokio::runtime::Runtime, Arc<ApiServer>, Target) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let api = {
        let _entered = runtime.enter();
        ApiServer::new(Arc::new(Store::new(HistoryConfig::default()))).0
    };
    let namespaces = api.builtin("", "v1", "namespaces");
    api.create(&namespaces, "", json!({"metadata": {"name": "t"}}), &WriteOptions::default())
        .expect("namespace");
    let pods = api.builtin("", "v1", "pods");
    (runtime, api, pods)
}

#[test]
fn a_tracked_merge_patch_answers_as_the_update_of_its_result() {
    let (_runtime, api, pods) = setup();
    let creator = WriteOptions { manager: Some("creator".into()), ..WriteOptions::default() };
    let cases = [
        // A change by the creator, by another manager, in metadata and in the spec.
        ("creator", json!({"metadata": {"labels": {"added": "1"}}})),
        ("other", json!({"metadata": {"labels": {"added": "1"}}})),
        ("other", json!({"metadata": {"annotations": {"note": "y"}, "labels": {"app": "other"}}})),
        ("other", json!({"spec": {"activeDeadlineSeconds": 30}})),
        // Nothing changed: no new version.
        ("creator", json!({"metadata": {"labels": {"app": "bench"}}})),
        ("other", json!({"metadata": {"labels": {"app": "bench"}}})),
    ];
    for (i, (manager, merge)) in cases.iter().enumerate() {
        let (patched_name, updated_name) = (format!("patched-{i}"), format!("updated-{i}"));
        for name in [&patched_name, &updated_name] {
            api.create(&pods, "t", pod(name), &creator).expect("created");
        }
        let writer = WriteOptions { manager: Some(manager.to_string()), ..WriteOptions::default() };
        let before = api.get(&pods, "t", &patched_name).expect("stored");
        let body = merge.to_string();
        let patched = api
            .patch(&pods, "t", &patched_name, PatchType::Merge, body.as_bytes(), Subresource::Main, &writer)
            .expect("patched")
            .object;
        let live = api.get(&pods, "t", &updated_name).expect("stored");
        let merged = patch::apply_merge_patch(&live.value(), merge);
        let updated =
            api.update(&pods, "t", &updated_name, merged, Subresource::Main, &writer).expect("updated");
        assert_eq!(comparable(patched.value()), comparable(updated.value()), "{merge}");
        assert_eq!(patched.rv == before.rv, updated.rv == live.rv, "a new version or none alike: {merge}");
    }
}
