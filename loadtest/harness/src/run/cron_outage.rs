//! `loadtest run cron-outage`: safe catch-up after an outage (docs/beyond-upstream.md). CronJobs
//! in three groups — upstream's behaviour (no annotation), `batchfleet.io/catch-up: "N"`, and a
//! large catch-up bounded by startingDeadlineSeconds — under one `fleet-worker --standalone` on
//! a sped-up clock (`--test-clock`, the time-warp the harness already uses for CronJobs). The
//! worker is killed for a stretch of that clock's time, then started again on the same clock.
//!
//! The kill, the restart and the end fall half-way between two schedule times, so the missed
//! times are known exactly: those in (kill, restart]. Audits from the sim's audit log and the
//! Jobs left (the worker runs only the CronJob controller, so no Job is ever deleted and a Job's
//! name, `<cronjob>-<minutes since epoch>`, says which time it ran):
//! - `catch-up-exactly-as-allowed`: per CronJob, the missed times that ran are exactly the ones
//!   its group allows (the most recent; the most recent N; those within the deadline, at most N);
//! - `no-time-ran-twice`: the successful Job creates in the audit log are as many as the Jobs
//!   (so no name was created twice), and no Job was deleted;
//! - `times-outside-the-outage-ran-once`: every time before the kill and after the restart ran;
//! - `next-schedule-time-annotated`: each CronJob's `batchfleet.io/next-schedule-time` is its
//!   next time at the end;
//! - `catch-up-counted`: the restarted worker's `batchfleet_cronjob_catch_up_runs_total` is
//!   the runs upstream would not have made.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use batchfleet_audits::Outcome;
use batchfleet_audits::cron::CronClock;
use batchfleet_cron::Schedule;
use batchfleet_sim::SimConfig;
use batchfleet_sim::audit::{AuditEvent, Stage};
use jiff::{SignedDuration, Timestamp, tz::TimeZone};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::process::Child;

use super::own_kind::{self, RunSim};
use crate::fleet_processes;

/// The `kind` of a scenario file this runner takes.
pub const KIND: &str = "cron-outage";
const CATCH_UP: &str = "batchfleet.io/catch-up";
const NEXT_SCHEDULE_TIME: &str = "batchfleet.io/next-schedule-time";

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub kind: String,
    pub description: String,
    /// CronJobs, one per namespace, in three groups by index (mod 3): none, catch-up, deadline.
    pub cronjobs: usize,
    /// The schedule is `*/every_minutes * * * *` (a divisor of 60).
    pub every_minutes: u32,
    /// How much faster than the wall clock the worker's clock runs.
    pub clock_speed: f64,
    /// On that clock: how long the worker runs before the outage, the outage, and after it.
    pub run_before: String,
    pub outage: String,
    pub run_after: String,
    /// The catch-up group's `batchfleet.io/catch-up`.
    pub catch_up: usize,
    /// The deadline group: `batchfleet.io/catch-up: "100"` and a startingDeadlineSeconds of this
    /// many schedule periods, so that exactly this many missed times are still startable.
    pub deadline_periods: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Upstream,
    CatchUp,
    Deadline,
}

impl Group {
    fn of(i: usize) -> Group {
        match i % 3 {
            0 => Group::Upstream,
            1 => Group::CatchUp,
            _ => Group::Deadline,
        }
    }
}

fn duration(d: &str) -> Result<SignedDuration, String> {
    humantime::parse_duration(d)
        .map_err(|e| e.to_string())
        .and_then(|d| SignedDuration::try_from(d).map_err(|e| e.to_string()))
}

