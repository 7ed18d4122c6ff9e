//! What watches on every Job and pod saw during a run, kept compactly per Job: its shape, when
//! it was first seen, its pods (how many at once were active, when the first and last were seen,
//! the newest creation time), when it finished by its condition, its last status, and whether it
//! was deleted. Observation times are this process's wall clock; server times (creation,
//! condition transitions) are the objects' own.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;

use crate::Outcome;
use crate::cron::CronClock;
use crate::pod_summary::PodSummary;

/// How a Job finished, by its condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// `Complete` or `Failed`.
    pub condition: String,
    pub reason: String,
    /// The condition's `lastTransitionTime` (whole seconds, as the API serves it).
    pub at: Timestamp,
    /// When the watch first saw it.
    pub seen: Timestamp,
}

/// One Job as the watches saw it.
#[derive(Debug, Clone, Default)]
pub struct JobRecord {
    pub namespace: String,
    pub name: String,
    pub parallelism: i32,
    pub completions: Option<i32>,
    pub ttl_seconds: Option<i32>,
    /// The CronJob that owns it, if any.
    pub cronjob: Option<String>,
    pub first_seen: Option<Timestamp>,
    /// Its `creationTimestamp` (server time, whole seconds).
    pub created: Option<Timestamp>,
    pub finished: Option<Finished>,
    pub status: Option<JobStatus>,
    pub deleted_seen: Option<Timestamp>,
    /// When the watch first saw it terminating (`deletionTimestamp` set, as a foreground
    /// delete leaves it while its pods go) or deleted: no later than its delete plus the
    /// watch's delay.
    pub deleting_seen: Option<Timestamp>,
    pub pods_seen: usize,
    pub first_pod_seen: Option<Timestamp>,
    pub last_pod_seen: Option<Timestamp>,
    /// The newest `creationTimestamp` among its pods, and that pod's name.
    pub newest_pod: Option<(Timestamp, String)>,
    /// The most pods active at once (not finished, not terminating).
    pub most_active: i32,
}

#[derive(Debug, Clone)]
struct PodState {
    job: String,
    active: bool,
    /// Seen Succeeded or Failed (counted in `pods_finished`).
    finished: bool,
}

/// Every Job (by uid) and the pods of each, as seen.
#[derive(Debug, Default)]
pub struct ObjectsSeen {
    pub jobs: HashMap<String, JobRecord>,
    /// Every uid seen under each (namespace, name): two mean the name was created twice.
    pub names: BTreeMap<(String, String), BTreeSet<String>>,
    /// When the watch first saw each pod Succeeded or Failed: the completions behind the
    /// throughput.
    pub pods_finished: Vec<Timestamp>,
    pods: HashMap<String, PodState>,
    active: HashMap<String, i32>,
    /// Pods listed since the pod watch restarted, while it lists again.
    relisted: Option<HashSet<String>>,
    pods_listed: bool,
    jobs_listed: bool,
}

