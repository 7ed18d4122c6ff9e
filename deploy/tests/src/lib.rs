//! Helpers for the tests of `deploy/` (the kustomize manifests, their RBAC, alerts and dashboard)
//! and of `docs/` (the configuration reference and the how-tos' commands): where things are,
//! kubectl, and the sim cluster with a kubeconfig on disk.

use std::path::{Path, PathBuf};
use std::process::Output;

use batchfleet_sim::{SimCluster, SimConfig};
use serde_json::Value;

/// The workspace's root.
pub fn root() -> PathBuf {
    batchfleet_sim::testing::workspace_root()
}

/// `deploy/`.
pub fn deploy_dir() -> PathBuf {
    root().join("deploy")
}

/// kubectl 1.37: `$BATCHFLEET_KUBECTL`, else `.tools/bin/kubectl` of the workspace, else the
/// one on `PATH`.
pub fn kubectl() -> PathBuf {
    if let Some(path) = std::env::var_os("BATCHFLEET_KUBECTL") {
        return PathBuf::from(path);
    }
    let tools = root().join(".tools/bin/kubectl");
    if tools.exists() { tools } else { PathBuf::from("kubectl") }
}

/// The kustomizations: `deploy/base` and every `deploy/overlays/*`, by name (`base`, `etcd`, …).
pub fn kustomizations() -> Vec<(String, PathBuf)> {
    let mut out = vec![("base".to_string(), deploy_dir().join("base"))];
    let mut overlays: Vec<(String, PathBuf)> = std::fs::read_dir(deploy_dir().join("overlays"))
        .expect("deploy/overlays")
        .flatten()
        .filter(|e| e.path().join("kustomization.yaml").exists())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    overlays.sort();
    out.extend(overlays);
    out
}

/// The kustomization directory called `name` (`base` or an overlay).
pub fn kustomization(name: &str) -> PathBuf {
    kustomizations()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no kustomization {name}"))
        .1
}

/// Runs kubectl with `args` (and `KUBECONFIG` when given); its output, whatever the exit code.
pub fn run_kubectl(kubeconfig: Option<&Path>, args: &[&str]) -> Output {
    let mut command = std::process::Command::new(kubectl());
    command.args(args);
    if let Some(k) = kubeconfig {
        command.env("KUBECONFIG", k);
        // Discovery cached per sim: a port is reused by later sims, which may serve other kinds.
        command.env("KUBECACHEDIR", k.with_file_name("kube-cache"));
    }
    command.output().unwrap_or_else(|e| panic!("running {} {args:?}: {e}", kubectl().display()))
}