/// The spec, or what is wrong with it (exit 2).
pub fn load(name_or_path: &str) -> Result<Spec, String> {
    let text = super::own_kind::read_spec(name_or_path).map_err(|e| format!("{name_or_path}: {e}"))?;
    let spec: Spec = serde_yaml::from_str(&text).map_err(|e| format!("{name_or_path}: {e}"))?;
    for (field, value) in
        [("run_before", &spec.run_before), ("outage", &spec.outage), ("run_after", &spec.run_after)]
    {
        duration(value).map_err(|e| format!("{name_or_path}: {field}: {e}"))?;
    }
    if spec.every_minutes == 0 || 60 % spec.every_minutes != 0 {
        return Err(format!("{name_or_path}: every_minutes: a divisor of 60"));
    }
    if spec.cronjobs < 3 || spec.catch_up == 0 || spec.deadline_periods == 0 {
        return Err(format!(
            "{name_or_path}: cronjobs (at least 3), catch_up and deadline_periods must be above 0"
        ));
    }
    if !(spec.clock_speed.is_finite() && spec.clock_speed >= 1.0) {
        return Err(format!("{name_or_path}: clock_speed: at least 1"));
    }
    Ok(spec)
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub scenario: String,
    pub spec: Spec,
    pub passed: bool,
    /// On the worker's clock (RFC 3339).
    pub started: String,
    pub killed: String,
    pub restarted: String,
    pub ended: String,
    /// Schedule times in the outage, per CronJob.
    pub missed_per_cronjob: usize,
    pub jobs: usize,
    pub successful_creates: usize,
    pub already_exists: usize,
    pub audits: Vec<Outcome>,
    pub violations: BTreeMap<String, Vec<String>>,
    pub files: BTreeMap<String, String>,
    pub wall_seconds: f64,
}

/// The first schedule time at or after `t`, plus half a period: a moment no sync can be about.
fn mid_period_after(schedule: &Schedule, t: Timestamp, period: SignedDuration) -> Timestamp {
    let before = (t - SignedDuration::from_nanos(1)).to_zoned(TimeZone::UTC);
    let next = schedule.next(&before).map_or(t, |z| z.timestamp());
    next + period / 2
}

/// The schedule times in `(after, until]`.
fn times_in(schedule: &Schedule, after: Timestamp, until: Timestamp) -> Vec<Timestamp> {
    let mut out = Vec::new();
    let mut t = after.to_zoned(TimeZone::UTC);
    while let Some(next) = schedule.next(&t) {
        if next.timestamp() > until {
            break;
        }
        out.push(next.timestamp());
        t = next;
    }
    out
}

/// Sleeps until the worker's clock shows `t`.
async fn until_clock(clock: &CronClock, t: Timestamp) {
    let wall = clock.wall_at(t);
    let wait = wall.duration_since(Timestamp::now());
    if let Ok(d) = Duration::try_from(wait) {
        tokio::time::sleep(d).await;
    }
}

struct Worker {
    child: Child,
    metrics: SocketAddr,
}

async fn start_worker(kubeconfig: &Path, logs: &Path, clock: &CronClock, n: usize) -> anyhow::Result<Worker> {
    let metrics: SocketAddr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let logs = logs.join(format!("worker-{n}"));
    let flags: Vec<String> =
        ["--test-clock", &clock.flag(), "--controllers", "cronjob", "--kube-api-qps", "0"]
            .into_iter()
            .map(String::from)
            .collect();
    let mut child = fleet_processes::start_standalone(kubeconfig, metrics, &logs, &flags)?;
    fleet_processes::wait_standalone_ready(&mut child, metrics, &logs, Duration::from_secs(120)).await?;
    Ok(Worker { child, metrics })
}

