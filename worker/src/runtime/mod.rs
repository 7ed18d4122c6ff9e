//! The controller runtime the reconcilers share: work queues with upstream's metrics and
//! expectations.

pub mod expectations;
pub mod workqueue;
