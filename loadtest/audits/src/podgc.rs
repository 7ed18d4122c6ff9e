//! PodGC after a node is lost: every pod bound to a deleted node is gone within its node's bound
//! ([`orphans_bound`]), by the audit log's deletes and the cluster's objects at the end. Pods that vanished with no delete request (the
//! garbage collector's cascade after their Job's TTL) count as gone, with no lag.

use std::collections::BTreeSet;
use std::time::Duration;

use batchfleet_sim::audit::{AuditEvent, Stage};
use jiff::Timestamp;

use crate::Outcome;

/// A node deleted under load, and the pods bound to it then (namespace, name).
#[derive(Debug, Clone, PartialEq)]
pub struct LostNode {
    pub node: String,
    pub at: Timestamp,
    pub pods: Vec<(String, String)>,
}

/// How PodGC paces itself, which bounds how long a lost node's pods may stay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodGcPace {
    /// How often PodGC runs (upstream's `gcCheckPeriod`, 20 s).
    pub period: Duration,
    /// How long a node must stay missing before its pods go (upstream's `quarantineTime`, 40 s).
    pub quarantine: Duration,
    /// The PodGC client's rate limit (kube-controller-manager's `--kube-api-qps`, 20); 0 for
    /// none, as the flag's 0.
    pub client_qps: f64,
    /// Room for a loaded machine.
    pub slack: Duration,
}

/// How long after the loss the pods of a node that held `pods` may still exist. Upstream's PodGC
/// notices the missing node at its next pass, quarantines it, and then, one pod after another,
/// marks each Failed with a `DisruptionTarget` condition (a status patch) and deletes it: two
/// writes per pod through the client's rate limit. So the bound grows with the node's pods.
pub fn orphans_bound(pace: PodGcPace, pods: usize) -> Duration {
    let writing = if pace.client_qps > 0.0 {
        Duration::try_from_secs_f64(2.0 * pods as f64 / pace.client_qps).unwrap_or(Duration::MAX)
    } else {
        Duration::ZERO
    };
    (pace.period + pace.quarantine + pace.slack).saturating_add(writing)
}

/// Passes when every pod of every lost node was deleted within its node's bound
/// ([`orphans_bound`]) of the loss and none is left in `left` (the pods that still exist at the
/// end). Also answers each delete's lag (seconds).
pub fn orphans_collected(
    events: &[AuditEvent],
    lost: &[LostNode],
    left: &BTreeSet<(String, String)>,
    pace: PodGcPace,
) -> (Outcome, Vec<f64>) {
    let mut violations = Vec::new();
    let mut lags = Vec::new();
    let mut checked = 0;
    let mut bounds = Vec::new();
    for node in lost {
        let bound = orphans_bound(pace, node.pods.len());
        bounds.push(format!("{} ({} pods): {:.0}s", node.node, node.pods.len(), bound.as_secs_f64()));
        for (namespace, name) in &node.pods {
            checked += 1;
            let deleted = events
                .iter()
                .filter(|e| e.verb == "delete" && e.stage == Stage::ResponseComplete && e.succeeded())
                .filter(|e| {
                    e.object_ref
                        .as_ref()
                        .is_some_and(|o| o.resource == "pods" && o.namespace == *namespace && o.name == *name)
                })
                .filter_map(|e| e.request_received_timestamp.parse::<Timestamp>().ok())
                .filter(|t| *t >= node.at)
                .min();
            let pod = format!("{namespace}/{name} of {}", node.node);
            if left.contains(&(namespace.clone(), name.clone())) {
                violations.push(format!("{pod} still exists"));
                continue;
            }
            if let Some(deleted) = deleted {
                let lag = deleted.duration_since(node.at).as_secs_f64();
                lags.push(lag);
                if lag > bound.as_secs_f64() {
                    violations.push(format!("{pod} deleted {lag:.1}s after the node was lost"));
                }
            }
        }
    }
    let outcome = Outcome::from_violations(
        "lost-nodes-pods-collected",
        &format!(
            "every pod of a deleted node deleted within PodGC's period + quarantine + 2 writes per pod at {} QPS + {:?}: {}",
            pace.client_qps,
            pace.slack,
            if bounds.is_empty() { "no node lost".to_string() } else { bounds.join(", ") }
        ),
        checked,
        "pods of lost nodes",
        violations,
    );
    (outcome, lags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_events::audit_event;

    fn lost(pods: &[&str]) -> LostNode {
        LostNode {
            node: "sim-node-1".into(),
            at: "2026-11-26T10:00:00Z".parse().expect("time"),
            pods: pods.iter().map(|p| ("team-a".to_string(), p.to_string())).collect(),
        }
    }

    fn delete(at: &str, pod: &str) -> AuditEvent {
        audit_event(at, "delete", "fleet-coordinator/0.1.0 (coordinator-0)", "pods", "team-a", pod, 200)
    }

    const PACE: PodGcPace = PodGcPace {
        period: Duration::from_secs(20),
        quarantine: Duration::from_secs(40),
        client_qps: 20.0,
        slack: Duration::from_secs(15),
    };

    #[test]
    fn the_bound_grows_with_the_nodes_pods_at_the_client_rate() {
        // upstream gc_controller.go: gcOrphaned patches then deletes each orphan in turn.
        assert_eq!(orphans_bound(PACE, 0), Duration::from_secs(75));
        assert_eq!(orphans_bound(PACE, 1), Duration::from_millis(75_100));
        assert_eq!(orphans_bound(PACE, 600), Duration::from_secs(135));
        let unlimited = PodGcPace { client_qps: 0.0, ..PACE };
        assert_eq!(
            orphans_bound(unlimited, 600),
            Duration::from_secs(75),
            "no client limit: the passes alone"
        );
    }

    #[test]
    fn pods_of_a_lost_node_must_go_within_the_bound() {
        let none = BTreeSet::new();
        // (what, audit events, pods left at the end, passes, lags measured)
        type Case = (&'static str, Vec<AuditEvent>, BTreeSet<(String, String)>, bool, usize);
        let cases: Vec<Case> = vec![
            (
                "deleted after the quarantine",
                vec![delete("2026-11-26T10:00:55.000000Z", "a")],
                none.clone(),
                true,
                1,
            ),
            ("deleted too late", vec![delete("2026-11-26T10:01:30.000000Z", "a")], none.clone(), false, 1),
            ("gone with its Job, no delete request", vec![], none.clone(), true, 0),
            (
                "still there at the end",
                vec![],
                BTreeSet::from([("team-a".to_string(), "a".to_string())]),
                false,
                0,
            ),
            (
                "a delete before the loss does not count",
                vec![delete("2026-11-26T09:59:00.000000Z", "a")],
                none,
                true,
                0,
            ),
        ];
        for (name, events, left, passes, lags) in cases {
            let (outcome, measured) = orphans_collected(&events, &[lost(&["a"])], &left, PACE);
            assert_eq!(outcome.passed, passes, "{name}: {outcome:?}");
            assert_eq!(measured.len(), lags, "{name}");
        }
    }
}
