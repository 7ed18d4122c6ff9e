//! Light workers for `loadtest run fleet-scale`: many protocol-faithful fleet workers in one
//! process. Each keeps a real liveness lease in the coordination store (renewed every third of
//! its TTL, fenced by its own clock when a renewal does not come through) and a real gRPC
//! session with the leading coordinator (registration with what it holds, a command stream, a
//! heartbeat each second with every held shard's load, following a standby's leader hint), and
//! answers PREPARE, REVOKE, ACTIVATE and DROP as `fleet-worker` does. It owns no controllers and
//! writes nothing to the API server: the coordinator cannot tell it from a real worker, so the
//! coordinator and the store can be measured at a thousand workers on one machine.
//!
//! Each shard gets a synthetic load (reconciles per second drawn from a seeded generator), the
//! same whoever holds it, so that placement has loads to balance.
//!
//! Invariant 1 is audited across the light fleet as it runs: a shard activated on one worker
//! while another still held it Active, within its lease, is a violation.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use batchfleet_coordinator::ids::WorkerId;
use batchfleet_coordinator::store::CoordinationStore;
use batchfleet_proto::v1 as pb;
use batchfleet_proto::v1::fleet_session_client::FleetSessionClient;
use batchfleet_worker::fleet::session::leader_hint;
use batchfleet_worker::retry::RetryBackoff;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::Endpoint;

use crate::splitmix::SplitMix;

#[derive(Debug, Clone)]
pub struct LightFleetConfig {
    /// Every coordinator's session address; the leader is whichever accepts the registration.
    pub coordinators: Vec<String>,
    /// The workers' lease TTL (`fleet-worker --lease-duration`).
    pub ttl: Duration,
    pub heartbeat: Duration,
    pub shard_count: u32,
    /// Seed of the shards' synthetic loads.
    pub load_seed: u64,
}

/// Reconciles per second of each shard: most shards alike, some twice as busy as others, so
/// that balancing by load differs from balancing by count.
pub fn synthetic_loads(shard_count: u32, seed: u64) -> Vec<f64> {
    let mut rng = SplitMix(seed);
    (0..shard_count).map(|_| 0.5 + rng.next_f64()).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Preparing,
    Active,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    epoch: u64,
    phase: Phase,
}

/// What one light worker holds; a restart (a leave) forgets it, as a process restart does.
#[derive(Debug, Default)]
struct Holdings {
    held: BTreeMap<u32, Held>,
    /// The highest epoch each shard was ever held at here, dropped ones too: PREPARE at or below
    /// it is refused, as the shard table refuses it.
    known: BTreeMap<u32, u64>,
    drained: bool,
}

/// One light worker: its holdings and what the run reads of it.
#[derive(Debug)]
pub struct LightWorker {
    pub id: WorkerId,
    index: usize,
    holdings: Mutex<Holdings>,
    /// When its current session opened its command stream, and with which coordinator.
    session: Mutex<Option<(Instant, String)>>,
    /// Nanoseconds after the fleet's epoch until which its lease is renewed (0: not renewed).
    lease_deadline: AtomicU64,
    pub registrations: AtomicU64,
    pub lapses: AtomicU64,
    /// PREPAREs that started a tenure here (repeats not counted).
    pub prepares: AtomicU64,
}

/// Which light worker is Active for each shard, and what broke invariant 1.
#[derive(Debug)]
struct Ownership {
    active: Mutex<Vec<Option<(usize, u64)>>>,
    violations: Mutex<Vec<String>>,
}

/// The light fleet: `workers` in one process, each started, stopped and started again by index.
pub struct LightFleet<S: CoordinationStore + 'static> {
    store: Arc<S>,
    config: Arc<LightFleetConfig>,
    shared: Arc<Shared>,
    running: Vec<Option<Running>>,
}

/// What every worker's tasks share.
#[derive(Debug)]
struct Shared {
    workers: Vec<Arc<LightWorker>>,
    ownership: Ownership,
    loads: Vec<f64>,
    /// The zero of the lease deadlines.
    epoch: Instant,
}

