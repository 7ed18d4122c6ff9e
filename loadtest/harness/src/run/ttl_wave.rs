//! `loadtest run ttl-wave`: TTL smoothing and the TTL of bare pods (docs/beyond-upstream.md). The
//! harness starts a fleet whose workers run with `--ttl-max-deletions-per-second`, then creates
//! finished Jobs (managed by no controller, finished through `/status` at one instant, so that
//! every TTL falls in the same second) and bare pods annotated
//! `batchfleet.io/ttl-seconds-after-finished` (one with a bad value). From the sim's audit log
//! (who sent each DELETE, and when) it checks: every Job deleted once, never before its expiry;
//! the annotated pods deleted on time, the bad value reported by a Warning Event and its pod kept;
//! and the goals: no worker sent more TTL deletions in a calendar second than the flag, and every
//! Job was deleted within TTL + (count / rate) + 2 s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use batchfleet_audits::Outcome;
use batchfleet_sim::SimConfig;
use batchfleet_sim::audit::{AuditEvent, Stage};
use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::own_kind::{self, RunSim};
use crate::fleet_processes::{self, FleetLayout};

/// The `kind` of a scenario file this runner takes.
pub const KIND: &str = "ttl-wave";
const TTL_ANNOTATION: &str = "batchfleet.io/ttl-seconds-after-finished";
const BAD_TTL_REASON: &str = "InvalidTTLSecondsAfterFinished";
const BARE_LABEL: &str = "loadtest.batchfleet.io/ttl-wave";
/// The pod with a bad annotation value.
const BAD_POD: &str = "bare-bad";
/// How late a deletion may come after its due time (the goal's "+ 2 s").
const SLACK: SignedDuration = SignedDuration::from_secs(2);

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub kind: String,
    pub description: String,
    /// Finished Jobs, all expiring at the same instant.
    pub jobs: usize,
    pub namespaces: usize,
    /// Their `ttlSecondsAfterFinished`, from when the harness starts creating them: long enough
    /// to create them all first.
    pub ttl_seconds: i64,
    /// Bare pods with the annotation (and one more with a bad value).
    pub bare_pods: usize,
    pub bare_pod_ttl_seconds: i64,
    pub fleet: FleetSpec,
    pub settle: String,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSpec {
    pub workers: usize,
    pub shards: u32,
    pub kube_api_qps: f64,
    pub kube_api_burst: u32,
    pub ttl_max_deletions_per_second: f64,
}

/// The spec, or what is wrong with it (exit 2).
pub fn load(name_or_path: &str) -> Result<Spec, String> {
    let text = super::own_kind::read_spec(name_or_path).map_err(|e| format!("{name_or_path}: {e}"))?;
    let spec: Spec = serde_yaml::from_str(&text).map_err(|e| format!("{name_or_path}: {e}"))?;
    humantime::parse_duration(&spec.settle).map_err(|e| format!("{name_or_path}: settle: {e}"))?;
    if spec.jobs == 0 || spec.namespaces == 0 || spec.fleet.workers == 0 {
        return Err(format!("{name_or_path}: jobs, namespaces and fleet.workers must be above 0"));
    }
    if !(spec.fleet.ttl_max_deletions_per_second > 0.0 && spec.fleet.ttl_max_deletions_per_second.is_finite())
    {
        return Err(format!("{name_or_path}: fleet.ttl_max_deletions_per_second must be above 0"));
    }
    if spec.ttl_seconds < 1 || spec.bare_pod_ttl_seconds < 0 {
        return Err(format!("{name_or_path}: ttl_seconds must be above 0, bare_pod_ttl_seconds at least 0"));
    }
    Ok(spec)
}

/// `ttl-<i>` names spread evenly over the shards (names differing only in their last characters
/// share a shard), as the Job workloads' namespaces are.
fn namespace_names(count: usize, shards: u32) -> Vec<String> {
    let share = count.div_ceil(shards.max(1) as usize);
    let mut per_shard: BTreeMap<u32, usize> = BTreeMap::new();
    let mut names = Vec::with_capacity(count);
    for i in 0.. {
        if names.len() == count {
            break;
        }
        let name = format!("ttl-{i}");
        let taken = per_shard.entry(batchfleet_audits::agents::shard_of(&name, shards)).or_default();
        if *taken < share || i >= 1_000_000 {
            *taken += 1;
            names.push(name);
        }
    }
    names
}

