//! `fleet-worker`: reconciles Jobs (and, later, CronJobs and TTLs) for the shards it owns.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use batchfleet_store::cli::{StoreArgs, StoreKind};
use batchfleet_telemetry::LogFormat;
use batchfleet_tls::cli::ClientTlsArgs;
use batchfleet_tls::client::ClientTransport;
use batchfleet_worker::client::ClientLimits;
use batchfleet_worker::fleet::lease;
use batchfleet_worker::fleet::session::{self, SessionConfig};
use batchfleet_worker::runtime::list_watch::ContentType;
use batchfleet_worker::start::{self, WorkerOptions};
use clap::Parser;

/// glibc's malloc contends across threads under the worker's allocation-heavy JSON work.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Stateless batchfleet worker: reconciles Jobs, CronJobs and TTLs for the shards it owns.
/// `--kube-api-order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ApiOrder {
    Fair,
    Arrival,
}

#[derive(Parser, Debug)]
#[command(name = "fleet-worker", version)]
struct Args {
    /// Own every shard, with no coordinator.
    #[arg(long, env = "FLEET_STANDALONE")]
    standalone: bool,
    /// kubeconfig of the API server (default: $KUBECONFIG, then in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Client-side API rate limit in queries per second (0: unlimited), as kube-controller-manager's --kube-api-qps.
    #[arg(long, env = "FLEET_KUBE_API_QPS", default_value_t = 20.0)]
    kube_api_qps: f64,
    /// Burst of the client-side rate limit, as --kube-api-burst.
    #[arg(long, env = "FLEET_KUBE_API_BURST", default_value_t = 30)]
    kube_api_burst: u32,
    /// API requests in flight at once (0: no cap); the rest wait their turn in arrival order.
    #[arg(long, env = "FLEET_KUBE_API_MAX_IN_FLIGHT", default_value_t = batchfleet_worker::client::ClientLimits::DEFAULT.max_in_flight)]
    kube_api_max_in_flight: usize,
    /// The order requests get their tokens in once they wait: `fair` (status and finalizer
    /// writes first, pod creates last, namespaces and then Jobs in turn) or `arrival` (first
    /// come, first served, as client-go's).
    #[arg(long, env = "FLEET_KUBE_API_ORDER", value_enum, default_value = "fair")]
    kube_api_order: ApiOrder,
    /// What the watches and the writes ask the API server to answer in, as
    /// kube-controller-manager's --kube-api-content-type: `application/vnd.kubernetes.protobuf`
    /// (pods are read in protobuf, and so are the answers to pod and Event writes and to deletes;
    /// JSON accepted when the server has no protobuf) or `application/json`.
    #[arg(long, env = "FLEET_KUBE_API_CONTENT_TYPE", default_value = ContentType::PROTOBUF, value_parser = ContentType::parse)]
    kube_api_content_type: ContentType,
    /// The HTTP version of the controllers' requests to the API server: `auto` (HTTP/2 where the
    /// TLS handshake agrees on it, as client-go; HTTP/1.1 over plain HTTP), `http1`, or `http2`
    /// (also over plain HTTP, with prior knowledge, for an API server or proxy that serves it
    /// there). The shard watches speak HTTP/1.1 whatever this says, a connection each.
    #[arg(long, env = "FLEET_KUBE_API_PROTOCOL", value_enum, default_value = "auto")]
    kube_api_protocol: batchfleet_worker::client::ApiProtocol,
    /// A budget of the Job controller's own, in queries per second, its burst in the ratio of
    /// --kube-api-burst to --kube-api-qps (default: it shares the worker's budget).
    #[arg(long, env = "FLEET_KUBE_API_QPS_JOB")]
    kube_api_qps_job: Option<f64>,
    /// A budget of the CronJob controller's own, as --kube-api-qps-job.
    #[arg(long, env = "FLEET_KUBE_API_QPS_CRONJOB")]
    kube_api_qps_cronjob: Option<f64>,
    /// A budget of the TTL-after-finished controller's own, as --kube-api-qps-job.
    #[arg(long, env = "FLEET_KUBE_API_QPS_TTL")]
    kube_api_qps_ttl: Option<f64>,
    /// Jobs synced concurrently, as --concurrent-job-syncs.
    #[arg(long, env = "FLEET_CONCURRENT_JOB_SYNCS", default_value_t = 5)]
    concurrent_job_syncs: usize,
    /// CronJobs synced concurrently, as --concurrent-cron-job-syncs.
    #[arg(long, env = "FLEET_CONCURRENT_CRON_JOB_SYNCS", default_value_t = 5)]
    concurrent_cron_job_syncs: usize,
    /// Finished Jobs checked for their TTL concurrently, as --concurrent-ttl-after-finished-syncs.
    #[arg(long, env = "FLEET_CONCURRENT_TTL_AFTER_FINISHED_SYNCS", default_value_t = 5)]
    concurrent_ttl_after_finished_syncs: usize,
    /// TTL smoothing: at most this many TTL deletions (of Jobs, and of bare pods with
    /// batchfleet.io/ttl-seconds-after-finished) per second from this worker, a mass expiry spread
    /// over time with jitter (docs/beyond-upstream.md); 0: none, deleted as they expire, as upstream.
    #[arg(long, env = "FLEET_TTL_MAX_DELETIONS_PER_SECOND", default_value_t = 0.0)]
    ttl_max_deletions_per_second: f64,
    /// Reconcile only Jobs whose spec.managedBy is this value (Jobs without the field count as
    /// kubernetes.io/job-controller). Set e.g. batchfleet.io/job-controller to run beside
    /// kube-controller-manager and move namespaces over one by one.
    #[arg(long, env = "FLEET_JOB_MANAGED_BY", default_value = "kubernetes.io/job-controller")]
    job_managed_by: String,
    /// Stall signals beyond upstream (docs/beyond-upstream.md): Events and the
    /// batchfleet.io/PodCreationBlocked condition when pod creates are refused, the pod-failure
    /// back-off deadline, pods stuck Terminating on lost nodes. `false` behaves as upstream.
    #[arg(long, env = "FLEET_JOB_STALL_SIGNALS", default_value_t = true, action = clap::ArgAction::Set)]
    job_stall_signals: bool,
    /// Size guard on Indexed Jobs' completedIndexes/failedIndexes (docs/beyond-upstream.md): at 80%
    /// of this estimated object size the batchfleet.io/StatusSizeNearLimit condition and a Warning
    /// Event are set (cleared below 70%). Default: etcd's default request limit, 1.5 MiB. 0: off.
    #[arg(long, env = "FLEET_JOB_STATUS_SIZE_LIMIT_BYTES", default_value_t = batchfleet_worker::job::core::DEFAULT_STATUS_SIZE_LIMIT_BYTES)]
    job_status_size_limit_bytes: u64,
    /// Controllers to run: job, cronjob, ttl-after-finished; `*` for all, `-name` to leave one
    /// to kube-controller-manager.
    #[arg(long, env = "FLEET_CONTROLLERS", default_value = "*", allow_hyphen_values = true)]
    controllers: String,
    /// Where to serve /metrics, /readyz and /livez (/healthz).
    #[arg(long, env = "FLEET_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// This worker's identity (default: the host name); it names the worker in the User-Agent
    /// of every API request: `fleet-worker/VERSION (ID)`.
    #[arg(long, env = "FLEET_WORKER_ID")]
    worker_id: Option<String>,
    /// S, the number of shards the key space is cut into (a power of two); standalone owns all.
    #[arg(long, env = "FLEET_SHARDS", default_value_t = 256)]
    shards: u32,
    /// The coordinators' session addresses (`https://HOST:7400`, `http://` with --insecure),
    /// tried in turn; the leader answers. Required unless --standalone.
    #[arg(long, env = "FLEET_COORDINATOR", value_delimiter = ',')]
    coordinator: Vec<String>,
    /// TLS of the session with the coordinator: the worker's client certificate, and the CA the
    /// coordinator's certificate must chain to (docs/security.md). --standalone has no session
    /// and ignores them.
    #[command(flatten)]
    tls: ClientTlsArgs,
    /// Where the worker renews its liveness lease: the same store as the coordinator's.
    #[command(flatten)]
    store: StoreArgs,
    /// The worker lease's TTL: unable to renew it for this long, the worker stops every shard;
    /// renewed every third of it [default: 5s with --store kubernetes, 3s with --store etcd]
    #[arg(long, env = "FLEET_LEASE_DURATION", value_parser = humantime::parse_duration)]
    lease_duration: Option<std::time::Duration>,
    /// How long SIGTERM waits for the coordinator to move every shard away before exiting.
    #[arg(long, env = "FLEET_DRAIN_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    drain_timeout: std::time::Duration,
    /// The largest gRPC message the worker reads from or writes to the coordinator, in bytes
    /// (tonic's default); a larger one ends the call with OUT_OF_RANGE and the session registers
    /// again.
    #[arg(long, env = "FLEET_GRPC_MAX_MESSAGE_SIZE", default_value_t = batchfleet_worker::fleet::session::DEFAULT_MAX_MESSAGE_SIZE)]
    grpc_max_message_size: usize,
    /// /livez fails (and a kubelet restarts the worker) when keys waited this long in a
    /// reconcile loop's queue and none of its syncs finished meanwhile.
    #[arg(long, env = "FLEET_STALL_TIMEOUT", default_value = "2m", value_parser = humantime::parse_duration)]
    stall_timeout: std::time::Duration,
    /// Remove batch.kubernetes.io/job-tracking from pods whose Job is gone, or finished and
    /// counted them, when nothing else would (docs/beyond-upstream.md). Off with the job
    /// controller too.
    #[arg(long, env = "FLEET_FINALIZER_SWEEP", default_value_t = true, action = clap::ArgAction::Set)]
    finalizer_sweep: bool,
    /// The finalizer sweep looks over the worker's shards at least this often (and sooner when
    /// pods or Jobs change).
    #[arg(long, env = "FLEET_FINALIZER_SWEEP_PERIOD", default_value = "30s", value_parser = humantime::parse_duration)]
    finalizer_sweep_period: std::time::Duration,
    /// The finalizer sweep's own API budget in requests per second (burst twice that), taken
    /// inside --kube-api-qps.
    #[arg(long, env = "FLEET_FINALIZER_SWEEP_QPS", default_value_t = 5.0)]
    finalizer_sweep_qps: f64,
    /// How long the Job controller has to remove a finalizer itself before the sweep does: a
    /// pod's age, a Job's deletion or its finish must be this old.
    #[arg(long, env = "FLEET_FINALIZER_SWEEP_GRACE", default_value = "30s", value_parser = humantime::parse_duration)]
    finalizer_sweep_grace: std::time::Duration,
    /// The threads the controllers, watches and API clients run on. 1 (the default): one thread,
    /// the least CPU per pod lifecycle, as each worker holds a share of the shards and the fleet
    /// grows by workers (docs/operations.md); N: N threads; 0: one per core.
    #[arg(long, env = "FLEET_RUNTIME_THREADS", default_value_t = 1)]
    runtime_threads: usize,
    /// How long a runtime thread that has run out of work waits before it looks at its sockets
    /// and timers again, so that answers and watch events arriving close together are handled in
    /// one wake-up. 0s (the default): no wait, as kube-controller-manager. A wait saved a little CPU
    /// where wake-ups are dense and few Events are written; where the Event sink is busy it cost
    /// more CPU, fewer Events and later pods (docs/operations.md).
    #[arg(long, env = "FLEET_IDLE_WAKE_DELAY", default_value = "0s", value_parser = humantime::parse_duration)]
    idle_wake_delay: std::time::Duration,
    /// For tests only: `SPEED@ANCHOR` (e.g. `10@2026-11-26T08:00:00Z`) runs the controllers'
    /// clock SPEED times faster than the wall clock from the RFC 3339 time ANCHOR, so that a
    /// CronJob's minute passes in six seconds. Processes given the same value read the same
    /// time, so a fleet of workers shares one fast clock.
    #[arg(long, hide = true, value_parser = parse_test_clock)]
    test_clock: Option<(f64, jiff::Timestamp)>,
    /// How the log on stderr is written: text, or one JSON object per line (docs/operations.md).
    #[arg(long, env = "FLEET_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

fn parse_test_clock(value: &str) -> Result<(f64, jiff::Timestamp), String> {
    let (speed, anchor) = value.split_once('@').ok_or("expected SPEED@ANCHOR")?;
    let speed: f64 = speed.parse().map_err(|e| format!("speed {speed:?}: {e}"))?;
    if !(speed.is_finite() && speed > 0.0) {
        return Err(format!("speed {speed} must be above 0"));
    }
    let anchor = anchor.parse().map_err(|e| format!("anchor {anchor:?}: {e}"))?;
    Ok((speed, anchor))
}

/// The host name, as `hostname` prints it.
fn host_name() -> Option<String> {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let has_coordinator = !args.coordinator.is_empty();
    if args.standalone == has_coordinator {
        eprintln!("fleet-worker: give either --standalone or --coordinator URL[,URL…]");
        return ExitCode::from(2);
    }
    let lease_duration = args.lease_duration.unwrap_or(args.store.store.default_worker_lease());
    if lease_duration < std::time::Duration::from_millis(300) {
        eprintln!("fleet-worker: --lease-duration must be at least 300ms");
        return ExitCode::from(2);
    }
    if args.concurrent_job_syncs == 0
        || args.concurrent_cron_job_syncs == 0
        || args.concurrent_ttl_after_finished_syncs == 0
        || [Some(args.kube_api_qps), args.kube_api_qps_job, args.kube_api_qps_cronjob, args.kube_api_qps_ttl]
            .into_iter()
            .flatten()
            .any(|qps| qps.is_nan() || qps < 0.0)
        || !(args.ttl_max_deletions_per_second.is_finite() && args.ttl_max_deletions_per_second >= 0.0)
    {
        eprintln!(
            "fleet-worker: the --concurrent-* flags must be at least 1, and the --kube-api-qps* flags and --ttl-max-deletions-per-second at least 0"
        );
        return ExitCode::from(2);
    }
    if !(args.finalizer_sweep_qps.is_finite() && args.finalizer_sweep_qps > 0.0)
        || args.finalizer_sweep_period.is_zero()
    {
        eprintln!(
            "fleet-worker: --finalizer-sweep-qps must be above 0 and --finalizer-sweep-period above 0s"
        );
        return ExitCode::from(2);
    }
    let transport = if args.standalone {
        ClientTransport::Insecure
    } else {
        match args.tls.client_transport() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("fleet-worker: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let controllers = match args.controllers.parse() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fleet-worker: --controllers: {e}");
            return ExitCode::from(2);
        }
    };
    let log_format = args.log_format;
    batchfleet_telemetry::init_logging(log_format, "info");
    let exit =
        |message: &dyn std::fmt::Display| batchfleet_telemetry::log_exit(log_format, "fleet-worker", message);
    let worker_id = args.worker_id.or_else(host_name).unwrap_or_else(|| "fleet-worker".to_string());
    let opts = WorkerOptions {
        kubeconfig: args.kubeconfig,
        client_limits: ClientLimits {
            qps: args.kube_api_qps,
            burst: args.kube_api_burst,
            max_in_flight: args.kube_api_max_in_flight,
        },
        concurrent_job_syncs: args.concurrent_job_syncs,
        concurrent_cron_job_syncs: args.concurrent_cron_job_syncs,
        concurrent_ttl_syncs: args.concurrent_ttl_after_finished_syncs,
        ttl_max_deletions_per_second: args.ttl_max_deletions_per_second,
        job_managed_by: args.job_managed_by,
        job_stall_signals: args.job_stall_signals,
        job_status_size_limit_bytes: args.job_status_size_limit_bytes,
        metrics_addr: args.metrics_addr,
        worker_id,
        controllers,
        shards: args.shards,
        stall_timeout: args.stall_timeout,
        api_fairness: args.kube_api_order == ApiOrder::Fair,
        content_type: args.kube_api_content_type,
        api_protocol: args.kube_api_protocol,
        controller_budgets: start::ControllerBudgets {
            job: args.kube_api_qps_job,
            cronjob: args.kube_api_qps_cronjob,
            ttl: args.kube_api_qps_ttl,
        },
        finalizer_sweep: batchfleet_worker::finalizers::SweepOptions {
            enabled: args.finalizer_sweep,
            period: args.finalizer_sweep_period,
            qps: args.finalizer_sweep_qps,
            grace: args.finalizer_sweep_grace,
        },
        ..WorkerOptions::default()
    };
    let opts = match args.test_clock {
        Some((speed, anchor)) => WorkerOptions {
            clock: std::sync::Arc::new(batchfleet_worker::clock::ScaledClock::anchored(anchor, speed)),
            ..opts
        },
        None => opts,
    };
    let runtime = match batchfleet_worker::executor::build(args.runtime_threads, args.idle_wake_delay) {
        Ok(r) => r,
        Err(e) => {
            exit(&format_args!("cannot start the runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let fleet = (!args.standalone).then(|| FleetFlags {
        coordinators: args.coordinator.clone(),
        store: args.store.clone(),
        lease_duration,
        drain_timeout: args.drain_timeout,
        transport,
        max_message_size: args.grpc_max_message_size,
    });
    runtime.block_on(async {
        let result = match fleet {
            None => run_standalone(opts).await,
            Some(flags) => run_in_fleet(opts, flags).await,
        };
        match result {
            Ok(code) => code,
            Err(e) => {
                exit(&format_args!("{e:#}"));
                ExitCode::FAILURE
            }
        }
    })
}

async fn run_standalone(opts: WorkerOptions) -> anyhow::Result<ExitCode> {
    let mut worker = start::start(opts).await?;
    Ok(tokio::select! {
        _ = worker.wait() => {
            tracing::error!("a controller task ended");
            ExitCode::FAILURE
        }
        _ = tokio::signal::ctrl_c() => ExitCode::SUCCESS,
    })
}

struct FleetFlags {
    coordinators: Vec<String>,
    store: StoreArgs,
    lease_duration: std::time::Duration,
    drain_timeout: std::time::Duration,
    transport: ClientTransport,
    max_message_size: usize,
}

/// A fleet worker: no shards until the coordinator gives them; a lease renewed in the store; on
/// SIGTERM, asks to be drained and exits once every shard has moved (or the timeout passed).
async fn run_in_fleet(opts: WorkerOptions, flags: FleetFlags) -> anyhow::Result<ExitCode> {
    use batchfleet_store::etcd::EtcdStore;
    use batchfleet_store::kubernetes::KubernetesStore;
    let space = batchfleet_worker::shards::ShardSpace::new(opts.shards)?;
    let table = batchfleet_worker::runtime::shard::ShardTable::new(space);
    // The controllers' writes are checked against the lease as they are sent, too.
    let clients = start::Clients::build_fenced(&opts, Some(table.lease_deadline())).await?;
    let worker_id = opts.worker_id.clone();
    let kubeconfig = opts.kubeconfig.clone();
    let api_protocol = opts.api_protocol;
    let mut worker = start::start_on_shards_with(clients, opts, table, None).await?;
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let (renewed_tx, renewed) = tokio::sync::watch::channel(lease::LeaseState::default());
    let (drained_tx, mut drained) = tokio::sync::watch::channel(false);
    let id = batchfleet_store::ids::WorkerId(worker_id.clone());
    // The protocol (lease renewals, ACTIVATE's barrier read) has a client of its own, as
    // kube-controller-manager's leader election does: it must not wait behind the controllers'
    // requests in their rate limiter.
    let protocol_client = batchfleet_worker::client::build(
        kubeconfig.as_deref(),
        ClientLimits::UNLIMITED,
        &batchfleet_worker::client::user_agent(&worker_id),
        api_protocol,
    )
    .await?;
    let lease = match flags.store.store {
        StoreKind::Kubernetes => {
            let store = KubernetesStore::new(protocol_client.clone(), &flags.store.namespace);
            spawn_lease(store, id, &flags, &worker.runtime, renewed_tx, &stop)
        }
        StoreKind::Etcd => {
            let store = EtcdStore::connect(&flags.store.etcd_endpoints, &flags.store.etcd_prefix).await?;
            spawn_lease(store, id, &flags, &worker.runtime, renewed_tx, &stop)
        }
    };
    worker.health.in_fleet(renewed.clone());
    let config = SessionConfig {
        coordinators: flags.coordinators.clone(),
        worker_id: worker_id.clone(),
        address: worker.metrics_addr.to_string(),
        heartbeat: std::time::Duration::from_secs(1),
        transport: flags.transport.clone(),
        max_message_size: flags.max_message_size,
    };
    let sessions = tokio::spawn(session::run(
        config,
        worker.runtime.clone(),
        protocol_client,
        renewed,
        drained_tx,
        stop.clone(),
        worker.health.clone(),
    ));
    let code = tokio::select! {
        _ = worker.wait() => {
            tracing::error!("a controller task ended");
            ExitCode::FAILURE
        }
        _ = terminated() => {
            tracing::info!("asked to stop: draining first");
            ask_coordinator(&flags.coordinators, &flags.transport, &worker_id, OwnDrain::Start).await;
            if tokio::time::timeout(flags.drain_timeout, drained.wait_for(|d| *d)).await.is_err() {
                tracing::warn!(timeout = ?flags.drain_timeout, "not drained in time; stopping every shard");
            }
            ExitCode::SUCCESS
        }
    };
    lease::fence(&worker.runtime);
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), lease).await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), sessions).await;
    // A drain lasts as long as the drained process. The coordinator sees this one end when a
    // lease listing (every 200 ms) finds its record gone, and the next process under this id (a
    // StatefulSet's next pod) may create the record again before any listing did: the drain
    // would then outlive the process, and the new one would get no shard. So once its session
    // and lease are gone, a drained process ends its own drain.
    if *drained.borrow() {
        ask_coordinator(&flags.coordinators, &flags.transport, &worker_id, OwnDrain::End).await;
    }
    Ok(code)
}

