//! `loadtest run quota-deadlock`: the Job controller's stall signals (docs/beyond-upstream.md,
//! "Stall signals") under a ResourceQuota that admits fewer pods than the Jobs want. The harness
//! makes one namespace with a `pods` quota, starts a coordinator and workers, creates Jobs that
//! want more pods than the quota admits, watches the Jobs from the cluster, raises the quota after
//! a while, and waits for every Job to complete.
//!
//! Audits, from the cluster (Jobs watched, Events listed) and the sim's audit log, never from the
//! fleet's logs: every Job the quota refused got the `PodCreationBlocked` Event and the
//! `batchfleet.io/PodCreationBlocked` condition with the API's message; each Job's Events are at
//! most the back-off steps its refusals could span (the harness computes the bound on its own,
//! from the controller's 1 s doubling to 60 s failed-sync back-off), not one per refused create;
//! after the raise every condition went `False` and every Job completed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use batchfleet_audits::Outcome;
use batchfleet_sim::SimConfig;
use batchfleet_sim::audit::AuditEvent;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, ResourceQuota};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::own_kind::{self, RunSim};
use crate::fleet_processes::{self, FleetLayout};

/// The `kind` of a scenario file this runner takes.
pub const KIND: &str = "quota-deadlock";
const NAMESPACE: &str = "quota-deadlock";
const QUOTA: &str = "pod-quota";
/// The names the worker writes (`worker/src/job/core/stall.rs`); spelled out here so that a
/// rename shows up as a failed audit.
const CONDITION: &str = "batchfleet.io/PodCreationBlocked";
const BLOCKED_EVENT: &str = "PodCreationBlocked";
/// The Job controller's failed-sync back-off (upstream's DefaultJobApiBackOff, MaxJobApiBackOff).
const API_BACKOFF: Duration = Duration::from_secs(1);
const MAX_API_BACKOFF: Duration = Duration::from_secs(60);
/// Slack on each Job's blocked span for the time between the raise and the refusals it ends.
const SPAN_SLACK: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub kind: String,
    pub description: String,
    pub jobs: usize,
    pub parallelism: i32,
    pub completions: i32,
    /// `sim.batchfleet.io/run` of the Jobs' pods.
    pub pod_run: String,
    /// The quota's `pods` before the raise, and after it.
    pub quota_pods: u32,
    pub raised_pods: u32,
    /// How long after the last Job's create the harness raises the quota.
    pub raise_after: String,
    pub workers: usize,
    /// The longest the Jobs may take to complete after the raise.
    pub settle: String,
}

/// The spec, or what is wrong with it (exit 2).
pub fn load(name_or_path: &str) -> Result<Spec, String> {
    let text = super::own_kind::read_spec(name_or_path).map_err(|e| format!("{name_or_path}: {e}"))?;
    let spec: Spec = serde_yaml::from_str(&text).map_err(|e| format!("{name_or_path}: {e}"))?;
    for (field, value) in
        [("pod_run", &spec.pod_run), ("raise_after", &spec.raise_after), ("settle", &spec.settle)]
    {
        humantime::parse_duration(value).map_err(|e| format!("{name_or_path}: {field}: {e}"))?;
    }
    if spec.jobs == 0 || spec.parallelism < 1 || spec.completions < 1 || spec.workers == 0 {
        return Err(format!("{name_or_path}: jobs, parallelism, completions and workers must be above 0"));
    }
    let wanted = spec.jobs as u64 * spec.parallelism as u64;
    if wanted <= u64::from(spec.quota_pods) {
        return Err(format!(
            "{name_or_path}: the Jobs want {wanted} pods at once; quota_pods ({}) must admit fewer",
            spec.quota_pods
        ));
    }
    if spec.raised_pods as u64 <= u64::from(spec.quota_pods) {
        return Err(format!("{name_or_path}: raised_pods must be above quota_pods"));
    }
    Ok(spec)
}

fn duration(d: &str) -> Duration {
    humantime::parse_duration(d).unwrap_or_default()
}

