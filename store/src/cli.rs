//! The store's command-line flags, shared by `fleet-coordinator` and `fleet-worker` (which must
//! name the same store) through `#[command(flatten)]`.

/// Which store to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    Kubernetes,
    Etcd,
}

#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// Where leadership, worker leases and the shard map live.
    #[arg(long, env = "FLEET_STORE", value_enum, default_value = "kubernetes")]
    pub store: StoreKind,
    /// etcd endpoints for `--store etcd`, comma-separated.
    #[arg(
        long,
        env = "FLEET_ETCD_ENDPOINTS",
        value_delimiter = ',',
        default_value = "http://127.0.0.1:2379"
    )]
    pub etcd_endpoints: Vec<String>,
    /// Key prefix for `--store etcd`.
    #[arg(long, env = "FLEET_ETCD_PREFIX", default_value = "/batchfleet/")]
    pub etcd_prefix: String,
    /// Namespace of the fleet's Leases and shard map for `--store kubernetes`.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kube-system")]
    pub namespace: String,
}
