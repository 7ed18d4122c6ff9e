//! Pod-failure back-off (backoff_utils.go): the in-memory record carried between syncs, the pod finish
//! time, and the remaining delay `base·2^(n−1)` (capped) counted from the last failure.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::view::ready_condition;

/// Go's zero `time.Time` (0001-01-01T00:00:00Z): what a missing timestamp reads as upstream.
pub(super) fn go_zero_time() -> Timestamp {
    Timestamp::from_second(-62_135_596_800).unwrap_or(Timestamp::MIN)
}

/// Upstream `backoffRecord` (without the key: the shell keys it by Job).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackoffRecord {
    pub failures_after_last_success: i32,
    pub last_failure_time: Option<Timestamp>,
}

/// `newBackoffRecord`: folds the pods that finished since the last counted sync into the record.
/// Takes the finish times of the new succeeded and failed pods.
pub(super) fn new_backoff_record(
    prev: Option<&BackoffRecord>,
    succeeded: &mut [Timestamp],
    failed: &mut [Timestamp],
) -> BackoffRecord {
    let mut record = prev.cloned().unwrap_or_default();
    succeeded.sort_unstable();
    failed.sort_unstable();
    let Some(&last_success) = succeeded.last() else {
        if let Some(&last_failure) = failed.last() {
            let n = i32::try_from(failed.len()).unwrap_or(i32::MAX);
            record.failures_after_last_success = record.failures_after_last_success.saturating_add(n);
            record.last_failure_time = Some(last_failure);
        }
        return record;
    };
    record.failures_after_last_success = 0;
    record.last_failure_time = None;
    for &t in failed.iter().rev() {
        if t <= last_success {
            break;
        }
        if record.last_failure_time.is_none() {
            record.last_failure_time = Some(t);
        }
        record.failures_after_last_success += 1;
    }
    record
}

/// `getFinishedTime`: latest container `finishedAt` (all containers, then init containers, must be
/// terminated), else the `Ready=False` transition time, else `deletionTimestamp − grace`, else the
/// creation time.
pub fn finished_time(pod: &Pod) -> Timestamp {
    if let Some(t) = finish_time_from_containers(pod) {
        return t;
    }
    if let Some(c) = ready_condition(pod)
        && c.status == "False"
        && let Some(t) = c.last_transition_time.as_ref().map(|t| t.0)
    {
        return t;
    }
    if let Some(deleted) = pod.metadata.deletion_timestamp.as_ref() {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        return deleted.0.checked_sub(SignedDuration::from_secs(grace)).unwrap_or(deleted.0);
    }
    pod.metadata.creation_timestamp.as_ref().map_or_else(go_zero_time, |t| t.0)
}

fn finish_time_from_containers(pod: &Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref()?;
    let latest = |prev: Option<Timestamp>, list: &[ContainerStatus]| -> Result<Option<Timestamp>, ()> {
        let mut latest = prev;
        for cs in list {
            let t = cs
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .and_then(|t| t.finished_at.as_ref())
                .map(|t| t.0)
                .ok_or(())?;
            if latest.is_none_or(|l| l < t) {
                latest = Some(t);
            }
        }
        Ok(latest)
    };
    let from_containers = latest(None, status.container_statuses.as_deref().unwrap_or(&[])).ok()?;
    latest(from_containers, status.init_container_statuses.as_deref().unwrap_or(&[])).ok()?
}

