//! The batchfleet coordinator: shard placement, the hand-over state machine and the coordination
//! store today; worker sessions, the admin API and PodGC land here with the fleet.

pub mod handover;
pub mod ids;
pub mod kube_client;
pub mod leader;
pub mod metrics_endpoint;
pub mod placement;
pub mod podgc;
pub mod store;
