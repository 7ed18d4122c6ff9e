//! Per-shard ownership state: which shards this worker holds, in which phase of the hand-over
//! (Preparing, Active, Revoking), under which epoch, and the highest resourceVersions it has
//! written and seen for each. Asked when a watch event arrives, when a key is taken from a
//! queue, and before every write.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use prometheus::{IntCounterVec, Opts, Registry};

use crate::shards::ShardSpace;

/// An assignment's epoch: only grows per shard.
pub type Epoch = u64;

/// Where a held shard is in the ownership protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardPhase {
    /// Watches run and caches fill; nothing is acted on or written.
    Preparing,
    /// Reconciles and writes run.
    Active,
    /// No new work is taken; in-flight reconciles finish, and may still write.
    Revoking,
    /// REVOKE has answered: the in-flight reconciles are done and nothing more is written for
    /// the shard, not even the events they queued.
    Revoked,
}

/// What a fenced write writes: counted apart, because an event queued by a reconcile that
/// finished before REVOKE answered is dropped by design, while a dropped object write means a
/// reconcile outlived its tenure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// A reconcile's create, update, patch or delete.
    Object,
    /// A core/v1 Event from the event recorder.
    Event,
}

/// What the table knows about one held shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardStatus {
    pub phase: ShardPhase,
    pub epoch: Epoch,
    /// The highest resourceVersion a write of this shard's owner got back.
    pub written_rv: u64,
    /// The highest resourceVersion the watches feeding the shard have seen (bookmarks too).
    pub seen_rv: u64,
    /// Reconciles started for the shard: its load, for placement.
    pub reconciles: u64,
    /// The watch that feeds the shard's caches.
    pub feeder: Option<u64>,
    /// Writes sent for the shard in this tenure.
    pub writes: u64,
    /// When the last write of this tenure was answered.
    pub last_write_at: Option<std::time::Instant>,
}

/// A refused step of the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("shard {shard} is at epoch {current}; epoch {requested} is stale")]
    StaleEpoch { shard: u32, current: Epoch, requested: Epoch },
    #[error("shard {shard} is not held by this worker")]
    NotHeld { shard: u32 },
    #[error("shard {shard} is {phase:?}, not {expected:?}")]
    WrongPhase { shard: u32, phase: ShardPhase, expected: ShardPhase },
    #[error("shard {shard} is outside the {count} shards of this fleet")]
    OutOfRange { shard: u32, count: u32 },
}

/// Why a write was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fenced {
    #[error("namespace {namespace}: shard {shard} is no longer held at epoch {epoch}")]
    StaleEpoch { namespace: String, shard: u32, epoch: Epoch },
}

/// The table's counters on /metrics: per-shard load, which the coordinator weighs placement by,
/// and fenced writes.
#[derive(Clone)]
struct ShardMetrics {
    /// `batchfleet_worker_shard_reconciles_total{shard}`: reconciles started per shard.
    reconciles: IntCounterVec,
    /// `batchfleet_worker_fenced_writes_total{kind}`: writes dropped, never sent, by kind.
    fenced: IntCounterVec,
}

impl ShardMetrics {
    fn new() -> prometheus::Result<Self> {
        let reconciles = IntCounterVec::new(
            Opts::new("shard_reconciles_total", "Reconciles started per shard: the shard's load")
                .namespace("batchfleet_worker"),
            &["shard"],
        )?;
        let fenced = IntCounterVec::new(
            Opts::new(
                "fenced_writes_total",
                "Writes dropped and never sent because their shard was no longer held at their epoch",
            )
            .namespace("batchfleet_worker"),
            &["kind"],
        )?;
        Ok(Self { reconciles, fenced })
    }
}

