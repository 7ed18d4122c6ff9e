//! `fleet-coordinator`: the leader-elected coordinator of a batchfleet. It runs the election on
//! the coordination store and, while leading, the fleet (worker sessions, the shard map and its
//! moves, the admin API on `--listen`) and the cluster-wide PodGC.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use batchfleet_coordinator::authz::Authorizer;
use batchfleet_coordinator::fleet::FleetShared;
use batchfleet_coordinator::fleet::admin_service::AdminService;
use batchfleet_coordinator::fleet::controller::{self, ControllerConfig};
use batchfleet_coordinator::fleet::metrics::FleetMetrics;
use batchfleet_coordinator::fleet::session_service::SessionService;
use batchfleet_coordinator::fleet::state::FleetConfig;
use batchfleet_coordinator::grpc_metrics::{GrpcMetricsLayer, GrpcServerMetrics};
use batchfleet_coordinator::kube_client;
use batchfleet_coordinator::leader::{self, ElectionTiming, Leadership};
use batchfleet_coordinator::metrics_endpoint;
use batchfleet_coordinator::podgc::controller::{self as podgc, ConfigMapRef, PodGcConfig, PodGcMetrics};
use batchfleet_coordinator::podgc::policy::Order;
use batchfleet_coordinator::store::etcd::EtcdStore;
use batchfleet_coordinator::store::kubernetes::KubernetesStore;
use batchfleet_coordinator::store::{Candidate, CoordinationStore};
use batchfleet_proto::v1::fleet_admin_server::FleetAdminServer;
use batchfleet_proto::v1::fleet_session_server::FleetSessionServer;
use batchfleet_store::cli::{StoreArgs, StoreKind};
use batchfleet_telemetry::LogFormat;
use batchfleet_tls::cli::{TlsArgs, Transport};
use batchfleet_tls::server::ReloadingServerConfig;
use clap::Parser;
use futures::FutureExt;
use tokio::sync::watch;

