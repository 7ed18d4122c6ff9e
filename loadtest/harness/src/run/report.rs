//! A run's report: the JSON file (`report.json`, with top-level `audits` and `goals` arrays of
//! `{name, target, measured, passed}`), the terminal summary and the latency CDF plot.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use batchfleet_audits::Outcome;
use batchfleet_audits::api_usage::RequestCount;
use serde::Serialize;

use super::faults::FaultRecord;
use crate::plot::{self, Series};
use crate::proc_stat::ProcessUsage;
use crate::scenario::{Goals, Span};

/// p50, p90, p99 and max of a sample, in seconds.
#[derive(Debug, Clone, Copy, Serialize, Default, PartialEq)]
pub struct Percentiles {
    pub count: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles; all zero for an empty sample.
    pub fn of(samples: &[f64]) -> Self {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank = |p: f64| -> f64 {
            if sorted.is_empty() {
                return 0.0;
            }
            let i = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[i]
        };
        Self {
            count: sorted.len(),
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            max: sorted.last().copied().unwrap_or(0.0),
        }
    }
}

/// The latencies of the workload's Jobs, from their create to what the watches saw.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    pub first_pod: Vec<f64>,
    pub all_pods_created: Vec<f64>,
    pub finished: Vec<f64>,
}

/// Pods completed (Succeeded or Failed, as the watch saw them) and Jobs finished (Complete or
/// Failed) over the run.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Throughput {
    pub pods_completed: usize,
    /// Completions per second between the times 10 % and 90 % of them were seen: the steady
    /// rate, without the ramp up and the tail.
    pub steady_pods_per_second: f64,
    pub jobs_finished: usize,
    /// 90 % of the Jobs ÷ the seconds from the workload's start until they had finished: for a
    /// workload sent at once (the scaling run's), the rate the controllers finish Jobs end to
    /// end, every write of each counted (a Job's pods complete long before its last status
    /// write when the client rate is what bounds them).
    pub jobs_per_second_to_90_percent: f64,
    /// `[second since the workload started, pods completed, Jobs finished in that second]`.
    pub per_second: Vec<[f64; 3]>,
    /// The pods the finished Jobs' final status counts (succeeded and failed) ÷ the seconds from
    /// the workload's start until the last of them finished: pod lifecycles per second end to
    /// end, from the objects (a watch that fell behind and listed again misses completions).
    pub pod_lifecycles_per_second: f64,
}

/// [`Throughput::pod_lifecycles_per_second`] of Jobs that finished at each time with each
/// count of pods.
pub fn lifecycle_rate(jobs: &[(jiff::Timestamp, u64)], start: jiff::Timestamp) -> f64 {
    let pods: u64 = jobs.iter().map(|(_, pods)| pods).sum();
    match jobs.iter().map(|(t, _)| *t).max() {
        Some(last) if last > start => pods as f64 / last.duration_since(start).as_secs_f64(),
        _ => 0.0,
    }
}

/// Seconds since `start` of each time, ascending.
fn offsets(times: &[jiff::Timestamp], start: jiff::Timestamp) -> Vec<f64> {
    let mut offsets: Vec<f64> =
        times.iter().map(|t| t.duration_since(start).as_secs_f64().max(0.0)).collect();
    offsets.sort_by(f64::total_cmp);
    offsets
}

impl Throughput {
    /// From the pods' completion times and the Jobs' finish times with the pods each counts
    /// (succeeded and failed), against the workload's start.
    pub fn of(
        pods: &[jiff::Timestamp],
        finished_jobs: &[(jiff::Timestamp, u64)],
        start: jiff::Timestamp,
    ) -> Self {
        let job_times: Vec<jiff::Timestamp> = finished_jobs.iter().map(|(t, _)| *t).collect();
        let (pods, jobs) = (offsets(pods, start), offsets(&job_times, start));
        let last = pods
            .last()
            .copied()
            .into_iter()
            .chain(jobs.last().copied())
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
        let mut per_second: Vec<[f64; 3]> = match last {
            Some(last) => (0..=last.floor() as usize).map(|s| [s as f64, 0.0, 0.0]).collect(),
            None => Vec::new(),
        };
        for (column, times) in [(1, &pods), (2, &jobs)] {
            for o in times {
                per_second[o.floor() as usize][column] += 1.0;
            }
        }
        let to_90_percent = match jobs.len() {
            0 => 0.0,
            n => {
                let k = (n * 9).div_ceil(10);
                let t = jobs[k - 1];
                if t > 0.0 { k as f64 / t } else { 0.0 }
            }
        };
        Self {
            pods_completed: pods.len(),
            steady_pods_per_second: steady_rate(&pods),
            jobs_finished: jobs.len(),
            jobs_per_second_to_90_percent: to_90_percent,
            per_second,
            pod_lifecycles_per_second: lifecycle_rate(finished_jobs, start),
        }
    }
}

