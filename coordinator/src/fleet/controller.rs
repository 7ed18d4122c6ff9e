//! The leader's loop: loads the shard map when leadership is won, observes the workers' leases,
//! steps the fleet state, stores the map when a step changed it and only then sends the step's
//! commands. A failed store write ends the term's state: it is reloaded, and the sessions are
//! closed so that workers register again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use batchfleet_proto::v1 as pb;
use tokio::sync::watch;

use super::hub::Delivery;
use super::state::{Command, FleetConfig, FleetState, StepInput, WorkerHealth};
use super::{FleetShared, WorkerSeen};
use crate::handover::Barrier;
use crate::ids::WorkerId;
use crate::store::observer::{Liveness, LivenessObserver};
use crate::store::{CoordinationStore, Revision, ShardMapRecord};

#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// S for a fleet created now; a stored map keeps its own.
    pub shard_count: u32,
    /// How long past a worker's lease expiry its shards stay its own.
    pub lease_margin: Duration,
    /// Steps happen at least this often, and whenever a worker reports something.
    pub period: Duration,
    pub fleet: FleetConfig,
    pub metrics: Option<super::metrics::FleetMetrics>,
}

pub async fn run<S: CoordinationStore + 'static>(
    store: Arc<S>,
    shared: Arc<FleetShared>,
    config: ControllerConfig,
    mut stop: watch::Receiver<bool>,
) {
    let mut leadership = shared.leadership.clone();
    while !*stop.borrow() {
        if !leadership.is_leader() {
            tokio::select! {
                _ = leadership.until_leader() => {}
                _ = stop.changed() => {}
            }
            continue;
        }
        if let Err(e) = lead(&*store, &shared, &config, &mut stop).await {
            tracing::warn!(error = %e, "fleet state dropped; reloading the shard map");
            tokio::time::sleep(config.period).await;
        }
        *shared.state.lock() = None;
        shared.hub.clear();
        if let Some(metrics) = &config.metrics {
            // A standby must not report the old term's unowned shards: alerts sum over coordinators.
            metrics.not_leading();
        }
    }
}

/// One term of leadership, until it ends or the store refuses a write.
async fn lead<S: CoordinationStore>(
    store: &S,
    shared: &FleetShared,
    config: &ControllerConfig,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), crate::store::StoreError> {
    let (map, mut revision) = load_or_create(store, config.shard_count).await?;
    tracing::info!(shards = map.shard_count, revision = %revision.0, "leading the fleet");
    *shared.state.lock() = Some(FleetState::new(map, config.fleet.clone(), Instant::now()));
    let mut observer = LivenessObserver::default();
    // Workers register with a new leader within moments: a registration stepped before the
    // leases were read would find its worker without one, judge it gone and free its shards.
    observer.observe(&store.workers().await?, Instant::now());
    let mut ticker = tokio::time::interval(config.period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Leases are listed once a period; reports in between are stepped on what was seen,
        // gathered for a moment so that a burst of acknowledgements makes one step.
        let refresh = tokio::select! {
            _ = ticker.tick() => true,
            _ = shared.hub.arrived.notified() => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                false
            }
            _ = stop.changed() => return Ok(()),
        };
        if !shared.leadership.is_leader() || *stop.borrow() {
            return Ok(());
        }
        if refresh {
            let leases = store.workers().await?;
            observer.observe(&leases, Instant::now());
        }
        let now = Instant::now();
        let input = step_input(shared, &observer, config.lease_margin, now);
        let (output, map) = {
            let mut guard = shared.state.lock();
            let Some(state) = guard.as_mut() else { return Ok(()) };
            let stepping = Instant::now();
            let output = state.step(&input);
            let took = stepping.elapsed();
            if let Some(metrics) = &config.metrics {
                metrics.stepped(took);
                for (result, took) in state.take_finished() {
                    metrics.moved(result, (result == "done").then_some(took.as_secs_f64()));
                }
                metrics.observe_gaps(&state.take_gap_observations());
                metrics.observe_activate_times(&shared.hub.take_activate_times());
                metrics.observe(state, &shared.workers.lock());
            }
            // The map is copied out of the lock only when it is to be stored: at rest a step
            // stores nothing, and copying thousands of owners five times a second adds up.
            let map = output.store.then(|| state.stored_map().clone());
            (output, map)
        };
        if let Some(map) = map {
            revision = store.store_shard_map(&map, Some(&revision)).await?;
        }
        for (worker, command) in output.sends {
            tracing::debug!(%worker, ?command, "command");
            if shared.hub.send(&worker, to_proto(command)) == Delivery::Overflowed {
                tracing::warn!(
                    %worker,
                    "the worker left its command stream unread past --session-command-queue: \
                     its session is cut, and it registers again"
                );
                if let Some(metrics) = &config.metrics {
                    metrics.session_overflowed();
                }
            }
        }
    }
}

