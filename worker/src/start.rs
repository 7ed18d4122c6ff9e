//! Starting a worker's controllers on a shard table, for both modes: `fleet-worker --standalone`
//! owns every shard from the start (the single-process mode, and the baseline the load tests
//! compare the fleet against); a fleet worker starts on none and the protocol's steps give it
//! shards. Here are the two API clients, the controllers, their queues and metrics.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use prometheus::Registry;
use tokio::task::JoinSet;

use crate::client::{self, ClientLimits};
use crate::clock::{Clock, SystemClock};
use crate::cronjob::controller::CronJobController;
use crate::events::EventSink;
use crate::finalizers::{FinalizerSweeper, SweepMetrics, SweepOptions};
use crate::informer::Informers;
use crate::job::controller::{JobController, JobQueues};
use crate::job::core::Config as JobConfig;
use crate::job::metrics::JobMetrics;
use crate::runtime::list_watch::ContentType;
use crate::runtime::protocol::ShardRuntime;
use crate::runtime::shard::ShardTable;
use crate::runtime::watch::{self, ShardFiltering};
use crate::runtime::workqueue::{Backoff, QueueMetrics, WorkQueue};
use crate::shards::ShardSpace;
use crate::ttl::controller::TtlController;
use crate::ttl::pod_controller::{self, PodTtlController, PodTtlParts};
use crate::ttl::smoothing::Smoothing;

/// What a worker needs to start.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub kubeconfig: Option<PathBuf>,
    pub client_limits: ClientLimits,
    pub concurrent_job_syncs: usize,
    pub concurrent_cron_job_syncs: usize,
    pub concurrent_ttl_syncs: usize,
    /// TTL smoothing: the most TTL deletions (Jobs and bare pods) per second this worker sends,
    /// spread with jitter; 0: none, as upstream (`ttl/pace.rs`).
    pub ttl_max_deletions_per_second: f64,
    /// The `spec.managedBy` value whose Jobs this worker reconciles.
    pub job_managed_by: String,
    /// The Job controller's stall signals (docs/beyond-upstream.md); on by default.
    pub job_stall_signals: bool,
    /// The size guard's limit on Indexed Jobs' status (docs/beyond-upstream.md); 0: off.
    pub job_status_size_limit_bytes: u64,
    pub metrics_addr: SocketAddr,
    pub worker_id: String,
    /// Upstream's constants, overridable so tests need not wait real back-offs.
    pub job_timing: JobTiming,
    /// The worker's one clock, wall and monotonic: every shell's and the event recorder's (tests
    /// speed it up).
    pub clock: Arc<dyn Clock>,
    /// Which controllers run.
    pub controllers: Controllers,
    /// S, the number of shards the key space is cut into (a power of two).
    pub shards: u32,
    /// `/livez` fails when a reconcile loop's keys waited this long and none of its syncs
    /// finished meanwhile.
    pub stall_timeout: Duration,
    /// Hand the controllers' API budget out fairly (status and finalizer writes first, then
    /// namespaces and Jobs in turn) rather than first come, first served as client-go does.
    pub api_fairness: bool,
    /// Controllers given an API budget of their own, apart from the shared `client_limits`.
    pub controller_budgets: ControllerBudgets,
    /// The finalizer safety net beside the Job controller (docs/beyond-upstream.md).
    pub finalizer_sweep: SweepOptions,
    /// What the watches ask the API server to answer in (`--kube-api-content-type`).
    pub content_type: ContentType,
    /// The HTTP version the clients speak (`--kube-api-protocol`).
    pub api_protocol: client::ApiProtocol,
}

/// Per-controller API budgets (queries per second; the burst scales with it as
/// `--kube-api-burst` does with `--kube-api-qps`). A controller without one shares the worker's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ControllerBudgets {
    pub job: Option<f64>,
    pub cronjob: Option<f64>,
    pub ttl: Option<f64>,
}

impl ControllerBudgets {
    /// Each controller with a budget of its own, by the name its metrics carry.
    pub fn each(&self) -> impl Iterator<Item = (&'static str, f64)> {
        [("job", self.job), ("cronjob", self.cronjob), ("ttl", self.ttl)]
            .into_iter()
            .filter_map(|(name, qps)| qps.map(|q| (name, q)))
    }

