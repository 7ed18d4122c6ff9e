//! Shared fixtures for the sim's integration tests: a fresh sim cluster per test on a free
//! port, kube-rs clients, the real kubectl, and deadline-bounded waits.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use batchfleet_sim::{SimCluster, SimConfig};

pub async fn start(config: SimConfig) -> SimCluster {
    let _ = tracing_subscriber::fmt().with_test_writer().with_env_filter("warn").try_init();
    SimCluster::start(config).await.expect("sim cluster starts")
}

/// A sim with two nodes, a running kubelet and one-second bookmarks.
pub async fn sim() -> SimCluster {
    start(SimConfig { nodes: 2, bookmark_interval: Duration::from_secs(1), ..SimConfig::default() }).await
}

/// A sim without scheduler and kubelet, for tests of the API alone.
pub async fn api_only() -> SimCluster {
    start(SimConfig {
        nodes: 0,
        kubelet: false,
        bookmark_interval: Duration::from_secs(1),
        ..SimConfig::default()
    })
    .await
}

/// A kube-rs client that does not retry, so injected errors surface.
pub fn client(sim: &SimCluster) -> kube::Client {
    let mut config = kube::Config::new(sim.url().parse().expect("sim url"));
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

/// A kube-rs client with the default retry policy, as controllers use.
pub fn retrying_client(sim: &SimCluster) -> kube::Client {
    let config = kube::Config::new(sim.url().parse().expect("sim url"));
    kube::Client::try_from(config).expect("client")
}

// Not every test binary that includes this module waits.
#[allow(unused_imports)]
pub use batchfleet_sim::testing::wait_until;

/// The real kubectl 1.37, against one sim cluster, with its own discovery cache.
pub struct Kubectl {
    binary: PathBuf,
    dir: tempfile::TempDir,
}

impl Kubectl {
    /// `None` when no kubectl 1.37 is installed (scripts/setup installs it).
    pub fn for_sim(sim: &SimCluster) -> Kubectl {
        let binary = std::env::var_os("BATCHFLEET_KUBECTL")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin/kubectl"));
        assert!(binary.exists(), "kubectl not found at {}: run scripts/setup", binary.display());
        let dir = tempfile::tempdir().expect("tempdir");
        sim.write_kubeconfig(&dir.path().join("kubeconfig")).expect("kubeconfig");
        Kubectl { binary, dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.binary);
        cmd.args(args)
            .env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .env("KUBECACHEDIR", self.dir.path().join("cache"))
            .env("HOME", self.dir.path())
            .kill_on_drop(true);
        cmd
    }

    /// Runs kubectl to completion within 60s.
    pub async fn run(&self, args: &[&str]) -> Output {
        let fut = self.command(args).output();
        tokio::time::timeout(Duration::from_secs(60), fut)
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish in 60s"))
            .expect("kubectl runs")
    }

    /// Runs kubectl and returns stdout, failing the test on a non-zero exit.
    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn write(&self, name: &str, content: &str) -> String {
        let p = self.path(name);
        std::fs::write(&p, content).expect("write manifest");
        p.to_string_lossy().into_owned()
    }
}

/// A raw request through kube-rs's client: status, headers and body as text.
pub async fn raw(
    client: &kube::Client,
    method: &str,
    uri: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, http::HeaderMap, String) {
    let mut req = http::Request::builder().method(method).uri(uri);
    if let Some(ct) = content_type {
        req = req.header(http::header::CONTENT_TYPE, ct);
    }
    let req = req.body(kube::client::Body::from(body)).expect("request");
    let resp = client.send(req).await.expect("response");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = http_body_util::BodyExt::collect(resp.into_body()).await.expect("body").to_bytes();
    (status, headers, String::from_utf8_lossy(&bytes).into_owned())
}