async fn load_or_create<S: CoordinationStore>(
    store: &S,
    shard_count: u32,
) -> Result<(ShardMapRecord, Revision), crate::store::StoreError> {
    if let Some(found) = store.load_shard_map().await? {
        if found.0.shard_count != shard_count {
            tracing::warn!(
                stored = found.0.shard_count,
                flag = shard_count,
                "the stored shard map keeps its shard count"
            );
        }
        return Ok(found);
    }
    let map = ShardMapRecord { shard_count, ..ShardMapRecord::default() };
    let revision = store.store_shard_map(&map, None).await?;
    Ok((map, revision))
}

/// Each worker's health from its lease (as this observer saw it renewed) and its session.
fn step_input(
    shared: &FleetShared,
    observer: &LivenessObserver,
    margin: Duration,
    now: Instant,
) -> StepInput {
    let connected = shared.hub.connected();
    let mut seen = BTreeMap::new();
    for (worker, liveness) in observer.all(now, margin) {
        let (health, expires_in) = match liveness {
            Liveness::Alive { expires_in } if connected.contains(&worker) => {
                (WorkerHealth::Live, Some(expires_in))
            }
            Liveness::Alive { expires_in } => (WorkerHealth::Disconnected, Some(expires_in)),
            Liveness::Expiring => (WorkerHealth::Expiring, None),
            Liveness::Expired => (WorkerHealth::Gone, None),
        };
        seen.insert(worker, WorkerSeen { health, expires_in });
    }
    // A registered worker without a lease record has not started renewing (or stopped): it gets
    // nothing until its lease shows up.
    for worker in shared.hub.registered() {
        seen.entry(worker).or_insert(WorkerSeen { health: WorkerHealth::Gone, expires_in: None });
    }
    let workers = seen.iter().map(|(w, s)| (w.clone(), s.health)).collect();
    *shared.workers.lock() = seen;
    let inbox = shared.hub.take_inbox();
    StepInput {
        now: Some(now),
        workers,
        loads: shared.hub.loads(),
        registrations: inbox.registrations,
        acks: inbox.acks,
    }
}

fn assignment(shard: crate::ids::ShardId, epoch: u64) -> pb::ShardAssignment {
    pb::ShardAssignment { shard: shard.0, epoch }
}

pub fn to_proto(command: Command) -> pb::Command {
    use pb::command::Kind;
    let kind = match command {
        Command::Prepare { shard, epoch } => Kind::Prepare(assignment(shard, epoch)),
        Command::Revoke { shard, epoch } => Kind::Revoke(assignment(shard, epoch)),
        Command::Activate { shard, epoch, barrier } => Kind::Activate(pb::Activate {
            assignment: Some(assignment(shard, epoch)),
            min_resource_version: match barrier {
                Barrier::ResourceVersion(rv) => rv,
                // Empty: the worker reads the current resourceVersion with a consistent LIST.
                Barrier::ConsistentList => String::new(),
            },
        }),
        Command::Drop { shard, epoch } => Kind::Drop(assignment(shard, epoch)),
        Command::DrainComplete => Kind::DrainComplete(pb::DrainComplete {}),
    };
    pb::Command { kind: Some(kind) }
}

/// Whether `worker` is known to this leader (registered, or holding a lease).
pub fn is_known(shared: &FleetShared, worker: &WorkerId) -> bool {
    shared.workers.lock().contains_key(worker)
        || shared.state.lock().as_ref().is_some_and(|s| s.shards_by_owner().contains_key(worker))
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
