//! The simulated cluster around the API server: nodes, scheduler and kubelet.

pub mod annotations;
pub mod disruption;
pub mod event_recorder;
pub mod kubelet;
pub mod node_lifecycle;
pub mod nodes;
pub mod scheduler;
pub mod taint_eviction;
pub mod taints;
