//! PodGC's decisions, as upstream's `pkg/controller/podgc/gc_controller.go` makes them, on a
//! compact projection of pods and nodes: which pods to force-delete in each of the four passes,
//! in which order, whether to mark them Failed first, and which missing nodes to look up after
//! their quarantine. Time is an argument; no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// upstream `gcCheckPeriod`.
pub const GC_CHECK_PERIOD: Duration = Duration::from_secs(20);
/// upstream `quarantineTime`: how long a node missing from the cache waits before a GET.
pub const QUARANTINE_TIME: Duration = Duration::from_secs(40);
/// kube-controller-manager's `--terminated-pod-gc-threshold` default.
pub const DEFAULT_TERMINATED_POD_THRESHOLD: usize = 12_500;
/// The taint that marks a node out of service (`v1.TaintNodeOutOfService`).
pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// What PodGC looks at of a pod: identity, phase, node, deletion, creation, eviction. Borrowed
/// from the compact cache for the length of a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: Uid<'a>,
    /// `status.phase`; empty when unset (which counts as terminated, as upstream).
    pub phase: &'a str,
    /// `spec.nodeName`; empty when unscheduled.
    pub node_name: &'a str,
    pub deleting: bool,
    /// Finalizers hold it: upstream force-deletes such pods again every pass (the open
    /// k/k#141190 would skip them); `--podgc-skip-finalizer-held` does.
    pub has_finalizers: bool,
    /// `metadata.deletionGracePeriodSeconds == 0`.
    pub grace_zero: bool,
    /// `metadata.creationTimestamp`, seconds since the epoch.
    pub created: i64,
    /// When it terminated ([`super::pod_facts::termination_time`], else `created`).
    pub terminated_at: i64,
    /// `metadata.deletionTimestamp` when `deleting`.
    pub deleted_at: i64,
    /// `status.reason == "Evicted"` (with phase Failed: upstream's `eviction.PodIsEvicted`).
    pub evicted_reason: bool,
}

/// A pod's uid as the cache keeps it: 16 bytes when it is a canonical UUID (as the API server
/// makes them), the text otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uid<'a> {
    Uuid(uuid::Uuid),
    Text(&'a str),
}

impl std::fmt::Display for Uid<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Uid::Uuid(u) => write!(f, "{}", u.as_hyphenated()),
            Uid::Text(t) => f.write_str(t),
        }
    }
}

/// What PodGC keeps of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    pub ready: bool,
    /// Carries a taint with key `node.kubernetes.io/out-of-service`, any value or effect.
    pub out_of_service: bool,
}

/// Why a pod is collected; the `reason` label of upstream's metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    Terminated,
    OutOfService,
    Orphaned,
    Unscheduled,
}

impl Reason {
    /// The metric label value (`metrics.PodGCReason*`).
    pub fn label(self) -> &'static str {
        match self {
            Reason::Terminated => "terminated",
            Reason::OutOfService => "out-of-service",
            Reason::Orphaned => "orphaned",
            Reason::Unscheduled => "unscheduled",
        }
    }
}

/// One force deletion: patch the status to Failed first when the pod is not terminal (with the
/// `DisruptionTarget` condition for orphans), then DELETE with grace period 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub reason: Reason,
    /// The pod is neither Succeeded nor Failed: `markFailedAndDeletePod` patches it first.
    pub mark_failed: bool,
    /// Orphans get `DisruptionTarget=True`, reason `DeletionByPodGC`.
    pub disruption_condition: bool,
}

/// The condition an orphan is marked with.
pub const ORPHAN_CONDITION_REASON: &str = "DeletionByPodGC";
pub const ORPHAN_CONDITION_MESSAGE: &str = "PodGC: node no longer exists";

/// upstream `isPodTerminated`.
pub fn is_terminated(pod: &PodView) -> bool {
    !matches!(pod.phase, "Pending" | "Running" | "Unknown")
}

pub fn is_evicted(pod: &PodView) -> bool {
    pod.phase == "Failed" && pod.evicted_reason
}

