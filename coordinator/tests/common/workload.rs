//! The workload the fleet tests run while they inject faults, and its checks from the outside:
//! Jobs of parallelism 2 in every shard's namespace, an every-minute CronJob on a fast clock that
//! every worker shares (`fleet-worker --test-clock`), and probes that tell which worker acts for
//! each shard. Everything is judged from the sim's audit log and a watch on the cluster's
//! objects kept for the whole test, never from the fleet's own view of itself.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use batchfleet_sim::audit::{AuditEvent, Stage, read_log};
use batchfleet_sim::testing::wait_until;
use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use parking_lot::Mutex;
use serde_json::json;

pub const PARALLELISM: i32 = 2;
pub const COMPLETIONS: i32 = 6;
/// A work pod's run: six completions two at a time take three rounds of it, long enough for a
/// Job to be running while its shard moves.
const WORK_POD_RUN: &str = "700ms";
/// The CronJob in every namespace; upstream names its Jobs `tick-<scheduled minute>`.
pub const CRONJOB: &str = "tick";

/// The shard of `namespace` among `shards` (a power of two), as the fleet computes it.
pub fn shard_of(namespace: &str, shards: u32) -> u32 {
    let hash = batchfleet_sim::selector::shard::fnv1a64(namespace.as_bytes());
    (hash / (u64::MAX / u64::from(shards) + 1)) as u32
}

/// One namespace per shard: `ns-<i>` for the first `i` that falls in each.
pub fn one_namespace_per_shard(shards: u32) -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    for i in 0.. {
        let name = format!("ns-{i}");
        out.entry(shard_of(&name, shards)).or_insert(name);
        if out.len() == shards as usize {
            break;
        }
    }
    out
}

pub async fn create_namespaces(client: &kube::Client, names: impl IntoIterator<Item = &String>) {
    let api: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
        api.create(&PostParams::default(), &ns).await.expect("create namespace");
    }
}

/// The worker id in a `fleet-worker/VERSION (ID)` User-Agent.
pub fn worker_of(user_agent: &str) -> Option<&str> {
    user_agent.strip_prefix("fleet-worker/")?.split_once(" (")?.1.strip_suffix(')')
}

/// The CronJob clock every worker of a test is started with: `anchor + (wall − anchor) · speed`.
#[derive(Debug, Clone, Copy)]
pub struct CronClock {
    pub anchor: Timestamp,
    pub speed: f64,
}

impl CronClock {
    pub fn starting_now(speed: f64) -> Self {
        Self { anchor: Timestamp::now(), speed }
    }

    /// The value of `fleet-worker --test-clock`.
    pub fn flag(&self) -> String {
        format!("{}@{}", self.speed, self.anchor)
    }

    pub fn now(&self) -> Timestamp {
        let since = Timestamp::now().duration_since(self.anchor).as_secs_f64() * self.speed;
        self.anchor + jiff::SignedDuration::from_secs_f64(since)
    }
}

/// What the watches saw of pods: per Job (by uid), how many of its pods were active at once.
#[derive(Debug, Default)]
struct PodsSeen {
    /// Pod uid → (its Job's uid, active).
    pods: HashMap<String, (String, bool)>,
    active: HashMap<String, i32>,
    most_active: HashMap<String, i32>,
    /// Pods listed since the watch restarted, while it lists again.
    relisted: Option<HashSet<String>>,
    listed: bool,
}

impl PodsSeen {
    fn set(&mut self, uid: String, job: String, active: bool) {
        let was = self.pods.insert(uid, (job.clone(), active));
        let before = was.as_ref().is_some_and(|(_, a)| *a);
        match (before, active) {
            (false, true) => *self.active.entry(job.clone()).or_default() += 1,
            (true, false) => *self.active.entry(job.clone()).or_default() -= 1,
            _ => {}
        }
        let now = self.active.get(&job).copied().unwrap_or(0);
        let most = self.most_active.entry(job).or_default();
        *most = (*most).max(now);
    }

    fn apply(&mut self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.clone() else { return };
        let Some(job) = pod.metadata.owner_references.iter().flatten().find(|o| o.kind == "Job") else {
            return;
        };
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
        // Upstream's active pods: not finished and not terminating.
        let active = pod.metadata.deletion_timestamp.is_none() && phase != "Succeeded" && phase != "Failed";
        if let Some(relisted) = &mut self.relisted {
            relisted.insert(uid.clone());
        }
        self.set(uid, job.uid.clone(), active);
    }

    fn delete(&mut self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.clone() else { return };
        if let Some((job, _)) = self.pods.get(&uid).cloned() {
            self.set(uid.clone(), job, false);
        }
        self.pods.remove(&uid);
    }

