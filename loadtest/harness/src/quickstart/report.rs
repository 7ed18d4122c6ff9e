//! `loadtest up`'s report: what the Jobs ended as against what each must end as, how the fleet
//! handled the drain and the kill (from the shard map the cluster holds), the hand-overs and
//! unowned time (from the audit log), the audits, and the commands to look around. Written as
//! `up-report.json` and printed.

use std::collections::BTreeMap;

use batchfleet_audits::Outcome;
use serde::Serialize;

use crate::run::faults::FaultRecord;
use crate::run::report::{HandOverReport, ProcessReport};

#[derive(Debug, Default, Serialize)]
pub struct JobsReport {
    pub planned: usize,
    pub created: usize,
    pub create_errors: Vec<String>,
    /// The CronJob's Jobs seen.
    pub cron_runs: usize,
    pub complete: usize,
    pub failed: usize,
    /// Jobs deleted by their TTL after they finished.
    pub ttl_deleted: usize,
    /// Jobs that ended as their `demo.batchfleet.io/expect` label says.
    pub as_expected: usize,
    /// `namespace/name: expected X, ended Y`.
    pub unexpected: Vec<String>,
    pub unfinished: Vec<String>,
}

/// What happened to a worker's shards after a fault, by the shard map's snapshots.
#[derive(Debug, Serialize)]
pub struct FaultHandling {
    pub action: String,
    pub worker: String,
    pub at_seconds: f64,
    pub shards_before: usize,
    /// Seconds from the fault until the worker held no shard and no move was in progress.
    pub handed_over_after_seconds: Option<f64>,
    /// How many of its shards each other worker gained meanwhile.
    pub gained: BTreeMap<String, usize>,
}

#[derive(Debug, Serialize)]
pub struct UpReport {
    pub mode: String,
    pub duration_seconds: f64,
    pub wall_seconds: f64,
    pub passed: bool,
    pub jobs: JobsReport,
    pub faults: Vec<FaultRecord>,
    pub fleet: Vec<FaultHandling>,
    /// Shards per worker in the shard map at the end.
    pub shards_now: BTreeMap<String, usize>,
    pub hand_overs: HandOverReport,
    pub audits: Vec<Outcome>,
    /// The violations of each failed audit (the first few).
    pub violations: BTreeMap<String, Vec<String>>,
    pub processes: Vec<ProcessReport>,
    pub commands: Vec<String>,
    pub files: BTreeMap<String, String>,
}

/// The terminal summary.
pub fn summary(r: &UpReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let j = &r.jobs;
    let verdict = if r.passed { "every Job ended as expected and every audit passed" } else { "FAILED" };
    let _ = writeln!(
        s,
        "loadtest up ({}): {:.0} s of work, {:.0} s in all: {verdict}",
        r.mode, r.duration_seconds, r.wall_seconds
    );
    let _ = writeln!(
        s,
        "jobs: {} created of {} planned, CronJob runs {}: {} Complete, {} Failed, {} deleted by their TTL; {} as expected",
        j.created, j.planned, j.cron_runs, j.complete, j.failed, j.ttl_deleted, j.as_expected
    );
    for line in j.unexpected.iter().chain(&j.unfinished).chain(&j.create_errors).take(10) {
        let _ = writeln!(s, "  {line}");
    }
    if !r.fleet.is_empty() {
        let _ = writeln!(s, "fleet (from the shard map in the cluster):");
    }
    for f in &r.fleet {
        let gained: Vec<String> = f.gained.iter().map(|(w, n)| format!("{w} +{n}")).collect();
        let outcome = match f.handed_over_after_seconds {
            Some(after) => format!("all moved within {after:.1} s ({})", gained.join(", ")),
            None => "still held at the end".to_string(),
        };
        let _ = writeln!(
            s,
            "  {:>5.1} s  {} {}: it held {} shards; {outcome}",
            f.at_seconds, f.action, f.worker, f.shards_before
        );
    }
    if !r.shards_now.is_empty() {
        let now: Vec<String> = r.shards_now.iter().map(|(w, n)| format!("{w} {n}")).collect();
        let _ = writeln!(s, "  now: {}", now.join(", "));
    }
    let h = &r.hand_overs;
    let _ = writeln!(
        s,
        "hand-overs in the workload's shards (from the audit log): {}; gap p50 {:.1} s, p99 {:.1} s, max {:.1} s; unowned with work {:.1} s in all",
        h.count, h.gap_seconds.p50, h.gap_seconds.p99, h.gap_seconds.max, h.unowned_seconds
    );
    let _ = writeln!(s, "audits:");
    for o in &r.audits {
        let mark = if o.passed { "ok  " } else { "FAIL" };
        let _ = writeln!(s, "  {mark} {:<36} {} (target: {})", o.name, o.measured, o.target);
        for v in r.violations.get(&o.name).into_iter().flatten().take(5) {
            let _ = writeln!(s, "         {v}");
        }
    }
    let _ = writeln!(s, "processes                           cpu s  peak RSS MiB");
    for p in &r.processes {
        let _ = writeln!(s, "  {:<32} {:>6.1} {:>8.1}", p.name, p.cpu_seconds, p.peak_rss_mib);
    }
    s
}
