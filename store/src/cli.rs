//! The store's command-line flags, shared by `fleet-coordinator` and `fleet-worker` (which must
//! name the same store) through `#[command(flatten)]`.

use std::time::Duration;

/// Which store to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    Kubernetes,
    Etcd,
}

impl StoreKind {
    /// The worker lease's TTL when `--lease-duration` is not given. It bounds how long a dead
    /// worker's shards wait (TTL + margin + the move), against what renewing costs the store:
    /// a renewal every third of the TTL is one write to kube-apiserver (0.6 writes/s per worker
    /// at 5 s), but only a keep-alive to etcd's leader, which etcd's leases are made for.
    /// docs/operations.md ("Worker leases: recovery against cost") has the table behind these.
    pub fn default_worker_lease(self) -> Duration {
        match self {
            StoreKind::Kubernetes => Duration::from_secs(5),
            StoreKind::Etcd => Duration::from_secs(3),
        }
    }

    /// How long past a worker's lease expiry its shards stay its own when
    /// `--worker-lease-margin` is not given: room for a write the worker's socket let out just
    /// before its deadline to reach the API server.
    pub fn default_lease_margin(self) -> Duration {
        Duration::from_secs(1)
    }
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
