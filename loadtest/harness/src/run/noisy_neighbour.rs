//! `loadtest run noisy-neighbour`: one namespace's large Job against many small Jobs in other
//! namespaces on the same worker (issue 29 §1, docs/beyond-upstream.md "Fair API budgets").
//!
//! Three sittings, each with its own sim and `fleet-worker --standalone`: the small Jobs alone
//! (the baseline), then beside the large Job with the budget handed out fairly
//! (`--kube-api-order fair`, the default), then first come, first served as client-go does
//! (`--kube-api-order arrival`). The small Jobs are created once the large Job's creates have
//! filled the worker's budget. Each small Job's completion time is the harness's own: from its
//! create's answer to the watch event that shows it Complete. The goal compares the fair
//! sitting's p99 with the baseline's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::own_kind;
use crate::fleet_processes;
use batchfleet_audits::Outcome;

/// The `kind` of a scenario file this runner takes.
pub const KIND: &str = "noisy-neighbour";
const NOISY_NAMESPACE: &str = "noisy";
const SMALL_LABEL: &str = "loadtest.batchfleet.io/small";

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub kind: String,
    pub description: String,
    /// Pods of the large Job (its completions and parallelism).
    pub large_job_pods: u32,
    pub small_jobs: usize,
    pub small_namespaces: usize,
    /// Completions (and parallelism) of each small Job.
    pub small_completions: u32,
    /// Small Jobs created per second (spread, as a steady stream of work would come).
    pub small_jobs_per_second: f64,
    /// How long every pod runs.
    pub pod_run: String,
    /// The large Job's pods created before the small Jobs come.
    pub small_jobs_after_large_pods: usize,
    pub nodes: usize,
    pub worker: WorkerSpec,
    /// How long a sitting may take for every small Job to complete.
    pub settle: String,
    pub goals: Goals,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSpec {
    pub kube_api_qps: f64,
    pub kube_api_burst: u32,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Goals {
    /// The fair sitting's small-Job completion p99 at most this many times the baseline's.
    pub small_p99_ratio: f64,
}

/// The spec, or what is wrong with it (exit 2).
pub fn load(name_or_path: &str) -> Result<Spec, String> {
    let text = super::own_kind::read_spec(name_or_path).map_err(|e| format!("{name_or_path}: {e}"))?;
    let spec: Spec = serde_yaml::from_str(&text).map_err(|e| format!("{name_or_path}: {e}"))?;
    for (field, value) in [("pod_run", &spec.pod_run), ("settle", &spec.settle)] {
        humantime::parse_duration(value).map_err(|e| format!("{name_or_path}: {field}: {e}"))?;
    }
    if spec.large_job_pods == 0
        || spec.small_jobs == 0
        || spec.small_namespaces == 0
        || spec.small_completions == 0
        || spec.nodes == 0
        || spec.worker.kube_api_qps <= 0.0
        || !(spec.small_jobs_per_second.is_finite() && spec.small_jobs_per_second > 0.0)
    {
        return Err(format!(
            "{name_or_path}: the counts, small_jobs_per_second and worker.kube_api_qps must be above 0"
        ));
    }
    Ok(spec)
}

/// One sitting: whether the large Job runs, and the worker's token order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sitting {
    Baseline,
    Fair,
    Arrival,
}

