//! `loadtest bench-cron`: (1) CronJob creation skew with many every-minute CronJobs across many
//! namespaces on one worker; (2) TTL-after-finished deletion lag when many finished Jobs expire
//! at once. The sim cluster and a standalone worker run in this process.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context;
use batchfleet_sim::{SimCluster, SimConfig};
use batchfleet_worker::client::ClientLimits;
use batchfleet_worker::start::{self, WorkerOptions};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct BenchCronArgs {
    /// Every-minute CronJobs.
    #[arg(long, default_value_t = 10_000)]
    pub cronjobs: usize,
    /// Namespaces they spread over.
    #[arg(long, default_value_t = 500)]
    pub namespaces: usize,
    /// Schedule ticks to measure.
    #[arg(long, default_value_t = 2)]
    pub ticks: usize,
    /// Finished Jobs that expire at once.
    #[arg(long, default_value_t = 10_000)]
    pub ttl_jobs: usize,
    /// Skip the CronJob part.
    #[arg(long)]
    pub ttl_only: bool,
    /// Skip the TTL part.
    #[arg(long)]
    pub cron_only: bool,
    /// Controllers the worker runs (as fleet-worker --controllers).
    #[arg(long, default_value = "*")]
    pub controllers: String,
    /// Run the sim as its own process, and report its CPU and this process's apart.
    #[arg(long)]
    pub sim_process: bool,
    /// Where to write the latency distributions (SVG).
    #[arg(long, default_value = "target/bench/cron-skew-ttl-lag.svg")]
    pub plot: std::path::PathBuf,
    /// Concurrent CronJob syncs (fleet-worker --concurrent-cron-job-syncs). A sync mostly waits
    /// on the API, so one per CronJob: the client's cap on requests in flight, not this, bounds
    /// the load, and serves every CronJob's Job creation before the status writes of syncs that
    /// started later.
    #[arg(long, default_value_t = 10_000)]
    pub concurrency: usize,
    /// The worker's cap on API requests in flight (fleet-worker --kube-api-max-in-flight); its
    /// client is otherwise unthrottled.
    #[arg(long, default_value_t = ClientLimits::DEFAULT.max_in_flight)]
    pub max_in_flight: usize,
}

/// The sim, in this process or as its own (`--sim-process`, so its CPU can be told apart).
enum Sim {
    InProcess(SimCluster),
    Process(crate::bench_sim::SimProcess),
}

impl Sim {
    fn url(&self) -> String {
        match self {
            Sim::InProcess(s) => s.url(),
            Sim::Process(p) => p.url.clone(),
        }
    }

    /// Requests the in-process sim has served, by "verb resource".
    fn requests(&self) -> Option<HashMap<String, u64>> {
        let Sim::InProcess(s) = self else { return None };
        let snapshot = s.counters().snapshot();
        let rows = snapshot.get("requests")?.as_array()?;
        Some(
            rows.iter()
                .filter_map(|r| {
                    let key = format!("{} {}", r.get("verb")?.as_str()?, r.get("resource")?.as_str()?);
                    Some((key, r.get("count")?.as_u64()?))
                })
                .collect(),
        )
    }

    /// CPU seconds of the sim process, when it runs apart.
    fn cpu_seconds(&self) -> Option<f64> {
        match self {
            Sim::InProcess(_) => None,
            Sim::Process(p) => p.cpu_seconds().ok(),
        }
    }
}

async fn start(label: &str, args: &BenchCronArgs) -> anyhow::Result<(Sim, start::Worker, kube::Client)> {
    let sim = if args.sim_process {
        Sim::Process(crate::bench_sim::SimProcess::start().await?)
    } else {
        Sim::InProcess(SimCluster::start(SimConfig { nodes: 3, ..SimConfig::default() }).await?)
    };
    let config = kube::Config::new(sim.url().parse()?);
    let worker_client = batchfleet_worker::client::from_config(
        config.clone(),
        ClientLimits { max_in_flight: args.max_in_flight, ..ClientLimits::UNLIMITED },
    )?;
    let opts = WorkerOptions {
        metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        worker_id: label.into(),
        concurrent_cron_job_syncs: args.concurrency,
        controllers: args.controllers.parse().map_err(|e: String| anyhow::anyhow!(e))?,
        concurrent_ttl_syncs: 20,
        ..WorkerOptions::default()
    };
    let worker = start::start_with_client(worker_client, opts).await?;
    Ok((sim, worker, kube::Client::try_from(config)?))
}

