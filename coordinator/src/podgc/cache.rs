//! The coordinator's only cluster-sized state: a compact projection of every pod (namespace and
//! node names interned, uid, phase, creation time, deletion, eviction), and the nodes PodGC looks
//! at. Fed by watch events; whole pods are never kept.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::core::{NodeView, OUT_OF_SERVICE_TAINT, PodView};

/// Pod phases, one byte each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Unset,
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl Phase {
    fn parse(s: Option<&str>) -> Self {
        match s {
            Some("Pending") => Phase::Pending,
            Some("Running") => Phase::Running,
            Some("Succeeded") => Phase::Succeeded,
            Some("Failed") => Phase::Failed,
            Some("Unknown") => Phase::Unknown,
            _ => Phase::Unset,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Phase::Unset => "",
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
            Phase::Unknown => "Unknown",
        }
    }
}

#[derive(Debug, Clone)]
struct CompactPod {
    uid: Box<str>,
    node: Option<Arc<str>>,
    created: i64,
    phase: Phase,
    deleting: bool,
    evicted_reason: bool,
}

/// Pods by namespace and name.
#[derive(Debug, Default)]
pub struct PodCache {
    pods: HashMap<(Arc<str>, Box<str>), CompactPod>,
    names: HashSet<Arc<str>>,
}

impl PodCache {
    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(existing) = self.names.get(s) {
            return existing.clone();
        }
        let arc: Arc<str> = Arc::from(s);
        self.names.insert(arc.clone());
        arc
    }

    pub fn apply(&mut self, pod: &Pod) {
        let (Some(namespace), Some(name)) = (pod.metadata.namespace.as_deref(), pod.metadata.name.as_deref())
        else {
            return;
        };
        let status = pod.status.as_ref();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty());
        let compact = CompactPod {
            uid: pod.metadata.uid.clone().unwrap_or_default().into_boxed_str(),
            node: node.map(|n| self.intern(n)),
            created: pod.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
            phase: Phase::parse(status.and_then(|s| s.phase.as_deref())),
            deleting: pod.metadata.deletion_timestamp.is_some(),
            evicted_reason: status.and_then(|s| s.reason.as_deref()) == Some("Evicted"),
        };
        let key = (self.intern(namespace), Box::from(name));
        self.pods.insert(key, compact);
    }

    pub fn delete(&mut self, pod: &Pod) {
        if let (Some(namespace), Some(name)) =
            (pod.metadata.namespace.as_deref(), pod.metadata.name.as_deref())
        {
            let key: (Arc<str>, Box<str>) = (Arc::from(namespace), Box::from(name));
            self.pods.remove(&key);
        }
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Every pod, borrowed for one pass.
    pub fn views(&self) -> Vec<PodView<'_>> {
        self.pods
            .iter()
            .map(|((namespace, name), p)| PodView {
                namespace,
                name,
                uid: &p.uid,
                phase: p.phase.as_str(),
                node_name: p.node.as_deref().unwrap_or(""),
                deleting: p.deleting,
                created: p.created,
                evicted_reason: p.evicted_reason,
            })
            .collect()
    }
}

/// Nodes by name, as PodGC needs them.
#[derive(Debug, Default)]
pub struct NodeCache {
    nodes: BTreeMap<String, NodeView>,
}

impl NodeCache {
    pub fn apply(&mut self, node: &Node) {
        let Some(name) = node.metadata.name.clone() else { return };
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True");
        let out_of_service = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == OUT_OF_SERVICE_TAINT));
        self.nodes.insert(name.clone(), NodeView { name, ready, out_of_service });
    }

    pub fn delete(&mut self, node: &Node) {
        if let Some(name) = node.metadata.name.as_deref() {
            self.nodes.remove(name);
        }
    }

    pub fn nodes(&self) -> &BTreeMap<String, NodeView> {
        &self.nodes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).expect("pod")
    }

    #[test]
    fn the_projection_keeps_what_podgc_reads_and_interns_names() {
        let mut cache = PodCache::default();
        cache.apply(&pod(serde_json::json!({
            "metadata": {"namespace": "team-a", "name": "p1", "uid": "u1", "creationTimestamp": "2026-11-24T10:00:00Z",
                         "deletionTimestamp": "2026-11-24T11:00:00Z"},
            "spec": {"nodeName": "node-1", "containers": []},
            "status": {"phase": "Failed", "reason": "Evicted"}
        })));
        cache.apply(&pod(serde_json::json!({
            "metadata": {"namespace": "team-a", "name": "p2", "uid": "u2"},
            "spec": {"nodeName": "node-1", "containers": []}
        })));
        let mut views = cache.views();
        views.sort_by_key(|v| v.name);
        assert_eq!(views[0].phase, "Failed");
        assert!(views[0].deleting && views[0].evicted_reason);
        assert_eq!(views[0].created, 1_795_514_400);
        assert_eq!(views[1].phase, "", "an unset phase stays empty");
        assert_eq!(cache.names.len(), 2, "team-a and node-1, once each");
        cache.delete(&pod(serde_json::json!({"metadata": {"namespace": "team-a", "name": "p1"}})));
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn nodes_are_ready_and_out_of_service_as_their_conditions_and_taints_say() {
        let mut nodes = NodeCache::default();
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": OUT_OF_SERVICE_TAINT, "effect": "NoExecute", "value": "shutdown"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}
        }))
        .expect("node");
        nodes.apply(&node);
        assert_eq!(nodes.nodes()["n1"], NodeView { name: "n1".into(), ready: false, out_of_service: true });
    }
}
