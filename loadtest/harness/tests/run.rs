//! `loadtest run` as a user runs it: a short worker-churn scenario end to end (the sim, a
//! coordinator and workers as processes; a worker added, one killed, one paused past its lease)
//! whose report passes every audit and goal; `rolling-upgrade` itself at a size for CI; and a bad
//! scenario file, refused with exit 2 and the bad field named.

use std::path::Path;
use std::process::Output;

use tokio::process::Command;

/// Runs `loadtest run` with `args`, its output captured.
async fn loadtest_run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .arg("run")
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .expect("loadtest runs")
}

fn text(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// About 25 s of workload on a 6× cron clock, with every fault kind that needs no drain wait.
const SHORT_CHURN: &str = r#"
description: a short worker-churn
duration: 25s
settle: 120s
fleet: {workers: 2, shards: 16, worker_lease: 4s, lease_margin: 1s, leader_lease: 10s, cron_clock_speed: 6}
workload:
  namespaces: 8
  jobs:
    - {name: work, count: 60, rate: 3, completions: 3, parallelism: 2, pod: {run: 300ms}}
    - {name: flaky, count: 2, completions: 2, backoff_limit: 2, pod: {run: 100ms, exit_code: 1, fail_attempts: 1}}
    - {name: idx, count: 4, rate: 0.5, indexed: true, completions: 4, parallelism: 2, pod: {run: 200ms}}
    - {name: tidy, count: 10, rate: 1, ttl_seconds_after_finished: 3, pod: {run: 200ms}}
  cronjobs:
    - {name: tick, schedule: "* * * * *", namespaces: 2, pod: {run: 100ms}}
faults:
  - {at: 4s, action: add-worker}
  - {at: 9s, action: kill-worker, worker: w-1}
  - {at: 14s, action: pause-worker, worker: w-0, resume_after: 7s}
goals:
  first_pod_p99: 60s
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_worker_churn_passes_every_audit_and_reports_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("short-churn.yaml");
    std::fs::write(&scenario, SHORT_CHURN).expect("scenario written");
    let out = dir.path().join("out");
    let output = loadtest_run(&[scenario.as_os_str(), "--out".as_ref(), out.as_os_str()]).await;
    let shown = text(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert_eq!(Path::new(last), out.join("report.json"), "the report's path comes last: {shown}");

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).expect("report written"))
            .expect("JSON");
    let failed: Vec<&serde_json::Value> = ["audits", "goals"]
        .iter()
        .flat_map(|k| report[*k].as_array().into_iter().flatten())
        .filter(|o| o["passed"] != true)
        .collect();
    assert!(failed.is_empty(), "failed: {failed:#?}\nviolations: {:#}\n{shown}", report["violations"]);
    assert!(output.status.success(), "every audit passed, so exit 0: {shown}");
    // Every audit ran, each entry in the report's form.
    let audits: Vec<&str> =
        report["audits"].as_array().expect("audits").iter().filter_map(|a| a["name"].as_str()).collect();
    for name in [
        "shard-tenures-never-overlap",
        "shard-owner-acting-within-bound",
        "active-pods-within-parallelism",
        "no-pod-for-a-finished-job",
        "jobs-finish-as-upstream",
        "ttl-jobs-deleted-after-their-ttl",
        "no-panic-or-error-logged",
        "cron-times-run-once",
    ] {
        assert!(audits.contains(&name), "{name} missing from {audits:?}");
    }
    for entry in report["audits"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(report["goals"].as_array().into_iter().flatten())
    {
        let keys: Vec<&String> = entry.as_object().expect("an object").keys().collect();
        assert_eq!(keys, ["name", "target", "measured", "passed"], "{entry}");
    }
    // The workload ran through the faults and was measured from the outside.
    assert_eq!(report["jobs"]["created"], 76, "{:#}", report["jobs"]);
    assert_eq!(report["jobs"]["unfinished"], 0, "{:#}", report["jobs"]);
    // The kill's hand-overs were measured from the audit log.
    assert!(report["hand_overs"]["count"].as_u64() > Some(0), "{:#}", report["hand_overs"]);
    assert!(report["hand_overs"]["unowned_seconds"].as_f64() > Some(0.0), "{:#}", report["hand_overs"]);
    assert_eq!(report["latency_seconds"]["job_created_to_finished"]["count"], 76);
    // Cron skew and TTL lag from what the run saw, the throughput over time as a series and a plot.
    assert!(report["cron_skew_seconds"]["count"].as_u64() >= Some(2), "{:#}", report["cron_skew_seconds"]);
    assert_eq!(report["ttl_lag_seconds"]["count"], 10, "{:#}", report["ttl_lag_seconds"]);
    let completed: f64 = report["throughput"]["per_second"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p[1].as_f64())
        .sum();
    assert_eq!(
        report["throughput"]["pods_completed"].as_f64(),
        Some(completed),
        "{:#}",
        report["throughput"]
    );
    assert!(completed >= 60.0 * 3.0 + 4.0 * 4.0 + 10.0, "{:#}", report["throughput"]);
    let finished: f64 = report["throughput"]["per_second"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p[2].as_f64())
        .sum();
    assert_eq!(report["throughput"]["jobs_finished"].as_f64(), Some(finished), "{:#}", report["throughput"]);
    assert!(out.join("throughput.svg").is_file());
    let faults: Vec<&str> =
        report["faults"].as_array().expect("faults").iter().filter_map(|f| f["result"].as_str()).collect();
    assert_eq!(faults, ["started w-2", "SIGKILL", "SIGSTOP, SIGCONT after 7s"]);
    let processes: Vec<&str> = report["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    for p in ["coordinator-0", "w-0", "w-1", "w-2"] {
        assert!(processes.contains(&p), "{p} missing from {processes:?}");
    }
    let requests = report["api_requests"].as_array().expect("api_requests");
    assert!(
        requests.iter().any(|r| r["process"] == "fleet-worker (w-2)"
            && r["verb"] == "create"
            && r["resource"] == "pods"),
        "the added worker created pods: {requests:#?}"
    );
    assert!(out.join("latency-cdf.svg").is_file() && out.join("audit.log").is_file());
    let own_log = std::fs::read_to_string(out.join("loadtest.log")).expect("the harness's log");
    assert!(own_log.contains("fault"), "the harness logs its faults to its file");
    assert!(!stdout.contains(" INFO "), "no log line on the terminal: {shown}");
}

