//! The write fence's own state: the lease window every write is checked against, the writes and
//! reconciles in flight per shard (what REVOKE waits for), and the writes refused, counted by
//! kind. Whether a shard's protocol state admits a write is [`super::state`]'s rule; the table
//! puts the two together under its lock ([`super::ShardTable::check`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use prometheus::{IntCounterVec, Opts, Registry};

use super::{Epoch, WriteKind};
use crate::client::LeaseDeadline;

/// Why a write was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fenced {
    #[error("namespace {namespace}: shard {shard} is no longer held at epoch {epoch}")]
    StaleEpoch { namespace: String, shard: u32, epoch: Epoch },
}

/// The fence of one worker.
#[derive(Default)]
pub(super) struct WriteFence {
    /// In a fleet, when the worker's liveness lease runs out by its own clock: no write is sent
    /// after it, even by a worker that was paused and has not yet noticed.
    lease: LeaseDeadline,
    in_flight: Arc<InFlightCounts>,
    refused: Refused,
}

impl WriteFence {
    /// Writes are refused from `deadline` on (the lease keeper moves it with every renewal).
    pub fn set_lease_deadline(&self, deadline: std::time::Instant) {
        self.lease.0.write().deadline = Some(deadline);
    }

    /// Refuses every write, whatever the deadline, until [`Self::release_writes`].
    pub fn hold_writes(&self) {
        self.lease.0.write().held = true;
    }

    pub fn release_writes(&self) {
        self.lease.0.write().held = false;
    }

    pub fn lease_deadline(&self) -> LeaseDeadline {
        self.lease.clone()
    }

    /// Whether the lease lets a write out now.
    pub fn lease_open(&self) -> bool {
        self.lease.writable()
    }

    /// Holds `shard` in flight until the guard is dropped. Called under the shard table's lock
    /// only, so that REVOKE, which seals the shard under that lock once none is in flight, either
    /// sees this hold or came first and made the caller's check fail.
    pub fn hold(&self, shard: u32) -> InFlight {
        *self.in_flight.counts.lock().entry(shard).or_default() += 1;
        InFlight { counts: self.in_flight.clone(), shard }
    }

    /// Whether nothing holds `shard` in flight.
    pub fn idle(&self, shard: u32) -> bool {
        !self.in_flight.counts.lock().contains_key(&shard)
    }

    /// Waits until nothing holds `shard` in flight.
    pub async fn wait_idle(&self, shard: u32) {
        loop {
            let notified = self.in_flight.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.idle(shard) {
                return;
            }
            notified.await;
        }
    }

    /// Counts a write of `kind` that was refused, or never even queued.
    pub fn count_refused(&self, kind: WriteKind) {
        self.refused.count(kind);
    }

    pub fn refused(&self, kind: WriteKind) -> u64 {
        self.refused.total(kind)
    }

    /// Registers `batchfleet_worker_fenced_writes_total{kind}` with the worker's registry, once.
    pub fn register_metrics(&self, registry: &Registry) -> prometheus::Result<()> {
        if self.refused.exported.get().is_some() {
            return Err(prometheus::Error::AlreadyReg);
        }
        let fenced = IntCounterVec::new(
            Opts::new(
                "fenced_writes_total",
                "Writes dropped and never sent because their shard was no longer held at their epoch",
            )
            .namespace("batchfleet_worker"),
            &["kind"],
        )?;
        registry.register(Box::new(fenced.clone()))?;
        // Exported at 0 from the start, so that the first fenced write is an increase.
        for kind in [WriteKind::Object, WriteKind::Event] {
            fenced.with_label_values(&[Refused::label(kind)]);
        }
        self.refused.exported.set(fenced).map_err(|_| prometheus::Error::AlreadyReg)
    }
}

/// Reconciles and held writes in flight per shard. Kept by shard number, not by tenure: a
/// reconcile of a tenure that was dropped still holds the shard's next REVOKE.
#[derive(Default)]
struct InFlightCounts {
    counts: Mutex<BTreeMap<u32, usize>>,
    idle: tokio::sync::Notify,
}

/// A reconcile, or a write, in flight for one shard; dropping it ends it.
pub struct InFlight {
    counts: Arc<InFlightCounts>,
    shard: u32,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut counts = self.counts.counts.lock();
        if let Some(n) = counts.get_mut(&self.shard) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.shard);
                self.counts.idle.notify_waiters();
            }
        }
    }
}

/// Writes refused, by kind.
#[derive(Default)]
struct Refused {
    objects: AtomicU64,
    events: AtomicU64,
    /// `batchfleet_worker_fenced_writes_total{kind}`, set once registered with the worker's
    /// registry.
    exported: std::sync::OnceLock<IntCounterVec>,
}

impl Refused {
    fn count(&self, kind: WriteKind) {
        self.counter(kind).fetch_add(1, Ordering::Relaxed);
        if let Some(fenced) = self.exported.get() {
            fenced.with_label_values(&[Self::label(kind)]).inc();
        }
    }

    fn total(&self, kind: WriteKind) -> u64 {
        self.counter(kind).load(Ordering::Relaxed)
    }

    fn counter(&self, kind: WriteKind) -> &AtomicU64 {
        match kind {
            WriteKind::Object => &self.objects,
            WriteKind::Event => &self.events,
        }
    }

    fn label(kind: WriteKind) -> &'static str {
        match kind {
            WriteKind::Object => "object",
            WriteKind::Event => "event",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_shard_is_idle_once_every_hold_of_it_is_dropped() {
        let fence = Arc::new(WriteFence::default());
        let (a, b) = (fence.hold(1), fence.hold(1));
        let other = fence.hold(2);
        let waiting = tokio::spawn({
            let fence = fence.clone();
            async move { fence.wait_idle(1).await }
        });
        drop(a);
        tokio::task::yield_now().await;
        assert!(!fence.idle(1) && !waiting.is_finished(), "one hold is left");
        drop(b);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await.unwrap().unwrap();
        assert!(fence.idle(1));
        assert!(!fence.idle(2), "another shard's hold is its own");
        drop(other);
    }

    #[test]
    fn the_lease_closes_at_its_deadline_and_while_held() {
        let fence = WriteFence::default();
        assert!(fence.lease_open(), "no deadline before the first renewal, or standalone");
        fence.set_lease_deadline(std::time::Instant::now() + std::time::Duration::from_secs(60));
        assert!(fence.lease_open());
        fence.hold_writes();
        assert!(!fence.lease_open(), "held after a lapse, whatever the deadline");
        fence.release_writes();
        assert!(fence.lease_open());
        fence.set_lease_deadline(std::time::Instant::now());
        assert!(!fence.lease_open(), "the deadline passed");
        assert!(!fence.lease_deadline().writable(), "the client sees the same window");
    }
}
