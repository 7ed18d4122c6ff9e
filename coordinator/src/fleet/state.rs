//! The leader's view of the fleet as a pure state machine: the shard map, the moves in flight,
//! drains and pins. Each step takes what happened (registrations, acknowledgements, liveness,
//! loads, operator requests) and returns whether the shard map must be stored and the commands
//! to send after it is. The controller (`controller.rs`) does the I/O.
//!
//! [`FleetState::step`] is the one entry point; the parts it drives each read alone:
//! - `shard_map`: the stored map (owners, epochs, the move each shard is recorded in, pins,
//!   drains) and the only code that changes it;
//! - `moves`: the moves in flight, each a [`crate::handover::Handover`], with resends, stalled
//!   PREPAREs, cancels and the waits before a cancelled shard moves again;
//! - `balancing`: what placement is asked, and which of its moves a step holds back;
//! - `liveness`: registrations, when placement may start, suspected-lost workers, and what
//!   follows from leases (moves off gone workers, standby moves);
//! - `registration`: what a worker reports holding, reconciled with the map; `stopping`: shards
//!   an owner reported Revoking to a new leader; `drains`: the end of a drain.
//!
//! This file carries out the hand-overs' actions (record in the map, send) and answers the admin
//! API. What goes in and out of a step is in `step_io`.
//!
//! Why invariant 1 holds across a coordinator fail-over: a new leader trusts only the stored map
//! and what workers report at registration. A shard whose owner reports it Revoking is unowned
//! (that owner stopped); a worker reporting a shard the map does not give it at that epoch is told
//! to drop it; and placement waits until every live worker registered, so a fail-over moves
//! nothing by itself.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::owner_gaps::{GapObservations, OwnerGaps};
use crate::handover::{Action, Event, Phase};
use crate::ids::{ShardId, WorkerId};
use crate::placement::Move;
use crate::store::ShardMapRecord;
use balancing::{Balancing, MoveCause};
use liveness::Liveness;
use moves::{Ended, MovesInFlight};
use shard_map::ShardMap;
use stopping::StoppingOwners;

mod balancing;
mod config;
mod drains;
mod liveness;
mod moves;
mod registration;
mod shard_map;
mod step_io;
mod stopping;

pub use config::FleetConfig;
pub use step_io::{Ack, Command, HeldPhase, HeldShard, Step, StepInput, StepOutput, WorkerHealth};

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

    /// One step: what the workers told (registrations, then acknowledgements) and what their
    /// leases say, then what is overdue (stalled PREPAREs, commands to send again), then, once
    /// placement may start, the moves to start; the map is to be stored before the sends.
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
            self.start_requested_moves(input, now, &mut out);
            self.start_placed_moves(input, now, &mut out);
            self.start_standbys(input, now, &mut out);
        }
        self.tell_drained(&mut out);
        out.store |= self.map.take_pins_or_drains_changed();
        out
    }

    /// Operators' moves whose target is live and whose shard does not wait to retry; the others
    /// wait for a later step.
    fn start_requested_moves(&mut self, input: &StepInput, now: Instant, out: &mut StepOutput) {
        let (ready, waiting): (Vec<Move>, Vec<Move>) =
            std::mem::take(&mut self.requested).into_iter().partition(|m| input.is_live(&m.to));
        self.requested = waiting;
        for m in ready {
            if self.moves.waits_to_retry(m.shard) {
                self.requested.push(m);
                continue;
            }
            self.start(m.shard, m.to, input, now, out);
            self.balancing.moved(m.shard, now, MoveCause::Operator);
        }
    }

    /// The moves placement plans that the balancing policy does not hold back.
    fn start_placed_moves(&mut self, input: &StepInput, now: Instant, out: &mut StepOutput) {
        let planned = self.plan(input, false);
        if planned.is_empty() {
            return;
        }
        let owning = self.shards_by_owner();
        let loads_measured = input.every_load_measured(self.map.shard_count());
        for m in planned {
            // Shards go only to workers with a session: a disconnected one keeps what it has.
            if !input.is_live(&m.to)
                || self.moves.waits_to_retry(m.shard)
                || self.balancing.holds_back(&m, &self.map, &self.moves, input, now, &owning)
            {
                continue;
            }
            self.start(m.shard, m.to.clone(), input, now, out);
            // Placing a shard nobody owned is not a move to hold back, nor one decided on
            // guessed loads (see `FleetConfig::min_move_interval`).
            if m.from.is_some() && loads_measured {
                self.balancing.moved(m.shard, now, MoveCause::Balance);
            }
        }
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

    /// The shard's owner stopped acting for it, with no move: the map gives it nobody until it is
    /// placed again.
    fn owner_stopped(&mut self, shard: ShardId, now: Instant, out: &mut StepOutput) {
        self.map.clear_owner(shard);
        out.store = true;
        self.gaps.stopped(shard, now);
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
