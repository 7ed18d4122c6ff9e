//! The leader's view of the fleet as a pure state machine: the shard map, the moves in flight,
//! drains and pins. Each step takes what happened (registrations, acknowledgements, liveness,
//! loads, operator requests) and returns whether the shard map must be stored and the commands
//! to send after it is. The controller (`controller.rs`) does the I/O.
//!
//! Why invariant 1 holds across a coordinator fail-over: a new leader trusts only the stored map
//! and what workers report at registration. A shard whose owner reports it Revoking is unowned
//! (that owner stopped); a worker reporting a shard the map does not give it at that epoch is told
//! to drop it; and placement waits until every live worker registered, so a fail-over moves
//! nothing by itself.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::owner_gaps::{GapObservations, OwnerGaps};
use crate::handover::{Action, Barrier, Event, Phase};
use crate::ids::{ShardId, WorkerId};
use crate::placement::{Move, PlacementConfig};
use crate::store::ShardMapRecord;
use balancing::{Balancing, MoveCause};
use liveness::Liveness;
use moves::{Ended, MovesInFlight};
use shard_map::ShardMap;
use stopping::StoppingOwners;

mod balancing;
mod liveness;
mod moves;
mod registration;
mod shard_map;
mod stopping;

/// What the leader knows of a worker this step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerHealth {
    /// Its lease is renewed and its session is connected.
    Live,
    /// Its lease is renewed but it has no session (it may still act for its shards).
    Disconnected,
    /// Its lease is close to expiring: it keeps its shards but gets no new ones.
    Expiring,
    /// Its lease expired plus the margin: it has stopped by its own clock.
    Gone,
}

/// A shard as a worker reports holding it at registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldShard {
    pub shard: ShardId,
    pub epoch: u64,
    pub phase: HeldPhase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldPhase {
    Preparing,
    Active,
    Revoking,
}

/// Which command an acknowledgement answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Prepared,
    Revoked,
    Activated,
    Dropped,
    /// PREPARE could not be carried out; `held_epoch` is the highest epoch the worker knew the
    /// shard at, when that is why.
    Refused {
        held_epoch: Option<u64>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub worker: WorkerId,
    pub shard: ShardId,
    pub epoch: u64,
    pub step: Step,
    pub last_write: Option<String>,
}

/// A command for one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Prepare { shard: ShardId, epoch: u64 },
    Revoke { shard: ShardId, epoch: u64 },
    Activate { shard: ShardId, epoch: u64, barrier: Barrier },
    Drop { shard: ShardId, epoch: u64 },
    DrainComplete,
}

/// What one step learnt.
#[derive(Debug, Default)]
pub struct StepInput {
    pub now: Option<Instant>,
    pub workers: BTreeMap<WorkerId, WorkerHealth>,
    pub loads: BTreeMap<ShardId, f64>,
    pub registrations: Vec<(WorkerId, Vec<HeldShard>)>,
    pub acks: Vec<Ack>,
}

impl StepInput {
    /// Its lease is renewed and its session is connected.
    fn is_live(&self, worker: &WorkerId) -> bool {
        self.workers.get(worker) == Some(&WorkerHealth::Live)
    }

    /// Whether `worker`'s shards stay its own in placement: its lease runs (with or without a
    /// session).
    fn may_keep_shards(&self, worker: &WorkerId) -> bool {
        matches!(self.workers.get(worker), Some(WorkerHealth::Live | WorkerHealth::Disconnected))
    }

    /// It stopped by its own clock, or is not known to run at all.
    fn is_gone(&self, worker: &WorkerId) -> bool {
        self.workers.get(worker).is_none_or(|h| *h == WorkerHealth::Gone)
    }

    /// Whether every shard's load has been reported (placement weighs a shard without one as an
    /// idle one).
    fn every_load_measured(&self, shard_count: u32) -> bool {
        (0..shard_count).all(|s| self.loads.contains_key(&ShardId(s)))
    }
}

/// What the controller must do: store the map (when `store`), and only then send.
#[derive(Debug, Default)]
pub struct StepOutput {
    pub store: bool,
    pub sends: Vec<(WorkerId, Command)>,
}

