//! `loadtest`: the sim cluster as a process, the quickstart, and (later) load scenarios.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use batchfleet_sim::{SimCluster, SimConfig};
use batchfleet_telemetry::LogFormat;
use clap::{Parser, Subcommand};

/// The allocator the fleet's binaries use: glibc's malloc contends across threads under the
/// sim's and workers' allocation-heavy JSON work.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bench_cron;
mod bench_fleet;
mod bench_jobs;
mod bench_moves;
mod bench_placement;
mod bench_podgc;
mod bench_sim;
mod chaos;
mod fleet_processes;
mod fleet_tls;
mod light_workers;
mod plot;
mod proc_stat;
mod quickstart;
mod run;
mod scenario;
mod splitmix;
mod stop_signal;

#[derive(Parser, Debug)]
#[command(name = "loadtest", version, about = "batchfleet load-test harness and sim cluster")]
struct Cli {
    /// How the log is written (to stderr, or the run's log file): text, or one JSON object per line.
    #[arg(long, env = "FLEET_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the sim cluster alone: a Kubernetes API emulator with scheduler, kubelet and nodes.
    Sim(SimArgs),
    /// The quickstart: the sim cluster, a coordinator and three workers as processes (or one
    /// standalone worker), about a minute of mixed work across several namespaces while a
    /// worker is drained and another killed, then a report and the kubectl and fleetctl commands
    /// to look around. Exits 0 when every Job ended as expected and every audit passed.
    Up(UpArgs),
    /// Run a load scenario (a YAML file, or a name in loadtest/scenarios/): the sim (or any
    /// cluster through --kubeconfig), the fleet as processes, the workload and faults, then
    /// audits from the server's side and a report; `run scaling` runs the scaling curve, and `run
    /// fleet-scale` M light workers against two coordinators (its own flags below).
    /// Exits 0 only when every audit and goal passed, 2 on a bad scenario file.
    Run(run::RunArgs),
    /// Benchmark the sim cluster with kube-rs clients over loopback.
    BenchSim(bench_sim::BenchArgs),
    /// Benchmark the Job controller: its decision core, and pod lifecycles/s end to end.
    BenchJobs(bench_jobs::BenchJobsArgs),
    /// Benchmark CronJob creation skew and TTL-after-finished deletion lag.
    BenchCron(bench_cron::BenchCronArgs),
    /// Benchmark the gap of an in-process shard move between two workers, under load.
    BenchMoves(bench_moves::BenchMovesArgs),
    /// Benchmark the coordinator's shard placement: balance, moves per join and leave, speed.
    BenchPlacement(bench_placement::BenchPlacementArgs),
    /// The fleet as processes under load: graceful moves, a drain, a killed worker, a killed leader.
    BenchFleet(bench_fleet::BenchFleetArgs),
    /// Benchmark the coordinator's PodGC cache and passes: bytes per pod, memory, pass time.
    BenchPodgc(bench_podgc::BenchPodgcArgs),
}

#[derive(clap::Args, Debug)]
struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Where to write a kubeconfig for kubectl and kube-rs.
    #[arg(long, default_value = "target/sim/kubeconfig")]
    kubeconfig: PathBuf,
    /// Number of simulated nodes.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Run without scheduler and kubelet: pods stay Pending.
    #[arg(long)]
    no_kubelet: bool,
    /// Write one audit.k8s.io/v1 Event per request to this file, as kube-apiserver's log backend
    /// does at level Metadata.
    #[arg(long, value_name = "PATH")]
    audit_log: Option<PathBuf>,
    /// How long an Event outlives its last write, as kube-apiserver's `--event-ttl`.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    event_ttl: std::time::Duration,
}

