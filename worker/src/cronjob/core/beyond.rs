//! Beyond upstream (docs/beyond-upstream.md, issue 30 §1–§2): the next-run annotation, safe
//! catch-up after an outage, trigger-now, and the counts behind the missed-run and Forbid
//! signals. Pure functions of the CronJob, its schedule and `now`; the sync calls them.
//!
//! Every CronJob without `batchfleet.io/catch-up` and `batchfleet.io/trigger` is synced exactly as
//! upstream does (the upstream-parity tables run with these annotations absent).

use jiff::{Timestamp, Zoned};
use k8s_openapi::api::batch::v1::CronJob;

use crate::cronjob::schedule::{Schedule, format_schedule};

/// Written by the controller: the next time the schedule fires, RFC 3339 in UTC (k/k#41568).
pub const NEXT_SCHEDULE_TIME_ANNOTATION: &str = "batchfleet.io/next-schedule-time";
/// Set by users: `"N"`, run up to N missed times after an outage (k/k#42649, #83642).
pub const CATCH_UP_ANNOTATION: &str = "batchfleet.io/catch-up";
/// Set by users: any new value runs the CronJob once now (k/k#47538).
pub const TRIGGER_ANNOTATION: &str = "batchfleet.io/trigger";
/// Written by the controller: the `batchfleet.io/trigger` value it has handled.
pub const TRIGGER_HANDLED_ANNOTATION: &str = "batchfleet.io/trigger-handled";
/// On a triggered Job: the trigger value that made it.
pub const TRIGGERED_BY_ANNOTATION: &str = "batchfleet.io/triggered-by";

/// The largest catch-up honoured: a larger N is read as this, so a typo (`"1000000"`) cannot
/// start a flood, and the walk over missed times stays bounded.
pub const MAX_CATCH_UP: usize = 100;

/// How many schedule times the catch-up and Forbid counts walk at most (a week of every-minute
/// runs is 10,080): beyond it the count saturates.
const MAX_WALK: usize = 20_000;

fn annotation<'a>(cj: &'a CronJob, key: &str) -> Option<&'a str> {
    cj.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

fn set_annotation(cj: &mut CronJob, key: &str, value: Option<String>) {
    match value {
        Some(v) => {
            cj.metadata.annotations.get_or_insert_with(Default::default).insert(key.to_string(), v);
        }
        None => {
            if let Some(a) = cj.metadata.annotations.as_mut() {
                a.remove(key);
            }
        }
    }
}

/// The catch-up N the CronJob asks for: `None` without the annotation, for `"0"`, and for a value
/// that is not a whole number (upstream behaviour then); at most [`MAX_CATCH_UP`].
pub fn catch_up_limit(cj: &CronJob) -> Option<usize> {
    let n: usize = annotation(cj, CATCH_UP_ANNOTATION)?.trim().parse().ok()?;
    (n > 0).then_some(n.min(MAX_CATCH_UP))
}

/// The trigger value not yet handled, if any (an empty value triggers nothing).
pub fn pending_trigger(cj: &CronJob) -> Option<String> {
    let value = annotation(cj, TRIGGER_ANNOTATION).filter(|v| !v.is_empty())?;
    (annotation(cj, TRIGGER_HANDLED_ANNOTATION) != Some(value)).then(|| value.to_string())
}

/// Records `value` as handled; whether that changed the object.
pub fn mark_trigger_handled(cj: &mut CronJob, value: &str) -> bool {
    if annotation(cj, TRIGGER_HANDLED_ANNOTATION) == Some(value) {
        return false;
    }
    set_annotation(cj, TRIGGER_HANDLED_ANNOTATION, Some(value.to_string()));
    true
}

/// The name of a triggered Job: `<cronjob>-t<minutes since epoch>`, one character longer than
/// a scheduled Job's, and still within the 63 a CronJob name of at most 52 leaves. Two triggers
/// in one minute share it: the second create is AlreadyExists, a no-op.
pub fn trigger_job_name(cj: &CronJob, now: Timestamp) -> String {
    format!("{}-t{}", cj.metadata.name.as_deref().unwrap_or_default(), now.as_second().div_euclid(60))
}

/// The schedule as the sync parses it, if it does and the CronJob is one that runs (not
/// suspended, not being deleted, its zone loads).
fn running_schedule(cj: &CronJob) -> Option<Schedule> {
    if cj.metadata.deletion_timestamp.is_some() || cj.spec.suspend == Some(true) {
        return None;
    }
    let (formatted, _) = format_schedule(&cj.spec.schedule, cj.spec.time_zone.as_deref()).ok()?;
    Schedule::parse_standard(&formatted).ok()
}

