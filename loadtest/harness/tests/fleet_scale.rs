//! `loadtest run fleet-scale` at a size that fits CI (M = 50 light workers, S = 512 shards), on
//! each store, as a user runs it: two coordinators as processes, the light workers in the
//! harness. The audits (one active owner per shard, the leader's map matching what the workers
//! hold, no lease lapse, no ERROR logged) and the goals that do not depend on the machine's
//! speed must pass: a fail-over moves nothing and brings every session back within 10 s, a storm
//! moves at most 1.1× the shards the leavers held, a settled fleet moves nothing. The timing
//! goals (step p99, the leader's CPU and memory) are measured and reported; the full sizes are
//! run by hand (docs/benchmarks.md).

use std::process::Output;

use tokio::process::Command;

async fn loadtest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .expect("loadtest runs")
}

fn shown(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn outcome<'a>(report: &'a serde_json::Value, list: &str, name: &str) -> &'a serde_json::Value {
    report[list]
        .as_array()
        .and_then(|l| l.iter().find(|o| o["name"] == name))
        .unwrap_or_else(|| panic!("no {list} entry {name} in {report:#}"))
}

async fn a_scaled_down_run_passes_its_audits_and_moves_nothing_it_need_not(store: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let out_arg = out.to_str().expect("utf-8 path");
    let output = loadtest(&[
        "run",
        "fleet-scale",
        "--workers",
        "50",
        "--shards",
        "512",
        "--store",
        store,
        "--rest",
        "3s",
        "--out",
        out_arg,
    ])
    .await;
    let shown = shown(&output);
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("report.json")).unwrap_or_else(|e| panic!("{e}\n{shown}")),
    )
    .expect("the report is JSON");
    assert_eq!(output.status.success(), report["passed"] == true, "the exit code says the verdict\n{shown}");
    assert_eq!(report["parameters"]["workers"], 50);
    assert_eq!(report["parameters"]["shards"], 512);
    assert_eq!(report["parameters"]["store"], store);

    for audit in report["audits"].as_array().expect("audits") {
        assert_eq!(audit["passed"], true, "audit {audit}\nviolations: {:#}\n{shown}", report["violations"]);
    }
    let audits: Vec<&str> =
        report["audits"].as_array().expect("audits").iter().filter_map(|a| a["name"].as_str()).collect();
    assert_eq!(
        audits,
        [
            "one-active-owner-per-shard",
            "map-matches-workers",
            "no-worker-lease-lapsed",
            "no-panic-or-error-logged"
        ]
    );
    for goal in ["failover-moves", "failover-sessions-back", "storm-moves", "no-moves-at-rest"] {
        let g = outcome(&report, "goals", goal);
        assert_eq!(g["passed"], true, "goal {g}\n{shown}");
    }
    let m = &report["measures"];
    assert_eq!(m["failover_moves"], 0);
    assert_eq!(m["storm_workers"], 5, "a tenth of the workers leave");
    let (minimum, moves) = (m["storm_minimum_moves"].as_u64(), m["storm_moves"].as_u64());
    assert!(minimum.is_some_and(|n| n > 0) && moves >= minimum, "the leavers' shards moved: {m:#}");
    // Measured, whatever the machine makes of them.
    for measure in ["all_active_seconds", "leader_peak_rss_mib", "step_p99_ms"] {
        assert!(m[measure].as_f64().is_some_and(|v| v > 0.0), "{measure}: {m:#}");
    }
    // A Lease PATCH per renewal on the Kubernetes store; on etcd a renewal is a keep-alive,
    // which etcd does not write to its log.
    let writes = m["store_writes_per_second_at_rest"].as_f64().expect("writes at rest");
    let keepalives = m["store_keepalives_per_second_at_rest"].as_f64();
    match store {
        "kubernetes" => assert!(writes > 0.0 && keepalives.is_none(), "{m:#}"),
        _ => assert!(writes == 0.0 && keepalives.is_some_and(|k| k > 0.0), "{m:#}"),
    }
    assert!(m["steps"].as_u64().is_some_and(|n| n > 0), "{m:#}");
    let balance = m["max_over_mean_load"].as_f64().expect("balance");
    assert!((1.0..2.0).contains(&balance), "{m:#}");
    for goal in ["step-p99", "leader-rss", "leader-cpu-at-rest", "load-balance"] {
        assert!(outcome(&report, "goals", goal)["measured"].as_str().is_some_and(|s| !s.is_empty()));
    }
    assert!(shown.contains("fleet-scale"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_light_workers_on_the_kubernetes_store() {
    a_scaled_down_run_passes_its_audits_and_moves_nothing_it_need_not("kubernetes").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_light_workers_on_etcd() {
    a_scaled_down_run_passes_its_audits_and_moves_nothing_it_need_not("etcd").await;
}

/// Its flags are its own: refused for a scenario file, and a shard count that is not a power of
/// two is refused before anything starts.
#[tokio::test]
async fn its_flags_are_refused_elsewhere_and_checked() {
    let other = loadtest(&["run", "job-burst", "--shards", "512"]).await;
    assert_eq!(other.status.code(), Some(2), "{}", shown(&other));
    assert!(String::from_utf8_lossy(&other.stderr).contains("for `loadtest run fleet-scale` only"));
    let bad = loadtest(&["run", "fleet-scale", "--shards", "500"]).await;
    assert_eq!(bad.status.code(), Some(2), "{}", shown(&bad));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("power of two"), "{}", shown(&bad));
    let external = loadtest(&["run", "fleet-scale", "--kubeconfig", "/nonexistent"]).await;
    assert_eq!(external.status.code(), Some(2), "{}", shown(&external));
}
