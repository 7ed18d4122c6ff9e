//! The worker's liveness lease, renewed by the worker itself in the coordination store. A worker
//! that cannot renew within its TTL — by its own monotonic clock, from the send time of its last
//! successful renewal — stops every shard before anyone could consider them free.

use std::sync::Arc;
use std::time::{Duration, Instant};

use batchfleet_store::CoordinationStore;
use batchfleet_store::ids::WorkerId;
use tokio::sync::watch;

use crate::runtime::protocol::ShardRuntime;

/// Renews the lease every third of `ttl` until `stop`; fences the runtime when the lease lapses.
/// Every write checks the lease's deadline too, so a worker that was paused (SIGSTOP, a long GC
/// of the host) sends nothing once it resumes past it, even before this loop runs again.
/// `renewed` turns true at the first successful renewal (the worker registers after it).
pub async fn keep<S: CoordinationStore>(
    store: Arc<S>,
    worker: WorkerId,
    ttl: Duration,
    runtime: Arc<ShardRuntime>,
    renewed: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let period = ttl / 3;
    let mut last_ok: Option<Instant> = None;
    // Fences once the lease has lapsed by the worker's own clock. Checked before an attempt as well
    // as after it: a lease that lapsed while this task could not run (the process was stopped, the
    // host paused) must not be extended by the next renewal, since the coordinator may already
    // have given its shards away.
    let fence_if_lapsed = |last_ok: &mut Option<Instant>, now: Instant| {
        if let Some(ok) = *last_ok
            && now.duration_since(ok) >= ttl
        {
            fence(&runtime);
            *last_ok = None;
            renewed.send_replace(false);
        }
    };
    loop {
        let sent = Instant::now();
        fence_if_lapsed(&mut last_ok, sent);
        // An attempt never outlives the lease it would extend.
        let budget = last_ok
            .map_or(ttl, |ok| ttl.saturating_sub(sent.duration_since(ok)))
            .max(Duration::from_millis(50));
        match tokio::time::timeout(budget, store.renew_worker(&worker, ttl)).await {
            Ok(Ok(())) => {
                last_ok = Some(sent);
                runtime.table().set_lease_deadline(sent + ttl);
                renewed.send_replace(true);
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "renewing the worker lease failed"),
            Err(_) => tracing::warn!("renewing the worker lease timed out"),
        }
        fence_if_lapsed(&mut last_ok, Instant::now());
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

/// Stops and forgets every shard: the lease lapsed, so the coordinator may give them away.
pub fn fence(runtime: &ShardRuntime) {
    let held = runtime.table().held();
    if !held.is_empty() {
        tracing::error!(shards = held.len(), "the worker lease lapsed: stopping every shard");
    }
    for shard in held {
        runtime.drop_shard(shard);
    }
}