/// Events per second between the 10th and 90th percentile of `sorted` times; over the whole
/// span when that window is too short to measure.
fn steady_rate(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n < 2 {
        return 0.0;
    }
    let (lo, hi) = (n / 10, n - 1 - n / 10);
    let span = sorted[hi] - sorted[lo];
    if hi > lo && span > 0.0 {
        return (hi - lo) as f64 / span;
    }
    let whole = sorted[n - 1] - sorted[0];
    if whole > 0.0 { (n - 1) as f64 / whole } else { 0.0 }
}

pub fn plot_throughput(path: &Path, scenario: &str, throughput: &Throughput) -> anyhow::Result<()> {
    let column = |i: usize| throughput.per_second.iter().map(|p| (p[0], p[i])).collect();
    let series = [
        Series { name: "pods completed per second".into(), points: column(1) },
        Series { name: "Jobs finished per second".into(), points: column(2) },
    ];
    plot::line_chart(
        path,
        &format!("{scenario}: throughput over time"),
        ("seconds since the workload started", "per second"),
        &series,
        false,
    )
}

/// The shards' hand-overs in the workload's namespaces, from the audit log
/// (`batchfleet_audits::handover`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct HandOverReport {
    /// Writer changes (and shards left without one while they had work).
    pub count: usize,
    /// From when a shard provably needed its new owner until that owner's first write.
    pub gap_seconds: Percentiles,
    /// Seconds shards with unfinished Jobs had no acting owner, summed.
    pub unowned_seconds: f64,
}

/// A chaos run's plan: its seed, and every fault it drew (the same for the same seed).
#[derive(Debug, Clone, Serialize)]
pub struct ChaosPlan {
    pub seed: u64,
    pub faults: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct JobCounts {
    pub planned: usize,
    pub created: usize,
    pub create_errors: usize,
    pub seen: usize,
    pub complete: usize,
    pub failed: usize,
    pub unfinished: usize,
}

#[derive(Debug, Serialize)]
pub struct ProcessReport {
    pub name: String,
    pub pid: u32,
    pub cpu_seconds: f64,
    pub peak_rss_mib: f64,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub scenario: String,
    pub description: String,
    pub started: String,
    pub wall_seconds: f64,
    pub passed: bool,
    /// The cluster the run went against, and who ran the controllers on it.
    pub cluster: String,
    pub fleet: String,
    /// What the audits were made from: the sim's audit log and watches, or watches alone.
    pub audits_from: String,
    pub audits: Vec<Outcome>,
    pub goals: Vec<Outcome>,
    /// The violations of each failed audit or goal (the first few).
    pub violations: BTreeMap<String, Vec<String>>,
    pub jobs: JobCounts,
    pub latency_seconds: BTreeMap<String, Percentiles>,
    /// Finish + TTL → the delete (from the audit log, or as a watch saw it).
    pub ttl_lag_seconds: Percentiles,
    /// A CronJob's scheduled time → its Job seen (wall seconds).
    pub cron_skew_seconds: Percentiles,
    pub throughput: Throughput,
    pub hand_overs: HandOverReport,
    /// A `rolling-restart`'s steps and figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<super::rollout::RolloutReport>,
    /// With `crash_recovery`: each kill's recovery, and their distribution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<super::recovery::RecoveryReport>,
    /// The workers' lease lapses, false expiries apart (a fleet the harness started).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_lapses: Option<super::lease_lapses::LeaseLapses>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chaos: Option<ChaosPlan>,
    pub faults: Vec<FaultRecord>,
    pub processes: Vec<ProcessReport>,
    /// From the audit log; `null` without one (a cluster through a kubeconfig).
    pub api_requests: Option<Vec<RequestCount>>,
    pub files: BTreeMap<String, String>,
    /// Each workload Job's final status, for a replay to compare.
    #[serde(skip)]
    pub final_statuses: super::replay::FinalStatuses,
    #[serde(skip)]
    pub namespaces: Vec<String>,
}

/// The violations of each outcome that has any, by its name.
pub fn violations<'a>(outcomes: impl Iterator<Item = &'a Outcome>) -> BTreeMap<String, Vec<String>> {
    outcomes.filter(|o| !o.violations.is_empty()).map(|o| (o.name.clone(), o.violations.clone())).collect()
}

