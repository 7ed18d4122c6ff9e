//! `loadtest run finalizer-leak`: the workers' finalizer safety net (docs/beyond-upstream.md).
//! Jobs run on a fleet; some are deleted mid-run with `propagationPolicy: Orphan` (what
//! `kubectl delete job --cascade=orphan` sends) while the sim rejects every patch of pods as an
//! admission webhook would, for a while. The harness scrapes the workers' `/metrics` throughout,
//! then audits: no pod keeps `batch.kubernetes.io/job-tracking` (the cluster's objects), every
//! pod whose finalizer patch was refused was patched later (the audit log), the refusals were
//! told by Warning Events quoting the webhook, per object and not per attempt, and the backlog
//! gauge showed the held pods while the rejections lasted. Goal: how soon after the rejections
//! end the last finalizer goes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use batchfleet_audits::Outcome;
use batchfleet_sim::SimConfig;
use batchfleet_sim::audit::{AuditEvent, Stage};
use batchfleet_sim::faults::{ErrorRate, FaultConfig, FaultRule};
use batchfleet_worker::finalizers::sweeper::REJECTED_REASON;
use batchfleet_worker::job::core::JOB_TRACKING_FINALIZER;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::time::Instant;

use super::own_kind::{self, RunSim};
use crate::fleet_processes::{self, FleetLayout};

/// The `kind` of a scenario file this runner takes.
pub const KIND: &str = "finalizer-leak";
/// The label on every Job the run makes.
const LABEL: (&str, &str) = ("loadtest.batchfleet.io/scenario", KIND);

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub kind: String,
    pub description: String,
    pub namespaces: usize,
    pub jobs_per_namespace: usize,
    pub completions: u32,
    pub parallelism: u32,
    /// Each pod's run time (`sim.batchfleet.io/run`).
    pub pod_run: String,
    /// Every this-many-th Job runs its pods this long (`forever`: until deleted) …
    pub orphan_pod_run: String,
    /// … and is deleted with `propagationPolicy: Orphan` …
    pub orphan_every: usize,
    /// … this long after the start.
    pub orphan_at: String,
    /// Every this-many-th other Job, if finished by `stray_at`, gets one more pod that it
    /// controls and that holds the finalizer, as the Job controller once left behind
    /// (k/k#109429): no Job controller removes it, only the sweeper.
    pub stray_every: usize,
    pub stray_at: String,
    pub reject: Reject,
    pub fleet: FleetSpec,
    /// How long after the rejections end the run waits for the last finalizer to go.
    pub settle: String,
    pub goals: Goals,
}

/// The sim rejects every `patch pods` over a window, as an admission webhook would.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Reject {
    pub from: String,
    #[serde(rename = "for")]
    pub for_: String,
    pub code: u16,
    pub message: String,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSpec {
    pub shards: u32,
    pub workers: usize,
    pub kube_api_qps: f64,
    pub kube_api_burst: u32,
    pub finalizer_sweep_period: String,
    pub finalizer_sweep_grace: String,
    pub finalizer_sweep_qps: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Goals {
    /// The last finalizer gone at most this long after the rejections end.
    pub released_within_after_reject: String,
}

fn span(d: &str) -> Duration {
    humantime::parse_duration(d).unwrap_or_default()
}

/// The spec, or what is wrong with it (exit 2).
pub fn load(name_or_path: &str) -> Result<Spec, String> {
    let text = super::own_kind::read_spec(name_or_path).map_err(|e| format!("{name_or_path}: {e}"))?;
    let spec: Spec = serde_yaml::from_str(&text).map_err(|e| format!("{name_or_path}: {e}"))?;
    for (field, value) in [
        ("pod_run", &spec.pod_run),
        ("orphan_at", &spec.orphan_at),
        ("stray_at", &spec.stray_at),
        ("reject.from", &spec.reject.from),
        ("reject.for", &spec.reject.for_),
        ("settle", &spec.settle),
        ("fleet.finalizer_sweep_period", &spec.fleet.finalizer_sweep_period),
        ("fleet.finalizer_sweep_grace", &spec.fleet.finalizer_sweep_grace),
        ("goals.released_within_after_reject", &spec.goals.released_within_after_reject),
    ] {
        humantime::parse_duration(value).map_err(|e| format!("{name_or_path}: {field}: {e}"))?;
    }
    if spec.namespaces == 0
        || spec.jobs_per_namespace == 0
        || spec.orphan_every == 0
        || spec.fleet.workers == 0
    {
        return Err(format!(
            "{name_or_path}: namespaces, jobs_per_namespace, orphan_every and fleet.workers must be above 0"
        ));
    }
    if !(400..500).contains(&spec.reject.code) || matches!(spec.reject.code, 404 | 409 | 429) {
        return Err(format!(
            "{name_or_path}: reject.code: a refusal by policy (400, 403, 422), not {}",
            spec.reject.code
        ));
    }
    Ok(spec)
}

fn namespace_name(i: usize) -> String {
    format!("leak-{i:02}")
}

fn job(spec: &Spec, name: &str, run: &str) -> anyhow::Result<Job> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {LABEL.0: LABEL.1}},
        "spec": {
            "completions": spec.completions, "parallelism": spec.parallelism,
            "template": {
                "metadata": {"annotations": {"sim.batchfleet.io/run": run}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
            }
        }
    }))?)
}

