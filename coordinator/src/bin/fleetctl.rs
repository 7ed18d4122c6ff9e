use clap::Parser;

/// Operator commands for a batchfleet, against the coordinator's admin API.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Admin API address of the coordinator.
    #[arg(long, env = "FLEET_ADMIN", default_value = "http://127.0.0.1:7400")]
    admin: String,
    #[arg(trailing_var_arg = true)]
    command: Vec<String>,
}

fn main() {
    let args = Args::parse();
    eprintln!("fleetctl: {:?} is not implemented yet", args.command);
    std::process::exit(2)
}
