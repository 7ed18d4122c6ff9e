//! The fleet as separate processes beside a sim cluster: one `fleet-coordinator` and N
//! `fleet-worker`s (or one `fleet-worker --standalone`), each logging to a file of its own,
//! stopped when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use std::sync::Arc;

use anyhow::Context;
use batchfleet_proto::v1 as pb;
use batchfleet_tls::client::ClientTransport;

use crate::fleet_tls::FleetPki;
use batchfleet_proto::v1::fleet_admin_client::FleetAdminClient;
use tokio::process::{Child, Command};

pub struct FleetProcesses {
    /// Every coordinator's address, in the order started.
    pub admin_urls: Vec<String>,
    /// Every coordinator's `/metrics` address, in the same order.
    pub coordinator_metrics: Vec<SocketAddr>,
    pub coordinators: Vec<Child>,
    pub workers: Vec<(String, Child)>,
    pub log_dir: PathBuf,
    /// What starts one more worker (`spawn_worker`).
    launch: WorkerLaunch,
    /// How the harness itself reaches the admin API.
    admin_transport: ClientTransport,
    /// Each worker's `/metrics`, `/readyz` and `/livez` address, as its latest process serves them.
    health_addrs: parking_lot::Mutex<std::collections::BTreeMap<String, SocketAddr>>,
}

/// How the fleet's workers are started, kept to start more (a join, a restart).
struct WorkerLaunch {
    binary: PathBuf,
    kubeconfig: PathBuf,
    flags: Vec<String>,
    /// Each worker's certificate under `--tls`; `--insecure` without.
    pki: Option<Arc<FleetPki>>,
}

/// How many of each, and the timing flags the benchmarks and scenarios vary.
#[derive(Debug, Clone)]
pub struct FleetLayout {
    pub shards: u32,
    pub coordinators: usize,
    pub workers: usize,
    /// `--lease-duration` of the workers; the binary's default when `None`.
    pub worker_lease: Option<String>,
    /// Flags both coordinators and workers get (the store: `--store etcd --etcd-endpoints …`).
    pub common_flags: Vec<String>,
    pub coordinator_flags: Vec<String>,
    pub worker_flags: Vec<String>,
    /// TLS with a throwaway CA whose files go into this directory; plaintext (`--insecure`)
    /// when `None`.
    pub tls_dir: Option<PathBuf>,
}

impl Default for FleetLayout {
    fn default() -> Self {
        Self {
            shards: 256,
            coordinators: 1,
            workers: 3,
            worker_lease: Some("15s".into()),
            common_flags: Vec::new(),
            coordinator_flags: Vec::new(),
            worker_flags: Vec::new(),
            tls_dir: None,
        }
    }
}

/// A binary of this workspace, next to the running one; built with cargo (same profile) when
/// `cargo run -p batchfleet-loadtest` did not build it.
pub fn sibling_binary(name: &str, package: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::current_exe()?.with_file_name(name);
    if path.exists() {
        return Ok(path);
    }
    let cargo = std::env::var("CARGO").map_err(|_| {
        anyhow::anyhow!("{} is missing: build it with `cargo build --release -p {package}`", path.display())
    })?;
    let release = path.components().any(|c| c.as_os_str() == "release");
    eprintln!("building {name} ({})", if release { "release" } else { "debug" });
    let mut build = std::process::Command::new(cargo);
    build.args(["build", "-p", package, "--bin", name]);
    if release {
        build.arg("--release");
    }
    anyhow::ensure!(build.status()?.success(), "building {name} failed");
    Ok(path)
}

