//! The finalizer safety net (docs/beyond-upstream.md, issue 29 §3): a sweeper on each worker
//! that removes `batch.kubernetes.io/job-tracking` from pods that hold it with no reason to —
//! their Job is gone, or finished and counted them — which upstream leaves for ever when an
//! event is missed or a patch fails (k/k#108645, #109429, #121605, #141329).
//!
//! - [`decide`]: which pods to release, pure and table-tested.
//! - [`pacing`]: retries and Events per pod, not per attempt.
//! - [`sweeper`]: the shell — passes, the fence, the budget, Events.
//! - [`metrics`]: the backlog and what was done about it.

pub mod decide;
pub mod metrics;
pub mod pacing;
pub mod sweeper;

pub use metrics::SweepMetrics;
pub use sweeper::{FinalizerSweeper, SweepOptions};
