//! Shards whose owner reported them Revoking to a new leader: the previous leader's move was cut
//! short while the owner drained. Each stays its owner's until the owner answers REVOKE (its
//! in-flight reconciles have finished) or its lease runs out; only then does nobody act. Until
//! then REVOKE goes again every `resend_after`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::Command;
use crate::ids::{ShardId, WorkerId};

#[derive(Debug)]
struct Stopping {
    worker: WorkerId,
    epoch: u64,
    sent_at: Instant,
}

#[derive(Debug, Default)]
pub(super) struct StoppingOwners {
    by_shard: BTreeMap<ShardId, Stopping>,
}

impl StoppingOwners {
    /// `worker` is told at `now` to stop acting for the shard under `epoch`.
    pub(super) fn insert(&mut self, shard: ShardId, worker: WorkerId, epoch: u64, now: Instant) {
        self.by_shard.insert(shard, Stopping { worker, epoch, sent_at: now });
    }

    pub(super) fn contains(&self, shard: ShardId) -> bool {
        self.by_shard.contains_key(&shard)
    }

    /// Whether `worker` is stopping for any shard.
    pub(super) fn any_of(&self, worker: &WorkerId) -> bool {
        self.by_shard.values().any(|s| s.worker == *worker)
    }

    /// What `worker` reports at registration replaces what it reported before.
    pub(super) fn forget_worker(&mut self, worker: &WorkerId) {
        self.by_shard.retain(|_, s| s.worker != *worker);
    }

    pub(super) fn remove(&mut self, shard: ShardId) {
        self.by_shard.remove(&shard);
    }

    /// The owner answered REVOKE for the shard at the epoch it was sent: it has stopped, and is
    /// forgotten. Returns whether the answer was that one.
    pub(super) fn stopped(&mut self, shard: ShardId, worker: &WorkerId, epoch: u64) -> bool {
        let answered = self.by_shard.get(&shard).is_some_and(|s| s.worker == *worker && s.epoch == epoch);
        if answered {
            self.by_shard.remove(&shard);
        }
        answered
    }

    /// REVOKE again to owners that did not answer it for `resend_after`.
    pub(super) fn resend(&mut self, now: Instant, resend_after: Duration) -> Vec<(WorkerId, Command)> {
        let mut sends = Vec::new();
        for (&shard, s) in self.by_shard.iter_mut() {
            if now.saturating_duration_since(s.sent_at) >= resend_after {
                s.sent_at = now;
                sends.push((s.worker.clone(), Command::Revoke { shard, epoch: s.epoch }));
            }
        }
        sends
    }
}