    fn on(&mut self, event: watcher::Event<Pod>) {
        match event {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => self.apply(&p),
            watcher::Event::Delete(p) => self.delete(&p),
            watcher::Event::Init => self.relisted = Some(HashSet::new()),
            watcher::Event::InitDone => {
                // Pods missing from the new list are gone.
                let relisted = self.relisted.take().unwrap_or_default();
                let gone: Vec<(String, String)> = self
                    .pods
                    .iter()
                    .filter(|(uid, _)| !relisted.contains(*uid))
                    .map(|(uid, (job, _))| (uid.clone(), job.clone()))
                    .collect();
                for (uid, job) in gone {
                    self.set(uid.clone(), job, false);
                    self.pods.remove(&uid);
                }
                self.listed = true;
            }
        }
    }
}

/// What the watches saw of Jobs: each Job's parallelism, and every uid seen under each name.
#[derive(Debug, Default)]
struct JobsSeen {
    parallelism: HashMap<String, i32>,
    names: BTreeMap<(String, String), BTreeSet<String>>,
    listed: bool,
}

impl JobsSeen {
    fn on(&mut self, event: watcher::Event<Job>) {
        match event {
            watcher::Event::Apply(j) | watcher::Event::InitApply(j) | watcher::Event::Delete(j) => {
                let (Some(uid), Some(ns), Some(name)) =
                    (j.metadata.uid.clone(), j.metadata.namespace.clone(), j.metadata.name.clone())
                else {
                    return;
                };
                let parallelism = j.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1);
                self.parallelism.insert(uid.clone(), parallelism);
                self.names.entry((ns, name)).or_default().insert(uid);
            }
            watcher::Event::Init => {}
            watcher::Event::InitDone => self.listed = true,
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn watch<K, S>(api: Api<K>, seen: Arc<Mutex<S>>, on: fn(&mut S, watcher::Event<K>)) -> AbortOnDrop
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    S: Send + 'static,
{
    AbortOnDrop(tokio::spawn(async move {
        // Backing off after an error also yields, so that the task ends when its runtime does.
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
        while let Some(event) = events.next().await {
            match event {
                Ok(e) => on(&mut seen.lock(), e),
                Err(e) => eprintln!("test watch: {e}"),
            }
        }
    }))
}

/// Jobs of parallelism 2 and an every-minute CronJob in every namespace, watched from the start.
pub struct Workload {
    client: kube::Client,
    namespaces: Vec<String>,
    clock: CronClock,
    pods: Arc<Mutex<PodsSeen>>,
    jobs: Arc<Mutex<JobsSeen>>,
    _watches: [AbortOnDrop; 2],
    work: Vec<(String, String)>,
    /// The CronJob clock's time once every CronJob existed: the minutes after it must all run.
    window_start: Timestamp,
}

impl Workload {
    /// Starts watching every pod and Job, then creates the CronJobs.
    pub async fn start(client: &kube::Client, namespaces: Vec<String>, clock: CronClock) -> Self {
        let pods = Arc::new(Mutex::new(PodsSeen::default()));
        let jobs = Arc::new(Mutex::new(JobsSeen::default()));
        let watches = [
            watch(Api::<Pod>::all(client.clone()), pods.clone(), PodsSeen::on),
            watch(Api::<Job>::all(client.clone()), jobs.clone(), JobsSeen::on),
        ];
        wait_until("the test's watches listed", Duration::from_secs(10), || async {
            (pods.lock().listed && jobs.lock().listed).then_some(())
        })
        .await;
        for ns in &namespaces {
            let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), ns);
            // History kept whole, so that every Job a scheduled time created is still there to
            // count at the end.
            let cj: CronJob = serde_json::from_value(json!({
                "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": CRONJOB},
                "spec": {"schedule": "* * * * *", "successfulJobsHistoryLimit": 100,
                         "failedJobsHistoryLimit": 100,
                         "jobTemplate": {"spec": {"template": {
                             "metadata": {"annotations": {"sim.batchfleet.io/run": "100ms"}},
                             "spec": {"restartPolicy": "Never",
                                      "containers": [{"name": "main", "image": "busybox"}]}}}}}
            }))
            .expect("cronjob");
            cronjobs.create(&PostParams::default(), &cj).await.expect("create cronjob");
        }
        Self {
            client: client.clone(),
            namespaces,
            clock,
            pods,
            jobs,
            _watches: watches,
            work: Vec::new(),
            window_start: clock.now(),
        }
    }

    /// A Job of `COMPLETIONS` completions, `PARALLELISM` at a time, in every namespace.
    pub async fn wave(&mut self, round: &str) {
        for ns in &self.namespaces {
            let name = format!("work-{round}");
            let job: Job = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"completions": COMPLETIONS, "parallelism": PARALLELISM, "backoffLimit": 6,
                         "template": {
                             "metadata": {"annotations": {"sim.batchfleet.io/run": WORK_POD_RUN}},
                             "spec": {"restartPolicy": "Never",
                                      "containers": [{"name": "c", "image": "busybox"}]}}}
            }))
            .expect("job");
            let jobs: Api<Job> = Api::namespaced(self.client.clone(), ns);
            jobs.create(&PostParams::default(), &job).await.expect("create work job");
            self.work.push((ns.clone(), name));
        }
    }

    /// Checks, from the objects and the audit log: every work Job completed with upstream's
    /// status; no Job ever had more active pods than its parallelism; every scheduled minute
    /// that fell within the window ran, and no scheduled time ran twice. `crashed`: a worker was
    /// killed or paused mid-sync, so a Job it created just before may be created again by the
    /// next owner and refused (409) — one Job still, as upstream after a controller crash.
    pub async fn check(self, audit: &Path, crashed: bool) {
        for (ns, name) in &self.work {
            let jobs: Api<Job> = Api::namespaced(self.client.clone(), ns);
            let job = wait_until(&format!("{ns}/{name} completes"), Duration::from_secs(60), || async {
                let job = jobs.get(name).await.ok()?;
                is_complete(&job).then_some(job)
            })
            .await;
            let st = job.status.clone().unwrap_or_default();
            assert_eq!(
                (st.succeeded, st.failed.unwrap_or(0), st.active.unwrap_or(0)),
                (Some(COMPLETIONS), 0, 0),
                "{ns}/{name}: {st:?}"
            );
            assert!(st.completion_time.is_some() && st.start_time.is_some(), "{ns}/{name}: {st:?}");
        }
        // The window closes a moment (3 s of real time) before now, so that a scheduled time
        // that just came is not counted as missed; it holds at least two scheduled times (waited
        // for, when the faults went fast). Then the schedule stops, so the counts below settle.
        let lag = jiff::SignedDuration::from_secs_f64(3.0 * self.clock.speed);
        let first = self.window_start.as_second().div_euclid(60) + 1;
        let window_end = wait_until("two scheduled times in the window", Duration::from_secs(60), || async {
            let end = self.clock.now() - lag;
            (end.as_second() >= (first + 1) * 60).then_some(end)
        })
        .await;
        for ns in &self.namespaces {
            let cronjobs: Api<CronJob> = Api::namespaced(self.client.clone(), ns);
            let suspend = Patch::Merge(json!({"spec": {"suspend": true}}));
            cronjobs.patch(CRONJOB, &PatchParams::default(), &suspend).await.expect("suspend");
        }
        let expected: Vec<i64> = (first..).take_while(|m| m * 60 <= window_end.as_second()).collect();

        for ns in &self.namespaces {
            let jobs: Api<Job> = Api::namespaced(self.client.clone(), ns);
            // Once every Job the schedule created is in the audit log (created by a worker) and
            // finished: each scheduled Job was created once.
            let (minutes, audit) = wait_until(
                &format!("{ns}: the scheduled Jobs finish and the audit log settles"),
                Duration::from_secs(30),
                || async {
                    let listed = jobs.list(&ListParams::default()).await.ok()?.items;
                    let ticks: Vec<&Job> = listed.iter().filter(|j| tick_minute(j).is_some()).collect();
                    if !ticks.iter().all(|j| is_complete(j)) {
                        return None;
                    }
                    let minutes: BTreeSet<i64> = ticks.iter().filter_map(|j| tick_minute(j)).collect();
                    let audit = read_log(audit).ok()?;
                    (job_creates(&audit, ns).filter(|e| e.succeeded()).count() == minutes.len())
                        .then_some((minutes, audit))
                },
            )
            .await;
            let refused: Vec<String> = job_creates(&audit, ns)
                .filter(|e| !e.succeeded())
                .map(|e| format!("{} {} {:?}", e.request_received_timestamp, e.user_agent, e.response_status))
                .collect();
            assert!(
                crashed || refused.is_empty(),
                "{ns}: a scheduled Job was created again (refused) with no worker crashed: {refused:#?}"
            );
            assert!(
                refused.iter().all(|r| r.contains("code: 409")),
                "{ns}: a Job create failed otherwise than as a duplicate: {refused:#?}"
            );
            let missed: Vec<i64> = expected.iter().copied().filter(|m| !minutes.contains(m)).collect();
            assert!(
                missed.is_empty(),
                "{ns}: scheduled minutes missed: {missed:?} (window {} .. {window_end}, ran {minutes:?})",
                self.window_start
            );
        }

        let jobs = self.jobs.lock();
        let twice: Vec<_> = jobs.names.iter().filter(|(_, uids)| uids.len() > 1).collect();
        assert!(twice.is_empty(), "Jobs created twice under one name: {twice:?}");
        let pods = self.pods.lock();
        let mut over = Vec::new();
        for (job, most) in &pods.most_active {
            let parallelism = jobs.parallelism.get(job).copied().unwrap_or(1);
            if *most > parallelism {
                over.push(format!("Job {job}: {most} active pods, parallelism {parallelism}"));
            }
        }
        assert!(over.is_empty(), "more active pods than parallelism: {over:#?}");
        let work_peak = pods
            .most_active
            .iter()
            .filter(|(job, _)| jobs.parallelism.get(*job) == Some(&PARALLELISM))
            .map(|(_, most)| *most)
            .max();
        assert_eq!(work_peak, Some(PARALLELISM), "the work Jobs never ran two pods at once");
    }
}