/// Lists a plot among the report's files as `key`, or logs why it is missing.
pub fn record_plot(files: &mut BTreeMap<String, String>, key: &str, path: &Path, drawn: anyhow::Result<()>) {
    match drawn {
        Ok(()) => {
            files.insert(key.into(), path.display().to_string());
        }
        Err(e) => tracing::warn!(error = %e, plot = key, "plotting failed"),
    }
}

impl Report {
    /// One more audit, counted in `passed` and `violations`.
    pub fn add_audit(&mut self, audit: Outcome) {
        self.passed &= audit.not_failed();
        if !audit.violations.is_empty() {
            self.violations.insert(audit.name.clone(), audit.violations.clone());
        }
        self.audits.push(audit);
    }
}

pub fn processes(usage: &BTreeMap<String, ProcessUsage>) -> Vec<ProcessReport> {
    usage
        .iter()
        .map(|(name, u)| ProcessReport {
            name: name.clone(),
            pid: u.pid,
            cpu_seconds: u.cpu_seconds,
            peak_rss_mib: u.peak_rss_bytes as f64 / (1024.0 * 1024.0),
        })
        .collect()
}

fn at_most(name: &str, goal: Span, measured: f64, what: &str) -> Outcome {
    Outcome {
        name: name.into(),
        target: format!("≤ {goal}"),
        measured: format!("{measured:.3} s {what}"),
        passed: measured <= goal.0.as_secs_f64(),
        skipped: None,
        violations: Vec::new(),
    }
}

/// The scenario's goals against what was measured; an unmeasured latency goal (no sample) fails.
pub fn goals(
    goals: &Goals,
    latency: &BTreeMap<String, Percentiles>,
    ttl_lag: &Percentiles,
    throughput: &Throughput,
    processes: &[ProcessReport],
) -> Vec<Outcome> {
    let mut out = Vec::new();
    let mut latency_goal = |name: &str, key: &str, goal: Option<Span>| {
        if let Some(goal) = goal {
            match latency.get(key).filter(|p| p.count > 0) {
                Some(p) => out.push(at_most(name, goal, p.p99, &format!("p99 of {}", p.count))),
                None => out.push(Outcome {
                    name: name.into(),
                    target: format!("≤ {goal}"),
                    measured: "no sample".into(),
                    passed: false,
                    skipped: None,
                    violations: Vec::new(),
                }),
            }
        }
    };
    latency_goal("first-pod-p99", "job_created_to_first_pod", goals.first_pod_p99);
    latency_goal("all-pods-created-p99", "job_created_to_all_pods_created", goals.all_pods_created_p99);
    latency_goal("finished-p99", "job_created_to_finished", goals.finished_p99);
    if let Some(goal) = goals.ttl_lag_max {
        out.push(at_most("ttl-lag-max", goal, ttl_lag.max, &format!("max of {}", ttl_lag.count)));
    }
    if let Some(limit) = goals.peak_rss_mib {
        let (name, peak) = processes
            .iter()
            .filter(|p| p.name != HARNESS)
            .map(|p| (p.name.as_str(), p.peak_rss_mib))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or(("none", 0.0));
        out.push(Outcome {
            name: "peak-rss".into(),
            target: format!("≤ {limit} MiB per fleet process"),
            measured: format!("{peak:.1} MiB ({name})"),
            passed: peak <= limit,
            skipped: None,
            violations: Vec::new(),
        });
    }
    if let Some(least) = goals.pod_lifecycles_per_second {
        let rate = throughput.pod_lifecycles_per_second;
        out.push(Outcome {
            name: "pod-lifecycles-per-second".into(),
            target: format!("≥ {least}/s, the finished Jobs' pods from the start to the last finish"),
            measured: format!("{rate:.0}/s"),
            passed: rate >= least,
            skipped: None,
            violations: Vec::new(),
        });
    }
    out
}

/// The harness's own process (the sim runs inside it) in the process list.
pub const HARNESS: &str = "loadtest (sim + harness)";