#[derive(Debug, Serialize)]
pub struct TtlWaveReport {
    pub scenario: String,
    pub description: String,
    pub passed: bool,
    pub parameters: Spec,
    pub jobs_created: usize,
    pub jobs_deleted: usize,
    pub expire_at: String,
    /// Seconds from the expiry to each Job's DELETE.
    pub job_lag_seconds: Percentiles,
    /// The most TTL deletions any worker sent in one calendar second, and the fleet's.
    pub peak_per_worker: usize,
    pub peak_fleet: usize,
    pub bare_pods_deleted: usize,
    pub audits: Vec<Outcome>,
    pub goals: Vec<Outcome>,
    pub violations: BTreeMap<String, Vec<String>>,
    pub files: BTreeMap<String, String>,
    pub wall_seconds: f64,
}

#[derive(Debug, Default, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    fn of(mut v: Vec<f64>) -> Self {
        if v.is_empty() {
            return Self::default();
        }
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        Self { p50: at(0.5), p99: at(0.99), max: at(1.0) }
    }
}

/// One answered DELETE a worker sent.
#[derive(Debug, Clone)]
struct Delete {
    resource: String,
    namespace: String,
    name: String,
    worker: String,
    at: Timestamp,
    succeeded: bool,
}

/// The workers' DELETEs of Jobs and pods, from the audit log.
fn worker_deletes(events: &[AuditEvent]) -> Vec<Delete> {
    events
        .iter()
        .filter(|e| e.stage == Stage::ResponseComplete && e.verb == "delete")
        .filter(|e| e.user_agent.starts_with("fleet-worker"))
        .filter_map(|e| {
            let o = e.object_ref.as_ref()?;
            if !matches!(o.resource.as_str(), "jobs" | "pods")
                || !o.subresource.is_empty()
                || o.name.is_empty()
            {
                return None;
            }
            Some(Delete {
                resource: o.resource.clone(),
                namespace: o.namespace.clone(),
                name: o.name.clone(),
                worker: e.user_agent.clone(),
                at: e.request_received_timestamp.parse().ok()?,
                succeeded: e.response_status.as_ref().is_some_and(|s| s.code < 300),
            })
        })
        .collect()
}

/// The most DELETEs one worker sent in a calendar second, and the fleet's.
fn peaks(deletes: &[Delete]) -> (usize, usize) {
    let mut per_worker: BTreeMap<(&str, i64), usize> = BTreeMap::new();
    let mut fleet: BTreeMap<i64, usize> = BTreeMap::new();
    for d in deletes {
        *per_worker.entry((&d.worker, d.at.as_second())).or_default() += 1;
        *fleet.entry(d.at.as_second()).or_default() += 1;
    }
    (per_worker.values().copied().max().unwrap_or(0), fleet.values().copied().max().unwrap_or(0))
}