fn is_complete(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Complete" && c.status == "True"))
}

/// The scheduled minute (since the epoch) a Job of the CronJob is named after.
fn tick_minute(job: &Job) -> Option<i64> {
    job.metadata.name.as_deref()?.strip_prefix(&format!("{CRONJOB}-"))?.parse().ok()
}

/// The Job creates the workers sent for `namespace`: only the CronJob controller creates Jobs.
fn job_creates<'a>(audit: &'a [AuditEvent], namespace: &'a str) -> impl Iterator<Item = &'a AuditEvent> {
    audit.iter().filter(move |e| {
        e.stage == Stage::ResponseComplete
            && e.verb == "create"
            && worker_of(&e.user_agent).is_some()
            && e.object_ref
                .as_ref()
                .is_some_and(|o| o.namespace == namespace && o.resource == "jobs" && o.subresource.is_empty())
    })
}

/// Creates a one-pod Job `name` in every namespace and waits until a worker acted on every one
/// (created its pod and wrote its status: `startTime`), within `bound` of `since` (the fault).
/// Answers which worker acted on each (the User-Agent of the Job's status writes in the audit
/// log): who acts for each shard, seen from the server.
pub async fn probe(
    client: &kube::Client,
    audit: &Path,
    namespaces: &[String],
    name: &str,
    since: Instant,
    bound: Duration,
) -> BTreeMap<String, String> {
    for ns in namespaces {
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"template": {
                "metadata": {"annotations": {"sim.batchfleet.io/run": "50ms"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
        }))
        .expect("probe job");
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        jobs.create(&PostParams::default(), &job).await.expect("create probe");
    }
    let deadline = since + bound;
    loop {
        let mut waiting = Vec::new();
        for ns in namespaces {
            let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
            match jobs.get(name).await {
                Ok(job) if job.status.as_ref().is_some_and(|s| s.start_time.is_some()) => {}
                Ok(job) => waiting.push(format!("{ns}: {:?}", job.status)),
                Err(e) => waiting.push(format!("{ns}: {e}")),
            }
        }
        if waiting.is_empty() {
            assert!(
                Instant::now() <= deadline,
                "probe {name} acted on in every shard only {:?} after the fault, bound {bound:?}",
                since.elapsed()
            );
            break;
        }
        if Instant::now() >= deadline {
            // How late, for the report: waited for a while longer.
            let late = wait_until("a late probe", Duration::from_secs(30), || async {
                for ns in namespaces {
                    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
                    jobs.get(name).await.ok()?.status?.start_time?;
                }
                Some(since.elapsed())
            })
            .await;
            panic!(
                "probe {name} not acted on in every shard within {bound:?} of the fault (all were after \
                 {late:?}): {waiting:#?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_until(
        &format!("probe {name}: its status writes in the audit log"),
        Duration::from_secs(5),
        || async {
            let audit = read_log(audit).ok()?;
            let mut actors = BTreeMap::new();
            for e in &audit {
                let Some(o) = &e.object_ref else { continue };
                if e.stage == Stage::ResponseComplete
                    && e.is_write()
                    && e.succeeded()
                    && o.resource == "jobs"
                    && o.name == name
                    && o.subresource == "status"
                    && let Some(worker) = worker_of(&e.user_agent)
                {
                    actors.insert(o.namespace.clone(), worker.to_string());
                }
            }
            (actors.len() == namespaces.len()).then_some(actors)
        },
    )
    .await
}