/// Leader-elected coordinator of a batchfleet: while it leads, it places namespace shards on the
/// workers and moves them by the hand-over, serves the admin API, and runs the cluster-wide PodGC.
#[derive(Parser, Debug)]
#[command(name = "fleet-coordinator", version)]
struct Args {
    /// kubeconfig of the API server (default: $KUBECONFIG, then in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// gRPC listen address for worker sessions and the admin API (served with the fleet).
    #[arg(long, env = "FLEET_LISTEN", default_value = "0.0.0.0:7400")]
    listen: SocketAddr,
    /// TLS of --listen: the coordinator's certificate, and the CA that workers' and operators'
    /// client certificates must chain to (docs/security.md).
    #[command(flatten)]
    tls: TlsArgs,
    /// YAML file of the certificate identities (Common Names) allowed to read or change the
    /// fleet through the admin API, and to register as any worker (docs/security.md); re-read
    /// when it changes. Required with TLS.
    #[arg(long, env = "FLEET_ADMIN_POLICY", value_name = "FILE")]
    admin_policy: Option<PathBuf>,
    /// This coordinator's identity in leader election (default: the hostname).
    #[arg(long, env = "FLEET_COORDINATOR_ID")]
    coordinator_id: Option<String>,
    /// The URL workers and fleetctl reach this coordinator at, which a standby hands out as the
    /// leader's (default: https:// (http:// with --insecure) and --listen, or $POD_IP, else the
    /// hostname, when --listen binds every interface).
    #[arg(long, env = "FLEET_ADVERTISE_ADDRESS")]
    advertise_address: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
    /// Where to serve /metrics, /readyz (200 while the process serves: a standby is ready) and
    /// /livez (/healthz; 503 once the leader election loop has stalled, for the liveness probe).
    #[arg(long, env = "FLEET_METRICS_ADDR", default_value = "0.0.0.0:9400")]
    metrics_addr: SocketAddr,
    /// How long a leader's lease lasts without renewal.
    #[arg(long, env = "FLEET_LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    leader_elect_lease_duration: Duration,
    /// How long a leader keeps trying to renew before it steps down (< the lease duration).
    #[arg(long, env = "FLEET_LEADER_ELECT_RENEW_DEADLINE", default_value = "10s", value_parser = humantime::parse_duration)]
    leader_elect_renew_deadline: Duration,
    /// How often candidates try and the leader renews.
    #[arg(long, env = "FLEET_LEADER_ELECT_RETRY_PERIOD", default_value = "2s", value_parser = humantime::parse_duration)]
    leader_elect_retry_period: Duration,
    /// Average requests per second to the API server (kube-controller-manager's default); 0 for
    /// no limit.
    #[arg(long, env = "FLEET_KUBE_API_QPS", default_value_t = kube_client::ClientLimits::DEFAULT.qps)]
    kube_api_qps: f64,
    /// Requests allowed in a burst above the average.
    #[arg(long, env = "FLEET_KUBE_API_BURST", default_value_t = kube_client::ClientLimits::DEFAULT.burst)]
    kube_api_burst: u32,
    /// API requests in flight at once (0: no cap); the rest wait their turn in arrival order.
    #[arg(long, env = "FLEET_KUBE_API_MAX_IN_FLIGHT", default_value_t = kube_client::ClientLimits::DEFAULT.max_in_flight)]
    kube_api_max_in_flight: usize,
    /// Terminated pods kept before PodGC deletes the oldest; 0 turns that pass off.
    #[arg(long, env = "FLEET_TERMINATED_POD_GC_THRESHOLD", default_value_t = 12_500)]
    terminated_pod_gc_threshold: usize,
    /// S, the number of shards of a fleet created now (a power of two); a stored map keeps its own.
    #[arg(long, env = "FLEET_SHARDS", default_value_t = 256, value_parser = parse_shard_count)]
    shards: u32,
    /// How long past a worker's lease expiry its shards stay its own before they move
    /// [default: 1s]
    #[arg(long, env = "FLEET_WORKER_LEASE_MARGIN", value_parser = humantime::parse_duration)]
    worker_lease_margin: Option<Duration>,
    /// How long a worker may take to warm a shard it is moving to before the move is cancelled
    /// (the old owner keeps it) and the shard placed again.
    #[arg(long, env = "FLEET_PREPARE_TIMEOUT", default_value = "2m", value_parser = humantime::parse_duration)]
    prepare_timeout: Duration,
    /// Commands a worker may leave unread on its session's stream; past it the session is cut
    /// and the worker registers again (fleet_session_command_overflows_total counts it).
    #[arg(long, env = "FLEET_SESSION_COMMAND_QUEUE", default_value_t = batchfleet_coordinator::fleet::hub::DEFAULT_COMMAND_QUEUE,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    session_command_queue: usize,
    /// The largest gRPC message the coordinator reads or writes, in bytes (tonic's default); a
    /// larger one ends its call with OUT_OF_RANGE (grpc_server_handled_total counts it).
    #[arg(long, env = "FLEET_GRPC_MAX_MESSAGE_SIZE", default_value_t = batchfleet_coordinator::grpc_metrics::DEFAULT_MAX_MESSAGE_SIZE)]
    grpc_max_message_size: usize,
    /// How often PodGC runs.
    #[arg(long, env = "FLEET_PODGC_PERIOD", default_value = "20s", value_parser = humantime::parse_duration)]
    podgc_period: Duration,
    /// How long a node missing from the cache waits before PodGC looks it up.
    #[arg(long, env = "FLEET_PODGC_QUARANTINE", default_value = "40s", value_parser = humantime::parse_duration)]
    podgc_quarantine: Duration,
    /// Terminated pods that terminated longer ago than this (their last container's finish,
    /// docs/beyond-upstream.md) are deleted whatever the thresholds (default: no age limit).
    #[arg(long, env = "FLEET_PODGC_MAX_AGE", value_parser = parse_positive_duration)]
    podgc_max_age: Option<Duration>,
    /// Terminated pods kept per namespace before PodGC deletes that namespace's oldest; 0: no
    /// per-namespace cap. Beside --terminated-pod-gc-threshold, which counts what is left.
    #[arg(long, env = "FLEET_PODGC_NAMESPACE_THRESHOLD", default_value_t = 0)]
    podgc_namespace_threshold: usize,
    /// A ConfigMap (NAMESPACE/NAME) of per-namespace caps, `<namespace>: "<cap>"`, read every
    /// pass; a cap overrides --podgc-namespace-threshold for its namespace (0: no cap).
    #[arg(long, env = "FLEET_PODGC_NAMESPACE_CAPS", value_name = "NAMESPACE/NAME")]
    podgc_namespace_caps: Option<ConfigMapRef>,
    /// The order terminated pods are deleted in: upstream (evicted, then oldest) or
    /// succeeded-first (Succeeded pods before Failed ones, upstream's order within each).
    #[arg(long, env = "FLEET_PODGC_ORDER", value_enum, default_value_t = Order::Upstream)]
    podgc_order: Order,
    /// Leave out pods deleted with grace period 0 that only finalizers keep: they are not
    /// deleted again every pass nor counted towards the thresholds (upstream does both).
    #[arg(long, env = "FLEET_PODGC_SKIP_FINALIZER_HELD", default_value_t = false, action = clap::ArgAction::Set)]
    podgc_skip_finalizer_held: bool,
    /// Controllers the leader runs besides the fleet, as kube-controller-manager's flag: `podgc`
    /// (or `*`) runs PodGC, `-podgc` leaves it to kube-controller-manager (beside it, see
    /// docs/migration.md).
    #[arg(long, env = "FLEET_CONTROLLERS", default_value = "*", value_parser = parse_controllers, action = clap::ArgAction::Set, allow_hyphen_values = true)]
    controllers: bool,
    /// How the log on stderr is written: text, or one JSON object per line (docs/operations.md).
    #[arg(long, env = "FLEET_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// Whether `--controllers` runs PodGC: `*` or `podgc` does, `-podgc` (after them) does not.
fn parse_controllers(s: &str) -> Result<bool, String> {
    let mut podgc = false;
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item {
            "*" | "podgc" => podgc = true,
            "-podgc" => podgc = false,
            other => return Err(format!("unknown controller {other:?}: expected podgc, -podgc or *")),
        }
    }
    Ok(podgc)
}

fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("must be more than 0 (leave the flag out for no age limit)".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_shard_count(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if n.is_power_of_two() => Ok(n),
        _ => Err(format!("{s:?} is not a power of two such as 256")),
    }
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
    let timing = ElectionTiming {
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
    };
    if let Err(e) = timing.validate() {
        eprintln!("fleet-coordinator: {e}");
        return ExitCode::from(2);
    }
    let log_format = args.log_format;
    batchfleet_telemetry::init_logging(log_format, "info,hyper=warn");
    let exit = |message: &dyn std::fmt::Display| {
        batchfleet_telemetry::log_exit(log_format, "fleet-coordinator", message)
    };
    let grpc = match GrpcSecurity::from_args(&args) {
        Ok(g) => g,
        Err(e) => {
            exit(&e);
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            exit(&format_args!("cannot start the runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args, timing, grpc)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            exit(&format_args!("{e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// How --listen is served and counted.
struct GrpcServing<'a> {
    security: &'a GrpcSecurity,
    metrics: GrpcServerMetrics,
}

/// How --listen is served: plaintext or TLS, and who may call what.
struct GrpcSecurity {
    tls: Option<Arc<ReloadingServerConfig>>,
    authorizer: Authorizer,
}

impl GrpcSecurity {
    /// Reads the certificates and the policy once, so a mistake in them stops the start.
    fn from_args(args: &Args) -> Result<Self, String> {
        match args.tls.transport()? {
            Transport::Insecure => {
                if args.admin_policy.is_some() {
                    return Err("--admin-policy needs TLS: under --insecure no caller is identified".into());
                }
                tracing::warn!(
                    "--insecure: worker sessions and the admin API are plaintext and unauthenticated"
                );
                Ok(Self { tls: None, authorizer: Authorizer::Insecure })
            }
            Transport::Tls(files) => {
                let policy = args.admin_policy.clone().ok_or(
                    "TLS needs --admin-policy FILE: the identities allowed to use the admin API (docs/security.md)",
                )?;
                let authorizer =
                    Authorizer::with_policy_file(policy).map_err(|e| format!("--admin-policy {e}"))?;
                let config =
                    batchfleet_tls::server::reloading_config(files).map_err(|e| format!("TLS: {e}"))?;
                Ok(Self { tls: Some(Arc::new(config)), authorizer })
            }
        }
    }
}

async fn run(args: Args, timing: ElectionTiming, grpc: GrpcSecurity) -> anyhow::Result<()> {
    let id = match args.coordinator_id.clone() {
        Some(id) => id,
        None => hostname().context("no --coordinator-id given and the hostname is unreadable")?,
    };
    let config = kube_client::load_config(args.kubeconfig.as_deref()).await?;
    let limit = kube_client::ClientLimits {
        qps: args.kube_api_qps,
        burst: args.kube_api_burst,
        max_in_flight: args.kube_api_max_in_flight,
    };
    // PodGC's client carries the rate limit; the coordination store (leader election, the shard
    // map, the workers' leases) has a client of its own, as kube-controller-manager's leader
    // election does, so a PodGC pass of thousands of deletes cannot starve the leader's renewals.
    let store_client = kube_client::from_config(
        config.clone(),
        &kube_client::user_agent(&id),
        kube_client::ClientLimits::UNLIMITED,
    )?;
    let client = kube_client::from_config(config, &kube_client::user_agent(&id), limit)?;
    let registry = prometheus::Registry::new();
    kube_client::ClientMetrics::global().register(&registry)?;
    batchfleet_telemetry::register_process_metrics(&registry)?;
    let liveness = metrics_endpoint::Liveness::default();
    let (metrics_bound, serve_metrics) =
        metrics_endpoint::bind(args.metrics_addr, registry.clone(), liveness.clone())
            .await
            .with_context(|| format!("binding --metrics-addr {}", args.metrics_addr))?;
    tokio::spawn(serve_metrics);
    tracing::info!(%id, store = ?args.store.store, metrics = %metrics_bound, "fleet-coordinator starting");

    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down: stepping down as leader");
        let _ = stop_tx.send(true);
    });
    let fleet_config = ControllerConfig {
        shard_count: args.shards,
        lease_margin: args.worker_lease_margin.unwrap_or(args.store.store.default_lease_margin()),
        period: Duration::from_millis(200),
        fleet: FleetConfig { prepare_timeout: args.prepare_timeout, ..FleetConfig::default() },
        metrics: Some(FleetMetrics::register(&registry)?),
    };
    let serving = GrpcServing { security: &grpc, metrics: GrpcServerMetrics::register(&registry)? };
    let leadership = match args.store.store {
        StoreKind::Kubernetes => {
            let store = Arc::new(KubernetesStore::new(store_client, &args.store.namespace));
            start_fleet(store, &id, timing, fleet_config, &args, &serving, &stop).await?
        }
        StoreKind::Etcd => {
            let store = Arc::new(
                EtcdStore::connect(&args.store.etcd_endpoints, &args.store.etcd_prefix).await.with_context(
                    || format!("connecting to etcd at {}", args.store.etcd_endpoints.join(",")),
                )?,
            );
            start_fleet(store, &id, timing, fleet_config, &args, &serving, &stop).await?
        }
    };
    let (leadership, election) = leadership;
    // An attempt takes at most two retry periods and the loop sleeps at most one between them.
    liveness.watch_election(leadership.clone(), timing.lease_duration * 2 + timing.retry_period * 3);
    metrics_endpoint::register_leader_gauge(
        &registry,
        &leader_lease_name(&args.store),
        leadership.subscribe(),
    )?;
    let podgc_config = PodGcConfig {
        terminated_pod_threshold: args.terminated_pod_gc_threshold,
        period: args.podgc_period,
        quarantine: args.podgc_quarantine,
        max_age: args.podgc_max_age,
        namespace_threshold: args.podgc_namespace_threshold,
        namespace_caps: args.podgc_namespace_caps.clone(),
        order: args.podgc_order,
        skip_finalizer_held: args.podgc_skip_finalizer_held,
        ..PodGcConfig::default()
    };
    let metrics = PodGcMetrics::register(&registry)?;
    let gc = if args.controllers {
        tokio::spawn(podgc::run(client, podgc_config, metrics, leadership, stop.clone()))
    } else {
        tracing::info!("PodGC is off (--controllers -podgc)");
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
    };
    let _ = gc.await;
    // The election resigns the lease on the way out, so a standby takes over at once.
    let _ = election.await;
    Ok(())
}

/// Starts the election, the fleet controller and the gRPC server (sessions and admin) on one
/// store; returns the leadership handle and the election's task.
async fn start_fleet<S: CoordinationStore + 'static>(
    store: Arc<S>,
    id: &str,
    timing: ElectionTiming,
    config: ControllerConfig,
    args: &Args,
    serving: &GrpcServing<'_>,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<(Leadership, tokio::task::JoinHandle<()>)> {
    let grpc = serving.security;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding --listen {}", args.listen))?;
    let local = listener.local_addr()?;
    let scheme = if grpc.tls.is_some() { "https" } else { "http" };
    let address = args.advertise_address.clone().unwrap_or_else(|| default_advertise_address(scheme, local));
    tracing::info!(listen = %local, advertise = %address, "serving the fleet's sessions and admin API");
    let candidate = Candidate { id: id.to_string(), address };
    let (leadership, election) = leader::start(store.clone(), candidate, timing, stop.clone());
    let shared = Arc::new(FleetShared::new(
        id.to_string(),
        store.kind(),
        leadership.clone(),
        config.lease_margin,
        args.session_command_queue,
    ));
    tokio::spawn(controller::run(store, shared.clone(), config, stop.clone()));
    let mut server_stop = stop.clone();
    // grpc.health.v1 for probes: the process serves; whether it leads is `fleetctl status`'s.
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter.set_serving::<FleetSessionServer<SessionService>>().await;
    health_reporter.set_serving::<FleetAdminServer<AdminService>>().await;
    // Server reflection, so that grpcurl lists and calls the services without .proto files.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(batchfleet_proto::v1::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let limit = args.grpc_max_message_size;
    let sessions = FleetSessionServer::new(SessionService::new(shared.clone(), grpc.authorizer.clone()))
        .max_decoding_message_size(limit)
        .max_encoding_message_size(limit);
    let admin = FleetAdminServer::new(AdminService::new(shared, grpc.authorizer.clone()))
        .max_decoding_message_size(limit)
        .max_encoding_message_size(limit);
    let router = tonic::transport::Server::builder()
        .layer(GrpcMetricsLayer::new(serving.metrics.clone()))
        .add_service(health)
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?)
        .add_service(sessions)
        .add_service(admin);
    let shutdown = async move {
        let _ = server_stop.wait_for(|s| *s).await;
    };
    let server = match &grpc.tls {
        None => router
            .serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(listener), shutdown)
            .boxed(),
        Some(config) => router
            .serve_with_incoming_shutdown(
                batchfleet_tls::server::incoming(listener, config.clone()),
                shutdown,
            )
            .boxed(),
    };
    tokio::spawn(async move {
        if let Err(e) = server.await {
            tracing::error!(error = %e, "the gRPC server stopped");
        }
    });
    Ok((leadership, election))
}