/// Runs the scenario; answers whether every audit and goal passed, and the report's path.
pub async fn run(name: &str, spec: Spec, out: &Path) -> anyhow::Result<(bool, PathBuf)> {
    let wall = std::time::Instant::now();
    println!("scenario {name}: {}", spec.description);
    let RunSim { sim, kubeconfig, client, logs_dir, audit_path } =
        own_kind::start_sim(out, SimConfig { nodes: 3, kubelet_events: false, ..SimConfig::default() })
            .await?;
    let namespaces = namespace_names(spec.namespaces, spec.fleet.shards);
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for ns in &namespaces {
        let object: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
        ns_api.create(&PostParams::default(), &object).await.with_context(|| format!("namespace {ns}"))?;
    }

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
            "--ttl-max-deletions-per-second".into(),
            f.ttl_max_deletions_per_second.to_string(),
        ],
        ..FleetLayout::default()
    };
    println!("starting the fleet: {} workers (logs in {})", f.workers, logs_dir.display());
    let mut fleet = fleet_processes::start(&kubeconfig, &layout, &logs_dir).await?;
    fleet.wait_placed(Duration::from_secs(120)).await.context("placing the shards")?;

    // The bare pods' finish times, as their watch shows them before they go.
    let finished: Arc<parking_lot::Mutex<BTreeMap<String, Timestamp>>> = Arc::default();
    let watch = tokio::spawn(watch_finish_times(client.clone(), finished.clone()));
    println!("creating {} bare pods and {} finished Jobs", spec.bare_pods + 1, spec.jobs);
    create_bare_pods(&client, &spec, &namespaces).await?;
    let finished_at = Timestamp::from_second(Timestamp::now().as_second())?;
    let expire_at = finished_at + SignedDuration::from_secs(spec.ttl_seconds);
    create_finished_jobs(&client, &spec, &namespaces, finished_at).await?;
    anyhow::ensure!(
        Timestamp::now() < expire_at,
        "creating the Jobs took longer than their TTL ({} s): raise ttl_seconds",
        spec.ttl_seconds
    );
    println!("every TTL expires at {expire_at}; waiting for the deletions");

    let settle = humantime::parse_duration(&spec.settle)?;
    let spread = Duration::from_secs_f64(spec.jobs as f64 / f.ttl_max_deletions_per_second);
    let deadline = std::time::Instant::now()
        + expire_at.duration_since(Timestamp::now()).unsigned_abs()
        + spread
        + settle;
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        // Off the runtime's threads: the sim answers the fleet on them.
        let path = audit_path.clone();
        let done = tokio::task::spawn_blocking(move || {
            let events = batchfleet_sim::audit::read_log(&path).unwrap_or_default();
            worker_deletes(&events).iter().filter(|d| d.succeeded).count()
        })
        .await?;
        if done >= spec.jobs + spec.bare_pods || std::time::Instant::now() >= deadline {
            break;
        }
    }
    watch.abort();
    let bad_events: Vec<Event> = Api::<Event>::all(client.clone())
        .list(
            &ListParams::default().fields(&format!("involvedObject.name={BAD_POD},involvedObject.kind=Pod")),
        )
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(BAD_TTL_REASON) && e.type_.as_deref() == Some("Warning"))
        .collect();
    let bad_left = Api::<Pod>::namespaced(client.clone(), &namespaces[0]).get_opt(BAD_POD).await?.is_some();
    for child in fleet.coordinators.iter_mut().chain(fleet.workers.iter_mut().map(|(_, c)| c)) {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    let events = super::settled_audit_log(&audit_path).await.context("reading the audit log")?;
    drop(sim);

    let deletes = worker_deletes(&events);
    let finished = finished.lock().clone();
    let audited = Audited { spec: &spec, namespaces: &namespaces, expire_at, finished: &finished };
    let job_deletes: Vec<&Delete> = deletes.iter().filter(|d| d.resource == "jobs" && d.succeeded).collect();
    let lags: Vec<f64> = job_deletes.iter().map(|d| d.at.duration_since(expire_at).as_secs_f64()).collect();
    let (peak_worker, peak_fleet) = peaks(&deletes);
    let audits = vec![
        audited.jobs_deleted_once_after_expiry(&job_deletes),
        audited.bare_pods_on_time(&deletes),
        Outcome::from_violations(
            "bad-ttl-reported-and-kept",
            "the pod with a bad value kept, with a Warning Event InvalidTTLSecondsAfterFinished",
            1,
            "pods with a bad value",
            [
                (!bad_left).then(|| format!("{BAD_POD} was deleted")),
                bad_events.is_empty().then(|| format!("no {BAD_TTL_REASON} Warning Event on {BAD_POD}")),
            ]
            .into_iter()
            .flatten()
            .collect(),
        ),
    ];
    let rate = f.ttl_max_deletions_per_second;
    let bound = spread.as_secs_f64() + SLACK.as_secs_f64();
    let lag = Percentiles::of(lags);
    let goals = vec![
        Outcome {
            name: "peak-deletions-per-second-per-worker".into(),
            target: format!(
                "≤ {} (--ttl-max-deletions-per-second, per worker, per calendar second)",
                rate.ceil()
            ),
            measured: format!("{peak_worker} per worker ({peak_fleet} for the fleet of {})", f.workers),
            passed: peak_worker > 0 && peak_worker as f64 <= rate.ceil(),
            skipped: None,
            violations: Vec::new(),
        },
        Outcome {
            name: "jobs-deleted-within-ttl-plus-count-over-rate".into(),
            target: format!("every Job deleted within its expiry + {bound:.1} s (count / rate + 2 s)"),
            measured: format!("lag p50 {:.2} s, p99 {:.2} s, max {:.2} s", lag.p50, lag.p99, lag.max),
            passed: job_deletes.len() == spec.jobs && lag.max <= bound,
            skipped: None,
            violations: Vec::new(),
        },
    ];
    let passed = audits.iter().chain(&goals).all(Outcome::not_failed);
    let violations = crate::run::report::violations(audits.iter().chain(&goals));
    let report = TtlWaveReport {
        scenario: name.into(),
        description: spec.description.clone(),
        passed,
        jobs_created: spec.jobs,
        jobs_deleted: job_deletes.len(),
        expire_at: expire_at.to_string(),
        job_lag_seconds: lag,
        peak_per_worker: peak_worker,
        peak_fleet,
        bare_pods_deleted: deletes.iter().filter(|d| d.resource == "pods" && d.succeeded).count(),
        parameters: spec.clone(),
        audits,
        goals,
        violations,
        files: BTreeMap::from([
            ("audit_log".to_string(), audit_path.display().to_string()),
            ("process_logs".to_string(), logs_dir.display().to_string()),
        ]),
        wall_seconds: wall.elapsed().as_secs_f64(),
    };
    let path = own_kind::write_report(out, &report, report.audits.iter().chain(&report.goals))?;
    Ok((report.passed, path))
}

