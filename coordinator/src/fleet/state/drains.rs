//! Drains: a drained worker gets no shards, its shards move off, and once it holds none and takes
//! part in no move it is told DRAIN_COMPLETE. Who is draining is part of the stored map, so that
//! a new leader carries a drain on.

use super::{Command, FleetState, StepInput, StepOutput, WorkerHealth};
use crate::ids::WorkerId;

impl FleetState {
    /// A drain lasts as long as the drained process: once its lease stops being renewed (it
    /// exited, removing its record, or died), a worker started again under the same id — the
    /// next pod of a StatefulSet's rolling restart — takes shards again. A drained worker that
    /// keeps running keeps its drain, whatever its session does.
    pub(super) fn end_drains_of_stopped_workers(&mut self, input: &StepInput) {
        let stopped = |w: &WorkerId| {
            matches!(input.workers.get(w), None | Some(WorkerHealth::Expiring | WorkerHealth::Gone))
        };
        let ended: Vec<WorkerId> = self.map.draining().into_iter().filter(|w| stopped(w)).collect();
        for worker in ended {
            tracing::info!(%worker, "the drained worker stopped; its drain ends");
            self.set_draining(&worker, false);
        }
    }

    /// Tells each draining worker that holds nothing and takes part in no move that its drain is
    /// complete, once.
    pub(super) fn tell_drained(&mut self, out: &mut StepOutput) {
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
