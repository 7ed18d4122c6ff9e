//! The scheduler: binds each pending pod of `default-scheduler` to a node its filters accept,
//! or marks it `PodScheduled=False`/`Unschedulable` with a `FailedScheduling` event and retries
//! it when nodes or other pods change, with kube-scheduler's backoff.

pub mod fit_error;
pub mod predicates;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::event_recorder::{self, Note, Recorded, Regarding};
use super::follow::{Follower, Following};
use crate::apiserver::meta;
use crate::apiserver::{ApiError, ApiServer, Subresource, Target};
use crate::cluster::sleep_until;
use crate::store::{Change, ChangeKind, ResourceId, StoredObject};
use predicates::{NodeInfo, PodFacts, Rejection, Resources, Usage};

pub const SCHEDULER_NAME: &str = "default-scheduler";
/// kube-scheduler's pod backoff: 1s doubling up to 10s.
const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// `podMaxInUnschedulablePodsDuration`: an unschedulable pod is retried at least this often.
const UNSCHEDULABLE_FLUSH: Duration = Duration::from_secs(300);

type PodKey = (Box<str>, Box<str>);

/// A pod waiting to be scheduled.
#[derive(Default)]
struct Waiting {
    attempts: u32,
    last_attempt: Option<Instant>,
    /// When it is queued to run; `None` while it waits for a change in the cluster.
    due: Option<Instant>,
    event: Option<Recorded>,
}

pub struct Scheduler {
    api: Arc<ApiServer>,
    pods: Target,
    node_rid: ResourceId,
    nodes: HashMap<String, NodeInfo>,
    /// Scheduled, non-terminal pods: their node and requests.
    assigned: HashMap<Box<str>, (String, Resources)>,
    usage: HashMap<String, Usage>,
    waiting: HashMap<PodKey, Waiting>,
    queue: BinaryHeap<Reverse<(Instant, u64, PodKey)>>,
    seq: u64,
    next_node: usize,
}

impl Scheduler {
    pub fn new(api: Arc<ApiServer>) -> Self {
        let pods = api.builtin("", "v1", "pods");
        let node_rid = api.builtin("", "v1", "nodes").rid;
        Self {
            api,
            pods,
            node_rid,
            nodes: HashMap::new(),
            assigned: HashMap::new(),
            usage: HashMap::new(),
            waiting: HashMap::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            next_node: 0,
        }
    }

    /// Runs forever, reacting to pod and node changes.
    pub async fn run(mut self) {
        let (pods, mut following) =
            Following::start(self.api.store().clone(), self.pods.rid, &[self.node_rid]);
        self.resync_nodes();
        for p in pods {
            self.on_pod(&p);
        }
        let mut flush = tokio::time::interval(UNSCHEDULABLE_FLUSH);
        loop {
            let next = self.queue.peek().map(|Reverse((at, _, _))| *at);
            tokio::select! {
                received = following.recv() => if !following.handle(&mut self, received) {
                    return;
                },
                _ = sleep_until(next) => self.run_due(),
                _ = flush.tick() => self.requeue_unschedulable(),
            }
        }
    }

    fn resync_nodes(&mut self) {
        let (nodes, _) = self.api.store().list(self.node_rid, None);
        self.nodes = nodes.iter().map(|n| (n.name.to_string(), NodeInfo::of(&n.value()))).collect();
    }

    fn resync(&mut self, pods: Vec<Arc<StoredObject>>) {
        self.resync_nodes();
        // A pod's requests cannot change once it exists (the sim serves no in-place resize), so
        // the pods counted before keep theirs: a resync after falling behind parses only pods it
        // has not seen bound, where parsing every bound pod again made it fall behind again.
        let known = std::mem::take(&mut self.assigned);
        self.usage.clear();
        let live: std::collections::HashSet<PodKey> =
            pods.iter().map(|p| (p.namespace.clone(), p.name.clone())).collect();
        self.waiting.retain(|k, _| live.contains(k));
        for p in pods {
            self.on_pod_known(&p, &known);
        }
        self.requeue_unschedulable();
    }

