//! Kubernetes protobuf bodies (`application/vnd.kubernetes.protobuf`): the envelope and the messages the sim reads.

pub mod codec;
pub mod delete_options;
pub mod schema;

#[cfg(test)]
mod codec_tests;
#[cfg(test)]
mod tests;

pub use batchfleet_kube_wire::{ProtobufError, envelope, wire};
