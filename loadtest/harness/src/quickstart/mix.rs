//! The quickstart's work: the demo Jobs a newcomer reads about, a CronJob, and a stream of Jobs
//! of several shapes across several namespaces, each labelled with the condition it must end
//! with (`demo.batchfleet.io/expect`), so that kubectl shows it and a test checks it from the
//! cluster's objects.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::time::Instant;

/// Where the demo Jobs and the CronJob go.
pub const DEMO_NAMESPACE: &str = "demo";
/// The namespaces the stream spreads over (with `demo`): several teams, several shards.
pub const NAMESPACES: [&str; 8] =
    ["demo", "analytics", "billing", "ingest", "media", "ml-training", "reports", "search"];
/// The label naming the condition a Job must end with.
pub const EXPECT_LABEL: &str = "demo.batchfleet.io/expect";
pub const CRONJOB: &str = "ticker";

/// One Job of the plan: when it is created (since the work started), and how it must end.
#[derive(Debug, Clone)]
pub struct PlannedJob {
    pub at: Duration,
    pub job: Job,
    /// `Complete` or `Failed`.
    pub expect: &'static str,
    /// What it shows, for the demo Jobs.
    pub what: Option<&'static str>,
}

impl PlannedJob {
    pub fn key(&self) -> (String, String) {
        (
            self.job.metadata.namespace.clone().unwrap_or_default(),
            self.job.metadata.name.clone().unwrap_or_default(),
        )
    }
}

fn job(namespace: &str, name: &str, spec: Value, annotations: Value, expect: &str) -> anyhow::Result<Job> {
    let mut spec = spec;
    spec["template"] = json!({
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 2"]}]}
    });
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {EXPECT_LABEL: expect}},
        "spec": spec
    }))
    .with_context(|| format!("building Job {namespace}/{name}"))
}

/// The fixed demo Jobs, created first: what each shows a newcomer.
fn demo_jobs() -> anyhow::Result<Vec<PlannedJob>> {
    let demo = |name, spec, annotations, expect, what| -> anyhow::Result<PlannedJob> {
        Ok(PlannedJob {
            at: Duration::ZERO,
            job: job(DEMO_NAMESPACE, name, spec, annotations, expect)?,
            expect,
            what: Some(what),
        })
    };
    Ok(vec![
        demo(
            "hello",
            json!({"completions": 6, "parallelism": 2}),
            json!({"sim.batchfleet.io/run": "2s"}),
            "Complete",
            "6 pods, 2 at a time: Complete",
        )?,
        demo(
            "flaky",
            json!({"completions": 1, "backoffLimit": 4}),
            json!({"sim.batchfleet.io/run": "1s", "sim.batchfleet.io/exit-code": "1", "sim.batchfleet.io/fail-attempts": "2"}),
            "Complete",
            "fails twice, retried after 10s and 20s back-off: Complete",
        )?,
        demo(
            "doomed",
            json!({"backoffLimit": 1}),
            json!({"sim.batchfleet.io/run": "1s", "sim.batchfleet.io/exit-code": "3"}),
            "Failed",
            "always exits 3: Failed, BackoffLimitExceeded",
        )?,
        demo(
            "tidy",
            json!({"ttlSecondsAfterFinished": 10}),
            json!({"sim.batchfleet.io/run": "1s"}),
            "Complete",
            "ttlSecondsAfterFinished 10: deleted with its pod 10s after it completes",
        )?,
        demo(
            "indexed",
            json!({"completionMode": "Indexed", "completions": 8, "parallelism": 3}),
            json!({"sim.batchfleet.io/run": "1500ms", "sim.batchfleet.io/run-by-index": "0=500ms,7=4s"}),
            "Complete",
            "Indexed, 8 completions: completedIndexes 0-7",
        )?,
    ])
}

/// The stream's shapes, taken in turn: (name, spec, pod annotations, expected condition).
fn stream_shape(n: usize) -> (&'static str, Value, Value, &'static str) {
    match n % 5 {
        0 => (
            "fan-out",
            json!({"completions": 4, "parallelism": 2}),
            json!({"sim.batchfleet.io/run": "1s"}),
            "Complete",
        ),
        1 => (
            "indexed",
            json!({"completionMode": "Indexed", "completions": 5, "parallelism": 3}),
            json!({"sim.batchfleet.io/run": "800ms", "sim.batchfleet.io/run-by-index": "4=3s"}),
            "Complete",
        ),
        2 => (
            "retried",
            json!({"backoffLimit": 3}),
            json!({"sim.batchfleet.io/run": "500ms", "sim.batchfleet.io/exit-code": "1", "sim.batchfleet.io/fail-attempts": "1"}),
            "Complete",
        ),
        3 => (
            "failing",
            json!({"backoffLimit": 1}),
            json!({"sim.batchfleet.io/run": "500ms", "sim.batchfleet.io/exit-code": "2"}),
            "Failed",
        ),
        _ => {
            ("ttl", json!({"ttlSecondsAfterFinished": 8}), json!({"sim.batchfleet.io/run": "1s"}), "Complete")
        }
    }
}

