//! What a CronJob sync asks of the shell, one API call at a time, and what the shell hands back.
//!
//! A sync is a sequence of [`Step`]s. Each step carries effects to emit now (events, the skew metric)
//! and [`Next`]: one API call whose answer goes back through that request's `answer` method, or
//! [`Next::Done`] with the work-queue [`Outcome`]. Every `answer` is a pure function of the state the
//! request carries and the API's answer, so the shell is a loop with one `match`.

use jiff::SignedDuration;
use k8s_openapi::api::batch::v1::{CronJob, Job};

use super::sync::{CreateResume, DeleteResume, GetCronJobResume, GetJobResume, SyncState, UpdateResume};

/// One step of a sync: emit `effects` in order, then do `next`.
#[derive(Debug)]
#[must_use]
pub struct Step {
    pub effects: Vec<Effect>,
    pub next: Next,
}

/// Something to emit as soon as the step is handed out.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// An event on the CronJob (source component [`super::EVENT_COMPONENT`]).
    Event(Event),
    /// Observe `cronjob_controller_cronjob_job_creation_skew_duration_seconds`: the created Job's
    /// `creationTimestamp` minus its scheduled time, in seconds (only for a Job this sync created,
    /// not for one adopted after AlreadyExists).
    CreationSkew { seconds: f64 },
    /// Schedule times that were not run (beyond upstream: the counter
    /// `batchfleet_cronjob_missed_schedules_total{reason}`). Counted once, by the sync that
    /// moves lastScheduleTime past them (the times between the old and the new value), so
    /// resyncs do not count them again; `TooMany` counts upstream's event.
    Missed { reason: MissedReason, count: usize },
    /// Forbid held a due run back (beyond upstream): `job` is the active Job, `skipped` the runs
    /// skipped since it started. The shell records Warning `ForbidBlocked` once per change of
    /// `skipped` (the sync sees the same block on every resync).
    ForbidBlocked { job: String, skipped: usize },
    /// A Job created for a missed time under `batchfleet.io/catch-up` that upstream would not
    /// have run (older than the most recent).
    CaughtUp,
    /// What `batchfleet.io/trigger` did.
    Trigger(TriggerResult),
    /// The next schedule time as the sync leaves it (`None`: the CronJob will not run), for the
    /// `batchfleet_cronjob_next_schedule_time` gauge; only with
    /// [`super::SyncOptions::next_schedule_time`].
    NextScheduleTime(Option<jiff::Timestamp>),
}

/// Why a due time was not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissedReason {
    /// Later than startingDeadlineSeconds when the next Job was created.
    StartingDeadline,
    /// Within the deadline (or with none) but not run: upstream runs only the most recent
    /// missed time, and Forbid skips times while a Job is active.
    NotRun,
    /// More than 100 times were missed (upstream's `TooManyMissedTimes`; the most recent still runs).
    TooMany,
}

impl MissedReason {
    pub fn label(self) -> &'static str {
        match self {
            MissedReason::StartingDeadline => "starting_deadline",
            MissedReason::NotRun => "not_run",
            MissedReason::TooMany => "too_many_missed",
        }
    }
}

/// What a `batchfleet.io/trigger` value came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerResult {
    Ran,
    /// Ran after deleting the active Jobs (concurrencyPolicy Replace).
    Replaced,
    /// Not run: a Job is active and the policy is Forbid.
    SkippedByForbid,
}

impl TriggerResult {
    pub fn label(self) -> &'static str {
        match self {
            TriggerResult::Ran => "ran",
            TriggerResult::Replaced => "replaced",
            TriggerResult::SkippedByForbid => "skipped_by_forbid",
        }
    }
}

/// The API call to make next, or the end of the sync.
#[derive(Debug)]
pub enum Next {
    DeleteJob(DeleteJob),
    GetCronJob(GetCronJob),
    GetJob(GetJob),
    CreateJob(CreateJob),
    UpdateStatus(UpdateStatus),
    Done(Outcome),
}

/// How the work queue treats the key after the sync (upstream `processNextWorkItem`).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// `Forget` the key, then `AddAfter(d)`; a delay ≤ 0 adds it at once.
    RequeueAfter(SignedDuration),
    /// `AddRateLimited`: the sync failed (log the error).
    Retry(SyncError),
    /// Neither: a suspended, deleting or misconfigured CronJob waits for its next update.
    Done,
}

/// An event upstream's recorder would emit on the CronJob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub type_: EventType,
    pub reason: &'static str,
    pub message: String,
}

pub use crate::events::EventType;

/// What the shell knows about a failed API call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub kind: ApiErrorKind,
    /// The error text (`metav1.Status.message` for an API status); events quote it verbatim.
    pub message: String,
}

pub use crate::api_errors::ApiErrorKind;

