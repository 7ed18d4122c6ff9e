//! `loadtest run quota-deadlock` at a size CI holds (4 Jobs of parallelism 2 under a quota of 3
//! pods, raised after 8 s, instead of 20 Jobs for 60 s), as a user runs it: the scenario file
//! with its sizes scaled down, the real `loadtest`, `fleet-coordinator` and `fleet-worker`
//! binaries. The pods run longer than the quota is held, so the Jobs that do not fit stay refused
//! until the raise. Every audit must pass and the exit code must say so.

mod common;

#[tokio::test]
async fn a_scaled_down_quota_deadlock_run_signals_the_blocked_jobs_and_clears_after_the_raise() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/quota-deadlock.yaml"))
            .expect("the scenario");
    let mut spec: serde_yaml::Value = serde_yaml::from_str(&full).expect("yaml");
    spec["jobs"] = 4.into();
    spec["parallelism"] = 2.into();
    spec["completions"] = 2.into();
    spec["pod_run"] = "10s".into();
    spec["raise_after"] = "8s".into();
    spec["raised_pods"] = 20.into();
    spec["workers"] = 1.into();
    spec["settle"] = "90s".into();
    let out = dir.path().join("out");
    let common::Ran { output, report, shown } =
        common::run_scenario(dir.path(), &serde_yaml::to_string(&spec).expect("yaml"), &out, &[]).await;
    let audits: Vec<&str> =
        report["audits"].as_array().expect("audits").iter().filter_map(|a| a["name"].as_str()).collect();
    assert_eq!(
        audits,
        [
            "refused-jobs-signalled",
            "blocked-events-bounded-by-backoff-steps",
            "condition-clears-after-raise",
            "every-job-completes"
        ]
    );
    for audit in report["audits"].as_array().expect("audits") {
        assert_eq!(audit["passed"], true, "audit {audit}\nviolations: {:#}\n{shown}", report["violations"]);
    }
    // 2 + 2 + 2 + 2 pods wanted, 3 admitted: at least two Jobs (no Job takes more than 2 of the
    // 3), at most all four (the worker syncs them concurrently) are refused until the raise.
    let blocked = report["jobs_blocked"].as_u64().expect("jobs_blocked");
    assert!((2..=4).contains(&blocked), "{blocked} Jobs blocked\n{report:#}\n{shown}");
    assert_eq!(report["jobs_completed"], 4, "{report:#}");
    let refused = report["refused_creates"].as_u64().expect("refused_creates");
    let events = report["blocked_events"].as_u64().expect("blocked_events");
    assert!(events >= 3 && events <= refused, "{events} Events for {refused} refused creates\n{report:#}");
    assert_eq!(output.status.success(), report["passed"] == true, "the exit code says the verdict\n{shown}");
}