/// Runs kubectl and fails the test unless it exits 0; its stdout.
pub fn kubectl_ok(kubeconfig: Option<&Path>, args: &[&str]) -> String {
    let out = run_kubectl(kubeconfig, args);
    assert!(
        out.status.success(),
        "kubectl {} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kubectl kustomize DIR`: the objects it builds.
pub fn build(dir: &Path) -> Vec<Value> {
    documents(&kubectl_ok(None, &["kustomize", &dir.to_string_lossy()]))
}

/// The YAML documents of a multi-document stream, as JSON values (empty ones skipped).
pub fn documents(yaml: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("a YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

/// An object's `kind/name`, for messages.
pub fn describe(obj: &Value) -> String {
    format!("{}/{}", obj["kind"].as_str().unwrap_or("?"), obj["metadata"]["name"].as_str().unwrap_or("?"))
}

/// A sim cluster of this test with its kubeconfig (and audit log) in a directory of its own,
/// removed at the end unless `BATCHFLEET_KEEP_SIM_DIR` is set.
pub struct Sim {
    pub cluster: SimCluster,
    pub dir: tempfile::TempDir,
}

impl Sim {
    pub async fn start(config: SimConfig) -> Self {
        let mut dir = tempfile::tempdir().expect("tempdir");
        // To look into a failure: the processes' logs and the audit log stay behind.
        if std::env::var_os("BATCHFLEET_KEEP_SIM_DIR").is_some() {
            dir.disable_cleanup(true);
            eprintln!("the sim's directory (kept): {}", dir.path().display());
        }
        let config = SimConfig { audit_log: Some(dir.path().join("audit.log")), ..config };
        let cluster = SimCluster::start(config).await.expect("the sim starts");
        cluster.write_kubeconfig(&dir.path().join("kubeconfig")).expect("kubeconfig");
        Self { cluster, dir }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    pub fn audit_log(&self) -> PathBuf {
        self.dir.path().join("audit.log")
    }

    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(kube::Config::new(self.cluster.url().parse().expect("url"))).expect("client")
    }
}

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// `GET path` from an HTTP endpoint of ours: the status code and the body.
pub async fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((code, body))
}

/// `fleetctl --admin ADMIN -o json ARGS…`, parsed; `None` when it fails.
pub fn fleetctl(admin: &str, args: &[&str]) -> Option<Value> {
    let binary = batchfleet_sim::testing::workspace_binary("batchfleet-fleetctl", "fleetctl");
    let out = std::process::Command::new(binary)
        .args(["--insecure", "--admin", admin, "-o", "json"])
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// Every shard's owner once all `count` shards are active.
pub fn settled_owners(admin: &str, count: usize) -> Option<std::collections::BTreeMap<u64, String>> {
    let shards = fleetctl(admin, &["shards"])?;
    let shards = shards.as_array()?;
    let all_active = shards.len() == count && shards.iter().all(|s| s["state"] == "active");
    all_active.then(|| {
        shards.iter().filter_map(|s| Some((s["shard"].as_u64()?, s["owner"].as_str()?.to_string()))).collect()
    })
}

/// One process of the fleet: its id, the child (killed when dropped) and its metrics address.
pub struct Process {
    pub id: String,
    pub child: tokio::process::Child,
    pub metrics: String,
}

/// A fleet as processes on a sim: coordinators (the first leads) and workers, in namespace
/// `namespace`, with `shards` shards; each logs to `<id>.log` in the sim's directory.
pub struct Fleet {
    pub coordinators: Vec<Process>,
    pub workers: Vec<Process>,
    /// Every coordinator's admin address, comma-separated (`--admin`, `FLEET_ADMIN`).
    pub admin: String,
    pub shards: u32,
}

/// What [`Fleet::start`] starts.
pub struct FleetSpec<'a> {
    pub namespace: &'a str,
    pub shards: u32,
    pub coordinators: &'a [&'a str],
    pub workers: &'a [&'a str],
    /// More flags for every worker.
    pub worker_args: Vec<String>,
    /// More flags for every coordinator.
    pub coordinator_args: Vec<String>,
}

impl Fleet {
    /// Starts the processes and waits until the first coordinator leads, every shard is active
    /// and every worker is ready.
    pub async fn start(sim: &Sim, spec: FleetSpec<'_>) -> Self {
        use batchfleet_sim::testing::{wait_until, workspace_binary};
        use std::time::Duration;
        let kubeconfig = sim.kubeconfig().to_string_lossy().into_owned();
        let coordinator_bin = workspace_binary("batchfleet-coordinator", "fleet-coordinator");
        let worker_bin = workspace_binary("batchfleet-worker", "fleet-worker");
        let spawn = |binary: &Path, id: &str, args: Vec<String>| {
            let log = std::fs::File::create(sim.dir.path().join(format!("{id}.log"))).expect("log file");
            tokio::process::Command::new(binary)
                .args(args)
                .env("RUST_LOG", "warn")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::from(log))
                .kill_on_drop(true)
                .spawn()
                .unwrap_or_else(|e| panic!("{} starts: {e}", binary.display()))
        };
        let shards = spec.shards.to_string();
        // The flags both binaries take: the API server, the store's namespace, S, identity, metrics.
        let common = |(id_flag, id): (&str, &str), metrics: &str| -> Vec<String> {
            [
                "--insecure",
                "--kubeconfig",
                &kubeconfig,
                id_flag,
                id,
                "--metrics-addr",
                metrics,
                "--namespace",
                spec.namespace,
                "--shards",
                &shards,
            ]
            .map(String::from)
            .to_vec()
        };
        let mut coordinators = Vec::new();
        let mut admin = Vec::new();
        for (i, id) in spec.coordinators.iter().enumerate() {
            let listen = format!("127.0.0.1:{}", free_port());
            let metrics = format!("127.0.0.1:{}", free_port());
            admin.push(format!("http://{listen}"));
            let mut args = common(("--coordinator-id", id), &metrics);
            let timing = [
                "--listen",
                &listen,
                "--worker-lease-margin",
                "1s",
                "--leader-elect-lease-duration",
                "4s",
                "--leader-elect-renew-deadline",
                "3s",
                "--leader-elect-retry-period",
                "400ms",
            ];
            args.extend(timing.map(String::from));
            args.extend(spec.coordinator_args.iter().cloned());
            let child = spawn(&coordinator_bin, id, args);
            if i == 0 {
                // The first leads: it starts alone.
                wait_until(&format!("{id} leads"), Duration::from_secs(60), || async {
                    let (_, text) = http_get(&metrics, "/metrics").await?;
                    text.contains("fleet_coordinator_leader 1").then_some(())
                })
                .await;
            }
            coordinators.push(Process { id: id.to_string(), child, metrics });
        }
        let admin = admin.join(",");
        let mut workers = Vec::new();
        for id in spec.workers {
            let metrics = format!("127.0.0.1:{}", free_port());
            let mut args = common(("--worker-id", id), &metrics);
            args.extend(
                ["--coordinator", &admin, "--lease-duration", "5s", "--drain-timeout", "30s"]
                    .map(String::from),
            );
            args.extend(spec.worker_args.iter().cloned());
            workers.push(Process { id: id.to_string(), child: spawn(&worker_bin, id, args), metrics });
        }
        let count = spec.shards as usize;
        wait_until("every shard active", Duration::from_secs(90), || async { settled_owners(&admin, count) })
            .await;
        for w in &workers {
            wait_until(&format!("{} ready", w.id), Duration::from_secs(60), || async {
                let (code, _) = http_get(&w.metrics, "/readyz").await?;
                (code == 200).then_some(())
            })
            .await;
        }
        Self { coordinators, workers, admin, shards: spec.shards }
    }

    /// Every shard's owner once all are active.
    pub fn settled_owners(&self) -> Option<std::collections::BTreeMap<u64, String>> {
        settled_owners(&self.admin, self.shards as usize)
    }
}