#[derive(Debug, Clone)]
pub struct FleetConfig {
    pub placement: PlacementConfig,
    /// Moves started at once; the rest wait for a later step.
    pub max_moves_in_flight: usize,
    /// A move's current command goes again when it has made no progress for this long (the
    /// worker may have missed it while reconnecting; every command is idempotent).
    pub resend_after: Duration,
    /// After becoming leader, how long placement waits for live workers to register.
    pub registration_grace: Duration,
    /// A shard that moved for balance, while every shard's load was known, is not moved again
    /// for balance within this long. Moves made before then (a new fleet filling its workers
    /// before their first reports) were decided on guessed loads, and are not held: the first
    /// placement on measured loads may correct them at once.
    pub min_move_interval: Duration,
    /// A move whose new owner has not warmed the shard within this long is cancelled (the old
    /// owner, if any, keeps acting) and placed again.
    pub prepare_timeout: Duration,
    /// A worker that registered with this leader and then lost its session for this long is
    /// suspected lost: its shards are warmed on the workers they would go to (standby moves),
    /// so that they act as soon as its lease runs out instead of only then starting to list.
    /// Well inside the shortest lease, so the warming still overlaps the wait; long enough that
    /// a broken connection or a process restarted at once moves nothing.
    pub standby_after: Duration,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            placement: PlacementConfig::default(),
            max_moves_in_flight: 64,
            resend_after: Duration::from_secs(3),
            registration_grace: Duration::from_secs(10),
            min_move_interval: Duration::from_secs(60),
            prepare_timeout: Duration::from_secs(120),
            standby_after: Duration::from_secs(1),
        }
    }
}

#[derive(Debug)]
pub struct FleetState {
    config: FleetConfig,
    /// The shard map as it is to be stored: owners, epochs, pins and drains.
    map: ShardMap,
    moves: MovesInFlight,
    /// Shards whose owner reported them Revoking to this leader.
    stopping: StoppingOwners,
    /// What placement is asked, and which of the moves it plans wait.
    balancing: Balancing,
    /// Who registered with this leader, and who is suspected lost.
    liveness: Liveness,
    /// Operators' moves that have not started yet.
    requested: Vec<Move>,
    /// Drained workers told DRAIN_COMPLETE. Who is draining is in the map.
    drain_told: BTreeSet<WorkerId>,
    /// Shards without an acting owner, for the hand-over gap and unowned-time metrics.
    gaps: OwnerGaps,
}

/// A shard's state as the admin API reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardState {
    Active,
    Preparing,
    Revoking,
    Unowned,
}

impl ShardState {
    pub fn as_str(self) -> &'static str {
        match self {
            ShardState::Active => "active",
            ShardState::Preparing => "preparing",
            ShardState::Revoking => "revoking",
            ShardState::Unowned => "unowned",
        }
    }
}

impl FleetState {
    /// The state a new leader starts from: the stored map. An interrupted move (`movingTo`) is
    /// forgotten here; registrations tell what the workers involved actually hold. Drains carry
    /// on; a drained worker that stopped meanwhile loses its drain at the first step.
    pub fn new(stored: ShardMapRecord, config: FleetConfig, now: Instant) -> Self {
        let map = ShardMap::from_stored(stored);
        let mut gaps = OwnerGaps::new(now);
        for shard in (0..map.shard_count()).map(ShardId) {
            if map.owner(shard).is_none() {
                gaps.unowned_before(shard, now);
            }
        }
        Self {
            moves: MovesInFlight::default(),
            stopping: StoppingOwners::default(),
            balancing: Balancing::new(&config, &map, now),
            liveness: Liveness::new(&config, now),
            requested: Vec::new(),
            drain_told: BTreeSet::new(),
            gaps,
            map,
            config,
        }
    }

    pub fn shard_count(&self) -> u32 {
        self.map.shard_count()
    }

    /// The shard map as it is to be stored.
    pub fn stored_map(&self) -> &ShardMapRecord {
        self.map.stored()
    }

    pub fn is_pinned(&self, shard: ShardId) -> bool {
        self.map.pinned_to(shard).is_some()
    }

