//! `loadtest run indexed-100k` (kind `indexed-large-job`): one very large Indexed Job with a
//! pathological index pattern (docs/beyond-upstream.md, "Very large Indexed Jobs"). The harness
//! starts a sim and a fleet, creates the Job (`backoffLimitPerIndex: 0`, the sim failing every
//! index `fail_indexes` names, `batchfleet.io/delete-counted-pods` as the spec says), watches it
//! from the cluster until its terminal condition, waits for its counted pods to go, and audits
//! from the cluster with code of its own (never from the fleet's logs):
//! - the Job reached its terminal condition with every index accounted: `completedIndexes` and
//!   `failedIndexes` are exactly the interval strings of the indexes that succeed and fail (the
//!   harness writes them itself), `succeeded` and `failed` their counts;
//! - the status stayed under the size guard's threshold and the guard never fired, or (when the
//!   Job's object reached 80 % of the limit) the condition `batchfleet.io/StatusSizeNearLimit`
//!   was seen `True`, its message giving both strings' sizes, and a Warning `StatusSizeNearLimit`
//!   Event came (batchfleet's own reasons are not starved by the Job's `SuccessfulCreate`s in the
//!   Event correlator's spam filter);
//! - with `delete_counted_pods`, no Succeeded pod is left; Failed pods are kept, one per failed
//!   index at least;
//! - from the sim's audit log: the fleet deleted each pod at most once (no DELETE answered 404,
//!   none answered 2xx twice: the delete expectations hold), and no pod of a failing index;
//! - goal: the workers' peak RSS under `peak_rss_mib`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use batchfleet_audits::Outcome;
use batchfleet_sim::SimConfig;
use batchfleet_sim::audit::{AuditEvent, Stage};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::own_kind::{self, RunSim};
use crate::fleet_processes::{self, FleetLayout};

/// The `kind` of a scenario file this runner takes.
pub const KIND: &str = "indexed-large-job";
const NAMESPACE: &str = "indexed-large";
const JOB: &str = "big";
/// The names the worker writes (`worker/src/job/core/status_size.rs`, `counted_pods.rs`);
/// spelled out here so that a rename shows up as a failed audit.
const GUARD_CONDITION: &str = "batchfleet.io/StatusSizeNearLimit";
const GUARD_EVENT: &str = "StatusSizeNearLimit";
const DELETE_COUNTED_PODS: &str = "batchfleet.io/delete-counted-pods";
/// The guard's threshold, in percent of the limit.
const NEAR_PERCENT: u64 = 80;
/// The worker's default limit (etcd's default request limit).
const DEFAULT_LIMIT: u64 = 1_572_864;
/// How long after the terminal condition the counted pods may take to go.
const PODS_SETTLE: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub kind: String,
    pub description: String,
    pub completions: i32,
    pub parallelism: i32,
    /// `sim.batchfleet.io/fail-indexes` of the pods: `odd`, `even` or `STEP/OFFSET`.
    pub fail_indexes: String,
    /// `sim.batchfleet.io/run` of the pods.
    pub pod_run: String,
    pub delete_counted_pods: bool,
    /// The workers' `--job-status-size-limit-bytes`; the default when absent.
    #[serde(default)]
    pub status_size_limit_bytes: Option<u64>,
    pub nodes: usize,
    pub workers: usize,
    pub kube_api_qps: f64,
    pub kube_api_burst: u32,
    /// The longest the Job may take to reach its terminal condition.
    pub settle: String,
    /// Goal: the workers' peak RSS.
    pub peak_rss_mib: f64,
}

/// `odd`/`even`/`STEP/OFFSET` → (step, offset), as the sim reads it (its parser is private to
/// the sim; a scenario the sim would ignore is refused here).
fn index_pattern(s: &str) -> Option<(i64, i64)> {
    let (step, offset) = match s.trim() {
        "odd" => (2, 1),
        "even" => (2, 0),
        other => {
            let (a, b) = other.split_once('/')?;
            (a.trim().parse().ok()?, b.trim().parse().ok()?)
        }
    };
    (step > 0 && (0..step).contains(&offset)).then_some((step, offset))
}