fn parse_time(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Option<Timestamp> {
    t.0.to_string().parse().ok()
}

impl ObjectsSeen {
    fn record(&mut self, uid: &str) -> &mut JobRecord {
        self.jobs.entry(uid.to_string()).or_default()
    }

    fn set_active(&mut self, pod: String, job: String, active: bool) {
        let finished = self.pods.get(&pod).is_some_and(|p| p.finished);
        let was =
            self.pods.insert(pod, PodState { job: job.clone(), active, finished }).is_some_and(|p| p.active);
        let count = self.active.entry(job.clone()).or_default();
        match (was, active) {
            (false, true) => *count += 1,
            (true, false) => *count -= 1,
            _ => {}
        }
        let now = *count;
        let record = self.record(&job);
        record.most_active = record.most_active.max(now);
    }

    /// A pod added or changed.
    pub fn apply_pod(&mut self, pod: &PodSummary, seen: Timestamp) {
        let Some(uid) = pod.metadata.uid.clone() else { return };
        let Some(owner) = pod.metadata.owner_references.iter().flatten().find(|o| o.kind == "Job") else {
            return;
        };
        let job = owner.uid.clone();
        if let Some(relisted) = &mut self.relisted {
            relisted.insert(uid.clone());
        }
        if !self.pods.contains_key(&uid) {
            let created = pod.metadata.creation_timestamp.as_ref().and_then(parse_time);
            let name = pod.metadata.name.clone().unwrap_or_default();
            let record = self.record(&job);
            record.pods_seen += 1;
            record.first_pod_seen.get_or_insert(seen);
            record.last_pod_seen = Some(seen);
            if let Some(created) = created
                && record.newest_pod.as_ref().is_none_or(|(t, _)| created > *t)
            {
                record.newest_pod = Some((created, name));
            }
        }
        let phase = pod.phase.as_deref().unwrap_or("Pending");
        // Upstream's active pods: not finished and not terminating.
        let done = phase == "Succeeded" || phase == "Failed";
        let active = pod.metadata.deletion_timestamp.is_none() && !done;
        self.set_active(uid.clone(), job, active);
        if done && let Some(state) = self.pods.get_mut(&uid).filter(|p| !p.finished) {
            state.finished = true;
            self.pods_finished.push(seen);
        }
    }

    /// A pod deleted.
    pub fn delete_pod(&mut self, pod: &PodSummary) {
        let Some(uid) = pod.metadata.uid.clone() else { return };
        if let Some(state) = self.pods.get(&uid).cloned() {
            self.set_active(uid.clone(), state.job, false);
        }
        self.pods.remove(&uid);
    }

    fn on_pod(&mut self, event: watcher::Event<PodSummary>) {
        match event {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => self.apply_pod(&p, Timestamp::now()),
            watcher::Event::Delete(p) => self.delete_pod(&p),
            watcher::Event::Init => self.relisted = Some(HashSet::new()),
            watcher::Event::InitDone => {
                // Pods missing from the new list are gone.
                let relisted = self.relisted.take().unwrap_or_default();
                let gone: Vec<String> =
                    self.pods.keys().filter(|uid| !relisted.contains(*uid)).cloned().collect();
                for uid in gone {
                    if let Some(state) = self.pods.get(&uid).cloned() {
                        self.set_active(uid.clone(), state.job, false);
                    }
                    self.pods.remove(&uid);
                }
                self.pods_listed = true;
            }
        }
    }

    /// A Job added, changed (`deleted` false) or deleted.
    pub fn apply_job(&mut self, job: &Job, seen: Timestamp, deleted: bool) {
        let (Some(uid), Some(ns), Some(name)) =
            (job.metadata.uid.clone(), job.metadata.namespace.clone(), job.metadata.name.clone())
        else {
            return;
        };
        self.names.entry((ns.clone(), name.clone())).or_default().insert(uid.clone());
        let spec = job.spec.clone().unwrap_or_default();
        let cronjob = job
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.kind == "CronJob")
            .map(|o| o.name.clone());
        let record = self.record(&uid);
        record.namespace = ns;
        record.name = name;
        record.parallelism = spec.parallelism.unwrap_or(1);
        record.completions = spec.completions;
        record.ttl_seconds = spec.ttl_seconds_after_finished;
        record.cronjob = cronjob;
        record.first_seen.get_or_insert(seen);
        if record.created.is_none() {
            record.created = job.metadata.creation_timestamp.as_ref().and_then(parse_time);
        }
        if deleted || job.metadata.deletion_timestamp.is_some() {
            record.deleting_seen.get_or_insert(seen);
        }
        if let Some(status) = &job.status {
            record.status = Some(status.clone());
            if record.finished.is_none()
                && let Some(c) = status
                    .conditions
                    .iter()
                    .flatten()
                    .find(|c| c.status == "True" && (c.type_ == "Complete" || c.type_ == "Failed"))
            {
                record.finished = Some(Finished {
                    condition: c.type_.clone(),
                    reason: c.reason.clone().unwrap_or_default(),
                    at: c.last_transition_time.as_ref().and_then(parse_time).unwrap_or(seen),
                    seen,
                });
            }
        }
        if deleted {
            record.deleted_seen.get_or_insert(seen);
        }
    }

    fn on_job(&mut self, event: watcher::Event<Job>) {
        match event {
            watcher::Event::Apply(j) | watcher::Event::InitApply(j) => {
                self.apply_job(&j, Timestamp::now(), false)
            }
            watcher::Event::Delete(j) => self.apply_job(&j, Timestamp::now(), true),
            watcher::Event::Init => {}
            watcher::Event::InitDone => self.jobs_listed = true,
        }
    }
}

