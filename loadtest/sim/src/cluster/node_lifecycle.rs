//! The node lifecycle controller's taints and pod marking (kube-controller-manager
//! `pkg/controller/nodelifecycle`): a cordoned node gets `node.kubernetes.io/unschedulable:NoSchedule`,
//! a NotReady node `node.kubernetes.io/not-ready` and an Unknown one `node.kubernetes.io/unreachable`
//! (NoSchedule and NoExecute each), and the pods of a node that stops being Ready become not Ready.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::event_recorder::{self, Note, Regarding};
use super::taints::{NOT_READY_TAINT, UNREACHABLE_TAINT, UNSCHEDULABLE_TAINT};
use crate::apiserver::meta;
use crate::apiserver::{ApiError, ApiServer, Subresource, Target};
use crate::store::{Change, ChangeKind, Interest, RecvError, StoredObject};

const COMPONENT: &str = "node-controller";

/// The taints this controller owns: (key, effect).
const OWNED: &[(&str, &str)] = &[
    (UNSCHEDULABLE_TAINT, "NoSchedule"),
    (NOT_READY_TAINT, "NoSchedule"),
    (NOT_READY_TAINT, "NoExecute"),
    (UNREACHABLE_TAINT, "NoSchedule"),
    (UNREACHABLE_TAINT, "NoExecute"),
];

/// The node's Ready condition status: `True`, `False` or `Unknown` (also when missing).
pub fn ready_status(node: &Value) -> String {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Ready")))
        .and_then(|c| c.get("status").and_then(Value::as_str))
        .unwrap_or("Unknown")
        .to_string()
}

/// The controller taints a node should carry (`doNoScheduleTaintingPass` and the NoExecute
/// taints of taint-based eviction).
pub fn desired_taints(node: &Value) -> Vec<(&'static str, &'static str)> {
    let mut want = Vec::new();
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        want.push((UNSCHEDULABLE_TAINT, "NoSchedule"));
    }
    match ready_status(node).as_str() {
        "True" => {}
        "False" => want.extend([(NOT_READY_TAINT, "NoSchedule"), (NOT_READY_TAINT, "NoExecute")]),
        _ => want.extend([(UNREACHABLE_TAINT, "NoSchedule"), (UNREACHABLE_TAINT, "NoExecute")]),
    }
    want
}

/// `node.spec.taints` with the controller's taints made to match `want`; others untouched,
/// taints already present keep their `timeAdded`. `None` when nothing changes.
pub fn reconcile_taints(node: &Value, want: &[(&str, &str)], now: &str) -> Option<Vec<Value>> {
    let current: Vec<Value> =
        node.pointer("/spec/taints").and_then(Value::as_array).cloned().unwrap_or_default();
    let key_effect = |t: &Value| {
        (
            t.get("key").and_then(Value::as_str).unwrap_or("").to_string(),
            t.get("effect").and_then(Value::as_str).unwrap_or("").to_string(),
        )
    };
    let owned = |k: &str, e: &str| OWNED.iter().any(|(ok, oe)| *ok == k && *oe == e);
    let wanted = |k: &str, e: &str| want.iter().any(|(wk, we)| *wk == k && *we == e);
    let mut next: Vec<Value> = current
        .iter()
        .filter(|t| {
            let (k, e) = key_effect(t);
            !owned(&k, &e) || wanted(&k, &e)
        })
        .cloned()
        .collect();
    for (k, e) in want {
        if !next.iter().any(|t| key_effect(t) == (k.to_string(), e.to_string())) {
            next.push(json!({"key": k, "effect": e, "timeAdded": now}));
        }
    }
    if next == current { None } else { Some(next) }
}

pub struct NodeLifecycle {
    api: Arc<ApiServer>,
    nodes: Target,
    pods: Target,
    /// Each node's last seen Ready status.
    ready: HashMap<String, String>,
}

impl NodeLifecycle {
    pub fn new(api: Arc<ApiServer>) -> Self {
        let nodes = api.builtin("", "v1", "nodes");
        let pods = api.builtin("", "v1", "pods");
        Self { api, nodes, pods, ready: HashMap::new() }
    }

    pub async fn run(mut self) {
        let (nodes, _, mut rx) =
            self.api.store().snapshot_and_watch(self.nodes.rid, None, Interest::resource(self.nodes.rid));
        for n in nodes {
            self.on_node(&n);
        }
        loop {
            match rx.recv().await {
                Ok(change) => self.on_change(&change),
                Err(RecvError::Lagged) => {
                    let (nodes, _) = self.api.store().list(self.nodes.rid, None);
                    for n in nodes {
                        self.on_node(&n);
                    }
                }
                Err(RecvError::Closed) => return,
            }
        }
    }

    /// A node's change: the store hands this controller no other kind.
    fn on_change(&mut self, change: &Change) {
        if change.kind == ChangeKind::Deleted {
            self.ready.remove(&*change.object.name);
            return;
        }
        self.on_node(&change.object);
    }

    fn on_node(&mut self, stored: &StoredObject) {
        let node = stored.value();
        if let Err(e) = self.sync_taints(stored, &node)
            && e.code != 404
        {
            tracing::warn!(node = %stored.name, error = %e, "tainting the node failed");
        }
        let status = ready_status(&node);
        let before = self.ready.insert(stored.name.to_string(), status.clone());
        let changed = before.as_deref() != Some(status.as_str());
        if !changed {
            return;
        }
        let result = if status == "True" {
            if before.is_some() { self.mark_pods_ready_again(&stored.name) } else { Ok(()) }
        } else {
            self.mark_pods_not_ready(&stored.name)
        };
        if let Err(e) = result {
            tracing::warn!(node = %stored.name, error = %e, "updating the node's pods failed");
        }
    }

