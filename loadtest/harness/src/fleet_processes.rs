//! The fleet as separate processes beside a sim cluster: one `fleet-coordinator` and N
//! `fleet-worker`s (or one `fleet-worker --standalone`), each logging to a file of its own,
//! stopped when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use batchfleet_proto::v1 as pb;
use batchfleet_proto::v1::fleet_admin_client::FleetAdminClient;
use tokio::process::{Child, Command};

pub struct FleetProcesses {
    /// Every coordinator's address, in the order started.
    pub admin_urls: Vec<String>,
    pub coordinators: Vec<Child>,
    pub workers: Vec<(String, Child)>,
    pub log_dir: PathBuf,
}

/// How many of each, and the timing flags the benchmarks vary.
#[derive(Debug, Clone)]
pub struct FleetLayout {
    pub shards: u32,
    pub coordinators: usize,
    pub workers: usize,
    /// `--lease-duration` of the workers.
    pub worker_lease: String,
}

impl Default for FleetLayout {
    fn default() -> Self {
        Self { shards: 256, coordinators: 1, workers: 3, worker_lease: "15s".into() }
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

fn log_file(dir: &Path, name: &str) -> anyhow::Result<Stdio> {
    let file = std::fs::File::create(dir.join(format!("{name}.log")))
        .with_context(|| format!("creating {}/{name}.log", dir.display()))?;
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
    let mut admin_urls = Vec::new();
    let mut coordinators = Vec::new();
    for i in 0..layout.coordinators.max(1) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let listen = format!("127.0.0.1:{port}");
        let id = format!("coordinator-{i}");
        let child = Command::new(&coordinator_bin)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--coordinator-id", &id, "--listen", &listen, "--metrics-addr", "127.0.0.1:0"])
            .args(["--shards", &shards])
            .stdout(Stdio::null())
            .stderr(log_file(log_dir, &id)?)
            .kill_on_drop(true)
            .spawn()
            .context("starting fleet-coordinator")?;
        admin_urls.push(format!("http://{listen}"));
        coordinators.push(child);
    }
    let all = admin_urls.join(",");
    let mut workers = Vec::new();
    for i in 0..layout.workers {
        let id = format!("w-{i}");
        let child = Command::new(&worker_bin)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--coordinator", &all, "--worker-id", &id, "--metrics-addr", "127.0.0.1:0"])
            .args(["--shards", &shards, "--lease-duration", &layout.worker_lease])
            .stdout(Stdio::null())
            .stderr(log_file(log_dir, &id)?)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting fleet-worker {id}"))?;
        workers.push((id, child));
    }
    Ok(FleetProcesses { admin_urls, coordinators, workers, log_dir: log_dir.to_path_buf() })
}

/// One `fleet-worker --standalone` (every shard, no coordinator) on the sim behind `kubeconfig`,
/// serving `/metrics` on `metrics_addr` and logging to `standalone.log` in `log_dir`.
pub fn start_standalone(
    kubeconfig: &Path,
    metrics_addr: SocketAddr,
    log_dir: &Path,
) -> anyhow::Result<Child> {
    std::fs::create_dir_all(log_dir)?;
    let worker_bin = sibling_binary("fleet-worker", "batchfleet-worker")?;
    Command::new(&worker_bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--standalone", "--worker-id", "standalone", "--metrics-addr", &metrics_addr.to_string()])
        .stdout(Stdio::null())
        .stderr(log_file(log_dir, "standalone")?)
        .kill_on_drop(true)
        .spawn()
        .context("starting fleet-worker --standalone")
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
    /// The admin API of whichever coordinator leads.
    pub async fn admin(&self) -> Option<FleetAdminClient<tonic::transport::Channel>> {
        for url in &self.admin_urls {
            if let Ok(mut rpc) = FleetAdminClient::connect(url.clone()).await
                && rpc.status(pb::StatusRequest {}).await.is_ok()
            {
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
                    eprintln!("placing shards: {active}/{all} active");
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
