//! Two worker runtimes against one sim cluster move shards back and forth by the ownership
//! protocol's steps (PREPARE → warm → REVOKE with the last write's resourceVersion → ACTIVATE
//! after the barrier → DROP) while Jobs, CronJobs and TTLs run in those namespaces. Checked from
//! the sim's audit log, where each request's User-Agent names the runtime that sent it: every
//! write a runtime sent for a namespace lies within one of its tenures of that namespace's shard
//! (so no namespace is written by both in overlapping tenures); every pod and every scheduled
//! Job was created once. From the cluster's objects: every Job completes with upstream's status,
//! no Job ever has more active pods than its parallelism, no CronJob time runs twice or is
//! missed, TTLs fire.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use batchfleet_sim::audit::{AuditEvent, Stage, read_log};
use batchfleet_sim::{SimCluster, SimConfig};
use batchfleet_worker::client::{self, ClientLimits};
use batchfleet_worker::clock::Clock;
use batchfleet_worker::runtime::shard::ShardTable;
use batchfleet_worker::runtime::watch::ShardFiltering;
use batchfleet_worker::shards::ShardSpace;
use batchfleet_worker::start::{self, Worker, WorkerOptions};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const SHARDS: u32 = 4;
/// One namespace in each of the four shards.
const NAMESPACES: [&str; 4] = ["gamma", "beta", "alpha", "team-a"];
const WORKERS: [&str; 2] = ["w-a", "w-b"];
const WORK_JOBS: i32 = 3;
const PARALLELISM: i32 = 2;
const COMPLETIONS: i32 = 6;

/// What the workers' API server supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    ShardedListAndWatch,
    WithoutSharding,
}

async fn worker(sim: &SimCluster, id: &str, clock: Arc<dyn Clock>) -> Worker {
    let config =
        client::with_user_agent(kube::Config::new(sim.url().parse().unwrap()), &client::user_agent(id))
            .unwrap();
    let worker_client = client::from_config(config, ClientLimits::UNLIMITED).unwrap();
    let opts = WorkerOptions {
        metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        job_timing: common::fast_timing(),
        worker_id: id.to_string(),
        shards: SHARDS,
        clock,
        ..WorkerOptions::default()
    };
    let table = ShardTable::new(ShardSpace::new(SHARDS).unwrap());
    start::start_on_shards(worker_client, opts, table, None).await.expect("worker starts")
}

/// Active pods (not finished, not terminating) per owning Job uid.
async fn active_pods_by_job(pods: &Api<Pod>) -> HashMap<String, i32> {
    let mut active = HashMap::new();
    let Ok(list) = pods.list(&ListParams::default()).await else { return active };
    for p in list.items {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
        if p.metadata.deletion_timestamp.is_some() || phase == "Succeeded" || phase == "Failed" {
            continue;
        }
        let Some(owner) =
            p.metadata.owner_references.as_deref().unwrap_or(&[]).iter().find(|o| o.kind == "Job")
        else {
            continue;
        };
        *active.entry(owner.uid.clone()).or_default() += 1;
    }
    active
}

/// One runtime's tenure of one shard: from just before its ACTIVATE was called to just after
/// its REVOKE answered (open while it still holds the shard). Wall time, as the audit log's, and
/// the CronJob clock's time, to read a missed schedule against.
#[derive(Debug, Clone)]
struct Tenure {
    runtime: usize,
    start: Timestamp,
    end: Option<Timestamp>,
    cron_start: Timestamp,
    cron_end: Option<Timestamp>,
}

impl Tenure {
    /// Whether a request received and answered at these times lies within the tenure (the audit
    /// log keeps microseconds, truncated).
    fn covers(&self, received: Timestamp, completed: Timestamp) -> bool {
        let floor = |t: Timestamp| Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t);
        floor(self.start) <= received && self.end.is_none_or(|end| completed <= end)
    }
}

/// Where a scheduled minute fell among the shard's tenures: in one (no owner missed it by being
/// away), or in a hand-over gap, and how long that gap was on the CronJob's clock.
fn where_minute_fell(tenures: &[Tenure], minute: i64) -> String {
    let at = Timestamp::from_second(minute * 60).unwrap();
    for pair in tenures.windows(2) {
        if let Some(end) = pair[0].cron_end
            && end <= at
            && at < pair[1].cron_start
        {
            let gap = pair[1].cron_start.duration_since(end);
            return format!("minute {minute} ({at}) fell in a hand-over gap of {gap:#} (CronJob clock)");
        }
    }
    format!("minute {minute} ({at}) fell within a tenure: {tenures:#?}")
}

fn audit_time(t: &str) -> Timestamp {
    t.parse().unwrap_or_else(|e| panic!("audit timestamp {t:?}: {e}"))
}