/// The shard table of one worker. Cheap to clone; clones share the table.
#[derive(Clone)]
pub struct ShardTable {
    space: ShardSpace,
    shards: Arc<RwLock<BTreeMap<u32, ShardStatus>>>,
    /// Highest epoch ever assigned per shard, kept after a drop so an epoch never goes back.
    epochs: Arc<RwLock<BTreeMap<u32, Epoch>>>,
    stale_writes: Arc<AtomicU64>,
    stale_events: Arc<AtomicU64>,
    /// Set once registered with the worker's registry.
    metrics: Arc<std::sync::OnceLock<ShardMetrics>>,
    /// Bumped on every phase change, so waiters (the reconcile loop) can re-check.
    changes: Arc<tokio::sync::watch::Sender<u64>>,
    /// Reconciles running per shard; REVOKE waits for its shard's to reach zero.
    in_flight: Arc<Mutex<BTreeMap<u32, usize>>>,
    idle: Arc<tokio::sync::Notify>,
    /// Called with a shard that became Active, so controllers queue that shard's keys (only).
    on_activate: Arc<RwLock<Vec<ActivateHook>>>,
    /// Called with a shard that was dropped, so controllers empty its caches.
    on_drop: Arc<RwLock<Vec<ActivateHook>>>,
    /// In a fleet, when the worker's liveness lease runs out by its own clock: no write is sent
    /// after it, even by a worker that was paused and has not yet noticed.
    lease_deadline: crate::client::LeaseDeadline,
    /// The highest resourceVersion each watch group has seen, by feeder id. Kept per group, not
    /// per shard: a standalone worker's one group feeds every shard, and each of its events
    /// would otherwise update them all under the table's write lock.
    seen_by_feeder: Arc<Mutex<HashMap<u64, u64>>>,
}

/// What a controller does when one shard becomes Active.
pub type ActivateHook = Arc<dyn Fn(u32) + Send + Sync>;

/// A reconcile in flight for one shard; dropping it ends it.
pub struct InFlight {
    table: ShardTable,
    shard: u32,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut counts = self.table.in_flight.lock();
        if let Some(n) = counts.get_mut(&self.shard) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.shard);
                self.table.idle.notify_waiters();
            }
        }
    }
}

impl std::fmt::Debug for ShardTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardTable")
            .field("space", &self.space)
            .field("shards", &*self.shards.read())
            .finish()
    }
}

impl ShardTable {
    pub fn new(space: ShardSpace) -> Self {
        Self {
            space,
            shards: Arc::default(),
            epochs: Arc::default(),
            stale_writes: Arc::default(),
            stale_events: Arc::default(),
            metrics: Arc::default(),
            changes: Arc::new(tokio::sync::watch::channel(0).0),
            in_flight: Arc::default(),
            idle: Arc::default(),
            on_activate: Arc::default(),
            on_drop: Arc::default(),
            lease_deadline: crate::client::LeaseDeadline::default(),
            seen_by_feeder: Arc::default(),
        }
    }

    /// Writes are refused from `deadline` on (the lease keeper moves it with every renewal).
    pub fn set_lease_deadline(&self, deadline: std::time::Instant) {
        self.lease_deadline.0.write().deadline = Some(deadline);
    }

    /// The lease lapsed: no write goes out, whatever the deadline, until [`Self::release_writes`]
    /// (the next ACTIVATE). A renewal after the lapse moves the deadline forward, and a write a
    /// sync issued before the lapse may still wait in the client's queues.
    pub fn hold_writes(&self) {
        self.lease_deadline.0.write().held = true;
    }

    pub fn release_writes(&self) {
        self.lease_deadline.0.write().held = false;
    }

    /// The lease deadline this table checks every write against, shared with whoever must also
    /// check it (the client, at the moment a write is sent).
    pub fn lease_deadline(&self) -> crate::client::LeaseDeadline {
        self.lease_deadline.clone()
    }

    /// A table holding every shard of `space`, Active at epoch 1: `--standalone`.
    pub fn all_active(space: ShardSpace) -> Self {
        let table = Self::new(space);
        for shard in 0..space.count() {
            let status = ShardStatus {
                phase: ShardPhase::Active,
                epoch: 1,
                written_rv: 0,
                seen_rv: 0,
                reconciles: 0,
                feeder: Some(0),
                writes: 0,
                last_write_at: None,
            };
            table.shards.write().insert(shard, status);
            table.epochs.write().insert(shard, 1);
        }
        table
    }

    pub fn space(&self) -> ShardSpace {
        self.space
    }

