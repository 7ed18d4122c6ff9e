//! The controller's first steps of a term against an in-memory store: what a new leader does
//! with registrations that reached it before it had read the workers' leases.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex as PlainMutex;

use super::*;
use crate::fleet::state::{HeldPhase, HeldShard};
use crate::ids::ShardId;
use crate::leader::{self, ElectionTiming};
use crate::store::{Candidate, Leadership, Result, ShardRecord, WorkerLease};

/// Leads at once; holds the map in memory and counts the writes to it.
struct MemoryStore {
    map: PlainMutex<ShardMapRecord>,
    writes: AtomicUsize,
    workers: Vec<WorkerLease>,
}

impl CoordinationStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn campaign(&self, candidate: &Candidate, _: Duration) -> Result<Leadership> {
        Ok(Leadership::ours(candidate))
    }

    async fn resign(&self, _: &str) -> Result<()> {
        Ok(())
    }

    async fn renew_worker(&self, _: &WorkerId, _: Duration) -> Result<()> {
        Ok(())
    }

    async fn remove_worker(&self, _: &WorkerId) -> Result<()> {
        Ok(())
    }

    async fn workers(&self) -> Result<Vec<WorkerLease>> {
        Ok(self.workers.clone())
    }

    async fn load_shard_map(&self) -> Result<Option<(ShardMapRecord, Revision)>> {
        Ok(Some((self.map.lock().clone(), Revision("1".into()))))
    }

    async fn store_shard_map(&self, map: &ShardMapRecord, _: Option<&Revision>) -> Result<Revision> {
        *self.map.lock() = map.clone();
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 2;
        Ok(Revision(n.to_string()))
    }
}

const SHARDS: u32 = 8;

fn owner_of(shard: u32) -> &'static str {
    if shard.is_multiple_of(2) { "w-a" } else { "w-b" }
}

fn settled_map() -> ShardMapRecord {
    ShardMapRecord {
        shard_count: SHARDS,
        shards: (0..SHARDS)
            .map(|s| (s, ShardRecord { owner: Some(owner_of(s).into()), epoch: 1, moving_to: None }))
            .collect(),
        ..ShardMapRecord::default()
    }
}

fn held_by(worker: &str) -> Vec<HeldShard> {
    (0..SHARDS)
        .filter(|s| owner_of(*s) == worker)
        .map(|s| HeldShard { shard: ShardId(s), epoch: 1, phase: HeldPhase::Active })
        .collect()
}

/// Workers reconnect to a new leader within moments of the old one dying, so their
/// registrations are often waiting before its first step. Stepped before the leases were read,
/// each would find its worker without a lease, judge it gone and free every shard it reported:
/// a fail-over that re-placed the whole map. The race was one of the first select's branches,
/// so the term starts twenty times.
#[tokio::test]
async fn registrations_waiting_for_a_new_leader_keep_their_shards() {
    for term in 0..20 {
        let workers = ["w-a", "w-b"]
            .map(|w| WorkerLease {
                worker: WorkerId(w.into()),
                renewal: "1".into(),
                ttl: Duration::from_secs(10),
                expires_in_store: false,
            })
            .to_vec();
        let store = Arc::new(MemoryStore {
            map: PlainMutex::new(settled_map()),
            writes: AtomicUsize::new(0),
            workers,
        });
        let (stop_tx, stop) = watch::channel(false);
        let timing = ElectionTiming {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        };
        let (mut leadership, election) =
            leader::start(store.clone(), Candidate::from("coordinator-1"), timing, stop.clone());
        leadership.until_leader().await;
        let shared = Arc::new(FleetShared::new(
            "coordinator-1".into(),
            "memory",
            leadership,
            Duration::from_secs(2),
            super::super::hub::DEFAULT_COMMAND_QUEUE,
        ));
        let mut streams = Vec::new();
        for worker in ["w-a", "w-b"] {
            let session = shared.hub.register(WorkerId(worker.into()), held_by(worker), &[]);
            streams.push(shared.hub.open_stream(session).expect("a stream"));
        }
        let config = ControllerConfig {
            shard_count: SHARDS,
            lease_margin: Duration::from_secs(2),
            period: Duration::from_millis(50),
            fleet: FleetConfig::default(),
            metrics: None,
        };
        let controller = tokio::spawn(run(store.clone(), shared.clone(), config, stop.clone()));
        // Registered and stepped: the state answers for both workers' shards, and a few more
        // periods pass for any placement to show.
        let deadline = Instant::now() + Duration::from_secs(10);
        while shared.workers.lock().values().filter(|s| s.health == WorkerHealth::Live).count() != 2 {
            assert!(Instant::now() < deadline, "term {term}: the workers never showed as live");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        stop_tx.send_replace(true);
        controller.await.expect("the controller ends");
        election.await.expect("the election ends");

        assert_eq!(*store.map.lock(), settled_map(), "term {term}: the fail-over changed the map");
        assert_eq!(store.writes.load(Ordering::SeqCst), 0, "term {term}: the map was written");
        for (worker, stream) in ["w-a", "w-b"].iter().zip(&mut streams) {
            let sent: Vec<_> = std::iter::from_fn(|| stream.try_recv().ok()).collect();
            assert!(sent.is_empty(), "term {term}: {worker} was told {sent:?}");
        }
    }
}