async fn create_all<F, Fut>(n: usize, label: &str, f: F) -> anyhow::Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let started = Instant::now();
    futures::stream::iter(0..n).map(&f).buffer_unordered(64).try_collect::<Vec<()>>().await?;
    eprintln!("  created {n} {label} in {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

struct Skew {
    /// From the scheduled time to when a watcher sees the Job.
    seen: Percentiles,
    /// From the scheduled time to when the API server stored the Job (in-process sim only).
    stored: Option<Percentiles>,
    /// From the scheduled time to when the API server stored the CronJob's status with the tick
    /// as its lastScheduleTime (in-process sim only).
    status_written: Option<Percentiles>,
    /// Over the burst of the last tick: CPU seconds of the sim process and of this one.
    burst_cpu: Option<(f64, f64)>,
}

struct Percentiles {
    n: usize,
    p50: f64,
    p99: f64,
    max: f64,
    /// The samples, sorted, for the plot.
    sorted: Vec<f64>,
}

impl Percentiles {
    fn of(mut values: Vec<f64>) -> Self {
        values.sort_by(f64::total_cmp);
        Self {
            n: values.len(),
            p50: percentile(&values, 0.5),
            p99: percentile(&values, 0.99),
            max: values.last().copied().unwrap_or(f64::NAN),
            sorted: values,
        }
    }

    fn row(&self, label: &str) -> String {
        format!("| {label} | {} | {:.3} s | {:.3} s | {:.3} s |", self.n, self.p50, self.p99, self.max)
    }
}

/// What the in-process sim stored and when: the instant each Job was created and each CronJob's
/// status written, free of the watch path's delivery lag, which grows while the burst keeps both
/// cores busy.
struct StoreLog {
    changes: std::sync::Arc<std::sync::Mutex<Vec<Stored>>>,
    lagged: std::sync::Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

/// When an object was stored, whether it was new, and the object.
type Stored = (Instant, bool, std::sync::Arc<batchfleet_sim::store::StoredObject>);

impl StoreLog {
    fn start(sim: &SimCluster) -> anyhow::Result<Self> {
        use batchfleet_sim::store::ChangeKind;
        use batchfleet_sim::store::RecvError;
        let store = sim.api().store();
        let (_, mut feed) = store
            .watch_from(batchfleet_sim::store::Interest::everything(), store.current_rv())
            .map_err(|e| anyhow::anyhow!("subscribing to the store: {e}"))?;
        let changes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lagged = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let task = tokio::spawn({
            let (changes, lagged) = (changes.clone(), lagged.clone());
            async move {
                loop {
                    match feed.recv().await {
                        Ok(c) if c.kind != ChangeKind::Deleted => {
                            if let Ok(mut log) = changes.lock() {
                                log.push((c.at, c.kind == ChangeKind::Added, c.object.clone()));
                            }
                        }
                        Ok(_) => {}
                        Err(RecvError::Lagged) => {
                            lagged.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(RecvError::Closed) => return,
                    }
                }
            }
        });
        Ok(Self { changes, lagged, task })
    }

    fn ensure_whole(&self) -> anyhow::Result<()> {
        let lagged = self.lagged.load(std::sync::atomic::Ordering::Relaxed);
        anyhow::ensure!(lagged == 0, "the store log fell behind the store {lagged} times");
        Ok(())
    }

    /// The changes logged so far, from the `from`th on.
    fn since(&self, from: usize) -> anyhow::Result<Vec<Stored>> {
        let log = self.changes.lock().map_err(|_| anyhow::anyhow!("store log poisoned"))?;
        Ok(log.get(from..).unwrap_or_default().to_vec())
    }

    /// Skews of the stored Jobs that carry a scheduled time, by tick.
    fn job_skews(&self) -> anyhow::Result<HashMap<jiff::Timestamp, Vec<f64>>> {
        self.ensure_whole()?;
        let wall = WallClock::now();
        let mut by_tick: HashMap<jiff::Timestamp, Vec<f64>> = HashMap::new();
        for (at, added, object) in self.since(0)? {
            if !added {
                continue;
            }
            let Ok(job) = serde_json::from_slice::<KindAndMeta>(&object.bytes) else { continue };
            if job.kind != "Job" {
                continue;
            }
            let Some(scheduled) = scheduled_time(&job.metadata) else { continue };
            by_tick.entry(scheduled).or_default().push(wall.since(at, scheduled)?);
        }
        Ok(by_tick)
    }

    /// When each CronJob's status first showed a tick as its lastScheduleTime, from the tick;
    /// waits (to `deadline`) for as many status writes per tick as the tick created Jobs.
    async fn status_lags(
        &self,
        jobs_per_tick: &HashMap<jiff::Timestamp, usize>,
        deadline: Instant,
    ) -> anyhow::Result<Vec<f64>> {
        let expected: usize = jobs_per_tick.values().sum();
        let mut first_written: HashMap<(String, jiff::Timestamp), Instant> = HashMap::new();
        let mut read = 0;
        loop {
            self.ensure_whole()?;
            let fresh = self.since(read)?;
            read += fresh.len();
            for (at, added, object) in fresh {
                if added {
                    continue;
                }
                let Ok(cj) = serde_json::from_slice::<CronJobScheduleView>(&object.bytes) else { continue };
                let Some(last) = cj.status.and_then(|s| s.last_schedule_time) else { continue };
                if cj.kind == "CronJob" && jobs_per_tick.contains_key(&last) {
                    first_written.entry((cj.metadata.uid.unwrap_or_default(), last)).or_insert(at);
                }
            }
            if first_written.len() >= expected {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "only {} of {expected} CronJob status writes appeared in time",
                first_written.len(),
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let wall = WallClock::now();
        first_written.into_iter().map(|((_, tick), at)| wall.since(at, tick)).collect()
    }
}

impl Drop for StoreLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Maps the log's monotonic instants to wall time through one pair read together.
struct WallClock {
    wall: jiff::Timestamp,
    mono: Instant,
}

impl WallClock {
    fn now() -> Self {
        Self { wall: jiff::Timestamp::now(), mono: Instant::now() }
    }

    /// Seconds from `from` to the wall time of `at`.
    fn since(&self, at: Instant, from: jiff::Timestamp) -> anyhow::Result<f64> {
        let at = self.wall - jiff::SignedDuration::try_from(self.mono.duration_since(at))?;
        Ok(at.duration_since(from).as_secs_f64())
    }
}

/// A CronJob as the status-lag measure reads it.
#[derive(serde::Deserialize)]
struct CronJobScheduleView {
    #[serde(default)]
    kind: String,
    metadata: kube::api::ObjectMeta,
    status: Option<ScheduleStatusView>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScheduleStatusView {
    last_schedule_time: Option<jiff::Timestamp>,
}

#[derive(serde::Deserialize)]
struct KindAndMeta {
    #[serde(default)]
    kind: String,
    metadata: kube::api::ObjectMeta,
}

/// The scheduled time a CronJob's Job carries in its annotation.
fn scheduled_time(metadata: &kube::api::ObjectMeta) -> Option<jiff::Timestamp> {
    metadata.annotations.as_ref()?.get("batch.kubernetes.io/cronjob-scheduled-timestamp")?.parse().ok()
}

async fn cron_skew(args: &BenchCronArgs) -> anyhow::Result<Skew> {
    let (sim, _worker, client) = start("bench-cron", args).await?;
    let nss: Api<Namespace> = Api::all(client.clone());
    create_all(args.namespaces, "namespaces", |i| {
        let nss = nss.clone();
        async move {
            let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": format!("cron-{i}")}}))?;
            nss.create(&PostParams::default(), &ns).await?;
            Ok(())
        }
    })
    .await?;
    // Suspended Jobs: the measurement is the CronJob controller's, not the pods'.
    create_all(args.cronjobs, "CronJobs", |i| {
        let api: Api<CronJob> = Api::namespaced(client.clone(), &format!("cron-{}", i % args.namespaces));
        async move {
            let cj: CronJob = serde_json::from_value(json!({
                "metadata": {"name": format!("every-minute-{i}")},
                "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"suspend": true, "template": {"spec": {
                    "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}}
            }))?;
            api.create(&PostParams::default(), &cj).await?;
            Ok(())
        }
    })
    .await?;
    let store_log = match &sim {
        Sim::InProcess(s) => Some(StoreLog::start(s)?),
        Sim::Process(_) => None,
    };
    // Skew: when the Job reaches a watcher, against the scheduled minute it carries.
    let want = args.cronjobs * args.ticks;
    let deadline = Instant::now() + Duration::from_secs(60 * (args.ticks as u64 + 2));
    let mut seen_jobs = SkewWatcher::start(kube::Config::new(sim.url().parse()?))?;
    let mut skews = Vec::new();
    eprintln!("  waiting for {} schedule ticks ({want} Jobs)", args.ticks);
    let mut last_report = Instant::now();
    let mut ticks = TickLog::default();
    while skews.len() < want {
        let remaining = deadline.saturating_duration_since(Instant::now());
        anyhow::ensure!(!remaining.is_zero(), "only {} of {want} Jobs appeared in time", skews.len());
        match tokio::time::timeout(remaining.min(Duration::from_secs(5)), seen_jobs.seen.recv()).await {
            Ok(Some(SeenJob { scheduled, skew })) => {
                skews.push(skew);
                if let Some(line) = ticks.observe(scheduled, skew, &sim, args.cronjobs) {
                    eprintln!("{line}");
                }
            }
            Ok(None) => anyhow::bail!("the skew watcher stopped: {}", seen_jobs.stopped()),
            Err(_) => {}
        }
        if last_report.elapsed() > Duration::from_secs(5) {
            eprintln!("  {} of {want} Jobs seen", skews.len());
            last_report = Instant::now();
        }
    }
    let (stored, status_written) = match store_log {
        Some(log) => {
            // The ticks the watcher measured, no more: the log may hold part of a next one.
            let mut by_tick: Vec<_> =
                log.job_skews()?.into_iter().filter(|(tick, _)| ticks.ticks.contains_key(tick)).collect();
            by_tick.sort_by_key(|(tick, _)| *tick);
            for (tick, skews) in &by_tick {
                let p = Percentiles::of(skews.clone());
                eprintln!("  tick {tick}: stored by the API server: p50 {:.3} s, p99 {:.3} s", p.p50, p.p99);
            }
            let jobs_per_tick = by_tick.iter().map(|(tick, skews)| (*tick, skews.len())).collect();
            let lags = log.status_lags(&jobs_per_tick, deadline).await?;
            let stored = Percentiles::of(by_tick.into_iter().flat_map(|(_, s)| s).collect());
            (Some(stored), Some(Percentiles::of(lags)))
        }
        None => (None, None),
    };
    if let Some(line) = cronjob_writes_per_tick(&ticks, &sim, args) {
        eprintln!("{line}");
    }
    Ok(Skew { burst_cpu: ticks.last_burst_cpu, seen: Percentiles::of(skews), stored, status_written })
}

/// Writes to CronJobs (their status and metadata) per CronJob per tick, from the first tick's
/// first Job to now (every tick's status writes stored): upstream makes one per tick, the status
/// write; the rest is what batchfleet adds (the next-schedule-time annotation rides on that
/// write, so the goal is ≤ 0.05 extra). The annotation's first write, when a CronJob is first
/// synced, is before the window: once per CronJob, not per tick. In-process sim only.
fn cronjob_writes_per_tick(ticks: &TickLog, sim: &Sim, args: &BenchCronArgs) -> Option<String> {
    // The earliest tick's counters, taken when its first Job appeared.
    let first = ticks.ticks.iter().min_by_key(|(tick, _)| **tick)?.1.requests.as_ref()?;
    let now = sim.requests()?;
    let writes = |counts: &HashMap<String, u64>| -> u64 {
        counts
            .iter()
            .filter(|(key, _)| {
                let mut parts = key.split(' ');
                let (verb, resource) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
                resource.starts_with("cronjobs") && matches!(verb, "update" | "patch")
            })
            .map(|(_, n)| n)
            .sum()
    };
    let per = (writes(&now) - writes(first)) as f64 / (args.cronjobs * args.ticks).max(1) as f64;
    Some(format!(
        "  CronJob writes per CronJob per tick: {per:.3} (upstream: 1, the status write; extra: {:.3}, goal ≤ 0.05)",
        per - 1.0
    ))
}

/// A Job the skew watcher saw first: its scheduled time, and seconds from it to the sighting.
struct SeenJob {
    scheduled: jiff::Timestamp,
    skew: f64,
}

/// The watcher that times each new Job, on a thread and runtime of its own: on the worker's
/// runtime its events waited in the run queue behind the burst's thousands of sync tasks, so it
/// timed the worker's scheduling backlog on top of the API server's delivery, which no watcher
/// outside the worker's process waits for.
struct SkewWatcher {
    seen: tokio::sync::mpsc::UnboundedReceiver<SeenJob>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl SkewWatcher {
    fn start(config: kube::Config) -> anyhow::Result<Self> {
        let (tx, seen) = tokio::sync::mpsc::unbounded_channel();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name("skew-watcher".into()).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(async move {
                // A client of this runtime: kube's buffer task runs where the client is built.
                let jobs: Api<JobMeta> = Api::all(kube::Client::try_from(config)?);
                let mut stream = watcher(jobs, watcher::Config::default()).default_backoff().boxed();
                let mut first_seen = std::collections::HashSet::new();
                loop {
                    let event = tokio::select! {
                        _ = &mut stopped => break,
                        event = stream.next() => match event {
                            Some(event) => event,
                            None => break,
                        },
                    };
                    if let Ok(watcher::Event::Apply(job) | watcher::Event::InitApply(job)) = event
                        && first_seen.insert(job.metadata.uid.clone().unwrap_or_default())
                        && let Some(scheduled) = scheduled_time(&job.metadata)
                    {
                        let skew = jiff::Timestamp::now().duration_since(scheduled).as_secs_f64();
                        if tx.send(SeenJob { scheduled, skew }).is_err() {
                            break;
                        }
                    }
                }
                Ok(())
            })
        })?;
        Ok(Self { seen, stop: Some(stop), thread: Some(thread) })
    }

    /// Why the watcher's thread ended.
    fn stopped(&mut self) -> String {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(Ok(()))) => "its watch ended".into(),
            Some(Ok(Err(e))) => format!("{e:#}"),
            Some(Err(_)) => "its thread panicked".into(),
            None => "already reported".into(),
        }
    }
}

impl Drop for SkewWatcher {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A Job as the skew watcher reads it: metadata only, so the measuring watcher, which shares
/// the machine with the system under test, does not decode every Job's spec and status.
#[derive(Clone, Debug, serde::Deserialize)]
struct JobMeta {
    metadata: kube::api::ObjectMeta,
}

impl kube::Resource for JobMeta {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Job".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "batch".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "jobs".into()
    }
    fn meta(&self) -> &kube::api::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut kube::api::ObjectMeta {
        &mut self.metadata
    }
}

/// Progress per schedule tick: its skew percentiles and the CPU its burst took, when it is whole.
#[derive(Default)]
struct TickLog {
    ticks: HashMap<jiff::Timestamp, TickStart>,
    /// CPU seconds of the sim process (when apart) and of this one over the last whole tick.
    last_burst_cpu: Option<(f64, f64)>,
}

/// A tick's skews so far, and the counters when its first Job appeared.
struct TickStart {
    skews: Vec<f64>,
    sim_cpu: Option<f64>,
    own_cpu: f64,
    requests: Option<HashMap<String, u64>>,
}

impl TickLog {
    /// Counts a Job; returns the tick's report line once the tick is whole.
    fn observe(
        &mut self,
        scheduled: jiff::Timestamp,
        skew: f64,
        sim: &Sim,
        per_tick: usize,
    ) -> Option<String> {
        let tick = self.ticks.entry(scheduled).or_insert_with(|| TickStart {
            skews: Vec::new(),
            sim_cpu: sim.cpu_seconds(),
            own_cpu: crate::proc_stat::own_cpu_seconds(),
            requests: sim.requests(),
        });
        tick.skews.push(skew);
        if tick.skews.len() != per_tick {
            return None;
        }
        let own = crate::proc_stat::own_cpu_seconds() - tick.own_cpu;
        let sim_cpu = tick.sim_cpu.zip(sim.cpu_seconds()).map(|(before, after)| after - before);
        self.last_burst_cpu = sim_cpu.map(|s| (s, own));
        let sim_part = sim_cpu.map(|s| format!(", sim process {s:.2} CPU-s")).unwrap_or_default();
        // Requests the sim served during the burst, the biggest first.
        let requests = match (&tick.requests, sim.requests()) {
            (Some(before), Some(after)) => {
                let mut delta: Vec<(u64, String)> = after
                    .into_iter()
                    .map(|(k, n)| (n - before.get(&k).copied().unwrap_or(0), k))
                    .filter(|(n, _)| *n > 0)
                    .collect();
                delta.sort_by(|a, b| b.cmp(a));
                let list: Vec<String> = delta.iter().take(8).map(|(n, k)| format!("{k} {n}")).collect();
                format!("\n    requests during the burst: {}", list.join(", "))
            }
            _ => String::new(),
        };
        let p = Percentiles::of(tick.skews.clone());
        // The first Job's skew tells the time before the burst's first creation from the
        // burst's own length.
        let first = p.sorted.first().copied().unwrap_or(f64::NAN);
        Some(format!(
            "  tick {scheduled}: {per_tick} Jobs, skew first {first:.3} s, p50 {:.3} s, p99 {:.3} s; burst used {own:.2} CPU-s in this process{sim_part}{requests}",
            p.p50, p.p99,
        ))
    }
}

async fn ttl_lag(args: &BenchCronArgs) -> anyhow::Result<Percentiles> {
    let (_sim, _worker, client) = start("bench-ttl", args).await?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let ttl = 30;
    let finished_at = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())?;
    let expire_at = finished_at + jiff::SignedDuration::from_secs(ttl);
    // Managed by someone else, so the Job controller leaves them alone; finished through /status.
    create_all(args.ttl_jobs, "finished Jobs", |i| {
        let jobs = jobs.clone();
        async move {
            let name = format!("done-{i}");
            let job: Job = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"managedBy": "bench.batchfleet.io/none", "ttlSecondsAfterFinished": ttl,
                         "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}
            }))?;
            jobs.create(&PostParams::default(), &job).await?;
            let t = finished_at.to_string();
            let cond = |kind: &str| json!({"type": kind, "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastTransitionTime": t, "lastProbeTime": t});
            let status = json!({"status": {"startTime": t, "completionTime": t, "succeeded": 1,
                "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}});
            jobs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await?;
            Ok(())
        }
    })
    .await?;
    anyhow::ensure!(jiff::Timestamp::now() < expire_at, "creating the Jobs took longer than their TTL");
    let mut deleted_at: HashMap<String, jiff::Timestamp> = HashMap::new();
    let mut stream = watcher(jobs.clone(), watcher::Config::default()).boxed();
    let deadline = Instant::now() + Duration::from_secs(ttl as u64 + 300);
    let mut last_report = Instant::now();
    while deleted_at.len() < args.ttl_jobs {
        let remaining = deadline.saturating_duration_since(Instant::now());
        anyhow::ensure!(
            !remaining.is_zero(),
            "only {} of {} Jobs were deleted in time",
            deleted_at.len(),
            args.ttl_jobs
        );
        let Ok(Some(event)) = tokio::time::timeout(remaining, stream.next()).await else { continue };
        if let Ok(watcher::Event::Delete(job)) = event {
            deleted_at.insert(job.metadata.name.unwrap_or_default(), jiff::Timestamp::now());
        }
        if last_report.elapsed() > Duration::from_secs(5) {
            eprintln!("  {} of {} Jobs deleted", deleted_at.len(), args.ttl_jobs);
            last_report = Instant::now();
        }
    }
    let mut lags: Vec<f64> = deleted_at.values().map(|t| t.duration_since(expire_at).as_secs_f64()).collect();
    lags.sort_by(f64::total_cmp);
    Ok(Percentiles::of(lags))
}

pub async fn run(args: BenchCronArgs) -> anyhow::Result<()> {
    let skew = if args.ttl_only { None } else { Some(cron_skew(&args).await.context("CronJob skew")?) };
    let lag = if args.cron_only { None } else { Some(ttl_lag(&args).await.context("TTL lag")?) };
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    println!(
        "## CronJob and TTL benchmark ({cpus} CPUs; {}, client without rate limit and with {} requests in flight, controllers {:?}, {} CronJob syncs)",
        if args.sim_process {
            "the sim in its own process, one standalone worker"
        } else {
            "the sim and one standalone worker in one process"
        },
        args.max_in_flight,
        args.controllers,
        args.concurrency
    );
    println!();
    println!("| measure | n | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    let skew_cpu = skew.as_ref().and_then(|s| s.burst_cpu);
    if let Some(s) = &skew {
        let what = format!(
            "{} every-minute CronJobs in {} namespaces, {} ticks",
            args.cronjobs, args.namespaces, args.ticks
        );
        if let Some(stored) = &s.stored {
            println!("{}", stored.row(&format!("Job creation skew (stored by the API server), {what}")));
        }
        println!("{}", s.seen.row(&format!("Job creation skew (seen by a watcher), {what}")));
        if let Some(written) = &s.status_written {
            println!("{}", written.row(&format!("CronJob status written (lastScheduleTime), {what}")));
        }
    }
    if let Some(l) = &lag {
        println!(
            "{}",
            l.row(&format!("TTL deletion lag after expiry, {} Jobs expiring at once", args.ttl_jobs))
        );
    }
    if let Some((sim_cpu, own_cpu)) = skew_cpu {
        println!();
        println!(
            "CPU over the last tick's burst: sim process {sim_cpu:.2} s, worker and watcher process {own_cpu:.2} s"
        );
    }
    let mut series = Vec::new();
    if let Some(s) = &skew {
        if let Some(stored) = &s.stored {
            series.push(crate::plot::Series {
                name: "CronJob skew: Job stored".into(),
                points: crate::plot::cdf_points(&stored.sorted, 400),
            });
        }
        series.push(crate::plot::Series {
            name: "CronJob skew: Job seen by a watcher".into(),
            points: crate::plot::cdf_points(&s.seen.sorted, 400),
        });
        if let Some(written) = &s.status_written {
            series.push(crate::plot::Series {
                name: "CronJob status written".into(),
                points: crate::plot::cdf_points(&written.sorted, 400),
            });
        }
    }
    if let Some(l) = &lag {
        series.push(crate::plot::Series {
            name: "TTL: Job deleted after expiry".into(),
            points: crate::plot::cdf_points(&l.sorted, 400),
        });
    }
    crate::plot::latency_cdf_chart(
        &args.plot,
        &format!(
            "CronJob skew ({} CronJobs) and TTL lag ({} Jobs), one worker",
            args.cronjobs, args.ttl_jobs
        ),
        &series,
        Some(1.0),
    )?;
    eprintln!("plot written to {}", args.plot.display());
    Ok(())
}