/// How many back-off steps can begin within `span` of the first refusal: steps begin at 0, then
/// each a step's delay (1 s doubling, capped at 60 s) after the previous one at the earliest.
pub fn steps_within(span: Duration) -> u64 {
    let (mut begins, mut delay, mut steps) = (Duration::ZERO, API_BACKOFF, 0u64);
    while begins <= span {
        steps += 1;
        begins += delay;
        delay = (delay * 2).min(MAX_API_BACKOFF);
    }
    steps
}

fn job_name(i: usize) -> String {
    format!("want-{i:03}")
}

/// What the harness saw of one Job's condition while watching.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Seen {
    /// `(reason, message)` of the condition while `True`, each distinct pair once.
    pub blocked: BTreeSet<(String, String)>,
    pub cleared: bool,
    pub complete: bool,
}

#[derive(Debug, Serialize)]
pub struct QuotaDeadlockReport {
    pub scenario: String,
    pub description: String,
    pub passed: bool,
    pub parameters: Spec,
    pub jobs_blocked: usize,
    pub jobs_completed: usize,
    /// Pod creates the quota refused (403 in the audit log), and the blocked Events' total count.
    pub refused_creates: usize,
    pub blocked_events: u64,
    pub blocked_seconds: f64,
    pub audits: Vec<Outcome>,
    pub violations: BTreeMap<String, Vec<String>>,
    pub files: BTreeMap<String, String>,
    pub wall_seconds: f64,
}

fn condition_of(job: &Job) -> Option<(String, String, String)> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == CONDITION)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
}

fn is_complete(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Complete" && c.status == "True"))
}

/// Runs the scenario; answers whether every audit passed, and the report's path.
pub async fn run(name: &str, spec: Spec, out: &Path) -> anyhow::Result<(bool, PathBuf)> {
    let wall = Instant::now();
    println!("scenario {name}: {}", spec.description);
    let RunSim { sim, kubeconfig, client, logs_dir, audit_path } =
        own_kind::start_sim(out, SimConfig { nodes: 3, kubelet_events: false, ..SimConfig::default() })
            .await?;

    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), NAMESPACE);
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": QUOTA, "namespace": NAMESPACE},
        "spec": {"hard": {"pods": spec.quota_pods.to_string()}}
    }))?;
    quotas.create(&PostParams::default(), &quota).await?;

    let layout = FleetLayout { shards: 16, coordinators: 1, workers: spec.workers, ..FleetLayout::default() };
    println!("starting the fleet (logs in {})", logs_dir.display());
    let mut fleet = fleet_processes::start(&kubeconfig, &layout, &logs_dir).await?;

    // Watch the Jobs from the cluster for the whole run.
    let jobs: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let seen: Arc<Mutex<BTreeMap<String, Seen>>> = Arc::default();
    let watch = {
        let (jobs, seen) = (jobs.clone(), seen.clone());
        tokio::spawn(async move {
            let mut stream = watcher(jobs, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let Ok(watcher::Event::Apply(job) | watcher::Event::InitApply(job)) = event else { continue };
                let Some(name) = job.metadata.name.clone() else { continue };
                let mut seen = seen.lock();
                let entry = seen.entry(name).or_default();
                match condition_of(&job) {
                    Some((status, reason, message)) if status == "True" => {
                        entry.blocked.insert((reason, message));
                    }
                    Some((status, reason, _)) if status == "False" && reason == "PodsCreated" => {
                        entry.cleared = true;
                    }
                    _ => {}
                }
                entry.complete |= is_complete(&job);
            }
        })
    };

    println!(
        "creating {} Jobs of parallelism {} under a quota of {} pods",
        spec.jobs, spec.parallelism, spec.quota_pods
    );
    let mut created_at: BTreeMap<String, Instant> = BTreeMap::new();
    for i in 0..spec.jobs {
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": job_name(i), "namespace": NAMESPACE},
            "spec": {
                "parallelism": spec.parallelism,
                "completions": spec.completions,
                "backoffLimit": 6,
                "template": {
                    "metadata": {"annotations": {"sim.batchfleet.io/run": spec.pod_run}},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
                }
            }
        }))?;
        jobs.create(&PostParams::default(), &job).await.with_context(|| format!("Job {}", job_name(i)))?;
        created_at.insert(job_name(i), Instant::now());
    }
    tokio::time::sleep(duration(&spec.raise_after)).await;
    let raised_at = Instant::now();
    println!("raising the quota to {} pods", spec.raised_pods);
    quotas
        .patch(
            QUOTA,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hard": {"pods": spec.raised_pods.to_string()}}})),
        )
        .await?;

    let deadline = Instant::now() + duration(&spec.settle);
    let all_done = |seen: &BTreeMap<String, Seen>| {
        seen.values().filter(|s| s.complete).count() == spec.jobs
            && seen.values().all(|s| s.blocked.is_empty() || s.cleared)
    };
    while Instant::now() < deadline && !all_done(&seen.lock()) {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let finished_jobs = jobs.list(&Default::default()).await?.items;
    let events: Vec<Event> =
        Api::<Event>::namespaced(client.clone(), NAMESPACE).list(&Default::default()).await?.items;
    watch.abort();
    for child in fleet.coordinators.iter_mut().chain(fleet.workers.iter_mut().map(|(_, c)| c)) {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    let audit_log = super::settled_audit_log(&audit_path).await.context("reading the audit log")?;
    drop(sim);

    let seen = seen.lock().clone();
    let refused_creates = refused_pod_creates(&audit_log);
    let audits = audit(&spec, &seen, &events, &finished_jobs, &created_at, raised_at, refused_creates);
    let blocked_events: u64 = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some(BLOCKED_EVENT))
        .map(|e| u64::from(e.count.unwrap_or(1).max(1) as u32))
        .sum();
    let passed = audits.iter().all(Outcome::not_failed);
    let violations = crate::run::report::violations(audits.iter());
    std::fs::write(out.join("jobs-seen.json"), serde_json::to_vec_pretty(&seen)?)?;
    let report = QuotaDeadlockReport {
        scenario: name.into(),
        description: spec.description.clone(),
        passed,
        jobs_blocked: seen.values().filter(|s| !s.blocked.is_empty()).count(),
        jobs_completed: finished_jobs.iter().filter(|j| is_complete(j)).count(),
        refused_creates,
        blocked_events,
        blocked_seconds: raised_at
            .duration_since(*created_at.values().next().unwrap_or(&raised_at))
            .as_secs_f64(),
        parameters: spec,
        audits,
        violations,
        files: BTreeMap::from([
            ("audit_log".to_string(), audit_path.display().to_string()),
            ("jobs_seen".to_string(), out.join("jobs-seen.json").display().to_string()),
            ("process_logs".to_string(), logs_dir.display().to_string()),
        ]),
        wall_seconds: wall.elapsed().as_secs_f64(),
    };
    let path = own_kind::write_report(out, &report, &report.audits)?;
    Ok((report.passed, path))
}

