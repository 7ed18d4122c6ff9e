//! A worker whose process was paused past its lease's TTL stops every shard when it resumes,
//! before its next renewal could extend the lease: the coordinator may have given the shards
//! away meanwhile. The pause is real: the test blocks the only thread of its runtime, which runs
//! the lease loop (and the sim), as SIGSTOP would.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use batchfleet_sim::testing::wait_until;
use batchfleet_sim::{SimCluster, SimConfig};
use batchfleet_store::ids::WorkerId;
use batchfleet_store::kubernetes::KubernetesStore;
use batchfleet_worker::client::{self, ClientLimits};
use batchfleet_worker::fleet::lease;
use batchfleet_worker::runtime::shard::ShardTable;
use batchfleet_worker::shards::ShardSpace;
use batchfleet_worker::standalone::{self, WorkerOptions};
use kube::api::{Api, PostParams};
use serde_json::json;

const SHARDS: u32 = 4;
const TTL: Duration = Duration::from_millis(900);

#[tokio::test]
async fn a_lease_that_lapsed_during_a_pause_is_fenced_before_it_is_renewed() {
    let sim = SimCluster::start(SimConfig { nodes: 1, ..SimConfig::default() }).await.expect("sim starts");
    let config = client::with_user_agent(
        kube::Config::new(sim.url().parse().unwrap()),
        &client::user_agent("w-paused"),
    )
    .unwrap();
    let kube_client = client::from_config(config, ClientLimits::UNLIMITED).unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(kube_client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "fleet"}})).unwrap(),
        )
        .await
        .expect("namespace");
    let opts = WorkerOptions {
        metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        worker_id: "w-paused".into(),
        shards: SHARDS,
        ..WorkerOptions::default()
    };
    let table = ShardTable::new(ShardSpace::new(SHARDS).unwrap());
    let worker =
        standalone::start_on_shards(kube_client.clone(), opts, table, None).await.expect("worker starts");
    let runtime = worker.runtime.clone();

    let store = Arc::new(KubernetesStore::new(kube_client, "fleet"));
    let (renewed_tx, mut renewed) = tokio::sync::watch::channel(lease::LeaseState::default());
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    tokio::spawn(lease::keep(store, WorkerId::from("w-paused"), TTL, runtime.clone(), renewed_tx, stop));
    tokio::time::timeout(Duration::from_secs(10), renewed.wait_for(|r| r.renewed))
        .await
        .expect("renewed")
        .unwrap();
    runtime.prepare(0, 1).unwrap();
    runtime.activate(0, 1, 0).await.unwrap();
    assert!(runtime.table().held().contains(&0));

    // The pause: nothing on this runtime runs for twice the TTL.
    std::thread::sleep(TTL * 2);

    wait_until("the paused worker drops its shard", Duration::from_secs(5), || {
        let held = runtime.table().held();
        async move { held.is_empty().then_some(()) }
    })
    .await;
    // It renews again afterwards (a fresh lease, with no shards), and says so to its session.
    tokio::time::timeout(Duration::from_secs(5), renewed.wait_for(|r| r.renewed))
        .await
        .expect("renewed again")
        .unwrap();
    assert_eq!(renewed.borrow().lapses, 1, "the lapse is told to the session, which registers again");
    assert!(runtime.table().held().is_empty(), "a fresh lease brings no shard back");
}
