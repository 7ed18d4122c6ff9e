//! Input and output types of the decision core: what the shell hands in, what it must execute, and
//! the step results it folds back.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::Pod;

use super::backoff::BackoffRecord;
use super::config::Config;
use super::counted_pods::CountedPods;
use super::stall::{CreateRefusal, StallRecord};
use super::sync::SyncState;
use super::tracking::TrackState;

/// Everything one sync decides on.
#[derive(Clone, Copy, Debug)]
pub struct SyncInput<'a> {
    /// The Job as read from the cache.
    pub job: &'a Job,
    /// The pods this Job controls (after adoption: adopted pods carry the tracking finalizer in memory,
    /// as upstream's `getPodsForJob` does). Order matters only where it does upstream (the first pod
    /// matching a `FailJob` rule names the failure).
    pub pods: &'a [Arc<Pod>],
    pub now: Timestamp,
    /// Upstream `expectations.SatisfiedExpectations`: the cache has seen every pod this worker created
    /// or deleted for the Job. Checked before the pods were listed.
    pub expectations_satisfied: bool,
    /// Upstream `finalizerExpectations`: UIDs of pods whose finalizer removal this worker issued but the
    /// cache has not shown yet. Such pods are treated as already counted.
    pub expected_removed_finalizers: &'a HashSet<String>,
    /// The in-memory pod-failure back-off record kept for this Job between syncs.
    pub backoff: Option<&'a BackoffRecord>,
    /// The stall signals sent so far for this Job (kept by the shell, like `backoff`).
    pub stall: Option<&'a StallRecord>,
    pub config: &'a Config,
}

/// The outcome of [`super::sync_job`].
#[derive(Debug)]
pub enum JobPlan {
    /// Nothing to do for this Job; emit the events and stop.
    Skip(Skip),
    /// Run [`SyncPlan::pod_ops`], then fold the results back with [`SyncPlan::after_pod_ops`].
    Sync(Box<SyncPlan>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Skip {
    pub reason: SkipReason,
    pub events: Vec<Event>,
    /// Upstream drops the Job's back-off record when it sees the Job finished.
    pub forget_backoff_record: bool,
    /// `batchfleet.io/delete-counted-pods`: a finished Job's counted pods are deleted too.
    pub counted_pods: CountedPods,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// `spec.managedBy` names another controller (value attached).
    ManagedByOther(String),
    /// The Job already has `Complete=True` or `Failed=True`.
    Finished,
    /// `spec.completionMode` is neither `NonIndexed` nor `Indexed`.
    UnknownCompletionMode(String),
}

/// Label value of upstream's `action` label on `job_sync_duration_seconds` / `job_syncs_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncAction {
    Reconciling,
    Tracking,
    PodsCreated,
    PodsDeleted,
}

impl SyncAction {
    pub fn as_str(self) -> &'static str {
        match self {
            SyncAction::Reconciling => "reconciling",
            SyncAction::Tracking => "tracking",
            SyncAction::PodsCreated => "pods_created",
            SyncAction::PodsDeleted => "pods_deleted",
        }
    }
}

/// The first stage of a sync: pod operations, plus the private state needed to continue.
#[derive(Debug)]
pub struct SyncPlan {
    /// `completion_mode` label (`Indexed`/`NonIndexed`) of the sync metrics.
    pub completion_mode: &'static str,
    /// `action` label of the sync metrics.
    pub action: SyncAction,
    /// Pod operations to run now.
    pub pod_ops: PodOps,
    /// Requeue the Job after this delay (earliest wins): active deadline or pod back-off.
    pub requeue_after: Option<Duration>,
    /// `batchfleet.io/delete-counted-pods`: counted pods to DELETE, apart from [`Self::pod_ops`]
    /// (they are neither active nor counted again, so no step below depends on them).
    pub counted_pods: CountedPods,
    pub(super) state: SyncState,
}

/// A pod the plan refers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// Pod operations of one sync (a sync either deletes or creates).
#[derive(Clone, Debug, PartialEq)]
pub enum PodOps {
    None,
    /// The Job is failing or succeeding: DELETE these active pods, all in parallel, keeping their
    /// finalizer (they are counted afterwards). No expectations.
    DeleteActive(Vec<PodRef>),
    /// Scale-down, suspend or bad indexes: for each pod (in parallel) first PATCH the tracking
    /// finalizer away ([`remove_tracking_finalizer_patch`](super::remove_tracking_finalizer_patch)),
    /// then DELETE it. Expect `len()` deletions first; observe one per pod that did not end `Deleted`.
    RemoveFinalizerAndDelete(Vec<PodRef>),
    /// Create pods in slow-start batches.
    Create(CreatePlan),
}

/// Pods to create. Expect `pods.len()` creations first; observe one per `Failed` or `Skipped` pod
/// (not for `NamespaceTerminating`: upstream leaves that expectation to expire).
#[derive(Clone, Debug, PartialEq)]
pub struct CreatePlan {
    /// Complete pod objects (`metadata.generateName` set) to POST to the Job's namespace. Equal
    /// pods (a NonIndexed Job's) share one object, whose request body is built once.
    pub pods: Vec<Arc<Pod>>,
    /// Slow-start batches over `pods` (1, 2, 4, …). Create a batch in parallel; if any create in it
    /// failed (`Failed`, not `NamespaceTerminating`), report all later pods `Skipped` and stop.
    pub batches: Vec<Range<usize>>,
}