    pub fn moves_in_flight(&self) -> usize {
        self.moves.len()
    }

    pub fn is_draining(&self, worker: &WorkerId) -> bool {
        self.map.is_draining(worker)
    }

    pub fn drained(&self, worker: &WorkerId) -> bool {
        self.drain_told.contains(worker)
    }

    pub fn owner(&self, shard: ShardId) -> Option<&str> {
        self.map.owner(shard)
    }

    pub fn epoch(&self, shard: ShardId) -> u64 {
        self.map.epoch(shard)
    }

    pub fn shard_state(&self, shard: ShardId) -> ShardState {
        match self.moves.phase(shard) {
            Some(Phase::Preparing | Phase::Standby) => ShardState::Preparing,
            Some(Phase::Revoking | Phase::Activating { .. }) => ShardState::Revoking,
            _ if self.stopping.contains(shard) => ShardState::Revoking,
            _ if self.owner(shard).is_some() => ShardState::Active,
            _ => ShardState::Unowned,
        }
    }

    /// Shards each worker owns in the map.
    pub fn shards_by_owner(&self) -> BTreeMap<WorkerId, u32> {
        self.map.shards_by_owner()
    }

    /// Drains are part of the stored map; the next step stores it.
    pub fn set_draining(&mut self, worker: &WorkerId, draining: bool) {
        if !draining {
            self.drain_told.remove(worker);
        }
        self.map.set_draining(worker, draining);
    }

    /// An operator's move; it starts at the next step if the shard is not moving already.
    pub fn request_move(&mut self, shard: ShardId, to: WorkerId) {
        let from = self.owner(shard).map(WorkerId::from);
        self.requested.retain(|m| m.shard != shard);
        self.requested.push(Move { shard, from, to });
    }

    /// Pins are part of the stored map; the next step stores it.
    pub fn pin(&mut self, shard: ShardId, worker: Option<&WorkerId>) {
        self.map.pin(shard, worker);
    }

    /// The moves placement would start now, without the hysteresis band when `rebalance`.
    pub fn plan(&self, input: &StepInput, rebalance: bool) -> Vec<Move> {
        self.balancing.plan(&self.map, &self.moves, input, rebalance)
    }

    pub fn step(&mut self, input: &StepInput) -> StepOutput {
        let now = input.now.unwrap_or_else(Instant::now);
        let mut out = StepOutput::default();
        self.gaps.count_to(now);
        for (worker, held) in &input.registrations {
            self.reconcile_registration(worker, held, now, &mut out);
        }
        for ack in &input.acks {
            self.on_ack(ack, now, &mut out);
        }
        self.on_liveness(input, now, &mut out);
        self.cancel_standbys_of_returned_workers(input, now, &mut out);
        self.end_drains_of_stopped_workers(input);
        self.cancel_stalled_prepares(now, &mut out);
        self.resend(now, &mut out);
        self.moves.end_retry_waits(now);
        self.balancing.end_returns(&self.map, now);
        if self.liveness.settled(input, now) {
            // An operator's move waits for its target to be live.
            let (ready, waiting): (Vec<Move>, Vec<Move>) =
                std::mem::take(&mut self.requested).into_iter().partition(|m| input.is_live(&m.to));
            self.requested = waiting;
            for m in ready {
                if self.moves.waits_to_retry(m.shard) {
                    self.requested.push(m);
                    continue;
                }
                self.start(m.shard, m.to, input, now, &mut out);
                self.balancing.moved(m.shard, now, MoveCause::Operator);
            }
            let owning = self.shards_by_owner();
            let loads_measured = input.every_load_measured(self.map.shard_count());
            for m in self.plan(input, false) {
                // Shards go only to workers with a session: a disconnected one keeps what it has.
                if !input.is_live(&m.to)
                    || self.moves.waits_to_retry(m.shard)
                    || self.balancing.holds_back(&m, &self.map, &self.moves, input, now, &owning)
                {
                    continue;
                }
                self.start(m.shard, m.to.clone(), input, now, &mut out);
                // Placing a shard nobody owned is not a move to hold back, nor one decided on
                // guessed loads (see `FleetConfig::min_move_interval`).
                if m.from.is_some() && loads_measured {
                    self.balancing.moved(m.shard, now, MoveCause::Balance);
                }
            }
            self.start_standbys(input, now, &mut out);
        }
        self.tell_drained(&mut out);
        out.store |= self.map.take_pins_or_drains_changed();
        out
    }

