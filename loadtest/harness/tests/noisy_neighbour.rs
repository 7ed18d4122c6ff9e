//! `loadtest run noisy-neighbour` at a size CI holds (a 1,500-pod Job beside 12 small Jobs in 4
//! namespaces, instead of 50,000 beside 100 in 20), as a user runs it: the scenario file scaled
//! down, the real `loadtest` and `fleet-worker` binaries. Timing goals belong to the full run by
//! hand (docs/benchmarks.md); here the behaviour must show: every small Job completes in every
//! sitting, the large Job keeps creating beside them, and with the budget handed out fairly the
//! small Jobs finish sooner than first come, first served lets them.

mod common;

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
    let out = dir.path().join("out");
    let common::Ran { report, shown, .. } =
        common::run_scenario(dir.path(), &serde_yaml::to_string(&spec).expect("yaml"), &out, &[]).await;
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
