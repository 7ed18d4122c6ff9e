//! The TTL-after-finished controller: deletes finished Jobs once their `ttlSecondsAfterFinished`
//! has passed, and bare pods that finished once their `batchfleet.io/ttl-seconds-after-finished`
//! has; with `--ttl-max-deletions-per-second`, no faster than that.

pub mod controller;
pub mod core;
pub mod pace;
pub mod pod_controller;
pub mod pod_core;
pub mod smoothing;
