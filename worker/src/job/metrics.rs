//! The Job controller's metrics under upstream's names (`job_controller_*`), fed by the decision
//! core's [`Metric`] values and the shell's sync timings.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

use super::core::Metric;

#[derive(Clone)]
pub struct JobMetrics {
    sync_duration: HistogramVec,
    syncs: IntCounterVec,
    jobs_finished: IntCounterVec,
    pods_finished: IntCounterVec,
    failures_handled: IntCounterVec,
    tracking_finalizer: IntCounterVec,
    finished_indexes: IntCounterVec,
    pods_creation: IntCounterVec,
    by_external_controller: IntCounterVec,
    /// batchfleet's: pods deleted for `batchfleet.io/delete-counted-pods`.
    counted_pods_deleted: prometheus::IntCounter,
}

fn counter(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    let c = IntCounterVec::new(Opts::new(name, help).subsystem("job_controller"), labels)?;
    registry.register(Box::new(c.clone()))?;
    Ok(c)
}

impl JobMetrics {
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let sync_duration = HistogramVec::new(
            HistogramOpts::new("job_sync_duration_seconds", "The time it took to sync a job")
                .subsystem("job_controller")
                .buckets(prometheus::exponential_buckets(0.004, 2.0, 15)?),
            &["completion_mode", "result", "action"],
        )?;
        registry.register(Box::new(sync_duration.clone()))?;
        let counted_pods_deleted = prometheus::IntCounter::new(
            "batchfleet_job_counted_pods_deleted_total",
            "Succeeded pods already counted in their Job's status that the Job controller deleted (batchfleet.io/delete-counted-pods)",
        )?;
        registry.register(Box::new(counted_pods_deleted.clone()))?;
        Ok(Self {
            counted_pods_deleted,
            sync_duration,
            syncs: counter(
                registry,
                "job_syncs_total",
                "The number of job syncs",
                &["completion_mode", "result", "action"],
            )?,
            jobs_finished: counter(
                registry,
                "jobs_finished_total",
                "The number of finished jobs",
                &["completion_mode", "result", "reason"],
            )?,
            pods_finished: counter(
                registry,
                "job_pods_finished_total",
                "The number of finished Pods that are fully tracked",
                &["completion_mode", "result"],
            )?,
            failures_handled: counter(
                registry,
                "pod_failures_handled_by_failure_policy_total",
                "The number of failed Pods handled by failure policy with respect to the failure policy action applied based on the matched rule.",
                &["action"],
            )?,
            tracking_finalizer: counter(
                registry,
                "terminated_pods_tracking_finalizer_total",
                "The number of terminated pods (phase=Failed|Succeeded) that have the finalizer batch.kubernetes.io/job-tracking",
                &["event"],
            )?,
            finished_indexes: counter(
                registry,
                "job_finished_indexes_total",
                "The number of finished indexes.",
                &["status", "backoffLimit"],
            )?,
            pods_creation: counter(
                registry,
                "job_pods_creation_total",
                "The number of Pods created by the Job controller labelled with a reason for the Pod creation.",
                &["reason", "status"],
            )?,
            by_external_controller: counter(
                registry,
                "jobs_by_external_controller_total",
                "The number of Jobs managed by an external controller",
                &["controller_name"],
            )?,
        })
    }

    pub fn observe_sync(&self, completion_mode: &str, result: &str, action: &str, seconds: f64) {
        self.sync_duration.with_label_values(&[completion_mode, result, action]).observe(seconds);
        self.syncs.with_label_values(&[completion_mode, result, action]).inc();
    }

    pub fn counted_pods_deleted(&self, n: u64) {
        self.counted_pods_deleted.inc_by(n);
    }

    pub fn record(&self, metric: &Metric) {
        match metric {
            Metric::JobPodsFinished { completion_mode, result, delta } => {
                self.pods_finished.with_label_values(&[completion_mode, result]).inc_by(*delta)
            }
            Metric::JobFinishedIndexes { status, backoff_limit, delta } => {
                self.finished_indexes.with_label_values(&[status, backoff_limit]).inc_by(*delta)
            }
            Metric::JobsFinished { completion_mode, result, reason } => {
                self.jobs_finished.with_label_values(&[completion_mode, result, reason.as_str()]).inc()
            }
            Metric::PodFailuresHandledByFailurePolicy { action, delta } => {
                self.failures_handled.with_label_values(&[action]).inc_by(*delta)
            }
            Metric::JobPodsCreation { reason, status, delta } => {
                self.pods_creation.with_label_values(&[reason, status]).inc_by(*delta)
            }
            Metric::TerminatedPodsTrackingFinalizer { event } => {
                self.tracking_finalizer.with_label_values(&[event]).inc()
            }
            Metric::JobsByExternalController { controller_name } => {
                self.by_external_controller.with_label_values(&[controller_name.as_str()]).inc()
            }
        }
    }
}