/// The spec, or what is wrong with it (exit 2).
pub fn load(name_or_path: &str) -> Result<Spec, String> {
    let text = super::own_kind::read_spec(name_or_path).map_err(|e| format!("{name_or_path}: {e}"))?;
    let spec: Spec = serde_yaml::from_str(&text).map_err(|e| format!("{name_or_path}: {e}"))?;
    for (field, value) in [("pod_run", &spec.pod_run), ("settle", &spec.settle)] {
        humantime::parse_duration(value).map_err(|e| format!("{name_or_path}: {field}: {e}"))?;
    }
    if index_pattern(&spec.fail_indexes).is_none() {
        return Err(format!(
            "{name_or_path}: fail_indexes must be odd, even or STEP/OFFSET with 0 <= OFFSET < STEP"
        ));
    }
    if spec.completions < 1 || spec.parallelism < 1 || spec.workers == 0 || spec.nodes == 0 {
        return Err(format!("{name_or_path}: completions, parallelism, nodes and workers must be above 0"));
    }
    if spec.kube_api_qps.is_nan() || spec.kube_api_qps <= 0.0 || spec.kube_api_burst == 0 {
        return Err(format!("{name_or_path}: kube_api_qps and kube_api_burst must be above 0"));
    }
    Ok(spec)
}

fn duration(d: &str) -> Duration {
    humantime::parse_duration(d).unwrap_or_default()
}

/// Upstream's interval form of ordered indexes ("1,3-5,7": pairs written "a,b", runs of three
/// or more "a-b"), written here apart from the worker's so the audit checks it.
pub fn interval_string(indexes: impl IntoIterator<Item = i64>) -> String {
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for ix in indexes {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == ix => *last = ix,
            _ => runs.push((ix, ix)),
        }
    }
    let parts: Vec<String> = runs
        .into_iter()
        .map(|(a, b)| match b - a {
            0 => a.to_string(),
            1 => format!("{a},{b}"),
            _ => format!("{a}-{b}"),
        })
        .collect();
    parts.join(",")
}

/// What the harness saw of the Job while watching.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Seen {
    /// The guard's condition as first seen `True`: its message.
    pub guard_message: Option<String>,
    pub guard_seen_true: bool,
    /// The largest index strings seen, in bytes.
    pub max_completed_indexes_bytes: usize,
    pub max_failed_indexes_bytes: usize,
    /// The largest serialized Job seen, in bytes.
    pub max_job_bytes: usize,
    pub terminal: Option<(String, String)>,
}

/// The Job's terminal condition: (type, reason).
fn terminal_of(job: &Job) -> Option<(String, String)> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| (c.type_.clone(), c.reason.clone().unwrap_or_default()))
}

fn observe(seen: &mut Seen, job: &Job) {
    let status = job.status.as_ref();
    let len = |s: Option<&String>| s.map_or(0, String::len);
    seen.max_completed_indexes_bytes =
        seen.max_completed_indexes_bytes.max(len(status.and_then(|s| s.completed_indexes.as_ref())));
    seen.max_failed_indexes_bytes =
        seen.max_failed_indexes_bytes.max(len(status.and_then(|s| s.failed_indexes.as_ref())));
    seen.max_job_bytes = seen.max_job_bytes.max(serde_json::to_vec(job).map_or(0, |v| v.len()));
    if let Some(c) = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == GUARD_CONDITION && c.status == "True"))
    {
        seen.guard_seen_true = true;
        seen.guard_message.get_or_insert_with(|| c.message.clone().unwrap_or_default());
    }
    if seen.terminal.is_none() {
        seen.terminal = terminal_of(job);
    }
}

