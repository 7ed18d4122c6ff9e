//! What the worker's `/readyz` and `/livez` (`/healthz`) answer, and the gauges beside them.
//!
//! - **Ready** (`/readyz`): standalone, once its controllers run (every shard is Active from the
//!   start). In a fleet, while its session with the leading coordinator is established, its
//!   liveness lease is renewed, and every shard it holds is Active (none half-way through a
//!   hand-over). A worker that holds no shard yet is ready once registered: the coordinator
//!   places shards only on registered workers.
//! - **Live** (`/livez`, `/healthz`): no reconcile loop is stalled. A loop is stalled when keys
//!   have waited in its queue for longer than the stall timeout and none of its syncs finished in
//!   that time; a loop that is idle, or slow but moving, is live. The HTTP endpoint runs on the
//!   worker's runtime, so a runtime that stopped scheduling tasks fails the probe by not
//!   answering.
//!
//! On `/metrics`: `batchfleet_worker_ready`, `batchfleet_worker_session_connected`,
//! `batchfleet_worker_lease_lapses_total` and `batchfleet_worker_shard_active{shard}` (1 for
//! each shard Active here: summed over the fleet by shard, above 1 means two owners).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use prometheus::{IntCounter, IntGauge, IntGaugeVec, Opts, Registry};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::fleet::lease::LeaseState;
use crate::runtime::shard::{ShardPhase, ShardTable};
use crate::runtime::workqueue::QueueProgress;

/// The default of `fleet-worker --stall-timeout`.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(120);

/// A probe's verdict: whether it passed, and the reason to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub ok: bool,
    pub reason: String,
}

type Progress = Box<dyn Fn() -> QueueProgress + Send + Sync>;

/// One watched queue: how to read it, and when its completed count last changed.
struct Loop {
    name: String,
    progress: Progress,
    completed: u64,
    moved_at: Instant,
}

struct Gauges {
    ready: IntGauge,
    session: IntGauge,
    lapses: IntCounter,
    active: IntGaugeVec,
}

/// The worker's health. Cheap to clone.
#[derive(Clone)]
pub struct Health {
    inner: Arc<Inner>,
}

struct Inner {
    shards: ShardTable,
    stall_timeout: Duration,
    loops: Mutex<Vec<Loop>>,
    /// `Some` in a fleet: the lease keeper's state.
    lease: Mutex<Option<watch::Receiver<LeaseState>>>,
    session: AtomicBool,
    gauges: Gauges,
    /// Shards whose `shard_active` series exists, so a dropped shard's is removed.
    exported: Mutex<std::collections::BTreeSet<u32>>,
}

impl Health {
    /// Health over `shards`; registers the gauges in `registry`.
    pub fn new(shards: ShardTable, stall_timeout: Duration, registry: &Registry) -> prometheus::Result<Self> {
        let opts = |name: &str, help: &str| Opts::new(name, help).namespace("batchfleet_worker");
        let gauges = Gauges {
            ready: IntGauge::with_opts(opts("ready", "1 while /readyz answers 200, else 0."))?,
            session: IntGauge::with_opts(opts(
                "session_connected",
                "1 while a session with the leading coordinator is established (standalone: 0).",
            ))?,
            lapses: IntCounter::with_opts(opts(
                "lease_lapses_total",
                "Times the worker's liveness lease lapsed and every shard was fenced.",
            ))?,
            active: IntGaugeVec::new(
                opts(
                    "shard_active",
                    "1 for each shard Active on this worker; summed by shard over the fleet, above 1 is two owners.",
                ),
                &["shard"],
            )?,
        };
        registry.register(Box::new(gauges.ready.clone()))?;
        registry.register(Box::new(gauges.session.clone()))?;
        registry.register(Box::new(gauges.lapses.clone()))?;
        registry.register(Box::new(gauges.active.clone()))?;
        Ok(Self {
            inner: Arc::new(Inner {
                shards,
                stall_timeout,
                loops: Mutex::new(Vec::new()),
                lease: Mutex::new(None),
                session: AtomicBool::new(false),
                gauges,
                exported: Mutex::new(Default::default()),
            }),
        })
    }

    /// Watches a reconcile loop's queue for stalls.
    pub fn watch_queue(&self, name: &str, progress: impl Fn() -> QueueProgress + Send + Sync + 'static) {
        let completed = progress().completed;
        self.inner.loops.lock().push(Loop {
            name: name.to_string(),
            progress: Box::new(progress),
            completed,
            moved_at: Instant::now(),
        });
    }

    /// Makes readiness a fleet worker's: it needs the session and a renewed lease.
    pub fn in_fleet(&self, lease: watch::Receiver<LeaseState>) {
        *self.inner.lease.lock() = Some(lease);
    }

    /// The session with the leading coordinator was established (`true`) or ended.
    pub fn set_session(&self, established: bool) {
        self.inner.session.store(established, Ordering::Relaxed);
        self.inner.gauges.session.set(i64::from(established));
    }

    /// Whether the session with the leading coordinator is established now.
    pub fn session_established(&self) -> bool {
        self.inner.session.load(Ordering::Relaxed)
    }

