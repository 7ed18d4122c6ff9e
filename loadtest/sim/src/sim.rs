//! Starting and stopping a whole sim cluster.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::apiserver::{ApiServer, WriteOptions};
use crate::audit::AuditLog;
use crate::cluster::backoff::BackoffConfig;
use crate::cluster::disruption::Disruption;
use crate::cluster::kubelet::{Kubelet, KubeletConfig};
use crate::cluster::node_lifecycle::NodeLifecycle;
use crate::cluster::nodes::{NODE_LEASE_NAMESPACE, Nodes};
use crate::cluster::scheduler::Scheduler;
use crate::cluster::taint_eviction::TaintEviction;
use crate::counters::Counters;
use crate::faults::Faults;
use crate::http::{NodeAdmin, Shared, Snapshots};
use crate::store::{HistoryConfig, Store};

/// How to start a sim cluster.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Where to listen; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Simulated nodes created at start (`sim-node-0` …).
    pub nodes: usize,
    /// Run the scheduler, kubelet, and the node lifecycle, taint-eviction and disruption
    /// controllers (off: pods stay Pending, for API-only tests).
    pub kubelet: bool,
    pub bookmark_interval: Duration,
    pub node_heartbeat: Duration,
    /// How long a node's Lease may go unrenewed before the node is Unknown (upstream: 40s).
    pub node_monitor_grace: Duration,
    pub history: HistoryConfig,
    /// Write an `audit.k8s.io/v1` Event per request to this file (`loadtest sim --audit-log`).
    pub audit_log: Option<PathBuf>,
    /// Serve KEP-5866 `shardSelector` (off: an API server without the feature); also
    /// `PUT /_sim/features {"shardSelector": false}` at run time.
    pub shard_selector: bool,
    /// The kubelet's container restart back-off (upstream: 10 s doubling to 5 min); tests that
    /// watch a crash loop scale it down.
    pub container_restart_backoff: BackoffConfig,
    /// Record the kubelet's pod events (Pulled, Created, Started, …); off spares a load test
    /// four writes per pod.
    pub kubelet_events: bool,
    /// How long an Event outlives its last write (kube-apiserver's `--event-ttl`, 1h).
    pub event_ttl: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            nodes: 3,
            kubelet: true,
            bookmark_interval: Duration::from_secs(60),
            node_heartbeat: Duration::from_secs(10),
            node_monitor_grace: Duration::from_secs(40),
            history: HistoryConfig::default(),
            audit_log: None,
            shard_selector: true,
            container_restart_backoff: BackoffConfig::default(),
            kubelet_events: true,
            event_ttl: crate::cluster::event_ttl::DEFAULT_EVENT_TTL,
        }
    }
}

/// A running sim cluster. Dropping it stops its tasks.
pub struct SimCluster {
    addr: SocketAddr,
    shared: Arc<Shared>,
    nodes: Arc<Nodes>,
    tasks: Vec<JoinHandle<()>>,
}

impl SimCluster {
    /// Binds, bootstraps the default namespaces and nodes, and starts serving.
    pub async fn start(config: SimConfig) -> std::io::Result<Self> {
        let listener = TcpListener::bind(config.listen).await?;
        let addr = listener.local_addr()?;
        let store = Arc::new(Store::new(config.history.clone()));
        let (api, gc_rx) = ApiServer::new(store);
        let namespaces = api.builtin("", "v1", "namespaces");
        for ns in ["default", "kube-system", "kube-public", NODE_LEASE_NAMESPACE] {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            api.create(&namespaces, "", obj, &WriteOptions::default())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            // Present from the start, as on a cluster whose controllers have run.
            crate::cluster::namespace_defaults::ensure(&api, ns);
        }
        let nodes = Nodes::new(api.clone());
        for i in 0..config.nodes {
            nodes.add_node(&format!("sim-node-{i}")).map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        let shared = Arc::new(Shared {
            api: api.clone(),
            faults: Faults::default(),
            counters: Counters::default(),
            snapshots: Snapshots::default(),
            bookmark_interval: config.bookmark_interval,
            address: addr.to_string(),
            nodes: Some(nodes.clone() as Arc<dyn NodeAdmin>),
            audit: config.audit_log.as_deref().map(AuditLog::create).transpose()?,
            shard_selector: std::sync::atomic::AtomicBool::new(config.shard_selector),
        });
        let mut tasks = vec![
            tokio::spawn(crate::http::serve(listener, shared.clone())),
            tokio::spawn(crate::gc::run(api.clone(), gc_rx)),
            tokio::spawn(crate::cluster::namespace_defaults::run(api.clone())),
            tokio::spawn(crate::cluster::event_ttl::run(api.clone(), config.event_ttl)),
            tokio::spawn(nodes.clone().heartbeat(config.node_heartbeat)),
            tokio::spawn(nodes.clone().lifecycle(
                config.node_monitor_grace.min(Duration::from_secs(5)) / 2,
                config.node_monitor_grace,
            )),
        ];
        if config.kubelet {
            let kubelet = KubeletConfig {
                restart_backoff: config.container_restart_backoff,
                events: config.kubelet_events,
            };
            tasks.push(tokio::spawn(Kubelet::new(api.clone(), nodes.clone(), kubelet).run()));
            tasks.push(tokio::spawn(Scheduler::new(api.clone()).run()));
            tasks.push(tokio::spawn(NodeLifecycle::new(api.clone()).run()));
            tasks.push(tokio::spawn(TaintEviction::new(api.clone()).run()));
            tasks.push(tokio::spawn(Disruption::new(api.clone()).run()));
        }
        tracing::info!(%addr, nodes = config.nodes, "sim cluster serving");
        Ok(Self { addr, shared, nodes, tasks })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn api(&self) -> &Arc<ApiServer> {
        &self.shared.api
    }

    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    pub fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    pub fn nodes(&self) -> &Arc<Nodes> {
        &self.nodes
    }

    /// A kubeconfig for kubectl and kube-rs, as YAML.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig_yaml_for(&self.url())
    }

    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, self.kubeconfig_yaml())
    }

    /// A kube-rs client for this cluster.
    pub fn kube_config(&self) -> KubeEndpoint {
        KubeEndpoint { url: self.url() }
    }

    /// Stops serving.
    pub fn shutdown(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

/// Where kube-rs should connect (kept free of a kube dependency in this crate).
#[derive(Debug, Clone)]
pub struct KubeEndpoint {
    pub url: String,
}

impl Drop for SimCluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The kubeconfig the sim writes, for a server at `url`: for tests that stand a server of their
/// own where the sim would be.
pub fn kubeconfig_yaml_for(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n    server: {url}\ncontexts:\n- name: sim\n  context:\n    cluster: sim\n    user: sim\n    namespace: default\ncurrent-context: sim\nusers:\n- name: sim\n  user:\n    token: sim\npreferences: {{}}\n"
    )
}