fn spawn_lease<S: batchfleet_store::CoordinationStore + 'static>(
    store: S,
    id: batchfleet_store::ids::WorkerId,
    flags: &FleetFlags,
    runtime: &std::sync::Arc<batchfleet_worker::runtime::protocol::ShardRuntime>,
    renewed: tokio::sync::watch::Sender<lease::LeaseState>,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let store = std::sync::Arc::new(store);
    tokio::spawn(lease::keep(store, id, flags.lease_duration, runtime.clone(), renewed, stop.clone()))
}

/// Asks whichever coordinator leads to drain this worker.
/// What a worker asks about its own drain: to be drained (on SIGTERM), or, drained and exiting,
/// that its drain end with it.
#[derive(Debug, Clone, Copy)]
enum OwnDrain {
    Start,
    End,
}

async fn ask_coordinator(coordinators: &[String], transport: &ClientTransport, worker: &str, ask: OwnDrain) {
    use batchfleet_proto::v1::fleet_admin_client::FleetAdminClient;
    for url in coordinators {
        let Ok(endpoint) = tonic::transport::Endpoint::from_shared(url.clone()) else { continue };
        let Ok(channel) =
            transport.connect(endpoint.connect_timeout(std::time::Duration::from_secs(2))).await
        else {
            continue;
        };
        let request = batchfleet_proto::v1::WorkerRequest { worker: worker.to_string() };
        let mut rpc = FleetAdminClient::new(channel);
        let answer = match ask {
            OwnDrain::Start => rpc.drain(request).await,
            OwnDrain::End => rpc.undrain(request).await,
        };
        match answer {
            Ok(_) => return,
            Err(e) => {
                tracing::debug!(coordinator = %url, error = %e, ?ask, "request about the own drain refused")
            }
        }
    }
    tracing::warn!(?ask, "no coordinator accepted the request about the worker's own drain");
}

async fn terminated() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
