//! The batchfleet coordinator: shard placement, the hand-over state machine and the coordination
//! store today; worker sessions, the admin API and PodGC land here with the fleet.

pub mod authz;
pub mod fleet;
pub mod grpc_metrics;
pub mod handover;
pub mod kube_client;
pub mod leader;
pub mod metrics_endpoint;
pub mod placement;
pub mod podgc;

/// The coordination store and the ids it keys by, shared with the workers (which renew their own
/// liveness leases in it).
pub use batchfleet_store::{self as store, ids};
