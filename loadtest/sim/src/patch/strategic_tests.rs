//! Strategic merge patch tables.
//!
//! The first tables port the apply half of apimachinery `pkg/util/strategicpatch/patch_test.go`
//! (v0.36): each case names its upstream description and whether it is the `twoWay` patch applied
//! to `original` or the `threeWay` patch applied to `current`, with the test types `mergeItem` and
//! `retainKeysStruct`. Results are compared exactly, list order included. The last tables run the
//! patches kubectl, kube-rs and the controllers send against the built-in kinds.

use serde_json::{Value, json};

use super::schema::SchemaKind;
use super::schema::test_types::MERGE_ITEM;
use super::strategic::{SmpError, strategic_merge_map_patch};
use super::{PatchError, apply_strategic_merge_patch};

fn smp(original: &Value, patch: &Value) -> Result<Value, SmpError> {
    let (Value::Object(o), Value::Object(p)) = (original, patch) else {
        panic!("test inputs must be objects")
    };
    strategic_merge_map_patch(o.clone(), p.clone(), SchemaKind::for_test(&MERGE_ITEM).schema())
        .map(Value::Object)
}

/// (upstream case, original/current, patch, expected result)
fn upstream_cases() -> Vec<(&'static str, Value, Value, Value)> {
    vec![
        (
            "nested patch merge with empty list (twoWay)",
            json!({"name": "hi"}),
            json!({"mergingList": [{"name": "hello"}, {"$patch": "delete", "name": "doesntexist"}]}),
            json!({"name": "hi", "mergingList": [{"name": "hello"}]}),
        ),
        (
            "nested patch merge with empty list (threeWay)",
            json!({"name": "hi", "mergingList": [{"name": "hello2"}]}),
            json!({"$setElementOrder/mergingList": [{"name": "hello"}, {"name": "doesntexist"}],
                   "mergingList": [{"name": "hello"}]}),
            json!({"name": "hi", "mergingList": [{"name": "hello"}, {"name": "hello2"}]}),
        ),
        (
            "delete items in lists of scalars (threeWay)",
            json!({"mergingIntList": [1, 2, 3, 4]}),
            json!({"$setElementOrder/mergingIntList": [1, 2], "$deleteFromPrimitiveList/mergingIntList": [3]}),
            json!({"mergingIntList": [1, 2, 4]}),
        ),
        (
            "delete all duplicate items in lists of scalars (threeWay)",
            json!({"mergingIntList": [1, 2, 3, 3, 4]}),
            json!({"$setElementOrder/mergingIntList": [1, 2], "$deleteFromPrimitiveList/mergingIntList": [3]}),
            json!({"mergingIntList": [1, 2, 4]}),
        ),
        (
            "add and delete items in lists of scalars (twoWay)",
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"$setElementOrder/mergingIntList": [1, 2, 4], "$deleteFromPrimitiveList/mergingIntList": [3],
                   "mergingIntList": [4]}),
            json!({"mergingIntList": [1, 2, 4]}),
        ),
        (
            "merge lists of maps (threeWay)",
            json!({"mergingList": [{"name": 1, "other": "a"}, {"name": 2, "value": 2, "other": "b"}]}),
            json!({"$setElementOrder/mergingList": [{"name": 4}, {"name": 1}, {"name": 2}, {"name": 3}],
                   "mergingList": [{"name": 4, "value": 4}, {"name": 3, "value": 3}]}),
            json!({"mergingList": [{"name": 4, "value": 4}, {"name": 1, "other": "a"},
                                   {"name": 2, "value": 2, "other": "b"}, {"name": 3, "value": 3}]}),
        ),
        (
            "merge lists of maps with conflict (threeWay)",
            json!({"mergingList": [{"name": 1, "other": "a"}, {"name": 2, "value": 3, "other": "b"}]}),
            json!({"$setElementOrder/mergingList": [{"name": 1}, {"name": 2}, {"name": 3}],
                   "mergingList": [{"name": 2, "value": 2}, {"name": 3, "value": 3}]}),
            json!({"mergingList": [{"name": 1, "other": "a"}, {"name": 2, "value": 2, "other": "b"},
                                   {"name": 3, "value": 3}]}),
        ),
        (
            "add field to map in merging list with conflict (threeWay)",
            json!({"mergingList": [{"name": 1, "other": "a"}, {"name": 3, "value": 2, "other": "b"}]}),
            json!({"$setElementOrder/mergingList": [{"name": 1}, {"name": 2}],
                   "mergingList": [{"name": 1, "value": 1}, {"name": 2, "value": 2}]}),
            json!({"mergingList": [{"name": 1, "value": 1, "other": "a"}, {"name": 2, "value": 2},
                                   {"name": 3, "value": 2, "other": "b"}]}),
        ),
        (
            "replace map field value in merging list (threeWay)",
            json!({"mergingList": [{"name": 1, "value": 1, "other": "a"}, {"name": 2, "value": 2, "other": "b"}]}),
            json!({"$setElementOrder/mergingList": [{"name": 1}, {"name": 2}],
                   "mergingList": [{"name": 1, "value": "a"}]}),
            json!({"mergingList": [{"name": 1, "value": "a", "other": "a"}, {"name": 2, "value": 2, "other": "b"}]}),
        ),
        (
            "delete map from merging list (threeWay)",
            json!({"mergingList": [{"name": 1}, {"name": 2, "other": "b"}]}),
            json!({"$setElementOrder/mergingList": [{"name": 2}], "mergingList": [{"name": 1, "$patch": "delete"}]}),
            json!({"mergingList": [{"name": 2, "other": "b"}]}),
        ),
        (
            "delete missing map from merging list with conflict (threeWay)",
            json!({"mergingList": [{"name": 3, "other": "a"}]}),
            json!({"$setElementOrder/mergingList": [{"name": 2}],
                   "mergingList": [{"name": 2}, {"name": 1, "$patch": "delete"}]}),
            json!({"mergingList": [{"name": 2}, {"name": 3, "other": "a"}]}),
        ),
        (
            // The live order is read from Go's mutated backing array: 4 stays before 3.
            "add map and delete map from merging list (threeWay)",
            json!({"mergingList": [{"name": 1}, {"name": 2, "other": "b"}, {"name": 4, "other": "c"}]}),
            json!({"$setElementOrder/mergingList": [{"name": 2}, {"name": 3}],
                   "mergingList": [{"name": 3}, {"name": 1, "$patch": "delete"}]}),
            json!({"mergingList": [{"name": 2, "other": "b"}, {"name": 4, "other": "c"}, {"name": 3}]}),
        ),
        (
            "retainKeys map changes a field in a nested map with conflict (threeWay)",
            json!({"retainKeysMap": {"name": "foo", "value": "bar", "simpleMap": {"key1": "new", "key2": "b", "key3": "c"}}}),
            json!({"retainKeysMap": {"$retainKeys": ["name", "simpleMap", "value"], "simpleMap": {"key1": "modified"}}}),
            json!({"retainKeysMap": {"name": "foo", "value": "bar",
                                     "simpleMap": {"key1": "modified", "key2": "b", "key3": "c"}}}),
        ),
        (
            "retainKeys map deletes nested non-merging list (threeWay)",
            json!({"retainKeysMap": {"name": "foo", "nonMergingList": [{"name": "a"}, {"name": "b"}]}}),
            json!({"retainKeysMap": {"$retainKeys": ["name", "value"], "value": "bar", "nonMergingList": null}}),
            json!({"retainKeysMap": {"name": "foo", "value": "bar"}}),
        ),
        (
            "retainKeys map adds an item in nested merging int list (threeWay)",
            json!({"retainKeysMap": {"name": "foo", "mergingIntList": [1, 2, 3]}}),
            json!({"retainKeysMap": {"$setElementOrder/mergingIntList": [1, 2, 4],
                                     "$retainKeys": ["mergingIntList", "name"], "mergingIntList": [4]}}),
            json!({"retainKeysMap": {"name": "foo", "mergingIntList": [1, 2, 4, 3]}}),
        ),
        (
            "retainKeys map deletes an item in nested merging int list (threeWay)",
            json!({"retainKeysMap": {"name": "foo", "mergingIntList": [1, 2, 3, 4]}}),
            json!({"retainKeysMap": {"$retainKeys": ["mergingIntList", "name"],
                                     "$deleteFromPrimitiveList/mergingIntList": [2],
                                     "$setElementOrder/mergingIntList": [1, 3]}}),
            json!({"retainKeysMap": {"name": "foo", "mergingIntList": [1, 3, 4]}}),
        ),
        (
            "retainKeys map adds an item and deletes an item in nested merging int list (threeWay)",
            json!({"retainKeysMap": {"name": "foo", "mergingIntList": [1, 2, 3, 4]}}),
            json!({"retainKeysMap": {"$retainKeys": ["mergingIntList", "name"], "mergingIntList": [5],
                                     "$deleteFromPrimitiveList/mergingIntList": [2],
                                     "$setElementOrder/mergingIntList": [1, 3, 5]}}),
            json!({"retainKeysMap": {"name": "foo", "mergingIntList": [1, 3, 5, 4]}}),
        ),
        (
            "retainKeys map changes an item in nested merging list (threeWay)",
            json!({"retainKeysMap": {"name": "foo", "mergingList": [{"name": "a"}, {"name": "b", "value": "foo"}, {"name": "x"}]}}),
            json!({"retainKeysMap": {"$retainKeys": ["mergingList", "name"],
                                     "$setElementOrder/mergingList": [{"name": "a"}, {"name": "b"}],
                                     "mergingList": [{"name": "b", "value": "bar"}]}}),
            json!({"retainKeysMap": {"name": "foo",
                                     "mergingList": [{"name": "a"}, {"name": "b", "value": "bar"}, {"name": "x"}]}}),
        ),
        (
            "retainKeys map deletes an item in nested merging list (threeWay)",
            json!({"retainKeysMap": {"name": "foo", "mergingList": [{"name": "a"}, {"name": "b"}, {"name": "x"}]}}),
            json!({"retainKeysMap": {"$retainKeys": ["mergingList", "name"],
                                     "$setElementOrder/mergingList": [{"name": "a"}],
                                     "mergingList": [{"name": "b", "$patch": "delete"}]}}),
            json!({"retainKeysMap": {"name": "foo", "mergingList": [{"name": "a"}, {"name": "x"}]}}),
        ),
        // customStrategicMergePatchTestCaseData
        (
            "unique scalars when merging lists",
            json!({"mergingIntList": [1, 2]}),
            json!({"mergingIntList": [2, 3]}),
            json!({"mergingIntList": [1, 2, 3]}),
        ),
        (
            "delete map from nested map",
            json!({"simpleMap": {"key1": 1, "key2": 1}}),
            json!({"simpleMap": {"$patch": "delete"}}),
            json!({"simpleMap": {}}),
        ),
        (
            "delete all items from merging list",
            json!({"mergingList": [{"name": 1}, {"name": 2}]}),
            json!({"mergingList": [{"$patch": "replace"}]}),
            json!({"mergingList": []}),
        ),
        (
            "merge empty merging lists",
            json!({"mergingList": []}),
            json!({"mergingList": []}),
            json!({"mergingList": []}),
        ),
        ("delete all keys from map", json!({"name": 1, "value": 1}), json!({"$patch": "replace"}), json!({})),
        (
            "add key and delete all keys from map",
            json!({"name": 1, "value": 1}),
            json!({"other": "a", "$patch": "replace"}),
            json!({"other": "a"}),
        ),
        (
            "delete all duplicate entries in a merging list",
            json!({"mergingList": [{"name": 1}, {"name": 1}, {"name": 2, "value": "a"}, {"name": 3}, {"name": 3}]}),
            json!({"mergingList": [{"name": 1, "$patch": "delete"}, {"name": 3, "$patch": "delete"}]}),
            json!({"mergingList": [{"name": 2, "value": "a"}]}),
        ),
        (
            "retainKeys map can delete a field when no retainKeys directive present",
            json!({"retainKeysMap": {"name": "foo", "value": "a"}}),
            json!({"retainKeysMap": {"value": null}}),
            json!({"retainKeysMap": {"name": "foo"}}),
        ),
        (
            "retainKeys list can change a field when no retainKeys directive present",
            json!({"retainKeysMergingList": [{"name": "bar"}, {"name": "foo", "value": "a"}]}),
            json!({"retainKeysMergingList": [{"name": "foo", "value": "b"}]}),
            json!({"retainKeysMergingList": [{"name": "bar"}, {"name": "foo", "value": "b"}]}),
        ),
        (
            "preserve the order from the patch in a merging list",
            json!({"mergingList": [{"name": 1}, {"name": 2, "value": "b"}, {"name": 3}]}),
            json!({"mergingList": [{"name": 3, "value": "c"}, {"name": 1, "value": "a"}, {"name": 2, "other": "x"}]}),
            json!({"mergingList": [{"name": 3, "value": "c"}, {"name": 1, "value": "a"},
                                   {"name": 2, "value": "b", "other": "x"}]}),
        ),
        (
            "preserve the order from the patch in a merging list 2",
            json!({"mergingList": [{"name": 1}, {"name": 2, "value": "b"}, {"name": 3}]}),
            json!({"mergingList": [{"name": 3, "value": "c"}, {"name": 1, "value": "a"}]}),
            json!({"mergingList": [{"name": 2, "value": "b"}, {"name": 3, "value": "c"}, {"name": 1, "value": "a"}]}),
        ),
        (
            "preserve the order from the patch in a merging int list",
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"mergingIntList": [3, 1, 2]}),
            json!({"mergingIntList": [3, 1, 2]}),
        ),
        (
            "preserve the order from the patch in a merging int list (second)",
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"mergingIntList": [3, 1]}),
            json!({"mergingIntList": [2, 3, 1]}),
        ),
        // customStrategicMergePatchRawTestCases
        (
            "$setElementOrder contains item that is not present in the list to be merged",
            json!({"mergingList": [{"name": 1}, {"name": 3}]}),
            json!({"$setElementOrder/mergingList": [{"name": 3}, {"name": 2}, {"name": 1}],
                   "mergingList": [{"name": 3, "value": 3}, {"name": 1, "value": 1}]}),
            json!({"mergingList": [{"name": 3, "value": 3}, {"name": 1, "value": 1}]}),
        ),
        (
            "$setElementOrder contains item that is not present in the int list to be merged",
            json!({"mergingIntList": [1, 3]}),
            json!({"$setElementOrder/mergingIntList": [3, 2, 1]}),
            json!({"mergingIntList": [3, 1]}),
        ),
        (
            "$deleteFromPrimitiveList of nonexistent item in primitive list should not add the item to the list",
            json!({"mergingIntList": [1, 2]}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [3]}),
            json!({"mergingIntList": [1, 2]}),
        ),
        (
            "$deleteFromPrimitiveList on empty primitive list should not add the item to the list",
            json!({"mergingIntList": null}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [3]}),
            json!({"mergingIntList": null}),
        ),
        (
            "$deleteFromPrimitiveList on nonexistent primitive list should not add the primitive list",
            json!({"foo": ["bar"]}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [3]}),
            json!({"foo": ["bar"]}),
        ),
        (
            "$deleteFromPrimitiveList should delete item from a list with merge patch strategy",
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [2]}),
            json!({"mergingIntList": [1, 3]}),
        ),
        (
            "$deleteFromPrimitiveList should delete item from a list without merge patch strategy",
            json!({"nonMergingIntList": [1, 2, 3]}),
            json!({"$deleteFromPrimitiveList/nonMergingIntList": [2]}),
            json!({"nonMergingIntList": [1, 3]}),
        ),
        // mergeItem.replacingItem carries patchStrategy:"replace".
        (
            "replace strategy replaces the whole map",
            json!({"replacingItem": {"a": 1, "b": 2}}),
            json!({"replacingItem": {"b": 3}}),
            json!({"replacingItem": {"b": 3}}),
        ),
        (
            "non-merging list is replaced",
            json!({"nonMergingList": [{"name": 1}, {"name": 2}]}),
            json!({"nonMergingList": [{"name": 3}]}),
            json!({"nonMergingList": [{"name": 3}]}),
        ),
    ]
}