pub fn latency_table(latencies: &Latencies) -> BTreeMap<String, Percentiles> {
    BTreeMap::from([
        ("job_created_to_first_pod".to_string(), Percentiles::of(&latencies.first_pod)),
        ("job_created_to_all_pods_created".to_string(), Percentiles::of(&latencies.all_pods_created)),
        ("job_created_to_finished".to_string(), Percentiles::of(&latencies.finished)),
    ])
}

pub fn plot_latencies(path: &Path, scenario: &str, latencies: &Latencies) -> anyhow::Result<()> {
    let series = [
        ("creation → first pod", &latencies.first_pod),
        ("creation → all pods created", &latencies.all_pods_created),
        ("creation → finished", &latencies.finished),
    ]
    .into_iter()
    .map(|(name, samples)| {
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        Series { name: name.into(), points: plot::cdf_points(&sorted, 400) }
    })
    .collect::<Vec<_>>();
    plot::latency_cdf_chart(path, &format!("{scenario}: Job latencies"), &series, None)
}

/// The human summary: what ran, each audit and goal, the latencies and the processes.
pub fn summary(report: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let verdict = if report.passed { "PASSED" } else { "FAILED" };
    let _ = writeln!(s, "scenario {} {verdict} in {:.0} s", report.scenario, report.wall_seconds);
    let _ = writeln!(
        s,
        "cluster: {}; fleet: {}; audits from {}",
        report.cluster, report.fleet, report.audits_from
    );
    let j = &report.jobs;
    let _ = writeln!(
        s,
        "jobs: {} planned, {} created ({} create errors), {} complete, {} failed, {} unfinished",
        j.planned, j.created, j.create_errors, j.complete, j.failed, j.unfinished
    );
    for (title, list) in [("audits", &report.audits), ("goals", &report.goals)] {
        let _ = writeln!(s, "{title}:");
        for o in list.iter() {
            let mark = match (o.passed, &o.skipped) {
                (true, _) => "ok  ",
                (false, Some(_)) => "SKIP",
                (false, None) => "FAIL",
            };
            let _ = writeln!(s, "  {mark} {:<36} {} (target: {})", o.name, o.measured, o.target);
            for v in report.violations.get(&o.name).into_iter().flatten().take(5) {
                let _ = writeln!(s, "         {v}");
            }
        }
    }
    let _ = writeln!(s, "latency (s)                         count    p50    p90    p99    max");
    for (name, p) in &report.latency_seconds {
        let _ = writeln!(
            s,
            "  {name:<32} {:>6} {:>6.2} {:>6.2} {:>6.2} {:>6.2}",
            p.count, p.p50, p.p90, p.p99, p.max
        );
    }
    for (name, p) in [
        ("cron skew (scheduled → created)", &report.cron_skew_seconds),
        ("TTL lag (expiry → deleted)", &report.ttl_lag_seconds),
    ] {
        if p.count > 0 {
            let _ = writeln!(
                s,
                "  {name:<32} {:>6} {:>6.2} {:>6.2} {:>6.2} {:>6.2}",
                p.count, p.p50, p.p90, p.p99, p.max
            );
        }
    }
    let t = &report.throughput;
    let peak = t.per_second.iter().map(|p| p[1]).fold(0.0, f64::max);
    let _ = writeln!(
        s,
        "throughput: {} pods completed, {:.1}/s steady (10–90 % of them), peak {peak:.0} in a second; \
         {} Jobs finished, 90 % of them at {:.1}/s; their pods at {:.1}/s end to end",
        t.pods_completed,
        t.steady_pods_per_second,
        t.jobs_finished,
        t.jobs_per_second_to_90_percent,
        t.pod_lifecycles_per_second
    );
    let h = &report.hand_overs;
    let _ = writeln!(
        s,
        "hand-overs: {}; gap p50 {:.2} s, p99 {:.2} s, max {:.2} s; unowned with work {:.1} s in all",
        h.count, h.gap_seconds.p50, h.gap_seconds.p99, h.gap_seconds.max, h.unowned_seconds
    );
    if let Some(r) = &report.rollout {
        let took = r.record.ended.duration_since(r.record.started).as_secs_f64();
        let _ = writeln!(
            s,
            "rollout: {} workers in {took:.1} s, {} moves over {} shards; {} hand-overs, gap p50 {:.3} s, \
             p99 {:.3} s; unowned with work {:.3} s; Jobs finished p99 {:.2} s during, {:.2} s before",
            r.record.steps.len(),
            r.record.moves,
            r.record.shards,
            r.hand_overs,
            r.gap_seconds.p50,
            r.gap_seconds.p99,
            r.unowned_seconds,
            r.rollout_finished_seconds.p99,
            r.baseline_finished_seconds.p99
        );
    }
    if let Some(recovery) = &report.recovery {
        s.push_str(&super::recovery::summary(recovery));
    }
    if let Some(l) = &report.lease_lapses {
        let _ = writeln!(
            s,
            "worker lease lapses: {} false expiries, {} during pauses",
            l.false_expiries, l.during_pauses
        );
    }
    let _ = writeln!(s, "processes                           cpu s  peak RSS MiB");
    for p in &report.processes {
        let _ = writeln!(s, "  {:<32} {:>6.1} {:>8.1}", p.name, p.cpu_seconds, p.peak_rss_mib);
    }
    match &report.api_requests {
        Some(counts) => {
            let requests: u64 = counts.iter().map(|r| r.requests).sum();
            let _ = writeln!(s, "API requests: {requests} (by verb, resource and process in the report)");
        }
        None => {
            let _ = writeln!(s, "API requests: not counted (no audit log on this cluster)");
        }
    }
    s
}