/// What the workers' `/metrics` said at one time, summed over the workers.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct Sample {
    pub seconds: f64,
    pub held_pods: u64,
    pub held_oldest_age_seconds: f64,
    pub rejections: u64,
    pub releases: u64,
}

async fn scrape(addrs: &[std::net::SocketAddr], seconds: f64) -> Sample {
    let mut s = Sample { seconds, ..Sample::default() };
    for addr in addrs {
        let Some(text) = fleet_processes::http_get(*addr, "/metrics").await else { continue };
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else { continue };
            let Ok(value) = value.parse::<f64>() else { continue };
            match series.split('{').next().unwrap_or_default() {
                "batchfleet_worker_finalizer_sweep_held_pods" => s.held_pods += value as u64,
                "batchfleet_worker_finalizer_sweep_held_oldest_age_seconds" => {
                    s.held_oldest_age_seconds = s.held_oldest_age_seconds.max(value)
                }
                "batchfleet_worker_finalizer_sweep_rejections_total" => s.rejections += value as u64,
                "batchfleet_worker_finalizer_sweep_releases_total" => s.releases += value as u64,
                _ => {}
            }
        }
    }
    s
}

#[derive(Debug, Serialize)]
pub struct FinalizerLeakReport {
    pub scenario: String,
    pub description: String,
    pub passed: bool,
    pub parameters: Spec,
    pub jobs_created: usize,
    pub jobs_orphaned: usize,
    /// Extra pods made for finished Jobs (k/k#109429).
    pub strays_made: usize,
    pub pods_seen: usize,
    /// Pods that held the finalizer when the run last looked (0 on a pass).
    pub pods_holding_at_end: usize,
    pub peak_held_pods: u64,
    pub peak_held_oldest_age_seconds: f64,
    pub rejections: u64,
    pub releases: u64,
    pub released_after_reject_seconds: Option<f64>,
    pub audits: Vec<Outcome>,
    pub goals: Vec<Outcome>,
    pub violations: BTreeMap<String, Vec<String>>,
    pub samples: Vec<Sample>,
    pub files: BTreeMap<String, String>,
    pub wall_seconds: f64,
}

/// The pods of the run's namespaces and whether each holds the tracking finalizer.
async fn pods_holding(client: &kube::Client, namespaces: &[String]) -> anyhow::Result<(usize, Vec<String>)> {
    let (mut seen, mut holding) = (0, Vec::new());
    for ns in namespaces {
        let pods = Api::<Pod>::namespaced(client.clone(), ns).list(&ListParams::default()).await?;
        seen += pods.items.len();
        for p in pods.items {
            if p.metadata.finalizers.as_deref().unwrap_or(&[]).iter().any(|f| f == JOB_TRACKING_FINALIZER) {
                holding.push(format!("{ns}/{}", p.metadata.name.unwrap_or_default()));
            }
        }
    }
    Ok((seen, holding))
}

