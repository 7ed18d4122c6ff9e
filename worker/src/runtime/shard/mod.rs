//! Per-shard ownership state: which shards this worker holds, in which phase of the hand-over
//! (Preparing, Active, Revoking, Revoked), under which epoch, and the highest resourceVersions it
//! has written and seen for each. Asked when a watch event arrives, when a key is taken from a
//! queue, and before every write.
//!
//! [`ShardTable`] composes parts that each read alone:
//! - `state`: one shard's side of the ownership protocol, a pure state machine (steps in,
//!   actions out, or the reason a step is refused), and which writes each phase admits;
//! - `fence`: the lease window, the holds REVOKE waits for, the refused writes and their
//!   counter on /metrics;
//! - `load`: reconciles per shard, the load reported to the coordinator, and its counter;
//! - `versions`: the resourceVersions a tenure wrote and its watches delivered, the hand-over's
//!   barrier on either side.
//!
//! # Locks, what each guards and why
//! - **The slots** (one `RwLock` over every shard): each shard's protocol state (phase, epoch,
//!   highest epoch ever given) and its tenure's accounts (writes admitted, reconciles started,
//!   resourceVersion written, feeding watch group). One lock, because a write's fence check and
//!   its in-flight hold must be atomic with REVOKE's steps: [`ShardTable::begin`] and
//!   [`ShardTable::check`]/[`ShardTable::hold`] check the phase and count their hold under its
//!   write lock, and [`ShardTable::revoke_and_drain`] seals the shard (Revoked) under it only
//!   once no hold is counted, so no reconcile or write slips in between that check and the seal.
//!   PREPARE's epoch check and the tenure it starts are one step under it too, and a tenure's
//!   accounts start and end with the tenure.
//! - **The in-flight counts** (a `Mutex` in the fence): a hold is added, and the seal checks for
//!   none, only under the slots' write lock (order: slots, then in-flight counts); a hold is
//!   released under this lock alone, because a release only makes a shard idler: a reconcile that
//!   ends does not wait for the table. Kept by shard number, not by tenure: a reconcile of a
//!   tenure that was dropped still holds the shard's next REVOKE.
//! - **The versions seen** (a `Mutex` in `versions`): per watch group, updated on every watch
//!   event; never taken with the slots' lock held, so watch events do not contend with reconciles.
//! - **The hooks** (an `RwLock`): the controllers' activate and drop hooks, cloned out before they
//!   run, so that a hook runs with no lock of the table held and may call back into it.
//! - **The lease window** (an `RwLock` in [`crate::client::LeaseDeadline`], shared with the client
//!   that checks it again as a write is sent): read before the slots' lock is taken, never under it.
//!
//! The refused writes are counted in atomics; phase changes are announced on a watch channel,
//! and hooks called, after the slots' lock is released.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::RwLock;
use prometheus::Registry;

use crate::shards::ShardSpace;

mod fence;
mod load;
mod state;
mod versions;

pub use fence::{Fenced, InFlight};
pub use state::{ShardError, ShardPhase, WriteKind};

use fence::WriteFence;
use load::LoadAccounting;
use state::{Action, Event, ShardState};
use versions::{SeenVersions, TenureVersions};

/// An assignment's epoch: only grows per shard.
pub type Epoch = u64;

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

/// What a controller does when one shard becomes Active (or is dropped).
pub type ActivateHook = Arc<dyn Fn(u32) + Send + Sync>;

/// What is counted about one tenure, from nothing at its PREPARE.
#[derive(Debug, Clone, Copy, Default)]
struct TenureAccounts {
    /// Writes the fence let out.
    writes: u64,
    /// Reconciles started: the load.
    reconciles: u64,
    versions: TenureVersions,
}

/// One shard's entry in the table.
#[derive(Debug)]
struct Slot {
    state: ShardState,
    /// Present exactly while the shard is held.
    accounts: Option<TenureAccounts>,
}

impl Slot {
    fn new(shard: u32) -> Self {
        Self { state: ShardState::new(shard), accounts: None }
    }