struct Audited<'a> {
    spec: &'a Spec,
    namespaces: &'a [String],
    expire_at: Timestamp,
    finished: &'a BTreeMap<String, Timestamp>,
}

impl Audited<'_> {
    fn jobs_deleted_once_after_expiry(&self, deletes: &[&Delete]) -> Outcome {
        let mut seen: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        let mut violations = Vec::new();
        for d in deletes {
            *seen.entry((&d.namespace, &d.name)).or_default() += 1;
            if d.at < self.expire_at {
                violations.push(format!(
                    "{}/{} deleted at {}, before its expiry {}",
                    d.namespace, d.name, d.at, self.expire_at
                ));
            }
        }
        for i in 0..self.spec.jobs {
            let (ns, name) = (&self.namespaces[i % self.namespaces.len()], format!("done-{i}"));
            match seen.get(&(ns.as_str(), name.as_str())) {
                Some(1) => {}
                Some(n) => violations.push(format!("{ns}/{name} deleted {n} times")),
                None => violations.push(format!("{ns}/{name} not deleted")),
            }
        }
        Outcome::from_violations(
            "every-job-deleted-once-after-its-ttl",
            "every Job deleted by a worker, once, never before its expiry",
            self.spec.jobs,
            "Jobs",
            violations,
        )
    }

    fn bare_pods_on_time(&self, deletes: &[Delete]) -> Outcome {
        let ttl = SignedDuration::from_secs(self.spec.bare_pod_ttl_seconds);
        let mut violations = Vec::new();
        for i in 0..self.spec.bare_pods {
            let name = format!("bare-{i}");
            let Some(finished) = self.finished.get(&name) else {
                violations.push(format!("{name}: its finish was not seen"));
                continue;
            };
            let due = *finished + ttl;
            match deletes.iter().find(|d| d.resource == "pods" && d.name == name && d.succeeded) {
                None => violations.push(format!("{name}: not deleted")),
                Some(d) if d.at < due => {
                    violations.push(format!("{name}: deleted at {}, before {due}", d.at))
                }
                Some(d) if d.at > due + SLACK => {
                    violations.push(format!("{name}: deleted at {}, more than 2 s after {due}", d.at))
                }
                Some(_) => {}
            }
        }
        Outcome::from_violations(
            "annotated-bare-pods-deleted-on-time",
            "every annotated bare pod deleted within 2 s after finish + its TTL, not before",
            self.spec.bare_pods,
            "bare pods",
            violations,
        )
    }
}

