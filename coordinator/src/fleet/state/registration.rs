//! A worker's registration with this leader: what it reports holding, reconciled with the map.
//! A shard it holds as the map's owner (or as part of a move in flight) stays its own; one it
//! holds at an epoch the map did not give it is dropped; one it was stopping for a move the
//! previous leader did not finish is revoked again; and a shard the map gives it that it no
//! longer holds (it restarted) has nobody acting for it until it is placed again — back on that
//! worker, preferably.

use std::collections::BTreeSet;
use std::time::Instant;

use super::{Command, FleetState, HeldPhase, HeldShard, StepOutput};
use crate::handover::{Barrier, Event};
use crate::ids::{ShardId, WorkerId};

impl FleetState {
    /// Reconciles what `worker` reports holding at registration with the map.
    pub(super) fn reconcile_registration(
        &mut self,
        worker: &WorkerId,
        held: &[HeldShard],
        now: Instant,
        out: &mut StepOutput,
    ) {
        self.liveness.registered(worker);
        // What it reports now replaces what it reported before (it may have restarted).
        self.stopping.forget_worker(worker);
        // Shards it goes on holding as this map's owner (or as part of a move in flight).
        let mut kept: BTreeSet<ShardId> = BTreeSet::new();
        for h in held {
            if self.moves.is_involved(h.shard, worker) {
                kept.insert(h.shard);
                continue;
            }
            let recorded_epoch = self.map.epoch(h.shard);
            // The map's owner may hold an older epoch than the record's: a move away from it was
            // recorded (its epoch persisted first) but cancelled or cut short by a fail-over.
            let owns = self.map.is_owner(h.shard, worker) && h.epoch <= recorded_epoch;
            match (owns, h.phase) {
                (true, HeldPhase::Active) => {
                    kept.insert(h.shard);
                }
                // The previous leader recorded it as owner and told it to act; it had not yet.
                (true, HeldPhase::Preparing) => {
                    kept.insert(h.shard);
                    self.gaps.unowned_before(h.shard, now);
                    out.sends.push((
                        worker.clone(),
                        Command::Activate {
                            shard: h.shard,
                            epoch: h.epoch,
                            barrier: Barrier::ConsistentList,
                        },
                    ));
                }
                // It stopped taking work for a move the previous leader did not finish, but its
                // in-flight reconciles may still be writing: REVOKE again, and wait for its answer.
                // The REVOKE's epoch must pass the held one, and is stored before it is sent.
                (true, HeldPhase::Revoking) => {
                    kept.insert(h.shard);
                    self.gaps.stopped(h.shard, now);
                    let epoch = recorded_epoch.max(h.epoch.saturating_add(1));
                    if epoch != recorded_epoch {
                        self.map.record_stop(h.shard, epoch);
                        out.store = true;
                    }
                    self.stopping.insert(h.shard, worker.clone(), epoch, now);
                    out.sends.push((worker.clone(), Command::Revoke { shard: h.shard, epoch }));
                }
                (false, _) => {
                    out.sends.push((worker.clone(), Command::Drop { shard: h.shard, epoch: h.epoch }))
                }
            }
        }
        // Standby moves off it for shards it no longer holds (it restarted, or its lease lapsed
        // and it dropped them): it has stopped acting for them, so they activate now.
        let released: Vec<ShardId> = self
            .moves
            .standbys()
            .filter(|(shard, from)| *from == worker && !kept.contains(shard))
            .map(|(shard, _)| shard)
            .collect();
        for shard in released {
            self.gaps.stopped(shard, now);
            let _move = self.moves.span(shard).map(tracing::Span::entered);
            let actions = self.moves.advance(shard, [Event::OldOwnerExpired], now);
            self.moves.restart_resend_timer(shard, now);
            self.apply(actions, now, out);
            self.finish(shard, now);
        }
        // Shards the map gives it that it no longer holds (it restarted) or was just told to
        // drop: nobody acts for them.
        let lost: Vec<ShardId> = self
            .map
            .owned()
            .filter(|(shard, owner)| owner == worker && !kept.contains(shard) && !self.moves.contains(*shard))
            .map(|(shard, _)| shard)
            .collect();
        for shard in lost {
            self.owner_stopped(shard, now, out);
            self.balancing.returning(shard, worker.clone(), now);
        }
    }
}