    fn start(&mut self, shard: ShardId, to: WorkerId, input: &StepInput, now: Instant, out: &mut StepOutput) {
        if self.moves.contains(shard) || self.stopping.contains(shard) || shard.0 >= self.map.shard_count() {
            return;
        }
        let from = self.map.owner(shard).map(WorkerId::from).filter(|o| !input.is_gone(o));
        if from.as_ref() == Some(&to) {
            return;
        }
        // Epochs only grow, one per move; the last one exists only in a store edited by hand,
        // and a shard at it cannot be given a larger one.
        let current_epoch = self.map.epoch(shard);
        let Some(epoch) = current_epoch.checked_add(1) else {
            tracing::error!(
                shard = shard.0,
                epoch = current_epoch,
                "the shard's stored epoch cannot grow; it is not moved"
            );
            return;
        };
        self.balancing.no_longer_inherited(shard);
        let urgent = from.as_ref().is_none_or(|f| !input.may_keep_shards(f));
        let actions = self.moves.start(shard, from, to, epoch, urgent, now);
        self.apply(actions, now, out);
    }

    fn apply(&mut self, actions: Vec<Action>, now: Instant, out: &mut StepOutput) {
        for action in actions {
            match action {
                Action::RecordMove { shard, to, epoch } => {
                    self.map.record_move(shard, to, epoch);
                    out.store = true;
                }
                Action::RecordOwner { shard, owner, epoch } => {
                    // Emitted once the old owner stopped (or there was none): the new one does
                    // not act before its ACTIVATED.
                    self.gaps.stopped(shard, now);
                    self.map.record_owner(shard, owner, epoch);
                    out.store = true;
                }
                Action::RecordUnowned { shard, epoch, .. } => {
                    self.gaps.stopped(shard, now);
                    self.map.record_unowned(shard, epoch);
                    out.store = true;
                }
                Action::SendPrepare { to, shard, epoch } => {
                    out.sends.push((to, Command::Prepare { shard, epoch }))
                }
                Action::SendRevoke { to, shard, epoch } => {
                    out.sends.push((to, Command::Revoke { shard, epoch }))
                }
                Action::SendActivate { to, shard, epoch, barrier } => {
                    out.sends.push((to, Command::Activate { shard, epoch, barrier }))
                }
                Action::SendDrop { to, shard, epoch } => out.sends.push((to, Command::Drop { shard, epoch })),
            }
        }
    }

    fn on_ack(&mut self, ack: &Ack, now: Instant, out: &mut StepOutput) {
        if let Step::Refused { held_epoch } = ack.step {
            self.on_refused(ack, held_epoch, now, out);
            return;
        }
        if ack.step == Step::Revoked && self.stopping.stopped(ack.shard, &ack.worker, ack.epoch) {
            // Its in-flight work has finished: nobody acts, and placement may place it again.
            if self.map.clear_owner(ack.shard) {
                out.store = true;
            }
            return;
        }
        let Some(_move) = self.moves.span(ack.shard).map(tracing::Span::entered) else {
            // The ACTIVATE a registration sent outside a move (the previous leader's move, cut
            // short between RecordOwner and ACTIVATED) is answered.
            if ack.step == Step::Activated
                && self.map.is_owner(ack.shard, &ack.worker)
                && ack.epoch <= self.map.epoch(ack.shard)
            {
                self.gaps.acting(ack.shard, now);
            }
            return;
        };
        let Some(actions) = self.moves.answer(ack, now) else { return };
        self.apply(actions, now, out);
        self.finish(ack.shard, now);
    }