/// Records each bare pod's finish time (its container's `finishedAt`) as its watch shows it.
async fn watch_finish_times(
    client: kube::Client,
    finished: Arc<parking_lot::Mutex<BTreeMap<String, Timestamp>>>,
) {
    let pods: Api<Pod> = Api::all(client);
    let mut stream = watcher(pods, watcher::Config::default().labels(BARE_LABEL)).boxed();
    while let Some(event) = stream.next().await {
        let (watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = (match event {
            Ok(e) => e,
            Err(_) => continue,
        }) else {
            continue;
        };
        let at = pod.status.as_ref().and_then(|s| s.container_statuses.as_ref()).and_then(|cs| {
            cs.iter().find_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref()).map(|t| t.0)
        });
        if let (Some(name), Some(at)) = (pod.metadata.name, at) {
            finished.lock().insert(name, at);
        }
    }
}

async fn create_bare_pods(client: &kube::Client, spec: &Spec, namespaces: &[String]) -> anyhow::Result<()> {
    let mut pods: Vec<(String, String, String)> = (0..spec.bare_pods)
        .map(|i| {
            (
                namespaces[i % namespaces.len()].clone(),
                format!("bare-{i}"),
                spec.bare_pod_ttl_seconds.to_string(),
            )
        })
        .collect();
    pods.push((namespaces[0].clone(), BAD_POD.into(), "soon".into()));
    for (ns, name, ttl) in pods {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {BARE_LABEL: "bare"},
                         "annotations": {TTL_ANNOTATION: ttl, "sim.batchfleet.io/run": "1s"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
        }))?;
        Api::<Pod>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &pod)
            .await
            .with_context(|| format!("pod {ns}/{name}"))?;
    }
    Ok(())
}

/// Jobs no controller manages (the fleet's Job controller leaves them alone), finished through
/// `/status` at `finished_at`.
async fn create_finished_jobs(
    client: &kube::Client,
    spec: &Spec,
    namespaces: &[String],
    finished_at: Timestamp,
) -> anyhow::Result<()> {
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..spec.jobs)
        .map(|i| {
            let jobs: Api<Job> = Api::namespaced(client.clone(), &namespaces[i % namespaces.len()]);
            async move {
                let name = format!("done-{i}");
                let job: Job = serde_json::from_value(json!({
                    "metadata": {"name": name},
                    "spec": {"managedBy": "loadtest.batchfleet.io/none", "ttlSecondsAfterFinished": spec.ttl_seconds,
                             "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}
                }))?;
                jobs.create(&PostParams::default(), &job).await.with_context(|| format!("Job {name}"))?;
                let t = finished_at.to_string();
                let cond = |kind: &str| json!({"type": kind, "status": "True", "reason": "CompletionsReached", "lastTransitionTime": t, "lastProbeTime": t});
                let status = json!({"status": {"startTime": t, "completionTime": t, "succeeded": 1,
                    "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}});
                jobs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                    .with_context(|| format!("Job {name}'s status"))?;
                Ok(())
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    results.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delete(worker: &str, at: &str) -> Delete {
        Delete {
            resource: "jobs".into(),
            namespace: "ns".into(),
            name: "j".into(),
            worker: worker.into(),
            at: at.parse().expect("time"),
            succeeded: true,
        }
    }

    #[test]
    fn peaks_count_per_worker_and_calendar_second() {
        let d = [
            delete("a", "2026-11-28T10:00:00.1Z"),
            delete("a", "2026-11-28T10:00:00.9Z"),
            delete("b", "2026-11-28T10:00:00.5Z"),
            delete("a", "2026-11-28T10:00:01.0Z"),
        ];
        assert_eq!(peaks(&d), (2, 3));
        assert_eq!(peaks(&[]), (0, 0));
    }

    #[test]
    fn namespaces_are_spread_over_the_shards() {
        let names = namespace_names(32, 32);
        let shards: std::collections::BTreeSet<u32> =
            names.iter().map(|n| batchfleet_audits::agents::shard_of(n, 32)).collect();
        assert_eq!((names.len(), shards.len()), (32, 32));
    }

    #[test]
    fn the_scenario_loads() {
        let spec = load("ttl-wave").expect("loads");
        assert_eq!(spec.kind, KIND);
        assert!(crate::run::own_kind::is_of_kind("ttl-wave", KIND));
    }
}