    /// Takes a protocol step and carries out what it asks of the slot itself; the other actions
    /// are for the caller, once the table's lock is released.
    fn step(&mut self, event: Event) -> Result<Vec<Action>, ShardError> {
        let actions = self.state.on(event)?;
        for action in &actions {
            match action {
                Action::StartTenure => self.accounts = Some(TenureAccounts::default()),
                Action::EndTenure => self.accounts = None,
                _ => {}
            }
        }
        Ok(actions)
    }

    /// The shard's status while held, the versions seen aside (they are kept per watch group).
    fn status(&self) -> Option<ShardStatus> {
        let (tenure, accounts) = (self.state.tenure()?, self.accounts?);
        Some(ShardStatus {
            phase: tenure.phase,
            epoch: tenure.epoch,
            written_rv: accounts.versions.written_rv,
            seen_rv: 0,
            reconciles: accounts.reconciles,
            feeder: accounts.versions.feeder,
            writes: accounts.writes,
            last_write_at: accounts.versions.last_write_at,
        })
    }
}

/// `shard`'s slot, made on first use; the caller checked that `shard` is in range.
fn slot(slots: &mut BTreeMap<u32, Slot>, shard: u32) -> &mut Slot {
    slots.entry(shard).or_insert_with(|| Slot::new(shard))
}

#[derive(Default)]
struct Hooks {
    /// Called with a shard that became Active, so controllers queue that shard's keys (only).
    on_activate: Vec<ActivateHook>,
    /// Called with a shard that was dropped, so controllers empty its caches.
    on_drop: Vec<ActivateHook>,
}

struct Inner {
    space: ShardSpace,
    slots: RwLock<BTreeMap<u32, Slot>>,
    fence: WriteFence,
    load: LoadAccounting,
    seen: SeenVersions,
    hooks: RwLock<Hooks>,
    /// Bumped on every phase change, so waiters (the reconcile loop) can re-check.
    changes: tokio::sync::watch::Sender<u64>,
}

/// The shard table of one worker. Cheap to clone; clones share the table.
#[derive(Clone)]
pub struct ShardTable {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ShardTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held: BTreeMap<u32, ShardStatus> = self
            .inner
            .slots
            .read()
            .iter()
            .filter_map(|(shard, slot)| Some((*shard, slot.status()?)))
            .collect();
        f.debug_struct("ShardTable").field("space", &self.inner.space).field("shards", &held).finish()
    }
}

impl ShardTable {
    pub fn new(space: ShardSpace) -> Self {
        Self {
            inner: Arc::new(Inner {
                space,
                slots: RwLock::default(),
                fence: WriteFence::default(),
                load: LoadAccounting::default(),
                seen: SeenVersions::default(),
                hooks: RwLock::default(),
                changes: tokio::sync::watch::channel(0).0,
            }),
        }
    }

    /// Writes are refused from `deadline` on (the lease keeper moves it with every renewal).
    pub fn set_lease_deadline(&self, deadline: std::time::Instant) {
        self.inner.fence.set_lease_deadline(deadline);
    }

    /// The lease lapsed: no write goes out, whatever the deadline, until [`Self::release_writes`]
    /// (the next ACTIVATE). A renewal after the lapse moves the deadline forward, and a write a
    /// sync issued before the lapse may still wait in the client's queues.
    pub fn hold_writes(&self) {
        self.inner.fence.hold_writes();
    }

    pub fn release_writes(&self) {
        self.inner.fence.release_writes();
    }

    /// The lease deadline this table checks every write against, shared with whoever must also
    /// check it (the client, at the moment a write is sent).
    pub fn lease_deadline(&self) -> crate::client::LeaseDeadline {
        self.inner.fence.lease_deadline()
    }

    /// A table holding every shard of `space`, Active at epoch 1: `--standalone`.
    pub fn all_active(space: ShardSpace) -> Self {
        let table = Self::new(space);
        let accounts = TenureAccounts {
            versions: TenureVersions { feeder: Some(0), ..TenureVersions::default() },
            ..TenureAccounts::default()
        };
        table
            .inner
            .slots
            .write()
            .extend((0..space.count()).map(|shard| {
                (shard, Slot { state: ShardState::acting(shard, 1), accounts: Some(accounts) })
            }));
        table
    }

    pub fn space(&self) -> ShardSpace {
        self.inner.space
    }

