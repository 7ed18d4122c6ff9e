//! The workload the fleet tests run while they inject faults, and its checks from the outside:
//! Jobs of parallelism 2 in every shard's namespace, an every-minute CronJob on a fast clock that
//! every worker shares (`fleet-worker --test-clock`), and probes that tell which worker acts for
//! each shard. Everything is judged from the sim's audit log and a watch on the cluster's
//! objects kept for the whole test, never from the fleet's own view of itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use batchfleet_audits::objects::{self, ObjectWatch};
use batchfleet_sim::audit::{AuditEvent, Stage, read_log};
use batchfleet_sim::testing::wait_until;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

pub const PARALLELISM: i32 = 2;
pub const COMPLETIONS: i32 = 6;
/// A work pod's run: six completions two at a time take three rounds of it, long enough for a
/// Job to be running while its shard moves.
const WORK_POD_RUN: &str = "700ms";
/// The CronJob in every namespace; upstream names its Jobs `tick-<scheduled minute>`.
pub const CRONJOB: &str = "tick";

pub use batchfleet_audits::agents::{shard_of, worker_of};
pub use batchfleet_audits::cron::CronClock;

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

/// Jobs of parallelism 2 and an every-minute CronJob in every namespace, watched from the start.
pub struct Workload {
    client: kube::Client,
    namespaces: Vec<String>,
    clock: CronClock,
    watch: ObjectWatch,
    work: Vec<(String, String)>,
    /// The CronJob clock's time once every CronJob existed: the minutes after it must all run.
    window_start: Timestamp,
}

impl Workload {
    /// Starts watching every pod and Job, then creates the CronJobs.
    pub async fn start(client: &kube::Client, namespaces: Vec<String>, clock: CronClock) -> Self {
        let watch =
            ObjectWatch::start(client, Duration::from_secs(10)).await.expect("the test's watches list");
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
        Self { client: client.clone(), namespaces, clock, watch, work: Vec::new(), window_start: clock.now() }
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

        let seen = self.watch.seen.lock();
        for outcome in [objects::job_names_created_once(&seen), objects::parallelism_never_exceeded(&seen)] {
            assert!(outcome.passed, "{}: {} ({:#?})", outcome.name, outcome.measured, outcome.violations);
        }
        let work_peak =
            seen.jobs.values().filter(|j| j.parallelism == PARALLELISM).map(|j| j.most_active).max();
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
