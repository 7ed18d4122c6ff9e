//! The simulated cluster around the API server: nodes, scheduler, kubelet, and the namespace
//! controllers.

pub mod annotations;
pub mod backoff;
pub mod container_log;
pub mod kubelet;
pub mod namespace_conditions;
pub mod namespace_defaults;
pub mod nodes;
pub mod pod_events;