/// What the election holds: the Lease's name, or etcd's leadership key.
fn leader_lease_name(store: &StoreArgs) -> String {
    match store.store {
        StoreKind::Kubernetes => batchfleet_coordinator::store::kubernetes::LEADER_LEASE.to_string(),
        StoreKind::Etcd => format!("{}leader", store.etcd_prefix),
    }
}

fn default_advertise_address(scheme: &str, local: SocketAddr) -> String {
    if !local.ip().is_unspecified() {
        return format!("{scheme}://{local}");
    }
    let host = std::env::var("POD_IP").ok().filter(|ip| !ip.is_empty()).or_else(hostname);
    format!("{scheme}://{}:{}", host.unwrap_or_else(|| "localhost".into()), local.port())
}

fn hostname() -> Option<String> {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_string()))
        .filter(|h| !h.is_empty())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod podgc_flags {
    use clap::Parser;

    use super::*;

    #[test]
    fn the_defaults_are_upstreams_and_the_policy_flags_parse() {
        let a = Args::try_parse_from(["fleet-coordinator"]).unwrap();
        assert_eq!(
            (
                a.podgc_max_age,
                a.podgc_namespace_threshold,
                &a.podgc_namespace_caps,
                a.podgc_order,
                a.podgc_skip_finalizer_held
            ),
            (None, 0, &None, Order::Upstream, false)
        );
        let a = Args::try_parse_from([
            "fleet-coordinator",
            "--podgc-max-age=6h",
            "--podgc-namespace-threshold=100",
            "--podgc-namespace-caps=batchfleet/podgc-caps",
            "--podgc-order=succeeded-first",
            "--podgc-skip-finalizer-held=true",
        ])
        .unwrap();
        assert_eq!(a.podgc_max_age, Some(Duration::from_secs(6 * 3600)));
        assert_eq!(
            a.podgc_namespace_caps,
            Some(ConfigMapRef { namespace: "batchfleet".into(), name: "podgc-caps".into() })
        );
        assert_eq!((a.podgc_order, a.podgc_skip_finalizer_held), (Order::SucceededFirst, true));
        for bad in ["--podgc-max-age=0s", "--podgc-namespace-caps=just-a-name", "--podgc-order=newest"] {
            let e = Args::try_parse_from(["fleet-coordinator", bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
        }
    }
}

#[cfg(test)]
mod controllers_flag {
    use super::parse_controllers;

    #[test]
    fn podgc_runs_unless_the_flag_turns_it_off() {
        assert_eq!(parse_controllers("*"), Ok(true));
        assert_eq!(parse_controllers("podgc"), Ok(true));
        assert_eq!(parse_controllers("*,-podgc"), Ok(false));
        assert_eq!(parse_controllers("-podgc"), Ok(false));
        assert!(parse_controllers("job").is_err());
    }
}
