//! `loadtest run` of a scaled-down crash-recovery scenario end to end, on each store (`--store`):
//! four workers, three of them SIGKILLed and started again under their id; each kill's shards
//! probed, their recoveries reported as a distribution and a plot, and every audit passed. The
//! recovery time itself is not held to the goal here (a busy CI machine); `loadtest run
//! crash-recovery` checks it by hand.

mod common;

use batchfleet_shards::ShardSpace;

const SCALED_DOWN: &str = r#"
description: a scaled-down crash-recovery
duration: 36s
settle: 120s
fleet: {workers: 4, shards: 16, worker_lease: 4s, lease_margin: 1s, leader_lease: 10s, kube_api_qps: 100, kube_api_burst: 200}
workload:
  namespaces: 16
  jobs:
    - {name: work, count: 200, rate: 4, completions: 2, parallelism: 1, pod: {run: 1s}}
crash_recovery:
  probe: {run: 100ms}
faults:
  - {at: 6s, action: kill-worker, worker: w-1, restart_after: 2s}
  - {at: 16s, action: kill-worker, worker: w-2, restart_after: 2s}
  - {at: 26s, action: kill-worker, worker: w-3, restart_after: 2s}
"#;

async fn crash_recovery_is_measured_and_audited_on(store: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let common::Ran { output, report, shown } =
        common::run_scenario(dir.path(), SCALED_DOWN, &out, &["--store".as_ref(), store.as_ref()]).await;
    let failed: Vec<&serde_json::Value> = ["audits", "goals"]
        .iter()
        .flat_map(|k| report[*k].as_array().into_iter().flatten())
        .filter(|o| o["passed"] != true)
        .collect();
    assert!(failed.is_empty(), "failed: {failed:#?}\nviolations: {:#}\n{shown}", report["violations"]);
    assert!(output.status.success(), "every audit passed, so exit 0: {shown}");
    let audits: Vec<&str> =
        report["audits"].as_array().expect("audits").iter().filter_map(|a| a["name"].as_str()).collect();
    for name in [
        "killed-workers-shards-recovered",
        "shard-tenures-never-overlap",
        "shard-owner-acting-within-bound",
        "jobs-finish-as-upstream",
        "job-names-created-once",
    ] {
        assert!(audits.contains(&name), "{name} missing from {audits:?}");
    }

    // Three kills, each victim started again under its id.
    let faults: Vec<(&str, &str, &str)> = report["faults"]
        .as_array()
        .expect("faults")
        .iter()
        .map(|f| {
            (
                f["action"].as_str().unwrap_or_default(),
                f["target"].as_str().unwrap_or_default(),
                f["result"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let kills: Vec<_> = faults.iter().filter(|f| f.0 == "kill-worker").collect();
    let starts: Vec<_> = faults.iter().filter(|f| f.0 == "start-worker").collect();
    assert_eq!(kills.iter().map(|f| f.1).collect::<Vec<_>>(), ["w-1", "w-2", "w-3"], "{faults:?}");
    assert!(
        kills.iter().all(|f| f.2.starts_with("SIGKILL; ") && f.2.ends_with("shards probed")),
        "{faults:?}"
    );
    assert_eq!(
        starts.iter().map(|f| (f.1, f.2)).collect::<Vec<_>>(),
        [("w-1", "started again"), ("w-2", "started again"), ("w-3", "started again")]
    );

    // The distribution, per kill and per shard, from the audit log.
    let recovery = &report["recovery"];
    assert_eq!(recovery["measured_from"], "audit log", "{recovery:#}");
    assert_eq!(recovery["kills"], 3, "{recovery:#}");
    assert_eq!(recovery["shards_unrecovered"], 0, "{recovery:#}");
    let per_kill = recovery["per_kill"].as_array().expect("per_kill");
    let measured: Vec<&serde_json::Value> = per_kill.iter().filter(|k| k["seconds"].is_number()).collect();
    assert!(!measured.is_empty(), "{recovery:#}");
    assert_eq!(recovery["per_kill_seconds"]["count"].as_u64(), Some(measured.len() as u64), "{recovery:#}");
    let space = ShardSpace::new(16).expect("a power of two");
    let mut probed = 0;
    for kill in per_kill {
        let shards = kill["per_shard"].as_array().expect("per_shard");
        probed += shards.len();
        let slowest = shards.iter().filter_map(|s| s["seconds"].as_f64()).fold(0.0, f64::max);
        if !shards.is_empty() {
            assert_eq!(
                kill["seconds"].as_f64(),
                Some(slowest),
                "a kill recovers with its slowest shard: {kill:#}"
            );
        }
        for s in shards {
            let (shard, namespace) = (s["shard"].as_u64(), s["namespace"].as_str().unwrap_or_default());
            assert_eq!(Some(u64::from(space.shard_of(namespace))), shard, "the probe is in its shard: {s:#}");
            assert!(s["seconds"].as_f64() > Some(0.0), "{s:#}");
            assert!(s["acted_by"].as_str().is_some_and(|w| w.starts_with("w-")), "{s:#}");
        }
    }
    assert_eq!(recovery["shards_probed"].as_u64(), Some(probed as u64), "{recovery:#}");
    let p = &recovery["per_shard_seconds"];
    assert_eq!(p["count"].as_u64(), Some(probed as u64), "{recovery:#}");
    assert!(p["p50"].as_f64() <= p["p99"].as_f64() && p["p99"].as_f64() <= p["max"].as_f64(), "{p:#}");
    assert!(out.join("recovery-cdf.svg").is_file(), "{:#}", report["files"]);
    assert!(report["lease_lapses"]["false_expiries"].is_u64(), "{:#}", report["lease_lapses"]);
    assert!(shown.contains("recovery per kill (s)"), "the summary shows the distribution: {shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_recovery_on_the_kubernetes_store() {
    crash_recovery_is_measured_and_audited_on("kubernetes").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_recovery_on_the_etcd_store() {
    crash_recovery_is_measured_and_audited_on("etcd").await;
}

#[tokio::test]
async fn a_store_the_scenario_cannot_run_on_is_refused_with_exit_2() {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args(["run", "etcd-restart", "--store", "kubernetes"])
        .kill_on_drop(true)
        .output()
        .await
        .expect("loadtest runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("restart-etcd") && stderr.contains("--store kubernetes"), "{stderr}");
}