#[test]
fn upstream_patch_application_cases() {
    let cases = upstream_cases();
    assert!(cases.len() >= 25);
    for (name, original, patch, want) in cases {
        let got = smp(&original, &patch).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn upstream_error_cases() {
    let cases = [
        (
            "should check if order in $setElementOrder and patch list match",
            json!({"mergingList": [{"name": 1}, {"name": 3}, {"name": 2}]}),
            json!({"$setElementOrder/mergingList": [{"name": 1}, {"name": 2}, {"name": 3}],
                   "mergingList": [{"name": 3, "value": 3}, {"name": 1, "value": 1}]}),
            "doesn't match",
        ),
        (
            "should check if order in $setElementOrder and patch list match (int list)",
            json!({"mergingIntList": [1, 3, 2]}),
            json!({"$setElementOrder/mergingIntList": [1, 2, 3], "mergingIntList": [3, 1]}),
            "doesn't match",
        ),
        (
            "missing merge key should error out",
            json!({"mergingList": [{"name": 1, "value": "a"}]}),
            json!({"mergingList": [{"value": "b"}]}),
            "does not contain declared merge key",
        ),
        (
            "$patch: merge in a list",
            json!({"mergingList": [{"name": 1}]}),
            json!({"mergingList": [{"$patch": "merge"}]}),
            "merging lists cannot yet be specified in the patch",
        ),
        (
            "unknown $patch in a map",
            json!({"name": 1}),
            json!({"$patch": "frobnicate"}),
            "unknown patch type: frobnicate",
        ),
        (
            "list element types are not identical",
            json!({"mergingIntList": [1, 2]}),
            json!({"mergingIntList": ["3"]}),
            "list element types are not identical",
        ),
        (
            "$retainKeys must list every key the patch sets",
            json!({"retainKeysMap": {"name": "foo"}}),
            json!({"retainKeysMap": {"$retainKeys": ["name"], "value": "x"}}),
            "invalid patch format of retainKeys",
        ),
    ];
    for (name, original, patch, want) in cases {
        let err = smp(&original, &patch).expect_err(name);
        assert!(err.text().contains(want), "{name}: {}", err.text());
    }
}

// ---- Built-in kinds: what clients send. ----

fn kind(api_version: &str, kind: &str) -> SchemaKind {
    SchemaKind::for_kind(api_version, kind).unwrap()
}

fn apply(doc: Value, patch: Value, k: &SchemaKind) -> Result<Value, PatchError> {
    apply_strategic_merge_patch(&doc, &patch, k)
}

#[test]
fn job_controller_removes_its_pod_finalizer() {
    // kubernetes pkg/controller/job: removeTrackingFinalizerPatch.
    let pod = kind("v1", "Pod");
    let patch =
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["batch.kubernetes.io/job-tracking"]}});
    let doc = json!({"metadata": {"name": "p", "finalizers": ["batch.kubernetes.io/job-tracking", "other"]}});
    let out = apply(doc, patch.clone(), &pod).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["other"]));
    // Already gone: nothing changes, and no list appears.
    let doc = json!({"metadata": {"name": "p", "labels": {"a": "b"}}});
    assert_eq!(apply(doc.clone(), patch, &pod).unwrap(), doc);
}