/// The report's failed audits and goals, and its JSON.
fn report_of(out: &Path, shown: &str) -> (serde_json::Value, Vec<serde_json::Value>) {
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("report.json")).unwrap_or_else(|e| panic!("{e}: {shown}")),
    )
    .expect("JSON");
    let failed = ["audits", "goals"]
        .iter()
        .flat_map(|k| report[*k].as_array().into_iter().flatten())
        .filter(|o| o["passed"] != true)
        .cloned()
        .collect();
    (report, failed)
}

/// `rolling-upgrade.yaml` at CI's size: 16 shards and a shorter workload; the test gives
/// `--workers 4` for the file's 8. Its timing goals are loose: debug builds on a loaded 2-core
/// machine took 0.71 s of gap p99 (load 9, 2026-11-28), and the figures are the benchmark's
/// (docs/benchmarks.md); here they only tell a graceful hand-over (well under a second) from one
/// that waited out a lease (5 s and more).
const SHORT_ROLLING_UPGRADE: &str = r#"
description: a short rolling upgrade
duration: 35s
settle: 90s
fleet: {workers: 8, shards: 16, kube_api_qps: 50, kube_api_burst: 100, cron_clock_speed: 6}
workload:
  namespaces: 16
  jobs:
    - {name: work, count: 105, rate: 3, completions: 2, parallelism: 2, pod: {run: 500ms}}
    - {name: idx, count: 6, rate: 0.2, indexed: true, completions: 4, parallelism: 2, pod: {run: 300ms}}
  cronjobs:
    - {name: tick, schedule: "* * * * *", namespaces: 4, pod: {run: 100ms}}
faults:
  - {at: 15s, action: rolling-restart}