pub fn deletion(pod: &PodView, reason: Reason) -> Deletion {
    Deletion {
        namespace: pod.namespace.to_string(),
        name: pod.name.to_string(),
        uid: pod.uid.to_string(),
        reason,
        mark_failed: !matches!(pod.phase, "Succeeded" | "Failed"),
        disruption_condition: reason == Reason::Orphaned,
    }
}

/// upstream `byEvictionAndCreationTimestamp`: evicted first, then oldest, then by name.
pub fn eviction_and_creation_order(a: &PodView<'_>, b: &PodView<'_>) -> std::cmp::Ordering {
    is_evicted(b).cmp(&is_evicted(a)).then(a.created.cmp(&b.created)).then_with(|| a.name.cmp(b.name))
}

fn by_eviction_and_creation(pods: &mut [&PodView<'_>]) {
    pods.sort_by(|a, b| eviction_and_creation_order(a, b));
}

/// `gcTerminated`: the terminated pods beyond `threshold`, evicted and oldest first. A threshold
/// of 0 turns the pass off.
pub fn gc_terminated(pods: &[PodView], threshold: usize) -> Vec<Deletion> {
    if threshold == 0 {
        return Vec::new();
    }
    let mut terminated: Vec<&PodView<'_>> = pods.iter().filter(|p| is_terminated(p)).collect();
    let excess = terminated.len().saturating_sub(threshold);
    if excess == 0 {
        return Vec::new();
    }
    by_eviction_and_creation(&mut terminated);
    terminated.into_iter().take(excess).map(|p| deletion(p, Reason::Terminated)).collect()
}

/// `gcTerminating`: terminating pods on nodes that are not Ready and carry the out-of-service
/// taint. A pod whose node is not in the cache is skipped.
pub fn gc_terminating(pods: &[PodView], nodes: &BTreeMap<String, NodeView>) -> Vec<Deletion> {
    let mut terminating: Vec<&PodView<'_>> = pods
        .iter()
        .filter(|p| p.deleting)
        .filter(|p| nodes.get(p.node_name).is_some_and(|n| !n.ready && n.out_of_service))
        .collect();
    by_eviction_and_creation(&mut terminating);
    terminating.into_iter().map(|p| deletion(p, Reason::OutOfService)).collect()
}

/// `gcOrphaned`, second half: pods bound to nodes a GET found gone.
pub fn gc_orphaned(pods: &[PodView], deleted_nodes: &BTreeSet<String>) -> Vec<Deletion> {
    pods.iter()
        .filter(|p| deleted_nodes.contains(p.node_name))
        .map(|p| deletion(p, Reason::Orphaned))
        .collect()
}

/// `gcUnscheduledTerminating`: terminating pods never bound to a node.
pub fn gc_unscheduled_terminating(pods: &[PodView]) -> Vec<Deletion> {
    pods.iter()
        .filter(|p| p.deleting && p.node_name.is_empty())
        .map(|p| deletion(p, Reason::Unscheduled))
        .collect()
}

/// upstream's `nodeQueue`: a delaying queue of node names missing from the cache. A name is ready
/// for a GET once it has waited `quarantine` since it was first added; adding it again while it
/// waits keeps the earlier time.
#[derive(Debug, Default)]
pub struct Quarantine {
    waiting: BTreeMap<String, Instant>,
}

impl Quarantine {
    /// `gcOrphaned`, first half: every node name pods are bound to that the cache does not have
    /// enters quarantine. Returns the names whose quarantine is over, to be looked up with a GET;
    /// they leave the queue (a later pass adds them again if they are still missing).
    pub fn nodes_to_check(
        &mut self,
        pods: &[PodView],
        nodes: &BTreeMap<String, NodeView>,
        now: Instant,
        quarantine: Duration,
    ) -> Vec<String> {
        for pod in pods.iter().filter(|p| !p.node_name.is_empty() && !nodes.contains_key(p.node_name)) {
            let ready_at = now + quarantine;
            self.waiting
                .entry(pod.node_name.to_string())
                .and_modify(|t| *t = (*t).min(ready_at))
                .or_insert(ready_at);
        }
        let ready: Vec<String> =
            self.waiting.iter().filter(|(_, t)| **t <= now).map(|(n, _)| n.clone()).collect();
        for name in &ready {
            self.waiting.remove(name);
        }
        // A node that came back into the cache while waiting needs no GET (upstream checks
        // `existingNodeNames` as it pops).
        ready.into_iter().filter(|n| !nodes.contains_key(n)).collect()
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3600;

    fn pod<'a>(name: &'a str, phase: &'a str, node: &'a str, created: i64) -> PodView<'a> {
        PodView {
            namespace: "default",
            name,
            uid: Uid::Text(name),
            phase,
            node_name: node,
            deleting: false,
            has_finalizers: false,
            grace_zero: false,
            created,
            terminated_at: created,
            deleted_at: 0,
            evicted_reason: false,
        }
    }

    fn names(d: &[Deletion]) -> Vec<&str> {
        d.iter().map(|d| d.name.as_str()).collect()
    }

    fn node(name: &str, ready: bool, out_of_service: bool) -> (String, NodeView) {
        (name.to_string(), NodeView { name: name.into(), ready, out_of_service })
    }

    /// upstream TestGCTerminated, pods created an hour apart, threshold 1.
    #[test]
    fn gc_terminated_deletes_the_excess_evicted_then_oldest_first() {
        let cases: Vec<(&str, Vec<PodView<'_>>, usize, Vec<&str>)> = vec![
            (
                "delete pod a which is PodFailed and pod b which is PodSucceeded",
                vec![
                    pod("a", "Failed", "n", 0),
                    pod("b", "Succeeded", "n", HOUR),
                    pod("c", "Failed", "n", 2 * HOUR),
                ],
                1,
                vec!["a", "b"],
            ),
            (
                "threshold = 0, disables terminated pod deletion",
                vec![pod("a", "Failed", "n", 0), pod("b", "Succeeded", "n", HOUR)],
                0,
                vec![],
            ),
            (
                "threshold = 1, delete pod b which is PodSucceeded (a is running)",
                vec![
                    pod("a", "Running", "n", 0),
                    pod("b", "Succeeded", "n", HOUR),
                    pod("c", "Failed", "n", 2 * HOUR),
                ],
                1,
                vec!["b"],
            ),
            (
                "evicted pod c goes first, then the oldest",
                vec![
                    pod("a", "Failed", "n", 0),
                    pod("b", "Succeeded", "n", HOUR),
                    PodView { evicted_reason: true, ..pod("c", "Failed", "n", 2 * HOUR) },
                ],
                1,
                vec!["c", "a"],
            ),
            (
                "an empty phase counts as terminated; ties by name",
                vec![
                    pod("b", "", "n", 0),
                    pod("a", "Unknown", "n", 0),
                    pod("c", "Pending", "n", 0),
                    pod("d", "Failed", "n", 0),
                ],
                1,
                vec!["b"],
            ),
        ];
        for (what, pods, threshold, want) in cases {
            assert_eq!(names(&gc_terminated(&pods, threshold)), want, "{what}");
        }
    }

    #[test]
    fn only_pods_that_are_not_terminal_are_marked_failed_before_deletion() {
        let pods = [pod("a", "Failed", "", 0), pod("b", "Running", "", 0), pod("c", "Succeeded", "", 0)];
        let marked: Vec<bool> = pods.iter().map(|p| deletion(p, Reason::Orphaned).mark_failed).collect();
        assert_eq!(marked, [false, true, false]);
        assert!(deletion(&pods[1], Reason::Orphaned).disruption_condition);
        assert!(!deletion(&pods[1], Reason::Terminated).disruption_condition);
    }

    /// upstream TestGCTerminating: only on nodes that are NotReady *and* tainted out-of-service.
    #[test]
    fn terminating_pods_go_only_from_not_ready_out_of_service_nodes() {
        let nodes: BTreeMap<String, NodeView> = [
            node("ready-tainted", true, true),
            node("notready-tainted", false, true),
            node("notready-plain", false, false),
        ]
        .into();
        let mut pods = vec![
            pod("on-ready-tainted", "Running", "ready-tainted", 0),
            pod("on-notready-tainted", "Running", "notready-tainted", 0),
            pod("on-notready-plain", "Running", "notready-plain", 0),
            pod("on-missing-node", "Running", "gone", 0),
            pod("not-deleting", "Running", "notready-tainted", 0),
        ];
        for p in pods.iter_mut().take(4) {
            p.deleting = true;
        }
        let d = gc_terminating(&pods, &nodes);
        assert_eq!(names(&d), ["on-notready-tainted"]);
        assert_eq!(d[0].reason, Reason::OutOfService);
        assert!(d[0].mark_failed);
    }

    /// upstream TestGCUnscheduledTerminating.
    #[test]
    fn unscheduled_terminating_pods_are_collected() {
        let mut pods =
            vec![pod("a", "Pending", "", 0), pod("b", "Pending", "", 0), pod("c", "Running", "n", 0)];
        pods[0].deleting = true;
        pods[2].deleting = true;
        assert_eq!(names(&gc_unscheduled_terminating(&pods)), ["a"]);
    }

    /// upstream TestGCOrphaned: a missing node is looked up only after its quarantine; orphans
    /// after 80s are deleted, after 20s nothing happens; only non-terminal pods are patched.
    #[test]
    fn orphans_wait_out_the_quarantine_then_a_lookup() {
        let t0 = Instant::now();
        let nodes: BTreeMap<String, NodeView> = [node("present", true, false)].into();
        let pods = vec![
            pod("a", "Running", "gone", 0),
            pod("b", "Succeeded", "gone", 0),
            pod("c", "Running", "present", 0),
        ];
        let mut q = Quarantine::default();
        assert!(q.nodes_to_check(&pods, &nodes, t0, QUARANTINE_TIME).is_empty(), "just quarantined");
        assert_eq!(q.len(), 1);
        let at_20s = t0 + Duration::from_secs(20);
        assert!(
            q.nodes_to_check(&pods, &nodes, at_20s, QUARANTINE_TIME).is_empty(),
            "still in quarantine at 20s"
        );
        let at_80s = t0 + Duration::from_secs(80);
        let check = q.nodes_to_check(&pods, &nodes, at_80s, QUARANTINE_TIME);
        assert_eq!(check, ["gone"], "re-adding kept the first time");
        let deleted: BTreeSet<String> = check.into_iter().collect();
        let d = gc_orphaned(&pods, &deleted);
        assert_eq!(names(&d), ["a", "b"]);
        assert_eq!(d.iter().map(|d| d.mark_failed).collect::<Vec<_>>(), [true, false]);
        assert!(d.iter().all(|d| d.reason == Reason::Orphaned && d.disruption_condition));
    }

    #[test]
    fn a_node_that_returns_during_quarantine_needs_no_lookup() {
        let t0 = Instant::now();
        let pods = vec![pod("a", "Running", "flaky", 0)];
        let mut q = Quarantine::default();
        q.nodes_to_check(&pods, &BTreeMap::new(), t0, QUARANTINE_TIME);
        let back: BTreeMap<String, NodeView> = [node("flaky", true, false)].into();
        assert!(q.nodes_to_check(&pods, &back, t0 + Duration::from_secs(41), QUARANTINE_TIME).is_empty());
        assert!(q.is_empty());
    }

    #[test]
    fn metric_labels_are_upstreams() {
        let labels: Vec<&str> =
            [Reason::Terminated, Reason::OutOfService, Reason::Orphaned, Reason::Unscheduled]
                .map(Reason::label)
                .into();
        assert_eq!(labels, ["terminated", "out-of-service", "orphaned", "unscheduled"]);
    }
}