    fn on_change(&mut self, change: &Change) {
        let rid = change.object.resource;
        if rid == self.node_rid {
            let name = change.object.name.to_string();
            if change.kind == ChangeKind::Deleted {
                self.nodes.remove(&name);
            } else {
                let info = NodeInfo::of(&change.object.value());
                let unchanged = self.nodes.get(&name).is_some_and(|old| same_for_scheduling(old, &info));
                self.nodes.insert(name, info);
                if unchanged {
                    return;
                }
            }
            self.requeue_unschedulable();
        } else if rid == self.pods.rid {
            if change.kind == ChangeKind::Deleted {
                let key = (change.object.namespace.clone(), change.object.name.clone());
                self.waiting.remove(&key);
                if self.unassign(&change.object.uid) {
                    self.requeue_unschedulable();
                }
                return;
            }
            self.on_pod(&change.object);
        }
    }

    fn on_pod(&mut self, stored: &StoredObject) {
        self.on_pod_known(stored, &HashMap::new());
    }

    /// [`Self::on_pod`], taking a bound pod's requests from `known` (by uid, on the same node)
    /// rather than parsing the pod.
    fn on_pod_known(&mut self, stored: &StoredObject, known: &HashMap<Box<str>, (String, Resources)>) {
        let key = (stored.namespace.clone(), stored.name.clone());
        // The selectable fields answer the common cases without parsing the pod.
        let node = stored.field("spec.nodeName").unwrap_or("");
        if !node.is_empty() {
            self.waiting.remove(&key);
            let phase = stored.field("status.phase").unwrap_or("");
            if phase == "Succeeded" || phase == "Failed" {
                if self.unassign(&stored.uid) {
                    self.requeue_unschedulable();
                }
            } else if !self.assigned.contains_key(&stored.uid) {
                let requests = match known.get(&stored.uid) {
                    Some((on, requests)) if on == node => requests.clone(),
                    _ => predicates::pod_requests(&stored.value()),
                };
                self.usage.entry(node.to_string()).or_default().add(&requests);
                self.assigned.insert(stored.uid.clone(), (node.to_string(), requests));
            }
            return;
        }
        if stored.field("spec.schedulerName").is_some_and(|s| !s.is_empty() && s != SCHEDULER_NAME) {
            self.waiting.remove(&key);
            return;
        }
        let pod = stored.value();
        let gated =
            pod.pointer("/spec/schedulingGates").and_then(Value::as_array).is_some_and(|g| !g.is_empty());
        if gated || meta::is_deleting(&pod) {
            self.waiting.remove(&key);
            return;
        }
        if !self.waiting.contains_key(&key) {
            self.waiting.insert(key.clone(), Waiting::default());
            self.enqueue(key, Instant::now());
        }
    }

    /// Forgets a scheduled pod; says whether it freed anything.
    fn unassign(&mut self, uid: &str) -> bool {
        let Some((node, requests)) = self.assigned.remove(uid) else { return false };
        if let Some(u) = self.usage.get_mut(&node) {
            u.remove(&requests);
        }
        true
    }

    fn enqueue(&mut self, key: PodKey, at: Instant) {
        if let Some(w) = self.waiting.get_mut(&key) {
            w.due = Some(at);
            self.seq += 1;
            self.queue.push(Reverse((at, self.seq, key)));
        }
    }