/// `getRemainingTimeForFailuresCount`.
pub(super) fn remaining_time(
    failures: i64,
    last_failure: Option<Timestamp>,
    now: Timestamp,
    base: Duration,
    max: Duration,
) -> Duration {
    let Some(last_failure) = last_failure else { return Duration::ZERO };
    if failures <= 0 {
        return Duration::ZERO;
    }
    let mut backoff = base;
    for _ in 1..failures {
        if backoff.is_zero() {
            break;
        }
        backoff = backoff.saturating_mul(2);
        if backoff >= max {
            backoff = max;
            break;
        }
    }
    let backoff = SignedDuration::try_from(backoff).unwrap_or(SignedDuration::MAX);
    let elapsed = now.duration_since(last_failure);
    if backoff < elapsed {
        return Duration::ZERO;
    }
    Duration::try_from(backoff - elapsed).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // table rows are tuples, as upstream's are anonymous structs
mod tests {
    use super::*;
    use crate::job::core::testutil::{mk_pod, ts};

    fn t0() -> Timestamp {
        ts("2009-11-10T23:00:00Z")
    }

    /// TestNewBackoffRecord, every row.
    #[test]
    fn new_backoff_record_matches_test_new_backoff_record() {
        let t = t0();
        let ms = |n: i64| t.checked_sub(SignedDuration::from_millis(n)).unwrap();
        let rec = |n, time: Option<Timestamp>| BackoffRecord {
            failures_after_last_success: n,
            last_failure_time: time,
        };
        let prev2 = rec(2, None);
        let cases: Vec<(&str, Option<&BackoffRecord>, Vec<Timestamp>, Vec<Timestamp>, BackoffRecord)> = vec![
            ("Empty backoff store and one new failure", None, vec![], vec![t], rec(1, Some(t))),
            ("Empty backoff store and two new failures", None, vec![], vec![t, ms(1)], rec(2, Some(t))),
            (
                "Empty backoff store, two failures followed by success",
                None,
                vec![t],
                vec![ms(2), ms(1)],
                rec(0, None),
            ),
            (
                "Empty backoff store, two failures, one success and two more failures",
                None,
                vec![ms(2)],
                vec![t, ms(4), ms(3), ms(1)],
                rec(2, Some(t)),
            ),
            (
                "Backoff store having failure count 2 and one new failure",
                Some(&prev2),
                vec![],
                vec![t],
                rec(3, Some(t)),
            ),
            (
                "Empty backoff store with success and failure at same timestamp",
                None,
                vec![t],
                vec![t],
                rec(0, None),
            ),
            ("Empty backoff store with no success/failure", None, vec![], vec![], rec(0, None)),
            ("Empty backoff store with one success", None, vec![t], vec![], rec(0, None)),
        ];
        for (name, prev, mut succ, mut fail, want) in cases {
            assert_eq!(new_backoff_record(prev, &mut succ, &mut fail), want, "{name}");
        }
    }

    /// TestGetRemainingBackoffTime (base 5s, max 700s) = UPSTREAM.md §2 back-off table.
    #[test]
    fn remaining_time_matches_test_get_remaining_backoff_time() {
        let t = t0();
        let s = |n| Duration::from_secs(n);
        let after = |n: i64| t.checked_add(SignedDuration::from_secs(n)).unwrap();
        let cases: Vec<(&str, i64, Option<Timestamp>, Timestamp, Duration)> = vec![
            ("no failures", 0, None, t, s(0)),
            ("one failure; current time and failure time are same", 1, Some(t), t, s(5)),
            ("one failure; current time == 1 second + failure time", 1, Some(t), after(1), s(4)),
            ("one failure; current time == expected backoff time", 1, Some(t), after(5), s(0)),
            ("one failure; current time == expected backoff time + 1 Second", 1, Some(t), after(6), s(0)),
            ("three failures; current time and failure time are same", 3, Some(t), t, s(20)),
            ("eight failures; ... backoff not exceeding maxBackoff", 8, Some(t), t, s(640)),
            ("nine failures; ... backoff exceeding maxBackoff", 9, Some(t), t, s(700)),
        ];
        for (name, n, last, now, want) in cases {
            assert_eq!(remaining_time(n, last, now, s(5), s(700)), want, "{name}");
        }
        // Upstream defaults: 10s doubling to 10min.
        assert_eq!(remaining_time(1, Some(t), t, s(10), s(600)), s(10));
        assert_eq!(remaining_time(7, Some(t), t, s(10), s(600)), s(600));
        assert_eq!(remaining_time(i64::from(i32::MAX), Some(t), t, s(10), s(600)), s(600));
    }

    /// TestGetFinishedTime, every row.
    #[test]
    fn finished_time_matches_test_get_finished_time() {
        let t = t0();
        let minus = |n: i64| t.checked_sub(SignedDuration::from_secs(n)).unwrap();
        let cases: Vec<(&str, Pod, Timestamp)> = vec![
            (
                "Pod with multiple containers and all containers terminated",
                mk_pod("p").finished_at(minus(1)).finished_at(t).finished_at(minus(2)).build(),
                t,
            ),
            (
                "two containers terminated and one running; fallback to deletionTimestamp",
                mk_pod("p")
                    .finished_at(minus(1))
                    .container_running("r")
                    .finished_at(minus(2))
                    .deleted_at(t, None)
                    .build(),
                t,
            ),
            (
                "fallback to deletionTimestamp",
                mk_pod("p").container_running("r").deleted_at(t, None).build(),
                t,
            ),
            (
                "fallback to deletionTimestamp, decremented by grace period",
                mk_pod("p").container_running("r").deleted_at(t, Some(30)).build(),
                minus(30),
            ),
            (
                "fallback to PodReady.LastTransitionTime when status of the condition is False",
                mk_pod("p").container_terminated_no_time().condition_at("Ready", "False", t).build(),
                t,
            ),
            (
                "skip fallback to PodReady.LastTransitionTime when status of the condition is True",
                mk_pod("p")
                    .container_terminated_no_time()
                    .condition_at("Ready", "True", minus(30))
                    .deleted_at(t, None)
                    .build(),
                t,
            ),
            (
                "fallback to creationTimestamp",
                mk_pod("p").container_terminated_no_time().created_at(t).build(),
                t,
            ),
            (
                "Pod with init container and all containers terminated",
                mk_pod("p").finished_at(minus(1)).init_finished_at(t).build(),
                t,
            ),
        ];
        for (name, pod, want) in cases {
            assert_eq!(finished_time(&pod), want, "{name}");
        }
        // A pod with no status and no timestamps never panics.
        assert_eq!(finished_time(&Pod::default()), go_zero_time());
    }
}
