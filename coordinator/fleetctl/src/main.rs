//! `fleetctl`: operator commands for a batchfleet.

use std::io::Write;
use std::process::ExitCode;

use batchfleet_cron::preview;
use batchfleet_telemetry::LogFormat;
use batchfleet_tls::cli::ClientTlsArgs;
use batchfleet_tls::client::ClientTransport;
use clap::{CommandFactory, Parser, Subcommand};

mod admin_client;
mod output;

use admin_client::{CommandError, with_leader};
use batchfleet_proto::v1::{
    RebalanceRequest, ShardRequest, ShardToWorkerRequest, ShardsRequest, StatusRequest, WorkerRequest,
    WorkersRequest,
};
use output::Format;

/// Operator commands for a batchfleet, against the coordinator's admin API.
#[derive(Parser, Debug)]
#[command(name = "fleetctl", version)]
struct Cli {
    /// Admin API addresses of the coordinators, comma-separated; the leader among them answers.
    #[arg(
        long,
        env = "FLEET_ADMIN",
        default_value = "http://127.0.0.1:7400",
        global = true,
        value_delimiter = ','
    )]
    admin: Vec<String>,
    /// TLS to the admin API: the operator's client certificate (its Common Name is the identity
    /// the coordinator's admin policy authorizes) and the fleet's CA.
    #[command(flatten)]
    tls: ClientTlsArgs,
    /// Output format.
    #[arg(
        short = 'o',
        long = "output",
        env = "FLEET_OUTPUT",
        value_enum,
        default_value = "table",
        global = true
    )]
    output: Format,
    /// How the log on stderr is written, when RUST_LOG turns it on: text, or one JSON object per line.
    #[arg(long, env = "FLEET_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The next fire times the CronJob controller would use for a schedule, one RFC3339 UTC time
    /// per line.
    Schedule {
        /// The CronJob's `spec.schedule`, e.g. "*/5 * * * *" or "@every 30s".
        #[arg(required_unless_present = "cronjob", conflicts_with = "cronjob")]
        schedule: Option<String>,
        /// Read the schedule and time zone from a CronJob as JSON (a file, or - for stdin:
        /// `kubectl get cronjob NAME -o json | fleetctl schedule --cronjob -`), and show the
        /// controller's batchfleet.io/next-schedule-time beside the preview.
        #[arg(long, value_name = "FILE")]
        cronjob: Option<String>,
        /// The CronJob's `spec.timeZone` (an IANA name).
        #[arg(long)]
        time_zone: Option<String>,
        /// Start after this time (RFC3339); default now.
        #[arg(long)]
        from: Option<String>,
        /// How many fire times to print.
        #[arg(long, default_value_t = 5)]
        count: usize,
    },
    /// The leader, the store, shard and worker counts, shards by state, moves in progress.
    Status,
    /// Every worker: state, shards, load, and when its lease expires.
    Workers,
    /// Every shard: owner, epoch, state, load, whether it is pinned.
    Shards,
    /// Move every shard off a worker by the hand-over, then let it exit.
    Drain { worker: String },
    /// Let a drained worker take shards again.
    Undrain { worker: String },
    /// Recompute the placement and make the moves it asks for.
    Rebalance {
        /// Print exactly the moves rebalance would make, and make none.
        #[arg(long)]
        dry_run: bool,
    },
    /// Move one shard to a worker now.
    Move { shard: u32, worker: String },
    /// Keep a shard on a worker (it moves there if it is elsewhere).
    Pin { shard: u32, worker: String },
    /// Let the placement decide a pinned shard's owner again.
    Unpin { shard: u32 },
    /// Print a shell completion script: `source <(fleetctl completion bash)`, or save it where
    /// the shell loads completions (see the README).
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
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
    // fleetctl's answers go to stdout and its errors are its own lines: the log of the libraries
    // it uses (gRPC, TLS) is off unless RUST_LOG asks for it.
    batchfleet_telemetry::init_logging(cli.log_format, "off");
    if let Command::Completion { shell } = cli.command {
        // Into a buffer first: clap_complete panics on a failed write, and `| head` closes the pipe.
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "fleetctl", &mut script);
        return match std::io::stdout().write_all(&script) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fleetctl: writing the completion script: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Command::Schedule { schedule, cronjob, time_zone, from, count } = &cli.command {
        return match cronjob {
            Some(file) => cronjob_schedule_command(file, from.as_deref(), *count),
            None => schedule_command(
                schedule.as_deref().unwrap_or_default(),
                time_zone.as_deref(),
                from.as_deref(),
                *count,
                None,
            ),
        };
    }
    let transport = match cli.tls.client_transport() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("fleetctl: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fleetctl: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(admin_command(&cli, &transport)) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fleetctl: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs an admin command against the leader; returns what to print.
async fn admin_command(cli: &Cli, transport: &ClientTransport) -> Result<String, CommandError> {
    let (admin, format) = (&cli.admin, cli.output);
    let worker = |w: &str| WorkerRequest { worker: w.to_string() };
    let to_worker = |shard: u32, w: &str| ShardToWorkerRequest { shard, worker: w.to_string() };
    Ok(match &cli.command {
        Command::Schedule { .. } | Command::Completion { .. } => String::new(),
        Command::Status => output::status(
            &with_leader(admin, transport, |mut c| async move { c.status(StatusRequest {}).await }).await?,
            format,
        ),
        Command::Workers => {
            let r = with_leader(admin, transport, |mut c| async move { c.workers(WorkersRequest {}).await })
                .await?;
            output::workers(&r.workers, format)
        }
        Command::Shards => {
            let r = with_leader(admin, transport, |mut c| async move { c.shards(ShardsRequest {}).await })
                .await?;
            output::shards(&r.shards, format)
        }
        Command::Drain { worker: w } => {
            let r = with_leader(admin, transport, |mut c| async move { c.drain(worker(w)).await }).await?;
            output::reply(&r.message, format)
        }
        Command::Undrain { worker: w } => {
            let r = with_leader(admin, transport, |mut c| async move { c.undrain(worker(w)).await }).await?;
            output::reply(&r.message, format)
        }
        Command::Rebalance { dry_run } => {
            let dry_run = *dry_run;
            let r = with_leader(admin, transport, |mut c| async move {
                c.rebalance(RebalanceRequest { dry_run }).await
            })
            .await?;
            output::moves(&r.moves, format)
        }
        Command::Move { shard, worker: w } => {
            let r =
                with_leader(admin, transport, |mut c| async move { c.r#move(to_worker(*shard, w)).await })
                    .await?;
            output::reply(&r.message, format)
        }
        Command::Pin { shard, worker: w } => {
            let r = with_leader(admin, transport, |mut c| async move { c.pin(to_worker(*shard, w)).await })
                .await?;
            output::reply(&r.message, format)
        }
        Command::Unpin { shard } => {
            let shard = *shard;
            let r =
                with_leader(admin, transport, |mut c| async move { c.unpin(ShardRequest { shard }).await })
                    .await?;
            output::reply(&r.message, format)
        }
    })
}

/// The annotation the CronJob controller keeps: the schedule's next time, RFC 3339 UTC.
const NEXT_SCHEDULE_TIME: &str = "batchfleet.io/next-schedule-time";

/// `fleetctl schedule --cronjob FILE`: the preview of a CronJob's schedule in its zone, then its
/// `batchfleet.io/next-schedule-time` as the controller wrote it (absent: the controller has not
/// synced it, or it will not run: suspended, or a schedule that does not load).
fn cronjob_schedule_command(file: &str, from: Option<&str>, count: usize) -> ExitCode {
    let text = if file == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map(|_| text)
    } else {
        std::fs::read_to_string(file)
    };
    let cronjob: serde_json::Value = match text
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            eprintln!("fleetctl: --cronjob {file}: not a CronJob as JSON: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(schedule) = cronjob.pointer("/spec/schedule").and_then(|v| v.as_str()) else {
        eprintln!("fleetctl: --cronjob {file}: no spec.schedule (is it `kubectl get cronjob NAME -o json`?)");
        return ExitCode::from(2);
    };
    let time_zone = cronjob.pointer("/spec/timeZone").and_then(|v| v.as_str());
    let next = cronjob
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(NEXT_SCHEDULE_TIME))
        .and_then(|v| v.as_str())
        .unwrap_or("none");
    schedule_command(schedule, time_zone, from, count, Some(next))
}

fn schedule_command(
    schedule: &str,
    time_zone: Option<&str>,
    from: Option<&str>,
    count: usize,
    controller_next: Option<&str>,
) -> ExitCode {
    let from = match from {
        None => jiff::Timestamp::now(),
        Some(s) => match s.parse::<jiff::Timestamp>() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("fleetctl: --from {s:?} is not an RFC3339 time: {e}");
                return ExitCode::from(2);
            }
        },
    };
    // The controller evaluates schedules without a time zone in its own local zone: UTC.
    let from = from.to_zoned(jiff::tz::TimeZone::UTC);
    match preview::upcoming(schedule, time_zone, &from, count) {
        Ok(up) => {
            if let Some(w) = up.warning {
                eprintln!("warning: {w}");
            }
            let mut out = std::io::stdout().lock();
            for t in up.times {
                let _ = writeln!(out, "{}", t.timestamp().strftime("%Y-%m-%dT%H:%M:%SZ"));
            }
            if let Some(next) = controller_next {
                let _ = writeln!(out, "{NEXT_SCHEDULE_TIME}: {next}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fleetctl: {e}");
            ExitCode::from(2)
        }
    }
}
