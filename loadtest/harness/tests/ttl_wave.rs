//! `loadtest run ttl-wave` at a size CI holds (300 Jobs at 50 deletions per second per worker,
//! two workers, instead of 10,000 at 100 with three), as a user runs it: the scenario file with
//! its sizes scaled down, the real `loadtest`, `fleet-coordinator` and `fleet-worker` binaries.
//! Every audit and goal must pass: every Job deleted once and never before its expiry, the
//! annotated bare pods on time, the bad value reported and kept, no worker above the flag in any
//! second, every Job within TTL + count / rate + 2 s. The full size is run by hand.

use std::process::Output;

use tokio::process::Command;

fn shown(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

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
    let file = dir.path().join("ttl-wave-small.yaml");
    std::fs::write(&file, serde_yaml::to_string(&spec).expect("yaml")).expect("write");
    let out = dir.path().join("out");
    let output = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args(["run", file.to_str().expect("utf-8"), "--out", out.to_str().expect("utf-8")])
        .kill_on_drop(true)
        .output()
        .await
        .expect("loadtest runs");
    let shown = shown(&output);
    let report: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("report.json")).unwrap_or_else(|e| panic!("{e}\n{shown}")),
    )
    .expect("the report is JSON");
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
