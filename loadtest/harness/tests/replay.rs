//! `loadtest run --replay`: a short fleet run with a worker killed halfway, then the same
//! workload under one `fleet-worker --standalone` on a fresh sim; every Job ends the same in
//! both, and the comparison is an audit of the run's report.

mod common;

const SHORT: &str = r#"
description: a short fleet run to replay
duration: 8s
settle: 60s
fleet: {workers: 2, shards: 16, worker_lease: 4s, lease_margin: 1s}
workload:
  namespaces: 8
  jobs:
    - {name: work, count: 24, rate: 3, completions: 2, parallelism: 2, pod: {run: 200ms}}
    - {name: idx, count: 4, indexed: true, completions: 4, parallelism: 2, pod: {run: 200ms}}
    - {name: doomed, count: 2, backoff_limit: 0, pod: {run: 100ms, exit_code: 2}}
faults:
  - {at: 4s, action: kill-worker, worker: w-1}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_under_standalone_ends_every_job_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let common::Ran { output, report, shown } =
        common::run_scenario(dir.path(), SHORT, &out, &["--replay".as_ref()]).await;
    assert!(output.status.success(), "{shown}\nviolations: {:#}", report["violations"]);
    let replayed = report["audits"]
        .as_array()
        .and_then(|a| a.iter().find(|o| o["name"] == "jobs-finish-as-standalone"))
        .unwrap_or_else(|| panic!("no replay audit: {report:#}"));
    assert_eq!(replayed["passed"], true, "{replayed}");
    assert_eq!(replayed["measured"], "0 violations in 30 Jobs", "{replayed}");
    let standalone: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("replay/report.json")).expect("the replay's report"))
            .expect("JSON");
    assert_eq!(standalone["fleet"], "fleet-worker --standalone, started by the harness", "{standalone:#}");
    assert_eq!(standalone["faults"].as_array().map(Vec::len), Some(0), "no faults in the replay");
    assert_eq!(report["faults"][0]["result"], "SIGKILL", "{:#}", report["faults"]);
}
