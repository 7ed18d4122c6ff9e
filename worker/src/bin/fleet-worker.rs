use clap::Parser;

/// Stateless batchfleet worker: reconciles Jobs, CronJobs and TTLs for the shards it owns.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Own every shard, with no coordinator.
    #[arg(long)]
    standalone: bool,
    /// kubeconfig of the API server (default: in-cluster, then $KUBECONFIG).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<std::path::PathBuf>,
}

fn main() {
    let args = Args::parse();
    eprintln!("fleet-worker: the controllers are not implemented yet ({args:?})");
    std::process::exit(2)
}
