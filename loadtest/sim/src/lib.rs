//! A Kubernetes API server emulator with a scheduler, a simulated kubelet and nodes, that real
//! clients — kube-rs and kubectl — use unchanged. Every test that crosses the Kubernetes API in
//! batchfleet runs against it.
//!
//! Start one in-process with [`SimCluster::start`], or as a process with `loadtest sim`.

pub mod admission;
pub mod apiserver;
pub mod audit;
pub mod cluster;
pub mod counters;
pub mod faults;
pub mod field_error;
pub mod fields;
pub mod gc;
pub mod go_fmt;
pub mod http;
pub mod json;
pub mod kubectl;
pub mod patch;
pub mod protobuf;
pub mod resources;
pub mod selector;
pub mod store;
pub mod testing;
mod value_memo;

mod sim;

pub use sim::{SimCluster, SimConfig, kubeconfig_yaml_for};