/// Watches on every Job and pod of a cluster, recording into [`ObjectsSeen`]; stopped when
/// dropped.
pub struct ObjectWatch {
    pub seen: Arc<Mutex<ObjectsSeen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for ObjectWatch {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    seen: Arc<Mutex<ObjectsSeen>>,
    on: fn(&mut ObjectsSeen, watcher::Event<K>),
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    tokio::spawn(async move {
        // Backing off after an error also yields, so that the task ends when its runtime does.
        let mut events = std::pin::pin!(watcher(api, config).default_backoff());
        while let Some(event) = events.next().await {
            match event {
                Ok(e) => on(&mut seen.lock(), e),
                Err(e) => tracing::warn!(error = %e, "audit watch"),
            }
        }
    })
}

/// Why the watches did not start.
#[derive(Debug)]
pub struct NotListed(pub Duration);

impl std::fmt::Display for NotListed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the Job and pod watches did not list within {:?}", self.0)
    }
}

impl std::error::Error for NotListed {}

impl ObjectWatch {
    /// Starts both watches and waits until each has listed, within `deadline`.
    pub async fn start(client: &kube::Client, deadline: Duration) -> Result<Self, NotListed> {
        Self::start_selected(client, deadline, None).await
    }

    /// [`ObjectWatch::start`] on the Jobs and pods `label_selector` selects only: on a cluster
    /// shared with other work, a run's own objects.
    pub async fn start_selected(
        client: &kube::Client,
        deadline: Duration,
        label_selector: Option<&str>,
    ) -> Result<Self, NotListed> {
        let seen = Arc::new(Mutex::new(ObjectsSeen::default()));
        let config = match label_selector {
            Some(selector) => watcher::Config::default().labels(selector),
            None => watcher::Config::default(),
        };
        let tasks = vec![
            watch(Api::<PodSummary>::all(client.clone()), config.clone(), seen.clone(), ObjectsSeen::on_pod),
            watch(Api::<Job>::all(client.clone()), config, seen.clone(), ObjectsSeen::on_job),
        ];
        let watch = Self { seen, tasks };
        let until = tokio::time::Instant::now() + deadline;
        loop {
            {
                let seen = watch.seen.lock();
                if seen.pods_listed && seen.jobs_listed {
                    break;
                }
            }
            if tokio::time::Instant::now() >= until {
                return Err(NotListed(deadline));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(watch)
    }
}

/// No Job ever had more active pods than its parallelism.
pub fn parallelism_never_exceeded(seen: &ObjectsSeen) -> Outcome {
    let violations = seen
        .jobs
        .values()
        .filter(|j| j.most_active > j.parallelism)
        .map(|j| {
            format!(
                "{}/{}: {} active pods, parallelism {}",
                j.namespace, j.name, j.most_active, j.parallelism
            )
        })
        .collect();
    Outcome::from_violations(
        "active-pods-within-parallelism",
        "no Job has more active pods than its parallelism",
        seen.jobs.len(),
        "Jobs",
        violations,
    )
}

/// No pod was created (by its server `creationTimestamp`) after its Job finished (by its
/// condition's `lastTransitionTime`, on the controllers' `clock`). Both are whole seconds, so
/// only a pod created in a second wholly after the finishing one counts.
pub fn no_pod_after_finish(seen: &ObjectsSeen, clock: &CronClock) -> Outcome {
    let violations = seen
        .jobs
        .values()
        .filter_map(|j| {
            let finished = j.finished.as_ref()?;
            let (created, pod) = j.newest_pod.as_ref()?;
            let finished_by = clock.wall_at(finished.at + jiff::SignedDuration::from_secs(1));
            (*created >= finished_by).then(|| {
                format!(
                    "{}/{}: pod {pod} created {created}, after the Job was {} at {}",
                    j.namespace, j.name, finished.condition, finished.at
                )
            })
        })
        .collect();
    Outcome::from_violations(
        "no-pod-for-a-finished-job",
        "no pod created after its Job finished",
        seen.jobs.values().filter(|j| j.finished.is_some()).count(),
        "finished Jobs",
        violations,
    )
}

/// No Job name was created twice (a CronJob's Job names carry the scheduled time, so this is
/// also "no scheduled time ran twice").
pub fn job_names_created_once(seen: &ObjectsSeen) -> Outcome {
    let violations = seen
        .names
        .iter()
        .filter(|(_, uids)| uids.len() > 1)
        .map(|((ns, name), uids)| format!("{ns}/{name}: created {} times", uids.len()))
        .collect();
    Outcome::from_violations(
        "job-names-created-once",
        "every Job name created once",
        seen.names.len(),
        "Job names",
        violations,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(uid: &str, parallelism: i32, finished_at: Option<&str>) -> Job {
        let status = finished_at.map(
            |at| json!({"conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": at}]}),
        );
        serde_json::from_value(json!({
            "metadata": {"name": format!("job-{uid}"), "namespace": "ns", "uid": uid},
            "spec": {"parallelism": parallelism, "template": {"spec": {"containers": []}}},
            "status": status,
        }))
        .expect("job")
    }

    fn pod(uid: &str, job: &str, phase: &str, created: &str) -> PodSummary {
        serde_json::from_value(json!({
            "metadata": {"name": format!("pod-{uid}"), "namespace": "ns", "uid": uid, "creationTimestamp": created,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": format!("job-{job}"), "uid": job}]},
            "status": {"phase": phase},
        }))
        .expect("pod")
    }

    #[test]
    fn more_active_pods_than_parallelism_fails_and_finished_pods_do_not_count() {
        let now = Timestamp::now();
        let mut seen = ObjectsSeen::default();
        seen.apply_job(&job("j", 2, None), now, false);
        seen.apply_pod(&pod("a", "j", "Running", "2026-11-26T10:00:00Z"), now);
        seen.apply_pod(&pod("b", "j", "Running", "2026-11-26T10:00:00Z"), now);
        seen.apply_pod(&pod("a", "j", "Succeeded", "2026-11-26T10:00:00Z"), now);
        seen.apply_pod(&pod("c", "j", "Pending", "2026-11-26T10:00:01Z"), now);
        assert!(parallelism_never_exceeded(&seen).passed);
        seen.apply_pod(&pod("d", "j", "Pending", "2026-11-26T10:00:01Z"), now);
        let outcome = parallelism_never_exceeded(&seen);
        assert!(!outcome.passed);
        assert_eq!(outcome.violations, vec!["ns/job-j: 3 active pods, parallelism 2".to_string()]);
        assert_eq!(seen.jobs["j"].pods_seen, 4);
        // Pod a finished once, however often it is seen so.
        seen.apply_pod(&pod("a", "j", "Succeeded", "2026-11-26T10:00:00Z"), now);
        assert_eq!(seen.pods_finished, vec![now]);
    }

    #[test]
    fn a_pod_created_after_its_job_finished_fails() {
        let now = Timestamp::now();
        let mut seen = ObjectsSeen::default();
        seen.apply_pod(&pod("a", "j", "Succeeded", "2026-11-26T10:00:00Z"), now);
        seen.apply_job(&job("j", 1, Some("2026-11-26T10:00:01Z")), now, false);
        assert!(no_pod_after_finish(&seen, &CronClock::wall()).passed);
        seen.apply_pod(&pod("late", "j", "Pending", "2026-11-26T10:00:02Z"), now);
        let outcome = no_pod_after_finish(&seen, &CronClock::wall());
        assert!(!outcome.passed, "{outcome:?}");
        assert!(outcome.violations[0].contains("pod pod-late"), "{outcome:?}");
    }

    #[test]
    fn a_name_created_twice_fails() {
        let now = Timestamp::now();
        let mut seen = ObjectsSeen::default();
        seen.apply_job(&job("one", 1, None), now, false);
        assert!(job_names_created_once(&seen).passed);
        let mut again = job("two", 1, None);
        again.metadata.name = Some("job-one".into());
        seen.apply_job(&again, now, false);
        assert!(!job_names_created_once(&seen).passed);
    }
}