    /// Registers the table's counters (`batchfleet_worker_shard_reconciles_total{shard}`,
    /// `batchfleet_worker_fenced_writes_total{kind}`) with the worker's registry, once.
    pub fn register_metrics(&self, registry: &Registry) -> prometheus::Result<()> {
        self.inner.load.register_metrics(registry)?;
        self.inner.fence.register_metrics(registry)
    }

    pub fn shard_of(&self, namespace: &str) -> u32 {
        self.inner.space.shard_of(namespace)
    }

    pub fn status(&self, shard: u32) -> Option<ShardStatus> {
        let mut status = self.inner.slots.read().get(&shard)?.status()?;
        status.seen_rv = self.inner.seen.of(status.feeder);
        Some(status)
    }

    /// The shards held in any phase: what the watches must cover.
    pub fn held(&self) -> BTreeSet<u32> {
        self.inner
            .slots
            .read()
            .iter()
            .filter(|(_, slot)| slot.state.tenure().is_some())
            .map(|(s, _)| *s)
            .collect()
    }

    /// Whether objects of `namespace` belong in this worker's caches (any phase).
    pub fn caches(&self, namespace: &str) -> bool {
        self.inner
            .slots
            .read()
            .get(&self.shard_of(namespace))
            .is_some_and(|slot| slot.state.tenure().is_some())
    }

    /// The epoch under which work for `namespace` may start now: only while Active.
    pub fn acts_in(&self, namespace: &str) -> Option<Epoch> {
        self.inner.slots.read().get(&self.shard_of(namespace))?.state.acting_epoch()
    }

    /// Starts a reconcile of `namespace` if its shard is Active: the epoch it runs under, and
    /// the hold REVOKE waits for.
    pub fn begin(&self, namespace: &str) -> Option<(Epoch, InFlight)> {
        let shard = self.shard_of(namespace);
        let mut slots = self.inner.slots.write();
        let slot = slots.get_mut(&shard)?;
        let epoch = slot.state.acting_epoch()?;
        let accounts = slot.accounts.as_mut()?;
        self.inner.load.count_reconcile(shard, &mut accounts.reconciles);
        // Held under the table's lock, so a REVOKE that saw the shard Active waits for it.
        let in_flight = self.inner.fence.hold(shard);
        drop(slots);
        Some((epoch, in_flight))
    }

    /// Waits until no reconcile of `shard` is in flight.
    pub async fn wait_idle(&self, shard: u32) {
        self.inner.fence.wait_idle(shard).await;
    }

    /// The watch that feeds `shard`'s caches, if it is held.
    pub fn feeder(&self, shard: u32) -> Option<u64> {
        self.inner.slots.read().get(&shard)?.accounts?.versions.feeder
    }

    /// Makes watch `id` the one that feeds `shard`'s caches.
    pub fn set_feeder(&self, shard: u32, id: u64) {
        if let Some(accounts) = self.inner.slots.write().get_mut(&shard).and_then(|s| s.accounts.as_mut()) {
            accounts.versions.feeder = Some(id);
        }
    }

    /// Registers what to do when a shard is dropped.
    pub fn on_drop(&self, hook: ActivateHook) {
        self.inner.hooks.write().on_drop.push(hook);
    }

    /// Registers what to do when a shard becomes Active.
    pub fn on_activate(&self, hook: ActivateHook) {
        self.inner.hooks.write().on_activate.push(hook);
    }

    /// Checks a write for `namespace` begun under `epoch`: allowed while the shard is Active or
    /// Revoking (in-flight reconciles finish) at that same epoch. A refusal is counted.
    pub fn check_write(&self, namespace: &str, epoch: Epoch) -> Result<(), Fenced> {
        self.check(namespace, epoch, WriteKind::Object)
    }

    /// Checks a write of `kind` for `namespace` begun under `epoch`; a refusal is counted under
    /// its kind.
    pub fn check(&self, namespace: &str, epoch: Epoch, kind: WriteKind) -> Result<(), Fenced> {
        self.admit(namespace, epoch, kind, |_| ())
    }

    /// [`ShardTable::check`] for a write sent outside any reconcile (the event recorder's): on
    /// success the write holds the shard in flight until the guard is dropped, so REVOKE does not
    /// answer while it is on its way.
    pub fn hold(&self, namespace: &str, epoch: Epoch, kind: WriteKind) -> Result<InFlight, Fenced> {
        // Held under the table's lock, as `begin` does, so REVOKE's seal sees it.
        self.admit(namespace, epoch, kind, |shard| self.inner.fence.hold(shard))
    }

