//! upstream `updateCronJob`: how a CronJob update is enqueued.

use jiff::{SignedDuration, Zoned};
use k8s_openapi::api::batch::v1::CronJob;

use super::events;
use super::plan::Event;
use super::sync::cronjob_times;
use crate::cronjob::schedule::times::next_schedule_time_duration;
use crate::cronjob::schedule::{Schedule, format_schedule};

/// What to do with the work-queue key of an updated CronJob.
#[derive(Clone, Debug, PartialEq)]
pub enum UpdateAction {
    /// Anything but `schedule`/`timeZone` changed: `Add` the key now.
    Enqueue,
    /// `schedule` or `timeZone` changed: `AddAfter` the next schedule time + 100ms − now (a delay
    /// ≤ 0 adds it at once). A sooner time wins in the queue; a later one leaves the old wake-up,
    /// whose sync is then a no-op.
    EnqueueAfter(SignedDuration),
    /// The new schedule does not parse: record this Warning `UnParseableCronJobSchedule` and do
    /// not enqueue (the next update will).
    Unparseable(Event),
}

/// upstream `updateCronJob(old, new)` at `now` (the controller's local zone). The schedule is
/// formatted without events (upstream passes a nil recorder; the sync records them): a schedule
/// containing `TZ` is used as is, and a `timeZone` that does not load is ignored here.
pub fn on_cronjob_update(old: &CronJob, new: &CronJob, now: &Zoned) -> UpdateAction {
    let (old_spec, new_spec) = (&old.spec, &new.spec);
    if old_spec.schedule == new_spec.schedule && old_spec.time_zone == new_spec.time_zone {
        return UpdateAction::Enqueue;
    }
    let formatted = format_schedule(&new_spec.schedule, new_spec.time_zone.as_deref())
        .map_or_else(|_| new_spec.schedule.clone(), |(s, _)| s);
    match Schedule::parse_standard(&formatted) {
        Err(_) => UpdateAction::Unparseable(events::unparseable_cronjob_schedule(&new_spec.schedule)),
        Ok(schedule) => {
            UpdateAction::EnqueueAfter(next_schedule_time_duration(&schedule, &cronjob_times(new), now))
        }
    }
}