/// A counter's value in a Prometheus text exposition (0 when absent).
fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Runs the scenario; answers whether every audit passed, and the report's path.
pub async fn run(name: &str, spec: Spec, out: &Path) -> anyhow::Result<(bool, PathBuf)> {
    let wall = std::time::Instant::now();
    println!("scenario {name}: {}", spec.description);
    let RunSim { sim, kubeconfig, client, logs_dir, audit_path } =
        own_kind::start_sim(out, SimConfig { nodes: 1, kubelet: false, ..SimConfig::default() }).await?;

    let schedule_text = format!("*/{} * * * *", spec.every_minutes);
    let schedule =
        Schedule::parse_standard(&schedule_text).map_err(|e| anyhow::anyhow!(e.message().to_string()))?;
    let period = SignedDuration::from_mins(i64::from(spec.every_minutes));
    let deadline_seconds = period.as_secs() * i64::from(spec.deadline_periods);
    let names: Vec<(String, Group)> =
        (0..spec.cronjobs).map(|i| (format!("outage-{i:04}"), Group::of(i))).collect();
    println!("creating {} CronJobs ({schedule_text}), one per namespace", spec.cronjobs);
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for (ns, group) in &names {
        ns_api
            .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": ns}}))?)
            .await?;
        let (annotations, deadline) = match group {
            Group::Upstream => (json!({}), None),
            Group::CatchUp => (json!({CATCH_UP: spec.catch_up.to_string()}), None),
            Group::Deadline => (json!({CATCH_UP: "100"}), Some(deadline_seconds)),
        };
        let cj: CronJob = serde_json::from_value(json!({
            "metadata": {"name": "cj", "annotations": annotations},
            "spec": {"schedule": schedule_text, "startingDeadlineSeconds": deadline,
                     "successfulJobsHistoryLimit": 1000, "failedJobsHistoryLimit": 1000,
                     "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "busybox"}]}}}}}
        }))?;
        Api::<CronJob>::namespaced(client.clone(), ns).create(&PostParams::default(), &cj).await?;
    }

    let clock = CronClock::starting_now(spec.clock_speed);
    let started = clock.now();
    println!(
        "starting the worker on a clock {}× the wall clock (logs in {})",
        spec.clock_speed,
        logs_dir.display()
    );
    let mut worker = start_worker(&kubeconfig, &logs_dir, &clock, 1).await?;
    // The first time the worker surely saw start: the one after its start, half a period on.
    let from = mid_period_after(&schedule, clock.now(), period);
    let kill_at =
        mid_period_after(&schedule, from + duration(&spec.run_before).map_err(anyhow::Error::msg)?, period);
    until_clock(&clock, kill_at).await;
    worker.child.start_kill()?;
    worker.child.wait().await?;
    let killed = clock.now();
    println!("worker killed at {killed} (clock); the outage lasts {}", spec.outage);
    let restart_at =
        mid_period_after(&schedule, killed + duration(&spec.outage).map_err(anyhow::Error::msg)?, period);
    until_clock(&clock, restart_at).await;
    let restarted = clock.now();
    let mut worker = start_worker(&kubeconfig, &logs_dir, &clock, 2).await?;
    let ready = clock.now();
    println!("worker started again at {restarted} (clock), ready at {ready}");
    let end_at = mid_period_after(
        &schedule,
        restarted + duration(&spec.run_after).map_err(anyhow::Error::msg)?,
        period,
    );
    until_clock(&clock, end_at).await;
    let cronjobs: Vec<CronJob> =
        Api::<CronJob>::all(client.clone()).list(&ListParams::default()).await?.items;
    let end = clock.now();
    let metrics = fleet_processes::http_get(worker.metrics, "/metrics").await.unwrap_or_default();
    worker.child.start_kill()?;
    worker.child.wait().await?;
    let jobs: Vec<Job> = Api::<Job>::all(client.clone()).list(&ListParams::default()).await?.items;
    let events = super::settled_audit_log(&audit_path).await.context("reading the audit log")?;
    drop(sim);

    // Which times ran, per CronJob, from the Jobs' names.
    let mut ran: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    for job in &jobs {
        let (ns, job_name) = (
            job.metadata.namespace.clone().unwrap_or_default(),
            job.metadata.name.clone().unwrap_or_default(),
        );
        if let Some(minutes) = job_name.strip_prefix("cj-").and_then(|m| m.parse::<i64>().ok()) {
            ran.entry(ns).or_default().insert(minutes * 60);
        }
    }
    let missed = times_in(&schedule, killed, restarted);
    let mut wrong_catch_up = Vec::new();
    let mut wrong_outside = Vec::new();
    let mut extra_runs_expected = 0usize;
    let outside: Vec<Timestamp> =
        times_in(&schedule, from, killed).into_iter().chain(times_in(&schedule, ready, end)).collect();
    for (ns, group) in &names {
        let times = ran.get(ns).cloned().unwrap_or_default();
        let allowed: Vec<i64> = match group {
            Group::Upstream => missed.iter().rev().take(1).map(|t| t.as_second()).collect(),
            Group::CatchUp => missed.iter().rev().take(spec.catch_up).map(|t| t.as_second()).collect(),
            Group::Deadline => missed
                .iter()
                .rev()
                .take(100)
                .filter(|t| t.as_second() + deadline_seconds >= restarted.as_second())
                .map(|t| t.as_second())
                .collect(),
        };
        extra_runs_expected += allowed.len().saturating_sub(1);
        let allowed: BTreeSet<i64> = allowed.into_iter().collect();
        let in_outage: BTreeSet<i64> =
            missed.iter().map(|t| t.as_second()).filter(|t| times.contains(t)).collect();
        if in_outage != allowed {
            let label = |s: &BTreeSet<i64>| {
                s.iter()
                    .filter_map(|t| Timestamp::from_second(*t).ok())
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            wrong_catch_up.push(format!(
                "{ns} ({group:?}): ran [{}], allowed [{}]",
                label(&in_outage),
                label(&allowed)
            ));
        }
        for t in &outside {
            if !times.contains(&t.as_second()) {
                wrong_outside.push(format!("{ns}: {t} did not run"));
            }
        }
    }
    let job_creates: Vec<&AuditEvent> = events
        .iter()
        .filter(|e| e.stage == Stage::ResponseComplete && e.verb == "create")
        .filter(|e| e.object_ref.as_ref().is_some_and(|o| o.resource == "jobs" && o.subresource.is_empty()))
        .collect();
    let code = |e: &AuditEvent| e.response_status.as_ref().map_or(0, |s| s.code);
    let successful_creates = job_creates.iter().filter(|e| code(e) == 201).count();
    let already_exists = job_creates.iter().filter(|e| code(e) == 409).count();
    let job_deletes = events
        .iter()
        .filter(|e| e.stage == Stage::ResponseComplete && e.verb == "delete")
        .filter(|e| e.object_ref.as_ref().is_some_and(|o| o.resource == "jobs"))
        .count();
    let mut twice = Vec::new();
    if successful_creates != jobs.len() {
        twice.push(format!(
            "{successful_creates} successful Job creates in the audit log, {} Jobs",
            jobs.len()
        ));
    }
    if job_deletes > 0 {
        twice.push(format!("{job_deletes} Job DELETEs: a time could have run twice unseen"));
    }
    let mut wrong_next = Vec::new();
    for cj in &cronjobs {
        let ns = cj.metadata.namespace.clone().unwrap_or_default();
        let want = schedule
            .next(&end.to_zoned(TimeZone::UTC))
            .map(|z| z.timestamp().strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
        let got = cj.metadata.annotations.as_ref().and_then(|a| a.get(NEXT_SCHEDULE_TIME)).cloned();
        if got != want {
            wrong_next.push(format!("{ns}: {NEXT_SCHEDULE_TIME} {got:?}, want {want:?}"));
        }
    }
    let caught_up = counter(&metrics, "batchfleet_cronjob_catch_up_runs_total");
    let mut audits = vec![
        Outcome::from_violations(
            "catch-up-exactly-as-allowed",
            "the missed times that ran are exactly those each CronJob's annotation allows (none: the most recent only)",
            names.len(),
            "CronJobs",
            wrong_catch_up,
        ),
        Outcome::from_violations(
            "no-time-ran-twice",
            "as many successful Job creates in the audit log as Jobs, no Job deleted",
            successful_creates,
            "Job creates",
            twice,
        ),
        Outcome::from_violations(
            "times-outside-the-outage-ran-once",
            "every schedule time before the kill and after the restart ran",
            outside.len() * names.len(),
            "scheduled times",
            wrong_outside,
        ),
        Outcome::from_violations(
            "next-schedule-time-annotated",
            "batchfleet.io/next-schedule-time is each CronJob's next time at the end",
            cronjobs.len(),
            "CronJobs",
            wrong_next,
        ),
    ];
    audits.push(Outcome {
        name: "catch-up-counted".into(),
        target: format!("batchfleet_cronjob_catch_up_runs_total = {extra_runs_expected}"),
        measured: format!("{caught_up}"),
        passed: caught_up == extra_runs_expected as f64,
        skipped: None,
        violations: vec![],
    });
    let passed = audits.iter().all(Outcome::not_failed);
    let violations = crate::run::report::violations(audits.iter());
    let report = Report {
        scenario: name.to_string(),
        spec,
        passed,
        started: started.to_string(),
        killed: killed.to_string(),
        restarted: restarted.to_string(),
        ended: end.to_string(),
        missed_per_cronjob: missed.len(),
        jobs: jobs.len(),
        successful_creates,
        already_exists,
        audits,
        violations,
        files: BTreeMap::from([
            ("audit_log".to_string(), audit_path.display().to_string()),
            ("process_logs".to_string(), logs_dir.display().to_string()),
        ]),
        wall_seconds: wall.elapsed().as_secs_f64(),
    };
    let path = own_kind::write_report(out, &report, &report.audits)?;
    Ok((report.passed, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_scenario_loads_and_bad_values_are_refused() {
        let spec = load("cron-outage").expect("the shipped file");
        assert_eq!((spec.cronjobs, spec.every_minutes, spec.catch_up), (1000, 20, 3));
        let dir = tempfile::tempdir().unwrap();
        let text = crate::run::own_kind::read_spec("cron-outage").unwrap();
        for (from, to, field) in [
            ("every_minutes: 20", "every_minutes: 7", "every_minutes"),
            ("outage: 3h", "outage: soon", "outage"),
            ("catch_up: 3", "catch_up: 0", "catch_up"),
        ] {
            let file = dir.path().join("bad.yaml");
            std::fs::write(&file, text.replace(from, to)).unwrap();
            let e = load(file.to_str().unwrap()).expect_err(to);
            assert!(e.contains(field), "{e}");
        }
    }

    #[test]
    fn the_kill_and_restart_moments_fall_half_way_between_schedule_times() {
        let schedule = Schedule::parse_standard("*/20 * * * *").unwrap();
        let period = SignedDuration::from_mins(20);
        let t = |s: &str| s.parse::<Timestamp>().unwrap();
        assert_eq!(mid_period_after(&schedule, t("2026-01-01T00:05:00Z"), period), t("2026-01-01T00:30:00Z"));
        assert_eq!(mid_period_after(&schedule, t("2026-01-01T00:20:00Z"), period), t("2026-01-01T00:30:00Z"));
        // Killed at 00:30, restarted at 02:50: 00:40 … 02:40 were missed.
        let missed = times_in(&schedule, t("2026-01-01T00:30:00Z"), t("2026-01-01T02:50:00Z"));
        assert_eq!(missed.len(), 7);
        assert_eq!(missed[0], t("2026-01-01T00:40:00Z"));
        assert_eq!(missed[6], t("2026-01-01T02:40:00Z"));
    }

    #[test]
    fn a_counter_sums_its_series() {
        let text = "# HELP x\nbatchfleet_cronjob_catch_up_runs_total 12\nother 3\n";
        assert_eq!(counter(text, "batchfleet_cronjob_catch_up_runs_total"), 12.0);
        assert_eq!(counter(text, "missing"), 0.0);
    }
}
