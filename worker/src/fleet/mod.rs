//! A fleet worker's ties to the fleet: its liveness lease in the coordination store and its
//! session with the leading coordinator.

pub mod barrier_read;
pub mod lease;
pub mod load;
pub mod session;