#[test]
fn kubectl_three_way_apply_with_set_element_order() {
    // kubectl apply: containers reordered/added, one removed, env changed, a label dropped.
    let deploy = kind("apps/v1", "Deployment");
    let live = json!({
        "metadata": {"name": "web", "labels": {"app": "web", "tier": "fe"}, "annotations": {"x": "1"}},
        "spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
            "containers": [
                {"name": "web", "image": "web:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "old", "image": "old:1"},
                {"name": "injected", "image": "mesh:1"}
            ],
            "tolerations": [{"key": "t1", "operator": "Exists"}]
        }}}
    });
    let patch = json!({
        "metadata": {"labels": {"tier": null}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "web"}],
            "containers": [
                {"name": "sidecar", "image": "sc:1"},
                {"name": "web", "image": "web:2", "$setElementOrder/env": [{"name": "B"}, {"name": "A"}],
                 "env": [{"name": "B", "value": "3"}]},
                {"name": "old", "$patch": "delete"}
            ],
            "tolerations": [{"key": "t2", "operator": "Exists"}]
        }}}
    });
    let out = apply(live, patch, &deploy).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(out["metadata"]["annotations"], json!({"x": "1"}));
    // The server-only "injected" is placed by its position in Go's backing array after "old" was
    // deleted in place and "sidecar" appended into the freed slot: [web, injected, sidecar].
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([
            {"name": "injected", "image": "mesh:1"},
            {"name": "sidecar", "image": "sc:1"},
            {"name": "web", "image": "web:2", "env": [{"name": "B", "value": "3"}, {"name": "A", "value": "1"}]}
        ])
    );
    // tolerations have no strategy: replaced.
    assert_eq!(out["spec"]["template"]["spec"]["tolerations"], json!([{"key": "t2", "operator": "Exists"}]));
    assert_eq!(out["spec"]["replicas"], 2);
}

