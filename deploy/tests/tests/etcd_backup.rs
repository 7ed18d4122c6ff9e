//! docs/operations.md's etcd backup and restore, run as written (the blocks marked
//! `<!-- etcd-test -->`) against a real etcd 3.5 and a fleet on the etcd store: back up, stop the
//! fleet, restore from the snapshot and from the map alone, start the fleet again.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use batchfleet_deploy_tests::{
    Etcd, Fleet, FleetSpec, Sim, etcd_tools, fleetctl, free_port, kubectl_ok, marked_blocks, root, start_etcd,
};
use batchfleet_sim::SimConfig;

/// `etcdctl ARGS…` against `endpoint`; its stdout, `None` when it fails.
fn etcdctl(endpoint: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(etcd_tools().join("etcdctl"))
        .env("ETCDCTL_ENDPOINTS", endpoint)
        .args(args)
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a doc block in `dir` with `env`, as an operator's shell would.
fn run_block(block: &str, dir: &Path, env: &[(&str, &str)]) {
    let path = format!("{}:{}", etcd_tools().display(), std::env::var("PATH").unwrap_or_default());
    let out = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", block])
        .current_dir(dir)
        .env("PATH", path)
        .envs(env.iter().copied())
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "this block failed ({}):\n{block}\n--- stdout:\n{}\n--- stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every shard's epoch, as fleetctl shows it.
fn epochs(admin: &str) -> BTreeMap<u64, u64> {
    let shards = fleetctl(admin, &["shards"]).expect("fleetctl shards");
    shards
        .as_array()
        .expect("a list")
        .iter()
        .map(|s| (s["shard"].as_u64().expect("shard"), s["epoch"].as_u64().expect("epoch")))
        .collect()
}

async fn fleet_on(sim: &Sim, etcd: &Etcd) -> Fleet {
    let store: Vec<String> =
        ["--store", "etcd", "--etcd-endpoints", &etcd.endpoint].map(String::from).to_vec();
    Fleet::start(
        sim,
        FleetSpec {
            namespace: "batchfleet",
            shards: 8,
            coordinators: &["fleet-coordinator-0"],
            workers: &["fleet-worker-0", "fleet-worker-1"],
            worker_args: store.clone(),
            coordinator_args: store,
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_etcd_backup_and_restore_how_to_works_as_written() {
    let runbook = std::fs::read_to_string(root().join("docs/operations.md")).expect("read the runbook");
    let [backup, restore_snapshot, put_map] = <[String; 3]>::try_from(marked_blocks(&runbook, "etcd-test"))
        .expect("three etcd-test blocks: backup, restore from the snapshot, put the map back");
    let work = tempfile::tempdir().expect("tempdir");
    let sim = Sim::start(SimConfig { nodes: 1, ..SimConfig::default() }).await;
    kubectl_ok(Some(&sim.kubeconfig()), &["create", "namespace", "batchfleet"]);

    let etcd = start_etcd(&work.path().join("etcd-a"), "etcd-a", free_port()).await;
    let fleet = fleet_on(&sim, &etcd).await;
    let before = epochs(&fleet.admin);
    assert_eq!(before.len(), 8);
    run_block(&backup, work.path(), &[("ETCDCTL_ENDPOINTS", &etcd.endpoint)]);
    let saved = std::fs::read_to_string(work.path().join("shard-map.json")).expect("shard-map.json");
    let map: serde_json::Value = serde_json::from_str(saved.trim()).expect("the map is JSON");
    assert!(map.to_string().contains("fleet-worker-"), "the map names its owners: {saved}");
    assert!(work.path().join("batchfleet-etcd.db").metadata().expect("the snapshot").len() > 0);
    // The fleet stops, then etcd is lost.
    drop(fleet);
    drop(etcd);

    // One way: a member recreated from the snapshot holds the map as it was.
    let peer = free_port();
    let peer_url = format!("http://127.0.0.1:{peer}");
    let initial_cluster = format!("etcd-0={peer_url}");
    run_block(
        &restore_snapshot,
        work.path(),
        &[("MEMBER", "etcd-0"), ("INITIAL_CLUSTER", &initial_cluster), ("PEER_URLS", &peer_url)],
    );
    let restored = start_etcd(&work.path().join("restored-etcd-0"), "etcd-0", peer).await;
    let value = etcdctl(&restored.endpoint, &["get", "/batchfleet/shard-map", "--print-value-only"]);
    assert_eq!(value.as_deref().map(str::trim), Some(saved.trim()), "the restored member holds the map");
    drop(restored);

    // The other: a fresh etcd, the map put back, and the fleet started again on it.
    let fresh = start_etcd(&work.path().join("etcd-b"), "etcd-b", free_port()).await;
    run_block(&put_map, work.path(), &[("ETCDCTL_ENDPOINTS", &fresh.endpoint)]);
    let mut fleet = fleet_on(&sim, &fresh).await;
    // The restarted workers hold nothing the restored map gives them: the leader places every
    // shard again, above its restored epoch, and it acts again.
    fleet
        .wait_for("every shard active above its restored epoch", Duration::from_secs(60), |fleet| {
            let after = epochs(&fleet.admin);
            let settled = fleet.settled_owners().is_some_and(|owners| owners.len() == before.len());
            std::future::ready(
                (settled && before.iter().all(|(shard, epoch)| after.get(shard) > Some(epoch))).then_some(()),
            )
        })
        .await;
}