/// Runs the scenario; answers whether every audit and goal passed, and the report's path.
pub async fn run(name: &str, spec: Spec, out: &Path) -> anyhow::Result<(bool, PathBuf)> {
    let wall = std::time::Instant::now();
    println!("scenario {name}: {}", spec.description);
    let RunSim { sim, kubeconfig, client, logs_dir, audit_path } =
        own_kind::start_sim(out, SimConfig { nodes: 3, ..SimConfig::default() }).await?;

    let f = &spec.fleet;
    let layout = FleetLayout {
        shards: f.shards,
        coordinators: 1,
        workers: f.workers,
        worker_flags: vec![
            "--kube-api-qps".into(),
            f.kube_api_qps.to_string(),
            "--kube-api-burst".into(),
            f.kube_api_burst.to_string(),
            "--finalizer-sweep-period".into(),
            f.finalizer_sweep_period.clone(),
            "--finalizer-sweep-grace".into(),
            f.finalizer_sweep_grace.clone(),
            "--finalizer-sweep-qps".into(),
            f.finalizer_sweep_qps.to_string(),
        ],
        ..FleetLayout::default()
    };
    println!("starting a coordinator and {} workers (logs in {})", f.workers, logs_dir.display());
    let mut fleet = fleet_processes::start(&kubeconfig, &layout, &logs_dir).await?;
    fleet.wait_placed(Duration::from_secs(120)).await.context("the shards were not placed")?;
    let worker_ids: Vec<String> = fleet.workers.iter().map(|(id, _)| id.clone()).collect();
    for id in &worker_ids {
        fleet.wait_worker_ready(id, Duration::from_secs(60)).await?;
    }
    let metrics: Vec<std::net::SocketAddr> = fleet.worker_metrics().into_values().collect();

    let namespaces: Vec<String> = (0..spec.namespaces).map(namespace_name).collect();
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for ns in &namespaces {
        let object: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
        ns_api.create(&PostParams::default(), &object).await.with_context(|| format!("namespace {ns}"))?;
    }
    let all_jobs: Vec<(String, String)> = namespaces
        .iter()
        .flat_map(|ns| (0..spec.jobs_per_namespace).map(move |j| (ns.clone(), format!("job-{j:03}"))))
        .collect();
    let orphaned: BTreeSet<(String, String)> = all_jobs
        .iter()
        .enumerate()
        .filter(|(i, _)| i % spec.orphan_every == 0)
        .map(|(_, j)| j.clone())
        .collect();

    let strays: Vec<(String, String)> = all_jobs
        .iter()
        .filter(|j| !orphaned.contains(*j))
        .enumerate()
        .filter(|(i, _)| i % spec.stray_every == 0)
        .map(|(_, j)| j.clone())
        .collect();

    let start = Instant::now();
    println!("creating {} Jobs in {} namespaces", all_jobs.len(), namespaces.len());
    let created: Vec<anyhow::Result<()>> = futures::stream::iter(all_jobs.iter().cloned())
        .map(|(ns, name)| {
            let client = client.clone();
            let run = if orphaned.contains(&(ns.clone(), name.clone())) {
                &spec.orphan_pod_run
            } else {
                &spec.pod_run
            };
            let job = job(&spec, &name, run);
            async move {
                Api::<Job>::namespaced(client, &ns)
                    .create(&PostParams::default(), &job?)
                    .await
                    .with_context(|| format!("creating {ns}/{name}"))?;
                Ok(())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    created.into_iter().collect::<anyhow::Result<Vec<()>>>()?;

    let reject_from = span(&spec.reject.from);
    let reject_until = reject_from + span(&spec.reject.for_);
    let orphan_at = span(&spec.orphan_at);
    let stray_at = span(&spec.stray_at);
    let mut strays_made: Option<usize> = None;
    let deadline = reject_until + span(&spec.settle);
    let (mut rejecting, mut rejected_done, mut orphans_deleted) = (false, false, false);
    let mut samples = Vec::new();
    let mut released_at: Option<Duration> = None;
    let (mut pods_seen, mut holding) = (0, Vec::new());
    loop {
        let now = start.elapsed();
        if !rejecting && !rejected_done && now >= reject_from {
            println!("{:>5.1}s: rejecting every patch of pods with {}", now.as_secs_f64(), spec.reject.code);
            sim.faults().configure(FaultConfig {
                rules: vec![FaultRule {
                    verb: "patch".into(),
                    resource: "pods".into(),
                    error_rates: vec![ErrorRate { code: spec.reject.code, rate: 1.0 }],
                    message: Some(spec.reject.message.clone()),
                    ..FaultRule::default()
                }],
                ..FaultConfig::default()
            });
            rejecting = true;
        }
        if !orphans_deleted && now >= orphan_at {
            println!(
                "{:>5.1}s: deleting {} Jobs with propagationPolicy Orphan",
                now.as_secs_f64(),
                orphaned.len()
            );
            let orphan = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Orphan),
                ..DeleteParams::default()
            };
            for (ns, job) in &orphaned {
                Api::<Job>::namespaced(client.clone(), ns)
                    .delete(job, &orphan)
                    .await
                    .with_context(|| format!("deleting {ns}/{job}"))?;
            }
            orphans_deleted = true;
        }
        if strays_made.is_none() && now >= stray_at {
            let made = make_strays(&client, &strays).await?;
            println!("{:>5.1}s: {made} stray pods made for finished Jobs", now.as_secs_f64());
            strays_made = Some(made);
        }
        if rejecting && now >= reject_until {
            println!("{:>5.1}s: patches of pods accepted again", now.as_secs_f64());
            sim.faults().configure(FaultConfig::default());
            rejecting = false;
            rejected_done = true;
        }
        samples.push(scrape(&metrics, now.as_secs_f64()).await);
        if rejected_done && orphans_deleted && strays_made.is_some() {
            (pods_seen, holding) = pods_holding(&client, &namespaces).await?;
            let unfinished = unfinished_jobs(&client, &namespaces).await?;
            if holding.is_empty() && unfinished == 0 {
                released_at = Some(start.elapsed());
                println!(
                    "{:>5.1}s: no pod holds the finalizer, every Job finished",
                    start.elapsed().as_secs_f64()
                );
                break;
            }
        }
        if now >= deadline {
            println!(
                "{:>5.1}s: settle time over; {} pods still hold the finalizer",
                now.as_secs_f64(),
                holding.len()
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Two more sweeps: the gauge must come back to nothing.
    tokio::time::sleep(span(&spec.fleet.finalizer_sweep_period) * 2 + Duration::from_secs(1)).await;
    let last = scrape(&metrics, start.elapsed().as_secs_f64()).await;
    samples.push(last);
    for child in fleet.workers.iter_mut().map(|(_, c)| c).chain(fleet.coordinators.iter_mut()) {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    let events: Vec<Event> = Api::<Event>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(REJECTED_REASON))
        .collect();
    let audit = super::settled_audit_log(&audit_path).await.context("reading the audit log")?;
    drop(sim);

    let window = (reject_from.as_secs_f64(), reject_until.as_secs_f64());
    let in_window: Vec<&Sample> =
        samples.iter().filter(|s| s.seconds >= window.0 && s.seconds <= window.1 + 1.0).collect();
    let peak_held = in_window.iter().map(|s| s.held_pods).max().unwrap_or(0);
    let peak_age = in_window.iter().map(|s| s.held_oldest_age_seconds).fold(0.0, f64::max);
    let patches = worker_pod_patches(&audit);
    let mut audits = vec![Outcome::from_violations(
        "no-pod-keeps-the-finalizer",
        "no pod of the run holds batch.kubernetes.io/job-tracking once the rejections ended (the cluster's objects)",
        pods_seen,
        "pods",
        holding.iter().map(|p| format!("{p}: still holds the finalizer")).collect(),
    )];
    audits.push(audit_retried(&patches, spec.reject.code));
    let strays_made = strays_made.unwrap_or(0);
    let stray_in_window = stray_at >= reject_from && stray_at < reject_until && strays_made > 0;
    audits.push(audit_events(&events, &spec, &patches, stray_in_window));
    audits.push(Outcome {
        name: "backlog-shown".into(),
        target: "the workers' held-pods gauge above 0 while patches were rejected, and 0 once every finalizer went".into(),
        measured: format!(
            "peak {peak_held} pods held (oldest {peak_age:.1} s) while rejected; {} at the end",
            last.held_pods
        ),
        passed: peak_held > 0 && last.held_pods == 0,
        skipped: None,
        violations: Vec::new(),
    });
    let goal = span(&spec.goals.released_within_after_reject);
    let released_after = released_at.map(|r| r.saturating_sub(reject_until).as_secs_f64());
    let goals = vec![Outcome {
        name: "released-within-after-reject".into(),
        target: format!(
            "the last finalizer gone within {} after the rejections end",
            spec.goals.released_within_after_reject
        ),
        measured: match released_after {
            Some(s) => format!("{s:.1} s"),
            None => format!("not within the settle time ({} pods still hold it)", holding.len()),
        },
        passed: released_after.is_some_and(|s| s <= goal.as_secs_f64()),
        skipped: None,
        violations: Vec::new(),
    }];
    let passed = audits.iter().chain(&goals).all(Outcome::not_failed);
    let violations = crate::run::report::violations(audits.iter().chain(&goals));
    let report = FinalizerLeakReport {
        scenario: name.into(),
        description: spec.description.clone(),
        passed,
        jobs_created: all_jobs.len(),
        jobs_orphaned: orphaned.len(),
        strays_made,
        pods_seen,
        pods_holding_at_end: holding.len(),
        peak_held_pods: peak_held,
        peak_held_oldest_age_seconds: peak_age,
        rejections: last.rejections,
        releases: last.releases,
        released_after_reject_seconds: released_after,
        parameters: spec,
        audits,
        goals,
        violations,
        samples,
        files: BTreeMap::from([
            ("audit_log".to_string(), audit_path.display().to_string()),
            ("process_logs".to_string(), logs_dir.display().to_string()),
        ]),
        wall_seconds: wall.elapsed().as_secs_f64(),
    };
    let path = own_kind::write_report(out, &report, report.audits.iter().chain(&report.goals))?;
    Ok((report.passed, path))
}

/// One more pod for each of `jobs` that has finished: controlled by it, holding the tracking
/// finalizer, as the Job controller left them in k/k#109429. Answers how many were made.
async fn make_strays(client: &kube::Client, jobs: &[(String, String)]) -> anyhow::Result<usize> {
    let mut made = 0;
    for (ns, name) in jobs {
        let Some(job) = Api::<Job>::namespaced(client.clone(), ns).get_opt(name).await? else { continue };
        if !batchfleet_worker::job::core::is_job_finished(&job) {
            continue;
        }
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": format!("{name}-stray"),
                "labels": {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name},
                "annotations": {"sim.batchfleet.io/run": "1s"},
                "finalizers": [JOB_TRACKING_FINALIZER],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
                    "controller": true, "blockOwnerDeletion": true}]
            },
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
        }))?;
        Api::<Pod>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &pod)
            .await
            .with_context(|| format!("creating a stray pod of {ns}/{name}"))?;
        made += 1;
    }
    Ok(made)
}

