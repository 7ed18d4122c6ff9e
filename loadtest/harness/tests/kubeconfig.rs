//! `loadtest run --kubeconfig` against a cluster the harness did not start: the test starts
//! `loadtest sim` (with its own audit log) and a `fleet-worker --standalone` on it, then runs a
//! short scenario with `--fleet none`. The report passes with the watch-based audits, the ones
//! that need the audit log reported as skipped; the test's own audit log shows that the worker
//! it started did the work. Faults on processes the harness would not start are refused at once.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::process::{Child, Command};

mod common;

fn text(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A workspace binary next to `loadtest`, built when this test run did not build it.
fn sibling(name: &str, package: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_loadtest")).with_file_name(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-p", package, "--bin", name])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building {name}");
    }
    path
}

/// `loadtest sim` on a free port with its audit log; answers it and its kubeconfig once that
/// reaches the API.
async fn start_sim(dir: &Path) -> (Child, PathBuf) {
    let kubeconfig = dir.join("sim-kubeconfig");
    let sim = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args(["sim", "--listen", "127.0.0.1:0", "--nodes", "4", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--audit-log")
        .arg(dir.join("sim-audit.log"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("sim.log")).expect("log"))
        .kill_on_drop(true)
        .spawn()
        .expect("loadtest sim starts");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(kc) = kube::config::Kubeconfig::read_from(&kubeconfig)
            && let Ok(config) =
                kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await
            && let Ok(client) = kube::Client::try_from(config)
            && client.apiserver_version().await.is_ok()
        {
            return (sim, kubeconfig);
        }
        assert!(tokio::time::Instant::now() < deadline, "the sim did not serve within 30s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const SHORT: &str = r#"
description: a short mixed workload on a cluster the harness did not start
duration: 8s
settle: 60s
fleet: {shards: 16}
workload:
  namespaces: 6
  jobs:
    - {name: work, count: 24, rate: 4, completions: 2, parallelism: 2, pod: {run: 200ms}}
    - {name: idx, count: 3, indexed: true, completions: 3, parallelism: 2, pod: {run: 200ms}}
    - {name: flaky, count: 2, backoff_limit: 0, pod: {run: 100ms, exit_code: 1}}
    - {name: tidy, count: 6, rate: 1, ttl_seconds_after_finished: 2, pod: {run: 100ms}}
goals:
  finished_p99: 40s
  ttl_lag_max: 15s
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_a_cluster_it_did_not_start_audits_from_watches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_sim, kubeconfig) = start_sim(dir.path()).await;
    let worker_log = std::fs::File::create(dir.path().join("standalone.log")).expect("log");
    let _worker = Command::new(sibling("fleet-worker", "batchfleet-worker"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--standalone", "--worker-id", "deployed", "--metrics-addr", "127.0.0.1:0", "--shards", "16"])
        .stdout(Stdio::null())
        .stderr(worker_log)
        .kill_on_drop(true)
        .spawn()
        .expect("fleet-worker starts");

    let out = dir.path().join("out");
    let args = ["--kubeconfig".as_ref(), kubeconfig.as_os_str(), "--fleet".as_ref(), "none".as_ref()];
    let common::Ran { output, report, shown } = common::run_scenario(dir.path(), SHORT, &out, &args).await;
    assert!(output.status.success(), "{shown}\nviolations: {:#}", report["violations"]);
    assert_eq!(report["passed"], true, "{report:#}");
    assert_eq!(report["audits_from"], "watches", "{report:#}");
    assert!(report["api_requests"].is_null(), "no audit log, no request counts: {report:#}");
    let audit = |name: &str| -> serde_json::Value {
        report["audits"]
            .as_array()
            .and_then(|a| a.iter().find(|o| o["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("no audit {name}: {report:#}"))
    };
    for name in ["shard-tenures-never-overlap", "no-panic-or-error-logged"] {
        let a = audit(name);
        assert_eq!(a["passed"], false, "a skipped audit does not read as passed: {a}");
        assert!(a["skipped"].as_str().is_some_and(|r| !r.is_empty()), "skipped with a reason: {a}");
    }
    assert!(
        audit("shard-tenures-never-overlap")["skipped"].as_str().unwrap_or_default().contains("audit log")
    );
    let ttl = audit("ttl-jobs-deleted-after-their-ttl");
    assert_eq!(ttl["passed"], true, "{ttl}");
    assert!(ttl["target"].as_str().unwrap_or_default().contains("as a watch saw them"), "{ttl}");
    assert_eq!(ttl["measured"], "0 violations in 6 Jobs with a TTL", "{ttl}");
    for name in [
        "all-jobs-created",
        "active-pods-within-parallelism",
        "no-pod-for-a-finished-job",
        "jobs-finish-as-upstream",
        "job-names-created-once",
    ] {
        let a = audit(name);
        assert_eq!(a["passed"], true, "{a}");
        assert!(a.get("skipped").is_none(), "{a}");
    }
    assert_eq!(report["jobs"]["created"], 35, "{:#}", report["jobs"]);
    assert_eq!(report["jobs"]["seen"], 35, "only the run's own Jobs are watched: {:#}", report["jobs"]);
    assert_eq!(
        (report["jobs"]["failed"].as_u64(), report["jobs"]["unfinished"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(report["ttl_lag_seconds"]["count"], 6, "{:#}", report["ttl_lag_seconds"]);
    let processes: Vec<&str> =
        report["processes"].as_array().into_iter().flatten().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(processes, ["loadtest (sim + harness)"], "the harness started no controller");

    // From the outside: the worker the test started created the pods, in the run's namespaces.
    let events =
        batchfleet_sim::audit::read_log(&dir.path().join("sim-audit.log")).expect("the sim's audit log");
    let pods_created = events
        .iter()
        .filter(|e| e.user_agent.contains("(deployed)") && e.verb == "create" && e.succeeded())
        .filter(|e| {
            e.object_ref.as_ref().is_some_and(|o| o.resource == "pods" && o.namespace.starts_with("lt-"))
        })
        .count();
    assert!(pods_created >= 24 * 2 + 3 + 2 + 6, "the deployed worker created the pods: {pods_created}");
}

#[tokio::test]
async fn faults_on_processes_the_harness_does_not_start_are_refused_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("churn.yaml");
    std::fs::write(
        &scenario,
        "duration: 10s\nworkload: {jobs: [{name: a, count: 1}]}\nfaults:\n  - {at: 2s, action: kill-worker, worker: w-0}\n",
    )
    .expect("written");
    let output = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .arg("run")
        .arg(&scenario)
        .args(["--kubeconfig", "/nonexistent/kubeconfig", "--fleet", "none", "--out"])
        .arg(dir.path().join("out"))
        .kill_on_drop(true)
        .output()
        .await
        .expect("loadtest runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        stderr.contains("faults[0] (kill-worker at 2s): kill-worker needs the fleet's processes"),
        "{stderr}"
    );
}
