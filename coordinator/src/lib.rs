//! The batchfleet coordinator: shard placement today; leader election, the shard map, worker
//! sessions, the admin API and PodGC land here with the fleet.

pub mod handover;
pub mod ids;
pub mod placement;
