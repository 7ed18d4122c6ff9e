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

/// A sim cluster of this test with its kubeconfig (and audit log) in a directory of its own.
pub struct Sim {
    pub cluster: SimCluster,
    pub dir: tempfile::TempDir,
}

impl Sim {
    pub async fn start(config: SimConfig) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
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