/// Seconds as a report shows a duration.
pub fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = Percentiles::of(&samples);
        assert_eq!((p.count, p.p50, p.p90, p.p99, p.max), (100, 50.0, 90.0, 99.0, 100.0));
        assert_eq!(Percentiles::of(&[]), Percentiles::default());
    }

    #[test]
    fn throughput_counts_each_second_and_the_steady_rate_leaves_out_ramp_and_tail() {
        let start: jiff::Timestamp = "2026-11-26T10:00:00Z".parse().expect("time");
        let at = |ms: i64| start + jiff::SignedDuration::from_millis(ms);
        // 100 completions at 20/s from 1 s, then a straggler at 30 s.
        let mut times: Vec<jiff::Timestamp> = (0..100).map(|i| at(1000 + i * 50)).collect();
        times.push(at(30_000));
        // Ten Jobs finishing one a second from 1 s: 90 % of them (9) by 9 s.
        let jobs: Vec<(jiff::Timestamp, u64)> = (1..=10).map(|i| (at(i * 1000), 10)).collect();
        let t = Throughput::of(&times, &jobs, start);
        assert_eq!((t.pods_completed, t.jobs_finished), (101, 10));
        assert_eq!(t.pod_lifecycles_per_second, 10.0, "100 pods of the Jobs by 10 s");
        assert_eq!(t.jobs_per_second_to_90_percent, 1.0);
        assert_eq!(t.per_second.len(), 31);
        assert_eq!((t.per_second[3][2], t.per_second[30][2]), (1.0, 0.0));
        assert_eq!(
            (t.per_second[0][1], t.per_second[1][1], t.per_second[5][1], t.per_second[30][1]),
            (0.0, 20.0, 20.0, 1.0)
        );
        assert!((t.steady_pods_per_second - 20.0).abs() < 0.5, "{}", t.steady_pods_per_second);
        assert_eq!(Throughput::of(&[], &[], start), Throughput::default());
        // 2 Jobs of 1,000 pods, the last finished 4 s after the start.
        assert_eq!(lifecycle_rate(&[(at(1000), 1000), (at(4000), 1000)], start), 500.0);
        assert_eq!(lifecycle_rate(&[], start), 0.0);
    }

    #[test]
    fn the_lifecycle_rate_goal_holds_the_steady_rate_to_its_least() {
        let least_2000 = Goals { pod_lifecycles_per_second: Some(2000.0), ..Goals::default() };
        let at = |rate: f64| Throughput { pod_lifecycles_per_second: rate, ..Throughput::default() };
        let outcome = |rate| goals(&least_2000, &BTreeMap::new(), &Percentiles::default(), &at(rate), &[]);
        let [fast] = outcome(2400.0).try_into().expect("one goal");
        assert!(fast.passed && fast.name == "pod-lifecycles-per-second", "{fast:?}");
        assert_eq!(fast.measured, "2400/s");
        let [slow] = outcome(1999.0).try_into().expect("one goal");
        assert!(!slow.passed, "{slow:?}");
        assert!(
            goals(&Goals::default(), &BTreeMap::new(), &Percentiles::default(), &at(1.0), &[]).is_empty()
        );
    }
}