async fn unfinished_jobs(client: &kube::Client, namespaces: &[String]) -> anyhow::Result<usize> {
    let mut n = 0;
    for ns in namespaces {
        let jobs = Api::<Job>::namespaced(client.clone(), ns).list(&ListParams::default()).await?;
        n += jobs.items.iter().filter(|j| !batchfleet_worker::job::core::is_job_finished(j)).count();
    }
    Ok(n)
}

/// The workers' answered patches of pods, by `namespace/name`, in time order: their codes.
fn worker_pod_patches(events: &[AuditEvent]) -> BTreeMap<String, Vec<u16>> {
    let mut patches: BTreeMap<String, Vec<(String, u16)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.user_agent.starts_with("fleet-worker/") && e.verb == "patch") {
        let Some(o) = e.object_ref.as_ref().filter(|o| o.resource == "pods" && o.subresource.is_empty())
        else {
            continue;
        };
        let Some(code) = e.response_status.as_ref().map(|s| s.code) else { continue };
        if e.stage != Stage::ResponseComplete {
            continue;
        }
        patches
            .entry(format!("{}/{}", o.namespace, o.name))
            .or_default()
            .push((e.stage_timestamp.clone(), code));
    }
    patches
        .into_iter()
        .map(|(pod, mut answered)| {
            answered.sort();
            (pod, answered.into_iter().map(|(_, c)| c).collect())
        })
        .collect()
}

