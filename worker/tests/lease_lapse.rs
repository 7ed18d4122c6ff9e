//! The worker's liveness lease when the worker is paused past it (SIGSTOP, a stalled host): on
//! resuming it must drop every shard before anything renews the lease, even when that renewal
//! succeeds at once — the coordinator may have given the shards away meanwhile, and a renewal
//! that moved the write deadline forward would let this worker write for them again. It then
//! tells its session to register again (a lapse is counted).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use batchfleet_sim::testing::wait_until;
use batchfleet_sim::{SimCluster, SimConfig};
use batchfleet_store::ids::WorkerId;
use batchfleet_store::{
    Candidate, CoordinationStore, Leadership, Result, Revision, ShardMapRecord, WorkerLease,
};
use batchfleet_worker::client::{self, ClientLimits};
use batchfleet_worker::fleet::lease::{self, LeaseState};
use batchfleet_worker::runtime::shard::ShardTable;
use batchfleet_worker::shards::ShardSpace;
use batchfleet_worker::start::{self, WorkerOptions};
use tokio::sync::watch;

/// A store whose worker renewals always succeed at once; nothing else is used.
struct AlwaysRenews;

impl CoordinationStore for AlwaysRenews {
    fn kind(&self) -> &'static str {
        "test"
    }

    async fn campaign(&self, _: &Candidate, _: Duration) -> Result<Leadership> {
        unimplemented!("the worker does not campaign")
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
        Ok(Vec::new())
    }

    async fn load_shard_map(&self) -> Result<Option<(ShardMapRecord, Revision)>> {
        Ok(None)
    }

    async fn store_shard_map(&self, _: &ShardMapRecord, _: Option<&Revision>) -> Result<Revision> {
        unimplemented!("the worker does not store the map")
    }
}

// One thread: blocking it stops the lease keeper as SIGSTOP stops the process.
#[tokio::test(flavor = "current_thread")]
async fn a_worker_paused_past_its_lease_drops_every_shard_before_renewing() {
    let sim = SimCluster::start(SimConfig { nodes: 0, kubelet: false, ..SimConfig::default() })
        .await
        .expect("sim starts");
    let config = client::with_user_agent(
        kube::Config::new(sim.url().parse().expect("url")),
        &client::user_agent("w-paused"),
    )
    .expect("config");
    let kube = client::from_config(config, ClientLimits::UNLIMITED).expect("client");
    let opts = WorkerOptions {
        metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        worker_id: "w-paused".into(),
        shards: 4,
        ..WorkerOptions::default()
    };
    let table = ShardTable::new(ShardSpace::new(4).expect("space"));
    let worker = start::start_on_shards(kube, opts, table, None).await.expect("worker starts");
    let runtime = worker.runtime.clone();
    runtime.prepare(0, 1).expect("prepare");
    runtime.activate(0, 1, 0).await.expect("activate");

    let ttl = Duration::from_millis(900);
    let (state_tx, mut state) = watch::channel(LeaseState::default());
    let (_stop_tx, stop) = watch::channel(false);
    let keeper = tokio::spawn(lease::keep(
        Arc::new(AlwaysRenews),
        WorkerId("w-paused".into()),
        ttl,
        runtime.clone(),
        state_tx,
        stop,
    ));
    state.wait_for(|s| s.renewed).await.expect("renewed");
    assert_eq!(runtime.table().held(), std::collections::BTreeSet::from([0]));

    // Paused for twice the lease, while the keeper sleeps between renewals.
    state.borrow_and_update();
    std::thread::sleep(ttl * 2);

    // Resumed: the keeper's next renewal succeeds at once, but the lease had lapsed: what it
    // does first is drop every shard and count the lapse.
    state.changed().await.expect("the keeper runs");
    let first = *state.borrow_and_update();
    assert!(runtime.table().held().is_empty(), "a shard outlived the lapsed lease: {first:?}");
    assert_eq!(first.lapses, 1, "the lapse is told to the session: {first:?}");
    let renewed = wait_until("renewed again", Duration::from_secs(5), || async {
        let s = *state.borrow();
        s.renewed.then_some(s)
    })
    .await;
    assert_eq!(renewed.lapses, 1);
    // Renewed, but a write queued before the lapse still must not go out: writes are held
    // until the coordinator activates a shard here again.
    assert!(!runtime.table().lease_deadline().writable(), "writes reopened by a renewal after a lapse");
    runtime.table().release_writes();
    assert!(runtime.table().lease_deadline().writable());
    keeper.abort();
}
