//! The message of an unschedulable pod's `PodScheduled=False` condition and `FailedScheduling`
//! event: `framework.FitError.Error()` with the DefaultPreemption PostFilter's message.

use std::collections::BTreeMap;

use super::predicates::Rejection;

/// `schedulingframework.ErrNoNodesAvailable`.
pub const NO_NODES_AVAILABLE: &str = "no nodes available to schedule pods";
/// What preemption says of a node where a filter failed unresolvably.
const PREEMPTION_NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// What preemption says of a node with no lower-priority pods to remove (the sim never finds
/// victims: it does not preempt).
const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

/// `sortReasonsHistogram`: "count reason" strings in Go's `sort.Strings` (byte) order.
fn histogram<'a>(reasons: impl Iterator<Item = &'a str>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reasons {
        *counts.entry(r).or_default() += 1;
    }
    let mut lines: Vec<String> = counts.into_iter().map(|(r, n)| format!("{n} {r}")).collect();
    lines.sort();
    lines.join(", ")
}

/// `FitError.Error()` for a pod no node took: one rejection per node.
pub fn message(rejections: &[Rejection], preemption_never: bool) -> String {
    let nodes = rejections.len();
    if nodes == 0 {
        return NO_NODES_AVAILABLE.to_string();
    }
    let filters = histogram(rejections.iter().flat_map(|r| r.reasons.iter().map(String::as_str)));
    let post_filter = if preemption_never {
        "preemption: not eligible due to preemptionPolicy=Never.".to_string()
    } else {
        let per_node = histogram(
            rejections.iter().map(|r| if r.unresolvable { PREEMPTION_NOT_HELPFUL } else { NO_VICTIMS }),
        );
        format!("preemption: 0/{nodes} nodes are available: {per_node}.")
    };
    format!("0/{nodes} nodes are available: {filters}. {post_filter}")
}

#[cfg(test)]
mod tests {
    use super::super::predicates::{REASON_NODE_AFFINITY, REASON_UNSCHEDULABLE, REASON_UNTOLERATED_TAINT};
    use super::*;

    fn unresolvable(reason: &str) -> Rejection {
        Rejection { reasons: vec![reason.into()], unresolvable: true }
    }

    /// Messages as kube-scheduler writes them (`TestFitError`, `TestPreempt` in
    /// framework/preemption, and the DefaultPreemption PostFilter's "preemption: " prefix).
    #[test]
    fn messages_as_kube_scheduler_writes_them() {
        let cases: Vec<(&str, Vec<Rejection>, bool, &str)> = vec![
            ("no nodes at all", vec![], false, "no nodes available to schedule pods"),
            (
                "taint and affinity",
                vec![
                    unresolvable(REASON_UNTOLERATED_TAINT),
                    unresolvable(REASON_NODE_AFFINITY),
                    unresolvable(REASON_NODE_AFFINITY),
                ],
                false,
                "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
            ),
            (
                "resources leave room for preemption",
                vec![
                    Rejection {
                        reasons: vec!["Insufficient cpu".into(), "Insufficient memory".into()],
                        unresolvable: false,
                    },
                    Rejection { reasons: vec!["Insufficient cpu".into()], unresolvable: false },
                    unresolvable(REASON_UNSCHEDULABLE),
                ],
                false,
                "0/3 nodes are available: 1 Insufficient memory, 1 node(s) were unschedulable, 2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.",
            ),
            (
                "preemptionPolicy Never",
                vec![Rejection { reasons: vec!["Insufficient cpu".into()], unresolvable: false }],
                true,
                "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.",
            ),
        ];
        for (name, rejections, never, want) in cases {
            assert_eq!(message(&rejections, never), want, "{name}");
        }
    }
}
