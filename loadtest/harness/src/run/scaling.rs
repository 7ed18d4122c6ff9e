//! The scaling run (`loadtest run scaling`): the same QPS-bound workload on a fresh sim for each
//! fleet size, every worker limited to the same client QPS, and on the single-process baseline
//! (`fleet-worker --standalone` at kube-controller-manager's defaults); then the steady
//! throughput of each, the scaling efficiency and the fleet-vs-baseline ratio as goals, and the
//! scaling curve as SVG. Each run keeps its own folder, report and audits; every audit of every
//! run counts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use batchfleet_audits::Outcome;
use jiff::Timestamp;
use serde::Serialize;
use tokio::time::Instant;

use super::report::{self, Report, seconds};
use super::{TargetArgs, run_once};
use crate::plot::{self, Series};
use crate::scenario::{ScalingSpec, Scenario};

/// kube-controller-manager's client defaults, the baseline's.
const BASELINE_QPS: f64 = 20.0;
const BASELINE_BURST: u32 = 30;

/// One run of the scaling run.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// `workers-4`, `baseline`.
    pub name: String,
    /// The fleet's workers; `null` for the baseline.
    pub workers: Option<usize>,
    /// Each worker's `--kube-api-qps`.
    pub kube_api_qps: f64,
    /// The curve's measure: Jobs finished per second until 90 % of them had (the workload is
    /// sent at once, so this is the rate the controllers finish them end to end).
    pub jobs_per_second: f64,
    /// Pods completed per second between 10 % and 90 % of the completions (for reference: the
    /// pods complete well before their Jobs' last status writes).
    pub pods_per_second: f64,
    /// Every audit and goal of this run passed.
    pub passed: bool,
    pub report: String,
}

