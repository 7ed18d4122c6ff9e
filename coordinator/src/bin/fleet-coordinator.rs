use clap::Parser;

/// Leader-elected coordinator of a batchfleet: shard map, placement, worker sessions, admin API and
/// cluster-wide PodGC.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// kubeconfig of the API server (default: in-cluster, then $KUBECONFIG).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<std::path::PathBuf>,
    /// gRPC listen address for worker sessions and the admin API.
    #[arg(long, env = "FLEET_LISTEN", default_value = "0.0.0.0:7400")]
    listen: String,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    tracing::error!(?args, "the coordinator is not implemented yet; use `fleet-worker --standalone`");
    std::process::exit(2)
}
