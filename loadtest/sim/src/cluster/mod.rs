//! The simulated cluster around the API server: nodes, scheduler and kubelet.

pub mod annotations;
pub mod backoff;
pub mod container_log;
pub mod kubelet;
pub mod nodes;
pub mod pod_events;