    /// The new owner refused this move's PREPARE: the move is cancelled, and the shard's next
    /// epoch is above any the worker knew it at (a map restored from an older backup is behind
    /// the workers).
    fn on_refused(&mut self, ack: &Ack, held_epoch: Option<u64>, now: Instant, out: &mut StepOutput) {
        if !self.moves.is_refusal_of_prepare(ack) {
            return;
        }
        let _move = self.moves.span(ack.shard).map(tracing::Span::entered);
        tracing::warn!(shard = ack.shard.0, worker = %ack.worker, epoch = ack.epoch, ?held_epoch, "PREPARE refused; the move is cancelled");
        self.cancel(ack.shard, now, out);
        if let Some(held) = held_epoch
            && self.map.raise_epoch(ack.shard, held)
        {
            out.store = true;
        }
    }

    /// A drain lasts as long as the drained process: once its lease stops being renewed (it
    /// exited, removing its record, or died), a worker started again under the same id — the
    /// next pod of a StatefulSet's rolling restart — takes shards again. A drained worker that
    /// keeps running keeps its drain, whatever its session does.
    fn end_drains_of_stopped_workers(&mut self, input: &StepInput) {
        let stopped = |w: &WorkerId| {
            matches!(input.workers.get(w), None | Some(WorkerHealth::Expiring | WorkerHealth::Gone))
        };
        let ended: Vec<WorkerId> = self.map.draining().into_iter().filter(|w| stopped(w)).collect();
        for worker in ended {
            tracing::info!(%worker, "the drained worker stopped; its drain ends");
            self.set_draining(&worker, false);
        }
    }

    /// Moves still preparing after `prepare_timeout`: the new owner cannot warm the shard.
    fn cancel_stalled_prepares(&mut self, now: Instant, out: &mut StepOutput) {
        for shard in self.moves.stalled_prepares(now, self.config.prepare_timeout) {
            let _move = self.moves.span(shard).map(tracing::Span::entered);
            tracing::warn!(shard = shard.0, timeout = ?self.config.prepare_timeout, "PREPARE not answered in time; the move is cancelled");
            self.cancel(shard, now, out);
        }
    }

    fn cancel(&mut self, shard: ShardId, now: Instant, out: &mut StepOutput) {
        if !self.moves.contains(shard) {
            return;
        }
        let actions = self.moves.advance(shard, [Event::Cancel], now);
        self.apply(actions, now, out);
        self.finish(shard, now);
        self.moves.retry_after(shard, now + self.config.resend_after);
        // The cancelled epoch was recorded with the move; the map says nobody moves it now.
        out.store = true;
    }

    /// Drops a finished move; a cancelled one leaves the map's owner as it was.
    fn finish(&mut self, shard: ShardId, now: Instant) {
        match self.moves.finish(shard, now) {
            Some(Ended::Cancelled) => self.map.forget_move(shard),
            Some(Ended::Done) => self.gaps.acting(shard, now),
            Some(Ended::Unowned) | None => {}
        }
    }

    /// Moves that ended since the last call: how (done, cancelled, unowned) and how long they took.
    pub fn take_finished(&mut self) -> Vec<(&'static str, Duration)> {
        self.moves.take_finished()
    }

    /// The hand-over gaps and unowned time since the last call (`owner_gaps.rs`).
    pub fn take_gap_observations(&mut self) -> GapObservations {
        self.gaps.take()
    }

    /// Shards nobody acts for now: their owner stopped, or they never had one, and no new owner
    /// has answered ACTIVATE yet.
    pub fn shards_without_acting_owner(&self) -> usize {
        self.gaps.count()
    }

    fn resend(&mut self, now: Instant, out: &mut StepOutput) {
        out.sends.extend(self.stopping.resend(now, self.config.resend_after));
        out.sends.extend(self.moves.resend(now, self.config.resend_after));
    }

    fn tell_drained(&mut self, out: &mut StepOutput) {
        let owners = self.shards_by_owner();
        for worker in self.map.draining() {
            let busy = owners.contains_key(&worker)
                || self.stopping.any_of(&worker)
                || self.moves.any_involves(&worker);
            if !busy && self.drain_told.insert(worker.clone()) {
                out.sends.push((worker, Command::DrainComplete));
            }
        }
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "state_gap_tests.rs"]
mod gap_tests;

#[cfg(test)]
#[path = "state_standby_tests.rs"]
mod standby_tests;

#[cfg(test)]
#[path = "state_balance_tests.rs"]
mod balance_tests;
