//! `loadtest up`: the sim cluster, the fleet beside it as separate processes (a coordinator and
//! three workers, or with `--standalone` one worker that owns every shard), and a small mix of
//! Jobs (succeeding, failing and retried, Indexed) to watch through kubectl (and fleetctl), with
//! live progress.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use batchfleet_sim::SimCluster;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::process::Child;

use crate::fleet_processes::{self, FleetLayout, FleetProcesses};

const NAMESPACE: &str = "demo";

fn demo_job(name: &str, spec: Value, annotations: Value) -> anyhow::Result<Job> {
    let mut spec = spec;
    spec["template"] = json!({
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 2"]}]}
    });
    Ok(serde_json::from_value(
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}),
    )?)
}

/// The demo mix: what each Job shows a newcomer.
fn demo_jobs() -> anyhow::Result<Vec<(Job, &'static str)>> {
    Ok(vec![
        (
            demo_job(
                "hello",
                json!({"completions": 6, "parallelism": 2}),
                json!({"sim.batchfleet.io/run": "2s"}),
            )?,
            "6 pods, 2 at a time: Complete",
        ),
        (
            demo_job(
                "flaky",
                json!({"completions": 1, "backoffLimit": 4}),
                json!({"sim.batchfleet.io/run": "1s", "sim.batchfleet.io/exit-code": "1", "sim.batchfleet.io/fail-attempts": "2"}),
            )?,
            "fails twice, retried after 10s and 20s back-off: Complete",
        ),
        (
            demo_job(
                "doomed",
                json!({"backoffLimit": 1}),
                json!({"sim.batchfleet.io/run": "1s", "sim.batchfleet.io/exit-code": "3"}),
            )?,
            "always exits 3: Failed, BackoffLimitExceeded",
        ),
        (
            demo_job("tidy", json!({"ttlSecondsAfterFinished": 10}), json!({"sim.batchfleet.io/run": "1s"}))?,
            "ttlSecondsAfterFinished 10: deleted with its pod 10s after it completes",
        ),
        (
            demo_job(
                "indexed",
                json!({"completionMode": "Indexed", "completions": 8, "parallelism": 3}),
                json!({"sim.batchfleet.io/run": "1500ms", "sim.batchfleet.io/run-by-index": "0=500ms,7=4s"}),
            )?,
            "Indexed, 8 completions: completedIndexes 0-7",
        ),
    ])
}

fn summary(job: &Job) -> String {
    let st = job.status.clone().unwrap_or_default();
    let finished = st
        .conditions
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.status == "True" && (c.type_ == "Complete" || c.type_ == "Failed"))
        .map(|c| format!("{} ({})", c.type_, c.reason.unwrap_or_default()))
        .next()
        .unwrap_or_else(|| "Running".into());
    let indexes =
        st.completed_indexes.filter(|s| !s.is_empty()).map(|s| format!(" indexes {s}")).unwrap_or_default();
    format!(
        "{:<8} active {:>2} succeeded {:>2} failed {:>2}{indexes}  {finished}",
        job.metadata.name.as_deref().unwrap_or(""),
        st.active.unwrap_or(0),
        st.succeeded.unwrap_or(0),
        st.failed.unwrap_or(0)
    )
}

fn is_finished(job: &Job) -> bool {
    job.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
        cs.iter().any(|c| c.status == "True" && (c.type_ == "Complete" || c.type_ == "Failed"))
    })
}

/// What runs the controllers beside the sim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A coordinator and three workers, each a process; their gRPC over TLS with a throwaway CA
    /// when `tls`, else plaintext.
    Fleet { tls: bool },
    /// One `fleet-worker --standalone` process that owns every shard.
    Standalone,
}

/// The controllers' processes, stopped when dropped.
enum Controllers {
    Fleet(FleetProcesses),
    Standalone(Child),
}

