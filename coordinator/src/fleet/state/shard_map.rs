//! The shard map as the leader holds it between stores: each shard's owner and epoch, the move
//! it is recorded in, the operator's pins and the drains. Only this module changes it; the fleet
//! state decides when, and stores it (`StepOutput::store`) before sending what follows from it.

use std::collections::BTreeMap;

use crate::ids::{ShardId, WorkerId};
use crate::store::{ShardMapRecord, ShardRecord};

#[derive(Debug)]
pub(super) struct ShardMap {
    stored: ShardMapRecord,
    /// Pins or drains changed, outside a step or within one: the step stores the map.
    pins_or_drains_changed: bool,
}

impl ShardMap {
    /// The map a new leader read from the store. An interrupted move (`movingTo`) is forgotten:
    /// registrations tell what the workers involved actually hold.
    pub(super) fn from_stored(mut stored: ShardMapRecord) -> Self {
        for record in stored.shards.values_mut() {
            record.moving_to = None;
        }
        // The map is read from the store, where anyone with access may have edited it: a shard
        // the fleet does not have would be counted unowned forever (and could be pinned).
        let shard_count = stored.shard_count;
        let before = (stored.shards.len(), stored.pins.len());
        stored.shards.retain(|&shard, _| shard < shard_count);
        stored.pins.retain(|&shard, _| shard < shard_count);
        if before != (stored.shards.len(), stored.pins.len()) {
            tracing::warn!(
                shard_count,
                dropped_records = before.0 - stored.shards.len(),
                dropped_pins = before.1 - stored.pins.len(),
                "the stored shard map names shards beyond its shard count; they are ignored"
            );
        }
        Self { stored, pins_or_drains_changed: false }
    }

    /// The map as it is to be stored.
    pub(super) fn stored(&self) -> &ShardMapRecord {
        &self.stored
    }

    pub(super) fn shard_count(&self) -> u32 {
        self.stored.shard_count
    }

    pub(super) fn record(&self, shard: ShardId) -> Option<&ShardRecord> {
        self.stored.shards.get(&shard.0)
    }

    /// Every shard the map has a record of (a shard nobody ever owned may have none).
    pub(super) fn records(&self) -> impl Iterator<Item = (ShardId, &ShardRecord)> {
        self.stored.shards.iter().map(|(shard, record)| (ShardId(*shard), record))
    }

    /// Shards with an owner, and who.
    pub(super) fn owned(&self) -> impl Iterator<Item = (ShardId, WorkerId)> + '_ {
        self.records().filter_map(|(shard, r)| r.owner.as_ref().map(|o| (shard, WorkerId(o.clone()))))
    }

    pub(super) fn owner(&self, shard: ShardId) -> Option<&str> {
        self.record(shard).and_then(|r| r.owner.as_deref())
    }

    pub(super) fn is_owner(&self, shard: ShardId, worker: &WorkerId) -> bool {
        self.owner(shard) == Some(worker.0.as_str())
    }

    pub(super) fn epoch(&self, shard: ShardId) -> u64 {
        self.record(shard).map_or(0, |r| r.epoch)
    }

    /// Shards each worker owns.
    pub(super) fn shards_by_owner(&self) -> BTreeMap<WorkerId, u32> {
        let mut out = BTreeMap::new();
        for (_, owner) in self.owned() {
            *out.entry(owner).or_insert(0) += 1;
        }
        out
    }

    pub(super) fn pins(&self) -> BTreeMap<ShardId, WorkerId> {
        self.stored.pins.iter().map(|(s, w)| (ShardId(*s), WorkerId(w.clone()))).collect()
    }

    pub(super) fn pinned_to(&self, shard: ShardId) -> Option<&str> {
        self.stored.pins.get(&shard.0).map(String::as_str)
    }

    /// Pins are part of the stored map; the next step stores it.
    pub(super) fn pin(&mut self, shard: ShardId, worker: Option<&WorkerId>) {
        match worker {
            Some(w) => self.stored.pins.insert(shard.0, w.0.clone()),
            None => self.stored.pins.remove(&shard.0),
        };
        self.pins_or_drains_changed = true;
    }

    pub(super) fn is_draining(&self, worker: &WorkerId) -> bool {
        self.stored.draining.contains(&worker.0)
    }

    pub(super) fn draining(&self) -> Vec<WorkerId> {
        self.stored.draining.iter().map(|w| WorkerId(w.clone())).collect()
    }

    /// Drains are part of the stored map; the next step stores it. Returns whether it changed.
    pub(super) fn set_draining(&mut self, worker: &WorkerId, draining: bool) -> bool {
        let changed = if draining {
            self.stored.draining.insert(worker.0.clone())
        } else {
            self.stored.draining.remove(&worker.0)
        };
        self.pins_or_drains_changed |= changed;
        changed
    }

    /// Whether pins or drains changed since the last call.
    pub(super) fn take_pins_or_drains_changed(&mut self) -> bool {
        std::mem::take(&mut self.pins_or_drains_changed)
    }

    /// A move of the shard to `to` under `epoch`, recorded before any worker hears of the epoch.
    pub(super) fn record_move(&mut self, shard: ShardId, to: WorkerId, epoch: u64) {
        let record = self.stored.shards.entry(shard.0).or_default();
        record.epoch = epoch;
        record.moving_to = Some(to.0);
    }

    /// The move ended without moving the shard: the owner stays as it was.
    pub(super) fn forget_move(&mut self, shard: ShardId) {
        if let Some(record) = self.stored.shards.get_mut(&shard.0) {
            record.moving_to = None;
        }
    }

    pub(super) fn record_owner(&mut self, shard: ShardId, owner: WorkerId, epoch: u64) {
        self.stored.shards.insert(shard.0, ShardRecord { owner: Some(owner.0), epoch, moving_to: None });
    }

    pub(super) fn record_unowned(&mut self, shard: ShardId, epoch: u64) {
        self.stored.shards.insert(shard.0, ShardRecord { owner: None, epoch, moving_to: None });
    }

    /// The owner keeps the shard, told to stop under `epoch`, which is recorded before it hears of
    /// it.
    pub(super) fn record_stop(&mut self, shard: ShardId, epoch: u64) {
        let record = self.stored.shards.entry(shard.0).or_default();
        record.epoch = epoch;
        record.moving_to = None;
    }

    /// Nobody owns the shard now. Returns whether the map had a record of it.
    pub(super) fn clear_owner(&mut self, shard: ShardId) -> bool {
        let Some(record) = self.stored.shards.get_mut(&shard.0) else { return false };
        record.owner = None;
        true
    }

    /// Raises the shard's epoch to `epoch` if it is below. Returns whether it was.
    pub(super) fn raise_epoch(&mut self, shard: ShardId, epoch: u64) -> bool {
        match self.stored.shards.get_mut(&shard.0) {
            Some(record) if record.epoch < epoch => {
                record.epoch = epoch;
                true
            }
            _ => false,
        }
    }
}
