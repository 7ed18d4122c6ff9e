//! The ownership protocol's steps as calls on a running worker: PREPARE starts a shard's watches
//! and fills its caches, REVOKE stops its work and answers with its last write's
//! resourceVersion, ACTIVATE acts once the caches reflect that barrier, DROP forgets the shard.
//! Watches come in groups: the shards a worker starts with share one watch per kind, and each
//! shard gained later gets its own, so gaining a shard lists only that shard's objects.

use std::collections::{BTreeSet, HashMap};

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::list_watch::ContentType;
use super::shard::{Epoch, ShardError, ShardTable};
use super::watch::{self, Progress, ShardFiltering, WatchHandle, WatchScope};
use crate::informer::Informers;

/// One watch per kind over a group of shards.
struct WatchGroup {
    shards: BTreeSet<u32>,
    watches: Vec<WatchHandle>,
}

/// A worker's shards and their watches.
pub struct ShardRuntime {
    client: kube::Client,
    table: ShardTable,
    filtering: ShardFiltering,
    content_type: ContentType,
    informers: Informers,
    groups: Mutex<HashMap<u64, WatchGroup>>,
    next_group: AtomicU64,
}

impl ShardRuntime {
    /// Starts watching the shards `table` already holds (all of them for `--standalone`) in one
    /// group, feeding `informers` (each kind a controller registered a handler for). With none
    /// held, the controllers are told their stores are synced: each shard's own readiness is
    /// ACTIVATE's business. The watches ask for answers in `content_type`.
    pub fn start(
        client: kube::Client,
        table: ShardTable,
        filtering: ShardFiltering,
        content_type: ContentType,
        informers: Informers,
    ) -> Self {
        let runtime = Self {
            client,
            table,
            filtering,
            content_type,
            informers,
            groups: Mutex::new(HashMap::new()),
            next_group: AtomicU64::new(1),
        };
        let held = runtime.table.held();
        if held.is_empty() {
            runtime.informers.start_empty();
        } else {
            for shard in &held {
                runtime.table.set_feeder(*shard, 0);
            }
            runtime.start_group(0, held);
        }
        runtime
    }

    pub fn table(&self) -> &ShardTable {
        &self.table
    }

    pub fn filtering(&self) -> ShardFiltering {
        self.filtering
    }

    /// The stores the watches fill.
    pub fn informers(&self) -> &Informers {
        &self.informers
    }

    /// Watches currently open, all kinds.
    pub fn watches(&self) -> usize {
        self.groups.lock().values().map(|g| g.watches.len()).sum()
    }

    fn start_group(&self, id: u64, shards: BTreeSet<u32>) {
        let scope = WatchScope {
            table: self.table.clone(),
            shards: shards.clone(),
            filtering: self.filtering,
            id,
            content_type: self.content_type,
        };
        let mut watches = Vec::new();
        let Informers { jobs, pods, cronjobs } = &self.informers;
        if jobs.has_handlers() {
            watches.push(watch::start(self.client.clone(), scope.clone(), jobs.clone()));
        }
        if pods.has_handlers() {
            watches.push(watch::start(self.client.clone(), scope.clone(), pods.clone()));
        }
        if cronjobs.has_handlers() {
            watches.push(watch::start(self.client.clone(), scope, cronjobs.clone()));
        }
        self.groups.lock().insert(id, WatchGroup { shards, watches });
    }

    /// PREPARE: holds `shard` at `epoch` and starts its own watches; it acts on nothing yet.
    pub fn prepare(&self, shard: u32, epoch: Epoch) -> Result<(), ShardError> {
        self.table.prepare(shard, epoch)?;
        let id = self.next_group.fetch_add(1, Ordering::Relaxed);
        self.table.set_feeder(shard, id);
        self.start_group(id, BTreeSet::from([shard]));
        Ok(())
    }

    /// Waits until `shard`'s watches have listed it: its part of the stores is warm, ready for
    /// ACTIVATE.
    pub async fn warmed(&self, shard: u32) {
        let Some(feeder) = self.table.feeder(shard) else { return };
        let waits: Vec<_> = {
            let groups = self.groups.lock();
            groups.get(&feeder).map(|g| g.watches.iter().map(|w| w.reflect_owned(0)).collect())
        }
        .unwrap_or_default();
        futures::future::join_all(waits).await;
    }

    /// How far each watch feeding `shard`'s part of the stores has come, by kind: what ACTIVATE waits on.
    pub fn watch_progress(&self, shard: u32) -> Vec<(String, Progress)> {
        let Some(feeder) = self.table.feeder(shard) else { return Vec::new() };
        let groups = self.groups.lock();
        groups
            .get(&feeder)
            .map(|g| g.watches.iter().map(|w| (w.kind().to_string(), w.progress())).collect())
            .unwrap_or_default()
    }

    /// REVOKE: `shard` takes no more work; returns, once its in-flight reconciles are done, the
    /// resourceVersion of its last write.
    pub async fn revoke(&self, shard: u32) -> Result<u64, ShardError> {
        self.table.revoke_and_drain(shard).await
    }

    /// ACTIVATE: once `shard`'s part of the stores reflects `barrier_rv`, it acts under `epoch`.
    pub async fn activate(&self, shard: u32, epoch: Epoch, barrier_rv: u64) -> Result<(), ShardError> {
        let status = self.table.status(shard).ok_or(ShardError::NotHeld { shard })?;
        if status.epoch != epoch {
            return Err(ShardError::StaleEpoch { shard, current: status.epoch, requested: epoch });
        }
        let feeder = status.feeder.ok_or(ShardError::NotHeld { shard })?;
        // The group's watches are not held across the wait: clone their progress handles.
        let waits: Vec<_> = {
            let groups = self.groups.lock();
            groups.get(&feeder).map(|g| g.watches.iter().map(|w| w.reflect_owned(barrier_rv)).collect())
        }
        .unwrap_or_default();
        futures::future::join_all(waits).await;
        self.table.activate(shard, epoch)
    }

    /// DROP: forgets `shard`: the controllers forget what they kept of it (their drop hooks,
    /// which still read the stores), then the stores are emptied of it, and a watch of its own
    /// stops.
    pub fn drop_shard(&self, shard: u32) {
        let feeder = self.table.feeder(shard);
        self.table.drop_shard(shard);
        self.informers.forget_shard(shard);
        if let Some(id) = feeder {
            let mut groups = self.groups.lock();
            if let Some(g) = groups.get_mut(&id) {
                g.shards.remove(&shard);
                if g.shards.is_empty() {
                    groups.remove(&id);
                    self.table.forget_feeder(id);
                }
            }
        }
    }
}