/// Result of one DELETE (with, for [`PodOps::RemoveFinalizerAndDelete`], its preceding PATCH).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    /// DELETE answered 404.
    DeleteNotFound,
    /// The finalizer PATCH answered 404; no DELETE was sent.
    PatchNotFound,
    /// The finalizer PATCH failed; no DELETE was sent.
    PatchFailed(String),
    /// DELETE failed (not 404); the message is the API error.
    DeleteFailed(String),
}

/// Result of one pod creation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateOutcome {
    /// Created; the name the API server generated.
    Created(String),
    /// Failed; the message is the API error.
    Failed(String),
    /// Refused by the API with a non-transient status (400, 403, 422): handled as `Failed` (the
    /// first field is that message), and also fed to the stall signals.
    Refused(String, CreateRefusal),
    /// Failed because the namespace is terminating (a `NamespaceTerminating` status cause).
    NamespaceTerminating,
    /// Not attempted because an earlier batch failed.
    Skipped,
}

/// Step results of [`PodOps`], in the order of the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodOpResults {
    None,
    Deletes(Vec<DeleteOutcome>),
    Creates(Vec<CreateOutcome>),
}

/// The second stage: the interim status write and the finalizer removals.
#[derive(Debug)]
pub struct StatusPlan {
    /// Events of the pod operations and of suspend/resume; emit now.
    pub events: Vec<Event>,
    /// Metrics of the pod operations; record now.
    pub metrics: Vec<Metric>,
    /// PUT this status (on the latest Job object); if the write fails, the sync ends with an error.
    pub interim_status: Option<JobStatus>,
    /// Store this back-off record for the Job once the interim write succeeded (only then).
    pub backoff_record: Option<BackoffRecord>,
    /// Record once the interim write succeeded, or right away if there is none.
    pub metrics_after_interim: Vec<Metric>,
    /// Then PATCH the tracking finalizer away from these pods, in parallel. Before patching, add their
    /// UIDs to the finalizer expectations; drop a UID again when its patch fails.
    pub remove_finalizers: Vec<PodRef>,
    /// Keep this as the Job's stall record from now on (the events it stands for are in `events`).
    pub stall_record: StallRecord,
    pub(super) state: TrackState,
}

/// Result of one finalizer-removal PATCH.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinalizerRemoval {
    Removed,
    /// 404: the pod is gone, which counts as removed.
    NotFound,
    Failed(String),
}

/// The last stage.
#[derive(Clone, Debug, PartialEq)]
pub struct FinalPlan {
    /// PUT this status; if the write fails, the sync ends with an error and nothing below happens.
    pub status: Option<JobStatus>,
    /// Emit after the write (or right away if there is none).
    pub events: Vec<Event>,
    /// Record after the write (or right away if there is none).
    pub metrics: Vec<Metric>,
    /// The sync still ends in this error (rate-limited requeue), after the steps above.
    pub error: Option<SyncError>,
}

/// Why a sync ends in error although every status write succeeded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    #[error("creating pods: {0}")]
    CreatePods(String),
    #[error("deleting pods: {0}")]
    DeletePods(String),
    #[error("removing completion finalizer: {0}")]
    RemoveFinalizerBeforeDelete(String),
    #[error("tracking status: removing tracking finalizer: {0}")]
    RemoveTrackingFinalizer(String),
}

pub use crate::events::EventType;

/// An event on the Job (source component `job-controller`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub type_: EventType,
    pub reason: String,
    pub message: String,
}

impl Event {
    pub(super) fn normal(reason: &str, message: impl Into<String>) -> Self {
        Self { type_: EventType::Normal, reason: reason.to_string(), message: message.into() }
    }
    pub(super) fn warning(reason: &str, message: impl Into<String>) -> Self {
        Self { type_: EventType::Warning, reason: reason.to_string(), message: message.into() }
    }
}

/// A metric observation under upstream's names (subsystem `job_controller`). Counters are added with
/// `delta`, even when it is 0 (upstream's `Add(0)` still creates the labelled series).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Metric {
    /// `job_controller_job_pods_finished_total{completion_mode,result}`.
    JobPodsFinished { completion_mode: &'static str, result: &'static str, delta: u64 },
    /// `job_controller_job_finished_indexes_total{status,backoffLimit}`.
    JobFinishedIndexes { status: &'static str, backoff_limit: &'static str, delta: u64 },
    /// `job_controller_jobs_finished_total{completion_mode,result,reason}`.
    JobsFinished { completion_mode: &'static str, result: &'static str, reason: String },
    /// `job_controller_pod_failures_handled_by_failure_policy_total{action}`.
    PodFailuresHandledByFailurePolicy { action: &'static str, delta: u64 },
    /// `job_controller_job_pods_creation_total{reason,status}`.
    JobPodsCreation { reason: &'static str, status: &'static str, delta: u64 },
    /// `job_controller_terminated_pods_tracking_finalizer_total{event}` (+1).
    TerminatedPodsTrackingFinalizer { event: &'static str },
    /// `job_controller_jobs_by_external_controller_total{controller_name}` (+1).
    JobsByExternalController { controller_name: String },
}
