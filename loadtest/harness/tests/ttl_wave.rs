//! `loadtest run ttl-wave` at a size CI holds (300 Jobs at 50 deletions per second per worker,
//! two workers, instead of 10,000 at 100 with three), as a user runs it: the scenario file with
//! its sizes scaled down, the real `loadtest`, `fleet-coordinator` and `fleet-worker` binaries.
//! Every audit and goal must pass: every Job deleted once and never before its expiry, the
//! annotated bare pods on time, the bad value reported and kept, no worker above the flag in any
//! second, every Job within TTL + count / rate + 2 s. The full size is run by hand.

mod common;

#[tokio::test]
async fn a_scaled_down_ttl_wave_is_smoothed_under_the_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/ttl-wave.yaml"))
        .expect("the scenario");
    let mut spec: serde_yaml::Value = serde_yaml::from_str(&full).expect("yaml");
    spec["jobs"] = 300.into();
    spec["namespaces"] = 8.into();
    spec["ttl_seconds"] = 25.into();
    spec["bare_pods"] = 6.into();
    spec["bare_pod_ttl_seconds"] = 3.into();
    spec["fleet"]["workers"] = 2.into();
    spec["fleet"]["shards"] = 8.into();
    spec["fleet"]["ttl_max_deletions_per_second"] = 50.into();
    spec["settle"] = "60s".into();
    let out = dir.path().join("out");
    let common::Ran { output, report, shown } =
        common::run_scenario(dir.path(), &serde_yaml::to_string(&spec).expect("yaml"), &out, &[]).await;
    assert_eq!(report["jobs_deleted"], 300, "{shown}");
    let names = |key: &str| -> Vec<String> {
        report[key]
            .as_array()
            .expect(key)
            .iter()
            .filter_map(|a| a["name"].as_str().map(String::from))
            .collect()
    };
    assert_eq!(
        names("audits"),
        [
            "every-job-deleted-once-after-its-ttl",
            "annotated-bare-pods-deleted-on-time",
            "bad-ttl-reported-and-kept"
        ]
    );
    assert_eq!(
        names("goals"),
        ["peak-deletions-per-second-per-worker", "jobs-deleted-within-ttl-plus-count-over-rate"]
    );
    for o in report["audits"].as_array().into_iter().chain(report["goals"].as_array()).flatten() {
        assert_eq!(o["passed"], true, "{o}\nviolations: {:#}\n{shown}", report["violations"]);
    }
    let peak = report["peak_per_worker"].as_u64().expect("peak");
    assert!(peak > 0 && peak <= 50, "peak {peak}");
    // Smoothed: the wave took seconds, not one.
    assert!(report["job_lag_seconds"]["max"].as_f64().expect("max") > 1.5, "{report:#}");
    assert!(output.status.success(), "every audit and goal passed, so exit 0\n{shown}");
}
