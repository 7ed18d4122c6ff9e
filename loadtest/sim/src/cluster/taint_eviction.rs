//! The taint-eviction controller (kube-controller-manager `pkg/controller/tainteviction`): pods
//! on a node with `NoExecute` taints they do not tolerate are deleted at once; pods that
//! tolerate them for `tolerationSeconds` are deleted when the shortest toleration runs out.
//! Each deletion first sets `DisruptionTarget=True` (reason `DeletionByTaintManager`), which
//! podFailurePolicy rules and PodGC read.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::event_recorder::{self, Note, Regarding};
use super::taints::{self, Taint, Toleration};
use crate::apiserver::eviction::set_disruption_target;
use crate::apiserver::meta;
use crate::apiserver::{ApiError, ApiServer, DeleteOptions, Subresource, Target};
use crate::cluster::sleep_until;
use crate::store::{Change, ChangeKind, Interest, RecvError};

pub const CONTROLLER: &str = "taint-eviction-controller";
pub const REASON: &str = "DeletionByTaintManager";
pub const MESSAGE: &str = "Taint manager: deleting due to NoExecute taint";

type PodKey = (Box<str>, Box<str>);

/// A scheduled deletion (`TimedWorker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Work {
    created: Instant,
    fire: Instant,
}

pub struct TaintEviction {
    api: Arc<ApiServer>,
    pods: Target,
    nodes: Target,
    /// Each node's NoExecute taints, for nodes that have any.
    tainted: HashMap<String, Vec<Taint>>,
    /// What a pod change must alter to be looked at again: its node and tolerations.
    seen: HashMap<Box<str>, (String, Vec<Toleration>)>,
    work: HashMap<PodKey, Work>,
    queue: BinaryHeap<Reverse<(Instant, PodKey)>>,
}

impl TaintEviction {
    pub fn new(api: Arc<ApiServer>) -> Self {
        let pods = api.builtin("", "v1", "pods");
        let nodes = api.builtin("", "v1", "nodes");
        Self {
            api,
            pods,
            nodes,
            tainted: HashMap::new(),
            seen: HashMap::new(),
            work: HashMap::new(),
            queue: BinaryHeap::new(),
        }
    }

    pub async fn run(mut self) {
        let (nodes, _, mut rx) = self.api.store().snapshot_and_watch(
            self.nodes.rid,
            None,
            Interest::resources(&[self.nodes.rid, self.pods.rid]),
        );
        for n in nodes {
            self.on_node(&n.name, Some(&n.value()));
        }
        loop {
            let next = self.queue.peek().map(|Reverse((at, _))| *at);
            tokio::select! {
                received = rx.recv() => match received {
                    Ok(change) => self.on_change(&change),
                    Err(RecvError::Lagged) => self.resync(),
                    Err(RecvError::Closed) => return,
                },
                _ = sleep_until(next) => self.fire_due(),
            }
        }
    }

    fn resync(&mut self) {
        self.seen.clear();
        let (nodes, _) = self.api.store().list(self.nodes.rid, None);
        let names: Vec<String> = nodes.iter().map(|n| n.name.to_string()).collect();
        self.tainted.retain(|n, _| names.contains(n));
        for n in nodes {
            self.tainted.remove(&*n.name);
            self.on_node(&n.name, Some(&n.value()));
        }
    }

    fn on_change(&mut self, change: &Change) {
        let rid = change.object.resource;
        if rid == self.nodes.rid {
            let node = (change.kind != ChangeKind::Deleted).then(|| change.object.value());
            self.on_node(&change.object.name, node.as_ref());
        } else if rid == self.pods.rid {
            self.on_pod(change);
        }
    }

    /// `PodUpdated` + `handlePodUpdate`.
    fn on_pod(&mut self, change: &Change) {
        let stored = &change.object;
        let key = (stored.namespace.clone(), stored.name.clone());
        if change.kind == ChangeKind::Deleted {
            self.seen.remove(&stored.uid);
            self.cancel(&key, true);
            return;
        }
        // Only pods on tainted nodes matter; when a node gets tainted, all its pods are looked
        // at anyway, so the others need not even be parsed.
        let node = stored.field("spec.nodeName").unwrap_or("").to_string();
        if !self.tainted.contains_key(&node) {
            self.seen.remove(&stored.uid);
            return;
        }
        let tolerations = taints::pod_tolerations(&stored.value());
        let facts = (node.clone(), tolerations.clone());
        if self.seen.get(&stored.uid) == Some(&facts) {
            return;
        }
        self.seen.insert(stored.uid.clone(), facts);
        let Some(node_taints) = self.tainted.get(&node).cloned() else { return };
        self.process(key, &node_taints, &tolerations, Instant::now());
    }

