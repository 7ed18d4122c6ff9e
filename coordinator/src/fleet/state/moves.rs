//! The moves in flight: one [`Handover`] per moving shard, with when its current command went
//! (to send it again) and when it started (to give up on a PREPARE nobody answers, and to report
//! how long it took), and the shards whose last move was cancelled, which wait before the next.
//! It drives each hand-over with what happened and returns the hand-over's actions; the fleet
//! state carries them out.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{Ack, Command, Step};
use crate::handover::{Action, Event, Handover, Phase};
use crate::ids::{ShardId, WorkerId};

#[derive(Debug)]
struct InFlight {
    handover: Handover,
    sent_at: Instant,
    started_at: Instant,
    /// Off a worker that is lost or suspected lost, or of a shard nobody acts for: not held
    /// back by `max_moves_in_flight`, which paces moves between live workers.
    urgent: bool,
}

/// How a move ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    /// The new owner acts.
    Done,
    /// The old owner, if any, still acts.
    Cancelled,
    /// Nobody acts; the shard is placed again.
    Unowned,
}

impl Ended {
    fn as_str(self) -> &'static str {
        match self {
            Ended::Done => "done",
            Ended::Cancelled => "cancelled",
            Ended::Unowned => "unowned",
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct MovesInFlight {
    moves: BTreeMap<ShardId, InFlight>,
    /// Moves that ended since the controller last asked: how, and how long they took.
    finished: Vec<(&'static str, Duration)>,
    /// Shards whose last move was refused or timed out: not started again before then, so that a
    /// worker that keeps refusing is not sent a new epoch every step.
    retry_at: BTreeMap<ShardId, Instant>,
}

impl MovesInFlight {
    pub(super) fn len(&self) -> usize {
        self.moves.len()
    }

    pub(super) fn contains(&self, shard: ShardId) -> bool {
        self.moves.contains_key(&shard)
    }

    pub(super) fn phase(&self, shard: ShardId) -> Option<&Phase> {
        self.moves.get(&shard).map(|m| m.handover.phase())
    }

    /// The worker the shard is moving to.
    pub(super) fn target(&self, shard: ShardId) -> Option<&WorkerId> {
        self.moves.get(&shard).map(|m| &m.handover.to)
    }

    /// Whether `worker` is the old or the new owner of the shard's move.
    pub(super) fn is_involved(&self, shard: ShardId, worker: &WorkerId) -> bool {
        self.moves.get(&shard).is_some_and(|m| involves(&m.handover, worker))
    }

    /// Whether `worker` is the old or the new owner of any move.
    pub(super) fn any_involves(&self, worker: &WorkerId) -> bool {
        self.moves.values().any(|m| involves(&m.handover, worker))
    }

    /// Moves between workers that may keep their shards, which `max_moves_in_flight` paces.
    pub(super) fn paced(&self) -> usize {
        self.moves.values().filter(|m| !m.urgent).count()
    }

    /// Standby moves and the worker each waits for.
    pub(super) fn standbys(&self) -> impl Iterator<Item = (ShardId, &WorkerId)> {
        self.moves
            .iter()
            .filter(|(_, m)| m.handover.is_standby())
            .filter_map(|(shard, m)| m.handover.from.as_ref().map(|from| (*shard, from)))
    }

    /// Every move: its shard, its old owner while that one may still act, and its new owner.
    pub(super) fn parties(&self) -> Vec<(ShardId, Option<WorkerId>, WorkerId)> {
        self.moves.iter().map(|(shard, m)| (*shard, m.handover.from.clone(), m.handover.to.clone())).collect()
    }

    /// The span of the shard's move, for its callers to enter around each step of it.
    pub(super) fn span(&self, shard: ShardId) -> Option<tracing::Span> {
        self.moves.get(&shard).map(|m| move_span(&m.handover))
    }

    pub(super) fn start(
        &mut self,
        shard: ShardId,
        from: Option<WorkerId>,
        to: WorkerId,
        epoch: u64,
        urgent: bool,
        now: Instant,
    ) -> Vec<Action> {
        let (handover, actions) = Handover::start(shard, from, to, epoch);
        self.track(handover, urgent, now, "move started");
        actions
    }

    /// A standby move ([`Handover::start_standby`]), off a worker suspected lost: urgent.
    pub(super) fn start_standby(
        &mut self,
        shard: ShardId,
        from: WorkerId,
        to: WorkerId,
        epoch: u64,
        now: Instant,
    ) -> Vec<Action> {
        let (handover, actions) = Handover::start_standby(shard, from, to, epoch);
        self.track(handover, true, now, "standby move started: the owner lost its session");
        actions
    }

    fn track(&mut self, handover: Handover, urgent: bool, now: Instant, started: &str) {
        let _move = move_span(&handover).entered();
        tracing::debug!("{started}");
        self.moves.insert(handover.shard, InFlight { handover, sent_at: now, started_at: now, urgent });
    }

    /// Feeds the shard's move what happened; returns what to do. A move that sent something
    /// waits `resend_after` from now before sending it again.
    pub(super) fn advance(
        &mut self,
        shard: ShardId,
        events: impl IntoIterator<Item = Event>,
        now: Instant,
    ) -> Vec<Action> {
        let Some(m) = self.moves.get_mut(&shard) else { return Vec::new() };
        let actions: Vec<Action> = events.into_iter().flat_map(|e| m.handover.on(e)).collect();
        if !actions.is_empty() {
            m.sent_at = now;
        }
        actions
    }

    /// The shard's move waits `resend_after` from now before sending its command again.
    pub(super) fn restart_resend_timer(&mut self, shard: ShardId, now: Instant) {
        if let Some(m) = self.moves.get_mut(&shard) {
            m.sent_at = now;
        }
    }

    /// An acknowledgement of the shard's move, from the worker the command went to; `None` if it
    /// answers no command of this move (an earlier move's, or another worker's).
    pub(super) fn answer(&mut self, ack: &Ack, now: Instant) -> Option<Vec<Action>> {
        let h = &self.moves.get(&ack.shard)?.handover;
        let event = match ack.step {
            Step::Prepared if h.to == ack.worker => Event::Prepared { epoch: ack.epoch },
            Step::Revoked if h.from.as_ref() == Some(&ack.worker) => {
                Event::Revoked { epoch: ack.epoch, last_write: ack.last_write.clone() }
            }
            Step::Activated if h.to == ack.worker => Event::Activated { epoch: ack.epoch },
            _ => return None,
        };
        let actions = self.advance(ack.shard, [event], now);
        if let Some(phase) = self.phase(ack.shard) {
            tracing::debug!(step = ?ack.step, ?phase, "hand-over step answered");
        }
        Some(actions)
    }

    /// Whether `ack` is the new owner refusing this move's PREPARE.
    pub(super) fn is_refusal_of_prepare(&self, ack: &Ack) -> bool {
        self.moves.get(&ack.shard).is_some_and(|m| {
            m.handover.to == ack.worker
                && m.handover.epoch == ack.epoch
                && *m.handover.phase() == Phase::Preparing
        })
    }

    /// Moves still preparing `timeout` after they started: the new owner cannot warm the shard.
    pub(super) fn stalled_prepares(&self, now: Instant, timeout: Duration) -> Vec<ShardId> {
        self.moves
            .iter()
            .filter(|(_, m)| {
                *m.handover.phase() == Phase::Preparing
                    && now.saturating_duration_since(m.started_at) >= timeout
            })
            .map(|(shard, _)| *shard)
            .collect()
    }

    /// Drops the shard's move if it ended, and says how; it is reported by
    /// [`MovesInFlight::take_finished`].
    pub(super) fn finish(&mut self, shard: ShardId, now: Instant) -> Option<Ended> {
        if !self.moves.get(&shard).is_some_and(|m| m.handover.is_finished()) {
            return None;
        }
        let m = self.moves.remove(&shard)?;
        let ended = match m.handover.phase() {
            Phase::Cancelled => Ended::Cancelled,
            Phase::Unowned { .. } => Ended::Unowned,
            _ => Ended::Done,
        };
        let took = now.saturating_duration_since(m.started_at);
        tracing::info!(result = ended.as_str(), ?took, "move finished");
        self.finished.push((ended.as_str(), took));
        Some(ended)
    }

    /// Moves that ended since the last call: how (done, cancelled, unowned) and how long they took.
    pub(super) fn take_finished(&mut self) -> Vec<(&'static str, Duration)> {
        std::mem::take(&mut self.finished)
    }

    /// The current command of every move that made no progress for `resend_after`.
    pub(super) fn resend(&mut self, now: Instant, resend_after: Duration) -> Vec<(WorkerId, Command)> {
        let mut sends = Vec::new();
        for (&shard, m) in self.moves.iter_mut() {
            if now.saturating_duration_since(m.sent_at) < resend_after {
                continue;
            }
            m.sent_at = now;
            let h = &m.handover;
            let epoch = h.epoch;
            match h.phase() {
                Phase::Preparing => sends.push((h.to.clone(), Command::Prepare { shard, epoch })),
                Phase::Revoking => {
                    if let Some(from) = &h.from {
                        sends.push((from.clone(), Command::Revoke { shard, epoch }));
                    }
                }
                Phase::Activating { barrier } => {
                    sends.push((h.to.clone(), Command::Activate { shard, epoch, barrier: barrier.clone() }))
                }
                _ => {}
            }
        }
        sends
    }

    /// The shard waits until `at` before it may move again.
    pub(super) fn retry_after(&mut self, shard: ShardId, at: Instant) {
        self.retry_at.insert(shard, at);
    }

    /// The shard may move again at once.
    pub(super) fn retry_now(&mut self, shard: ShardId) {
        self.retry_at.remove(&shard);
    }

    /// Whether the shard waits before it may move again.
    pub(super) fn waits_to_retry(&self, shard: ShardId) -> bool {
        self.retry_at.contains_key(&shard)
    }

    /// Forgets the waits that are over at `now`.
    pub(super) fn end_retry_waits(&mut self, now: Instant) {
        self.retry_at.retain(|_, at| *at > now);
    }
}

fn involves(h: &Handover, worker: &WorkerId) -> bool {
    h.to == *worker || h.from.as_ref() == Some(worker)
}

/// The span of a move's steps, so that each log line says which move of which shard it is about.
/// Its callers enter it around each step (start, answer, expiry, cancel), which ends in
/// [`MovesInFlight::finish`]'s line when the move ends.
fn move_span(h: &Handover) -> tracing::Span {
    let span = tracing::info_span!(
        "handover",
        shard = h.shard.0,
        epoch = h.epoch,
        from = tracing::field::Empty,
        to = %h.to
    );
    if let Some(from) = &h.from {
        span.record("from", tracing::field::display(from));
    }
    span
}
