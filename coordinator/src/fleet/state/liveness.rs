//! Liveness: which workers registered with this leader, whether every live one had its chance
//! to (until then placement moves nothing), and which have been without a session long enough
//! to be suspected lost; and what the fleet state does about it — moves off workers whose lease
//! ran out, and standby moves that warm a suspected-lost worker's shards elsewhere while its
//! lease runs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::{FleetConfig, FleetState, StepInput, StepOutput, WorkerHealth};
use crate::handover::Event;
use crate::ids::{ShardId, WorkerId};

#[derive(Debug)]
pub(super) struct Liveness {
    leading_since: Instant,
    registration_grace: Duration,
    standby_after: Duration,
    registered: BTreeSet<WorkerId>,
    /// Since when each worker registered with this leader has had no session.
    disconnected_since: BTreeMap<WorkerId, Instant>,
}

impl Liveness {
    pub(super) fn new(config: &FleetConfig, now: Instant) -> Self {
        Self {
            leading_since: now,
            registration_grace: config.registration_grace,
            standby_after: config.standby_after,
            registered: BTreeSet::new(),
            disconnected_since: BTreeMap::new(),
        }
    }

    pub(super) fn registered(&mut self, worker: &WorkerId) {
        self.registered.insert(worker.clone());
    }

    /// A fail-over must move nothing: placement waits until every worker whose lease runs had
    /// its chance to register with this leader (a dead one's lease runs out within the grace).
    pub(super) fn settled(&self, input: &StepInput, now: Instant) -> bool {
        input.workers.iter().all(|(w, h)| *h == WorkerHealth::Gone || self.registered.contains(w))
            || now.saturating_duration_since(self.leading_since) >= self.registration_grace
    }

    /// Workers that registered with this leader and have had no session for `standby_after`:
    /// most likely dead (a SIGKILL, a lost node), though only their lease can tell.
    pub(super) fn suspected_lost(&mut self, input: &StepInput, now: Instant) -> BTreeSet<WorkerId> {
        let disconnected: BTreeSet<&WorkerId> = input
            .workers
            .iter()
            .filter(|(w, h)| **h == WorkerHealth::Disconnected && self.registered.contains(*w))
            .map(|(w, _)| w)
            .collect();
        self.disconnected_since.retain(|w, _| disconnected.contains(w));
        let mut suspects = BTreeSet::new();
        for worker in disconnected {
            let since = *self.disconnected_since.entry(worker.clone()).or_insert(now);
            if now.saturating_duration_since(since) >= self.standby_after {
                suspects.insert(worker.clone());
            }
        }
        suspects
    }
}

impl FleetState {
    /// Moves whose old or new owner is gone, and shards whose owner is gone with no move.
    pub(super) fn on_liveness(&mut self, input: &StepInput, now: Instant, out: &mut StepOutput) {
        for (shard, from, to) in self.moves.parties() {
            let _move = self.moves.span(shard).map(tracing::Span::entered);
            let mut events = Vec::new();
            if from.as_ref().is_some_and(|f| input.is_gone(f)) {
                // It stopped by its own clock at the latest now: nobody acts until ACTIVATED.
                self.gaps.stopped(shard, now);
                events.push(Event::OldOwnerExpired);
            }
            if input.is_gone(&to) {
                events.push(Event::NewOwnerExpired);
            }
            let actions = self.moves.advance(shard, events, now);
            self.apply(actions, now, out);
            self.finish(shard, now);
        }
        // Owners that are gone, with no move: nobody acts for their shards until placed again.
        let orphaned: Vec<ShardId> = self
            .map
            .owned()
            .filter(|(shard, owner)| !self.moves.contains(*shard) && input.is_gone(owner))
            .map(|(shard, _)| shard)
            .collect();
        for shard in orphaned {
            self.owner_stopped(shard, now, out);
            self.stopping.remove(shard);
        }
    }

    /// Warms the shards of workers suspected lost where placement would put them without those
    /// workers, by standby moves ([`crate::handover::Handover::start_standby`]): they act once
    /// the lease runs out.
    pub(super) fn start_standbys(&mut self, input: &StepInput, now: Instant, out: &mut StepOutput) {
        let suspects = self.liveness.suspected_lost(input, now);
        if suspects.is_empty() {
            return;
        }
        let mut without = StepInput { now: input.now, loads: input.loads.clone(), ..StepInput::default() };
        without.workers = input
            .workers
            .iter()
            .map(|(w, h)| (w.clone(), if suspects.contains(w) { WorkerHealth::Expiring } else { *h }))
            .collect();
        for m in self.plan(&without, false) {
            let Some(from) = m.from.filter(|f| suspects.contains(f)) else { continue };
            if !input.is_live(&m.to) || self.moves.waits_to_retry(m.shard) {
                continue;
            }
            self.start_standby(m.shard, from, m.to, now, out);
        }
    }

    fn start_standby(
        &mut self,
        shard: ShardId,
        from: WorkerId,
        to: WorkerId,
        now: Instant,
        out: &mut StepOutput,
    ) {
        if self.moves.contains(shard) || self.stopping.contains(shard) {
            return;
        }
        if !self.map.is_owner(shard, &from) {
            return;
        }
        let Some(epoch) = self.map.epoch(shard).checked_add(1) else { return };
        let actions = self.moves.start_standby(shard, from, to, epoch, now);
        self.apply(actions, now, out);
    }

    /// A worker suspected lost is back (it registered again, its lease never lapsed): its
    /// standby moves are cancelled, and it goes on acting for its shards.
    pub(super) fn cancel_standbys_of_returned_workers(
        &mut self,
        input: &StepInput,
        now: Instant,
        out: &mut StepOutput,
    ) {
        let returned: Vec<ShardId> =
            self.moves.standbys().filter(|(_, from)| input.is_live(from)).map(|(shard, _)| shard).collect();
        for shard in returned {
            let _move = self.moves.span(shard).map(tracing::Span::entered);
            tracing::info!(shard = shard.0, "the owner is back; the standby move is cancelled");
            self.cancel(shard, now, out);
            self.moves.retry_now(shard);
        }
    }
}
