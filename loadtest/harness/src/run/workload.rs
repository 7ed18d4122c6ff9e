//! Sends a scenario's workload: its namespaces, its CronJobs, and its Job streams at their rates,
//! recording when each Job was created (for the latencies) and counting what went wrong.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use crate::scenario::{CronJobSpec, JobSpec, PodBehaviour, WorkloadSpec};

/// The sim's pod annotations for a behaviour.
fn annotations(pod: &PodBehaviour) -> Value {
    let mut out = Map::new();
    let mut put = |key: &str, value: String| {
        out.insert(format!("sim.batchfleet.io/{key}"), Value::String(value));
    };
    if let Some(run) = pod.run {
        put("run", format!("{}ms", run.0.as_millis()));
    }
    if let Some(by_index) = &pod.run_by_index {
        put("run-by-index", by_index.clone());
    }
    if let Some(code) = pod.exit_code {
        put("exit-code", code.to_string());
    }
    if let Some(n) = pod.fail_attempts {
        put("fail-attempts", n.to_string());
    }
    Value::Object(out)
}

/// The run's label (`key: value`) on the workload's objects, so that its watches select them.
pub type RunLabel<'a> = (&'a str, &'a str);

fn pod_template(pod: &PodBehaviour, label: RunLabel<'_>) -> Value {
    json!({
        "metadata": {"annotations": annotations(pod), "labels": {label.0: label.1}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
    })
}

/// The Job `<spec.name>-<n>`; completions always set, so that no Job is a work queue.
pub fn job_object(spec: &JobSpec, n: usize, label: RunLabel<'_>) -> anyhow::Result<Job> {
    let mut job_spec = json!({
        "completions": spec.completions.unwrap_or(1),
        "parallelism": spec.parallelism.unwrap_or(1),
        "completionMode": if spec.indexed { "Indexed" } else { "NonIndexed" },
        "template": pod_template(&spec.pod, label),
    });
    if let Some(limit) = spec.backoff_limit {
        job_spec["backoffLimit"] = json!(limit);
    }
    if let Some(ttl) = spec.ttl_seconds_after_finished {
        job_spec["ttlSecondsAfterFinished"] = json!(ttl);
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": format!("{}-{n}", spec.name), "labels": {label.0: label.1}},
        "spec": job_spec,
    }))?)
}

fn cronjob_object(spec: &CronJobSpec, label: RunLabel<'_>) -> anyhow::Result<CronJob> {
    // History kept whole, so that every Job a scheduled time created is still there to count.
    Ok(serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": spec.name},
        "spec": {"schedule": spec.schedule, "successfulJobsHistoryLimit": 1000, "failedJobsHistoryLimit": 1000,
                 "jobTemplate": {"metadata": {"labels": {label.0: label.1}},
                                 "spec": {"template": pod_template(&spec.pod, label)}}}
    }))?)
}

pub async fn create_namespaces(client: &kube::Client, names: &[String]) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e).with_context(|| format!("creating namespace {name}")),
        }
    }
    Ok(())
}

/// Deletes the run's namespaces (and with them all it made), without waiting for them to go.
pub async fn delete_namespaces(client: &kube::Client, names: &[String]) {
    let api: Api<Namespace> = Api::all(client.clone());
    for name in names {
        if let Err(e) = api.delete(name, &kube::api::DeleteParams::background()).await {
            tracing::warn!(namespace = %name, error = %e, "deleting a namespace of the run failed");
        }
    }
}

/// The CronJobs of the workload, each in the first `namespaces` namespaces (default all);
/// answers (namespace, name, schedule) of each.
pub async fn create_cronjobs(
    client: &kube::Client,
    workload: &WorkloadSpec,
    namespaces: &[String],
    label: RunLabel<'_>,
) -> anyhow::Result<Vec<batchfleet_audits::cron::CronJobUnderTest>> {
    let mut created = Vec::new();
    for spec in &workload.cronjobs {
        let cj = cronjob_object(spec, label)?;
        for ns in namespaces.iter().take(spec.namespaces.unwrap_or(namespaces.len())) {
            let api: Api<CronJob> = Api::namespaced(client.clone(), ns);
            api.create(&PostParams::default(), &cj)
                .await
                .with_context(|| format!("creating CronJob {ns}/{}", spec.name))?;
            created.push(batchfleet_audits::cron::CronJobUnderTest {
                namespace: ns.clone(),
                name: spec.name.clone(),
                schedule: spec.schedule.clone(),
            });
        }
    }
    Ok(created)
}

/// Suspends the CronJobs, so that what they created settles before the audits count it.
pub async fn suspend_cronjobs(client: &kube::Client, cronjobs: &[batchfleet_audits::cron::CronJobUnderTest]) {
    let suspend = Patch::Merge(json!({"spec": {"suspend": true}}));
    for cj in cronjobs {
        let api: Api<CronJob> = Api::namespaced(client.clone(), &cj.namespace);
        if let Err(e) = api.patch(&cj.name, &PatchParams::default(), &suspend).await {
            tracing::warn!(namespace = %cj.namespace, name = %cj.name, error = %e, "suspending a CronJob failed");
        }
    }
}