    /// A change that may make unschedulable pods fit: each goes back to the queue once its
    /// backoff has passed (`MoveAllToActiveOrBackoffQueue`).
    fn requeue_unschedulable(&mut self) {
        let parked: Vec<(PodKey, Instant)> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.due.is_none())
            .map(|(k, w)| (k.clone(), w.last_attempt.map_or_else(Instant::now, |t| t + backoff(w.attempts))))
            .collect();
        for (key, at) in parked {
            self.enqueue(key, at);
        }
    }

    fn run_due(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((at, _, _))) = self.queue.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, _, key))) = self.queue.pop() else { break };
            // Entries superseded by a later enqueue are skipped.
            if self.waiting.get(&key).and_then(|w| w.due) != Some(at) {
                continue;
            }
            if let Err(e) = self.schedule_one(&key)
                && e.code != 404
                && e.code != 409
            {
                tracing::warn!(pod = %key.1, namespace = %key.0, error = %e, "scheduling failed");
            }
        }
    }

    /// One scheduling cycle: filter every node, bind to the best, or report why none fits.
    fn schedule_one(&mut self, key: &PodKey) -> Result<(), ApiError> {
        let Some(stored) = self.api.store().get(self.pods.rid, &key.0, &key.1) else {
            self.waiting.remove(key);
            return Ok(());
        };
        let pod = stored.value();
        if pod.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty()) {
            self.waiting.remove(key);
            return Ok(());
        }
        let facts = PodFacts::of(&pod);
        let empty = Usage::default();
        let mut names: Vec<&String> = self.nodes.keys().collect();
        names.sort();
        let mut feasible: Vec<(usize, &String)> = Vec::new();
        let mut rejections: Vec<Rejection> = Vec::new();
        for name in names {
            let node = &self.nodes[name];
            match predicates::filter(&facts, node, self.usage.get(name).unwrap_or(&empty)) {
                Ok(()) => feasible.push((predicates::intolerable_prefer_no_schedule(&facts, node), name)),
                Err(r) => rejections.push(r),
            }
        }
        let best = feasible.iter().map(|(score, _)| *score).min();
        let candidates: Vec<String> =
            feasible.iter().filter(|(s, _)| Some(*s) == best).map(|(_, n)| (*n).clone()).collect();
        if candidates.is_empty() {
            let message = fit_error::message(&rejections, facts.preemption_never);
            return self.unschedulable(key, &stored, &message);
        }
        let node = candidates[self.next_node % candidates.len()].clone();
        self.next_node = self.next_node.wrapping_add(1);
        let was_reported = pod.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
            cs.iter().any(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled"))
        });
        self.bind(key, &stored, &node, facts.requests, was_reported)
    }

    /// The binding subresource's effect: `spec.nodeName` and `PodScheduled=True`.
    fn bind(
        &mut self,
        key: &PodKey,
        stored: &StoredObject,
        node: &str,
        requests: Resources,
        was_reported: bool,
    ) -> Result<(), ApiError> {
        let uid = stored.uid.clone();
        let bound = self.api.update_with(&self.pods, &key.0, &key.1, Subresource::Main, |pod| {
            if meta::str_field(pod, "uid") != Some(&*uid)
                || pod.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty())
            {
                return Ok(false);
            }
            pod["spec"]["nodeName"] = json!(node);
            Ok(true)
        })?;
        if bound.pointer_node() != Some(node) || bound.uid != uid {
            return Ok(());
        }
        // Count the pod now rather than when its change arrives, so the next pod in this
        // batch sees the node's room as it is.
        self.waiting.remove(key);
        self.usage.entry(node.to_string()).or_default().add(&requests);
        self.assigned.insert(uid.clone(), (node.to_string(), requests));
        // A pod bound at its first attempt has no PodScheduled condition yet; the kubelet's
        // first status write, which follows at once, sets it True. One that was Unschedulable
        // must not keep saying so meanwhile. (Two writes where the binding subresource makes
        // one: a write here cannot change spec and status together.)
        if was_reported {
            let now = meta::now_seconds();
            self.api.update_with(&self.pods, &key.0, &key.1, Subresource::Status, |pod| {
                if meta::str_field(pod, "uid") != Some(&*uid) {
                    return Ok(false);
                }
                Ok(set_pod_scheduled(pod, "True", None, &now))
            })?;
        }
        let message = format!("Successfully assigned {}/{} to {node}", key.0, key.1);
        let note = Note { kind: "Normal", reason: "Scheduled", action: "Binding", message: &message };
        event_recorder::record_v1(
            &self.api,
            &Regarding::pod(&bound),
            note,
            SCHEDULER_NAME,
            SCHEDULER_NAME,
            None,
        )?;
        Ok(())
    }

    /// `handleSchedulingFailure`: the condition, the event, and the pod parked until the
    /// cluster changes.
    fn unschedulable(&mut self, key: &PodKey, stored: &StoredObject, message: &str) -> Result<(), ApiError> {
        let now_instant = Instant::now();
        let previous = match self.waiting.get_mut(key) {
            Some(w) => {
                w.attempts += 1;
                w.last_attempt = Some(now_instant);
                w.due = None;
                w.event.clone()
            }
            None => return Ok(()),
        };
        let now = meta::now_seconds();
        let uid = stored.uid.clone();
        self.api.update_with(&self.pods, &key.0, &key.1, Subresource::Status, |pod| {
            if meta::str_field(pod, "uid") != Some(&*uid) {
                return Ok(false);
            }
            Ok(set_pod_scheduled(pod, "False", Some(("Unschedulable", message)), &now))
        })?;
        let note = Note { kind: "Warning", reason: "FailedScheduling", action: "Scheduling", message };
        let recorded = event_recorder::record_v1(
            &self.api,
            &Regarding::pod(stored),
            note,
            SCHEDULER_NAME,
            SCHEDULER_NAME,
            previous.as_ref(),
        )?;
        if let Some(w) = self.waiting.get_mut(key) {
            w.event = Some(recorded);
        }
        Ok(())
    }
}

