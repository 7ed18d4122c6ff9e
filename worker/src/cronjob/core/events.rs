//! Every event the v2 CronJob controller records, with upstream's reason, type and message text.
//!
//! (`FailedNeedsStart` belonged to the v1 controller, removed in 1.23; v2 does not record it.)

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::plan::{ApiError, Event, EventType};
use crate::cronjob::schedule::unsupported_schedule_message;

fn normal(reason: &'static str, message: String) -> Event {
    Event { type_: EventType::Normal, reason, message }
}

fn warning(reason: &'static str, message: String) -> Event {
    Event { type_: EventType::Warning, reason, message }
}

/// Go's `%q` of a string.
pub(super) fn go_quote(s: &str) -> String {
    crate::cronjob::schedule::go_strconv_quote(s)
}

/// Go's `t.UTC().Format(time.RFC1123Z)`, e.g. `Thu, 19 May 2016 10:00:00 +0000`.
pub(super) fn format_rfc1123z_utc(t: Timestamp) -> String {
    t.to_zoned(TimeZone::UTC).strftime("%a, %d %b %Y %H:%M:%S +0000").to_string()
}

/// Warning `UnknownTimeZone`; `message` is [`crate::cronjob::schedule::UnknownTimeZone`]'s text.
pub fn unknown_time_zone(message: String) -> Event {
    warning("UnknownTimeZone", message)
}

/// Warning `UnsupportedSchedule`: `TZ`/`CRON_TZ` in `spec.schedule`.
pub fn unsupported_schedule(schedule: &str) -> Event {
    warning("UnsupportedSchedule", unsupported_schedule_message(schedule))
}

/// Warning `UnparseableSchedule` (sync).
pub fn unparseable_schedule(schedule: &str, error: &str) -> Event {
    warning("UnparseableSchedule", format!("unparseable schedule: {} : {error}", go_quote(schedule)))
}

/// Warning `UnParseableCronJobSchedule` (a CronJob update changed the schedule to one that does not
/// parse).
pub fn unparseable_cronjob_schedule(schedule: &str) -> Event {
    warning("UnParseableCronJobSchedule", format!("unparseable schedule for cronjob: {schedule}"))
}

/// Warning `InvalidSchedule`: the next two times are less than a second apart.
pub fn invalid_schedule(schedule: &str, error: &str) -> Event {
    warning("InvalidSchedule", format!("invalid schedule: {schedule} : {error}"))
}

/// Warning `TooManyMissedTimes`: more than 100 schedules missed (the Job is still created).
pub fn too_many_missed_times() -> Event {
    warning(
        "TooManyMissedTimes",
        "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
            .to_string(),
    )
}

/// Warning `MissSchedule`: the scheduled time plus startingDeadlineSeconds is before now.
pub fn miss_schedule(scheduled: Timestamp) -> Event {
    warning(
        "MissSchedule",
        format!("Missed scheduled time to start a job: {}", format_rfc1123z_utc(scheduled)),
    )
}

/// Normal `JobAlreadyActive`: Forbid with an active Job.
pub fn job_already_active() -> Event {
    normal(
        "JobAlreadyActive",
        "Not starting job because prior execution is running and concurrency policy is Forbid".to_string(),
    )
}

/// Warning `UnexpectedJob`: an unfinished Job this CronJob controls that its status does not list.
pub fn unexpected_job(job_name: &str) -> Event {
    warning("UnexpectedJob", format!("Saw a job that the controller did not create or forgot: {job_name}"))
}

/// Normal `SawCompletedJob`: a listed Job finished (`condition` is `Complete` or `Failed`).
pub fn saw_completed_job(job_name: &str, condition: &str) -> Event {
    normal("SawCompletedJob", format!("Saw completed job: {job_name}, condition: {condition}"))
}

/// Normal `MissingJob`: a listed Job is gone from the cache and the API server.
pub fn missing_job(job_name: &str) -> Event {
    normal("MissingJob", format!("Active job went missing: {job_name}"))
}

/// Warning `FailedGet`: Replace could not read an active Job.
pub fn failed_get(error: &ApiError) -> Event {
    warning("FailedGet", format!("Get job: {error}"))
}

/// Warning `FailedDelete`.
pub fn failed_delete(error: &ApiError) -> Event {
    warning("FailedDelete", format!("Deleted job: {error}"))
}

/// Normal `SuccessfulDelete`.
pub fn successful_delete(job_name: &str) -> Event {
    normal("SuccessfulDelete", format!("Deleted job {job_name}"))
}

/// Warning `FailedCreate`.
pub fn failed_create(error: &ApiError) -> Event {
    warning("FailedCreate", format!("Error creating job: {error}"))
}

/// Normal `SuccessfulCreate`.
pub fn successful_create(job_name: &str) -> Event {
    normal("SuccessfulCreate", format!("Created job {job_name}"))
}

/// Normal `CatchUp`: a missed time run under `batchfleet.io/catch-up` (beyond upstream).
pub fn catch_up(job_name: &str, scheduled: Timestamp, more: usize) -> Event {
    normal(
        "CatchUp",
        format!(
            "Created job {job_name} for the missed time {} (batchfleet.io/catch-up), {more} more to run",
            format_rfc1123z_utc(scheduled)
        ),
    )
}

/// Warning `ForbidBlocked`: a due run skipped because a Job is still active under Forbid
/// (beyond upstream; recorded beside upstream's `JobAlreadyActive`).
pub fn forbid_blocked(job_name: &str, skipped: usize) -> Event {
    let runs = if skipped == 1 { "run" } else { "runs" };
    warning(
        "ForbidBlocked",
        format!("blocked by Forbid: Job {job_name} still running, {skipped} {runs} skipped"),
    )
}

/// Normal `Triggered`: `batchfleet.io/trigger` ran the CronJob once (beyond upstream).
pub fn triggered(job_name: &str, value: &str, replaced: bool) -> Event {
    let how = if replaced { ", replacing the active jobs (concurrencyPolicy Replace)" } else { "" };
    normal("Triggered", format!("Created job {job_name} for batchfleet.io/trigger {}{how}", go_quote(value)))
}

/// Normal `TriggerSkipped`: `batchfleet.io/trigger` under Forbid while a Job is active.
pub fn trigger_skipped(value: &str, active_job: &str) -> Event {
    normal(
        "TriggerSkipped",
        format!(
            "Not running batchfleet.io/trigger {}: job {active_job} is active and concurrency policy is Forbid",
            go_quote(value)
        ),
    )
}
