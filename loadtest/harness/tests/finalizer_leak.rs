//! `loadtest run finalizer-leak` at a size CI holds (24 Jobs in 4 namespaces, a 12 s window of
//! rejected patches), as a user runs it: the scenario file with its sizes scaled down, the real
//! `loadtest`, `fleet-coordinator` and `fleet-worker` binaries. Every audit must pass (no pod
//! keeps the finalizer, every refused pod patched later, the refusals told once per object,
//! the backlog shown by the workers' gauge), and so must the release goal.

mod common;

#[tokio::test]
async fn a_scaled_down_finalizer_leak_run_leaves_no_pod_holding_the_finalizer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/finalizer-leak.yaml"))
            .expect("the scenario");
    let mut spec: serde_yaml::Value = serde_yaml::from_str(&full).expect("yaml");
    spec["namespaces"] = 4.into();
    spec["jobs_per_namespace"] = 6.into();
    spec["completions"] = 2.into();
    spec["parallelism"] = 2.into();
    spec["orphan_at"] = "9s".into();
    spec["stray_at"] = "9s".into();
    spec["stray_every"] = 2.into();
    spec["reject"]["from"] = "7s".into();
    spec["reject"]["for"] = "12s".into();
    spec["fleet"]["shards"] = 8.into();
    spec["fleet"]["finalizer_sweep_period"] = "2s".into();
    spec["fleet"]["finalizer_sweep_grace"] = "2s".into();
    spec["settle"] = "120s".into();
    let out = dir.path().join("out");
    let common::Ran { output, report, shown } =
        common::run_scenario(dir.path(), &serde_yaml::to_string(&spec).expect("yaml"), &out, &[]).await;
    assert_eq!(report["jobs_created"], 24, "{shown}");
    assert_eq!(report["jobs_orphaned"], 8, "{shown}");
    assert!(report["strays_made"].as_u64().expect("strays_made") > 0, "strays made: {report:#}");
    let audits: Vec<&str> =
        report["audits"].as_array().expect("audits").iter().filter_map(|a| a["name"].as_str()).collect();
    assert_eq!(
        audits,
        ["no-pod-keeps-the-finalizer", "refused-patches-retried", "rejections-told-once", "backlog-shown"]
    );
    for outcome in
        report["audits"].as_array().expect("audits").iter().chain(report["goals"].as_array().expect("goals"))
    {
        assert_eq!(outcome["passed"], true, "{outcome}\nviolations: {:#}\n{shown}", report["violations"]);
    }
    assert!(
        report["rejections"].as_u64().expect("rejections") > 0,
        "the sweeper met the webhook: {report:#}"
    );
    // The strays of finished Jobs: no Job controller removes their finalizer, only the sweeper.
    assert!(
        report["releases"].as_u64().expect("releases") >= report["strays_made"].as_u64().expect("strays"),
        "the sweeper released the stray pods: {report:#}"
    );
    assert_eq!(output.status.success(), report["passed"] == true, "the exit code says the verdict\n{shown}");
}