    /// `/livez`: whether every reconcile loop is moving.
    pub fn live(&self) -> Verdict {
        let now = Instant::now();
        let timeout = self.inner.stall_timeout;
        let mut stalled = Vec::new();
        for l in self.inner.loops.lock().iter_mut() {
            let p = (l.progress)();
            if p.completed != l.completed {
                l.completed = p.completed;
                l.moved_at = now;
            }
            let waited_long = p.oldest_wait.is_some_and(|w| w > timeout);
            if waited_long && now.duration_since(l.moved_at) > timeout {
                stalled.push(format!(
                    "{}: {} keys waiting, the oldest for {:?}, no sync finished for {:?}",
                    l.name,
                    p.waiting,
                    p.oldest_wait.unwrap_or_default(),
                    now.duration_since(l.moved_at)
                ));
            }
        }
        if stalled.is_empty() {
            Verdict { ok: true, reason: "ok".into() }
        } else {
            Verdict { ok: false, reason: format!("stalled: {}", stalled.join("; ")) }
        }
    }

    /// `/readyz`: live, and (in a fleet) session established, lease renewed, every shard Active.
    pub fn ready(&self) -> Verdict {
        let verdict = self.readiness();
        self.inner.gauges.ready.set(i64::from(verdict.ok));
        verdict
    }

    fn readiness(&self) -> Verdict {
        let live = self.live();
        if !live.ok {
            return live;
        }
        let table = &self.inner.shards;
        let held = table.held();
        let not_active: Vec<u32> = held
            .iter()
            .copied()
            .filter(|s| table.status(*s).is_some_and(|st| st.phase != ShardPhase::Active))
            .collect();
        if let Some(lease) = self.inner.lease.lock().as_ref() {
            if !lease.borrow().renewed {
                return Verdict { ok: false, reason: "the worker lease is not renewed".into() };
            }
            if !self.inner.session.load(Ordering::Relaxed) {
                return Verdict { ok: false, reason: "no session with the leading coordinator".into() };
            }
        }
        if !not_active.is_empty() {
            return Verdict {
                ok: false,
                reason: format!("shards not yet Active (in a hand-over): {not_active:?}"),
            };
        }
        Verdict { ok: true, reason: format!("ok: {} shards active", held.len()) }
    }

    /// Keeps the gauges current, once a second, until the returned future is dropped.
    pub async fn keep_gauges(self) {
        let mut lapses_seen = 0u64;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            self.ready();
            let lapses = self.inner.lease.lock().as_ref().map_or(0, |l| l.borrow().lapses);
            if lapses > lapses_seen {
                self.inner.gauges.lapses.inc_by(lapses - lapses_seen);
                lapses_seen = lapses;
            }
            let table = &self.inner.shards;
            let active: std::collections::BTreeSet<u32> = table
                .held()
                .into_iter()
                .filter(|s| table.status(*s).is_some_and(|st| st.phase == ShardPhase::Active))
                .collect();
            let mut exported = self.inner.exported.lock();
            for gone in exported.difference(&active) {
                let _ = self.inner.gauges.active.remove_label_values(&[&gone.to_string()]);
            }
            for shard in &active {
                self.inner.gauges.active.with_label_values(&[&shard.to_string()]).set(1);
            }
            *exported = active;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;
    use crate::shards::ShardSpace;

    fn health(table: ShardTable) -> Health {
        Health::new(table, Duration::from_secs(10), &Registry::new()).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_loop_with_old_keys_and_no_finished_sync_is_stalled_and_a_slow_one_is_not() {
        let h = health(ShardTable::all_active(ShardSpace::new(4).unwrap()));
        let completed = Arc::new(AtomicU64::new(0));
        let queued_at = Arc::new(Mutex::new(None::<Instant>));
        h.watch_queue("job", {
            let (completed, queued_at) = (completed.clone(), queued_at.clone());
            move || {
                let oldest = queued_at.lock().map(|t| Instant::now().duration_since(t));
                QueueProgress {
                    waiting: usize::from(oldest.is_some()),
                    oldest_wait: oldest,
                    completed: completed.load(Ordering::Relaxed),
                }
            }
        });
        assert!(h.live().ok, "idle");
        *queued_at.lock() = Some(Instant::now());
        tokio::time::sleep(Duration::from_secs(11)).await;
        let stalled = h.live();
        assert!(!stalled.ok, "a key waited 11s and nothing finished");
        assert!(stalled.reason.contains("job: 1 keys waiting"), "{}", stalled.reason);
        assert!(!h.ready().ok, "not live, not ready");
        // Syncs finish again, though the oldest key still waits: slow, not stalled.
        completed.fetch_add(1, Ordering::Relaxed);
        assert!(h.live().ok);
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert!(!h.live().ok, "no sync finished for 11s more");
        *queued_at.lock() = None;
        assert!(h.live().ok, "the queue emptied");
    }

    #[tokio::test(start_paused = true)]
    async fn a_fleet_worker_is_ready_with_a_session_a_renewed_lease_and_every_shard_active() {
        let table = ShardTable::new(ShardSpace::new(4).unwrap());
        let h = health(table.clone());
        assert!(h.ready().ok, "standalone-like until in_fleet");
        let (lease_tx, lease) = watch::channel(LeaseState::default());
        h.in_fleet(lease);
        assert_eq!(h.ready().reason, "the worker lease is not renewed");
        lease_tx.send_modify(|l| l.renewed = true);
        assert_eq!(h.ready().reason, "no session with the leading coordinator");
        h.set_session(true);
        assert_eq!(h.ready(), Verdict { ok: true, reason: "ok: 0 shards active".into() });
        table.prepare(2, 1).unwrap();
        let preparing = h.ready();
        assert!(!preparing.ok && preparing.reason.contains("[2]"), "{}", preparing.reason);
        table.activate(2, 1).unwrap();
        assert_eq!(h.ready().reason, "ok: 1 shards active");
        h.set_session(false);
        assert!(!h.ready().ok, "the session ended");
    }
}