#[derive(Debug, Serialize)]
pub struct IndexedLargeJobReport {
    pub scenario: String,
    pub description: String,
    pub passed: bool,
    pub parameters: Spec,
    pub terminal: Option<(String, String)>,
    pub seconds_to_terminal: Option<f64>,
    pub completed_indexes_bytes: usize,
    pub failed_indexes_bytes: usize,
    /// The Job object at the end, serialized, and the limit the guard measured against.
    pub job_bytes: usize,
    pub status_size_limit_bytes: u64,
    pub guard_seen_true: bool,
    pub guard_message: Option<String>,
    pub guard_events: usize,
    pub succeeded_pods_left: usize,
    pub failed_pods_left: usize,
    pub worker_peak_rss_mib: f64,
    /// Pod DELETEs the fleet sent (audit log), whatever their answer.
    pub pod_deletes: u32,
    pub audits: Vec<Outcome>,
    pub violations: BTreeMap<String, Vec<String>>,
    pub files: BTreeMap<String, String>,
    pub wall_seconds: f64,
}

fn phase_count(pods: &[Pod], phase: &str) -> usize {
    pods.iter().filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(phase)).count()
}

/// Runs the scenario; answers whether every audit passed, and the report's path.
pub async fn run(name: &str, spec: Spec, out: &Path) -> anyhow::Result<(bool, PathBuf)> {
    let wall = Instant::now();
    println!("scenario {name}: {}", spec.description);
    let RunSim { sim, kubeconfig, client, logs_dir, audit_path } = own_kind::start_sim(
        out,
        SimConfig { nodes: spec.nodes, kubelet_events: false, ..SimConfig::default() },
    )
    .await?;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;

    let limit = spec.status_size_limit_bytes.unwrap_or(DEFAULT_LIMIT);
    let mut worker_flags = vec![
        "--kube-api-qps".to_string(),
        spec.kube_api_qps.to_string(),
        "--kube-api-burst".to_string(),
        spec.kube_api_burst.to_string(),
    ];
    if let Some(l) = spec.status_size_limit_bytes {
        worker_flags.extend(["--job-status-size-limit-bytes".to_string(), l.to_string()]);
    }
    // PodGC off: its threshold (12,500 terminated pods by default) would delete the Failed pods
    // the audit expects kept and the Succeeded ones the audit expects the Job controller to have
    // deleted, hiding both verdicts.
    let coordinator_flags = vec!["--terminated-pod-gc-threshold".to_string(), "0".to_string()];
    let layout = FleetLayout {
        coordinator_flags,
        shards: 16,
        coordinators: 1,
        workers: spec.workers,
        worker_flags,
        ..FleetLayout::default()
    };
    println!("starting the fleet (logs in {})", logs_dir.display());
    let mut fleet = fleet_processes::start(&kubeconfig, &layout, &logs_dir).await?;

    let jobs: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let watch = {
        let (jobs, seen) = (jobs.clone(), seen.clone());
        tokio::spawn(async move {
            let mut stream = watcher(jobs, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let Ok(watcher::Event::Apply(job) | watcher::Event::InitApply(job)) = event else { continue };
                observe(&mut seen.lock(), &job);
            }
        })
    };

    let mut annotations = serde_json::Map::new();
    if spec.delete_counted_pods {
        annotations.insert(DELETE_COUNTED_PODS.into(), "true".into());
    }
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": JOB, "namespace": NAMESPACE, "annotations": annotations},
        "spec": {
            "completionMode": "Indexed",
            "completions": spec.completions,
            "parallelism": spec.parallelism,
            "backoffLimitPerIndex": 0,
            "template": {
                "metadata": {"annotations": {
                    "sim.batchfleet.io/run": spec.pod_run,
                    "sim.batchfleet.io/fail-indexes": spec.fail_indexes,
                }},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
            }
        }
    }))?;
    println!(
        "creating Job {JOB}: {} completions, parallelism {}, indexes {} failing",
        spec.completions, spec.parallelism, spec.fail_indexes
    );
    jobs.create(&PostParams::default(), &job).await.context("creating the Job")?;
    let created = Instant::now();

    let deadline = created + duration(&spec.settle);
    let mut last_print = Instant::now();
    while Instant::now() < deadline && seen.lock().terminal.is_none() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if last_print.elapsed() >= Duration::from_secs(10) {
            last_print = Instant::now();
            let s = seen.lock();
            println!(
                "{:>5.0} s: completedIndexes {} bytes, failedIndexes {} bytes",
                created.elapsed().as_secs_f64(),
                s.max_completed_indexes_bytes,
                s.max_failed_indexes_bytes
            );
        }
    }
    let seconds_to_terminal = seen.lock().terminal.is_some().then(|| created.elapsed().as_secs_f64());
    println!("terminal: {:?}", seen.lock().terminal);

    // The counted pods go after the Job's last status write: wait for them (or the bound).
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let pods_deadline = Instant::now() + PODS_SETTLE;
    let mut left = pods.list(&ListParams::default()).await?.items;
    while spec.delete_counted_pods
        && seconds_to_terminal.is_some()
        && phase_count(&left, "Succeeded") > 0
        && Instant::now() < pods_deadline
    {
        tokio::time::sleep(Duration::from_secs(1)).await;
        left = pods.list(&ListParams::default()).await?.items;
    }
    let final_job = jobs.get(JOB).await?;
    observe(&mut seen.lock(), &final_job);
    let events: Vec<Event> =
        Api::<Event>::namespaced(client.clone(), NAMESPACE).list(&ListParams::default()).await?.items;
    watch.abort();

    let mut peak_rss = 0u64;
    for (_, child) in &fleet.workers {
        if let Some(pid) = child.id() {
            peak_rss = peak_rss.max(crate::proc_stat::peak_rss_bytes(&pid.to_string()).unwrap_or(0));
        }
    }
    for child in fleet.coordinators.iter_mut().chain(fleet.workers.iter_mut().map(|(_, c)| c)) {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    let deletes = settled_pod_deletes(&audit_path).await.context("reading the audit log")?;
    drop(sim);

    let seen = seen.lock().clone();
    let worker_peak_rss_mib = peak_rss as f64 / (1024.0 * 1024.0);
    let audits = audit(&spec, &final_job, &seen, &events, &left, &deletes, limit, worker_peak_rss_mib);
    let passed = audits.iter().all(Outcome::not_failed);
    let violations = crate::run::report::violations(audits.iter());
    let status = final_job.status.as_ref();
    let report = IndexedLargeJobReport {
        scenario: name.into(),
        description: spec.description.clone(),
        passed,
        terminal: seen.terminal.clone(),
        seconds_to_terminal,
        completed_indexes_bytes: status.and_then(|s| s.completed_indexes.as_ref()).map_or(0, String::len),
        failed_indexes_bytes: status.and_then(|s| s.failed_indexes.as_ref()).map_or(0, String::len),
        job_bytes: serde_json::to_vec(&final_job).map_or(0, |v| v.len()),
        status_size_limit_bytes: limit,
        guard_seen_true: seen.guard_seen_true,
        guard_message: seen.guard_message.clone(),
        guard_events: guard_events(&events),
        succeeded_pods_left: phase_count(&left, "Succeeded"),
        failed_pods_left: phase_count(&left, "Failed"),
        worker_peak_rss_mib,
        parameters: spec,
        audits,
        violations,
        pod_deletes: deletes.values().map(|d| d.ok + d.not_found + d.other).sum(),
        files: BTreeMap::from([
            ("audit_log".to_string(), audit_path.display().to_string()),
            ("process_logs".to_string(), logs_dir.display().to_string()),
        ]),
        wall_seconds: wall.elapsed().as_secs_f64(),
    };
    println!(
        "completedIndexes {} bytes, failedIndexes {} bytes, Job {} bytes (limit {}); guard seen: {}",
        report.completed_indexes_bytes,
        report.failed_indexes_bytes,
        report.job_bytes,
        limit,
        report.guard_seen_true
    );
    let path = own_kind::write_report(out, &report, &report.audits)?;
    Ok((report.passed, path))
}