impl Sitting {
    fn name(self) -> &'static str {
        match self {
            Self::Baseline => "baseline",
            Self::Fair => "fair",
            Self::Arrival => "arrival",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
struct SittingReport {
    sitting: &'static str,
    large_job: bool,
    kube_api_order: &'static str,
    small_completed: usize,
    small_seconds_p50: f64,
    small_seconds_p99: f64,
    small_seconds_max: f64,
    large_job_pods_created: usize,
    seconds: f64,
}

#[derive(Debug, Serialize)]
struct NoisyNeighbourReport {
    scenario: String,
    description: String,
    passed: bool,
    parameters: Spec,
    sittings: Vec<SittingReport>,
    goals: Vec<Outcome>,
    files: BTreeMap<String, String>,
    wall_seconds: f64,
}

pub async fn run(name: &str, spec: Spec, out: &Path) -> anyhow::Result<(bool, PathBuf)> {
    let wall = Instant::now();
    println!("scenario {name}: {}", spec.description);
    let mut sittings = Vec::new();
    for sitting in [Sitting::Baseline, Sitting::Fair, Sitting::Arrival] {
        let report = run_sitting(&spec, sitting, &out.join(sitting.name())).await?;
        println!(
            "  {:<8} small Jobs {}/{} complete: p50 {:.2} s, p99 {:.2} s, max {:.2} s; large Job pods created {}",
            report.sitting,
            report.small_completed,
            spec.small_jobs,
            report.small_seconds_p50,
            report.small_seconds_p99,
            report.small_seconds_max,
            report.large_job_pods_created
        );
        sittings.push(report);
    }
    let (baseline, fair, arrival) = (&sittings[0], &sittings[1], &sittings[2]);
    let all_done = sittings.iter().all(|s| s.small_completed == spec.small_jobs);
    let ratio = |s: &SittingReport| s.small_seconds_p99 / baseline.small_seconds_p99.max(1e-3);
    let goals = vec![
        Outcome {
            name: "small-jobs-complete".into(),
            target: "every small Job completes in every sitting".into(),
            measured: sittings
                .iter()
                .map(|s| format!("{} {}/{}", s.sitting, s.small_completed, spec.small_jobs))
                .collect::<Vec<_>>()
                .join(", "),
            passed: all_done,
            skipped: None,
            violations: Vec::new(),
        },
        Outcome {
            name: "small-p99-beside-the-large-job".into(),
            target: format!(
                "≤ {}× the baseline's small-Job completion p99 with the budget handed out fairly",
                spec.goals.small_p99_ratio
            ),
            measured: format!(
                "{:.2}× ({:.2} s against {:.2} s); first come, first served: {:.2}× ({:.2} s)",
                ratio(fair),
                fair.small_seconds_p99,
                baseline.small_seconds_p99,
                ratio(arrival),
                arrival.small_seconds_p99
            ),
            passed: all_done && ratio(fair) <= spec.goals.small_p99_ratio,
            skipped: None,
            violations: Vec::new(),
        },
        Outcome {
            name: "large-job-kept-its-share".into(),
            target: "the large Job's creates go on beside the small Jobs (fairness is not starvation)".into(),
            measured: format!("{} pods created in the fair sitting", fair.large_job_pods_created),
            passed: fair.large_job_pods_created > spec.small_jobs_after_large_pods,
            skipped: None,
            violations: Vec::new(),
        },
    ];
    let passed = goals.iter().all(Outcome::not_failed);
    let report = NoisyNeighbourReport {
        scenario: name.into(),
        description: spec.description.clone(),
        passed,
        parameters: spec,
        sittings,
        goals,
        files: BTreeMap::from([("sittings".to_string(), out.display().to_string())]),
        wall_seconds: wall.elapsed().as_secs_f64(),
    };
    let path = own_kind::write_report(out, &report, &report.goals)?;
    Ok((report.passed, path))
}

fn job(namespace: &str, name: &str, pods: u32, pod_run: &str, small: bool) -> anyhow::Result<Job> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "labels": {SMALL_LABEL: small.to_string()}},
        "spec": {
            "completions": pods,
            "parallelism": pods,
            "backoffLimit": 6,
            "template": {
                "metadata": {"annotations": {"sim.batchfleet.io/run": pod_run}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
            }
        }
    }))?)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

