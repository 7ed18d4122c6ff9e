//! One conformance suite, run on both coordination stores: the Kubernetes API (against the sim
//! cluster) and etcd (a real etcd 3.5 process). Each test starts its own backend on free ports.

use std::time::{Duration, Instant};

use batchfleet_coordinator::ids::WorkerId;
use batchfleet_coordinator::store::etcd::EtcdStore;
use batchfleet_coordinator::store::kubernetes::KubernetesStore;
use batchfleet_coordinator::store::observer::{Liveness, LivenessObserver};
use batchfleet_coordinator::store::{Candidate, CoordinationStore, ShardMapRecord, ShardRecord, StoreError};
use batchfleet_sim::{SimCluster, SimConfig};

mod common;

// ---- backends -------------------------------------------------------------------------------

use common::etcd::{Etcd, start_etcd};

async fn etcd_store(etcd: &Etcd) -> EtcdStore {
    EtcdStore::connect(std::slice::from_ref(&etcd.endpoint), "/batchfleet/").await.expect("etcd store")
}

async fn start_sim() -> SimCluster {
    SimCluster::start(SimConfig { nodes: 0, kubelet: false, ..SimConfig::default() })
        .await
        .expect("sim starts")
}

fn kube_store(sim: &SimCluster) -> KubernetesStore {
    let config = kube::Config::new(sim.url().parse().expect("url"));
    KubernetesStore::new(kube::Client::try_from(config).expect("client"), "default")
}

/// Runs one conformance case on both stores, each with two independent handles (two processes'
/// views of one backend).
macro_rules! conformance {
    ($case:ident) => {
        mod $case {
            #[tokio::test]
            async fn kubernetes() {
                let sim = super::start_sim().await;
                super::$case(super::kube_store(&sim), super::kube_store(&sim)).await;
            }

            #[tokio::test]
            async fn etcd() {
                let etcd = super::start_etcd().await;
                super::$case(super::etcd_store(&etcd).await, super::etcd_store(&etcd).await).await;
            }
        }
    };
}

conformance!(one_leader_at_a_time_and_a_lapsed_lease_is_taken_over);
conformance!(a_resigned_leader_is_replaced_at_once);
conformance!(worker_leases_show_every_renewal);
conformance!(a_worker_record_deleted_behind_its_back_is_reported_lost_once);
conformance!(shard_map_writes_are_conditional_on_the_revision);
conformance!(a_worker_that_stops_renewing_is_judged_expired_by_the_observer);

// ---- the cases ------------------------------------------------------------------------------

