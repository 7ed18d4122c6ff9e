//! The Job controller's pure decision core: a Job, its pods and a clock go in, a [`JobPlan`] comes out.
//!
//! This is upstream `pkg/controller/job` (`syncJob`, `manageJob`, `trackJobStatusAndRemoveFinalizers`,
//! `flushUncountedAndRemoveFinalizers`, `enactJobFinished`) with every side effect turned into a value.
//! Nothing here does I/O, spawns tasks or reads a clock. All feature gates are at their 1.37 values
//! (JobPodReplacementPolicy, JobManagedBy, JobSuccessPolicy, JobBackoffLimitPerIndex, PodIndexLabel and
//! SidecarContainers on), so the interim `FailureTarget`/`SuccessCriteriaMet` conditions are always written
//! first and `status.terminating` is always tracked.
//!
//! A sync runs in three pure stages, each followed by one I/O step of the shell:
//!
//! 1. [`sync_job`] → [`JobPlan`]: either [`JobPlan::Skip`] or a [`SyncPlan`] whose [`PodOps`] the shell runs.
//! 2. [`SyncPlan::after_pod_ops`] → [`StatusPlan`]: the interim status write, then finalizer patches.
//! 3. [`StatusPlan::after_finalizer_removals`] → [`FinalPlan`]: the last status write, events, metrics.
//!
//! Helpers for the informer side of the controller live in [`orphan`].

use k8s_openapi::api::core::v1::Pod;

mod backoff;
mod conditions;
mod config;
pub mod counted_pods;
mod failure_policy;
mod indexed;
mod intervals;
mod manage;
mod ordering;
pub mod orphan;
mod plan;
mod pod_template;
pub mod stall;
pub mod status_size;
mod success_policy;
mod sync;
mod tracking;
mod view;

#[cfg(test)]
mod testutil;

pub use backoff::{BackoffRecord, finished_time};
pub use conditions::is_job_finished;
pub use config::{Config, DEFAULT_STATUS_SIZE_LIMIT_BYTES};
pub use counted_pods::{CountedPodDelete, CountedPods};
pub use intervals::{Interval, OrderedIntervals};
pub use orphan::orphan_needs_finalizer_removal;
pub use plan::{
    CreateOutcome, CreatePlan, DeleteOutcome, Event, EventType, FinalPlan, FinalizerRemoval, JobPlan, Metric,
    PodOpResults, PodOps, PodRef, Skip, SkipReason, StatusPlan, SyncAction, SyncError, SyncInput, SyncPlan,
};
pub use pod_template::{pod_from_template, remove_tracking_finalizer_patch};
pub use stall::{CreateRefusal, StallRecord};
pub use sync::sync_job;

/// The finalizer every Job pod carries until the controller has counted it.
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// Annotation (and label) holding an Indexed Job pod's completion index.
pub const JOB_COMPLETION_INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
/// Annotation on a replacement pod: failures of its index counted against `backoffLimitPerIndex`.
pub const JOB_INDEX_FAILURE_COUNT_ANNOTATION: &str = "batch.kubernetes.io/job-index-failure-count";
/// Annotation on a replacement pod: failures of its index ignored by the pod failure policy.
pub const JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION: &str =
    "batch.kubernetes.io/job-index-ignored-failure-count";
/// The `spec.managedBy` value of the built-in controller (and of Jobs without the field).
pub const JOB_CONTROLLER_NAME: &str = "kubernetes.io/job-controller";
/// Event source component, as upstream.
pub const EVENT_COMPONENT: &str = "job-controller";

/// Whether `pod` still carries [`JOB_TRACKING_FINALIZER`]: not yet counted by its Job.
pub fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata.finalizers.as_deref().unwrap_or(&[]).iter().any(|f| f == JOB_TRACKING_FINALIZER)
}
