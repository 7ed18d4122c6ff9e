//! `fleet-worker`: reconciles Jobs (and, later, CronJobs and TTLs) for the shards it owns.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use batchfleet_worker::client::ClientLimits;
use batchfleet_worker::standalone::{self, WorkerOptions};
use clap::Parser;

/// glibc's malloc contends across threads under the worker's allocation-heavy JSON work.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Stateless batchfleet worker: reconciles Jobs, CronJobs and TTLs for the shards it owns.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Own every shard, with no coordinator.
    #[arg(long)]
    standalone: bool,
    /// kubeconfig of the API server (default: $KUBECONFIG, then in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Client-side API rate limit in queries per second (0: unlimited), as kube-controller-manager's --kube-api-qps.
    #[arg(long, default_value_t = 20.0)]
    kube_api_qps: f64,
    /// Burst of the client-side rate limit, as --kube-api-burst.
    #[arg(long, default_value_t = 30)]
    kube_api_burst: u32,
    /// API requests in flight at once (0: no cap); the rest wait their turn in arrival order.
    #[arg(long, default_value_t = batchfleet_worker::client::ClientLimits::DEFAULT.max_in_flight)]
    kube_api_max_in_flight: usize,
    /// Jobs synced concurrently, as --concurrent-job-syncs.
    #[arg(long, default_value_t = 5)]
    concurrent_job_syncs: usize,
    /// CronJobs synced concurrently, as --concurrent-cron-job-syncs.
    #[arg(long, default_value_t = 5)]
    concurrent_cron_job_syncs: usize,
    /// Finished Jobs checked for their TTL concurrently, as --concurrent-ttl-after-finished-syncs.
    #[arg(long, default_value_t = 5)]
    concurrent_ttl_after_finished_syncs: usize,
    /// Reconcile only Jobs whose spec.managedBy is this value (Jobs without the field count as
    /// kubernetes.io/job-controller). Set e.g. batchfleet.io/job-controller to run beside
    /// kube-controller-manager and move namespaces over one by one.
    #[arg(long, env = "FLEET_JOB_MANAGED_BY", default_value = "kubernetes.io/job-controller")]
    job_managed_by: String,
    /// Controllers to run: job, cronjob, ttl-after-finished; `*` for all, `-name` to leave one
    /// to kube-controller-manager.
    #[arg(long, default_value = "*")]
    controllers: String,
    /// Where to serve /metrics and /healthz.
    #[arg(long, env = "FLEET_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// This worker's identity (default: the host name); it names the worker in the User-Agent
    /// of every API request: `fleet-worker/VERSION (ID)`.
    #[arg(long, env = "FLEET_WORKER_ID")]
    worker_id: Option<String>,
    /// S, the number of shards the key space is cut into (a power of two); standalone owns all.
    #[arg(long, default_value_t = 256)]
    shards: u32,
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
    if !args.standalone {
        eprintln!("fleet-worker: only --standalone is available until the coordinator protocol lands");
        return ExitCode::from(2);
    }
    if args.concurrent_job_syncs == 0
        || args.concurrent_cron_job_syncs == 0
        || args.concurrent_ttl_after_finished_syncs == 0
        || args.kube_api_qps < 0.0
    {
        eprintln!("fleet-worker: the --concurrent-* flags must be at least 1 and --kube-api-qps at least 0");
        return ExitCode::from(2);
    }
    let controllers = match args.controllers.parse() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fleet-worker: --controllers: {e}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
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
        job_managed_by: args.job_managed_by,
        metrics_addr: args.metrics_addr,
        worker_id,
        controllers,
        shards: args.shards,
        ..WorkerOptions::default()
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fleet-worker: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let mut worker = match standalone::start(opts).await {
            Ok(w) => w,
            Err(e) => {
                eprintln!("fleet-worker: {e}");
                return ExitCode::FAILURE;
            }
        };
        tokio::select! {
            _ = worker.wait() => {
                eprintln!("fleet-worker: a controller task ended");
                ExitCode::FAILURE
            }
            _ = tokio::signal::ctrl_c() => ExitCode::SUCCESS,
        }
    })
}