    /// `shared` scaled to `qps`: the burst keeps its ratio to the rate.
    pub fn limits(shared: ClientLimits, qps: f64) -> ClientLimits {
        let ratio = if shared.qps > 0.0 { f64::from(shared.burst) / shared.qps } else { 1.5 };
        let burst = (qps * ratio).round().clamp(1.0, f64::from(u32::MAX)) as u32;
        ClientLimits { qps, burst, ..shared }
    }
}

/// The controllers a worker runs, like kube-controller-manager's `--controllers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Controllers {
    pub job: bool,
    pub cronjob: bool,
    pub ttl_after_finished: bool,
}

impl Default for Controllers {
    fn default() -> Self {
        Self { job: true, cronjob: true, ttl_after_finished: true }
    }
}

impl std::str::FromStr for Controllers {
    type Err = String;

    /// `job,cronjob,ttl-after-finished`; `*` for all, `-name` to disable one.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut c = Controllers { job: false, cronjob: false, ttl_after_finished: false };
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (on, name) = match item.strip_prefix('-') {
                Some(n) => (false, n),
                None => (true, item),
            };
            match name {
                "*" => c = Controllers { job: on, cronjob: on, ttl_after_finished: on },
                "job" => c.job = on,
                "cronjob" => c.cronjob = on,
                "ttl-after-finished" => c.ttl_after_finished = on,
                other => {
                    return Err(format!(
                        "unknown controller {other:?}: expected job, cronjob, ttl-after-finished or *"
                    ));
                }
            }
        }
        Ok(c)
    }
}

/// The Job controller's delays: pod-failure back-off (10s doubling to 10min) and the pod-event
/// batch period (1s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobTiming {
    pub pod_failure_backoff: Duration,
    pub max_pod_failure_backoff: Duration,
    pub sync_job_batch_period: Duration,
}