    fn sync_taints(&self, stored: &StoredObject, node: &Value) -> Result<(), ApiError> {
        let want = desired_taints(node);
        if reconcile_taints(node, &want, "").is_none() {
            return Ok(());
        }
        let now = meta::now_seconds();
        self.api.update_with(&self.nodes, "", &stored.name, Subresource::Main, |n| {
            let want = desired_taints(n);
            let Some(taints) = reconcile_taints(n, &want, &now) else { return Ok(false) };
            if taints.is_empty() {
                if let Some(spec) = n.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.remove("taints");
                }
            } else {
                n["spec"]["taints"] = Value::Array(taints);
            }
            Ok(true)
        })?;
        Ok(())
    }

    fn pods_on(&self, node: &str) -> Vec<Arc<StoredObject>> {
        let (pods, _) = self.api.store().list(self.pods.rid, None);
        pods.into_iter().filter(|p| p.field("spec.nodeName") == Some(node)).collect()
    }

    /// `MarkPodsNotReady`: each pod's Ready condition goes False, with a `NodeNotReady` event.
    fn mark_pods_not_ready(&self, node: &str) -> Result<(), ApiError> {
        for pod in self.pods_on(node) {
            let now = meta::now_seconds();
            let updated =
                self.api.update_with(&self.pods, &pod.namespace, &pod.name, Subresource::Status, |p| {
                    Ok(set_ready(p, "False", &now))
                });
            match updated {
                Ok(stored) if stored.rv != pod.rv => {
                    let note = Note {
                        kind: "Warning",
                        reason: "NodeNotReady",
                        action: "",
                        message: "Node is not ready",
                    };
                    event_recorder::record_core(&self.api, &Regarding::pod(&stored), note, COMPONENT)?;
                }
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// What the node's kubelet reports once it is back: running pods whose containers are all
    /// ready are Ready again.
    fn mark_pods_ready_again(&self, node: &str) -> Result<(), ApiError> {
        for pod in self.pods_on(node) {
            let now = meta::now_seconds();
            let updated =
                self.api.update_with(&self.pods, &pod.namespace, &pod.name, Subresource::Status, |p| {
                    let running = p.pointer("/status/phase").and_then(Value::as_str) == Some("Running");
                    let containers_ready =
                        p.pointer("/status/containerStatuses").and_then(Value::as_array).is_some_and(|cs| {
                            cs.iter().all(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                        });
                    Ok(running && containers_ready && set_ready(p, "True", &now))
                });
            match updated {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Sets the pod's Ready condition (`UpdatePodCondition`); says whether it changed.
fn set_ready(pod: &mut Value, status: &str, now: &str) -> bool {
    let Some(conditions) = pod.pointer_mut("/status/conditions").and_then(Value::as_array_mut) else {
        return false;
    };
    let Some(ready) = conditions.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
    else {
        return false;
    };
    if ready.get("status").and_then(Value::as_str) == Some(status) {
        return false;
    }
    ready["status"] = json!(status);
    ready["lastTransitionTime"] = json!(now);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(unschedulable: bool, ready: &str, taints: Value) -> Value {
        json!({"spec": {"unschedulable": unschedulable, "taints": taints},
               "status": {"conditions": [{"type": "Ready", "status": ready}]}})
    }

    fn keys(taints: &[Value]) -> Vec<String> {
        taints
            .iter()
            .map(|t| format!("{}:{}", t["key"].as_str().unwrap(), t["effect"].as_str().unwrap()))
            .collect()
    }

    /// `TestTaintsNodeByCondition` and `TestApplyNoExecuteTaints` (nodelifecycle controller):
    /// each Ready status and the cordon map to upstream's taints.
    #[test]
    fn taints_follow_readiness_and_cordon() {
        let cases = [
            (false, "True", vec![]),
            (true, "True", vec!["node.kubernetes.io/unschedulable:NoSchedule"]),
            (
                false,
                "False",
                vec!["node.kubernetes.io/not-ready:NoSchedule", "node.kubernetes.io/not-ready:NoExecute"],
            ),
            (
                false,
                "Unknown",
                vec!["node.kubernetes.io/unreachable:NoSchedule", "node.kubernetes.io/unreachable:NoExecute"],
            ),
        ];
        for (cordoned, ready, want) in cases {
            let n = node(cordoned, ready, json!([]));
            let taints = reconcile_taints(&n, &desired_taints(&n), "t").unwrap_or_default();
            assert_eq!(keys(&taints), want, "{cordoned} {ready}");
        }
    }

    #[test]
    fn others_taints_stay_and_owned_ones_keep_their_time() {
        let n = node(
            false,
            "Unknown",
            json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                   {"key": UNREACHABLE_TAINT, "effect": "NoExecute", "timeAdded": "t0"},
                   {"key": NOT_READY_TAINT, "effect": "NoExecute", "timeAdded": "t0"}]),
        );
        let taints = reconcile_taints(&n, &desired_taints(&n), "t1").unwrap();
        assert_eq!(
            keys(&taints),
            [
                "dedicated:NoSchedule",
                "node.kubernetes.io/unreachable:NoExecute",
                "node.kubernetes.io/unreachable:NoSchedule"
            ]
        );
        assert_eq!(taints[1]["timeAdded"], "t0");
        assert_eq!(taints[2]["timeAdded"], "t1");
        let settled = json!({"spec": {"taints": taints}, "status": n["status"].clone()});
        assert_eq!(reconcile_taints(&settled, &desired_taints(&settled), "t2"), None);
    }
}