#[test]
fn retain_keys_on_volumes_and_deployment_strategy() {
    // kubectl apply switching a volume from emptyDir to configMap (patchStrategy merge,retainKeys).
    let pod = kind("v1", "Pod");
    let live = json!({"spec": {"volumes": [
        {"name": "data", "emptyDir": {}},
        {"name": "keep", "secret": {"secretName": "s"}}
    ]}});
    let patch = json!({"spec": {
        "$setElementOrder/volumes": [{"name": "data"}, {"name": "keep"}],
        "volumes": [{"$retainKeys": ["configMap", "name"], "configMap": {"name": "cm"}, "name": "data"}]
    }});
    let out = apply(live, patch, &pod).unwrap();
    assert_eq!(
        out["spec"]["volumes"],
        json!([{"name": "data", "configMap": {"name": "cm"}}, {"name": "keep", "secret": {"secretName": "s"}}])
    );

    // DeploymentSpec.strategy: patchStrategy retainKeys.
    let deploy = kind("apps/v1", "Deployment");
    let live = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
    let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
    assert_eq!(apply(live, patch, &deploy).unwrap(), json!({"spec": {"strategy": {"type": "Recreate"}}}));
}

#[test]
fn status_lists_merge_by_type() {
    // kubelet-style pod status patch.
    let pod = kind("v1", "Pod");
    let live = json!({"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}
    ], "podIPs": [{"ip": "10.0.0.1"}], "containerStatuses": [{"name": "a", "ready": false}]}});
    let patch = json!({"status": {
        "$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "Initialized"}, {"type": "Ready"}],
        "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "a", "ready": true}],
        "phase": "Running"
    }});
    let out = apply(live, patch, &pod).unwrap();
    assert_eq!(
        out["status"]["conditions"],
        json!([{"type": "PodScheduled", "status": "True"}, {"type": "Initialized", "status": "True"},
               {"type": "Ready", "status": "True"}])
    );
    assert_eq!(out["status"]["podIPs"], json!([{"ip": "10.0.0.1"}]));
    assert_eq!(out["status"]["containerStatuses"], json!([{"name": "a", "ready": true}]));

    // Node: conditions and addresses merge by type; taints are replaced.
    let node = kind("v1", "Node");
    let live = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}], "podCIDRs": ["10.0.0.0/24"]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}],
                   "addresses": [{"type": "InternalIP", "address": "1.2.3.4"}]}});
    let patch = json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}], "podCIDRs": ["fd00::/64"]},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}],
                   "addresses": [{"type": "Hostname", "address": "n1"}]}});
    let out = apply(live, patch, &node).unwrap();
    assert_eq!(out["spec"]["taints"], json!([{"key": "b", "effect": "NoExecute"}]));
    // Patch items the live list lacks go first (mergeSortedSlice finds no live position for them).
    assert_eq!(out["spec"]["podCIDRs"], json!(["fd00::/64", "10.0.0.0/24"]));
    assert_eq!(
        out["status"]["conditions"],
        json!([{"type": "Ready", "status": "Unknown"}, {"type": "MemoryPressure", "status": "False"}])
    );
    assert_eq!(
        out["status"]["addresses"],
        json!([{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "1.2.3.4"}])
    );

    // Job status conditions merge by type for SMP (they are atomic only for apply).
    let job = kind("batch/v1", "Job");
    let live = json!({"status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}});
    let patch = json!({"status": {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}});
    let out = apply(live, patch, &job).unwrap();
    assert_eq!(
        out["status"]["conditions"],
        json!([{"type": "Complete", "status": "True"}, {"type": "SuccessCriteriaMet", "status": "True"}])
    );
}

#[test]
fn metadata_lists_and_maps() {
    let cm = kind("v1", "ConfigMap");
    let live = json!({"metadata": {"name": "c", "labels": {"a": "1"}, "finalizers": ["f1"],
        "ownerReferences": [{"uid": "u1", "kind": "Job", "name": "j1"}]},
        "data": {"k1": "v1", "k2": "v2"}});
    let patch = json!({"metadata": {
        "labels": {"b": "2"},
        "finalizers": ["f2", "f1"],
        "ownerReferences": [{"uid": "u1", "controller": true}, {"uid": "u2", "kind": "CronJob", "name": "c"}]
    }, "data": {"k1": null, "k3": "v3"}});
    let out = apply(live, patch, &cm).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"a": "1", "b": "2"}));
    assert_eq!(out["metadata"]["finalizers"], json!(["f2", "f1"]));
    assert_eq!(
        out["metadata"]["ownerReferences"],
        json!([{"uid": "u1", "kind": "Job", "name": "j1", "controller": true}, {"uid": "u2", "kind": "CronJob", "name": "c"}])
    );
    assert_eq!(out["data"], json!({"k2": "v2", "k3": "v3"}));
}

