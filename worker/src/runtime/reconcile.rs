//! The one reconcile loop every controller's queue runs on: it waits for the caches to sync,
//! takes keys only for Active shards (a revoked shard's queued and delayed keys — deadlines,
//! back-offs, next schedule times — are dropped when they come due, never run), holds the shard
//! in flight while the sync runs so REVOKE can wait for it, and requeues by the sync's verdict.

use std::future::Future;
use std::time::Duration;

use tracing::Instrument;

use super::shard::{Epoch, ShardTable};
use super::workqueue::WorkQueue;
use crate::informer::ObjectKey;

/// What one sync asks of the queue.
#[derive(Debug)]
pub enum Verdict {
    /// Nothing more until an event queues the key.
    Done,
    /// Sync again after this long; failures are forgotten.
    RequeueAfter(Duration),
    /// The sync failed: retry with the key's back-off.
    Retry(String),
}

/// Runs `workers` concurrent syncs of `queue`'s keys once `ready` completes, until the queue
/// shuts down. `name` labels the logs.
pub async fn run<F, Fut>(
    name: &'static str,
    queue: WorkQueue<ObjectKey>,
    shards: ShardTable,
    workers: usize,
    ready: impl Future<Output = ()>,
    sync: F,
) where
    F: Fn(ObjectKey, Epoch) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Verdict> + Send + 'static,
{
    ready.await;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers.max(1) {
        let (queue, shards, sync) = (queue.clone(), shards.clone(), sync.clone());
        tasks.spawn(async move {
            while let Some(key) = queue.get().await {
                // Shard gate: a key of a shard not Active here is dropped; ACTIVATE queues the
                // shard's keys again.
                let Some((epoch, in_flight)) = shards.begin(&key.namespace) else {
                    queue.forget(&key);
                    queue.done(&key);
                    continue;
                };
                // At debug level every line the sync logs says which sync it belongs to. The span
                // is a debug span because, enabled, tracing-subscriber's fmt layer formats its
                // fields into a string and files it in the span's extensions for every sync,
                // logged in or not: about 1.5% of a worker's CPU at `loadtest run million`'s mix
                // (docs/benchmarks.md, cut 20). The lines a sync logs at info and above name
                // their object themselves.
                let shard = shards.shard_of(&key.namespace);
                let span = tracing::debug_span!("reconcile", controller = name, key = %key, shard, epoch);
                let started = std::time::Instant::now();
                let verdict = sync(key.clone(), epoch).instrument(span.clone()).await;
                span.in_scope(|| {
                    tracing::debug!(took = ?started.elapsed(), ?verdict, "finished syncing");
                    match verdict {
                        Verdict::Done => queue.forget(&key),
                        Verdict::RequeueAfter(after) => {
                            queue.forget(&key);
                            queue.add_after(key.clone(), after);
                        }
                        Verdict::Retry(error) => {
                            tracing::info!(queue = name, key = %key, shard, epoch, %error, "sync failed; retrying with back-off");
                            queue.add_rate_limited(key.clone());
                        }
                    }
                });
                drop(in_flight);
                queue.done(&key);
            }
        });
    }
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            queue.update_unfinished_work();
        }
    });
    while let Some(r) = tasks.join_next().await {
        if let Err(e) = r
            && e.is_panic()
        {
            tracing::error!(queue = name, error = %e, "a sync task panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::*;
    use crate::runtime::workqueue::{Backoff, QueueMetrics};
    use crate::shards::ShardSpace;

    fn queue() -> WorkQueue<ObjectKey> {
        WorkQueue::new(
            Backoff { base: Duration::from_secs(1), max: Duration::from_secs(60) },
            QueueMetrics::unregistered(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_revoked_shards_delayed_keys_never_fire_and_other_shards_keep_going() {
        let shards = ShardTable::new(ShardSpace::new(4).unwrap());
        // "alpha" and "beta" hash to different shards of four.
        let (a, b) = (ObjectKey::new("alpha", "j"), ObjectKey::new("beta", "j"));
        for ns in ["alpha", "beta"] {
            let s = shards.shard_of(ns);
            shards.prepare(s, 1).unwrap();
            shards.activate(s, 1).unwrap();
        }
        let q = queue();
        let synced = Arc::new(Mutex::new(Vec::new()));
        let looped = tokio::spawn(run("test", q.clone(), shards.clone(), 2, async {}, {
            let synced = synced.clone();
            move |key: ObjectKey, epoch| {
                let synced = synced.clone();
                async move {
                    synced.lock().push((key.namespace, epoch));
                    Verdict::Done
                }
            }
        }));
        q.add_after(a.clone(), Duration::from_secs(10));
        q.add_after(b.clone(), Duration::from_secs(10));
        assert_eq!(shards.revoke_and_drain(shards.shard_of("alpha")).await, Ok(0));
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert_eq!(*synced.lock(), vec![("beta".to_string(), 1)], "alpha's deadline did not fire");
        looped.abort();
    }
}
