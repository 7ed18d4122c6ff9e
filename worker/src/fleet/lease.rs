//! The worker's liveness lease, renewed by the worker itself in the coordination store. A worker
//! that cannot renew within its TTL — by its own monotonic clock, from the send time of its last
//! successful renewal — stops every shard before anyone could consider them free.

use std::sync::Arc;
use std::time::{Duration, Instant};

use batchfleet_store::ids::WorkerId;
use batchfleet_store::{CoordinationStore, StoreError};
use tokio::sync::watch;

use crate::runtime::protocol::ShardRuntime;

/// What the lease keeper tells the worker's session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseState {
    /// Renewed within its TTL: the worker may register.
    pub renewed: bool,
    /// How many times the lease lapsed and every shard was dropped; the session registers again
    /// after each, so that the coordinator learns the worker holds nothing.
    pub lapses: u64,
}

/// Renews the lease every third of `ttl` until `stop`; fences the runtime when the lease lapses.
/// Every write checks the lease's deadline too, so a worker that was paused (SIGSTOP, a long GC
/// of the host) sends nothing once it resumes past it, even before this loop runs again.
/// `state.renewed` turns true at the first successful renewal (the worker registers after it).
pub async fn keep<S: CoordinationStore>(
    store: Arc<S>,
    worker: WorkerId,
    ttl: Duration,
    runtime: Arc<ShardRuntime>,
    state: watch::Sender<LeaseState>,
    mut stop: watch::Receiver<bool>,
) {
    let period = ttl / 3;
    let mut last_ok: Option<Instant> = None;
    let lapse = |last_ok: &mut Option<Instant>| {
        fence(&runtime);
        *last_ok = None;
        state.send_modify(|s| {
            s.renewed = false;
            s.lapses += 1;
        });
    };
    loop {
        let sent = Instant::now();
        // A lease that lapsed already (the worker was paused past it, or renewals kept failing)
        // is fenced before anything is renewed: the coordinator may have given the shards away,
        // and a renewal that succeeds now would move the write deadline past that time for
        // shards still held here.
        if last_ok.is_some_and(|ok| sent.duration_since(ok) >= ttl) {
            lapse(&mut last_ok);
        }
        // An attempt never outlives the lease it would extend.
        let budget = last_ok
            .map_or(ttl, |ok| ttl.saturating_sub(sent.duration_since(ok)))
            .max(Duration::from_millis(50));
        match tokio::time::timeout(budget, store.renew_worker(&worker, ttl)).await {
            Ok(Ok(())) => {
                last_ok = Some(sent);
                runtime.table().set_lease_deadline(sent + ttl);
                state.send_modify(|s| s.renewed = true);
            }
            Ok(Err(StoreError::RecordLost)) => {
                // The coordinator may be freeing this worker's shards already: stop now, not
                // when the lease would have run out. The next renewal makes a new record.
                tracing::error!("the worker's liveness record vanished from the store");
                lapse(&mut last_ok);
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "renewing the worker lease failed"),
            Err(_) => tracing::warn!("renewing the worker lease timed out"),
        }
        if last_ok.is_some_and(|ok| Instant::now().duration_since(ok) >= ttl) {
            lapse(&mut last_ok);
        }
        let stopping = async {
            let _ = stop.wait_for(|s| *s).await;
        };
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = stopping => {
                if let Err(e) = store.remove_worker(&worker).await {
                    tracing::warn!(error = %e, "removing the worker lease on exit");
                }
                return;
            }
        }
    }
}

/// Stops and forgets every shard: the lease lapsed, so the coordinator may give them away. No
/// write goes out until a shard is activated again.
pub fn fence(runtime: &ShardRuntime) {
    runtime.table().hold_writes();
    let held = runtime.table().held();
    if !held.is_empty() {
        tracing::error!(shards = held.len(), "the worker lease lapsed: stopping every shard");
    }
    for shard in held {
        runtime.drop_shard(shard);
    }
}