goals:
  first_pod_p99: 10s
  finished_p99: 30s
  rollout_gap_p99: 2s
  rollout_unowned_per_move: 2s
  rollout_moves_per_shard: 2.2
  rollout_finished_p99_ratio: 3
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_upgrade_restarts_every_worker_gracefully_in_statefulset_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("short-rolling-upgrade.yaml");
    std::fs::write(&scenario, SHORT_ROLLING_UPGRADE).expect("scenario written");
    let out = dir.path().join("out");
    let output = loadtest_run(&[
        scenario.as_os_str(),
        "--workers".as_ref(),
        "4".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ])
    .await;
    let shown = text(&output);
    let (report, failed) = report_of(&out, &shown);
    assert!(failed.is_empty(), "failed: {failed:#?}\nviolations: {:#}\n{shown}", report["violations"]);
    assert!(output.status.success(), "every audit and goal passed, so exit 0: {shown}");
    let goals: Vec<&str> =
        report["goals"].as_array().expect("goals").iter().filter_map(|g| g["name"].as_str()).collect();
    for name in [
        "rollout-completed",
        "rollout-moves-graceful",
        "rollout-hand-over-gap-p99",
        "rollout-unowned-seconds",
        "rollout-moves",
        "rollout-finished-p99-ratio",
    ] {
        assert!(goals.contains(&name), "{name} missing from {goals:?}");
    }
    let audits: Vec<&str> =
        report["audits"].as_array().expect("audits").iter().filter_map(|a| a["name"].as_str()).collect();
    for name in ["shard-tenures-never-overlap", "jobs-finish-as-upstream", "cron-times-run-once"] {
        assert!(audits.contains(&name), "{name} missing from {audits:?}");
    }
    // Every worker once, from the highest ordinal down, each leaving nothing behind in the map.
    let rollout = &report["rollout"];
    let order: Vec<&str> =
        rollout["steps"].as_array().expect("steps").iter().filter_map(|s| s["worker"].as_str()).collect();
    assert_eq!(order, ["w-3", "w-2", "w-1", "w-0"], "{rollout:#}");
    for step in rollout["steps"].as_array().into_iter().flatten() {
        assert_eq!(step["owned_at_exit"], serde_json::json!([]), "{step:#}");
        assert!(step["ready_after_seconds"].as_f64().is_some(), "{step:#}");
    }
    assert_eq!(rollout["left_draining"], serde_json::json!([]), "{rollout:#}");
    // Each worker's shards left it and came back: at least one move per shard, from the map.
    let (moves, shards) =
        (rollout["moves"].as_u64().expect("moves"), rollout["shards"].as_u64().expect("shards"));
    assert!(moves >= shards, "{rollout:#}");
    assert!(rollout["gap_seconds"]["count"].as_u64() > Some(0), "{rollout:#}");
    assert!(rollout["baseline_finished_seconds"]["count"].as_u64() > Some(0), "{rollout:#}");
    // The leader's own view, scraped from its /metrics: every move it finished was a hand-over.
    let leader = &rollout["leader"];
    assert_eq!(leader["moves"]["unowned"], 0, "{rollout:#}");
    assert!(leader["moves"]["done"].as_u64() >= Some(shards), "{rollout:#}");
    assert!(leader["gaps"].as_u64() > Some(0), "{rollout:#}");
    // The restarted processes were measured beside the first ones.
    let processes: Vec<&str> = report["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    let restarted: Vec<&&str> = processes.iter().filter(|p| p.contains("(restart ")).collect();
    assert_eq!(restarted.len(), 4, "{processes:?}\n{shown}");
}

#[tokio::test]
async fn a_bad_scenario_file_exits_2_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "duration: 10s\nworkload:\n  jobs:\n    - {name: a, count: 1, paralellism: 2}\n",
            "workload.jobs[0]: unknown field `paralellism`",
        ),
        ("duration: 10s\nfleet: {stor: etcd}\nworkload: {}\n", "fleet: unknown field `stor`"),
        (
            "duration: 10s\nworkload: {}\nfaults:\n  - {at: 1s, action: pause-worker, worker: w-0}\n",
            "faults[0].resume_after: set for pause-worker and restart-etcd",
        ),
        (
            "duration: 10s\nworkload: {}\ngoals: {rollout_moves_per_shard: 2}\n",
            "goals: the rollout_* goals measure a rolling-restart; the faults have none",
        ),
    ];
    for (i, (yaml, named)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad-{i}.yaml"));
        std::fs::write(&path, yaml).expect("written");
        let output =
            loadtest_run(&[path.as_os_str(), "--out".as_ref(), dir.path().join("out").as_os_str()]).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{}", text(&output));
        assert!(stderr.contains(named), "{named:?} not in: {stderr}");
        assert!(stderr.contains(&path.display().to_string()), "the file is named: {stderr}");
    }
    let output = loadtest_run(&["no-such-scenario".as_ref()]).await;
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("worker-churn"),
        "known scenarios listed: {}",
        text(&output)
    );
}