    /// Lets a write out if the lease is open and the shard's state admits it, then, under the
    /// table's lock still, calls `admitted` with the shard; counts a refusal.
    fn admit<T>(
        &self,
        namespace: &str,
        epoch: Epoch,
        kind: WriteKind,
        admitted: impl FnOnce(u32) -> T,
    ) -> Result<T, Fenced> {
        let shard = self.shard_of(namespace);
        let lease_open = self.inner.fence.lease_open();
        let mut slots = self.inner.slots.write();
        if lease_open
            && let Some(slot) = slots.get_mut(&shard)
            && slot.state.admits(epoch, kind)
            && let Some(accounts) = slot.accounts.as_mut()
        {
            accounts.writes += 1;
            return Ok(admitted(shard));
        }
        drop(slots);
        self.inner.fence.count_refused(kind);
        Err(Fenced::StaleEpoch { namespace: namespace.to_string(), shard, epoch })
    }

    /// Counts an event that was not even queued: its shard was not Active here.
    pub fn count_stale_event(&self) {
        self.inner.fence.count_refused(WriteKind::Event);
    }

    /// Object writes refused because their epoch was stale.
    pub fn stale_writes(&self) -> u64 {
        self.inner.fence.refused(WriteKind::Object)
    }

    /// Events dropped because their shard was no longer held at their epoch (or, REVOKE having
    /// answered, no longer written for).
    pub fn stale_events(&self) -> u64 {
        self.inner.fence.refused(WriteKind::Event)
    }

    /// Records the resourceVersion a write for `namespace` got back.
    pub fn record_written(&self, namespace: &str, resource_version: Option<&str>) {
        let Some(rv) = versions::parse(resource_version) else { return };
        let shard = self.shard_of(namespace);
        if let Some(accounts) = self.inner.slots.write().get_mut(&shard).and_then(|s| s.accounts.as_mut()) {
            accounts.versions.record_written(rv);
        }
    }

    /// Records a resourceVersion the watch group `feeder` delivered (an object's, or a
    /// bookmark's): every shard it feeds has seen it.
    pub fn record_seen(&self, feeder: u64, resource_version: u64) {
        self.inner.seen.record(feeder, resource_version);
    }

    /// Forgets a watch group that feeds no shard any more.
    pub fn forget_feeder(&self, feeder: u64) {
        self.inner.seen.forget(feeder);
    }

    /// A receiver that changes whenever a shard changes phase.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// Carries out what a protocol step asks of the worker once the table's lock is released.
    fn announce(&self, shard: u32, actions: &[Action]) {
        for action in actions {
            let hooks = match action {
                Action::NotifyPhaseChange => {
                    self.inner.changes.send_modify(|n| *n += 1);
                    continue;
                }
                Action::RunActivateHooks => self.inner.hooks.read().on_activate.clone(),
                Action::RunDropHooks => self.inner.hooks.read().on_drop.clone(),
                // Carried out on the slot, under the lock.
                Action::StartTenure | Action::EndTenure | Action::AnswerLastWrite => continue,
            };
            for hook in hooks {
                hook(shard);
            }
        }
    }

    fn check_range(&self, shard: u32) -> Result<(), ShardError> {
        let count = self.inner.space.count();
        if shard >= count {
            return Err(ShardError::OutOfRange { shard, count });
        }
        Ok(())
    }

    /// Takes a protocol step for `shard` (in range) under the table's lock, then announces it.
    fn step(&self, shard: u32, event: Event) -> Result<(), ShardError> {
        self.check_range(shard)?;
        let actions = slot(&mut self.inner.slots.write(), shard).step(event)?;
        self.announce(shard, &actions);
        Ok(())
    }

    /// PREPARE: hold `shard` at `epoch`, filling caches without acting.
    pub fn prepare(&self, shard: u32, epoch: Epoch) -> Result<(), ShardError> {
        self.step(shard, Event::Prepare { epoch })
    }