    /// `NodeUpdated` + `handleNodeUpdate`.
    fn on_node(&mut self, name: &str, node: Option<&Value>) {
        let no_execute: Vec<Taint> = node
            .map(|n| taints::node_taints(n).into_iter().filter(|t| t.effect == "NoExecute").collect())
            .unwrap_or_default();
        if node.is_some() && self.tainted.get(name).map(Vec::as_slice).unwrap_or_default() == no_execute {
            return;
        }
        if no_execute.is_empty() {
            self.tainted.remove(name);
        } else {
            self.tainted.insert(name.to_string(), no_execute.clone());
        }
        if node.is_none() {
            return;
        }
        let (pods, _) = self.api.store().list(self.pods.rid, None);
        let now = Instant::now();
        for pod in pods.iter().filter(|p| p.field("spec.nodeName") == Some(name)) {
            let key = (pod.namespace.clone(), pod.name.clone());
            if no_execute.is_empty() {
                self.cancel(&key, true);
                continue;
            }
            let tolerations = taints::pod_tolerations(&pod.value());
            self.process(key, &no_execute, &tolerations, now);
        }
    }

    /// `processPodOnNode`.
    fn process(&mut self, key: PodKey, node_taints: &[Taint], tolerations: &[Toleration], now: Instant) {
        if node_taints.is_empty() {
            self.cancel(&key, true);
            return;
        }
        let Some(used) = taints::matching_tolerations(node_taints, tolerations) else {
            self.cancel(&key, true);
            self.add(key, now, now);
            return;
        };
        let Some(seconds) = taints::min_toleration_seconds(&used) else {
            self.cancel(&key, true);
            return;
        };
        let toleration = Duration::from_secs(seconds.max(0) as u64);
        let mut start = now;
        if let Some(existing) = self.work.get(&key).copied() {
            start = existing.created;
            if start + toleration < now + toleration {
                return;
            }
            self.cancel(&key, true);
        }
        self.add(key, start, start + toleration);
    }

    fn add(&mut self, key: PodKey, created: Instant, fire: Instant) {
        self.work.insert(key.clone(), Work { created, fire });
        self.queue.push(Reverse((fire, key)));
    }

    /// `cancelWorkWithEvent`.
    fn cancel(&mut self, key: &PodKey, with_event: bool) {
        if self.work.remove(key).is_some() && with_event {
            let message = format!("Cancelling deletion of Pod {}/{}", key.0, key.1);
            self.event(key, &message);
        }
    }

    fn event(&self, key: &PodKey, message: &str) {
        let regarding = Regarding {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: key.0.to_string(),
            name: key.1.to_string(),
            uid: String::new(),
            resource_version: String::new(),
        };
        let note = Note { kind: "Normal", reason: "TaintManagerEviction", action: "", message };
        if let Err(e) = event_recorder::record_core(&self.api, &regarding, note, CONTROLLER)
            && e.code != 404
        {
            tracing::warn!(pod = %key.1, namespace = %key.0, error = %e, "recording an eviction event failed");
        }
    }

    fn fire_due(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((at, _))) = self.queue.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, key))) = self.queue.pop() else { break };
            if self.work.get(&key).map(|w| w.fire) != Some(at) {
                continue;
            }
            self.work.remove(&key);
            self.event(&key, &format!("Marking for deletion Pod {}/{}", key.0, key.1));
            if let Err(e) = self.delete(&key)
                && e.code != 404
            {
                tracing::warn!(pod = %key.1, namespace = %key.0, error = %e, "taint eviction failed");
            }
        }
    }

    /// `addConditionAndDeletePod`.
    fn delete(&self, key: &PodKey) -> Result<(), ApiError> {
        let now = meta::now_seconds();
        self.api.update_with(&self.pods, &key.0, &key.1, Subresource::Status, |pod| {
            Ok(set_disruption_target(pod, REASON, MESSAGE, &now))
        })?;
        self.api.delete(&self.pods, &key.0, &key.1, &DeleteOptions::default())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(name: &str) -> PodKey {
        ("ns".into(), name.into())
    }

    fn tol(seconds: Option<i64>) -> Toleration {
        Toleration {
            key: "k".into(),
            operator: "Exists".into(),
            effect: "NoExecute".into(),
            seconds,
            ..Default::default()
        }
    }

    fn controller() -> TaintEviction {
        let (api, _) = ApiServer::new(Arc::new(crate::store::Store::new(Default::default())));
        TaintEviction::new(api)
    }

    /// `TestCreatePod`/`TestUpdateNode` cases of taint_eviction_test.go: untolerated → at once,
    /// tolerated for a while → after the toleration, forever → never, no taints → cancelled.
    #[tokio::test]
    async fn schedules_deletions_as_upstream() {
        let mut c = controller();
        let taint = [Taint::new("k", "", "NoExecute")];
        let now = Instant::now();
        c.process(stored("untolerated"), &taint, &[], now);
        assert_eq!(c.work[&stored("untolerated")].fire, now);
        // Each taint takes the first toleration that tolerates it (`GetMatchingTolerations`).
        c.process(stored("for-a-while"), &taint, &[tol(Some(30)), tol(Some(10))], now);
        assert_eq!(c.work[&stored("for-a-while")].fire, now + Duration::from_secs(30));
        c.process(stored("forever"), &taint, &[tol(None)], now);
        assert!(!c.work.contains_key(&stored("forever")));
        let later = now + Duration::from_secs(5);
        // Work created earlier is kept when it would not fire later than new work would.
        c.process(stored("for-a-while"), &taint, &[tol(Some(10))], later);
        assert_eq!(c.work[&stored("for-a-while")].fire, now + Duration::from_secs(30));
        c.process(stored("for-a-while"), &[], &[], later);
        assert!(!c.work.contains_key(&stored("for-a-while")));
    }
}