/// The answers to the fleet's pod DELETEs in the scenario's namespace, by pod name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeleteCounts {
    pub ok: u32,
    pub not_found: u32,
    /// Conflicts (a precondition no longer held) and other errors.
    pub other: u32,
}

/// The pod DELETEs of the audit log once the sim wrote everything (its size the same twice in a
/// row, every DELETE line whole). Only those lines are parsed: at 100,000 pods the whole log is
/// millions of events, more than the harness needs to hold.
async fn settled_pod_deletes(path: &Path) -> anyhow::Result<BTreeMap<String, DeleteCounts>> {
    let events = super::settled_audit_events(path, Duration::from_secs(60), |line| {
        line.contains(r#""verb":"delete""#) && line.contains(r#""resource":"pods""#)
    })
    .await?;
    Ok(pod_deletes(&events))
}

fn pod_deletes(log: &[AuditEvent]) -> BTreeMap<String, DeleteCounts> {
    let mut by_name: BTreeMap<String, DeleteCounts> = BTreeMap::new();
    for e in log {
        let Some(o) = e.object_ref.as_ref() else { continue };
        if e.stage != Stage::ResponseComplete
            || e.verb != "delete"
            || o.resource != "pods"
            || o.namespace != NAMESPACE
            || !e.user_agent.starts_with("fleet-")
        {
            continue;
        }
        let counts = by_name.entry(o.name.clone()).or_default();
        match e.response_status.as_ref().map_or(0, |s| s.code) {
            200..=299 => counts.ok += 1,
            404 => counts.not_found += 1,
            _ => counts.other += 1,
        }
    }
    by_name
}

/// The completion index in an Indexed Job pod's name (`<job>-<index>-<suffix>`).
fn index_in_name(name: &str) -> Option<i64> {
    name.strip_prefix(JOB)?.strip_prefix('-')?.split('-').next()?.parse().ok()
}

fn guard_events(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| e.reason.as_deref() == Some(GUARD_EVENT) && e.type_.as_deref() == Some("Warning"))
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("Job") && e.involved_object.name.as_deref() == Some(JOB)
        })
        .count()
}