trait NodeNameOf {
    fn pointer_node(&self) -> Option<&str>;
}

impl NodeNameOf for StoredObject {
    /// `spec.nodeName` from the selectable fields, without parsing the object.
    fn pointer_node(&self) -> Option<&str> {
        self.field("spec.nodeName").filter(|n| !n.is_empty())
    }
}

/// Whether a node change leaves everything the filters look at as it was.
fn same_for_scheduling(a: &NodeInfo, b: &NodeInfo) -> bool {
    a.labels == b.labels
        && a.unschedulable == b.unschedulable
        && a.taints == b.taints
        && a.allocatable == b.allocatable
}

fn backoff(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(8);
    (INITIAL_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF)
}

/// `podutil.UpdatePodCondition` for `PodScheduled`: the transition time moves only when the
/// status does. Says whether anything changed.
fn set_pod_scheduled(pod: &mut Value, status: &str, why: Option<(&str, &str)>, now: &str) -> bool {
    let mut condition =
        json!({"type": "PodScheduled", "status": status, "lastProbeTime": null, "lastTransitionTime": now});
    if let Some((reason, message)) = why {
        condition["reason"] = json!(reason);
        condition["message"] = json!(message);
    }
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    let conditions = &mut pod["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Some(list) = conditions.as_array_mut() else { return false };
    match list.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled")) {
        Some(existing) => {
            if existing.get("status").and_then(Value::as_str) == Some(status) {
                condition["lastTransitionTime"] =
                    existing.get("lastTransitionTime").cloned().unwrap_or(json!(now));
            }
            if *existing == condition {
                return false;
            }
            *existing = condition;
        }
        None => list.push(condition),
    }
    true
}

impl Follower for Scheduler {
    fn on_change(&mut self, change: &Change) {
        Scheduler::on_change(self, change);
    }

    fn relist(&mut self, pods: Vec<Arc<StoredObject>>) {
        self.resync(pods);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_to_ten() {
        let seconds: Vec<u64> = (1..=6).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(seconds, [1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn pod_scheduled_keeps_its_transition_time_while_the_status_holds() {
        let mut pod = json!({"status": {"phase": "Pending"}});
        assert!(set_pod_scheduled(&mut pod, "False", Some(("Unschedulable", "a")), "t1"));
        assert!(!set_pod_scheduled(&mut pod, "False", Some(("Unschedulable", "a")), "t2"));
        assert!(set_pod_scheduled(&mut pod, "False", Some(("Unschedulable", "b")), "t3"));
        assert_eq!(pod["status"]["conditions"][0]["lastTransitionTime"], "t1");
        assert!(set_pod_scheduled(&mut pod, "True", None, "t4"));
        let c = &pod["status"]["conditions"][0];
        assert_eq!((c["status"].as_str(), c["lastTransitionTime"].as_str()), (Some("True"), Some("t4")));
        assert!(c.get("reason").is_none());
    }
}