#[derive(clap::Args, Debug)]
struct UpArgs {
    #[command(flatten)]
    sim: SimArgs,
    /// Run one `fleet-worker --standalone` that owns every shard instead of the fleet (no
    /// coordinator, no fleetctl).
    #[arg(long)]
    standalone: bool,
    /// Run the fleet's gRPC over TLS with client certificates: a throwaway CA, the
    /// coordinator's, each worker's and fleetctl's certificates are written next to the
    /// kubeconfig (`tls/`), and the fleetctl command line printed with its flags.
    #[arg(long, conflicts_with = "standalone")]
    tls: bool,
    /// How long the work runs (the drain comes at a third of it, the kill at half); the Jobs
    /// then get up to 3 minutes to finish before the report.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    duration: std::time::Duration,
    /// Leave the sim and the fleet running after the report, until Ctrl-C, to look around.
    #[arg(long)]
    keep: bool,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Run(args) => return run_scenario(args, cli.log_format),
        Command::Up(args) => return up(args, cli.log_format),
        _ => {}
    }
    batchfleet_telemetry::init_logging(cli.log_format, "info,hyper=warn");
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("loadtest: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Sim(args) => run_sim(args, None).await.map(|_| ()),
            // Dispatched above, before the tracing set-up that they do differently.
            Command::Run(_) | Command::Up(_) => Err(anyhow::anyhow!("dispatched before")),
            Command::BenchSim(args) => bench_sim::run(args).await,
            Command::BenchJobs(args) => bench_jobs::run(args).await,
            Command::BenchCron(args) => bench_cron::run(args).await,
            Command::BenchMoves(args) => bench_moves::run(args).await,
            Command::BenchPlacement(args) => bench_placement::run(args).await,
            Command::BenchFleet(args) => bench_fleet::run(args).await,
            Command::BenchPodgc(args) => bench_podgc::run(args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loadtest: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `loadtest run`: exit 2 on a bad scenario, 1 when the run could not be made or an audit or
/// goal failed, 0 when all passed; the harness's own log goes to the run's folder, so that it
/// does not cut into the progress bars.
fn run_scenario(args: run::RunArgs, log_format: LogFormat) -> ExitCode {
    if args.scenario == run::fleet_scale::NAME {
        return run_fleet_scale(args, log_format);
    }
    if let Some(exit) = run_own_kind(&args, log_format) {
        return exit;
    }
    let (name, scenario) = match run::load(&args) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("loadtest: {e}");
            return ExitCode::from(2);
        }
    };
    let out = args.out.unwrap_or_else(|| run::default_out(&name));
    if let Err(e) = log_to_file(&out.join("loadtest.log"), log_format) {
        eprintln!("loadtest: creating {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    until_stopped(run::run(&name, scenario, &out, &args.target, args.replay), &out)
}

/// `loadtest run fleet-scale`: not a scenario file but light workers against the coordinators
/// (`run/fleet_scale.rs`); exit codes as for any run.
fn run_fleet_scale(args: run::RunArgs, log_format: LogFormat) -> ExitCode {
    if args.target.kubeconfig.is_some() || args.target.fleet != run::FleetChoice::Scenario || args.replay {
        eprintln!(
            "loadtest: {}: starts its own sim and coordinators; drop --kubeconfig, --fleet and --replay",
            run::fleet_scale::NAME
        );
        return ExitCode::from(2);
    }
    let out = args.out.clone().unwrap_or_else(|| run::default_out(run::fleet_scale::NAME));
    if let Err(e) = log_to_file(&out.join("loadtest.log"), log_format) {
        eprintln!("loadtest: creating {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    until_stopped(run::fleet_scale::run(&args.fleet_scale, args.workers, args.store, &out), &out)
}

/// `loadtest run <kind>` for a scenario of a kind of its own (`run/<kind>.rs`, found by the
/// file's `kind`); `None` for a Job workload. Each starts its own sim and processes, so the
/// flags that aim a run at a cluster or a fleet are refused (exit 2); otherwise exit codes as
/// for any run.
fn run_own_kind(args: &run::RunArgs, log_format: LogFormat) -> Option<ExitCode> {
    use run::{
        cron_outage, finalizer_leak, indexed_large_job, noisy_neighbour, podgc_policy, quota_deadlock,
        ttl_wave,
    };
    let kind = [
        podgc_policy::KIND,
        noisy_neighbour::KIND,
        quota_deadlock::KIND,
        finalizer_leak::KIND,
        ttl_wave::KIND,
        cron_outage::KIND,
        indexed_large_job::KIND,
    ]
    .into_iter()
    .find(|kind| run::own_kind::is_of_kind(&args.scenario, kind))?;
    if args.target.kubeconfig.is_some()
        || args.target.fleet != run::FleetChoice::Scenario
        || args.replay
        || args.workers.is_some()
        || args.store.is_some()
        || args.fleet_scale.any()
    {
        eprintln!(
            "loadtest: {}: starts its own sim and processes; drop --kubeconfig, --fleet, --replay, --workers, --store and the fleet-scale flags",
            args.scenario
        );
        return Some(ExitCode::from(2));
    }
    let out = args.out.clone().unwrap_or_else(|| run::default_out(kind));
    let name = args.scenario.as_str();
    type Run<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<(bool, PathBuf)>> + 'a>>;
    let loaded: Result<Run<'_>, String> = match kind {
        podgc_policy::KIND => {
            podgc_policy::load(name).map(|s| Box::pin(podgc_policy::run(kind, s, &out)) as Run<'_>)
        }
        noisy_neighbour::KIND => {
            noisy_neighbour::load(name).map(|s| Box::pin(noisy_neighbour::run(kind, s, &out)) as Run<'_>)
        }
        quota_deadlock::KIND => {
            quota_deadlock::load(name).map(|s| Box::pin(quota_deadlock::run(kind, s, &out)) as Run<'_>)
        }
        finalizer_leak::KIND => {
            finalizer_leak::load(name).map(|s| Box::pin(finalizer_leak::run(kind, s, &out)) as Run<'_>)
        }
        ttl_wave::KIND => ttl_wave::load(name).map(|s| Box::pin(ttl_wave::run(kind, s, &out)) as Run<'_>),
        indexed_large_job::KIND => {
            indexed_large_job::load(name).map(|s| Box::pin(indexed_large_job::run(kind, s, &out)) as Run<'_>)
        }
        _ => cron_outage::load(name).map(|s| Box::pin(cron_outage::run(kind, s, &out)) as Run<'_>),
    };
    let run = match loaded {
        Ok(run) => run,
        Err(e) => {
            eprintln!("loadtest: {e}");
            return Some(ExitCode::from(2));
        }
    };
    if let Err(e) = log_to_file(&out.join("loadtest.log"), log_format) {
        eprintln!("loadtest: creating {}: {e}", out.display());
        return Some(ExitCode::FAILURE);
    }
    Some(until_stopped(run, &out))
}

/// Runs `run` to its report, or until Ctrl-C or SIGTERM drops it, and with it every process it
/// started (killed on drop); prints the report's path and answers the run's exit code.
fn until_stopped(
    run: impl std::future::Future<Output = anyhow::Result<(bool, std::path::PathBuf)>>,
    out: &std::path::Path,
) -> ExitCode {
    let result = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(async {
            tokio::select! {
                result = run => result,
                signal = stop_signal::stop_requested() => Err(match signal {
                    Ok(name) => anyhow::anyhow!("stopped by {name}"),
                    Err(e) => anyhow::Error::from(e).context("waiting for a stop signal"),
                }),
            }
        }),
        Err(e) => Err(anyhow::Error::from(e).context("starting the runtime")),
    };
    match result {
        Ok((passed, report)) => {
            println!("{}", report.display());
            if passed { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "the run failed");
            eprintln!("loadtest: {e:#} (log: {})", out.join("loadtest.log").display());
            ExitCode::FAILURE
        }
    }
}

/// Sends this process's log lines to `path` (its folder created), so that they do not cut into
/// the progress bars.
fn log_to_file(path: &std::path::Path, format: LogFormat) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let log = std::fs::File::create(path)?;
    batchfleet_telemetry::init_logging_to(
        format,
        "info,hyper=warn,kube=warn",
        std::sync::Mutex::new(log),
        false,
    );
    Ok(())
}

/// `loadtest up`: its own log goes to `loadtest-up.log` beside the kubeconfig, so that it does
/// not cut into the progress bars; exit 0 when every Job ended as expected and every audit
/// passed, 1 otherwise.
fn up(mut args: UpArgs, log_format: LogFormat) -> ExitCode {
    let kubeconfig = std::path::absolute(&args.sim.kubeconfig).unwrap_or(args.sim.kubeconfig.clone());
    let out = kubeconfig.parent().map(PathBuf::from).unwrap_or_default();
    let log_path = out.join("loadtest-up.log");
    if let Err(e) = log_to_file(&log_path, log_format) {
        eprintln!("loadtest: creating {}: {e}", log_path.display());
        return ExitCode::FAILURE;
    }
    let kubectl = quickstart::kubectl_or_install(&out.join("setup.log"));
    let audit_log = args.sim.audit_log.get_or_insert_with(|| out.join("audit.log")).clone();
    let options = quickstart::UpOptions {
        mode: if args.standalone {
            quickstart::Mode::Standalone
        } else {
            quickstart::Mode::Fleet { tls: args.tls }
        },
        duration: args.duration,
        keep: args.keep,
        kubectl,
        out,
        audit_log,
    };
    let result = match tokio::runtime::Runtime::new() {
        // Ctrl-C or SIGTERM drops everything, and with it every process `up` started (killed on
        // drop).
        Ok(runtime) => runtime.block_on(async {
            tokio::select! {
                // `up --keep` waits for Ctrl-C itself, and answers whether it passed.
                biased;
                result = run_sim(args.sim, Some(options)) => result,
                r = stop_signal::stop_requested() => {
                    println!("stopping");
                    r.map(|_| true).context("waiting for Ctrl-C")
                }
            }
        }),
        Err(e) => Err(anyhow::Error::from(e).context("starting the runtime")),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "loadtest up failed");
            eprintln!("loadtest: {e:#} (log: {})", log_path.display());
            ExitCode::FAILURE
        }
    }
}

/// The sim cluster until Ctrl-C, or with the quickstart on it when `quickstart` has its
/// options; answers whether the quickstart passed.
async fn run_sim(args: SimArgs, quickstart: Option<quickstart::UpOptions>) -> anyhow::Result<bool> {
    let config = SimConfig {
        listen: args.listen,
        nodes: args.nodes,
        kubelet: !args.no_kubelet,
        audit_log: args.audit_log.clone(),
        event_ttl: args.event_ttl,
        ..SimConfig::default()
    };
    let sim = SimCluster::start(config)
        .await
        .with_context(|| format!("starting the sim cluster on {}", args.listen))?;
    sim.write_kubeconfig(&args.kubeconfig)
        .with_context(|| format!("writing {}", args.kubeconfig.display()))?;
    let kubeconfig = std::fs::canonicalize(&args.kubeconfig).unwrap_or(args.kubeconfig.clone());
    println!("sim cluster serving at {} with {} nodes", sim.url(), args.nodes);
    println!("kubeconfig: {}", kubeconfig.display());
    if let Some(path) = &args.audit_log {
        println!("audit log: {}", path.display());
    }
    if let Some(options) = quickstart {
        return quickstart::run(&sim, &kubeconfig, options).await;
    }
    println!();
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  kubectl get nodes");
    println!("Press Ctrl-C to stop.");
    stop_signal::stop_requested().await.context("waiting for Ctrl-C")?;
    println!("stopping");
    Ok(true)
}