async fn one_leader_at_a_time_and_a_lapsed_lease_is_taken_over(
    a: impl CoordinationStore,
    b: impl CoordinationStore,
) {
    let lease = Duration::from_secs(3);
    let candidate_a = Candidate { id: "coordinator-a".into(), address: "http://10.0.0.1:7400".into() };
    let candidate_b = Candidate { id: "coordinator-b".into(), address: "http://10.0.0.2:7400".into() };
    let first = a.campaign(&candidate_a, lease).await.expect("a campaigns");
    assert!(first.is_leader, "the first candidate takes the free lease");
    let other = b.campaign(&candidate_b, lease).await.expect("b campaigns");
    assert!(!other.is_leader);
    assert_eq!(other.holder.as_deref(), Some("coordinator-a"));
    assert_eq!(
        other.holder_address.as_deref(),
        Some("http://10.0.0.1:7400"),
        "a standby learns where the leader is"
    );

    // While a renews, b never leads.
    let until = Instant::now() + lease + Duration::from_secs(1);
    while Instant::now() < until {
        assert!(a.campaign(&"coordinator-a".into(), lease).await.expect("renew").is_leader);
        assert!(
            !b.campaign(&"coordinator-b".into(), lease).await.expect("b tries").is_leader,
            "b took a held lease"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // a stops renewing: b takes over, but not before the lease could have lapsed.
    let stopped = Instant::now();
    let took_over = batchfleet_sim::testing::wait_until("b to take over", lease * 4, || async {
        b.campaign(&candidate_b, lease).await.expect("b tries").is_leader.then(Instant::now)
    })
    .await;
    assert!(
        took_over - stopped >= lease - Duration::from_millis(600),
        "taken over after {:?}",
        took_over - stopped
    );
    let back = a.campaign(&"coordinator-a".into(), lease).await.expect("a tries again");
    assert!(!back.is_leader, "the old leader does not win back a lease it let lapse");
    assert_eq!(back.holder.as_deref(), Some("coordinator-b"));
    assert_eq!(
        back.holder_address.as_deref(),
        Some("http://10.0.0.2:7400"),
        "the new holder's address replaced the old"
    );
}

async fn a_resigned_leader_is_replaced_at_once(a: impl CoordinationStore, b: impl CoordinationStore) {
    let lease = Duration::from_secs(30);
    assert!(a.campaign(&"coordinator-a".into(), lease).await.expect("a").is_leader);
    b.resign("coordinator-b").await.expect("resigning a lease one does not hold is a no-op");
    assert!(!b.campaign(&"coordinator-b".into(), lease).await.expect("b").is_leader);
    a.resign("coordinator-a").await.expect("a resigns");
    let next = b.campaign(&"coordinator-b".into(), lease).await.expect("b");
    assert!(next.is_leader, "a resigned lease is free at once: {next:?}");
}

/// A renewal changes the record, or (etcd) extends the lease the store expires the record by;
/// either way the observer can tell a renewing worker from a silent one.
async fn worker_leases_show_every_renewal(a: impl CoordinationStore, b: impl CoordinationStore) {
    let (w1, w2) = (WorkerId("worker-1".into()), WorkerId("worker-2".into()));
    let ttl = Duration::from_secs(10);
    a.renew_worker(&w1, ttl).await.expect("w1");
    a.renew_worker(&w2, ttl).await.expect("w2");
    let mut seen = b.workers().await.expect("list");
    seen.sort_by(|x, y| x.worker.cmp(&y.worker));
    assert_eq!(seen.iter().map(|l| l.worker.0.as_str()).collect::<Vec<_>>(), ["worker-1", "worker-2"]);
    assert!(seen.iter().all(|l| l.ttl == ttl), "{seen:?}");

    a.renew_worker(&w1, ttl).await.expect("w1 again");
    let again = b.workers().await.expect("list");
    let renewal = |list: &[batchfleet_coordinator::store::WorkerLease], w: &WorkerId| {
        list.iter().find(|l| &l.worker == w).map(|l| l.renewal.clone()).expect("present")
    };
    let in_store = again.iter().all(|l| l.expires_in_store);
    assert!(
        in_store || renewal(&seen, &w1) != renewal(&again, &w1),
        "a renewal changes a record the store does not expire itself"
    );
    assert_eq!(renewal(&seen, &w2), renewal(&again, &w2), "a worker that did not renew did not change");

    a.remove_worker(&w2).await.expect("remove");
    a.remove_worker(&w2).await.expect("removing twice is fine");
    let left = b.workers().await.expect("list");
    assert_eq!(left.iter().map(|l| l.worker.0.as_str()).collect::<Vec<_>>(), ["worker-1"]);
}

/// The coordinator frees the shards of a worker whose record vanished (after the margin): the
/// worker must hear of it at its next renewal, not recreate the record and carry on.
async fn a_worker_record_deleted_behind_its_back_is_reported_lost_once(
    a: impl CoordinationStore,
    b: impl CoordinationStore,
) {
    let w = WorkerId("worker-1".into());
    let ttl = Duration::from_secs(10);
    a.renew_worker(&w, ttl).await.expect("first renewal creates the record");
    a.renew_worker(&w, ttl).await.expect("renewed");
    b.remove_worker(&w).await.expect("deleted by someone else");
    let lost = a.renew_worker(&w, ttl).await;
    assert!(matches!(lost, Err(StoreError::RecordLost)), "{lost:?}");
    a.renew_worker(&w, ttl).await.expect("the next renewal makes a new record");
    let seen = b.workers().await.expect("list");
    assert_eq!(seen.iter().map(|l| l.worker.0.as_str()).collect::<Vec<_>>(), ["worker-1"]);
}

async fn shard_map_writes_are_conditional_on_the_revision(
    a: impl CoordinationStore,
    b: impl CoordinationStore,
) {
    assert_eq!(a.load_shard_map().await.expect("load"), None, "no map before the first start");
    let mut map = ShardMapRecord { shard_count: 4, ..ShardMapRecord::default() };
    map.shards.insert(0, ShardRecord { owner: Some("worker-1".into()), epoch: 1, moving_to: None });
    let first = a.store_shard_map(&map, None).await.expect("create");
    assert_eq!(b.store_shard_map(&map, None).await, Err(StoreError::Conflict), "created once");

    let (read, rev) = b.load_shard_map().await.expect("load").expect("present");
    assert_eq!(read, map);
    assert_eq!(rev, first);

    let mut moved = read.clone();
    moved.shards.insert(0, ShardRecord { owner: Some("worker-2".into()), epoch: 2, moving_to: None });
    // Pins and drains are the operator's, kept by the map through every store.
    moved.pins.insert(1, "worker-2".into());
    moved.draining.insert("worker-1".into());
    let second = b.store_shard_map(&moved, Some(&rev)).await.expect("update at the read revision");
    assert_ne!(second, first);
    let mut stale = read;
    stale.pins.insert(3, "worker-1".into());
    assert_eq!(
        a.store_shard_map(&stale, Some(&first)).await,
        Err(StoreError::Conflict),
        "a stale writer loses"
    );
    assert_eq!(a.load_shard_map().await.expect("load"), Some((moved, second)));
}

async fn a_worker_that_stops_renewing_is_judged_expired_by_the_observer(
    a: impl CoordinationStore,
    b: impl CoordinationStore,
) {
    let (alive, silent) = (WorkerId("worker-alive".into()), WorkerId("worker-silent".into()));
    let ttl = Duration::from_secs(2);
    let margin = Duration::from_millis(500);
    a.renew_worker(&alive, ttl).await.expect("alive");
    a.renew_worker(&silent, ttl).await.expect("silent");
    let mut observer = LivenessObserver::default();
    let start = Instant::now();
    let deadline = start + ttl * 5;
    let gone_at = loop {
        a.renew_worker(&alive, ttl).await.expect("renew");
        let now = Instant::now();
        observer.observe(&b.workers().await.expect("list"), now);
        assert!(
            matches!(observer.liveness(&alive, now, margin), Some(Liveness::Alive { .. })),
            "a renewing worker stays alive"
        );
        // etcd removes an expired worker's key itself; Kubernetes keeps the stale Lease.
        if matches!(observer.liveness(&silent, now, margin), Some(Liveness::Expired) | None) {
            break now;
        }
        assert!(now < deadline, "the silent worker did not expire within {:?}", ttl * 5);
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(gone_at - start >= ttl, "expired after {:?}, before its TTL", gone_at - start);
}