#[test]
fn templates_reuse_pod_spec_and_replace_strategy() {
    // CronJob → jobTemplate → template → spec: containers still merge by name.
    let cron = kind("batch/v1", "CronJob");
    let live = json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
        "containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}}}}});
    let patch = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
        "containers": [{"name": "b", "image": "b:2"}]}}}}}});
    let out = apply(live, patch, &cron).unwrap();
    assert_eq!(
        out["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}])
    );
    assert_eq!(out["spec"]["schedule"], "* * * * *");

    // PodDisruptionBudget.spec.selector: patchStrategy replace.
    let pdb = kind("policy/v1", "PodDisruptionBudget");
    let live = json!({"spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "1"}}}});
    let patch = json!({"spec": {"selector": {"matchExpressions": [{"key": "b", "operator": "Exists"}]}}});
    let out = apply(live, patch, &pdb).unwrap();
    assert_eq!(out["spec"]["selector"], json!({"matchExpressions": [{"key": "b", "operator": "Exists"}]}));

    // Unknown fields: maps merge, lists replace; $patch: replace on a map.
    let lease = kind("coordination.k8s.io/v1", "Lease");
    let live = json!({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 40, "x": {"l": [1, 2]}}});
    let patch = json!({"spec": {"holderIdentity": "b", "x": {"l": [3]}}});
    let out = apply(live.clone(), patch, &lease).unwrap();
    assert_eq!(out["spec"], json!({"holderIdentity": "b", "leaseDurationSeconds": 40, "x": {"l": [3]}}));
    let patch = json!({"spec": {"$patch": "replace", "holderIdentity": "c"}});
    assert_eq!(apply(live, patch, &lease).unwrap()["spec"], json!({"holderIdentity": "c"}));
}