/// The `sh` blocks marked `<!-- MARKER -->` (`sim-test`, `etcd-test`) in a Markdown file, their
/// indentation removed.
pub fn marked_blocks(markdown: &str, marker: &str) -> Vec<String> {
    let comment = format!("<!-- {marker} -->");
    let lines: Vec<&str> = markdown.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != comment {
            i += 1;
            continue;
        }
        let fence = lines.get(i + 1).map(|l| l.trim_start()).unwrap_or_default();
        assert!(fence.starts_with("```sh"), "{comment} must come right before a ```sh block, not {fence:?}");
        let indent = lines[i + 1].len() - fence.len();
        let mut block = Vec::new();
        i += 2;
        while i < lines.len() && lines[i].trim() != "```" {
            block.push(lines[i].get(indent..).unwrap_or("").to_string());
            i += 1;
        }
        blocks.push(block.join("\n"));
        i += 1;
    }
    blocks
}

/// The directory of etcd, etcdctl and etcdutl (`BATCHFLEET_ETCD`'s, else `.tools/bin`).
pub fn etcd_tools() -> PathBuf {
    std::env::var_os("BATCHFLEET_ETCD")
        .map(PathBuf::from)
        .and_then(|etcd| etcd.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| root().join(".tools/bin"))
}

/// An etcd member on `data_dir` (a fresh one, or one `etcdutl snapshot restore` wrote for
/// `name` with peer URL `peer`), killed when dropped.
pub struct Etcd {
    _child: tokio::process::Child,
    pub endpoint: String,
}

impl Etcd {
    /// The store flags of a fleet process on this etcd.
    pub fn store_args(&self) -> Vec<String> {
        ["--store", "etcd", "--etcd-endpoints", &self.endpoint].map(String::from).to_vec()
    }
}

pub async fn start_etcd(data_dir: &Path, name: &str, peer: u16) -> Etcd {
    let binary = etcd_tools().join("etcd");
    assert!(binary.exists(), "etcd not found at {}: run scripts/setup", binary.display());
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let peer_url = format!("http://127.0.0.1:{peer}");
    let child = tokio::process::Command::new(binary)
        .args(["--name", name, "--data-dir"])
        .arg(data_dir)
        .args(["--listen-client-urls", &endpoint, "--advertise-client-urls", &endpoint])
        .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("{name}={peer_url}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("etcd starts");
    let etcd = Etcd { _child: child, endpoint };
    batchfleet_sim::testing::wait_until(
        &format!("etcd {name} to serve"),
        std::time::Duration::from_secs(30),
        || async {
            let healthy = std::process::Command::new(etcd_tools().join("etcdctl"))
                .env("ETCDCTL_ENDPOINTS", &etcd.endpoint)
                .args(["endpoint", "health"])
                .output()
                .ok()?
                .status
                .success();
            healthy.then_some(())
        },
    )
    .await;
    etcd
}