/// How often the stream creates a Job: about 40 over the run, at least one a second.
pub fn stream_interval(duration: Duration) -> Duration {
    (duration / 40).max(Duration::from_secs(1))
}

/// The demo Jobs at once, then one Job of the next shape in the next namespace every
/// [`stream_interval`] until `duration`.
pub fn plan(duration: Duration) -> anyhow::Result<Vec<PlannedJob>> {
    let mut plan = demo_jobs()?;
    let every = stream_interval(duration);
    let mut at = every;
    let mut n = 0;
    while at < duration {
        let (shape, spec, annotations, expect) = stream_shape(n);
        let namespace = NAMESPACES[n % NAMESPACES.len()];
        let name = format!("{shape}-{n}");
        plan.push(PlannedJob {
            at,
            job: job(namespace, &name, spec, annotations, expect)?,
            expect,
            what: None,
        });
        n += 1;
        at += every;
    }
    Ok(plan)
}

/// The CronJob: every 20 s, Forbid; its Jobs complete and keep for 5 minutes.
pub fn cronjob() -> anyhow::Result<CronJob> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": CRONJOB, "namespace": DEMO_NAMESPACE},
        "spec": {"schedule": "@every 20s", "concurrencyPolicy": "Forbid", "successfulJobsHistoryLimit": 2,
                 "jobTemplate": {
                     "metadata": {"labels": {EXPECT_LABEL: "Complete"}},
                     "spec": {"ttlSecondsAfterFinished": 300, "template": {
                     "metadata": {"annotations": {"sim.batchfleet.io/run": "5s"}},
                     "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}}}}}
    }))?)
}

/// Creates what may already exist (a second `up` on a kept cluster): a 409 is fine.
async fn create_once<K>(api: &Api<K>, object: &K, what: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating {what}")),
    }
}

pub async fn create_namespaces_and_cronjob(client: &kube::Client) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in NAMESPACES {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        create_once(&namespaces, &ns, &format!("namespace {name}")).await?;
    }
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
    create_once(&cronjobs, &cronjob()?, "CronJob ticker").await
}

/// Stops the CronJob from starting more Jobs, so that the run can end.
pub async fn suspend_cronjob(client: &kube::Client) -> anyhow::Result<()> {
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
    cronjobs
        .patch(CRONJOB, &PatchParams::default(), &Patch::Merge(json!({"spec": {"suspend": true}})))
        .await
        .context("suspending CronJob ticker")?;
    Ok(())
}

/// What the sender did, shared with the progress bars.
#[derive(Debug, Default)]
pub struct Sent {
    /// When each Job's create was answered, by (namespace, name).
    pub created: Mutex<BTreeMap<(String, String), Timestamp>>,
    pub errors: Mutex<Vec<String>>,
}

/// Creates each planned Job at its time since `start`.
pub async fn send(client: kube::Client, plan: Vec<PlannedJob>, start: Instant, sent: Arc<Sent>) {
    for planned in plan {
        tokio::time::sleep_until(start + planned.at).await;
        let (namespace, name) = planned.key();
        let jobs: Api<Job> = Api::namespaced(client.clone(), &namespace);
        match create_once(&jobs, &planned.job, &format!("Job {namespace}/{name}")).await {
            Ok(()) => {
                sent.created.lock().insert((namespace, name), Timestamp::now());
            }
            Err(e) => {
                tracing::warn!(error = format!("{e:#}"), "creating a Job failed");
                sent.errors.lock().push(format!("{e:#}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minute_mixes_every_shape_over_every_namespace() {
        let plan = plan(Duration::from_secs(60)).expect("plan");
        let stream: Vec<&PlannedJob> = plan.iter().filter(|p| p.what.is_none()).collect();
        assert_eq!(stream.len(), 39, "one every 1.5 s after the first");
        let namespaces: std::collections::BTreeSet<String> = stream.iter().map(|p| p.key().0).collect();
        assert_eq!(namespaces.len(), NAMESPACES.len());
        assert!(plan.iter().any(|p| p.expect == "Failed") && plan.iter().any(|p| p.expect == "Complete"));
        assert!(plan.iter().all(|p| p.at < Duration::from_secs(60)));
        let names: std::collections::BTreeSet<(String, String)> = plan.iter().map(PlannedJob::key).collect();
        assert_eq!(names.len(), plan.len(), "names are unique");
    }
}
