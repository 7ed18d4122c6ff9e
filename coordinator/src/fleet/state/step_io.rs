//! What a step of the fleet state takes in (what the leader learnt: worker health, loads,
//! registrations, acknowledgements) and gives out (whether to store the map, and the commands
//! to send once it is stored).

use std::collections::BTreeMap;
use std::time::Instant;

use crate::handover::Barrier;
use crate::ids::{ShardId, WorkerId};

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
    pub(super) fn is_live(&self, worker: &WorkerId) -> bool {
        self.workers.get(worker) == Some(&WorkerHealth::Live)
    }

    /// Whether `worker`'s shards stay its own in placement: its lease runs (with or without a
    /// session).
    pub(super) fn may_keep_shards(&self, worker: &WorkerId) -> bool {
        matches!(self.workers.get(worker), Some(WorkerHealth::Live | WorkerHealth::Disconnected))
    }

    /// It stopped by its own clock, or is not known to run at all.
    pub(super) fn is_gone(&self, worker: &WorkerId) -> bool {
        self.workers.get(worker).is_none_or(|h| *h == WorkerHealth::Gone)
    }

    /// Whether every shard's load has been reported (placement weighs a shard without one as an
    /// idle one).
    pub(super) fn every_load_measured(&self, shard_count: u32) -> bool {
        (0..shard_count).all(|s| self.loads.contains_key(&ShardId(s)))
    }
}

/// What the controller must do: store the map (when `store`), and only then send.
#[derive(Debug, Default)]
pub struct StepOutput {
    pub store: bool,
    pub sends: Vec<(WorkerId, Command)>,
}
