//! Load accounting: the reconciles started per shard, a shard's load. The worker reports each
//! held shard's count of this tenure to the coordinator, which weighs placement by its rate
//! (`fleet::load`), and exports every shard's on /metrics as
//! `batchfleet_worker_shard_reconciles_total{shard}`.

use std::sync::OnceLock;

use prometheus::{IntCounterVec, Opts, Registry};

/// The reconciles of one worker's shards.
#[derive(Default)]
pub(super) struct LoadAccounting {
    /// Set once registered with the worker's registry.
    reconciles: OnceLock<IntCounterVec>,
}

impl LoadAccounting {
    /// Counts a reconcile of `shard` started in the tenure whose count is `tenure`.
    pub fn count_reconcile(&self, shard: u32, tenure: &mut u64) {
        *tenure += 1;
        if let Some(reconciles) = self.reconciles.get() {
            reconciles.with_label_values(&[shard.to_string().as_str()]).inc();
        }
    }

    /// Registers `batchfleet_worker_shard_reconciles_total{shard}` with the worker's registry,
    /// once.
    pub fn register_metrics(&self, registry: &Registry) -> prometheus::Result<()> {
        if self.reconciles.get().is_some() {
            return Err(prometheus::Error::AlreadyReg);
        }
        let reconciles = IntCounterVec::new(
            Opts::new("shard_reconciles_total", "Reconciles started per shard: the shard's load")
                .namespace("batchfleet_worker"),
            &["shard"],
        )?;
        registry.register(Box::new(reconciles.clone()))?;
        self.reconciles.set(reconciles).map_err(|_| prometheus::Error::AlreadyReg)
    }
}