/// The completed write requests the runtimes sent for one namespace.
fn runtime_writes<'a>(audit: &'a [AuditEvent], namespace: &str) -> Vec<(usize, &'a AuditEvent)> {
    let agents: Vec<String> = WORKERS.iter().map(|w| client::user_agent(w)).collect();
    audit
        .iter()
        .filter(|e| e.stage == Stage::ResponseComplete && e.is_write())
        .filter(|e| e.object_ref.as_ref().is_some_and(|o| o.namespace == namespace))
        .filter_map(|e| agents.iter().position(|a| *a == e.user_agent).map(|r| (r, e)))
        .collect()
}

/// Successful creates of `resource` (no subresource) the runtimes sent for `namespace`.
/// Whether `runtime`'s last CronJob status write before now was refused with a conflict (the
/// test's own `suspend` patch raced it). The CronJob controller then syncs again from a cache
/// that may not show the tick yet and tries the scheduled time again, and AlreadyExists ends the
/// try, as upstream's `syncCronJob` does ("Job already exists"): a retry of the same time, not a
/// second run of it.
fn after_a_status_conflict(earlier: &[(usize, &AuditEvent)], runtime: usize) -> bool {
    earlier
        .iter()
        .rev()
        .filter(|(r, e)| {
            *r == runtime
                && e.object_ref
                    .as_ref()
                    .is_some_and(|o| o.resource == "cronjobs" && o.subresource == "status")
        })
        .map(|(_, e)| e.response_status.as_ref().map(|s| s.code))
        .next()
        == Some(Some(409))
}

fn creates(writes: &[(usize, &AuditEvent)], resource: &str) -> usize {
    writes
        .iter()
        .filter(|(_, e)| e.verb == "create" && e.succeeded())
        .filter(|(_, e)| {
            e.object_ref.as_ref().is_some_and(|o| o.resource == resource && o.subresource.is_empty())
        })
        .count()
}

/// The minutes of the CronJob's Jobs, named after their scheduled minute.
async fn tick_minutes(jobs: &Api<Job>) -> BTreeSet<i64> {
    jobs.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .iter()
        .filter_map(|j| j.metadata.name.as_deref()?.strip_prefix("tick-")?.parse().ok())
        .collect()
}

