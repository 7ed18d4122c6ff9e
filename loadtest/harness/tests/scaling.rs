//! `loadtest run` of a scaled-down scaling run end to end: one and two workers at one QPS each,
//! and the standalone baseline, each on a fresh sim; the report has a point of the curve for
//! each run, the scaling goals, every run's audits, and the curve as SVG.

mod common;

const SCALED_DOWN: &str = r#"
description: a scaled-down scaling run
duration: 2s
settle: 120s
fleet: {shards: 16, kube_api_qps: 20, kube_api_burst: 20}
workload:
  namespaces: 16
  jobs:
    - {name: small, count: 40, pod: {run: 50ms}}
scaling: {workers: [1, 2], baseline: true, efficiency_goal: 0, baseline_ratio_goal: 0}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaled_down_scaling_run_reports_its_curve_and_goals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let common::Ran { output, report, shown } =
        common::run_scenario(dir.path(), SCALED_DOWN, &out, &[]).await;
    assert!(output.status.success(), "{shown}\nviolations: {:#}", report["violations"]);
    assert_eq!(report["passed"], true);

    let curve = &report["scaling"];
    let points = curve["points"].as_array().expect("points");
    let workers: Vec<u64> = points.iter().filter_map(|p| p["workers"].as_u64()).collect();
    assert_eq!(workers, [1, 2], "{curve:#}");
    let baseline = &curve["baseline"];
    assert!(baseline["workers"].is_null() && baseline["kube_api_qps"] == 20.0, "{baseline:#}");
    for p in points.iter().chain([baseline]) {
        let rate = p["jobs_per_second"].as_f64().unwrap_or_default();
        assert!(rate > 0.0, "a throughput for each run: {p}");
        assert_eq!(p["passed"], true, "{p}");
        let run: serde_json::Value = serde_json::from_slice(
            &std::fs::read(p["report"].as_str().expect("path")).expect("the run's report"),
        )
        .expect("JSON");
        assert_eq!(run["throughput"]["pods_completed"], 40, "{p}");
        assert_eq!(run["throughput"]["steady_pods_per_second"], p["pods_per_second"]);
        assert_eq!(run["throughput"]["jobs_finished"], 40, "{p}");
        assert_eq!(run["throughput"]["jobs_per_second_to_90_percent"], p["jobs_per_second"]);
    }
    let efficiency = curve["efficiency"].as_f64().expect("efficiency");
    let ratio = curve["baseline_ratio"].as_f64().expect("ratio");
    let goals: Vec<&str> =
        report["goals"].as_array().expect("goals").iter().filter_map(|g| g["name"].as_str()).collect();
    assert_eq!(goals[..2], ["scaling-efficiency", "workers-2-vs-baseline"], "{goals:?}");
    let goal = &report["goals"][0];
    assert!(goal["measured"].as_str().unwrap_or_default().starts_with(&format!("{efficiency:.2}")), "{goal}");
    assert!(ratio > 0.0);
    // Every run's audits, named after the run.
    let audits: Vec<&str> =
        report["audits"].as_array().expect("audits").iter().filter_map(|a| a["name"].as_str()).collect();
    for run in ["workers-1", "workers-2", "baseline"] {
        assert!(audits.contains(&format!("{run}: jobs-finish-as-upstream").as_str()), "{audits:?}");
        assert!(out.join(run).join("throughput.svg").is_file());
    }
    let svg = std::fs::read_to_string(out.join("scaling-curve.svg")).expect("the curve");
    assert!(svg.contains("standalone baseline"), "the curve shows the baseline");
}