/// The audits, from what the harness watched and listed (pure, so its verdicts are tested).
#[allow(clippy::too_many_arguments)] // what the run gathered, each named at the one call
pub fn audit(
    spec: &Spec,
    job: &Job,
    seen: &Seen,
    events: &[Event],
    pods_left: &[Pod],
    deletes: &BTreeMap<String, DeleteCounts>,
    limit: u64,
    worker_peak_rss_mib: f64,
) -> Vec<Outcome> {
    let (step, offset) = index_pattern(&spec.fail_indexes).unwrap_or((2, 1));
    let n = i64::from(spec.completions);
    let fails = |i: &i64| i % step == offset;
    let want_completed = interval_string((0..n).filter(|i| !fails(i)));
    let want_failed = interval_string((0..n).filter(fails));
    let (want_succeeded, want_failed_count) = {
        let f = (0..n).filter(fails).count() as i32;
        (spec.completions - f, f)
    };
    let status = job.status.clone().unwrap_or_default();

    let mut terminal = Vec::new();
    let want_terminal = if want_failed_count > 0 { ("Failed", "FailedIndexes") } else { ("Complete", "") };
    match terminal_of(job) {
        Some((t, r)) if t == want_terminal.0 && (want_terminal.1.is_empty() || r == want_terminal.1) => {}
        other => terminal.push(format!("terminal condition {other:?}, want {want_terminal:?}")),
    }

    let mut accounted = Vec::new();
    let got_completed = status.completed_indexes.clone().unwrap_or_default();
    let got_failed = status.failed_indexes.clone().unwrap_or_default();
    if got_completed != want_completed {
        accounted.push(format!(
            "completedIndexes differs ({} bytes, want {}): starts {:?}",
            got_completed.len(),
            want_completed.len(),
            &got_completed[..got_completed.len().min(80)]
        ));
    }
    if got_failed != want_failed {
        accounted.push(format!(
            "failedIndexes differs ({} bytes, want {}): starts {:?}",
            got_failed.len(),
            want_failed.len(),
            &got_failed[..got_failed.len().min(80)]
        ));
    }
    if status.succeeded.unwrap_or(0) != want_succeeded || status.failed.unwrap_or(0) != want_failed_count {
        accounted.push(format!(
            "succeeded {:?} failed {:?}, want {want_succeeded} and {want_failed_count}",
            status.succeeded, status.failed
        ));
    }

    let mut guard = Vec::new();
    let near = (seen.max_job_bytes as u64).saturating_mul(100) >= limit.saturating_mul(NEAR_PERCENT);
    let warned = guard_events(events);
    // The Event is required too: batchfleet's own reasons have a spam bucket of their own
    // (worker/src/events/own_reasons.rs), which the Job's SuccessfulCreate Events do not spend.
    if near && (!seen.guard_seen_true || warned == 0) {
        guard.push(format!(
            "the Job reached {} bytes, ≥ {NEAR_PERCENT}% of {limit}, but the condition was {} and {warned} Warning {GUARD_EVENT} Events came",
            seen.max_job_bytes,
            if seen.guard_seen_true { "seen" } else { "never seen" }
        ));
    }
    // Below 70 % of the limit the estimate (which counts the same strings) cannot reach 80 %.
    let well_below = (seen.max_job_bytes as u64).saturating_mul(100) < limit.saturating_mul(70);
    if well_below && (seen.guard_seen_true || warned > 0) {
        guard.push(format!(
            "the Job stayed at {} bytes, under 70% of {limit}, yet the guard fired ({warned} Events)",
            seen.max_job_bytes
        ));
    }
    if seen.guard_seen_true
        && !seen
            .guard_message
            .as_deref()
            .is_some_and(|m| m.contains("completedIndexes is") && m.contains("failedIndexes"))
    {
        guard.push(format!("the condition's message does not give the sizes: {:?}", seen.guard_message));
    }

    let mut pods = Vec::new();
    let succeeded_left = phase_count(pods_left, "Succeeded");
    let failed_left = phase_count(pods_left, "Failed");
    if spec.delete_counted_pods && succeeded_left > 0 {
        pods.push(format!("{succeeded_left} Succeeded pods left after the Job finished"));
    }
    if failed_left < want_failed_count as usize {
        pods.push(format!(
            "{failed_left} Failed pods left, fewer than the {want_failed_count} failed indexes"
        ));
    }

    let mut once = Vec::new();
    for (name, d) in deletes {
        if d.ok > 1 || d.not_found > 0 {
            once.push(format!("{name}: DELETE answered 2xx {} times and 404 {} times", d.ok, d.not_found));
        }
        match index_in_name(name) {
            Some(ix) if fails(&ix) => once.push(format!("{name}: a pod of failing index {ix} deleted")),
            Some(_) => {}
            None => once.push(format!("{name}: not a pod of Job {JOB}")),
        }
    }

    let rss = Outcome {
        name: "worker-peak-rss".into(),
        target: format!("< {} MiB", spec.peak_rss_mib),
        measured: format!("{worker_peak_rss_mib:.0} MiB"),
        passed: worker_peak_rss_mib > 0.0 && worker_peak_rss_mib < spec.peak_rss_mib,
        skipped: None,
        violations: Vec::new(),
    };
    vec![
        Outcome::from_violations(
            "job-terminal",
            "the Job reaches its terminal condition (Failed/FailedIndexes when an index fails, else Complete) within settle",
            1,
            "Jobs",
            terminal,
        ),
        Outcome::from_violations(
            "every-index-accounted",
            "completedIndexes and failedIndexes are exactly the succeeding and failing indexes (the harness's interval strings), succeeded and failed their counts",
            spec.completions as usize,
            "indexes",
            accounted,
        ),
        Outcome::from_violations(
            "status-size-guard",
            "at ≥ 80% of the limit the condition batchfleet.io/StatusSizeNearLimit=True giving both strings' sizes; under 70% neither it nor its Event",
            1,
            "Jobs",
            guard,
        ),
        Outcome::from_violations(
            "counted-pods-deleted",
            "with delete-counted-pods no Succeeded pod left; Failed pods kept (at least one per failed index)",
            pods_left.len(),
            "pods left",
            pods,
        ),
        Outcome::from_violations(
            "pod-deletes-once-and-only-counted",
            "from the audit log: the fleet's pod DELETEs answered 2xx at most once per pod, none 404, none of a failing index's pod",
            deletes.len(),
            "pods deleted",
            once,
        ),
        rss,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_scenario_is_the_issues_and_bad_values_are_refused() {
        let spec = load("indexed-100k").expect("the shipped file");
        assert_eq!((spec.completions, spec.parallelism), (100_000, 1_000));
        assert_eq!(spec.fail_indexes, "odd");
        assert!(spec.delete_counted_pods);
        assert_eq!(spec.status_size_limit_bytes, None, "the worker's default limit");
        assert_eq!(spec.peak_rss_mib, 512.0);
        let dir = tempfile::tempdir().unwrap();
        let text =
            std::fs::read_to_string(crate::scenario::scenarios_dir().join("indexed-100k.yaml")).unwrap();
        for (from, to) in [
            ("fail_indexes: odd", "fail_indexes: 2/2"),
            ("settle: 3600s", "settle: soon"),
            ("parallelism: 1000", "parallelism: 0"),
            ("kube_api_qps: 2000", "kube_api_qps: 0"),
            ("workers: 1", "workers: 1\nextra: 1"),
        ] {
            assert!(text.contains(from), "{from}");
            let path = dir.path().join("bad.yaml");
            std::fs::write(&path, text.replace(from, to)).unwrap();
            assert!(load(path.to_str().unwrap()).is_err(), "{to}");
        }
    }

    #[test]
    fn interval_strings_are_upstreams() {
        assert_eq!(interval_string([]), "");
        assert_eq!(interval_string([3]), "3");
        assert_eq!(interval_string([1, 2]), "1,2");
        assert_eq!(interval_string([1, 3, 4, 5, 7]), "1,3-5,7");
        assert_eq!(interval_string((0..10).filter(|i| i % 2 == 1)), "1,3,5,7,9");
    }

    #[test]
    fn index_patterns_as_the_sim_reads_them() {
        assert_eq!(index_pattern("odd"), Some((2, 1)));
        assert_eq!(index_pattern("even"), Some((2, 0)));
        assert_eq!(index_pattern("3/2"), Some((3, 2)));
        for bad in ["", "2", "0/0", "2/2", "-1/0", "x"] {
            assert_eq!(index_pattern(bad), None, "{bad:?}");
        }
    }

    fn spec() -> Spec {
        Spec {
            kind: KIND.into(),
            description: String::new(),
            completions: 6,
            parallelism: 2,
            fail_indexes: "odd".into(),
            pod_run: "1s".into(),
            delete_counted_pods: true,
            status_size_limit_bytes: None,
            nodes: 1,
            workers: 1,
            kube_api_qps: 10.0,
            kube_api_burst: 10,
            settle: "1m".into(),
            peak_rss_mib: 512.0,
        }
    }

    fn job(completed: &str, failed: &str, succeeded: i32, failures: i32, terminal: &str) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": JOB},
            "status": {
                "completedIndexes": completed, "failedIndexes": failed,
                "succeeded": succeeded, "failed": failures,
                "conditions": [{"type": terminal, "status": "True", "reason": "FailedIndexes"}]
            }
        }))
        .unwrap()
    }

    fn pod(phase: &str) -> Pod {
        serde_json::from_value(json!({"status": {"phase": phase}})).unwrap()
    }

    fn audit_without_deletes(
        spec: &Spec,
        job: &Job,
        seen: &Seen,
        events: &[Event],
        pods: &[Pod],
        limit: u64,
        rss: f64,
    ) -> Vec<Outcome> {
        audit(spec, job, seen, events, pods, &BTreeMap::new(), limit, rss)
    }

    fn verdicts(o: &[Outcome]) -> Vec<(&str, bool)> {
        o.iter().map(|o| (o.name.as_str(), o.passed)).collect()
    }

    #[test]
    fn audits_pass_on_an_exact_status_and_fail_on_each_defect() {
        let good = job("0,2,4", "1,3,5", 3, 3, "Failed");
        let failed_pods = vec![pod("Failed"), pod("Failed"), pod("Failed")];
        let seen = Seen { max_job_bytes: 500, ..Seen::default() };
        let ok = audit_without_deletes(&spec(), &good, &seen, &[], &failed_pods, DEFAULT_LIMIT, 100.0);
        assert!(ok.iter().all(|o| o.passed), "{:?}", verdicts(&ok));

        let lost = job("0,2", "1,3,5", 2, 3, "Failed");
        let o = audit_without_deletes(&spec(), &lost, &seen, &[], &failed_pods, DEFAULT_LIMIT, 100.0);
        assert!(!o[1].passed, "a lost completion is found");

        let mut left = failed_pods.clone();
        left.push(pod("Succeeded"));
        let o = audit_without_deletes(&spec(), &good, &seen, &[], &left, DEFAULT_LIMIT, 100.0);
        assert!(!o[3].passed, "a Succeeded pod left is found");
        let o = audit_without_deletes(&spec(), &good, &seen, &[], &failed_pods[..2], DEFAULT_LIMIT, 100.0);
        assert!(!o[3].passed, "a deleted Failed pod is found");

        let o = audit_without_deletes(&spec(), &good, &seen, &[], &failed_pods, DEFAULT_LIMIT, 600.0);
        assert!(!o[5].passed, "RSS over the goal");

        let once = DeleteCounts { ok: 1, not_found: 0, other: 1 };
        let deletes = BTreeMap::from([("big-0-abcde".to_string(), once), ("big-2-xyz".to_string(), once)]);
        let o = audit(&spec(), &good, &seen, &[], &failed_pods, &deletes, DEFAULT_LIMIT, 100.0);
        assert!(o[4].passed, "{:?}", o[4]);
        for (name, d) in [
            ("big-0-abcde", DeleteCounts { ok: 2, ..once }),
            ("big-0-abcde", DeleteCounts { not_found: 1, ..once }),
            ("big-1-abcde", once),
            ("other-1", once),
        ] {
            let deletes = BTreeMap::from([(name.to_string(), d)]);
            let o = audit(&spec(), &good, &seen, &[], &failed_pods, &deletes, DEFAULT_LIMIT, 100.0);
            assert!(!o[4].passed, "{name} {d:?}");
        }

        let o = audit_without_deletes(
            &spec(),
            &job("0,2,4", "1,3,5", 3, 3, "Complete"),
            &seen,
            &[],
            &failed_pods,
            DEFAULT_LIMIT,
            1.0,
        );
        assert!(!o[0].passed, "Complete while indexes failed");

        // Near the limit: the condition and the Event are required.
        let near = Seen { max_job_bytes: 900, ..Seen::default() };
        let o = audit_without_deletes(&spec(), &good, &near, &[], &failed_pods, 1000, 100.0);
        assert!(!o[2].passed, "the guard did not fire");
        let no_sizes = Seen { guard_seen_true: true, guard_message: Some("near".into()), ..near.clone() };
        let o = audit_without_deletes(&spec(), &good, &no_sizes, &[], &failed_pods, 1000, 100.0);
        assert!(!o[2].passed, "the message must give the sizes");
        let fired = Seen {
            max_job_bytes: 900,
            guard_seen_true: true,
            guard_message: Some("completedIndexes is 5 bytes and failedIndexes 5 bytes".into()),
            ..Seen::default()
        };
        let event: Event = serde_json::from_value(json!({
            "metadata": {"name": "e"}, "type": "Warning", "reason": GUARD_EVENT,
            "involvedObject": {"kind": "Job", "name": JOB}
        }))
        .unwrap();
        let o = audit_without_deletes(
            &spec(),
            &good,
            &fired,
            std::slice::from_ref(&event),
            &failed_pods,
            1000,
            100.0,
        );
        assert!(o[2].passed, "{:?}", o[2]);
        // Far below: the guard must not fire.
        let o = audit_without_deletes(&spec(), &good, &fired, &[event], &failed_pods, 1_000_000, 100.0);
        assert!(!o[2].passed, "fired far below the limit");
    }
}
