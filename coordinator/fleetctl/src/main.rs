//! `fleetctl`: operator commands for a batchfleet.

use std::io::Write;
use std::process::ExitCode;

use batchfleet_cron::preview;
use clap::{Parser, Subcommand};

/// Operator commands for a batchfleet, against the coordinator's admin API.
#[derive(Parser, Debug)]
#[command(version)]
struct Cli {
    /// Admin API address of the coordinator.
    #[arg(long, env = "FLEET_ADMIN", default_value = "http://127.0.0.1:7400", global = true)]
    admin: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The next fire times the CronJob controller would use for a schedule, one RFC3339 UTC time
    /// per line.
    Schedule {
        /// The CronJob's `spec.schedule`, e.g. "*/5 * * * *" or "@every 30s".
        schedule: String,
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
    /// Leader, shard count and workers (needs the coordinator).
    Status,
    /// Workers and their shards (needs the coordinator).
    Workers,
    /// The shard map (needs the coordinator).
    Shards,
    /// Move every shard off a worker, then let it exit (needs the coordinator).
    Drain { worker: String },
    /// Let a drained worker take shards again (needs the coordinator).
    Undrain { worker: String },
    /// Recompute placement (needs the coordinator).
    Rebalance {
        #[arg(long)]
        dry_run: bool,
    },
    /// Move one shard to a worker (needs the coordinator).
    Move { shard: u32, worker: String },
    /// Pin a shard to a worker (needs the coordinator).
    Pin { shard: u32, worker: String },
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
        Command::Schedule { schedule, time_zone, from, count } => {
            schedule_command(&schedule, time_zone.as_deref(), from.as_deref(), count)
        }
        other => {
            eprintln!(
                "fleetctl: {other:?} needs the coordinator's admin API at {}, which is not implemented yet",
                cli.admin
            );
            ExitCode::from(1)
        }
    }
}

fn schedule_command(schedule: &str, time_zone: Option<&str>, from: Option<&str>, count: usize) -> ExitCode {
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
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fleetctl: {e}");
            ExitCode::from(2)
        }
    }
}