#[derive(Debug, Serialize)]
pub struct Curve {
    pub points: Vec<Point>,
    pub baseline: Option<Point>,
    /// Throughput at the largest size ÷ (size × per-worker throughput at the smallest).
    pub efficiency: Option<f64>,
    /// Throughput of 4 workers (the largest size up to 4) ÷ the baseline's.
    pub baseline_ratio: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct ScalingReport {
    pub scenario: String,
    pub description: String,
    pub started: String,
    pub wall_seconds: f64,
    pub passed: bool,
    /// Every run's audits, named `<run>: <audit>`.
    pub audits: Vec<Outcome>,
    /// The scaling goals, then every run's goals named `<run>: <goal>`.
    pub goals: Vec<Outcome>,
    pub violations: BTreeMap<String, Vec<String>>,
    pub scaling: Curve,
    pub files: BTreeMap<String, String>,
}

/// The scenario of one run: `workers` workers, or the baseline when `None`.
fn run_scenario(scenario: &Scenario, workers: Option<usize>) -> Scenario {
    let mut s = scenario.clone();
    s.scaling = None;
    match workers {
        Some(n) => s.fleet.workers = n,
        None => {
            s.fleet.standalone = true;
            s.fleet.kube_api_qps = Some(BASELINE_QPS);
            s.fleet.kube_api_burst = Some(BASELINE_BURST);
            // kube-controller-manager's 5 syncs per controller: fleet-worker's defaults.
            s.fleet.worker_args.clear();
        }
    }
    s
}

fn prefixed(run: &str, outcomes: &[Outcome]) -> Vec<Outcome> {
    outcomes.iter().map(|o| Outcome { name: format!("{run}: {}", o.name), ..o.clone() }).collect()
}

fn at_least(name: &str, goal: f64, measured: Option<f64>, shown: String, target: String) -> Outcome {
    Outcome {
        name: name.into(),
        target,
        measured: shown,
        passed: measured.is_some_and(|m| m >= goal),
        skipped: None,
        violations: Vec::new(),
    }
}

/// The curve's ratios and their goals.
fn goals(spec: &ScalingSpec, points: &[Point], baseline: Option<&Point>) -> (Curve, Vec<Outcome>) {
    let mut goals = Vec::new();
    let (first, last) = (points.first(), points.last());
    let mut efficiency = None;
    if let (Some(small), Some(large)) = (first, last)
        && large.workers > small.workers
    {
        let (k, n) = (small.workers.unwrap_or(1) as f64, large.workers.unwrap_or(1) as f64);
        let value =
            (small.jobs_per_second > 0.0).then(|| large.jobs_per_second * k / (n * small.jobs_per_second));
        efficiency = value;
        goals.push(at_least(
            "scaling-efficiency",
            spec.efficiency_goal,
            value,
            format!(
                "{:.2} ({:.1} Jobs/s on {n}, {:.1} on {k})",
                value.unwrap_or(0.0),
                large.jobs_per_second,
                small.jobs_per_second
            ),
            match k as usize {
                1 => format!("≥ {} (throughput_{n} / ({n} × throughput_1))", spec.efficiency_goal),
                _ => format!("≥ {} (throughput_{n} / ({n}/{k} × throughput_{k}))", spec.efficiency_goal),
            },
        ));
    }
    let mut baseline_ratio = None;
    let compared = points.iter().rev().find(|p| p.workers.is_some_and(|w| w <= 4)).or(first);
    if let (Some(base), Some(fleet)) = (baseline, compared) {
        let n = fleet.workers.unwrap_or(1);
        let value = (base.jobs_per_second > 0.0).then(|| fleet.jobs_per_second / base.jobs_per_second);
        baseline_ratio = value;
        goals.push(at_least(
            &format!("workers-{n}-vs-baseline"),
            spec.baseline_ratio_goal,
            value,
            format!(
                "{:.2}× ({:.1} Jobs/s on {n} workers, {:.1} standalone)",
                value.unwrap_or(0.0),
                fleet.jobs_per_second,
                base.jobs_per_second
            ),
            format!("≥ {}× the standalone worker at QPS {BASELINE_QPS}", spec.baseline_ratio_goal),
        ));
    }
    let curve = Curve { points: points.to_vec(), baseline: baseline.cloned(), efficiency, baseline_ratio };
    (curve, goals)
}

fn plot_curve(path: &Path, name: &str, curve: &Curve) -> anyhow::Result<()> {
    let measured: Vec<(f64, f64)> =
        curve.points.iter().map(|p| (p.workers.unwrap_or(1) as f64, p.jobs_per_second)).collect();
    let mut series = vec![Series { name: "fleet, measured".into(), points: measured.clone() }];
    if let Some((k, t)) = measured.first() {
        let ideal = measured.iter().map(|(n, _)| (*n, n * t / k)).collect();
        series.push(Series { name: "fleet, linear from the smallest".into(), points: ideal });
    }
    if let (Some(base), Some((max, _))) = (&curve.baseline, measured.last()) {
        series.push(Series {
            name: format!("standalone baseline (QPS {BASELINE_QPS})"),
            points: vec![(0.0, base.jobs_per_second), (*max, base.jobs_per_second)],
        });
    }
    plot::line_chart(
        path,
        &format!("{name}: throughput by fleet size"),
        ("workers", "Jobs finished / s"),
        &series,
        true,
    )
}

fn summary(report: &ScalingReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let verdict = if report.passed { "PASSED" } else { "FAILED" };
    let _ = writeln!(s, "scaling run {} {verdict} in {:.0} s", report.scenario, report.wall_seconds);
    let _ = writeln!(s, "run                 workers    QPS   Jobs/s   pods/s  audits+goals");
    for p in report.scaling.points.iter().chain(&report.scaling.baseline) {
        let workers = p.workers.map_or("standalone".into(), |w| w.to_string());
        let passed = if p.passed { "passed" } else { "FAILED" };
        let _ = writeln!(
            s,
            "  {:<16} {workers:>10} {:>6.0} {:>8.1} {:>8.1}  {passed}",
            p.name, p.kube_api_qps, p.jobs_per_second, p.pods_per_second
        );
    }
    for o in report.goals.iter().filter(|o| !o.name.contains(": ")) {
        let mark = if o.passed { "ok  " } else { "FAIL" };
        let _ = writeln!(s, "  {mark} {:<28} {} (target: {})", o.name, o.measured, o.target);
    }
    s
}

/// Every run of the scaling run in turn, each in `out/<run>`; the scaling report in `out`.
pub async fn run(
    name: &str,
    scenario: Scenario,
    spec: &ScalingSpec,
    out: &Path,
) -> anyhow::Result<(bool, PathBuf)> {
    let started = Timestamp::now();
    let wall = Instant::now();
    let runs = spec.workers.iter().map(|n| Some(*n)).chain(spec.baseline.then_some(None));
    let mut points = Vec::new();
    let mut baseline = None;
    let (mut audits, mut run_goals) = (Vec::new(), Vec::new());
    for workers in runs {
        let run_name = workers.map_or("baseline".to_string(), |n| format!("workers-{n}"));
        println!("\n== {run_name} ==");
        let phase = run_scenario(&scenario, workers);
        let dir = out.join(&run_name);
        std::fs::create_dir_all(&dir)?;
        let report: Report =
            run_once(&format!("{name}-{run_name}"), phase.clone(), &dir, &TargetArgs::default())
                .await
                .with_context(|| format!("the {run_name} run"))?;
        super::write_report(&report, &dir)?;
        audits.extend(prefixed(&run_name, &report.audits));
        run_goals.extend(prefixed(&run_name, &report.goals));
        let point = Point {
            name: run_name,
            workers,
            kube_api_qps: phase.fleet.kube_api_qps.unwrap_or(BASELINE_QPS),
            jobs_per_second: report.throughput.jobs_per_second_to_90_percent,
            pods_per_second: report.throughput.steady_pods_per_second,
            passed: report.passed,
            report: dir.join("report.json").display().to_string(),
        };
        match workers {
            Some(_) => points.push(point),
            None => baseline = Some(point),
        }
    }
    let (curve, mut goals) = goals(spec, &points, baseline.as_ref());
    goals.extend(run_goals);
    let passed = audits.iter().chain(&goals).all(Outcome::not_failed);
    let violations = report::violations(audits.iter().chain(&goals));
    let mut files = BTreeMap::new();
    let plot_path = out.join("scaling-curve.svg");
    report::record_plot(&mut files, "scaling_curve", &plot_path, plot_curve(&plot_path, name, &curve));
    let report = ScalingReport {
        scenario: name.into(),
        description: scenario.description.clone(),
        started: started.to_string(),
        wall_seconds: seconds(wall.elapsed()),
        passed,
        audits,
        goals,
        violations,
        scaling: curve,
        files,
    };
    let path = out.join("report.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    print!("\n{}", summary(&report));
    Ok((passed, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(workers: Option<usize>, jobs_per_second: f64) -> Point {
        Point {
            name: workers.map_or("baseline".into(), |n| format!("workers-{n}")),
            workers,
            kube_api_qps: 50.0,
            jobs_per_second,
            pods_per_second: 0.0,
            passed: true,
            report: String::new(),
        }
    }

    fn spec() -> ScalingSpec {
        ScalingSpec {
            workers: vec![1, 2, 4, 8],
            baseline: true,
            efficiency_goal: 0.9,
            baseline_ratio_goal: 4.0,
        }
    }

    #[test]
    fn efficiency_is_the_largest_against_the_smallest_and_the_ratio_takes_four_workers() {
        let points = [point(Some(1), 10.0), point(Some(2), 20.0), point(Some(4), 38.0), point(Some(8), 70.0)];
        let (curve, goals) = goals(&spec(), &points, Some(&point(None, 4.0)));
        assert_eq!(curve.efficiency, Some(70.0 / 80.0));
        assert_eq!(curve.baseline_ratio, Some(9.5));
        let names: Vec<(&str, bool)> = goals.iter().map(|g| (g.name.as_str(), g.passed)).collect();
        assert_eq!(names, [("scaling-efficiency", false), ("workers-4-vs-baseline", true)]);
    }

    #[test]
    fn a_scaled_down_run_compares_what_it_has() {
        let points = [point(Some(1), 10.0), point(Some(2), 19.0)];
        let (curve, goals) = goals(&spec(), &points, None);
        assert_eq!(curve.efficiency, Some(0.95));
        assert_eq!(curve.baseline_ratio, None);
        assert_eq!(goals.len(), 1);
        let (_, goals) = goals_with_baseline(&points);
        assert_eq!(goals[1].name, "workers-2-vs-baseline");
    }

    #[test]
    fn the_shipped_scaling_run_is_the_issues() {
        let (name, scenario) = crate::scenario::load("scaling").expect("scaling.yaml loads");
        let spec = scenario.scaling.expect("a scaling run");
        assert_eq!(
            (name.as_str(), spec.workers.as_slice(), spec.baseline),
            ("scaling", &[1, 2, 4, 8][..], true)
        );
        assert_eq!((spec.efficiency_goal, spec.baseline_ratio_goal), (0.9, 4.0));
        assert_eq!(scenario.fleet.kube_api_qps, Some(50.0));
    }

    fn goals_with_baseline(points: &[Point]) -> (Curve, Vec<Outcome>) {
        goals(&spec(), points, Some(&point(None, 0.0)))
    }
}
