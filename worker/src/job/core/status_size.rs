//! The size guard on `status.completedIndexes`/`status.failedIndexes` (issue 30 §4,
//! docs/beyond-upstream.md "Very large Indexed Jobs"): an Indexed Job whose index strings grow
//! towards the API server's request size limit gets the condition [`STATUS_SIZE_NEAR_LIMIT`] and a
//! Warning Event *before* its status writes start to fail, since once they fail the Job can no
//! longer be counted at all. The strings keep upstream's compressed interval form; this only
//! measures them.

use std::fmt::{self, Write as _};

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition};

use super::conditions::{self, FALSE, TRUE};
use super::intervals::OrderedIntervals;
use super::plan::Event;

/// The condition an Indexed Job carries while its status is near the size limit.
pub const STATUS_SIZE_NEAR_LIMIT: &str = "batchfleet.io/StatusSizeNearLimit";
pub const REASON_NEAR_LIMIT: &str = "IndexesNearSizeLimit";
pub const REASON_BELOW_LIMIT: &str = "IndexesBelowSizeLimit";
pub const EVENT_NEAR_LIMIT: &str = "StatusSizeNearLimit";
pub const EVENT_BELOW_LIMIT: &str = "StatusSizeBelowLimit";

/// "Near": the estimated object reaches this share of the limit.
pub const NEAR_PERCENT: u64 = 80;
/// The condition clears only below this share, so a Job hovering at the threshold does not send
/// an Event per sync.
pub const CLEAR_PERCENT: u64 = 70;

/// The estimated size of the Job object as the next status write would send it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusSize {
    /// Bytes of `completedIndexes` (the string, without JSON quoting).
    pub completed_indexes: u64,
    /// Bytes of `failedIndexes`.
    pub failed_indexes: u64,
    /// Everything else of the Job, serialized as JSON.
    pub rest: u64,
}

impl StatusSize {
    pub fn total(&self) -> u64 {
        self.completed_indexes + self.failed_indexes + self.rest
    }
}

/// Counts bytes written, so sizes are measured without building the strings.
#[derive(Default)]
struct ByteCount(u64);

impl fmt::Write for ByteCount {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0 += s.len() as u64;
        Ok(())
    }
}

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Length of the interval form of `intervals`, as upstream's `String()` writes it.
pub(super) fn formatted_len(intervals: &OrderedIntervals) -> u64 {
    let mut n = ByteCount::default();
    let _ = write!(n, "{intervals}");
    n.0
}

/// The size `job` will have once its index strings are `completed` and `failed`: the Job as
/// read, serialized, minus the strings it has now, plus the new ones.
pub(super) fn estimate(
    job: &Job,
    completed: &OrderedIntervals,
    failed: Option<&OrderedIntervals>,
) -> StatusSize {
    let mut whole = ByteCount::default();
    // Serializing a Job cannot fail (no maps with non-string keys); 0 would only under-estimate.
    let _ = serde_json::to_writer(&mut whole, job);
    let status = job.status.as_ref();
    let old = |s: Option<&String>| s.map_or(0, |s| s.len() as u64);
    let old_strings = old(status.and_then(|s| s.completed_indexes.as_ref()))
        + old(status.and_then(|s| s.failed_indexes.as_ref()));
    StatusSize {
        completed_indexes: formatted_len(completed),
        failed_indexes: failed.map_or(0, formatted_len),
        rest: whole.0.saturating_sub(old_strings),
    }
}

/// What the guard decides for one sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Guard {
    /// Nothing to change.
    Keep,
    /// Set the condition `True` and warn.
    Near(String),
    /// Set the condition `False` (it was `True`).
    Below(String),
}

/// The guard's decision from the estimated size, the limit (0: off) and whether the condition is
/// `True` now. Near at ≥ [`NEAR_PERCENT`] of the limit; clears below [`CLEAR_PERCENT`].
pub(super) fn decide(size: &StatusSize, limit: u64, near_now: bool) -> Guard {
    if limit == 0 {
        return Guard::Keep;
    }
    let total = size.total();
    let percent = total.saturating_mul(100) / limit;
    let message = format!(
        "completedIndexes is {} bytes and failedIndexes {} bytes; with the rest of the Job (~{} bytes) \
         the object is ~{} bytes, {}% of the {}-byte limit (--job-status-size-limit-bytes); status \
         writes fail beyond the API server's limit",
        size.completed_indexes, size.failed_indexes, size.rest, total, percent, limit
    );
    let near = total.saturating_mul(100) >= limit.saturating_mul(NEAR_PERCENT);
    let clear = total.saturating_mul(100) < limit.saturating_mul(CLEAR_PERCENT);
    match (near_now, near, clear) {
        (false, true, _) => Guard::Near(message),
        (true, _, true) => Guard::Below(message),
        _ => Guard::Keep,
    }
}

