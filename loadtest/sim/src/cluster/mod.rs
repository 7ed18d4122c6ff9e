//! The simulated cluster around the API server: nodes, scheduler, kubelet, and the namespace
//! controllers.

pub mod annotations;
pub mod backoff;
pub mod container_log;
pub mod crd_status;
pub mod disruption;
pub mod event_recorder;
pub mod event_ttl;
pub mod follow;
pub mod kubelet;
pub mod namespace_conditions;
pub mod namespace_defaults;
pub mod node_lifecycle;
pub mod nodes;
pub mod pod_events;
pub mod scheduler;
pub mod taint_eviction;
pub mod taints;

/// Sleeps until `at`, or forever when there is nothing to wait for: the timer branch of the
/// controllers' `select!` loops.
pub(crate) async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
