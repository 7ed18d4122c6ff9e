//! PodGC after a node is lost: every pod bound to a deleted node is gone within the bound
//! (upstream's quarantine of 40 s, a PodGC period of 20 s, and a slack), by the audit log's
//! deletes and the cluster's objects at the end. Pods that vanished with no delete request (the
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

/// Passes when every pod of every lost node was deleted within `bound` of the loss and none is
/// left in `left` (the pods that still exist at the end). Also answers each delete's lag
/// (seconds).
pub fn orphans_collected(
    events: &[AuditEvent],
    lost: &[LostNode],
    left: &BTreeSet<(String, String)>,
    bound: Duration,
) -> (Outcome, Vec<f64>) {
    let mut violations = Vec::new();
    let mut lags = Vec::new();
    let mut checked = 0;
    for node in lost {
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
        &format!("every pod of a deleted node deleted within {bound:?}"),
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

    #[test]
    fn pods_of_a_lost_node_must_go_within_the_bound() {
        let bound = Duration::from_secs(75);
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
            let (outcome, measured) = orphans_collected(&events, &[lost(&["a"])], &left, bound);
            assert_eq!(outcome.passed, passes, "{name}: {outcome:?}");
            assert_eq!(measured.len(), lags, "{name}");
        }
    }
}
