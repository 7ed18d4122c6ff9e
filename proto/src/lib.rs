//! Generated gRPC types and services of the batchfleet ownership protocol and admin API.

#[allow(clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("batchfleet.v1");

    /// Every message and service of the package, encoded, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("batchfleet_descriptor");
}

/// The gRPC metadata key in which a standby coordinator names the leader's address; workers and
/// fleetctl follow it.
pub const LEADER_HINT: &str = "x-fleet-leader";