impl Controllers {
    /// Starts them and waits until they act for every shard, printing what a user can look at.
    async fn start(mode: Mode, kubeconfig: &Path) -> anyhow::Result<Self> {
        let log_dir = kubeconfig.parent().unwrap_or(Path::new(".")).join("fleet-logs");
        match mode {
            Mode::Fleet { tls } => {
                let tls_dir = kubeconfig.parent().unwrap_or(Path::new(".")).join("tls");
                let layout = FleetLayout { tls_dir: tls.then(|| tls_dir.clone()), ..FleetLayout::default() };
                let fleet = fleet_processes::start(kubeconfig, &layout, &log_dir).await?;
                println!("fleet: coordinator-0 and workers w-0, w-1, w-2 (logs in {})", log_dir.display());
                // Generous: a debug build on a busy machine places 256 shards in about a minute.
                fleet.wait_placed(Duration::from_secs(240)).await?;
                for w in fleet.workers().await {
                    println!("  {:<6} {} shards", w.name, w.shards);
                }
                if tls {
                    println!("TLS: the CA, certificates and admin policy are in {}", tls_dir.display());
                }
                println!(
                    "  fleetctl {} --admin {} workers | shards | drain w-0 | …",
                    fleet.fleetctl_flags().join(" "),
                    fleet.admin_urls.join(",")
                );
                Ok(Self::Fleet(fleet))
            }
            Mode::Standalone => {
                let metrics: SocketAddr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
                let mut worker = fleet_processes::start_standalone(kubeconfig, metrics, &log_dir, &[])?;
                fleet_processes::wait_standalone_ready(
                    &mut worker,
                    metrics,
                    &log_dir,
                    Duration::from_secs(120),
                )
                .await?;
                println!(
                    "standalone worker: every shard, no coordinator; metrics at http://{metrics}/metrics (log in {}/standalone.log)",
                    log_dir.display()
                );
                Ok(Self::Standalone(worker))
            }
        }
    }

    /// Resolves when the process the demo depends on stopped.
    async fn stopped(&mut self) -> anyhow::Error {
        match self {
            Self::Fleet(fleet) => {
                let status = fleet.coordinators[0].wait().await;
                anyhow::anyhow!("the coordinator stopped: {status:?}")
            }
            Self::Standalone(worker) => {
                let status = worker.wait().await;
                anyhow::anyhow!("the standalone worker stopped: {status:?}")
            }
        }
    }
}

/// Runs the quickstart on a started sim until Ctrl-C.
pub async fn run(sim: &SimCluster, kubeconfig: &Path, mode: Mode) -> anyhow::Result<()> {
    let config = kube::Config::new(sim.url().parse()?);
    // Ctrl-C while they start stops them too (dropping them kills their processes).
    let mut controllers = tokio::select! {
        started = Controllers::start(mode, kubeconfig) => started?,
        r = tokio::signal::ctrl_c() => {
            r.context("waiting for Ctrl-C")?;
            println!("stopping");
            return Ok(());
        }
    };
    let client = kube::Client::try_from(config)?;
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    match nss.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e).context("creating the demo namespace"),
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let cronjobs: Api<CronJob> = Api::namespaced(client, NAMESPACE);
    let ticker: CronJob = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "ticker", "namespace": NAMESPACE},
        "spec": {"schedule": "@every 20s", "concurrencyPolicy": "Forbid", "successfulJobsHistoryLimit": 2,
                 "jobTemplate": {"spec": {"ttlSecondsAfterFinished": 300, "template": {
                     "metadata": {"annotations": {"sim.batchfleet.io/run": "5s"}},
                     "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}}}}}
    }))?;
    println!();
    println!("demo Jobs in namespace {NAMESPACE}:");
    for (job, what) in demo_jobs()? {
        let name = job.metadata.name.clone().unwrap_or_default();
        match jobs.create(&PostParams::default(), &job).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e).with_context(|| format!("creating Job {name}")),
        }
        println!("  {name:<8} {what}");
    }
    match cronjobs.create(&PostParams::default(), &ticker).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e).context("creating CronJob ticker"),
    }
    println!(
        "  ticker   CronJob @every 20s, Forbid, keeps the 2 newest successful Jobs; Job names carry the\n           scheduled minute, as upstream's do, so it starts at most one Job a minute"
    );
    println!();
    println!("watch them with:");
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  .tools/bin/kubectl -n {NAMESPACE} get cronjobs,jobs,pods -w");
    println!("  .tools/bin/kubectl -n {NAMESPACE} describe job flaky");
    println!();
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    let mut reported_done = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let mut list = jobs.list(&Default::default()).await.context("listing the demo Jobs")?;
                // The CronJob's runs come and go; the report follows the fixed demo Jobs.
                list.items.retain(|j| j.metadata.owner_references.is_none());
                if !reported_done {
                    for j in &list.items {
                        println!("{}", summary(j));
                    }
                    println!("---");
                    if !list.items.is_empty() && list.items.iter().all(is_finished) {
                        println!("every demo Job finished; the cluster keeps running for kubectl. Press Ctrl-C to stop.");
                        reported_done = true;
                    }
                }
            }
            stopped = controllers.stopped() => return Err(stopped),
            r = tokio::signal::ctrl_c() => {
                r.context("waiting for Ctrl-C")?;
                println!("stopping");
                return Ok(());
            }
        }
    }
}
