//! The schema walk against the typed round trip it short-cuts: on the objects the sim's hot
//! paths write it must answer (or it saves nothing), and on any object, mutated at random, the
//! pruned object and the result must be exactly the typed way's.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// A pod as the Job controller creates it and the kubelet updates it, with managedFields.
fn busy_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "job-1-abcde", "generateName": "job-1-", "namespace": "team-a",
            "uid": "0b0e5f8e-0000-4000-8000-000000000001", "resourceVersion": "12",
            "creationTimestamp": "2026-11-26T10:00:00Z",
            "labels": {"batch.kubernetes.io/controller-uid": "u", "job-name": "job-1"},
            "annotations": {"sim.batchfleet.io/run": "0s"},
            "finalizers": ["batch.kubernetes.io/job-tracking"],
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job-1", "uid": "u",
                "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "fleet-worker", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-26T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:job-name": {}}}}}]
        },
        "spec": {
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler", "securityContext": {}, "nodeName": "node-1",
            "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "true"],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}, "env": [],
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {
            "phase": "Succeeded", "hostIP": "10.0.0.1", "podIP": "10.244.0.5", "qosClass": "Burstable",
            "startTime": "2026-11-26T10:00:01Z",
            "conditions": [{"type": "Ready", "status": "False", "lastProbeTime": null,
                "lastTransitionTime": "2026-11-26T10:00:02Z", "reason": "PodCompleted"}],
            "containerStatuses": [{"name": "c", "ready": false, "restartCount": 0, "image": "busybox",
                "imageID": "", "containerID": "sim://1", "started": false,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                    "startedAt": "2026-11-26T10:00:01Z", "finishedAt": "2026-11-26T10:00:02Z"}}}]
        }
    })
}

fn busy_job() -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "job-1", "namespace": "team-a", "labels": {}},
        "spec": {
            "completions": 6, "parallelism": 2, "backoffLimit": 6, "completionMode": "Indexed",
            "ttlSecondsAfterFinished": 60, "suspend": false,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
            "podFailurePolicy": {"rules": [{"action": "FailJob",
                "onExitCodes": {"operator": "In", "values": [42]}}]},
            "template": {"metadata": {"labels": {"app": "x"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}
        },
        "status": {"active": 2, "ready": 1, "terminating": 0, "succeeded": 3, "failed": 0,
            "completedIndexes": "0-2", "uncountedTerminatedPods": {},
            "startTime": "2026-11-26T10:00:00Z",
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True",
                "lastProbeTime": "2026-11-26T10:00:05Z", "lastTransitionTime": "2026-11-26T10:00:05Z"}]}
    })
}

fn other_kinds() -> Vec<Value> {
    vec![
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"schedule": "*/1 * * * *", "timeZone": "Etc/UTC", "concurrencyPolicy": "Forbid",
                "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                    "containers": [{"name": "c", "image": "i"}]}}}}},
            "status": {"lastScheduleTime": "2026-11-26T10:00:00Z", "active": []}}),
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "w-1"},
            "spec": {"holderIdentity": "w-1", "leaseDurationSeconds": 15,
                "renewTime": "2026-11-26T10:00:00.123456Z", "leaseTransitions": 2}}),
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e.1", "namespace": "n"},
            "involvedObject": {"kind": "Job", "name": "j", "namespace": "n"}, "reason": "SuccessfulCreate",
            "message": "Created pod", "type": "Normal", "count": 1, "source": {"component": "job-controller"},
            "firstTimestamp": "2026-11-26T10:00:00Z", "eventTime": null, "reportingComponent": ""}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "podCIDR": "10.0.0.0/24"},
            "status": {"capacity": {"cpu": "4", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True",
                    "lastHeartbeatTime": "2026-11-26T10:00:00Z"}]}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}, "data": {"a": "b"},
            "binaryData": {"x": "aGVsbG8="}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {"metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "i",
                        "livenessProbe": {"httpGet": {"path": "/", "port": "http"}}}]}}}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
    ]
}

fn kind_of(obj: &Value) -> (String, String) {
    let s = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    (s("apiVersion"), s("kind"))
}

