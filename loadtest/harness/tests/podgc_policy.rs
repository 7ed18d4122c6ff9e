//! `loadtest run podgc-policy` at a size CI holds (3,000 pods in 6 namespaces instead of 200,000
//! in 40), as a user runs it: the scenario file with its sizes scaled down, the real
//! `loadtest` and `fleet-coordinator` binaries. Every audit must pass (exactly the pods the
//! policy names deleted, each once, the finalizer-held ones left alone, the bad cap reported
//! once); the goals are measured and reported, and the API budget must hold. The full size is
//! run by hand.

mod common;

#[tokio::test]
async fn a_scaled_down_podgc_policy_run_deletes_exactly_what_the_policy_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/podgc-policy.yaml"))
            .expect("the scenario");
    let mut spec: serde_yaml::Value = serde_yaml::from_str(&full).expect("yaml");
    spec["pods"] = 3000.into();
    spec["namespaces"] = 6.into();
    spec["settle"] = "120s".into();
    spec["coordinator"]["podgc_period"] = "1s".into();
    spec["coordinator"]["podgc_namespace_threshold"] = 150.into();
    spec["coordinator"]["terminated_pod_gc_threshold"] = 700.into();
    spec["caps"]["podgc-00"] = "60".into();
    let out = dir.path().join("out");
    let common::Ran { output, report, shown } =
        common::run_scenario(dir.path(), &serde_yaml::to_string(&spec).expect("yaml"), &out, &[]).await;
    assert_eq!(report["pods_created"], 3000, "{shown}");
    let expected = report["expected_deletions"].as_u64().expect("expected_deletions");
    assert!(expected > 1000 && expected < 3000, "the policy names some pods, not all: {expected}");
    let audits: Vec<&str> =
        report["audits"].as_array().expect("audits").iter().filter_map(|a| a["name"].as_str()).collect();
    assert_eq!(
        audits,
        [
            "deleted-exactly-what-the-policy-names",
            "no-pod-deleted-twice",
            "finalizer-held-pods-left-alone",
            "bad-cap-reported-once"
        ]
    );
    for audit in report["audits"].as_array().expect("audits") {
        assert_eq!(audit["passed"], true, "audit {audit}\nviolations: {:#}\n{shown}", report["violations"]);
    }
    let goal = |name: &str| {
        report["goals"]
            .as_array()
            .and_then(|g| g.iter().find(|o| o["name"] == name))
            .unwrap_or_else(|| panic!("no goal {name} in {report:#}"))
            .clone()
    };
    assert_eq!(goal("api-budget")["passed"], true, "{:#}\n{shown}", goal("api-budget"));
    assert!(report["passes"].as_u64().expect("passes") >= 3, "passes measured: {report:#}");
    assert!(goal("pass-time-per-100k-pods")["measured"].as_str().expect("measured").contains("ms per 100k"));
    assert_eq!(output.status.success(), report["passed"] == true, "the exit code says the verdict\n{shown}");
}
