//! The simulated cluster around the API server: nodes, scheduler and kubelet.

pub mod annotations;
pub mod kubelet;
pub mod nodes;
