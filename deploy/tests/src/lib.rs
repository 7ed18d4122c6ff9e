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

/// The kustomizations: `deploy/base` and every `deploy/overlays/*` (the two modes,
/// `beside-kcm` and `replace-kcm`), by name.
pub fn kustomizations() -> Vec<(String, PathBuf)> {
    let mut out = vec![("base".to_string(), deploy_dir().join("base"))];
    out.extend(subdirectories_with(&deploy_dir().join("overlays"), "kustomization.yaml"));
    out
}

/// The kustomize Components, `deploy/components/*` (`etcd`, `monitoring`, `tls`, …), by name.
pub fn components() -> Vec<(String, PathBuf)> {
    subdirectories_with(&deploy_dir().join("components"), "kustomization.yaml")
}

/// The subdirectories of `dir` holding a file `file`, by name, sorted.
fn subdirectories_with(dir: &Path, file: &str) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter(|e| e.path().join(file).exists())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    out.sort();
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

/// A kustomization of one's own as docs/operations.md shows it: `my-fleet/kustomization.yaml`
/// in a directory beside a checkout of batchfleet (`batchfleet/`, here a symlink to the
/// workspace), so its `../batchfleet/deploy/…` paths resolve as they do for a user. (kustomize
/// takes no absolute path to a base or a component.) Removed when dropped.
pub struct OwnKustomization {
    dir: tempfile::TempDir,
}

impl OwnKustomization {
    pub fn new(kustomization_yaml: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(root(), dir.path().join("batchfleet")).expect("symlink batchfleet/");
        std::fs::create_dir(dir.path().join("my-fleet")).expect("my-fleet/");
        std::fs::write(dir.path().join("my-fleet/kustomization.yaml"), kustomization_yaml)
            .expect("write kustomization.yaml");
        Self { dir }
    }

    /// Writes another file of `my-fleet/` (a resource or patch the kustomization names).
    pub fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path().join(name), text).unwrap_or_else(|e| panic!("write my-fleet/{name}: {e}"));
    }

    /// `my-fleet/`, the directory to build or apply.
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("my-fleet")
    }
}

/// What to build or apply: `base`, an overlay (`replace-kcm`), or either with components
/// stacked on it, joined by `+` (`base+tls`, `replace-kcm+etcd+monitoring+tls`), as an own
/// kustomization lists them.
pub struct Stack {
    pub name: String,
    dir: PathBuf,
    _own: Option<OwnKustomization>,
}

impl Stack {
    pub fn new(name: &str) -> Self {
        let mut parts = name.split('+');
        let base = parts.next().unwrap_or_default();
        let components: Vec<&str> = parts.collect();
        if components.is_empty() {
            return Self { name: name.into(), dir: kustomization(name), _own: None };
        }
        assert!(kustomization(base).is_dir(), "{base}");
        let known = components_names();
        let resource = if base == "base" { "base".to_string() } else { format!("overlays/{base}") };
        let mut yaml = format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources:\n  - ../batchfleet/deploy/{resource}\ncomponents:\n"
        );
        for c in components {
            assert!(known.iter().any(|k| k == c), "no component {c}: {known:?}");
            yaml.push_str(&format!("  - ../batchfleet/deploy/components/{c}\n"));
        }
        let own = OwnKustomization::new(&yaml);
        Self { name: name.into(), dir: own.path(), _own: Some(own) }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The objects `kubectl kustomize` builds.
    pub fn build(&self) -> Vec<Value> {
        build(&self.dir)
    }
}

fn components_names() -> Vec<String> {
    components().into_iter().map(|(n, _)| n).collect()
}

/// What the tests build: the base, each overlay, the base with each component, and every
/// component stacked on each overlay.
pub fn stacks() -> Vec<String> {
    let mut out: Vec<String> = kustomizations().into_iter().map(|(n, _)| n).collect();
    let components = components_names();
    out.extend(components.iter().map(|c| format!("base+{c}")));
    for (overlay, _) in kustomizations().into_iter().skip(1) {
        out.push(format!("{overlay}+{}", components.join("+")));
    }
    out
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

pub use batchfleet_sim::testing::free_port;

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

/// One process of the fleet: its id, the child (killed when dropped), its metrics address and
/// the file its stderr goes to.
pub struct Process {
    pub id: String,
    pub child: tokio::process::Child,
    pub metrics: String,
    pub log: PathBuf,
}

impl Process {
    /// Panics, with the end of its log, if the process has exited: a fleet test waiting on a
    /// dead process would only time out, with nothing said of why (a port taken between
    /// `free_port` and its bind, by another test's process, is the usual cause).
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited ({status}); the end of its log:\n{}", self.id, log_tail(&self.log, 40));
        }
    }
}