async fn move_shards_while_work_runs(server: Server) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt().with_test_writer().with_env_filter(filter).try_init();
    let dir = tempfile::tempdir().unwrap();
    let audit_path = dir.path().join("audit.log");
    let sim = SimCluster::start(SimConfig {
        nodes: 3,
        audit_log: Some(audit_path.clone()),
        shard_selector: server == Server::ShardedListAndWatch,
        ..SimConfig::default()
    })
    .await
    .expect("sim starts");
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse().unwrap())).unwrap();
    let space = ShardSpace::new(SHARDS).unwrap();
    let shard_of: Vec<u32> = NAMESPACES.iter().map(|ns| space.shard_of(ns)).collect();
    assert_eq!(shard_of.iter().collect::<BTreeSet<_>>().len(), 4, "one namespace per shard");
    // The CronJob clock, shared by both workers: a minute every six seconds. A faster clock
    // turns real latencies into missed minutes: on a starved 2-core machine (four copies of this
    // test and a build at once) one owner's syncs were 3 s apart at 30x, and 6.5 s apart at 15x,
    // within one tenure, no move near; upstream's rule (only the most recent missed time runs)
    // then skips a minute, as it would for a controller starved for a whole minute.
    let clock: Arc<dyn Clock> = Arc::new(batchfleet_worker::clock::ScaledClock::new(Timestamp::now(), 10.0));
    let a = worker(&sim, WORKERS[0], clock.clone()).await;
    let b = worker(&sim, WORKERS[1], clock.clone()).await;
    let expected = match server {
        Server::ShardedListAndWatch => ShardFiltering::Server,
        Server::WithoutSharding => ShardFiltering::Client,
    };
    assert_eq!((a.runtime.filtering(), b.runtime.filtering()), (expected, expected), "the probe");
    let runtimes = [a.runtime.clone(), b.runtime.clone()];
    let mut tenures: Vec<Vec<Tenure>> = vec![Vec::new(); SHARDS as usize];
    let mut epoch = [1u64; SHARDS as usize];
    for s in 0..SHARDS {
        runtimes[0].prepare(s, 1).unwrap();
        let (start, cron_start) = (Timestamp::now(), clock.now());
        runtimes[0].activate(s, 1, 0).await.unwrap();
        tenures[s as usize].push(Tenure { runtime: 0, start, end: None, cron_start, cron_end: None });
    }

    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in NAMESPACES {
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
            )
            .await
            .unwrap();
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        for i in 0..WORK_JOBS {
            let job = common::job(
                &format!("work-{i}"),
                json!({"completions": COMPLETIONS, "parallelism": PARALLELISM, "backoffLimit": 6}),
                json!({"sim.batchfleet.io/run": "300ms"}),
            );
            jobs.create(&PostParams::default(), &job).await.unwrap();
        }
        let ttl = common::job(
            "ttl",
            json!({"ttlSecondsAfterFinished": 1}),
            json!({"sim.batchfleet.io/run": "100ms"}),
        );
        jobs.create(&PostParams::default(), &ttl).await.unwrap();
        let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), ns);
        let cj: CronJob = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick"},
            "spec": {"schedule": "* * * * *", "successfulJobsHistoryLimit": 100,
                     "jobTemplate": {"spec": {"template": {
                         "metadata": {"annotations": {"sim.batchfleet.io/run": "100ms"}},
                         "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}}}}
        }))
        .unwrap();
        cronjobs.create(&PostParams::default(), &cj).await.unwrap();
    }

    // Watch for more active pods than parallelism the whole time.
    let stop = Arc::new(AtomicBool::new(false));
    let most_active = Arc::new(AtomicI32::new(0));
    let poller = tokio::spawn({
        let (stop, most_active) = (stop.clone(), most_active.clone());
        let pods: Api<Pod> = Api::all(client.clone());
        async move {
            while !stop.load(Ordering::Relaxed) {
                let worst = active_pods_by_job(&pods).await.into_values().max().unwrap_or(0);
                most_active.fetch_max(worst, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });

    let mut longest_gap = Duration::ZERO;
    for i in 0..16u32 {
        let s = i % SHARDS;
        let from = tenures[s as usize].last().unwrap().runtime;
        let to = 1 - from;
        epoch[s as usize] += 1;
        let e = epoch[s as usize];
        runtimes[to].prepare(s, e).unwrap();
        // PREPARE is acknowledged once the new owner's caches are warm; only then REVOKE.
        runtimes[to].warmed(s).await;
        let stopped = std::time::Instant::now();
        let barrier = runtimes[from].revoke(s).await.unwrap();
        let (end, cron_end) = (Timestamp::now(), clock.now());
        let held = tenures[s as usize].last_mut().unwrap();
        (held.end, held.cron_end) = (Some(end), Some(cron_end));
        let old_writes = runtimes[from].table().status(s).unwrap().writes;
        assert_eq!(runtimes[to].table().status(s).unwrap().writes, 0, "nothing written while preparing");
        let (start, cron_start) = (Timestamp::now(), clock.now());
        runtimes[to].activate(s, e, barrier).await.unwrap();
        longest_gap = longest_gap.max(stopped.elapsed());
        tenures[s as usize].push(Tenure { runtime: to, start, end: None, cron_start, cron_end: None });
        let status = runtimes[to].table().status(s).unwrap();
        assert!(
            status.seen_rv >= barrier,
            "activated with caches at {} before the barrier {barrier}",
            status.seen_rv
        );
        assert_eq!(
            runtimes[from].table().status(s).unwrap().writes,
            old_writes,
            "move {i}: the old owner wrote for shard {s} after REVOKE answered"
        );
        runtimes[from].drop_shard(s);
        // Pacing, not a wait for a condition: let the new owner work a while before the next move.
        tokio::time::sleep(Duration::from_millis(400)).await;
    }

    for ns in NAMESPACES {
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        for i in 0..WORK_JOBS {
            let job =
                common::wait_condition(&jobs, &format!("work-{i}"), "Complete", Duration::from_secs(60))
                    .await;
            let st = job.status.unwrap();
            assert_eq!(
                (st.succeeded, st.failed.unwrap_or(0), st.active.unwrap_or(0)),
                (Some(COMPLETIONS), 0, 0),
                "{ns}/work-{i}"
            );
            assert!(
                st.completion_time.is_some() && st.ready == Some(0) && st.terminating == Some(0),
                "{ns}/work-{i}: {st:?}"
            );
        }
        common::wait_until(&format!("{ns}/ttl deleted"), Duration::from_secs(30), || async {
            jobs.get_opt("ttl").await.ok().and_then(|j| j.is_none().then_some(()))
        })
        .await;
        common::wait_until(&format!("{ns}: three scheduled runs"), Duration::from_secs(60), || async {
            (tick_minutes(&jobs).await.len() >= 3).then_some(())
        })
        .await;
        // Stop the schedule, so the counts below settle.
        let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), ns);
        let suspend = Patch::Merge(json!({"spec": {"suspend": true}}));
        cronjobs.patch("tick", &PatchParams::default(), &suspend).await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    poller.await.unwrap();

    let mut writes_by_runtime = BTreeMap::new();
    for ns in NAMESPACES {
        let s = space.shard_of(ns) as usize;
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        // From the audit log, once the last scheduled Job's pod is written there: each Job the
        // CronJob ran was created once, by a runtime, and every pod once.
        let (minutes, audit) =
            common::wait_until(&format!("{ns}: the audit log settles"), Duration::from_secs(30), || async {
                let minutes = tick_minutes(&jobs).await;
                let audit = read_log(&audit_path).ok()?;
                let writes = runtime_writes(&audit, ns);
                let expected_pods = (WORK_JOBS * COMPLETIONS) as usize + 1 + minutes.len();
                (creates(&writes, "jobs") == minutes.len() && creates(&writes, "pods") == expected_pods)
                    .then_some((minutes, audit))
            })
            .await;
        let writes = runtime_writes(&audit, ns);
        for (runtime, e) in &writes {
            *writes_by_runtime.entry(*runtime).or_insert(0usize) += 1;
            let (received, completed) =
                (audit_time(&e.request_received_timestamp), audit_time(&e.stage_timestamp));
            assert!(
                tenures[s].iter().any(|t| t.runtime == *runtime && t.covers(received, completed)),
                "{} sent {} {} ({received} .. {completed}) outside its tenures of shard {s}: {:#?}",
                e.user_agent,
                e.verb,
                e.request_uri,
                tenures[s]
            );
        }
        let failed_job_creates: Vec<&str> = writes
            .iter()
            .enumerate()
            .filter(|(_, (_, e))| e.verb == "create" && !e.succeeded())
            .filter(|(_, (_, e))| e.object_ref.as_ref().is_some_and(|o| o.resource == "jobs"))
            .filter(|(i, (runtime, e))| {
                let already_exists = e.response_status.as_ref().is_some_and(|s| s.code == 409);
                !(already_exists && after_a_status_conflict(&writes[..*i], *runtime))
            })
            .map(|(_, (_, e))| e.request_uri.as_str())
            .collect();
        // What the runtimes wrote for the CronJob's Jobs and its status, in order: which owner
        // tried a time again, and whether the status write of the first try had landed.
        let cron_writes: Vec<String> = writes
            .iter()
            .filter(|(_, e)| {
                e.object_ref.as_ref().is_some_and(|o| o.resource == "jobs" || o.resource == "cronjobs")
            })
            .map(|(runtime, e)| {
                let code = e.response_status.as_ref().map(|s| s.code);
                let name = e.object_ref.as_ref().map(|o| o.name.as_str()).unwrap_or_default();
                format!(
                    "{} runtime {runtime} {} {} {name} -> {code:?}",
                    e.request_received_timestamp, e.verb, e.request_uri
                )
            })
            .collect();
        assert!(
            failed_job_creates.is_empty(),
            "{ns}: a scheduled time was tried again: {failed_job_creates:?}\nwrites: {cron_writes:#?}\ntenures: {:#?}",
            tenures[s]
        );
        // Consecutive minutes from the first to the last: none missed.
        let (first, last) = (*minutes.first().unwrap(), *minutes.last().unwrap());
        assert!(minutes.len() >= 3, "{ns}: the CronJob ran {} times", minutes.len());
        let missed: Vec<i64> = (first..=last).filter(|m| !minutes.contains(m)).collect();
        let cron_writes = || {
            writes
                .iter()
                .filter(|(_, e)| {
                    e.object_ref.as_ref().is_some_and(|o| o.resource != "pods" && o.resource != "events")
                })
                .map(|(r, e)| {
                    let code = e.response_status.as_ref().map_or(0, |s| s.code);
                    format!("{} {r} {} {} {code}", e.request_received_timestamp, e.verb, e.request_uri)
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(
            missed.is_empty(),
            "{ns}: a scheduled time was missed: {}; the longest move took {longest_gap:?}; minutes run: {minutes:?}; \
             the runtimes' Job and CronJob writes:\n{}",
            missed.iter().map(|m| where_minute_fell(&tenures[s], *m)).collect::<Vec<_>>().join("; "),
            cron_writes()
        );
    }
    for (i, shard_tenures) in tenures.iter().enumerate() {
        for pair in shard_tenures.windows(2) {
            assert!(
                pair[0].end.is_some_and(|end| end <= pair[1].start),
                "shard {i}: tenures overlap: {pair:#?}"
            );
        }
    }
    let most_active = most_active.load(Ordering::Relaxed);
    assert!(most_active <= PARALLELISM, "a Job had {most_active} active pods");
    assert_eq!(runtimes[0].table().stale_writes() + runtimes[1].table().stale_writes(), 0);
    assert_eq!(writes_by_runtime.len(), 2, "both runtimes wrote: {writes_by_runtime:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_move_between_two_workers_with_server_side_shard_selectors() {
    move_shards_while_work_runs(Server::ShardedListAndWatch).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_move_between_two_workers_filtering_by_hash_on_the_worker() {
    move_shards_while_work_runs(Server::WithoutSharding).await;
}
