//! `controller.ActivePods` ordering (controller_utils.go): which active pods to delete first.
//! Unassigned < assigned; Pending < Unknown < Running; not ready < ready; ready for less time < more
//! time; more container restarts < fewer; newer < older (an empty time sorts first).

use std::cmp::{Ordering, Reverse};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::view::{Phase, is_ready, phase_of, ready_condition};

/// A sort key equivalent to `ActivePods.Less` (a lexicographic key, hence a total order).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct ActivePodsKey {
    assigned: bool,
    phase: u8,
    ready: bool,
    ready_since: AfterOrZero,
    restarts: Reverse<i32>,
    created: AfterOrZero,
}

/// `afterOrZero(t1, t2)`: the zero time first, then later times first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AfterOrZero(Option<Timestamp>);

impl Ord for AfterOrZero {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.0, other.0) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(a), Some(b)) => b.cmp(&a),
        }
    }
}

impl PartialOrd for AfterOrZero {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

pub(super) fn active_pods_key(pod: &Pod) -> ActivePodsKey {
    let ready = is_ready(pod);
    let ready_since = if ready {
        ready_condition(pod)
            .filter(|c| c.status == "True")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0)
    } else {
        None
    };
    let restarts = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or(&[])
        .iter()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
        .max(0);
    ActivePodsKey {
        assigned: pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty()),
        phase: match phase_of(pod) {
            Phase::Unknown => 1,
            Phase::Running => 2,
            _ => 0,
        },
        ready,
        ready_since: AfterOrZero(ready_since),
        restarts: Reverse(restarts),
        created: AfterOrZero(pod.metadata.creation_timestamp.as_ref().map(|t| t.0)),
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // table rows are tuples, as upstream's are anonymous structs
mod tests {
    use super::*;
    use crate::job::core::testutil::{mk_pod, ts};

    /// UPSTREAM.md §1 Job 4 ("Excess pods go in ActivePods order: unscheduled, Pending, not-ready
    /// first"); the order of controller_utils_test.go TestSortingActivePods.
    #[test]
    fn active_pods_order_deletes_earliest_stage_first() {
        let t1 = ts("2024-01-01T00:00:00Z");
        let t2 = ts("2024-01-01T00:01:00Z");
        let expected = vec![
            mk_pod("unscheduled").phase("Pending").build(),
            mk_pod("scheduled-pending").phase("Pending").node("n").build(),
            mk_pod("unknown").phase("Unknown").node("n").build(),
            mk_pod("running-not-ready").phase("Running").node("n").build(),
            mk_pod("ready-no-time").phase("Running").node("n").condition("Ready", "True").build(),
            mk_pod("ready-recently").phase("Running").node("n").condition_at("Ready", "True", t2).build(),
            mk_pod("ready-long-ago-restarted")
                .phase("Running")
                .node("n")
                .condition_at("Ready", "True", t1)
                .restarts(3)
                .build(),
            mk_pod("ready-long-ago-newer")
                .phase("Running")
                .node("n")
                .condition_at("Ready", "True", t1)
                .created_at(t2)
                .build(),
            mk_pod("ready-long-ago-older")
                .phase("Running")
                .node("n")
                .condition_at("Ready", "True", t1)
                .created_at(t1)
                .build(),
        ];
        let mut shuffled: Vec<&Pod> = expected.iter().rev().collect();
        shuffled.sort_by_key(|p| active_pods_key(p));
        let names: Vec<_> = shuffled.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
        let want: Vec<_> = expected.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, want);
    }
}