/// The last `lines` lines of a log file, for a failure's message.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| format!("({} unreadable: {e})", path.display()));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
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
        let spawn = |binary: &Path, id: &str, args: Vec<String>, metrics: String| {
            let log = sim.dir.path().join(format!("{id}.log"));
            let file = std::fs::File::create(&log).expect("log file");
            let child = tokio::process::Command::new(binary)
                .args(args)
                .env("RUST_LOG", "info")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::from(file))
                .kill_on_drop(true)
                .spawn()
                .unwrap_or_else(|e| panic!("{} starts: {e}", binary.display()));
            Process { id: id.to_string(), child, metrics, log }
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
            let mut process = spawn(&coordinator_bin, id, args, metrics.clone());
            if i == 0 {
                // The first leads: it starts alone.
                wait_until(&format!("{id} leads"), Duration::from_secs(60), || {
                    process.assert_running();
                    let metrics = metrics.clone();
                    async move {
                        let (_, text) = http_get(&metrics, "/metrics").await?;
                        text.contains("fleet_coordinator_leader 1").then_some(())
                    }
                })
                .await;
            }
            coordinators.push(process);
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
            workers.push(spawn(&worker_bin, id, args, metrics));
        }
        let mut fleet = Self { coordinators, workers, admin, shards: spec.shards };
        fleet
            .wait_for("every shard active", Duration::from_secs(90), |f| {
                std::future::ready(f.settled_owners())
            })
            .await;
        for i in 0..fleet.workers.len() {
            let (id, metrics) = (fleet.workers[i].id.clone(), fleet.workers[i].metrics.clone());
            fleet
                .wait_for(&format!("{id} ready"), Duration::from_secs(60), |_| {
                    let metrics = metrics.clone();
                    async move {
                        let (code, _) = http_get(&metrics, "/readyz").await?;
                        (code == 200).then_some(())
                    }
                })
                .await;
        }
        fleet
    }

    /// Waits until `check` answers, checking every 100 ms that every process still runs. On a
    /// timeout, or a process that exited, the panic says what the fleet shows and each process's
    /// last log lines, so that a failure in CI can be read without running it again.
    pub async fn wait_for<T, F: Future<Output = Option<T>>>(
        &mut self,
        what: &str,
        deadline: std::time::Duration,
        mut check: impl FnMut(&Self) -> F,
    ) -> T {
        let end = tokio::time::Instant::now() + deadline;
        loop {
            for p in self.coordinators.iter_mut().chain(self.workers.iter_mut()) {
                p.assert_running();
            }
            if let Some(v) = check(self).await {
                return v;
            }
            if tokio::time::Instant::now() > end {
                panic!("timed out after {deadline:?} waiting for {what}\n{}", self.diagnostics());
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// What the fleet shows (`fleetctl status`, `workers`, `shards`) and each process's last log
    /// lines.
    pub fn diagnostics(&self) -> String {
        let mut out = String::new();
        for command in ["status", "workers", "shards"] {
            let shown = fleetctl(&self.admin, &[command])
                .map_or_else(|| "(fleetctl failed)".into(), |v| v.to_string());
            out.push_str(&format!("--- fleetctl {command}: {shown}\n"));
        }
        for p in self.coordinators.iter().chain(&self.workers) {
            out.push_str(&format!("--- {} ({}):\n{}\n", p.id, p.log.display(), log_tail(&p.log, 30)));
        }
        out
    }

    /// Every shard's owner once all are active.
    pub fn settled_owners(&self) -> Option<std::collections::BTreeMap<u64, String>> {
        settled_owners(&self.admin, self.shards as usize)
    }
}

/// The `sh` blocks marked `<!-- MARKER -->` (`sim-test`, `etcd-test`) in a Markdown file, their
/// indentation removed.
pub fn marked_blocks(markdown: &str, marker: &str) -> Vec<String> {
    marked_blocks_of(markdown, marker, "sh")
}

/// The blocks of `language` (`sh`, `yaml`) marked `<!-- MARKER -->` in a Markdown file, their
/// indentation removed. A marker not right before such a block fails the test.
pub fn marked_blocks_of(markdown: &str, marker: &str, language: &str) -> Vec<String> {
    let comment = format!("<!-- {marker} -->");
    let opening = format!("```{language}");
    let lines: Vec<&str> = markdown.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != comment {
            i += 1;
            continue;
        }
        let fence = lines.get(i + 1).map(|l| l.trim_start()).unwrap_or_default();
        assert!(
            fence.trim_end() == opening,
            "{comment} must come right before a {opening} block, not {fence:?}"
        );
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
    let peer_url = format!("http://127.0.0.1:{peer}");
    let log = data_dir.with_extension("log");
    // The client port comes from `free_port`, and another test may bind it first: then this etcd
    // exits, or (worse) another test's etcd answers there. Each try checks that the member
    // serving is this one, by name, and a lost port is tried again with another.
    for attempt in 1..=3 {
        let endpoint = format!("http://127.0.0.1:{}", free_port());
        let file = std::fs::File::create(&log).expect("etcd's log file");
        let mut child = tokio::process::Command::new(&binary)
            .args(["--name", name, "--data-dir"])
            .arg(data_dir)
            .args(["--listen-client-urls", &endpoint, "--advertise-client-urls", &endpoint])
            .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("{name}={peer_url}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::from(file))
            .kill_on_drop(true)
            .spawn()
            .expect("etcd starts");
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                eprintln!(
                    "etcd {name} on {endpoint} exited ({status}), try {attempt} of 3:\n{}",
                    log_tail(&log, 10)
                );
                break;
            }
            let members = std::process::Command::new(etcd_tools().join("etcdctl"))
                .env("ETCDCTL_ENDPOINTS", &endpoint)
                .args(["member", "list", "--write-out", "simple"])
                .output();
            if let Ok(out) = members
                && out.status.success()
            {
                let ours = String::from_utf8_lossy(&out.stdout).contains(&format!(", {name}, {peer_url},"));
                assert!(
                    ours,
                    "another etcd answers on {endpoint}, not {name}: {}",
                    String::from_utf8_lossy(&out.stdout)
                );
                return Etcd { _child: child, endpoint };
            }
            assert!(
                std::time::Instant::now() < end,
                "etcd {name} did not serve on {endpoint} within 30s; its log:\n{}",
                log_tail(&log, 30)
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    panic!("etcd {name} exited three times; its log:\n{}", log_tail(&log, 30));
}