/// `<dir>/<name>.log` for a process's output; appended to, so that a restarted process keeps
/// its earlier lines.
pub fn log_file(dir: &Path, name: &str) -> anyhow::Result<Stdio> {
    let path = dir.join(format!("{name}.log"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    Ok(Stdio::from(file))
}

/// Starts the coordinators and workers of `layout` on the sim behind `kubeconfig`.
pub async fn start(
    kubeconfig: &Path,
    layout: &FleetLayout,
    log_dir: &Path,
) -> anyhow::Result<FleetProcesses> {
    std::fs::create_dir_all(log_dir)?;
    let coordinator_bin = sibling_binary("fleet-coordinator", "batchfleet-coordinator")?;
    let worker_bin = sibling_binary("fleet-worker", "batchfleet-worker")?;
    let shards = layout.shards.to_string();
    let pki = match &layout.tls_dir {
        Some(dir) => Some(Arc::new(FleetPki::generate(dir).context("writing the fleet's certificates")?)),
        None => None,
    };
    let (transport_flags, scheme) = match &pki {
        Some(pki) => (pki.coordinator_flags(), "https"),
        None => (vec!["--insecure".to_string()], "http"),
    };
    let admin_transport = match &pki {
        Some(pki) => pki.admin_transport()?,
        None => ClientTransport::Insecure,
    };
    let mut admin_urls = Vec::new();
    let mut coordinator_metrics = Vec::new();
    let mut coordinators = Vec::new();
    for i in 0..layout.coordinators.max(1) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let listen = format!("127.0.0.1:{port}");
        let metrics: SocketAddr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let id = format!("coordinator-{i}");
        let child = Command::new(&coordinator_bin)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--coordinator-id", &id, "--listen", &listen, "--metrics-addr", &metrics.to_string()])
            .args(["--shards", &shards])
            .args(&transport_flags)
            .args(&layout.common_flags)
            .args(&layout.coordinator_flags)
            .stdout(Stdio::null())
            // The run reads these logs for ERROR lines in the text format (whatever --log-format
            // the harness itself was given).
            .env("FLEET_LOG_FORMAT", "text")
            .stderr(log_file(log_dir, &id)?)
            .kill_on_drop(true)
            .spawn()
            .context("starting fleet-coordinator")?;
        admin_urls.push(format!("{scheme}://{listen}"));
        coordinator_metrics.push(metrics);
        coordinators.push(child);
    }
    let mut flags = vec!["--coordinator".to_string(), admin_urls.join(",")];
    // `--metrics-addr` is each worker's own (`spawn_worker`), so that its /readyz can be asked.
    flags.extend(["--shards", &shards].map(String::from));
    if let Some(lease) = &layout.worker_lease {
        flags.extend(["--lease-duration".to_string(), lease.clone()]);
    }
    flags.extend(layout.common_flags.iter().cloned());
    flags.extend(layout.worker_flags.iter().cloned());
    let launch = WorkerLaunch { binary: worker_bin, kubeconfig: kubeconfig.to_path_buf(), flags, pki };
    let mut fleet = FleetProcesses {
        admin_urls,
        coordinator_metrics,
        admin_transport,
        coordinators,
        workers: Vec::new(),
        log_dir: log_dir.to_path_buf(),
        launch,
        health_addrs: Default::default(),
    };
    for i in 0..layout.workers {
        let id = format!("w-{i}");
        let child = fleet.spawn_worker(&id)?;
        fleet.workers.push((id, child));
    }
    Ok(fleet)
}

/// One `fleet-worker --standalone` (every shard, no coordinator) on the sim behind `kubeconfig`,
/// serving `/metrics` on `metrics_addr` and logging to `standalone.log` in `log_dir`.
pub fn start_standalone(
    kubeconfig: &Path,
    metrics_addr: SocketAddr,
    log_dir: &Path,
    extra_flags: &[String],
) -> anyhow::Result<Child> {
    std::fs::create_dir_all(log_dir)?;
    let worker_bin = sibling_binary("fleet-worker", "batchfleet-worker")?;
    Command::new(&worker_bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--standalone", "--worker-id", "standalone", "--metrics-addr", &metrics_addr.to_string()])
        .args(extra_flags)
        .stdout(Stdio::null())
        // The run reads these logs for ERROR lines in the text format (whatever --log-format
        // the harness itself was given).
        .env("FLEET_LOG_FORMAT", "text")
        .stderr(log_file(log_dir, "standalone")?)
        .kill_on_drop(true)
        .spawn()
        .context("starting fleet-worker --standalone")
}

/// Waits until a standalone worker serves `/readyz` on `metrics` (it owns every shard from the
/// start), failing when it exits or `timeout` passes.
pub async fn wait_standalone_ready(
    worker: &mut Child,
    metrics: SocketAddr,
    log_dir: &Path,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    while !http_ok(metrics, "/readyz").await {
        if let Some(status) = worker.try_wait()? {
            anyhow::bail!(
                "fleet-worker --standalone exited ({status}); see {}/standalone.log",
                log_dir.display()
            );
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "fleet-worker --standalone did not serve /readyz within {timeout:?}; see {}/standalone.log",
            log_dir.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The body of `GET path` from an HTTP endpoint of ours (a process's `/metrics`), if it answers
/// 200. HTTP/1.0, so that the body comes whole, not chunked.
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await.ok()?.ok()?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.split_whitespace().nth(1).filter(|code| *code == "200")?;
    Some(body.to_string())
}

/// Whether an HTTP endpoint of ours (`/readyz` of a worker) answers 200.
pub async fn http_ok(addr: SocketAddr, path: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else { return false };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.is_ok() && head.starts_with(b"HTTP/1.1 200")
}

impl FleetProcesses {
    /// Starts a worker `id` with the fleet's flags, logging to (the end of) `<id>.log`, its
    /// health endpoints on a free port of their own ([`Self::wait_worker_ready`]).
    pub fn spawn_worker(&self, id: &str) -> anyhow::Result<Child> {
        let launch = &self.launch;
        let transport_flags = match &launch.pki {
            Some(pki) => pki.worker_flags(id)?,
            None => vec!["--insecure".to_string()],
        };
        let health: SocketAddr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        self.health_addrs.lock().insert(id.to_string(), health);
        Command::new(&launch.binary)
            .arg("--kubeconfig")
            .arg(&launch.kubeconfig)
            .args(["--worker-id", id, "--metrics-addr", &health.to_string()])
            .args(&transport_flags)
            .args(&launch.flags)
            .stdout(Stdio::null())
            // The run reads these logs for ERROR lines in the text format (whatever --log-format
            // the harness itself was given).
            .env("FLEET_LOG_FORMAT", "text")
            .stderr(log_file(&self.log_dir, id)?)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting fleet-worker {id}"))
    }

    /// Every worker's `/metrics` address, as its latest process serves it, by worker id.
    pub fn worker_metrics(&self) -> std::collections::BTreeMap<String, SocketAddr> {
        self.health_addrs.lock().clone()
    }

    /// Waits until worker `id`'s latest process answers `/readyz` with 200 — what a
    /// StatefulSet's readiness probe would gate a rolling update on — failing when it exits or
    /// `timeout` passes. Answers how long it took.
    pub async fn wait_worker_ready(&mut self, id: &str, timeout: Duration) -> anyhow::Result<Duration> {
        let started = tokio::time::Instant::now();
        let addr = self.health_addrs.lock().get(id).copied().with_context(|| format!("no worker {id}"))?;
        let log = self.log_dir.join(format!("{id}.log"));
        let (_, child) =
            self.workers.iter_mut().find(|(w, _)| w == id).with_context(|| format!("no worker {id}"))?;
        while !http_ok(addr, "/readyz").await {
            if let Some(status) = child.try_wait()? {
                anyhow::bail!("{id} exited ({status}) before it was ready; see {}", log.display());
            }
            anyhow::ensure!(
                started.elapsed() < timeout,
                "{id} did not answer /readyz with 200 within {timeout:?}; see {}",
                log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(started.elapsed())
    }

    /// The transport flags fleetctl needs for this fleet.
    pub fn fleetctl_flags(&self) -> Vec<String> {
        match &self.launch.pki {
            Some(pki) => pki.fleetctl_flags(),
            None => vec!["--insecure".to_string()],
        }
    }

    /// The admin API of whichever coordinator leads.
    pub async fn admin(&self) -> Option<FleetAdminClient<tonic::transport::Channel>> {
        for url in &self.admin_urls {
            let Ok(endpoint) = tonic::transport::Endpoint::from_shared(url.clone()) else { continue };
            let Ok(channel) = self.admin_transport.connect(endpoint).await else { continue };
            let mut rpc = FleetAdminClient::new(channel);
            if rpc.status(pb::StatusRequest {}).await.is_ok() {
                return Some(rpc);
            }
        }
        None
    }

    /// Shards active on a worker, of all; `None` while the coordinator does not answer.
    pub async fn active_shards(&self) -> Option<(usize, usize)> {
        let shards = self.admin().await?.shards(pb::ShardsRequest {}).await.ok()?.into_inner().shards;
        Some((shards.iter().filter(|s| s.state == "active").count(), shards.len()))
    }

    /// Waits until every shard is active, printing progress.
    pub async fn wait_placed(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last = None;
        loop {
            let now = self.active_shards().await;
            if now != last {
                if let Some((active, all)) = now {
                    tracing::info!("placing shards: {active}/{all} active");
                }
                last = now;
            }
            if matches!(now, Some((active, all)) if all > 0 && active == all) {
                return Ok(());
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "shards not placed within {timeout:?}; see the logs in {}",
                self.log_dir.display()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The index (in `coordinators`) of the coordinator that leads, by the admin API's answer.
    pub async fn leader_index(&self) -> Option<usize> {
        let leader = self.admin().await?.status(pb::StatusRequest {}).await.ok()?.into_inner().leader;
        leader.strip_prefix("coordinator-")?.parse().ok()
    }

    /// The leading coordinator's `/metrics` (Prometheus text), and which coordinator it is.
    pub async fn leader_metrics(&self) -> Option<(usize, String)> {
        let leader = self.leader_index().await?;
        let body = http_get(*self.coordinator_metrics.get(leader)?, "/metrics").await?;
        Some((leader, body))
    }

    /// Every shard's epoch (it grows by one per placement), as the leader reports it.
    pub async fn shard_epochs(&self) -> Option<std::collections::BTreeMap<u32, u64>> {
        let shards = self.admin().await?.shards(pb::ShardsRequest {}).await.ok()?.into_inner().shards;
        Some(shards.into_iter().map(|s| (s.shard, s.epoch)).collect())
    }

    /// Which worker owns each worker's share, as `fleetctl workers` shows it.
    pub async fn workers(&self) -> Vec<pb::WorkerInfo> {
        match self.admin().await {
            Some(mut rpc) => {
                rpc.workers(pb::WorkersRequest {}).await.map(|r| r.into_inner().workers).unwrap_or_default()
            }
            None => Vec::new(),
        }
    }
}

/// An etcd process for the fleet's etcd store, on free ports with its data in a folder of its
/// own, logging to (the end of) `etcd.log`; killed when dropped, and restartable on the same
/// ports and data.
pub struct EtcdProcess {
    pub child: Child,
    pub endpoint: String,
    data_dir: PathBuf,
    log_dir: PathBuf,
    client_port: u16,
    peer_port: u16,
}

/// The etcd binary: `BATCHFLEET_ETCD`, else the workspace's `.tools/bin/etcd` (`scripts/setup`).
fn etcd_binary() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("BATCHFLEET_ETCD")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin/etcd"));
    anyhow::ensure!(
        path.exists(),
        "etcd not found at {}: run scripts/setup or set BATCHFLEET_ETCD",
        path.display()
    );
    Ok(path)
}

/// Starts etcd with its data in `data_dir` and waits until its client port accepts connections.
pub async fn start_etcd(data_dir: &Path, log_dir: &Path, timeout: Duration) -> anyhow::Result<EtcdProcess> {
    std::fs::create_dir_all(log_dir)?;
    let free_port =
        || -> anyhow::Result<u16> { Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port()) };
    let (client_port, peer_port) = (free_port()?, free_port()?);
    let child = spawn_etcd(data_dir, log_dir, client_port, peer_port)?;
    let etcd = EtcdProcess {
        child,
        endpoint: format!("http://127.0.0.1:{client_port}"),
        data_dir: data_dir.to_path_buf(),
        log_dir: log_dir.to_path_buf(),
        client_port,
        peer_port,
    };
    etcd.wait_listening(timeout).await?;
    Ok(etcd)
}

fn spawn_etcd(data_dir: &Path, log_dir: &Path, client_port: u16, peer_port: u16) -> anyhow::Result<Child> {
    let client_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    Command::new(etcd_binary()?)
        .args(["--name", "loadtest", "--data-dir"])
        .arg(data_dir)
        .args(["--listen-client-urls", &client_url, "--advertise-client-urls", &client_url])
        .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("loadtest={peer_url}")])
        .stdout(Stdio::null())
        .stderr(log_file(log_dir, "etcd")?)
        .kill_on_drop(true)
        .spawn()
        .context("starting etcd")
}

impl EtcdProcess {
    async fn wait_listening(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::net::TcpStream::connect(("127.0.0.1", self.client_port)).await.is_err() {
            anyhow::ensure!(tokio::time::Instant::now() < deadline, "etcd did not listen within {timeout:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// SIGKILL, `down` without etcd, then etcd again on the same ports and data.
    pub async fn restart(&mut self, down: Duration, timeout: Duration) -> anyhow::Result<()> {
        self.child.start_kill()?;
        self.child.wait().await?;
        tokio::time::sleep(down).await;
        self.child = spawn_etcd(&self.data_dir, &self.log_dir, self.client_port, self.peer_port)?;
        self.wait_listening(timeout).await
    }
}