struct Running {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl<S: CoordinationStore + 'static> LightFleet<S> {
    /// `count` workers named `lw-0000`…, none started yet.
    pub fn new(store: Arc<S>, config: LightFleetConfig, count: usize) -> Self {
        let workers = (0..count)
            .map(|index| {
                Arc::new(LightWorker {
                    id: WorkerId(format!("lw-{index:04}")),
                    index,
                    holdings: Mutex::default(),
                    session: Mutex::new(None),
                    lease_deadline: AtomicU64::new(0),
                    registrations: AtomicU64::new(0),
                    lapses: AtomicU64::new(0),
                    prepares: AtomicU64::new(0),
                })
            })
            .collect();
        let shared = Arc::new(Shared {
            workers,
            ownership: Ownership {
                active: Mutex::new(vec![None; config.shard_count as usize]),
                violations: Mutex::default(),
            },
            loads: synthetic_loads(config.shard_count, config.load_seed),
            epoch: Instant::now(),
        });
        Self { store, config: Arc::new(config), running: (0..count).map(|_| None).collect(), shared }
    }

    pub fn workers(&self) -> &[Arc<LightWorker>] {
        &self.shared.workers
    }

    /// Starts worker `index` afresh: it holds nothing, renews its lease, then registers.
    pub fn start(&mut self, index: usize) {
        if self.running[index].is_some() {
            return;
        }
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run_worker(
            self.store.clone(),
            self.config.clone(),
            self.shared.clone(),
            index,
            stopped,
        ));
        self.running[index] = Some(Running { stop, task });
    }

    /// Stops worker `index` as a process that is killed: its session is cut, everything it held
    /// is forgotten, and its lease record is left to expire (or to be renewed by the same worker
    /// started again within it).
    pub async fn stop(&mut self, index: usize) {
        let Some(running) = self.running[index].take() else { return };
        running.stop.send_replace(true);
        let _ = running.task.await;
        let worker = &self.shared.workers[index];
        let held: Vec<u32> = std::mem::take(&mut *worker.holdings.lock()).held.into_keys().collect();
        for shard in held {
            self.shared.ownership.release(shard, index);
        }
        worker.lease_deadline.store(0, Ordering::Relaxed);
        *worker.session.lock() = None;
    }

    /// Shards Active on each worker: `(worker index, shard, epoch)`.
    pub fn active(&self) -> Vec<(usize, u32, u64)> {
        let mut out = Vec::new();
        for w in &self.shared.workers {
            for (shard, h) in &w.holdings.lock().held {
                if h.phase == Phase::Active {
                    out.push((w.index, *shard, h.epoch));
                }
            }
        }
        out
    }

    /// Shards held (any phase) by worker `index`.
    pub fn held_by(&self, index: usize) -> usize {
        self.shared.workers[index].holdings.lock().held.len()
    }

    /// Workers whose session opened its command stream with `coordinator` after `since`.
    pub fn sessions_with(&self, coordinator: &str, since: Instant) -> usize {
        self.shared
            .workers
            .iter()
            .filter(|w| w.session.lock().as_ref().is_some_and(|(at, c)| *at >= since && c == coordinator))
            .count()
    }

    /// When the last of the workers opened its current session, if every one has one.
    pub fn last_session_opened(&self) -> Option<Instant> {
        self.shared
            .workers
            .iter()
            .map(|w| w.session.lock().as_ref().map(|(at, _)| *at))
            .try_fold(None::<Instant>, |latest, at| at.map(|at| Some(latest.map_or(at, |l| l.max(at)))))?
    }

    pub fn total(&self, counter: impl Fn(&LightWorker) -> &AtomicU64) -> u64 {
        self.shared.workers.iter().map(|w| counter(w).load(Ordering::Relaxed)).sum()
    }

    /// Every time a shard was activated while another worker still held it Active.
    pub fn violations(&self) -> Vec<String> {
        self.shared.ownership.violations.lock().clone()
    }

    /// Stops every worker (the run is over).
    pub async fn stop_all(&mut self) {
        for index in 0..self.running.len() {
            self.stop(index).await;
        }
    }

    /// Whether every worker of `indices` opened a session after `since`.
    pub fn all_registered_since(&self, indices: &[usize], since: Instant) -> bool {
        indices
            .iter()
            .all(|i| self.shared.workers[*i].session.lock().as_ref().is_some_and(|(at, _)| *at >= since))
    }
}