    /// ACTIVATE: a Preparing shard at `epoch` starts acting. The caller has waited for its
    /// caches to reflect the hand-over barrier.
    pub fn activate(&self, shard: u32, epoch: Epoch) -> Result<(), ShardError> {
        self.step(shard, Event::Activate { epoch })
    }

    /// REVOKE, whole: the shard stops taking work, its in-flight reconciles finish, and the
    /// answer is the resourceVersion of its last write, the hand-over barrier. From the answer
    /// on nothing more is written for the shard (Revoked).
    pub async fn revoke_and_drain(&self, shard: u32) -> Result<u64, ShardError> {
        let epoch = self.revoke(shard)?;
        let mut slots = loop {
            self.wait_idle(shard).await;
            let slots = self.inner.slots.write();
            // Reconciles and held writes start under this lock: none can slip in between this
            // check and the seal below.
            if self.inner.fence.idle(shard) {
                break slots;
            }
        };
        let slot = slot(&mut slots, shard);
        let actions = slot.step(Event::Drained { epoch })?;
        let answer = actions.contains(&Action::AnswerLastWrite);
        let written = slot.accounts.filter(|_| answer).map_or(0, |a| a.versions.written_rv);
        drop(slots);
        self.announce(shard, &actions);
        Ok(written)
    }

    /// REVOKE's first half: an Active shard stops taking work. Returns its epoch.
    pub fn revoke(&self, shard: u32) -> Result<Epoch, ShardError> {
        self.check_range(shard)?;
        let (actions, tenure) = {
            let mut slots = self.inner.slots.write();
            let slot = slot(&mut slots, shard);
            (slot.step(Event::Revoke)?, slot.state.tenure())
        };
        self.announce(shard, &actions);
        // A REVOKE that was not refused leaves the shard held.
        tenure.map(|t| t.epoch).ok_or(ShardError::NotHeld { shard })
    }

    /// DROP: forget the shard; any later write under its epoch is fenced. Returns what was held.
    pub fn drop_shard(&self, shard: u32) -> Option<ShardStatus> {
        let (mut gone, actions) = {
            let mut slots = self.inner.slots.write();
            let slot = slots.get_mut(&shard)?;
            let gone = slot.status()?;
            // DROP is never refused.
            let Ok(actions) = slot.step(Event::Drop) else { return None };
            (gone, actions)
        };
        gone.seen_rv = self.inner.seen.of(gone.feeder);
        self.announce(shard, &actions);
        Some(gone)
    }
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;

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

    /// A reconcile's or a write's check and its hold are one step with REVOKE's seal: however
    /// they interleave with it, nothing holds the shard once REVOKE answered, and nothing is let
    /// out after.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nothing_is_in_flight_once_revoke_answered_however_they_interleave() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
        let t = table();
        let ns = "team-a";
        let shard = t.shard_of(ns);
        for epoch in 1..=10 {
            t.prepare(shard, epoch).unwrap();
            t.activate(shard, epoch).unwrap();
            let (answered, admitted) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
            let writers: Vec<_> = (0..2)
                .map(|_| {
                    let (t, answered, admitted) = (t.clone(), answered.clone(), admitted.clone());
                    std::thread::spawn(move || {
                        while !answered.load(SeqCst) {
                            let reconcile = t.begin(ns).map(|(_, held)| held);
                            let event = t.hold(ns, epoch, WriteKind::Event).ok();
                            // Let out while Revoking: what REVOKE's drain must wait for.
                            let write = t.hold(ns, epoch, WriteKind::Object).ok();
                            if reconcile.is_some() || event.is_some() || write.is_some() {
                                assert!(!answered.load(SeqCst), "a hold outlived REVOKE's answer");
                                admitted.fetch_add(1, SeqCst);
                            }
                        }
                        assert!(t.check_write(ns, epoch).is_err(), "a write let out after REVOKE answered");
                    })
                })
                .collect();
            tokio::time::timeout(std::time::Duration::from_secs(10), async {
                while admitted.load(SeqCst) < 1000 {
                    tokio::task::yield_now().await;
                }
            })
            .await
            .expect("the writers got going");
            t.revoke_and_drain(shard).await.unwrap();
            answered.store(true, SeqCst);
            for writer in writers {
                writer.join().expect("no write outside the tenure");
            }
            t.drop_shard(shard);
        }
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