    /// Registers the table's counters (`batchfleet_worker_shard_reconciles_total{shard}`,
    /// `batchfleet_worker_fenced_writes_total{kind}`) with the worker's registry, once.
    pub fn register_metrics(&self, registry: &Registry) -> prometheus::Result<()> {
        if self.metrics.get().is_some() {
            return Err(prometheus::Error::AlreadyReg);
        }
        let metrics = ShardMetrics::new()?;
        registry.register(Box::new(metrics.reconciles.clone()))?;
        registry.register(Box::new(metrics.fenced.clone()))?;
        // Exported at 0 from the start, so that the first fenced write is an increase.
        for kind in ["object", "event"] {
            metrics.fenced.with_label_values(&[kind]);
        }
        self.metrics.set(metrics).map_err(|_| prometheus::Error::AlreadyReg)
    }

    fn count_fenced(&self, kind: &str) {
        if let Some(m) = self.metrics.get() {
            m.fenced.with_label_values(&[kind]).inc();
        }
    }

    pub fn shard_of(&self, namespace: &str) -> u32 {
        self.space.shard_of(namespace)
    }

    pub fn status(&self, shard: u32) -> Option<ShardStatus> {
        let mut status = self.shards.read().get(&shard).copied()?;
        status.seen_rv = status.feeder.and_then(|f| self.seen_by_feeder.lock().get(&f).copied()).unwrap_or(0);
        Some(status)
    }

    /// The shards held in any phase: what the watches must cover.
    pub fn held(&self) -> BTreeSet<u32> {
        self.shards.read().keys().copied().collect()
    }

    /// Whether objects of `namespace` belong in this worker's caches (any phase).
    pub fn caches(&self, namespace: &str) -> bool {
        self.shards.read().contains_key(&self.shard_of(namespace))
    }

    /// The epoch under which work for `namespace` may start now: only while Active.
    pub fn acts_in(&self, namespace: &str) -> Option<Epoch> {
        self.shards
            .read()
            .get(&self.shard_of(namespace))
            .filter(|s| s.phase == ShardPhase::Active)
            .map(|s| s.epoch)
    }

    /// Starts a reconcile of `namespace` if its shard is Active: the epoch it runs under, and
    /// the hold REVOKE waits for.
    pub fn begin(&self, namespace: &str) -> Option<(Epoch, InFlight)> {
        let shard = self.shard_of(namespace);
        let mut table = self.shards.write();
        let s = table.get_mut(&shard).filter(|s| s.phase == ShardPhase::Active)?;
        s.reconciles += 1;
        if let Some(m) = self.metrics.get() {
            m.reconciles.with_label_values(&[shard.to_string().as_str()]).inc();
        }
        let epoch = s.epoch;
        // Counted under the table's lock, so a REVOKE that saw the shard Active waits for it.
        *self.in_flight.lock().entry(shard).or_default() += 1;
        drop(table);
        Some((epoch, InFlight { table: self.clone(), shard }))
    }

