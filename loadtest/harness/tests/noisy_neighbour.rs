//! `loadtest run noisy-neighbour` at a size CI holds (a 1,500-pod Job beside 12 small Jobs in 4
//! namespaces, instead of 50,000 beside 100 in 20), as a user runs it: the scenario file scaled
//! down, the real `loadtest` and `fleet-worker` binaries. Timing goals belong to the full run by
//! hand (docs/benchmarks.md); here the behaviour must show: every small Job completes in every
//! sitting, the large Job keeps creating beside them, and with the budget handed out fairly the
//! small Jobs finish sooner than first come, first served lets them.

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
async fn small_jobs_beside_a_large_one_finish_sooner_with_the_fair_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/noisy-neighbour.yaml"))
            .expect("the scenario");
    let mut spec: serde_yaml::Value = serde_yaml::from_str(&full).expect("yaml");
    spec["large_job_pods"] = 1500.into();
    spec["small_jobs"] = 12.into();
    spec["small_namespaces"] = 4.into();
    spec["small_jobs_per_second"] = 4.into();
    spec["small_jobs_after_large_pods"] = 200.into();
    spec["nodes"] = 3.into();
    spec["worker"]["kube_api_qps"] = 50.into();
    spec["worker"]["kube_api_burst"] = 50.into();
    spec["settle"] = "240s".into();
    let file = dir.path().join("noisy-neighbour-small.yaml");
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
    let sittings = report["sittings"].as_array().expect("sittings");
    let names: Vec<&str> = sittings.iter().filter_map(|s| s["sitting"].as_str()).collect();
    assert_eq!(names, ["baseline", "fair", "arrival"], "{shown}");
    for s in sittings {
        assert_eq!(s["small_completed"], 12, "every small Job completes: {s}\n{shown}");
    }
    let goal = |name: &str| {
        report["goals"]
            .as_array()
            .and_then(|g| g.iter().find(|o| o["name"] == name))
            .unwrap_or_else(|| panic!("no goal {name} in {report:#}"))
            .clone()
    };
    assert_eq!(goal("large-job-kept-its-share")["passed"], true, "{:#}\n{shown}", report["sittings"]);
    let p99 = |i: usize| sittings[i]["small_seconds_p99"].as_f64().expect("p99");
    assert!(
        p99(1) < p99(2),
        "fair p99 {:.2} s should beat first come, first served {:.2} s (baseline {:.2} s)\n{shown}",
        p99(1),
        p99(2),
        p99(0)
    );
}