/// What the generator did, shared with the progress display.
#[derive(Default)]
pub struct Sent {
    pub created: AtomicUsize,
    pub failed: AtomicUsize,
    /// When each Job's create was sent, by (namespace, name).
    pub created_at: Mutex<HashMap<(String, String), Timestamp>>,
    pub errors: Mutex<Vec<String>>,
}

impl Sent {
    pub fn created(&self) -> usize {
        self.created.load(Ordering::Relaxed)
    }
}

/// Every Job stream of `workload`, each at its rate from `start`, round-robin over the
/// namespaces; returns once every Job was sent or `until` passed.
pub async fn send_jobs(
    client: kube::Client,
    workload: WorkloadSpec,
    namespaces: Vec<String>,
    (start, until): (Instant, Instant),
    label: RunLabel<'_>,
    sent: Arc<Sent>,
) {
    let label: Arc<(String, String)> = Arc::new((label.0.into(), label.1.into()));
    let streams = workload.jobs.iter().cloned().map(|spec| {
        let (client, namespaces, sent, label) =
            (client.clone(), namespaces.clone(), sent.clone(), label.clone());
        tokio::spawn(async move { send_stream(client, spec, namespaces, (start, until), label, sent).await })
    });
    for stream in streams.collect::<Vec<_>>() {
        let _ = stream.await;
    }
}

/// How many creates of one stream may be in flight: enough for a burst to go out fast.
const CREATES_IN_FLIGHT: usize = 16;

async fn send_stream(
    client: kube::Client,
    spec: JobSpec,
    namespaces: Vec<String>,
    (start, until): (Instant, Instant),
    label: Arc<(String, String)>,
    sent: Arc<Sent>,
) {
    let limit = Arc::new(tokio::sync::Semaphore::new(CREATES_IN_FLIGHT));
    let mut in_flight = Vec::new();
    for n in 0..spec.count {
        let offset = spec.rate.map_or(Duration::ZERO, |r| Duration::from_secs_f64(n as f64 / r));
        let due = start + spec.start.0 + offset;
        if due > until {
            break;
        }
        tokio::time::sleep_until(due).await;
        let Ok(permit) = limit.clone().acquire_owned().await else { break };
        let ns = namespaces[n % namespaces.len()].clone();
        let (client, spec, sent, label) = (client.clone(), spec.clone(), sent.clone(), label.clone());
        in_flight.push(tokio::spawn(async move {
            let _permit = permit;
            create_job(&client, &spec, n, &ns, (&label.0, &label.1), &sent).await;
        }));
    }
    for task in in_flight {
        let _ = task.await;
    }
}

async fn create_job(
    client: &kube::Client,
    spec: &JobSpec,
    n: usize,
    ns: &str,
    label: RunLabel<'_>,
    sent: &Sent,
) {
    let job = match job_object(spec, n, label) {
        Ok(job) => job,
        Err(e) => {
            sent.failed.fetch_add(1, Ordering::Relaxed);
            sent.errors.lock().push(format!("{}-{n}: {e:#}", spec.name));
            return;
        }
    };
    let name = format!("{}-{n}", spec.name);
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    let at = Timestamp::now();
    let mut attempt = 0;
    loop {
        match api.create(&PostParams::default(), &job).await {
            Ok(_) => {
                sent.created_at.lock().insert((ns.to_string(), name), at);
                sent.created.fetch_add(1, Ordering::Relaxed);
                return;
            }
            // An API fault the scenario injects (429, 5xx) is retried, as a client would.
            Err(kube::Error::Api(s))
                if attempt < CREATE_RETRIES && matches!(s.code, 429 | 500 | 503 | 504) =>
            {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            Err(e) => {
                tracing::warn!(namespace = ns, job = %name, error = %e, "creating a Job failed");
                sent.failed.fetch_add(1, Ordering::Relaxed);
                sent.errors.lock().push(format!("{ns}/{name}: {e}"));
                return;
            }
        }
    }
}

/// How often a Job's create is retried after a 429 or 5xx.
const CREATE_RETRIES: u64 = 8;

/// How many Jobs the workload's streams send within `duration`.
pub fn planned_jobs(workload: &WorkloadSpec, duration: Duration) -> usize {
    workload
        .jobs
        .iter()
        .map(|j| match j.rate {
            None if j.start.0 <= duration => j.count,
            None => 0,
            Some(rate) => {
                let window = duration.saturating_sub(j.start.0).as_secs_f64();
                j.count.min((window * rate).floor() as usize + 1)
            }
        })
        .sum()
}
