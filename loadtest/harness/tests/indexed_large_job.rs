//! `loadtest run indexed-100k` at a size CI holds (2,000 completions, parallelism 200, instead of
//! 100,000 and 1,000), as a user runs it: the scenario file with its sizes scaled down, the real
//! `loadtest`, `fleet-coordinator` and `fleet-worker` binaries. Once with the worker's default
//! size limit (the guard must stay quiet), once with a limit the every-other pattern outgrows
//! (the guard's condition and Event must come). Every audit must pass and the exit code must
//! say so.

mod common;

async fn run(completions: i64, parallelism: i64, limit: Option<u64>) -> common::Ran {
    let dir = tempfile::tempdir().expect("tempdir");
    let full =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/indexed-100k.yaml"))
            .expect("the scenario");
    let mut spec: serde_yaml::Value = serde_yaml::from_str(&full).expect("yaml");
    spec["completions"] = completions.into();
    spec["parallelism"] = parallelism.into();
    spec["pod_run"] = "200ms".into();
    spec["nodes"] = 4.into();
    spec["kube_api_qps"] = 500.into();
    spec["kube_api_burst"] = 1000.into();
    spec["settle"] = "300s".into();
    if let Some(limit) = limit {
        spec["status_size_limit_bytes"] = limit.into();
    }
    let out = dir.path().join("out");
    let ran = common::run_scenario(dir.path(), &serde_yaml::to_string(&spec).expect("yaml"), &out, &[]).await;
    let audits: Vec<&str> =
        ran.report["audits"].as_array().expect("audits").iter().filter_map(|a| a["name"].as_str()).collect();
    assert_eq!(
        audits,
        [
            "job-terminal",
            "every-index-accounted",
            "status-size-guard",
            "counted-pods-deleted",
            "pod-deletes-once-and-only-counted",
            "worker-peak-rss"
        ]
    );
    for audit in ran.report["audits"].as_array().expect("audits") {
        assert_eq!(
            audit["passed"], true,
            "audit {audit}\nviolations: {:#}\n{}",
            ran.report["violations"], ran.shown
        );
    }
    assert_eq!(
        ran.output.status.success(),
        ran.report["passed"] == true,
        "the exit code says the verdict\n{}",
        ran.shown
    );
    ran
}

#[tokio::test]
async fn a_scaled_down_indexed_100k_run_accounts_every_index_and_deletes_the_counted_pods() {
    let ran = run(2000, 200, None).await;
    let report = &ran.report;
    assert_eq!(report["terminal"], serde_json::json!(["Failed", "FailedIndexes"]), "{report:#}");
    // 1,000 even indexes "0,2,…,1998" and 1,000 odd ones: 1-4 digit numbers and 999 commas each.
    assert_eq!(report["completed_indexes_bytes"], 4444, "{report:#}");
    assert_eq!(report["failed_indexes_bytes"], 4444, "{report:#}");
    assert_eq!(report["guard_seen_true"], false, "{report:#}");
    assert_eq!(report["succeeded_pods_left"], 0, "{report:#}");
    // Each of the 1,000 succeeded pods deleted by the Job controller (the audit checks once each).
    assert!(report["pod_deletes"].as_u64().expect("pod_deletes") >= 1000, "{report:#}");
    assert!(report["failed_pods_left"].as_u64().expect("failed pods") >= 1000, "{report:#}");
}

#[tokio::test]
async fn a_small_status_size_limit_makes_the_guard_fire_as_the_indexes_grow() {
    // 600 completions: index strings of 1,144 bytes each, on a Job of a few KiB; at 4,000 bytes
    // the guard's 80 % is passed while the Job runs, and its condition and Event say so: the
    // Event comes after hundreds of SuccessfulCreate Events, which spend upstream's spam bucket
    // of the Job, not batchfleet's own.
    let ran = run(600, 100, Some(4000)).await;
    let report = &ran.report;
    assert_eq!(report["guard_seen_true"], true, "{report:#}");
    assert_eq!(report["guard_events"], 1, "one Warning Event for one transition\n{report:#}");
    let msg = report["guard_message"].as_str().expect("message");
    assert!(msg.contains("of the 4000-byte limit"), "{msg}");
    assert!(msg.contains("completedIndexes is") && msg.contains("failedIndexes"), "{msg}");
    assert_eq!(report["terminal"], serde_json::json!(["Failed", "FailedIndexes"]), "{report:#}");
}

#[tokio::test]
async fn a_limit_the_job_starts_near_warns_with_an_event_at_the_first_sync() {
    // A limit of 1,500 bytes: the Job itself is near it before any index is done, so the guard
    // fires in the first sync, within the Event budget.
    let ran = run(40, 4, Some(1500)).await;
    let report = &ran.report;
    assert_eq!(report["guard_seen_true"], true, "{report:#}");
    assert_eq!(report["guard_events"], 1, "one Warning Event for one transition\n{report:#}");
}
