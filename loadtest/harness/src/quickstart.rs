//! `loadtest up`: the sim cluster, the fleet beside it as separate processes (a coordinator and
//! three workers), and a small mix of Jobs (succeeding, failing and retried, Indexed) to watch
//! through kubectl and fleetctl, with live progress.

use std::time::Duration;

use anyhow::Context;
use batchfleet_sim::SimCluster;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

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

/// Runs the quickstart on a started sim until Ctrl-C.
pub async fn run(sim: &SimCluster, kubeconfig: &std::path::Path) -> anyhow::Result<()> {
    let config = kube::Config::new(sim.url().parse()?);
    let log_dir = kubeconfig.parent().unwrap_or(std::path::Path::new(".")).join("fleet-logs");
    let layout = crate::fleet_processes::FleetLayout::default();
    let mut fleet = crate::fleet_processes::start(kubeconfig, &layout, &log_dir).await?;
    println!("fleet: coordinator-0 and workers w-0, w-1, w-2 (logs in {})", log_dir.display());
    fleet.wait_placed(Duration::from_secs(120)).await?;
    for w in fleet.workers().await {
        println!("  {:<6} {} shards", w.name, w.shards);
    }
    println!("  fleetctl --admin {} workers | shards | drain w-0 | …", fleet.admin_urls.join(","));
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
            status = fleet.coordinators[0].wait() => anyhow::bail!("the coordinator stopped: {status:?}"),
            r = tokio::signal::ctrl_c() => {
                r.context("waiting for Ctrl-C")?;
                println!("stopping");
                return Ok(());
            }
        }
    }
}
