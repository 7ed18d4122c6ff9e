//! The CronJob controller's pure decision core: upstream `pkg/controller/cronjob`
//! (`cronjob_controllerv2.go`, `utils.go`) with every API call, event and metric turned into a
//! value. Nothing here does I/O or reads a clock: `now` is an argument, in the controller's local
//! zone (the zone a schedule without `TZ=`/`timeZone` is evaluated in).
//!
//! A sync ([`sync`]) is a state machine that the shell drives:
//!
//! ```text
//! let mut step = cronjob::core::sync(&cronjob, cached_jobs, &now);
//! loop {
//!     for effect in step.effects { emit(effect) }          // events, skew metric
//!     step = match step.next {
//!         Next::DeleteJob(d)    => { let r = delete_background(&d.namespace, &d.name); d.answer(r) }
//!         Next::GetCronJob(g)   => { let r = get_cronjob(&g.namespace, &g.name); g.answer(r) }
//!         Next::GetJob(g)       => { let r = get_job(&g.namespace, &g.name); g.answer(r) }
//!         Next::CreateJob(c)    => { let r = create_job(&c.namespace, &c.job); c.answer(r) }
//!         Next::UpdateStatus(u) => { let r = replace_status(&u.cronjob); u.answer(r) }
//!         Next::Done(outcome)   => break outcome,           // requeue-after / rate-limited / nothing
//!     }
//! }
//! ```
//!
//! Informer-side helpers: [`on_cronjob_update`] (CronJob updates), [`cronjob_for_job_event`] and
//! [`cronjobs_for_job_update`] (Job events).

mod active;
pub mod beyond;
pub mod events;
mod history;
mod job_template;
mod jobs;
mod plan;
mod sync;
mod update;

#[cfg(test)]
mod tests;

pub use active::{active_refs, delete_from_active_list, in_active_list, in_active_list_by_name, job_ref};
pub use history::{finished_jobs_to_delete, sort_by_job_start_time};
pub use job_template::{CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION, format_rfc3339, job_from_template, job_name};
pub use jobs::{
    ControllerKey, FinishedType, controller_of, cronjob_for_job_event, cronjobs_for_job_update,
    finished_condition, is_controlled_by, is_job_succeeded, jobs_to_be_reconciled,
};
pub use plan::{
    ApiError, ApiErrorKind, CreateJob, DeleteJob, DeleteReason, Effect, Event, EventType, GetCronJob, GetJob,
    GetJobReason, MissedReason, Next, Outcome, Step, SyncError, TriggerResult, UpdateStatus,
};
pub use sync::{SyncOptions, cronjob_times, sync, sync_with};
pub use update::{UpdateAction, on_cronjob_update};

/// Event source component, as upstream.
pub const EVENT_COMPONENT: &str = "cronjob-controller";
/// Name of the creation-skew histogram, observed from [`Effect::CreationSkew`]. Help: "Time between
/// when a cronjob is scheduled to be run, and when the corresponding job is created".
pub const CREATION_SKEW_METRIC: &str = "cronjob_controller_cronjob_job_creation_skew_duration_seconds";
/// Its buckets, upstream's `ExponentialBuckets(1, 2, 10)`: 1, 2, 4, … 512 seconds.
pub const CREATION_SKEW_BUCKETS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];