/// Applies the guard to the status conditions; returns whether they changed. The condition and
/// its Event change once per transition; the message is not refreshed in between (a status
/// write per sync for a changing byte count is what the guard must not cost).
pub(super) fn apply(
    size: &StatusSize,
    limit: u64,
    conditions: &mut Vec<JobCondition>,
    events: &mut Vec<Event>,
    now: Timestamp,
) -> bool {
    let near_now = conditions::find_true(conditions, STATUS_SIZE_NEAR_LIMIT).is_some();
    match decide(size, limit, near_now) {
        Guard::Keep => false,
        Guard::Near(message) => {
            events.push(Event::warning(EVENT_NEAR_LIMIT, message.clone()));
            conditions::ensure_status(
                conditions,
                STATUS_SIZE_NEAR_LIMIT,
                TRUE,
                REASON_NEAR_LIMIT,
                &message,
                now,
            )
        }
        Guard::Below(message) => {
            events.push(Event::normal(EVENT_BELOW_LIMIT, message.clone()));
            conditions::ensure_status(
                conditions,
                STATUS_SIZE_NEAR_LIMIT,
                FALSE,
                REASON_BELOW_LIMIT,
                &message,
                now,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::core::intervals::Interval;
    use crate::job::core::testutil::*;

    fn every_other(n: i64, offset: i64) -> OrderedIntervals {
        OrderedIntervals((0..n).filter(|i| i % 2 == offset).map(|i| Interval { first: i, last: i }).collect())
    }

    fn size(total: u64) -> StatusSize {
        StatusSize {
            completed_indexes: total / 2,
            failed_indexes: total / 4,
            rest: total - total / 2 - total / 4,
        }
    }

    #[test]
    fn formatted_len_is_the_length_of_upstreams_string() {
        for iv in [
            OrderedIntervals::default(),
            OrderedIntervals(vec![Interval { first: 0, last: 0 }]),
            OrderedIntervals(vec![Interval { first: 1, last: 2 }, Interval { first: 4, last: 99 }]),
            every_other(1000, 1),
        ] {
            assert_eq!(formatted_len(&iv), iv.to_string().len() as u64, "{iv}");
        }
        // 100,000 completions, every other index: 50,000 numbers of 1 to 5 digits and commas.
        let odd = every_other(100_000, 1);
        assert_eq!(formatted_len(&odd), 294_444);
    }

    /// The guard's table: (near now, total bytes, limit) → decision.
    #[test]
    fn near_at_80_percent_clears_below_70() {
        let cases: &[(&str, bool, u64, u64, &str)] = &[
            ("off with limit 0", false, 10_000_000, 0, "keep"),
            ("well below", false, 500, 1000, "keep"),
            ("just below near", false, 799, 1000, "keep"),
            ("at 80% becomes near", false, 800, 1000, "near"),
            ("beyond the limit is near", false, 2000, 1000, "near"),
            ("already near stays", true, 900, 1000, "keep"),
            ("between 70% and 80% stays near", true, 750, 1000, "keep"),
            ("at 70% stays near", true, 700, 1000, "keep"),
            ("below 70% clears", true, 699, 1000, "below"),
            ("between 70% and 80% not near stays not near", false, 750, 1000, "keep"),
        ];
        for (name, near_now, total, limit, want) in cases {
            let got = match decide(&size(*total), *limit, *near_now) {
                Guard::Keep => "keep",
                Guard::Near(_) => "near",
                Guard::Below(_) => "below",
            };
            assert_eq!(got, *want, "{name}");
        }
    }

    #[test]
    fn message_gives_both_strings_the_rest_and_the_limit() {
        let s = StatusSize { completed_indexes: 600, failed_indexes: 250, rest: 50 };
        let Guard::Near(msg) = decide(&s, 1000, false) else { panic!("not near") };
        assert_eq!(
            msg,
            "completedIndexes is 600 bytes and failedIndexes 250 bytes; with the rest of the Job (~50 \
             bytes) the object is ~900 bytes, 90% of the 1000-byte limit (--job-status-size-limit-bytes); \
             status writes fail beyond the API server's limit"
        );
    }

    #[test]
    fn estimate_replaces_the_strings_the_job_has_with_the_new_ones() {
        let job = mk_job("j", 1, 10, 6).indexed().completed_indexes("0-2").failed_indexes("5").build();
        let whole = serde_json::to_vec(&job).unwrap().len() as u64;
        let completed = OrderedIntervals::parse("0-3,7", 10);
        let failed = OrderedIntervals::parse("5,9", 10);
        let s = estimate(&job, &completed, Some(&failed));
        assert_eq!(s.completed_indexes, "0-3,7".len() as u64);
        assert_eq!(s.failed_indexes, "5,9".len() as u64);
        assert_eq!(s.rest, whole - "0-2".len() as u64 - "5".len() as u64);
    }

    #[test]
    fn condition_and_event_once_per_transition() {
        let now = test_finished_at();
        let mut conds = Vec::new();
        let mut events = Vec::new();
        assert!(!apply(&size(500), 1000, &mut conds, &mut events, now), "below: nothing");
        assert!(conds.is_empty() && events.is_empty());

        assert!(apply(&size(850), 1000, &mut conds, &mut events, now));
        assert_eq!(conds.len(), 1);
        assert_eq!((conds[0].type_.as_str(), conds[0].status.as_str()), (STATUS_SIZE_NEAR_LIMIT, TRUE));
        assert_eq!(conds[0].reason.as_deref(), Some(REASON_NEAR_LIMIT));
        assert_eq!(events.len(), 1);
        assert_eq!(
            (events[0].reason.as_str(), events[0].type_),
            (EVENT_NEAR_LIMIT, super::super::EventType::Warning)
        );

        // Growing further while near: no write, no Event.
        assert!(!apply(&size(950), 1000, &mut conds, &mut events, now));
        assert_eq!(events.len(), 1);

        assert!(apply(&size(600), 1000, &mut conds, &mut events, now));
        assert_eq!((conds[0].status.as_str(), conds[0].reason.as_deref()), (FALSE, Some(REASON_BELOW_LIMIT)));
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].reason, EVENT_BELOW_LIMIT);
        assert!(!apply(&size(600), 1000, &mut conds, &mut events, now), "stays below: nothing");

        assert!(apply(&size(800), 1000, &mut conds, &mut events, now), "near again");
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].status, TRUE);
        assert_eq!(events.len(), 3);
    }
}