/// Both ways on copies of `obj`: the result and the pruned object must be the same.
fn assert_agrees(obj: &Value) {
    let (api_version, kind) = kind_of(obj);
    let Some(round_trip) = typed::round_trip_for(&api_version, &kind) else { return };
    let (mut fast, mut typed) = (obj.clone(), obj.clone());
    let by_walk = prune_unknown(&mut fast, Order::Document).expect("a typed kind");
    let by_type = prune_typed(&mut typed, Order::Document, (&api_version, &kind), round_trip);
    assert_eq!(by_walk, by_type, "result for {obj}");
    assert_eq!(fast, typed, "pruned object for {obj}");
}

#[test]
fn the_hot_paths_objects_need_no_typed_round_trip() {
    for obj in [busy_pod(), busy_job()] {
        let (api_version, kind) = kind_of(&obj);
        let without_null = {
            // A null the client sends (`lastProbeTime: null`) is dropped by the typed decode:
            // the walk leaves such objects to it.
            let mut o = obj.clone();
            if let Some(c) = o.pointer_mut("/status/conditions/0").and_then(Value::as_object_mut) {
                c.retain(|_, v| !v.is_null());
            }
            o
        };
        assert!(
            schema_check::clean_empties(&without_null, &api_version, &kind).is_some(),
            "{kind} goes the slow way"
        );
        assert_agrees(&obj);
        assert_agrees(&without_null);
    }
}

#[test]
fn other_kinds_agree_with_the_typed_way() {
    for obj in other_kinds() {
        assert_agrees(&obj);
    }
}

/// Every member path of `v` (object keys only; list items are walked into).
fn member_paths(v: &Value, at: &mut Vec<Segment>, out: &mut Vec<Vec<Segment>>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                at.push(Segment::Key(k.clone()));
                out.push(at.clone());
                member_paths(child, at, out);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                at.push(Segment::Index(i));
                member_paths(child, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Replace(Value),
    AddUnknown(Value),
    Remove,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let values = prop_oneof![
        Just(Value::Null),
        Just(json!(true)),
        Just(json!(7)),
        Just(json!(-3_000_000_000i64)),
        Just(json!(1.5)),
        Just(json!("")),
        Just(json!("2026-11-26T10:00:00Z")),
        Just(json!("not a time")),
        Just(json!({})),
        Just(json!([])),
        Just(json!({"x": 1})),
        Just(json!(["a"])),
        Just(json!([{}])),
    ];
    prop_oneof![
        values.clone().prop_map(Mutation::Replace),
        values.prop_map(Mutation::AddUnknown),
        Just(Mutation::Remove),
    ]
}

fn mutate(obj: &mut Value, picks: &[(usize, Mutation)]) {
    for (pick, m) in picks {
        let mut paths = Vec::new();
        member_paths(obj, &mut Vec::new(), &mut paths);
        // TypeMeta names the kind: changing it tests another kind, not this walk.
        paths.retain(|p| !matches!(p.as_slice(), [Segment::Key(k)] if k == "apiVersion" || k == "kind"));
        if paths.is_empty() {
            return;
        }
        let path = &paths[pick % paths.len()];
        let Some((Segment::Key(last), parent)) = path.split_last() else { continue };
        let Some(Value::Object(parent)) = pointer_mut(obj, parent) else { continue };
        match m {
            Mutation::Replace(v) => {
                parent.insert(last.clone(), v.clone());
            }
            Mutation::AddUnknown(v) => {
                if let Some(Value::Object(inner)) = parent.get_mut(last) {
                    inner.insert("bogusField".into(), v.clone());
                } else {
                    parent.insert("bogusSibling".into(), v.clone());
                }
            }
            Mutation::Remove => {
                parent.shift_remove(last);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    /// Any object, mutated anywhere (wrong types, nulls, unknown members, empties, removals):
    /// the walk either steps aside or answers exactly as the typed round trip.
    #[test]
    fn the_walk_agrees_with_the_typed_round_trip_on_mutated_objects(
        base in 0usize..9,
        picks in proptest::collection::vec((any::<usize>(), mutation()), 1..4),
    ) {
        let mut bases = vec![busy_pod(), busy_job()];
        bases.extend(other_kinds());
        let mut obj = bases[base % bases.len()].clone();
        mutate(&mut obj, &picks);
        assert_agrees(&obj);
    }
}
