//! Tunables of the Job controller, defaulting to upstream's constants (job_controller.go).

use std::time::Duration;

use super::JOB_CONTROLLER_NAME;

/// Controller constants. `Default` gives upstream's values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `MaxPodCreateDeletePerSync`: pods created or deleted (scale-down) in one sync.
    pub max_pod_create_delete_per_sync: usize,
    /// `MaxUncountedPods`: cap on `status.uncountedTerminatedPods` entries added per sync.
    pub max_uncounted_pods: usize,
    /// `DefaultJobPodFailureBackOff`: delay before re-creating a pod after the first failure.
    pub pod_failure_backoff: Duration,
    /// `MaxJobPodFailureBackOff`: cap of the doubling pod-failure back-off.
    pub max_pod_failure_backoff: Duration,
    /// `syncJobBatchPeriod`: minimum requeue delay for pod back-off (and the shell's pod-event batching).
    pub sync_job_batch_period: Duration,
    /// `DefaultJobApiBackOff` / `MaxJobApiBackOff`: the shell's per-Job rate limiter after a failed sync.
    pub api_backoff: Duration,
    pub max_api_backoff: Duration,
    /// The `spec.managedBy` value this worker acts for; Jobs without the field count as
    /// `kubernetes.io/job-controller`.
    pub managed_by: String,
    /// Send the stall signals of [`super::stall`] (Events and the `batchfleet.io/PodCreationBlocked`
    /// condition); off, the controller behaves exactly as upstream's.
    pub stall_signals: bool,
    /// The size guard's limit on an Indexed Job's object (see [`super::status_size`]): near 80 % of
    /// it the `batchfleet.io/StatusSizeNearLimit` condition is set. 0 turns the guard off.
    pub status_size_limit_bytes: u64,
}

/// etcd's default request size limit (`--max-request-bytes`, 1.5 MiB), which a Job's status write
/// must fit into.
pub const DEFAULT_STATUS_SIZE_LIMIT_BYTES: u64 = 1_572_864;

impl Default for Config {
    fn default() -> Self {
        Self {
            max_pod_create_delete_per_sync: 500,
            max_uncounted_pods: 500,
            pod_failure_backoff: Duration::from_secs(10),
            max_pod_failure_backoff: Duration::from_secs(600),
            sync_job_batch_period: Duration::from_secs(1),
            api_backoff: Duration::from_secs(1),
            max_api_backoff: Duration::from_secs(60),
            managed_by: JOB_CONTROLLER_NAME.to_string(),
            stall_signals: true,
            status_size_limit_bytes: DEFAULT_STATUS_SIZE_LIMIT_BYTES,
        }
    }
}