    /// Waits until no reconcile of `shard` is in flight.
    pub async fn wait_idle(&self, shard: u32) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.in_flight.lock().contains_key(&shard) {
                return;
            }
            notified.await;
        }
    }

    /// The watch that feeds `shard`'s caches, if it is held.
    pub fn feeder(&self, shard: u32) -> Option<u64> {
        self.shards.read().get(&shard).and_then(|s| s.feeder)
    }

    /// Makes watch `id` the one that feeds `shard`'s caches.
    pub fn set_feeder(&self, shard: u32, id: u64) {
        if let Some(s) = self.shards.write().get_mut(&shard) {
            s.feeder = Some(id);
        }
    }

    /// Registers what to do when a shard is dropped.
    pub fn on_drop(&self, hook: ActivateHook) {
        self.on_drop.write().push(hook);
    }

    /// Registers what to do when a shard becomes Active.
    pub fn on_activate(&self, hook: ActivateHook) {
        self.on_activate.write().push(hook);
    }

    /// Checks a write for `namespace` begun under `epoch`: allowed while the shard is Active or
    /// Revoking (in-flight reconciles finish) at that same epoch. A refusal is counted.
    pub fn check_write(&self, namespace: &str, epoch: Epoch) -> Result<(), Fenced> {
        self.check(namespace, epoch, WriteKind::Object)
    }

    /// Checks a write of `kind` for `namespace` begun under `epoch`; a refusal is counted under
    /// its kind.
    pub fn check(&self, namespace: &str, epoch: Epoch, kind: WriteKind) -> Result<(), Fenced> {
        self.admit(namespace, epoch, kind, false)
    }

    /// [`ShardTable::check`] for a write sent outside any reconcile (the event recorder's): on
    /// success the write holds the shard in flight until the guard is dropped, so REVOKE does not
    /// answer while it is on its way.
    pub fn hold(&self, namespace: &str, epoch: Epoch, kind: WriteKind) -> Result<InFlight, Fenced> {
        self.admit(namespace, epoch, kind, true)?;
        Ok(InFlight { table: self.clone(), shard: self.shard_of(namespace) })
    }

    fn admit(&self, namespace: &str, epoch: Epoch, kind: WriteKind, hold: bool) -> Result<(), Fenced> {
        let shard = self.shard_of(namespace);
        let lease_valid = self.lease_deadline.writable();
        let mut table = self.shards.write();
        // In-flight reconciles finish their writes while Revoking; the event recorder starts none:
        // its queue may hold many of the shard's events, and REVOKE must not wait for them all.
        let writable = match kind {
            WriteKind::Object => &[ShardPhase::Active, ShardPhase::Revoking][..],
            WriteKind::Event => &[ShardPhase::Active][..],
        };
        if lease_valid
            && let Some(s) = table.get_mut(&shard)
            && s.epoch == epoch
            && writable.contains(&s.phase)
        {
            s.writes += 1;
            if hold {
                // Counted under the table's lock, as `begin` does, so REVOKE's seal sees it.
                *self.in_flight.lock().entry(shard).or_default() += 1;
            }
            return Ok(());
        }
        drop(table);
        let (counter, label) = match kind {
            WriteKind::Object => (&self.stale_writes, "object"),
            WriteKind::Event => (&self.stale_events, "event"),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.count_fenced(label);
        Err(Fenced::StaleEpoch { namespace: namespace.to_string(), shard, epoch })
    }

    /// Counts an event that was not even queued: its shard was not Active here.
    pub fn count_stale_event(&self) {
        self.stale_events.fetch_add(1, Ordering::Relaxed);
        self.count_fenced("event");
    }

    /// Object writes refused because their epoch was stale.
    pub fn stale_writes(&self) -> u64 {
        self.stale_writes.load(Ordering::Relaxed)
    }

    /// Events dropped because their shard was no longer held at their epoch (or, REVOKE having
    /// answered, no longer written for).
    pub fn stale_events(&self) -> u64 {
        self.stale_events.load(Ordering::Relaxed)
    }

    /// Records the resourceVersion a write for `namespace` got back.
    pub fn record_written(&self, namespace: &str, resource_version: Option<&str>) {
        let Some(rv) = resource_version.and_then(|v| v.parse::<u64>().ok()) else { return };
        if let Some(s) = self.shards.write().get_mut(&self.shard_of(namespace)) {
            s.written_rv = s.written_rv.max(rv);
            s.last_write_at = Some(std::time::Instant::now());
        }
    }

    /// Records a resourceVersion the watch group `feeder` delivered (an object's, or a
    /// bookmark's): every shard it feeds has seen it.
    pub fn record_seen(&self, feeder: u64, resource_version: u64) {
        let mut seen = self.seen_by_feeder.lock();
        let at = seen.entry(feeder).or_default();
        *at = (*at).max(resource_version);
    }

    /// Forgets a watch group that feeds no shard any more.
    pub fn forget_feeder(&self, feeder: u64) {
        self.seen_by_feeder.lock().remove(&feeder);
    }

    /// A receiver that changes whenever a shard changes phase.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    fn check_range(&self, shard: u32) -> Result<(), ShardError> {
        if shard >= self.space.count() {
            return Err(ShardError::OutOfRange { shard, count: self.space.count() });
        }
        Ok(())
    }

    /// PREPARE: hold `shard` at `epoch`, filling caches without acting.
    pub fn prepare(&self, shard: u32, epoch: Epoch) -> Result<(), ShardError> {
        self.check_range(shard)?;
        let mut epochs = self.epochs.write();
        let current = epochs.get(&shard).copied().unwrap_or(0);
        if epoch <= current {
            return Err(ShardError::StaleEpoch { shard, current, requested: epoch });
        }
        epochs.insert(shard, epoch);
        let status = ShardStatus {
            phase: ShardPhase::Preparing,
            epoch,
            written_rv: 0,
            seen_rv: 0,
            reconciles: 0,
            feeder: None,
            writes: 0,
            last_write_at: None,
        };
        self.shards.write().insert(shard, status);
        drop(epochs);
        self.changed();
        Ok(())
    }

    /// ACTIVATE: a Preparing shard at `epoch` starts acting. The caller has waited for its
    /// caches to reflect the hand-over barrier.
    pub fn activate(&self, shard: u32, epoch: Epoch) -> Result<(), ShardError> {
        self.check_range(shard)?;
        let mut table = self.shards.write();
        let s = table.get_mut(&shard).ok_or(ShardError::NotHeld { shard })?;
        if s.epoch != epoch {
            return Err(ShardError::StaleEpoch { shard, current: s.epoch, requested: epoch });
        }
        if s.phase != ShardPhase::Preparing {
            return Err(ShardError::WrongPhase { shard, phase: s.phase, expected: ShardPhase::Preparing });
        }
        s.phase = ShardPhase::Active;
        drop(table);
        self.changed();
        let hooks = self.on_activate.read().clone();
        for hook in hooks {
            hook(shard);
        }
        Ok(())
    }

    /// REVOKE, whole: the shard stops taking work, its in-flight reconciles finish, and the
    /// answer is the resourceVersion of its last write, the hand-over barrier. From the answer
    /// on nothing more is written for the shard (Revoked).
    pub async fn revoke_and_drain(&self, shard: u32) -> Result<u64, ShardError> {
        let epoch = self.revoke(shard)?;
        let mut table = loop {
            self.wait_idle(shard).await;
            let table = self.shards.write();
            // Reconciles and held writes start under this lock: none can slip in between this
            // check and the seal below.
            if !self.in_flight.lock().contains_key(&shard) {
                break table;
            }
        };
        let Some(s) = table.get_mut(&shard).filter(|s| s.epoch == epoch) else {
            // Dropped (or moved on) while draining: nothing of this tenure writes any more.
            return Ok(0);
        };
        s.phase = ShardPhase::Revoked;
        let written = s.written_rv;
        drop(table);
        self.changed();
        Ok(written)
    }

    /// REVOKE's first half: an Active shard stops taking work. Returns its epoch.
    pub fn revoke(&self, shard: u32) -> Result<Epoch, ShardError> {
        self.check_range(shard)?;
        let mut table = self.shards.write();
        let s = table.get_mut(&shard).ok_or(ShardError::NotHeld { shard })?;
        match s.phase {
            ShardPhase::Preparing => {
                return Err(ShardError::WrongPhase { shard, phase: s.phase, expected: ShardPhase::Active });
            }
            ShardPhase::Active => s.phase = ShardPhase::Revoking,
            // A repeated REVOKE changes nothing.
            ShardPhase::Revoking | ShardPhase::Revoked => {}
        }
        let epoch = s.epoch;
        drop(table);
        self.changed();
        Ok(epoch)
    }

    /// DROP: forget the shard; any later write under its epoch is fenced. Returns what was held.
    pub fn drop_shard(&self, shard: u32) -> Option<ShardStatus> {
        let gone = self.shards.write().remove(&shard);
        if gone.is_some() {
            self.changed();
            let hooks = self.on_drop.read().clone();
            for hook in hooks {
                hook(shard);
            }
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> ShardTable {
        ShardTable::new(ShardSpace::new(4).unwrap())
    }

    #[test]
    fn a_preparing_shard_caches_but_never_acts_and_its_writes_are_fenced() {
        let t = table();
        let ns = "team-a";
        let shard = t.shard_of(ns);
        t.prepare(shard, 3).unwrap();
        assert!(t.caches(ns));
        assert_eq!(t.acts_in(ns), None);
        assert!(t.check_write(ns, 3).is_err());
        t.activate(shard, 3).unwrap();
        assert_eq!(t.acts_in(ns), Some(3));
        assert_eq!(t.check_write(ns, 3), Ok(()));
    }

    #[test]
    fn a_revoking_shard_takes_no_new_work_but_finishes_in_flight_writes() {
        let t = table();
        let ns = "team-a";
        let shard = t.shard_of(ns);
        t.prepare(shard, 1).unwrap();
        t.activate(shard, 1).unwrap();
        assert_eq!(t.revoke(shard), Ok(1));
        assert_eq!(t.acts_in(ns), None);
        assert_eq!(t.check_write(ns, 1), Ok(()));
        assert!(t.check(ns, 1, WriteKind::Event).is_err(), "no event write starts while revoking");
        t.drop_shard(shard);
        assert!(!t.caches(ns));
        assert!(t.check_write(ns, 1).is_err());
        assert_eq!(t.stale_writes(), 1, "the write after the drop was counted");
        assert_eq!(t.stale_events(), 1);
    }

    #[test]
    fn no_write_goes_out_once_the_lease_deadline_passed() {
        let t = table();
        let ns = "team-a";
        let shard = t.shard_of(ns);
        t.prepare(shard, 1).unwrap();
        t.activate(shard, 1).unwrap();
        t.set_lease_deadline(std::time::Instant::now() + std::time::Duration::from_secs(60));
        assert_eq!(t.check_write(ns, 1), Ok(()));
        // A worker that was paused past its deadline: the shard still looks Active to it.
        t.set_lease_deadline(std::time::Instant::now());
        assert_eq!(t.acts_in(ns), Some(1));
        assert!(t.check_write(ns, 1).is_err());
        assert_eq!(t.stale_writes(), 1);
    }

    #[test]
    fn epochs_only_grow_even_across_a_drop() {
        let t = table();
        t.prepare(2, 5).unwrap();
        assert_eq!(t.prepare(2, 5), Err(ShardError::StaleEpoch { shard: 2, current: 5, requested: 5 }));
        t.drop_shard(2);
        assert!(matches!(t.prepare(2, 4), Err(ShardError::StaleEpoch { .. })));
        t.prepare(2, 6).unwrap();
        assert!(matches!(t.activate(2, 5), Err(ShardError::StaleEpoch { .. })));
        assert!(matches!(t.prepare(9, 1), Err(ShardError::OutOfRange { .. })));
    }

    #[test]
    fn a_write_begun_under_an_old_epoch_is_fenced_after_the_shard_comes_back() {
        let t = table();
        let ns = "team-b";
        let shard = t.shard_of(ns);
        t.prepare(shard, 1).unwrap();
        t.activate(shard, 1).unwrap();
        t.revoke(shard).unwrap();
        t.drop_shard(shard);
        t.prepare(shard, 2).unwrap();
        t.activate(shard, 2).unwrap();
        assert!(t.check_write(ns, 1).is_err(), "the old tenure's write is stale");
        assert_eq!(t.check_write(ns, 2), Ok(()));
    }

    #[test]
    fn written_and_seen_versions_only_grow() {
        let t = table();
        let ns = "team-c";
        let shard = t.shard_of(ns);
        t.prepare(shard, 1).unwrap();
        t.record_written(ns, Some("10"));
        t.record_written(ns, Some("7"));
        t.record_written(ns, Some("opaque"));
        t.set_feeder(shard, 4);
        t.record_seen(4, 12);
        t.record_seen(4, 3);
        t.record_seen(5, 20);
        let s = t.status(shard).unwrap();
        assert_eq!((s.written_rv, s.seen_rv), (10, 12));
    }

    #[tokio::test]
    async fn revoke_waits_for_the_shards_in_flight_reconciles_only() {
        let t = table();
        let (a, b) = ("alpha", "beta");
        let (sa, sb) = (t.shard_of(a), t.shard_of(b));
        assert_ne!(sa, sb);
        for s in [sa, sb] {
            t.prepare(s, 1).unwrap();
            t.activate(s, 1).unwrap();
        }
        let (_, other) = t.begin(b).unwrap();
        let (epoch, running) = t.begin(a).unwrap();
        t.record_written(a, Some("42"));
        let revoke = tokio::spawn({
            let t = t.clone();
            async move { t.revoke_and_drain(sa).await }
        });
        tokio::task::yield_now().await;
        assert!(t.begin(a).is_none(), "a revoking shard takes no new work");
        assert!(!revoke.is_finished(), "the in-flight reconcile holds the revoke");
        assert_eq!(t.check_write(a, epoch), Ok(()), "and may still write");
        drop(running);
        assert_eq!(revoke.await.unwrap(), Ok(42), "the last write's resourceVersion");
        assert_eq!(t.status(sa).unwrap().phase, ShardPhase::Revoked);
        assert!(t.check_write(a, epoch).is_err(), "nothing is written once REVOKE answered");
        drop(other);
    }

    #[test]
    fn stale_events_are_counted_apart_from_stale_object_writes() {
        let t = table();
        let ns = "team-a";
        let shard = t.shard_of(ns);
        t.prepare(shard, 1).unwrap();
        assert!(t.check(ns, 1, WriteKind::Event).is_err(), "a preparing shard writes no events");
        t.activate(shard, 1).unwrap();
        assert_eq!(t.check(ns, 1, WriteKind::Event), Ok(()));
        assert!(t.check(ns, 0, WriteKind::Event).is_err(), "an older epoch's event");
        assert_eq!((t.stale_events(), t.stale_writes()), (2, 0));
        assert_eq!(t.status(shard).unwrap().writes, 1, "the event written counts as a write");
    }

    #[tokio::test]
    async fn revoke_does_not_answer_while_a_held_write_is_on_its_way() {
        let t = table();
        let ns = "team-a";
        let shard = t.shard_of(ns);
        t.prepare(shard, 1).unwrap();
        t.activate(shard, 1).unwrap();
        let held = t.hold(ns, 1, WriteKind::Event).unwrap();
        let revoke = tokio::spawn({
            let t = t.clone();
            async move { t.revoke_and_drain(shard).await }
        });
        tokio::task::yield_now().await;
        assert!(!revoke.is_finished(), "the event write in flight holds REVOKE");
        drop(held);
        assert_eq!(revoke.await.unwrap(), Ok(0));
        assert!(t.hold(ns, 1, WriteKind::Event).is_err(), "and none starts after it answered");
    }

    #[test]
    fn activating_a_shard_calls_the_hooks_with_that_shard() {
        let t = table();
        let seen = Arc::new(Mutex::new(Vec::new()));
        t.on_activate({
            let seen = seen.clone();
            Arc::new(move |s| seen.lock().push(s))
        });
        t.prepare(3, 1).unwrap();
        assert!(seen.lock().is_empty());
        t.activate(3, 1).unwrap();
        assert_eq!(*seen.lock(), vec![3]);
    }

    #[test]
    fn per_shard_load_and_fenced_writes_are_exported_once() {
        let t = table();
        let registry = Registry::new();
        t.register_metrics(&registry).unwrap();
        assert!(t.register_metrics(&registry).is_err(), "once per table");
        let (a, b) = ("alpha", "beta");
        for ns in [a, b] {
            t.prepare(t.shard_of(ns), 1).unwrap();
            t.activate(t.shard_of(ns), 1).unwrap();
        }
        for _ in 0..3 {
            drop(t.begin(a));
        }
        drop(t.begin(b));
        assert!(t.check_write(a, 0).is_err());
        assert!(t.check(a, 0, WriteKind::Event).is_err());
        let mut text = Vec::new();
        prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &registry.gather(), &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        for line in [
            format!("batchfleet_worker_shard_reconciles_total{{shard=\"{}\"}} 3", t.shard_of(a)),
            format!("batchfleet_worker_shard_reconciles_total{{shard=\"{}\"}} 1", t.shard_of(b)),
            "batchfleet_worker_fenced_writes_total{kind=\"object\"} 1".to_string(),
            "batchfleet_worker_fenced_writes_total{kind=\"event\"} 1".to_string(),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from:\n{text}");
        }
    }

    #[test]
    fn standalone_holds_every_shard_active() {
        let t = ShardTable::all_active(ShardSpace::new(256).unwrap());
        assert_eq!(t.held().len(), 256);
        assert_eq!(t.acts_in("anything"), Some(1));
    }
}