/// The value [`NEXT_SCHEDULE_TIME_ANNOTATION`] should hold at `now`: the schedule's first time
/// after `now`, in UTC; `None` (no annotation) for a CronJob that will not run: suspended,
/// being deleted, or with a schedule or zone that does not load.
pub fn next_schedule_time_value(cj: &CronJob, now: &Zoned) -> Option<String> {
    let next = running_schedule(cj)?.next(now)?;
    Some(next.timestamp().strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// Sets [`NEXT_SCHEDULE_TIME_ANNOTATION`] to `value`; whether that changed the object (a write
/// is due only then).
pub fn set_next_schedule_time(cj: &mut CronJob, value: Option<String>) -> bool {
    if annotation(cj, NEXT_SCHEDULE_TIME_ANNOTATION) == value.as_deref() {
        return false;
    }
    set_annotation(cj, NEXT_SCHEDULE_TIME_ANNOTATION, value);
    true
}

/// The schedule times `t` with `after < t ≤ now`, oldest first, at most the last `keep` of
/// them; and how many there were in all (saturating at the walk's bound).
pub fn times_between(schedule: &Schedule, after: &Zoned, now: &Zoned, keep: usize) -> (Vec<Zoned>, usize) {
    let mut kept = std::collections::VecDeque::with_capacity(keep.min(MAX_CATCH_UP));
    let mut count = 0;
    let mut t = after.clone();
    while count < MAX_WALK {
        let Some(next) = schedule.next(&t) else { break };
        if next.timestamp() > now.timestamp() || next.timestamp() <= t.timestamp() {
            break;
        }
        count += 1;
        if keep > 0 {
            if kept.len() == keep {
                kept.pop_front();
            }
            kept.push_back(next.clone());
        }
        t = next;
    }
    (kept.into(), count)
}

/// What catch-up runs at this sync.
#[derive(Debug, Clone, PartialEq)]
pub struct CatchUp {
    /// The oldest of the times chosen: the one to run now.
    pub run: Zoned,
    /// How many chosen times come after it (each a later sync's, oldest first).
    pub after: usize,
}

/// upstream runs only the most recent missed time; with catch-up N, the N most recent missed
/// times since `lastScheduleTime` (else creation) that are still within startingDeadlineSeconds
/// are run, oldest first, one per sync. Choosing the most recent N keeps N = 1 exactly upstream's
/// choice, and makes the choice stable across the syncs that run them: once the oldest has run
/// and become lastScheduleTime, the rest are the most recent N − 1 after it.
///
/// `None` when no time within the deadline is due, or when more than the walk's bound (20,000)
/// were missed since the later of lastScheduleTime and now − startingDeadlineSeconds: the sync
/// then goes upstream's way (the most recent time only).
pub fn catch_up(
    schedule: &Schedule,
    since: Timestamp,
    starting_deadline_seconds: Option<i64>,
    now: &Zoned,
    n: usize,
) -> Option<CatchUp> {
    let mut after = since.to_zoned(now.time_zone().clone());
    if let Some(sds) = starting_deadline_seconds {
        // Times before now − sds are too late: start the walk there (upstream's `earliest`).
        let earliest = now.timestamp().checked_sub(jiff::SignedDuration::from_secs(sds)).ok()?;
        if earliest > after.timestamp() {
            // Minus a nanosecond, so a time exactly at the deadline is kept (upstream's `Before`).
            after = (earliest - jiff::SignedDuration::from_nanos(1)).to_zoned(now.time_zone().clone());
        }
    }
    let (chosen, _) = times_between(schedule, &after, now, n);
    // A walk cut short at its bound did not reach now: its last times are not the most recent.
    // Catching up from there would run old times one sync after another, so do as upstream does.
    let last = chosen.last()?;
    if schedule.next(last).is_some_and(|next| next.timestamp() <= now.timestamp()) {
        return None;
    }
    let mut chosen = chosen.into_iter();
    let run = chosen.next()?;
    Some(CatchUp { run, after: chosen.len() })
}

/// "N runs skipped" for a Forbid-blocked CronJob: the schedule times since `lastScheduleTime`
/// (the run of the Job still active) up to `now`, the due one included.
pub fn forbid_skipped_runs(schedule: &Schedule, last_schedule: Option<Timestamp>, now: &Zoned) -> usize {
    let Some(last) = last_schedule else { return 1 };
    let (_, count) = times_between(schedule, &last.to_zoned(now.time_zone().clone()), now, 0);
    count.max(1)
}
