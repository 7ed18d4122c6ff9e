//! The coordinator's fleet metrics as an operator scrapes them: a real `fleet-coordinator` and two
//! `fleet-worker`s against the sim cluster. Every move but a new fleet's first placements is a
//! hand-over with a gap; an operator's move adds one gap that lies within the move's duration,
//! holds the new owner's own ACTIVATE time and is counted in the unowned time; once placement
//! settles no shard is without an acting owner.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use batchfleet_proto::v1 as pb;
use batchfleet_proto::v1::fleet_admin_client::FleetAdminClient;
use batchfleet_sim::testing::wait_until;
use batchfleet_sim::{SimCluster, SimConfig};
use tokio::process::{Child, Command};

mod common;
use common::{free_port, scrape};

const SHARDS: u32 = 8;

/// The worker binary sits next to the coordinator's; built here when a `-p` run did not build it.
fn worker_binary() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_fleet-coordinator")).with_file_name("fleet-worker");
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-p", "batchfleet-worker", "--bin", "fleet-worker"])
            .status()
            .expect("cargo build runs");
        assert!(status.success(), "building fleet-worker");
    }
    path
}

fn spawn_worker(binary: &Path, kubeconfig: &Path, coordinator: &str, id: &str) -> Child {
    Command::new(binary)
        .arg("--insecure")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--coordinator", coordinator, "--worker-id", id, "--metrics-addr", "127.0.0.1:0"])
        .args(["--shards", &SHARDS.to_string(), "--lease-duration", "5s"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("fleet-worker starts")
}

/// Every sample of the text format by its series (`name` or `name{labels}`).
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

struct Scrape(BTreeMap<String, f64>);

impl Scrape {
    /// A series that must be there (a metric registered, or a label seen).
    fn get(&self, series: &str) -> f64 {
        *self.0.get(series).unwrap_or_else(|| panic!("{series} missing from /metrics: {:#?}", self.0))
    }

    /// A labelled counter's series, which appears only once counted.
    fn counted(&self, series: &str) -> f64 {
        self.0.get(series).copied().unwrap_or(0.0)
    }

    fn gaps(&self) -> f64 {
        self.get("fleet_shard_handover_gap_seconds_count")
    }

    fn done(&self) -> f64 {
        self.counted("fleet_shard_moves_total{result=\"done\"}")
    }
}

async fn metrics(addr: &str) -> Option<Scrape> {
    Some(Scrape(samples(&scrape(addr).await?)))
}

/// The first scrape `ready` accepts, within 10 s (the leader steps every 200 ms); a timeout shows
/// the fleet's series as last scraped.
async fn metrics_when(addr: &str, what: &str, ready: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Duration::from_secs(10);
    let end = tokio::time::Instant::now() + deadline;
    let mut last = None;
    loop {
        if let Some(m) = metrics(addr).await {
            if ready(&m) {
                return m;
            }
            last = Some(m.0);
        }
        let fleet: Option<BTreeMap<&String, &f64>> =
            last.as_ref().map(|l| l.iter().filter(|(k, _)| k.starts_with("fleet_")).collect());
        assert!(
            tokio::time::Instant::now() < end,
            "timed out after {deadline:?} waiting for {what}; last scraped: {fleet:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn admin(url: &str) -> Option<FleetAdminClient<tonic::transport::Channel>> {
    FleetAdminClient::connect(url.to_string()).await.ok()
}

/// Every shard's (owner, epoch) once every shard is active, no move is in progress and both
/// workers own some.
async fn settled(url: &str) -> Option<BTreeMap<u32, (String, u64)>> {
    let mut rpc = admin(url).await?;
    let status = rpc.status(pb::StatusRequest {}).await.ok()?.into_inner();
    let shards = rpc.shards(pb::ShardsRequest {}).await.ok()?.into_inner().shards;
    let placed = status.moves_in_progress == 0
        && shards.len() == SHARDS as usize
        && shards.iter().all(|s| s.state == "active")
        && ["w-0", "w-1"].iter().all(|w| shards.iter().any(|s| s.owner == *w));
    placed.then(|| shards.into_iter().map(|s| (s.shard, (s.owner, s.epoch))).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_report_each_hand_over_gap_and_the_unowned_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = SimCluster::start(SimConfig { nodes: 1, ..SimConfig::default() }).await.expect("sim");
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let listen = format!("127.0.0.1:{}", free_port());
    let url = format!("http://{listen}");
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let _coordinator = Command::new(env!("CARGO_BIN_EXE_fleet-coordinator"))
        .arg("--insecure")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--coordinator-id", "coordinator-0", "--listen", &listen, "--metrics-addr", &metrics_addr])
        .args(["--shards", &SHARDS.to_string(), "--worker-lease-margin", "1s"])
        .args(["--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms"])
        .args(["--leader-elect-retry-period", "200ms"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("fleet-coordinator starts");
    let binary = worker_binary();
    let _workers: Vec<Child> =
        ["w-0", "w-1"].iter().map(|id| spawn_worker(&binary, &kubeconfig, &url, id)).collect();

    let placed =
        wait_until("both workers own shards, none moving", Duration::from_secs(90), || settled(&url)).await;
    // Each first placement of the new fleet's shards is a move but no hand-over (nobody owned the
    // shard); every later move (filling up a worker that registered late) is one.
    let before = metrics_when(&metrics_addr, "the metrics caught up with the placement", |m| {
        m.get("fleet_coordinator_leader") == 1.0
            && m.get("fleet_shards_unowned") == 0.0
            && m.gaps() == m.done() - f64::from(SHARDS)
            // Every move ended in an ACTIVATE the new owner timed and reported.
            && m.get("fleet_shard_activate_seconds_count") == m.done()
    })
    .await;
    assert!(
        before.get("fleet_shard_unowned_seconds_total") > 0.0,
        "a new fleet's shards had no owner until placed"
    );

    // An operator's move: one more hand-over, whose gap lies within the move.
    let (&shard, (_, epoch)) = placed.iter().find(|(_, (owner, _))| owner == "w-0").expect("a shard on w-0");
    admin(&url)
        .await
        .expect("admin API")
        .r#move(pb::ShardToWorkerRequest { shard, worker: "w-1".into() })
        .await
        .expect("move");
    wait_until("the move is done", Duration::from_secs(60), || async {
        settled(&url).await.filter(|p| p.get(&shard) == Some(&("w-1".to_string(), epoch + 1)))
    })
    .await;
    let after =
        metrics_when(&metrics_addr, "the metrics saw the move", |m| m.done() == before.done() + 1.0).await;
    let delta = |series: &str| after.get(series) - before.get(series);
    assert_eq!(delta("fleet_shard_handover_gap_seconds_count"), 1.0);
    let gap = delta("fleet_shard_handover_gap_seconds_sum");
    let took = delta("fleet_shard_move_duration_seconds_sum");
    assert!(gap > 0.0 && gap <= took, "gap {gap}s within the move's {took}s");
    assert_eq!(delta("fleet_shard_activate_seconds_count"), 1.0);
    let activate = delta("fleet_shard_activate_seconds_sum");
    assert!(
        activate > 0.0 && activate <= gap,
        "the worker's ACTIVATE ({activate}s) lies within the gap ({gap}s)"
    );
    let unowned = delta("fleet_shard_unowned_seconds_total");
    assert!((unowned - gap).abs() < 0.001, "the only unowned time is the gap: {unowned}s against {gap}s");
    assert_eq!(after.get("fleet_shards_unowned"), 0.0);
}
