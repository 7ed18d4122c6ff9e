//! The sweeper's metrics (`batchfleet_worker_finalizer_sweep_*`): the backlog it sees and what
//! it did about it.

use prometheus::{Gauge, IntCounter, IntCounterVec, IntGauge, Opts, Registry};

#[derive(Clone)]
pub struct SweepMetrics {
    /// Pods holding the tracking finalizer that the last pass found no reason to hold.
    pub held_pods: IntGauge,
    /// How long the oldest of them has been known releasable.
    pub held_oldest_age_seconds: Gauge,
    pub releases: IntCounterVec,
    pub rejections: IntCounter,
    pub passes: IntCounter,
}

const SUBSYSTEM: &str = "finalizer_sweep";

fn opts(name: &str, help: &str) -> Opts {
    Opts::new(name, help).namespace("batchfleet_worker").subsystem(SUBSYSTEM)
}

impl SweepMetrics {
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let m = Self {
            held_pods: IntGauge::with_opts(opts(
                "held_pods",
                "Pods on this worker's Active shards that hold the finalizer batch.kubernetes.io/job-tracking with no reason to (their Job is gone, or finished and counted them), at the last sweep",
            ))?,
            held_oldest_age_seconds: Gauge::with_opts(opts(
                "held_oldest_age_seconds",
                "How long the oldest of the held pods has been known to have no reason to hold the finalizer",
            ))?,
            releases: IntCounterVec::new(
                opts(
                    "releases_total",
                    "Tracking finalizers the sweeper removed, by why the pod had no reason to hold it",
                ),
                &["reason"],
            )?,
            rejections: IntCounter::with_opts(opts(
                "rejections_total",
                "Finalizer-removal patches the API server refused (4xx other than 404, 409 and 429: an admission webhook, a policy)",
            ))?,
            passes: IntCounter::with_opts(opts("passes_total", "Sweeps over the worker's Active shards"))?,
        };
        registry.register(Box::new(m.held_pods.clone()))?;
        registry.register(Box::new(m.held_oldest_age_seconds.clone()))?;
        registry.register(Box::new(m.releases.clone()))?;
        registry.register(Box::new(m.rejections.clone()))?;
        registry.register(Box::new(m.passes.clone()))?;
        Ok(m)
    }
}
