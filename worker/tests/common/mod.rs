//! Fixtures for the worker's tests against the sim cluster: a fresh sim and a standalone worker
//! per test, on free ports; Job builders; deadline-bounded waits.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use batchfleet_sim::{SimCluster, SimConfig};
use batchfleet_worker::client::ClientLimits;
use batchfleet_worker::start::{self, JobTiming, Worker, WorkerOptions};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

pub struct Env {
    pub sim: SimCluster,
    pub worker: Worker,
    pub client: kube::Client,
}

/// Fast back-offs (100ms doubling to 1s, 100ms batching), so failure cases finish in seconds.
pub fn fast_timing() -> JobTiming {
    JobTiming {
        pod_failure_backoff: Duration::from_millis(100),
        max_pod_failure_backoff: Duration::from_secs(1),
        sync_job_batch_period: Duration::from_millis(100),
    }
}

/// A sim and a worker with [`fast_timing`].
pub async fn start() -> Env {
    start_with(WorkerOptions { job_timing: fast_timing(), ..WorkerOptions::default() }).await
}

/// A sim and a worker whose CronJob clock runs 60 times faster than real time: a minute per
/// second.
pub async fn start_fast_clock() -> Env {
    let clock = std::sync::Arc::new(batchfleet_worker::clock::ScaledClock::new(jiff::Timestamp::now(), 60.0));
    start_with(WorkerOptions { job_timing: fast_timing(), clock, ..WorkerOptions::default() }).await
}

pub async fn start_with(opts: WorkerOptions) -> Env {
    let _ = tracing_subscriber::fmt().with_test_writer().with_env_filter("warn").try_init();
    let sim = SimCluster::start(SimConfig { nodes: 3, ..SimConfig::default() }).await.expect("sim starts");
    let mut config = kube::Config::new(sim.url().parse().expect("url"));
    config.default_retry = true;
    let worker_client = batchfleet_worker::client::ordered_from_config(
        config.clone(),
        ClientLimits::UNLIMITED,
        None,
        &batchfleet_worker::client::TokenOrder::Arrival,
        opts.api_protocol,
    )
    .expect("client");
    let opts = WorkerOptions { metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)), ..opts };
    let worker = start::start_with_client(worker_client, opts).await.expect("worker starts");
    let client = kube::Client::try_from(config).expect("client");
    Env { sim, worker, client }
}

/// A Job whose pods run as the sim annotations say.
pub fn job(name: &str, spec: Value, annotations: Value) -> Job {
    let mut spec = spec;
    spec["template"] = json!({
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": spec.get("restartPolicy").cloned().unwrap_or(json!("Never")),
                 "containers": [{"name": "main", "image": "busybox"}]}
    });
    if let Some(s) = spec.as_object_mut() {
        s.remove("restartPolicy");
    }
    serde_json::from_value(
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}),
    )
    .expect("job")
}

// Not every test binary that includes this module waits.
#[allow(unused_imports)]
pub use batchfleet_sim::testing::wait_until;

/// Waits for the Job to have a True condition of `kind`; returns the Job.
pub async fn wait_condition(api: &Api<Job>, name: &str, kind: &str, deadline: Duration) -> Job {
    wait_until(&format!("Job {name} condition {kind}"), deadline, || async {
        let j = api.get(name).await.ok()?;
        let has =
            j.status.as_ref()?.conditions.as_ref()?.iter().any(|c| c.type_ == kind && c.status == "True");
        has.then_some(j)
    })
    .await
}

pub fn condition<'a>(job: &'a Job, kind: &str) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == kind)
}

/// Reasons of the core/v1 Events regarding the Job, as `kubectl describe` lists them.
pub async fn event_reasons(client: &kube::Client, ns: &str, name: &str) -> Vec<String> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name},involvedObject.kind=Job"));
    api.list(&lp).await.map(|l| l.items.into_iter().filter_map(|e| e.reason).collect()).unwrap_or_default()
}

/// The worker's /metrics text.
pub async fn metrics(env: &Env) -> String {
    let addr = env.worker.metrics_addr;
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("metrics connect");
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").await.expect("write");
    let mut out = String::new();
    stream.read_to_string(&mut out).await.expect("read");
    out
}

/// kubectl (1.37: `BATCHFLEET_KUBECTL`, else the one `scripts/setup` installs) against a test's
/// sim, as a user runs it: a kubeconfig, cache and HOME of its own in a temporary folder.
pub struct Kubectl {
    bin: std::path::PathBuf,
    dir: tempfile::TempDir,
}

impl Kubectl {
    pub fn for_sim(sim: &SimCluster) -> Self {
        let bin = std::env::var_os("BATCHFLEET_KUBECTL").map(std::path::PathBuf::from).unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/kubectl")
        });
        assert!(bin.exists(), "kubectl not found at {}: run scripts/setup", bin.display());
        let dir = tempfile::tempdir().expect("a temporary folder");
        sim.write_kubeconfig(&dir.path().join("kubeconfig")).expect("the sim's kubeconfig");
        Self { bin, dir }
    }

    /// The folder of its kubeconfig, for files a test hands to kubectl.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Runs `kubectl ARGS`; asserts that it succeeded and answers its standard output, trimmed.
    pub async fn run(&self, args: &[&str]) -> String {
        let dir = self.dir.path();
        let out = tokio::process::Command::new(&self.bin)
            .args(args)
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .env("KUBECACHEDIR", dir.join("cache"))
            .env("HOME", dir)
            .output()
            .await
            .expect("kubectl runs");
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}
