//! `application/strategic-merge-patch+json` bodies against stored objects of the kinds the
//! worker patches (pods' finalizers, Jobs, CronJobs), as the sim's PATCH handler applies them.
#![no_main]

use batchfleet_sim::patch::{
    SchemaKind, apply_strategic_merge_patch, drop_directives_and_nulls, go_format,
    parse_strategic_merge_patch,
};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

const KINDS: [(&str, &str); 4] =
    [("v1", "Pod"), ("batch/v1", "Job"), ("batch/v1", "CronJob"), ("v1", "ConfigMap")];

fn stored_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "default", "labels": {"job-name": "j"},
                        "finalizers": ["batch.kubernetes.io/job-tracking", "x/y"],
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true}]},
           "spec": {"containers": [{"name": "main", "image": "busybox", "env": [{"name": "A", "value": "1"}],
                                    "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
                    "tolerations": [{"key": "k", "operator": "Exists"}]},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
}

// Input: a kind selector byte, then either `<document>\0<patch>` or a patch alone (applied to a
// stored pod).
fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let (api_version, kind) = KINDS[usize::from(which) % KINDS.len()];
    let Some(schema) = SchemaKind::for_kind(api_version, kind) else { return };
    let (doc, patch) = match rest.iter().position(|&b| b == 0) {
        Some(at) => match serde_json::from_slice::<Value>(&rest[..at]) {
            Ok(doc) => (doc, &rest[at + 1..]),
            Err(_) => return,
        },
        None => (stored_pod(), rest),
    };
    let Ok(patch) = parse_strategic_merge_patch(patch) else { return };
    let _ = go_format(&patch);
    if let Ok(mut merged) = apply_strategic_merge_patch(&doc, &patch, &schema) {
        drop_directives_and_nulls(&mut merged);
        let _ = go_format(&merged);
    }
});
