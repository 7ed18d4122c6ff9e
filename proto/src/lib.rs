//! Generated gRPC types and services of the batchfleet ownership protocol and admin API.

#[allow(clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("batchfleet.v1");
}
