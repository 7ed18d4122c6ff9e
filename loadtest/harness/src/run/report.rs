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
    pub audits: Vec<Outcome>,
    pub goals: Vec<Outcome>,
    /// The violations of each failed audit or goal (the first few).
    pub violations: BTreeMap<String, Vec<String>>,
    pub jobs: JobCounts,
    pub latency_seconds: BTreeMap<String, Percentiles>,
    pub ttl_lag_seconds: Percentiles,
    pub hand_overs: HandOverReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chaos: Option<ChaosPlan>,
    pub faults: Vec<FaultRecord>,
    pub processes: Vec<ProcessReport>,
    pub api_requests: Vec<RequestCount>,
    pub files: BTreeMap<String, String>,
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
        violations: Vec::new(),
    }
}

/// The scenario's goals against what was measured; an unmeasured latency goal (no sample) fails.
pub fn goals(
    goals: &Goals,
    latency: &BTreeMap<String, Percentiles>,
    ttl_lag: &Percentiles,
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
    let j = &report.jobs;
    let _ = writeln!(
        s,
        "jobs: {} planned, {} created ({} create errors), {} complete, {} failed, {} unfinished",
        j.planned, j.created, j.create_errors, j.complete, j.failed, j.unfinished
    );
    for (title, list) in [("audits", &report.audits), ("goals", &report.goals)] {
        let _ = writeln!(s, "{title}:");
        for o in list.iter() {
            let mark = if o.passed { "ok  " } else { "FAIL" };
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
    let h = &report.hand_overs;
    let _ = writeln!(
        s,
        "hand-overs: {}; gap p50 {:.2} s, p99 {:.2} s, max {:.2} s; unowned with work {:.1} s in all",
        h.count, h.gap_seconds.p50, h.gap_seconds.p99, h.gap_seconds.max, h.unowned_seconds
    );
    let _ = writeln!(s, "processes                           cpu s  peak RSS MiB");
    for p in &report.processes {
        let _ = writeln!(s, "  {:<32} {:>6.1} {:>8.1}", p.name, p.cpu_seconds, p.peak_rss_mib);
    }
    let requests: u64 = report.api_requests.iter().map(|r| r.requests).sum();
    let _ = writeln!(s, "API requests: {requests} (by verb, resource and process in the report)");
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
}