/// Pod creates the sim answered 403 in the scenario's namespace.
fn refused_pod_creates(log: &[AuditEvent]) -> usize {
    log.iter()
        .filter(|e| e.verb == "create" && e.response_status.as_ref().is_some_and(|s| s.code == 403))
        .filter(|e| e.object_ref.as_ref().is_some_and(|o| o.resource == "pods" && o.namespace == NAMESPACE))
        .count()
}

fn involves(e: &Event, job: &str) -> bool {
    e.involved_object.kind.as_deref() == Some("Job") && e.involved_object.name.as_deref() == Some(job)
}

/// The audits, from what the harness watched and listed (pure, so its verdicts are tested).
pub fn audit(
    spec: &Spec,
    seen: &BTreeMap<String, Seen>,
    events: &[Event],
    jobs: &[Job],
    created_at: &BTreeMap<String, Instant>,
    raised_at: Instant,
    refused_creates: usize,
) -> Vec<Outcome> {
    let quota_text = format!(
        "exceeded quota: {QUOTA}, requested: pods=1, used: pods={0}, limited: pods={0}",
        spec.quota_pods
    );
    // A Job the quota refused: upstream's own FailedCreate Event says so.
    let refused: BTreeSet<&str> = created_at
        .keys()
        .map(String::as_str)
        .filter(|job| {
            events.iter().any(|e| {
                involves(e, job)
                    && e.reason.as_deref() == Some("FailedCreate")
                    && e.message.as_deref().is_some_and(|m| m.contains("exceeded quota"))
            })
        })
        .collect();

    let mut signalled = Vec::new();
    if refused.is_empty() {
        signalled.push("no Job was refused by the quota: the scenario did not block anything".to_string());
    }
    for job in &refused {
        let blocked: Vec<&Event> = events
            .iter()
            .filter(|e| involves(e, job) && e.reason.as_deref() == Some(BLOCKED_EVENT))
            .collect();
        if !blocked.iter().any(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.message.as_deref().is_some_and(|m| m.contains(&quota_text))
        }) {
            signalled
                .push(format!("{job}: no Warning {BLOCKED_EVENT} Event quoting `{quota_text}`: {blocked:?}"));
        }
        let condition = seen.get(*job).map(|s| &s.blocked);
        if !condition.is_some_and(|c| {
            c.iter().any(|(reason, message)| reason == "QuotaExceeded" && message.contains(&quota_text))
        }) {
            signalled
                .push(format!("{job}: condition {CONDITION}=True (QuotaExceeded) never seen: {condition:?}"));
        }
    }

    let mut bounded = Vec::new();
    let mut total_events = 0u64;
    for (job, created) in created_at {
        let span = raised_at.saturating_duration_since(*created) + SPAN_SLACK;
        let count: u64 = events
            .iter()
            .filter(|e| involves(e, job) && e.reason.as_deref() == Some(BLOCKED_EVENT))
            .map(|e| u64::from(e.count.unwrap_or(1).max(1) as u32))
            .sum();
        total_events += count;
        let bound = steps_within(span);
        if count > bound {
            bounded.push(format!(
                "{job}: {count} {BLOCKED_EVENT} Events, over the {bound} back-off steps of {span:?}"
            ));
        }
    }

    let mut cleared = Vec::new();
    for job in jobs {
        let name = job.metadata.name.as_deref().unwrap_or("");
        let ever_blocked = seen.get(name).is_some_and(|s| !s.blocked.is_empty()) || refused.contains(name);
        match condition_of(job) {
            Some((status, reason, _)) if status == "False" && reason == "PodsCreated" => {}
            None if !ever_blocked => {}
            other => cleared.push(format!("{name}: condition at the end {other:?}")),
        }
    }

    let incomplete: Vec<String> = created_at
        .keys()
        .filter(|name| {
            !jobs.iter().any(|j| j.metadata.name.as_deref() == Some(name.as_str()) && is_complete(j))
        })
        .map(|name| format!("{name}: not Complete"))
        .collect();

    let mut bounded_outcome = Outcome::from_violations(
        "blocked-events-bounded-by-backoff-steps",
        "per Job, PodCreationBlocked Events (counts summed) ≤ the back-off steps (1 s doubling to 60 s) its blocked span allows",
        created_at.len(),
        "Jobs",
        bounded,
    );
    bounded_outcome.measured =
        format!("{}; {total_events} Events for {refused_creates} refused creates", bounded_outcome.measured);
    vec![
        Outcome::from_violations(
            "refused-jobs-signalled",
            "every Job refused by the quota has a Warning PodCreationBlocked Event and the condition batchfleet.io/PodCreationBlocked=True, reason QuotaExceeded, both quoting the API's message",
            refused.len(),
            "refused Jobs",
            signalled,
        ),
        bounded_outcome,
        Outcome::from_violations(
            "condition-clears-after-raise",
            "after the quota is raised, every Job that was blocked ends with the condition False (PodsCreated)",
            jobs.len(),
            "Jobs",
            cleared,
        ),
        Outcome::from_violations(
            "every-job-completes",
            "every Job Complete=True within settle after the raise",
            created_at.len(),
            "Jobs",
            incomplete,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_begin_at_doubling_delays_up_to_the_cap() {
        // Steps begin at 0, 1, 3, 7, 15, 31, 63, 123, … s.
        let cases = [
            (0, 1),
            (999, 1),
            (1_000, 2),
            (2_999, 2),
            (3_000, 3),
            (7_000, 4),
            (62_999, 6),
            (63_000, 7),
            (123_000, 8),
        ];
        for (ms, steps) in cases {
            assert_eq!(steps_within(Duration::from_millis(ms)), steps, "{ms} ms");
        }
    }

    #[test]
    fn the_shipped_scenario_loads() {
        let spec = load(KIND).expect("the scenario loads");
        assert_eq!(spec.kind, KIND);
        assert!(crate::run::own_kind::is_of_kind(KIND, KIND));
        assert!(!crate::run::own_kind::is_of_kind("podgc-policy", KIND));
    }

    fn spec() -> Spec {
        load(KIND).expect("the scenario loads")
    }

    fn event(job: &str, reason: &str, type_: &str, message: &str, count: i32) -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{job}.{reason}.{count}"), "namespace": NAMESPACE},
            "involvedObject": {"kind": "Job", "name": job, "namespace": NAMESPACE},
            "reason": reason, "type": type_, "message": message, "count": count
        }))
        .expect("event")
    }

    fn job(name: &str, condition: Option<(&str, &str)>, complete: bool) -> Job {
        let mut conditions = Vec::new();
        if let Some((status, reason)) = condition {
            conditions.push(json!({"type": CONDITION, "status": status, "reason": reason}));
        }
        if complete {
            conditions.push(json!({"type": "Complete", "status": "True"}));
        }
        serde_json::from_value(json!({"metadata": {"name": name}, "status": {"conditions": conditions}}))
            .expect("job")
    }

    /// The audits fail on what they are there to catch: a refused Job without the signal, more
    /// Events than steps, a condition left True, a Job not complete.
    #[test]
    fn audits_pass_on_a_good_run_and_fail_on_each_fault() {
        let spec = spec();
        let quota = format!(
            r#"pods "want-001-x" is forbidden: exceeded quota: {QUOTA}, requested: pods=1, used: pods={0}, limited: pods={0}"#,
            spec.quota_pods
        );
        let t0 = Instant::now();
        let raised = t0 + Duration::from_secs(8);
        let created = BTreeMap::from([("want-000".to_string(), t0), ("want-001".to_string(), t0)]);
        let good_events = vec![
            event("want-001", "FailedCreate", "Warning", &format!("Error creating: {quota}"), 7),
            event(
                "want-001",
                BLOCKED_EVENT,
                "Warning",
                &format!("Pod creation is blocked (QuotaExceeded): {quota}"),
                1,
            ),
            event("want-001", BLOCKED_EVENT, "Warning", &format!("step 2: {quota}"), 1),
        ];
        let seen = BTreeMap::from([
            ("want-000".to_string(), Seen { complete: true, ..Seen::default() }),
            (
                "want-001".to_string(),
                Seen {
                    blocked: BTreeSet::from([("QuotaExceeded".to_string(), quota.clone())]),
                    cleared: true,
                    complete: true,
                },
            ),
        ]);
        let good_jobs =
            vec![job("want-000", None, true), job("want-001", Some(("False", "PodsCreated")), true)];
        let verdicts = |seen: &BTreeMap<String, Seen>, events: &[Event], jobs: &[Job]| -> Vec<bool> {
            audit(&spec, seen, events, jobs, &created, raised, 9).iter().map(|o| o.passed).collect()
        };
        assert_eq!(verdicts(&seen, &good_events, &good_jobs), vec![true; 4]);

        let mut unsignalled = good_events.clone();
        unsignalled.retain(|e| e.reason.as_deref() != Some(BLOCKED_EVENT));
        assert!(!verdicts(&seen, &unsignalled, &good_jobs)[0]);

        let mut spam = good_events.clone();
        spam.push(event("want-001", BLOCKED_EVENT, "Warning", &quota, 9));
        assert!(!verdicts(&seen, &spam, &good_jobs)[1]);

        let stuck = vec![job("want-000", None, true), job("want-001", Some(("True", "QuotaExceeded")), true)];
        assert!(!verdicts(&seen, &good_events, &stuck)[2]);

        let unfinished = vec![job("want-000", None, false), good_jobs[1].clone()];
        assert!(!verdicts(&seen, &good_events, &unfinished)[3]);

        assert!(!verdicts(&seen, &[], &good_jobs)[0], "nothing refused: the run proved nothing");
    }
}
