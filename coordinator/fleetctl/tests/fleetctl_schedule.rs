//! `fleetctl schedule` as users run it: RFC3339 UTC lines, exit 2 with the reason on bad input.

use std::process::Command;

fn fleetctl(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetctl")).args(args).output().expect("fleetctl runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn prints_the_controllers_fire_times_in_utc() {
    let (code, out, _) = fleetctl(&[
        "schedule",
        "0 9 * * 1-5",
        "--time-zone",
        "America/New_York",
        "--from",
        "2026-11-06T15:00:00Z",
        "--count",
        "2",
    ]);
    assert_eq!(code, 0);
    // Friday after 09:00 New York → Monday and Tuesday, 09:00 EST = 14:00Z.
    assert_eq!(out, "2026-11-09T14:00:00Z\n2026-11-10T14:00:00Z\n");
}

#[test]
fn spring_forward_skips_the_missing_hour() {
    let (code, out, _) = fleetctl(&[
        "schedule",
        "30 2 * * *",
        "--time-zone",
        "America/New_York",
        "--from",
        "2027-03-13T12:00:00Z",
        "--count",
        "2",
    ]);
    assert_eq!(code, 0);
    // 2027-03-14 02:30 does not exist in New York: the next fire is on the 15th (EDT, UTC-4).
    assert_eq!(out, "2027-03-15T06:30:00Z\n2027-03-16T06:30:00Z\n");
}

#[test]
fn invalid_input_exits_2_with_the_reason() {
    let (code, out, err) = fleetctl(&["schedule", "* * * *"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.contains("expected exactly 5 fields, found 4"), "{err}");
    let (code, _, err) = fleetctl(&["schedule", "@hourly", "--time-zone", "Nowhere/Town"]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid timeZone"), "{err}");
    let (code, _, err) = fleetctl(&["schedule", "@hourly", "--from", "yesterday"]);
    assert_eq!(code, 2);
    assert!(err.contains("--from"), "{err}");
    let (code, _, _) = fleetctl(&["schedule"]);
    assert_eq!(code, 2);
}

#[test]
fn a_cronjob_as_kubectl_prints_it_shows_the_controllers_next_time_beside_the_preview() {
    // As `kubectl get cronjob nightly -o json > nightly.json` writes it: schedule and zone from
    // the spec, the controller's batchfleet.io/next-schedule-time from the annotations.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("nightly.json");
    let cronjob = r#"{"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "annotations": {"batchfleet.io/next-schedule-time": "2026-11-09T14:00:00Z"}},
        "spec": {"schedule": "0 9 * * 1-5", "timeZone": "America/New_York", "jobTemplate": {}}}"#;
    std::fs::write(&file, cronjob).expect("write");
    let path = file.to_str().expect("utf-8");
    let (code, out, err) =
        fleetctl(&["schedule", "--cronjob", path, "--from", "2026-11-06T15:00:00Z", "--count", "2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "2026-11-09T14:00:00Z\n2026-11-10T14:00:00Z\nbatchfleet.io/next-schedule-time: 2026-11-09T14:00:00Z\n"
    );
    // Not annotated (not synced yet, or suspended): says so.
    std::fs::write(&file, cronjob.replace("batchfleet.io/next-schedule-time", "other")).expect("write");
    let (code, out, _) =
        fleetctl(&["schedule", "--cronjob", path, "--from", "2026-11-06T15:00:00Z", "--count", "1"]);
    assert_eq!((code, out.as_str()), (0, "2026-11-09T14:00:00Z\nbatchfleet.io/next-schedule-time: none\n"));
    // Not a CronJob, or both a schedule and a CronJob: exit 2.
    std::fs::write(&file, "{}").expect("write");
    let (code, _, err) = fleetctl(&["schedule", "--cronjob", path]);
    assert_eq!(code, 2);
    assert!(err.contains("no spec.schedule"), "{err}");
    let (code, _, _) = fleetctl(&["schedule", "@hourly", "--cronjob", path]);
    assert_eq!(code, 2);
}