async fn run_sitting(spec: &Spec, sitting: Sitting, out: &Path) -> anyhow::Result<SittingReport> {
    let started = Instant::now();
    let logs_dir = out.join("logs");
    std::fs::create_dir_all(&logs_dir)?;
    let sim = batchfleet_sim::SimCluster::start(batchfleet_sim::SimConfig {
        nodes: spec.nodes,
        kubelet_events: false,
        ..batchfleet_sim::SimConfig::default()
    })
    .await
    .context("starting the sim cluster")?;
    let kubeconfig = out.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig)?;
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse()?))?;
    let small_namespaces: Vec<String> = (0..spec.small_namespaces).map(|i| format!("small-{i:03}")).collect();
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for ns in small_namespaces.iter().map(String::as_str).chain([NOISY_NAMESPACE]) {
        let object: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
        ns_api.create(&PostParams::default(), &object).await.with_context(|| format!("namespace {ns}"))?;
    }
    let metrics = std::net::SocketAddr::from(([127, 0, 0, 1], batchfleet_sim::testing::free_port()));
    let order = if sitting == Sitting::Arrival { "arrival" } else { "fair" };
    let flags: Vec<String> = vec![
        "--kube-api-qps".into(),
        spec.worker.kube_api_qps.to_string(),
        "--kube-api-burst".into(),
        spec.worker.kube_api_burst.to_string(),
        "--kube-api-order".into(),
        order.into(),
    ];
    let mut worker = fleet_processes::start_standalone(&kubeconfig, metrics, &logs_dir, &flags)?;
    fleet_processes::wait_standalone_ready(&mut worker, metrics, &logs_dir, Duration::from_secs(60)).await?;

    let noisy_pods: Api<Pod> = Api::namespaced(client.clone(), NOISY_NAMESPACE);
    let large = sitting != Sitting::Baseline;
    if large {
        Api::<Job>::namespaced(client.clone(), NOISY_NAMESPACE)
            .create(
                &PostParams::default(),
                &job(NOISY_NAMESPACE, "large", spec.large_job_pods, &spec.pod_run, false)?,
            )
            .await
            .context("creating the large Job")?;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let made = noisy_pods.list_metadata(&ListParams::default()).await?.items.len();
            if made >= spec.small_jobs_after_large_pods {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the large Job had {made} pods after 120 s; see {}",
                logs_dir.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // Completion as the watch shows it, by the harness's clock.
    let jobs: Api<Job> = Api::all(client.clone());
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let watching = tokio::spawn(async move {
        let config = watcher::Config::default().labels(&format!("{SMALL_LABEL}=true"));
        let mut stream = std::pin::pin!(watcher::watcher(jobs, config));
        while let Some(event) = stream.next().await {
            let objects = match event {
                Ok(watcher::Event::Apply(j) | watcher::Event::InitApply(j)) => vec![j],
                _ => continue,
            };
            for j in objects {
                let complete = j
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Complete" && c.status == "True"));
                if complete {
                    let key = format!(
                        "{}/{}",
                        j.metadata.namespace.unwrap_or_default(),
                        j.metadata.name.unwrap_or_default()
                    );
                    if done_tx.send((key, Instant::now())).is_err() {
                        return;
                    }
                }
            }
        }
    });
    let mut created = BTreeMap::new();
    let stream_started = tokio::time::Instant::now();
    for i in 0..spec.small_jobs {
        let due = stream_started + Duration::from_secs_f64(i as f64 / spec.small_jobs_per_second);
        tokio::time::sleep_until(due).await;
        let ns = &small_namespaces[i % small_namespaces.len()];
        let name = format!("small-{i:04}");
        Api::<Job>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &job(ns, &name, spec.small_completions, &spec.pod_run, true)?)
            .await
            .with_context(|| format!("creating {ns}/{name}"))?;
        created.insert(format!("{ns}/{name}"), Instant::now());
    }
    let settle = humantime::parse_duration(&spec.settle)?;
    let deadline = tokio::time::Instant::now() + settle;
    let mut completed: BTreeMap<String, f64> = BTreeMap::new();
    while completed.len() < created.len() {
        match tokio::time::timeout_at(deadline, done_rx.recv()).await {
            Ok(Some((key, at))) => {
                if let Some(made) = created.get(&key) {
                    completed.entry(key).or_insert_with(|| at.saturating_duration_since(*made).as_secs_f64());
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    watching.abort();
    let large_job_pods_created =
        if large { noisy_pods.list_metadata(&ListParams::default()).await?.items.len() } else { 0 };
    let _ = worker.start_kill();
    let _ = worker.wait().await;
    drop(sim);
    let mut seconds: Vec<f64> = completed.values().copied().collect();
    seconds.sort_by(f64::total_cmp);
    Ok(SittingReport {
        sitting: sitting.name(),
        large_job: large,
        kube_api_order: order,
        small_completed: completed.len(),
        small_seconds_p50: percentile(&seconds, 0.50),
        small_seconds_p99: percentile(&seconds, 0.99),
        small_seconds_max: seconds.last().copied().unwrap_or(f64::NAN),
        large_job_pods_created,
        seconds: started.elapsed().as_secs_f64(),
    })
}