impl Default for JobTiming {
    fn default() -> Self {
        let c = JobConfig::default();
        Self {
            pod_failure_backoff: c.pod_failure_backoff,
            max_pod_failure_backoff: c.max_pod_failure_backoff,
            sync_job_batch_period: c.sync_job_batch_period,
        }
    }
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            client_limits: ClientLimits::DEFAULT,
            concurrent_job_syncs: 5,
            concurrent_cron_job_syncs: 5,
            concurrent_ttl_syncs: 5,
            ttl_max_deletions_per_second: 0.0,
            job_managed_by: crate::job::core::JOB_CONTROLLER_NAME.to_string(),
            job_stall_signals: true,
            job_status_size_limit_bytes: crate::job::core::DEFAULT_STATUS_SIZE_LIMIT_BYTES,
            metrics_addr: SocketAddr::from(([0, 0, 0, 0], 8080)),
            worker_id: "fleet-worker".to_string(),
            job_timing: JobTiming::default(),
            clock: Arc::new(SystemClock),
            controllers: Controllers::default(),
            shards: 256,
            stall_timeout: crate::health::DEFAULT_STALL_TIMEOUT,
            api_fairness: true,
            controller_budgets: ControllerBudgets::default(),
            finalizer_sweep: SweepOptions::default(),
            content_type: ContentType::default(),
            api_protocol: client::ApiProtocol::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Client(#[from] client::ClientError),
    #[error("registering metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error(transparent)]
    Shards(#[from] crate::shards::BadShardCount),
    #[error("binding the metrics endpoint {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

/// A running worker; dropping it stops it.
pub struct Worker {
    pub metrics_addr: SocketAddr,
    /// Its shards: the protocol's steps are calls on this.
    pub runtime: Arc<ShardRuntime>,
    /// What `/readyz` and `/livez` answer.
    pub health: crate::health::Health,
    tasks: JoinSet<()>,
}

impl Worker {
    /// Waits until one of the worker's tasks ends (they run forever unless something breaks).
    pub async fn wait(&mut self) {
        self.tasks.join_next().await;
    }
}

/// Starts the controllers for every shard.
pub async fn start(opts: WorkerOptions) -> Result<Worker, StartError> {
    let clients = Clients::build(&opts).await?;
    let shards = ShardTable::all_active(ShardSpace::new(opts.shards)?);
    start_on_shards_with(clients, opts, shards, None).await
}

/// The worker's two API clients, as kube-controller-manager gives its controllers and its shared
/// informers clients (and rate limiters) of their own: a shard's LISTs and watches never wait
/// behind the controllers' writes, so a hand-over's warm-up does not queue behind a saturated
/// write budget. The controllers' client has `--kube-api-qps` and `--kube-api-burst`; the
/// watches' client only `--kube-api-max-in-flight`: its requests are three LISTs and three WATCHes
/// per shard gained (and a re-list when a watch expires), bounded by the shards a worker takes on,
/// not by its workload, and a token bucket sized for one watch per kind (upstream's informers)
/// would hold a worker taking over a dead worker's 20 shards for seconds.
#[derive(Clone)]
pub struct Clients {
    /// The controllers' reads and writes, and their events.
    pub controllers: client::ApiClient,
    /// The shard watches: their LISTs and WATCHes.
    pub informers: kube::Client,
    /// The controllers with a budget of their own (`--kube-api-qps-<controller>`), by name.
    pub own_budgets: BTreeMap<&'static str, client::ApiClient>,
}

impl Clients {
    /// Both clients from the worker's kubeconfig and limits.
    pub async fn build(opts: &WorkerOptions) -> Result<Self, StartError> {
        Self::build_fenced(opts, None).await
    }

    /// [`Clients::build`], the controllers' writes checked against the lease's `deadline` too.
    pub async fn build_fenced(
        opts: &WorkerOptions,
        deadline: Option<client::LeaseDeadline>,
    ) -> Result<Self, StartError> {
        let controllers = Self::controllers(opts, "shared", opts.client_limits, deadline.clone()).await?;
        let mut own_budgets = BTreeMap::new();
        for (name, qps) in opts.controller_budgets.each() {
            let limits = ControllerBudgets::limits(opts.client_limits, qps);
            own_budgets.insert(name, Self::controllers(opts, name, limits, deadline.clone()).await?);
        }
        Ok(Self { controllers, informers: Self::informers(opts).await?, own_budgets })
    }

    async fn controllers(
        opts: &WorkerOptions,
        budget: &str,
        limits: ClientLimits,
        deadline: Option<client::LeaseDeadline>,
    ) -> Result<client::ApiClient, StartError> {
        let order = if opts.api_fairness {
            client::TokenOrder::Fair(budget.to_string())
        } else {
            client::TokenOrder::Arrival
        };
        let user_agent = client::user_agent(&opts.worker_id);
        Ok(client::build_fenced(
            opts.kubeconfig.as_deref(),
            limits,
            &user_agent,
            deadline,
            &order,
            opts.api_protocol,
        )
        .await?)
    }

    /// The watches' client: the in-flight cap of `opts`, no rate limit, and HTTP/1.1 whatever
    /// `--kube-api-protocol` says. A fleet worker opens three watches for each shard it gains;
    /// on one HTTP/2 connection they would fill the server's stream limit (kube-apiserver's 250)
    /// from about 84 shards on, and every later LIST or WATCH would wait for a watch to end,
    /// minutes, since hyper's pool does not dial a second connection as Go's transport does. A
    /// watch is one long answer, which HTTP/2 makes no cheaper; the writes, many short requests,
    /// are what gain from it.
    pub async fn informers(opts: &WorkerOptions) -> Result<kube::Client, StartError> {
        let watch_limits = ClientLimits { qps: 0.0, burst: 1, ..opts.client_limits };
        let user_agent = client::user_agent(&opts.worker_id);
        Ok(client::build(opts.kubeconfig.as_deref(), watch_limits, &user_agent, client::ApiProtocol::Http1)
            .await?)
    }

    /// One client for both (tests, with the sim cluster).
    pub fn shared(client: kube::Client) -> Self {
        Self { controllers: client.clone().into(), informers: client, own_budgets: BTreeMap::new() }
    }
}

/// Starts the controllers with a given client (tests use this with the sim cluster).
pub async fn start_with_client(client: kube::Client, opts: WorkerOptions) -> Result<Worker, StartError> {
    // Standalone holds every shard, Active: the same runtime the fleet's workers run.
    let shards = ShardTable::all_active(ShardSpace::new(opts.shards)?);
    start_on_shards(client, opts, shards, None).await
}

/// Starts the controllers on the shards `shards` holds — none for a fleet worker, which the
/// protocol's steps then give shards to. `filtering` is probed from the server unless given.
pub async fn start_on_shards(
    client: kube::Client,
    opts: WorkerOptions,
    shards: ShardTable,
    filtering: Option<ShardFiltering>,
) -> Result<Worker, StartError> {
    start_on_shards_with(Clients::shared(client), opts, shards, filtering).await
}

/// [`start_on_shards`] with the controllers' and the watches' clients apart.
pub async fn start_on_shards_with(
    clients: Clients,
    opts: WorkerOptions,
    shards: ShardTable,
    filtering: Option<ShardFiltering>,
) -> Result<Worker, StartError> {
    let Clients { controllers: client, informers: informers_client, own_budgets } = clients;
    // kube-controller-manager's --kube-api-content-type holds for its writes' answers too.
    let protobuf_answers = opts.content_type == ContentType::Protobuf;
    let client = client.with_protobuf_answers(protobuf_answers);
    let own_budgets: BTreeMap<_, _> =
        own_budgets.into_iter().map(|(name, c)| (name, c.with_protobuf_answers(protobuf_answers))).collect();
    let client_of = |controller: &str| own_budgets.get(controller).unwrap_or(&client).clone();
    if shards.space().count() != opts.shards {
        return Err(StartError::Shards(crate::shards::BadShardCount(shards.space().count())));
    }
    let filtering = match filtering {
        Some(f) => f,
        None => watch::probe(&informers_client, &shards).await,
    };
    let registry = Registry::new();
    client::ClientMetrics::global().register(&registry)?;
    batchfleet_kube_client::FairBudgetMetrics::global().register(&registry)?;
    batchfleet_telemetry::register_process_metrics(&registry)?;
    shards.register_metrics(&registry)?;
    let health = crate::health::Health::new(shards.clone(), opts.stall_timeout, &registry)?;
    let job_metrics = JobMetrics::register(&registry)?;
    let sweep_metrics = (opts.controllers.job && opts.finalizer_sweep.enabled)
        .then(|| SweepMetrics::register(&registry))
        .transpose()?;
    let api_backoff = Backoff { base: Duration::from_secs(1), max: Duration::from_secs(60) };
    let queue = WorkQueue::new(api_backoff, QueueMetrics::register(&registry, "job")?);
    let orphans = WorkQueue::new(api_backoff, QueueMetrics::register(&registry, "job_orphan_pod")?);
    let (events, record_events) =
        EventSink::new(client_of("job"), "job-controller", shards.clone(), opts.clock.clone());
    let config = JobConfig {
        managed_by: opts.job_managed_by.clone(),
        stall_signals: opts.job_stall_signals,
        status_size_limit_bytes: opts.job_status_size_limit_bytes,
        pod_failure_backoff: opts.job_timing.pod_failure_backoff,
        max_pod_failure_backoff: opts.job_timing.max_pod_failure_backoff,
        sync_job_batch_period: opts.job_timing.sync_job_batch_period,
        ..JobConfig::default()
    };
    let informers = Informers::new(shards.clone());
    let jobs = JobController::new(
        client_of("job"),
        &informers,
        config,
        job_metrics,
        events,
        JobQueues { jobs: queue.clone(), orphans: orphans.clone() },
        shards.clone(),
        opts.clock.clone(),
    );
    let (cron_events, record_cron_events) = EventSink::new(
        client_of("cronjob"),
        crate::cronjob::core::EVENT_COMPONENT,
        shards.clone(),
        opts.clock.clone(),
    );
    let cron_queue = WorkQueue::new(api_backoff, QueueMetrics::register(&registry, "cronjob")?);
    let cron_queue_watch = cron_queue.clone();
    // Schedules without a time zone are evaluated in the controller's zone: UTC, as in a container.
    let cronjobs = CronJobController::new(
        client_of("cronjob"),
        &informers,
        &registry,
        cron_queue,
        cron_events,
        jiff::tz::TimeZone::UTC,
        opts.clock.clone(),
        shards.clone(),
    )?;
    let ttl_queue = WorkQueue::new(api_backoff, QueueMetrics::register(&registry, "ttl_jobs_to_delete")?);
    let ttl_queue_watch = ttl_queue.clone();
    // One pace for both TTL controllers; its jitter seeded apart on each worker.
    let smoothing = Smoothing::new(opts.ttl_max_deletions_per_second, crate::jitter::seed()).map(Arc::new);
    let ttl = TtlController::new(
        client_of("ttl"),
        informers.jobs.clone(),
        &registry,
        ttl_queue,
        shards.clone(),
        opts.clock.clone(),
        smoothing.clone(),
    )?;
    let pod_ttl_queue =
        WorkQueue::new(api_backoff, QueueMetrics::register(&registry, pod_controller::QUEUE)?);
    let (ttl_events, record_ttl_events) =
        EventSink::new(client.clone(), "ttl-after-finished-controller", shards.clone(), opts.clock.clone());
    let pod_ttl = PodTtlController::new(
        client.kube.clone(),
        informers.pods.clone(),
        &registry,
        PodTtlParts {
            queue: pod_ttl_queue.clone(),
            events: ttl_events,
            shards: shards.clone(),
            clock: opts.clock.clone(),
            smoothing,
        },
    )?;
    let (metrics_addr, serve) = crate::serve_metrics::bind(opts.metrics_addr, registry, health.clone())
        .await
        .map_err(|source| StartError::Bind { addr: opts.metrics_addr, source })?;
    let mut tasks = JoinSet::new();
    tasks.spawn(serve);
    tasks.spawn(health.clone().keep_gauges());
    // Each controller's event recorder runs with it: the recorder of one that is off would end at
    // once (its sender dropped), and a task that ends stops the worker.
    if opts.controllers.job {
        tasks.spawn(record_events);
        informers.jobs.add_handler(jobs.clone());
        informers.pods.add_handler(jobs.clone());
        health.watch_queue("job", {
            let q = queue.clone();
            move || q.progress()
        });
        health.watch_queue("job_orphan_pod", {
            let q = orphans.clone();
            move || q.progress()
        });
        tasks.spawn(jobs.run(opts.concurrent_job_syncs));
        // The safety net under the Job controller: off with it (kube-controller-manager's
        // Job controller then owns the finalizer), or by its own flag.
        if let Some(sweep_metrics) = sweep_metrics {
            let (sweep_events, record_sweep_events) = EventSink::new(
                client.clone(),
                crate::finalizers::sweeper::EVENT_COMPONENT,
                shards.clone(),
                opts.clock.clone(),
            );
            let sweeper = FinalizerSweeper::new(
                client.kube.clone(),
                &informers,
                shards.clone(),
                sweep_events,
                sweep_metrics,
                opts.finalizer_sweep,
                opts.job_managed_by.clone(),
                opts.clock.clone(),
            );
            informers.jobs.add_handler(sweeper.clone());
            informers.pods.add_handler(sweeper.clone());
            tasks.spawn(record_sweep_events);
            tasks.spawn(sweeper.run());
        }
    }
    if opts.controllers.cronjob {
        tasks.spawn(record_cron_events);
        informers.jobs.add_handler(cronjobs.clone());
        informers.cronjobs.add_handler(cronjobs.clone());
        health.watch_queue("cronjob", {
            let q = cron_queue_watch.clone();
            move || q.progress()
        });
        tasks.spawn(cronjobs.run(opts.concurrent_cron_job_syncs));
    }
    if opts.controllers.ttl_after_finished {
        informers.jobs.add_handler(ttl.clone());
        health.watch_queue("ttl_jobs_to_delete", {
            let q = ttl_queue_watch.clone();
            move || q.progress()
        });
        tasks.spawn(ttl.run(opts.concurrent_ttl_syncs));
        tasks.spawn(record_ttl_events);
        informers.pods.add_handler(pod_ttl.clone());
        health.watch_queue(pod_controller::QUEUE, move || pod_ttl_queue.progress());
        tasks.spawn(pod_ttl.run(opts.concurrent_ttl_syncs));
    }
    let runtime =
        Arc::new(ShardRuntime::start(informers_client, shards, filtering, opts.content_type, informers));
    tracing::info!(
        %metrics_addr,
        managed_by = %opts.job_managed_by,
        shards = runtime.table().held().len(),
        ?filtering,
        "worker running"
    );
    Ok(Worker { metrics_addr, runtime, health, tasks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controllers_flag_parses_like_kube_controller_managers() {
        let all = Controllers::default();
        assert_eq!("*".parse::<Controllers>().unwrap(), all);
        assert_eq!(
            "job".parse::<Controllers>().unwrap(),
            Controllers { job: true, cronjob: false, ttl_after_finished: false }
        );
        assert_eq!("*,-cronjob".parse::<Controllers>().unwrap(), Controllers { cronjob: false, ..all });
        assert!("job,podgc".parse::<Controllers>().is_err());
    }
}