impl ApiError {
    pub fn new(kind: ApiErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ApiErrorKind::NotFound, message)
    }
    pub fn already_exists(message: impl Into<String>) -> Self {
        Self::new(ApiErrorKind::AlreadyExists, message)
    }
    pub fn other(message: impl Into<String>) -> Self {
        Self::new(ApiErrorKind::Other, message)
    }
    pub fn is_not_found(&self) -> bool {
        self.kind == ApiErrorKind::NotFound
    }
}

/// Why a sync ends in [`Outcome::Retry`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// The fresh GET of the CronJob (UnexpectedJob check) failed.
    #[error("{0}")]
    GetCronJob(ApiError),
    /// A GET of a Job failed: an active Job missing from the cache (other than NotFound), a Job to
    /// replace (Warning `FailedGet` was recorded), or the Job found after AlreadyExists.
    #[error("{0}")]
    GetJob(ApiError),
    /// Replace could not delete an active Job (Warning `FailedDelete` was recorded).
    #[error("could not replace job {namespace}/{name}")]
    CouldNotReplace { namespace: String, name: String },
    /// Creating the Job failed (Warning `FailedCreate` was recorded unless the namespace is
    /// terminating).
    #[error("{0}")]
    CreateJob(ApiError),
    /// The Job could not be built from the template (its timeZone does not load).
    #[error("{0}")]
    JobFromTemplate(String),
    /// The status update failed.
    #[error("{0}")]
    UpdateStatus(ApiError),
}

/// Why a Job is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteReason {
    /// cleanupFinishedJobs: over `successfulJobsHistoryLimit`/`failedJobsHistoryLimit`.
    History,
    /// concurrencyPolicy Replace: an active Job at the next scheduled time.
    Replace,
}

/// Why a Job is read from the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetJobReason {
    /// Listed in `status.active` but missing from the cache (NotFound → `MissingJob`).
    Missing,
    /// concurrencyPolicy Replace, before deleting it.
    Replace,
    /// Creating the Job returned AlreadyExists.
    AlreadyExists,
}

/// DELETE `/apis/batch/v1/namespaces/{namespace}/jobs/{name}` with `propagationPolicy=Background`
/// (upstream `realJobControl.DeleteJob`; no preconditions).
#[derive(Debug)]
pub struct DeleteJob {
    pub namespace: String,
    pub name: String,
    pub reason: DeleteReason,
    pub(super) state: Box<SyncState>,
    pub(super) resume: DeleteResume,
}

impl DeleteJob {
    /// The propagation policy of every delete this controller issues.
    pub const PROPAGATION_POLICY: &'static str = "Background";

    /// Continue after the DELETE (any error, NotFound included, counts as a failed delete).
    pub fn answer(self, result: Result<(), ApiError>) -> Step {
        self.state.after_delete(self.resume, result)
    }
}

/// GET the CronJob from the API server (not the cache): a Job the controller owns is unfinished
/// and not in the cached `status.active`.
#[derive(Debug)]
pub struct GetCronJob {
    pub namespace: String,
    pub name: String,
    pub(super) state: Box<SyncState>,
    pub(super) resume: GetCronJobResume,
}

impl GetCronJob {
    pub fn answer(self, result: Result<CronJob, ApiError>) -> Step {
        self.state.after_get_cronjob(self.resume, result)
    }
}

/// GET a Job from the API server (not the cache). Answer NotFound as an [`ApiError`] of kind
/// [`ApiErrorKind::NotFound`]. The names are passed on as found (from `status.active` they may be
/// empty: answer what the client says, e.g. `ApiError::other("resource name may not be empty")`).
#[derive(Debug)]
pub struct GetJob {
    pub namespace: String,
    pub name: String,
    pub reason: GetJobReason,
    pub(super) state: Box<SyncState>,
    pub(super) resume: GetJobResume,
}

impl GetJob {
    pub fn answer(self, result: Result<Job, ApiError>) -> Step {
        self.state.after_get_job(self.resume, result)
    }
}

/// POST the Job to `/apis/batch/v1/namespaces/{namespace}/jobs`; answer with the created Job as
/// the server returned it.
#[derive(Debug)]
pub struct CreateJob {
    pub namespace: String,
    pub job: Box<Job>,
    pub(super) state: Box<SyncState>,
    pub(super) resume: CreateResume,
}

impl CreateJob {
    /// The created Job is only read, so the shell can keep its copy for its cache.
    pub fn answer(self, result: Result<&Job, ApiError>) -> Step {
        self.state.after_create(self.resume, result)
    }
}

/// PUT `/apis/batch/v1/namespaces/{ns}/cronjobs/{name}/status` with this object (the cached
/// CronJob with the new status, its `resourceVersion` as read).
#[derive(Debug)]
pub struct UpdateStatus {
    pub cronjob: Box<CronJob>,
    pub(super) state: Box<SyncState>,
    pub(super) resume: UpdateResume,
}

impl UpdateStatus {
    pub fn answer(self, result: Result<(), ApiError>) -> Step {
        self.state.after_update_status(self.resume, result)
    }
}