/// Every pod whose finalizer patch was refused was patched successfully after.
fn audit_retried(patches: &BTreeMap<String, Vec<u16>>, code: u16) -> Outcome {
    let refused: Vec<(&String, &Vec<u16>)> =
        patches.iter().filter(|(_, codes)| codes.contains(&code)).collect();
    let violations = refused
        .iter()
        .filter(|(_, codes)| {
            let last_refusal = codes.iter().rposition(|c| *c == code).unwrap_or(0);
            !codes[last_refusal..].iter().any(|c| (200..300).contains(c))
        })
        .map(|(pod, codes)| format!("{pod}: refused and never patched after ({codes:?})"))
        .collect();
    Outcome::from_violations(
        "refused-patches-retried",
        "every pod whose finalizer patch a worker saw refused was patched successfully later (the audit log)",
        refused.len(),
        "pods refused at least once",
        violations,
    )
}

/// The refusals told by Warning Events that quote the webhook, on pods (and Jobs), once per
/// object for a window shorter than the repeat, however many attempts were refused.
fn audit_events(
    events: &[Event],
    spec: &Spec,
    patches: &BTreeMap<String, Vec<u16>>,
    jobs_expected: bool,
) -> Outcome {
    let mut per_object: BTreeMap<String, i32> = BTreeMap::new();
    let mut violations = Vec::new();
    for e in events {
        let o = &e.involved_object;
        let key = format!(
            "{}/{}/{}",
            o.kind.as_deref().unwrap_or_default(),
            o.namespace.as_deref().unwrap_or_default(),
            o.name.as_deref().unwrap_or_default()
        );
        if e.type_.as_deref() != Some("Warning")
            || !e.message.as_deref().unwrap_or_default().contains(&spec.reject.message)
        {
            violations.push(format!("{key}: {:?} {:?} does not quote the webhook", e.type_, e.message));
        }
        if !matches!(o.kind.as_deref(), Some("Pod" | "Job")) {
            violations.push(format!("{key}: an Event on neither a pod nor a Job"));
        }
        *per_object.entry(key).or_default() += e.count.unwrap_or(1);
    }
    let window = span(&spec.reject.for_);
    let allowed =
        1 + (window.as_secs() / batchfleet_worker::finalizers::pacing::EVENT_REPEAT.as_secs()) as i32;
    for (key, n) in &per_object {
        if *n > allowed {
            violations.push(format!("{key}: told {n} times, at most {allowed} allowed"));
        }
    }
    let refused_pods = patches.values().filter(|codes| codes.contains(&spec.reject.code)).count();
    if jobs_expected && !per_object.keys().any(|k| k.starts_with("Job/")) {
        violations.push("stray pods of finished Jobs were refused, and no Event on their Jobs".to_string());
    }
    if refused_pods > 0 && per_object.is_empty() {
        violations.push(format!("{refused_pods} pods refused, no {REJECTED_REASON} Event"));
    }
    let attempts: usize =
        patches.values().map(|c| c.iter().filter(|c| **c == spec.reject.code).count()).sum();
    Outcome {
        measured: format!(
            "{} Events on {} objects for {attempts} refused patches of {refused_pods} pods; {} violations",
            per_object.values().sum::<i32>(),
            per_object.len(),
            violations.len()
        ),
        ..Outcome::from_violations(
            "rejections-told-once",
            "Warning Events quoting the webhook's message, at most once per object per repeat, not per attempt",
            per_object.len(),
            "objects",
            violations,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scenario_loads_and_a_refusal_must_be_a_policys() {
        let spec = load(KIND).expect("the scenario loads");
        assert_eq!(spec.kind, KIND);
        assert!(crate::run::own_kind::is_of_kind(KIND, KIND));
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("bad.yaml");
        let text = std::fs::read_to_string(crate::scenario::scenarios_dir().join("finalizer-leak.yaml"))
            .expect("read");
        std::fs::write(&file, text.replace("code: 400", "code: 503")).expect("write");
        let e = load(file.to_str().expect("utf-8")).expect_err("503 is no refusal");
        assert!(e.contains("reject.code"), "{e}");
    }

    #[test]
    fn a_refused_pod_passes_only_when_patched_after_its_last_refusal() {
        let patches = BTreeMap::from([
            ("ns/a".to_string(), vec![400, 400, 200]),
            ("ns/b".to_string(), vec![200, 400]),
            ("ns/c".to_string(), vec![200]),
        ]);
        let outcome = audit_retried(&patches, 400);
        assert!(!outcome.passed);
        assert_eq!(outcome.violations.len(), 1, "{:?}", outcome.violations);
        assert!(outcome.violations[0].starts_with("ns/b"));
    }
}
