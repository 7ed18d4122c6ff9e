//! `loadtest run cron-outage` at a size CI holds (12 CronJobs instead of 1,000, a 2-hour outage
//! on a clock 240× the wall clock instead of 3 hours at 120×), as a user runs it: the scenario
//! file scaled down, the real `loadtest` and `fleet-worker` binaries. Every audit must pass:
//! exactly the catch-up each annotation allows, none without it, no time twice.

mod common;

#[tokio::test]
async fn a_scaled_down_cron_outage_run_catches_up_exactly_what_the_annotations_allow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/cron-outage.yaml"))
        .expect("the scenario");
    let mut spec: serde_yaml::Value = serde_yaml::from_str(&full).expect("yaml");
    spec["cronjobs"] = 12.into();
    spec["clock_speed"] = 240.into();
    spec["run_before"] = "20m".into();
    spec["outage"] = "2h".into();
    spec["run_after"] = "20m".into();
    let out = dir.path().join("out");
    let common::Ran { output, report, shown } =
        common::run_scenario(dir.path(), &serde_yaml::to_string(&spec).expect("yaml"), &out, &[]).await;
    // Killed at :50, started again half a period after 2 hours: (00:50, 03:10] holds 7 times of a
    // 20-minute schedule, more than the catch-up of 3 allows.
    assert_eq!(report["missed_per_cronjob"], 7, "{shown}");
    let audits: Vec<&str> =
        report["audits"].as_array().expect("audits").iter().filter_map(|a| a["name"].as_str()).collect();
    assert_eq!(
        audits,
        [
            "catch-up-exactly-as-allowed",
            "no-time-ran-twice",
            "times-outside-the-outage-ran-once",
            "next-schedule-time-annotated",
            "catch-up-counted"
        ]
    );
    for audit in report["audits"].as_array().expect("audits") {
        assert_eq!(audit["passed"], true, "audit {audit}\nviolations: {:#}\n{shown}", report["violations"]);
    }
    // Four CronJobs per group: catch-up 3 runs 2 more than upstream would, the deadline group 1.
    assert_eq!(report["audits"][4]["measured"], "12", "{report:#}");
    assert_eq!(output.status.success(), report["passed"] == true, "the exit code says the verdict\n{shown}");
}