impl Shared {
    fn now_nanos(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether worker `index` may still act: its lease is renewed by its own clock.
    fn within_lease(&self, index: usize) -> bool {
        self.workers[index].lease_deadline.load(Ordering::Relaxed) > self.now_nanos()
    }
}

impl Ownership {
    fn activate(&self, shard: u32, index: usize, epoch: u64, shared: &Shared) {
        let mut active = self.active.lock();
        let Some(slot) = active.get_mut(shard as usize) else { return };
        if let Some((other, other_epoch)) = *slot
            && other != index
            && shared.within_lease(other)
            && shared.workers[other]
                .holdings
                .lock()
                .held
                .get(&shard)
                .is_some_and(|h| h.phase == Phase::Active)
        {
            self.violations.lock().push(format!(
                "shard {shard} activated on {} at epoch {epoch} while {} held it active at epoch {other_epoch}",
                shared.workers[index].id, shared.workers[other].id
            ));
        }
        *slot = Some((index, epoch));
    }

    fn release(&self, shard: u32, index: usize) {
        let mut active = self.active.lock();
        if let Some(slot) = active.get_mut(shard as usize)
            && slot.is_some_and(|(w, _)| w == index)
        {
            *slot = None;
        }
    }
}

/// Lease and session of one worker until `stop`; the lease record is removed on the way out.
async fn run_worker<S: CoordinationStore>(
    store: Arc<S>,
    config: Arc<LightFleetConfig>,
    shared: Arc<Shared>,
    index: usize,
    stop: watch::Receiver<bool>,
) {
    let (renewed_tx, renewed) = watch::channel((false, 0u64));
    tokio::join!(
        keep_lease(&*store, &config, &shared, index, renewed_tx, stop.clone()),
        sessions(&config, &shared, index, renewed, stop),
    );
}

/// Renews the lease every third of the TTL until stopped; when a renewal has not come through within the TTL
/// (by this process's clock, from the send time of the last good one) every shard is dropped and
/// the session registers again holding nothing, as `fleet-worker`'s lease keeper does.
async fn keep_lease<S: CoordinationStore>(
    store: &S,
    config: &LightFleetConfig,
    shared: &Shared,
    index: usize,
    renewed: watch::Sender<(bool, u64)>,
    mut stop: watch::Receiver<bool>,
) {
    let me = &shared.workers[index];
    let ttl = config.ttl;
    let mut last_ok: Option<Instant> = None;
    let lapse = |last_ok: &mut Option<Instant>| {
        *last_ok = None;
        me.lapses.fetch_add(1, Ordering::Relaxed);
        let held: Vec<u32> = std::mem::take(&mut me.holdings.lock().held).into_keys().collect();
        for shard in held {
            shared.ownership.release(shard, index);
        }
        renewed.send_modify(|(ok, lapses)| {
            *ok = false;
            *lapses += 1;
        });
    };
    loop {
        let sent = Instant::now();
        if last_ok.is_some_and(|ok| sent.duration_since(ok) >= ttl) {
            lapse(&mut last_ok);
        }
        let budget = last_ok
            .map_or(ttl, |ok| ttl.saturating_sub(sent.duration_since(ok)))
            .max(Duration::from_millis(50));
        match tokio::time::timeout(budget, store.renew_worker(&me.id, ttl)).await {
            Ok(Ok(())) => {
                last_ok = Some(sent);
                let deadline = sent.duration_since(shared.epoch) + ttl;
                me.lease_deadline
                    .store(u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
                renewed.send_modify(|(ok, _)| *ok = true);
            }
            Ok(Err(e)) => {
                tracing::warn!(worker = %me.id, error = %e, "renewing a light worker's lease failed")
            }
            Err(_) => tracing::warn!(worker = %me.id, "renewing a light worker's lease timed out"),
        }
        if last_ok.is_some_and(|ok| Instant::now().duration_since(ok) >= ttl) {
            lapse(&mut last_ok);
        }
        // Stopped as a killed process: the lease record stays.
        tokio::select! {
            _ = tokio::time::sleep(ttl / 3) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Sessions with whichever coordinator leads, until `stop`.
async fn sessions(
    config: &LightFleetConfig,
    shared: &Arc<Shared>,
    index: usize,
    mut renewed: watch::Receiver<(bool, u64)>,
    mut stop: watch::Receiver<bool>,
) {
    let me = &shared.workers[index];
    let mut next = 0usize;
    let mut following: Option<String> = None;
    let mut backoff = RetryBackoff::new(Duration::from_millis(100), Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = renewed.wait_for(|(ok, _)| *ok) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let lapses = renewed.borrow().1;
        let url = following.take().unwrap_or_else(|| {
            next += 1;
            config.coordinators[(next - 1) % config.coordinators.len().max(1)].clone()
        });
        let registrations = me.registrations.load(Ordering::Relaxed);
        let ended = tokio::select! {
            r = session(&url, config, shared, index) => r,
            _ = renewed.wait_for(|(_, l)| *l != lapses) => Err(anyhow::anyhow!("the lease lapsed")),
            _ = stop.wait_for(|s| *s) => return,
        };
        *me.session.lock() = None;
        if me.registrations.load(Ordering::Relaxed) != registrations {
            backoff.reset();
        }
        if let Err(e) = ended {
            following = leader_hint(&e).filter(|leader| *leader != url);
            tracing::debug!(worker = %me.id, coordinator = %url, error = %e, "light worker's session ended");
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff.next_delay()) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

async fn session(
    url: &str,
    config: &LightFleetConfig,
    shared: &Arc<Shared>,
    index: usize,
) -> anyhow::Result<()> {
    let me = &shared.workers[index];
    let channel =
        Endpoint::from_shared(url.to_string())?.connect_timeout(Duration::from_secs(2)).connect().await?;
    let mut rpc = FleetSessionClient::new(channel);
    let (held, loads) = report(me, &shared.loads);
    let registered = rpc
        .register(pb::RegisterRequest { worker_id: me.id.0.clone(), address: String::new(), held, loads })
        .await?
        .into_inner();
    anyhow::ensure!(
        registered.shard_count == config.shard_count,
        "the fleet has {} shards, the light workers {}",
        registered.shard_count,
        config.shard_count
    );
    let session_id = registered.session_id;
    let mut commands = rpc.commands(pb::CommandStreamRequest { session_id }).await?.into_inner();
    me.registrations.fetch_add(1, Ordering::Relaxed);
    *me.session.lock() = Some((Instant::now(), url.to_string()));
    let heartbeats =
        tokio::spawn(heartbeat(rpc.clone(), session_id, shared.clone(), index, config.heartbeat));
    let _stop_heartbeats = AbortOnDrop(heartbeats);
    while let Some(command) = commands.message().await? {
        let Some(kind) = command.kind else { continue };
        if let Some(ack) = carry_out(shared, index, kind) {
            let mut rpc = rpc.clone();
            tokio::spawn(async move {
                if let Err(e) = rpc.acknowledge(pb::Ack { session_id, ..ack }).await {
                    tracing::debug!(error = %e, "acknowledgement not delivered; the coordinator will ask again");
                }
            });
        }
    }
    Ok(())
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What the worker holds and each held shard's load, for a registration.
fn report(me: &LightWorker, loads: &[f64]) -> (Vec<pb::HeldShard>, Vec<pb::ShardLoad>) {
    let holdings = me.holdings.lock();
    let held = holdings
        .held
        .iter()
        .map(|(shard, h)| pb::HeldShard {
            shard: *shard,
            epoch: h.epoch,
            phase: match h.phase {
                Phase::Preparing => "preparing",
                Phase::Active => "active",
            }
            .into(),
        })
        .collect();
    (held, shard_loads(&holdings, loads))
}

fn shard_loads(holdings: &Holdings, loads: &[f64]) -> Vec<pb::ShardLoad> {
    holdings
        .held
        .keys()
        .map(|shard| pb::ShardLoad {
            shard: *shard,
            objects: 0,
            reconciles_per_second: loads.get(*shard as usize).copied().unwrap_or(0.0),
        })
        .collect()
}

async fn heartbeat(
    mut rpc: FleetSessionClient<tonic::transport::Channel>,
    session_id: u64,
    shared: Arc<Shared>,
    index: usize,
    period: Duration,
) {
    loop {
        tokio::time::sleep(period).await;
        let loads = shard_loads(&shared.workers[index].holdings.lock(), &shared.loads);
        if rpc.heartbeat(pb::HeartbeatRequest { session_id, loads }).await.is_err() {
            return;
        }
    }
}

fn ack(assignment: pb::ShardAssignment, step: pb::Step) -> pb::Ack {
    pb::Ack {
        session_id: 0,
        assignment: Some(assignment),
        last_write_resource_version: String::new(),
        step: step.into(),
        activate_micros: None,
        held_epoch: None,
    }
}

/// Carries out one command as `fleet-worker`'s session does (worker/src/fleet/session.rs and the
/// shard table's rules); the acknowledgement to send, if any. A light worker has no caches to
/// warm, no in-flight syncs to wait for and writes nothing, so every answer is immediate and a
/// REVOKED names no last write.
fn carry_out(shared: &Shared, index: usize, kind: pb::command::Kind) -> Option<pb::Ack> {
    use pb::command::Kind;
    let me = &shared.workers[index];
    let shard_count = shared.loads.len();
    let mut holdings = me.holdings.lock();
    match kind {
        Kind::Prepare(a) => {
            if holdings.held.get(&a.shard).is_some_and(|h| h.epoch == a.epoch) {
                // A repeat of a PREPARE under way (or done).
                return Some(ack(a, pb::Step::Prepared));
            }
            if a.shard as usize >= shard_count {
                return Some(ack(a, pb::Step::Refused));
            }
            let known = holdings.known.get(&a.shard).copied().unwrap_or(0);
            if a.epoch <= known {
                return Some(pb::Ack { held_epoch: Some(known), ..ack(a, pb::Step::Refused) });
            }
            holdings.held.insert(a.shard, Held { epoch: a.epoch, phase: Phase::Preparing });
            holdings.known.insert(a.shard, a.epoch);
            me.prepares.fetch_add(1, Ordering::Relaxed);
            Some(ack(a, pb::Step::Prepared))
        }
        Kind::Revoke(a) => {
            // A delayed REVOKE of an older move must not stop a newer tenure.
            if holdings.held.get(&a.shard).is_some_and(|h| h.epoch >= a.epoch) {
                return None;
            }
            if holdings.held.remove(&a.shard).is_some() {
                shared.ownership.release(a.shard, index);
            }
            Some(ack(a, pb::Step::Revoked))
        }
        Kind::Activate(activate) => {
            let a = activate.assignment?;
            match holdings.held.get_mut(&a.shard) {
                Some(h) if h.epoch == a.epoch && h.phase == Phase::Active => {
                    Some(ack(a, pb::Step::Activated))
                }
                Some(h) if h.epoch == a.epoch => {
                    // Writes would be allowed only within the lease: a worker past it does not act.
                    if !shared.within_lease(index) {
                        return None;
                    }
                    h.phase = Phase::Active;
                    drop(holdings);
                    shared.ownership.activate(a.shard, index, a.epoch, shared);
                    Some(pb::Ack { activate_micros: Some(0), ..ack(a, pb::Step::Activated) })
                }
                // Not prepared at this epoch: the shard table refuses it, and nothing is answered.
                _ => None,
            }
        }
        Kind::Drop(a) => {
            if holdings.held.get(&a.shard).is_some_and(|h| h.epoch <= a.epoch) {
                holdings.held.remove(&a.shard);
                shared.ownership.release(a.shard, index);
            }
            Some(ack(a, pb::Step::Dropped))
        }
        Kind::DrainComplete(_) => {
            holdings.drained = true;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(workers: usize, shards: u32) -> Shared {
        Shared {
            workers: (0..workers)
                .map(|index| {
                    Arc::new(LightWorker {
                        id: WorkerId(format!("lw-{index}")),
                        index,
                        holdings: Mutex::default(),
                        session: Mutex::new(None),
                        lease_deadline: AtomicU64::new(u64::MAX),
                        registrations: AtomicU64::new(0),
                        lapses: AtomicU64::new(0),
                        prepares: AtomicU64::new(0),
                    })
                })
                .collect(),
            ownership: Ownership {
                active: Mutex::new(vec![None; shards as usize]),
                violations: Mutex::default(),
            },
            loads: synthetic_loads(shards, 1),
            epoch: Instant::now(),
        }
    }

    fn assignment(shard: u32, epoch: u64) -> pb::ShardAssignment {
        pb::ShardAssignment { shard, epoch }
    }

    fn prepare(shard: u32, epoch: u64) -> pb::command::Kind {
        pb::command::Kind::Prepare(assignment(shard, epoch))
    }

    fn activate(shard: u32, epoch: u64) -> pb::command::Kind {
        pb::command::Kind::Activate(pb::Activate {
            assignment: Some(assignment(shard, epoch)),
            min_resource_version: String::new(),
        })
    }

    fn step(ack: Option<pb::Ack>) -> Option<pb::Step> {
        ack.and_then(|a| pb::Step::try_from(a.step).ok())
    }

    /// A move from worker 0 to worker 1 as the coordinator drives it, with the repeats and stale
    /// commands a fail-over sends, answered as fleet-worker answers them.
    #[test]
    fn a_move_is_answered_step_by_step_and_stale_commands_change_nothing() {
        let s = shared(2, 4);
        assert_eq!(step(carry_out(&s, 0, prepare(2, 1))), Some(pb::Step::Prepared));
        assert_eq!(step(carry_out(&s, 0, activate(2, 1))), Some(pb::Step::Activated));
        // PREPARE on the new owner, REVOKE on the old, ACTIVATE on the new.
        assert_eq!(step(carry_out(&s, 1, prepare(2, 2))), Some(pb::Step::Prepared));
        assert_eq!(step(carry_out(&s, 1, prepare(2, 2))), Some(pb::Step::Prepared), "a repeat");
        assert_eq!(carry_out(&s, 0, pb::command::Kind::Revoke(assignment(2, 1))), None, "an older REVOKE");
        assert_eq!(
            step(carry_out(&s, 0, pb::command::Kind::Revoke(assignment(2, 2)))),
            Some(pb::Step::Revoked)
        );
        assert_eq!(step(carry_out(&s, 1, activate(2, 2))), Some(pb::Step::Activated));
        assert!(s.ownership.violations.lock().is_empty());
        assert_eq!(carry_out(&s, 0, activate(2, 1)), None, "not held any more: no answer");
        // The old owner refuses the shard at an epoch it has held.
        let refused = carry_out(&s, 0, prepare(2, 1)).expect("an answer");
        assert_eq!((pb::Step::try_from(refused.step), refused.held_epoch), (Ok(pb::Step::Refused), Some(1)));
        assert_eq!(step(carry_out(&s, 0, prepare(9, 1))), Some(pb::Step::Refused), "out of range");
        // DROP forgets only what is not newer.
        assert_eq!(
            step(carry_out(&s, 1, pb::command::Kind::Drop(assignment(2, 1)))),
            Some(pb::Step::Dropped)
        );
        assert!(s.workers[1].holdings.lock().held.contains_key(&2));
        assert_eq!(
            step(carry_out(&s, 1, pb::command::Kind::Drop(assignment(2, 2)))),
            Some(pb::Step::Dropped)
        );
        assert!(!s.workers[1].holdings.lock().held.contains_key(&2));
    }

    /// Activating a shard that another worker still holds active within its lease is caught.
    #[test]
    fn a_second_active_owner_is_a_violation_unless_the_first_lease_ran_out() {
        let s = shared(3, 4);
        for w in [0, 1] {
            carry_out(&s, w, prepare(1, 1 + w as u64));
            carry_out(&s, w, activate(1, 1 + w as u64));
        }
        let violations = s.ownership.violations.lock().clone();
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].contains("shard 1 activated on lw-1"), "{violations:?}");
        // Worker 1's lease ran out by its own clock: it no longer acts, so worker 2 may.
        s.workers[1].lease_deadline.store(0, Ordering::Relaxed);
        carry_out(&s, 2, prepare(1, 3));
        carry_out(&s, 2, activate(1, 3));
        assert_eq!(s.ownership.violations.lock().len(), 1);
        // A worker past its lease does not activate.
        assert_eq!(carry_out(&s, 1, prepare(3, 1)).map(|a| a.step), Some(pb::Step::Prepared.into()));
        assert_eq!(carry_out(&s, 1, activate(3, 1)), None);
    }

    #[test]
    fn synthetic_loads_are_the_shards_own_and_vary() {
        let loads = synthetic_loads(4096, 7);
        assert_eq!(loads, synthetic_loads(4096, 7));
        let (min, max) = loads.iter().fold((f64::MAX, 0.0f64), |(lo, hi), l| (lo.min(*l), hi.max(*l)));
        assert!(min >= 0.5 && max < 1.5 && max - min > 0.9, "{min}..{max}");
    }
}
