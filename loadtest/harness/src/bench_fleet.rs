//! `loadtest bench-fleet`: the fleet as processes (two coordinators, three workers) on a sim
//! cluster under a steady Job load, measured from the outside through the admin API:
//! - graceful moves: an operator's `move` until the shard is active on its new owner;
//! - a drain until the worker owns nothing;
//! - a worker killed with SIGKILL until every shard is active again;
//! - the leading coordinator killed until the standby leads with every shard active.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use batchfleet_proto::v1 as pb;
use batchfleet_sim::{SimCluster, SimConfig};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::fleet_processes::{self, FleetLayout, FleetProcesses};

#[derive(clap::Args, Debug)]
pub struct BenchFleetArgs {
    /// Operator moves to time.
    #[arg(long, default_value_t = 40)]
    pub moves: usize,
    /// Namespaces the load's Jobs spread over (one per shard at most).
    #[arg(long, default_value_t = 32)]
    pub namespaces: usize,
    #[arg(long, default_value_t = 64)]
    pub shards: u32,
    /// The workers' --lease-duration.
    #[arg(long, default_value = "15s")]
    pub worker_lease: String,
    /// Where to write the move-latency plot (SVG).
    #[arg(long, default_value = "target/bench/fleet-moves.svg")]
    pub plot: PathBuf,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn owners(fleet: &FleetProcesses) -> Option<BTreeMap<u32, (String, String)>> {
    let shards = fleet.admin().await?.shards(pb::ShardsRequest {}).await.ok()?.into_inner().shards;
    Some(shards.into_iter().map(|s| (s.shard, (s.owner, s.state))).collect())
}

async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if check().await {
            return Ok(started.elapsed());
        }
        anyhow::ensure!(started.elapsed() < timeout, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A steady load: every namespace gets a Job of 3 short pods every couple of seconds.
fn start_load(client: kube::Client, namespaces: usize) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for round in 0u64.. {
            for i in 0..namespaces {
                let jobs: Api<Job> = Api::namespaced(client.clone(), &format!("bench-{i}"));
                let job: Result<Job, _> = serde_json::from_value(json!({
                    "metadata": {"name": format!("load-{round}")},
                    "spec": {"completions": 3, "parallelism": 3, "ttlSecondsAfterFinished": 5, "template": {
                        "metadata": {"annotations": {"sim.batchfleet.io/run": "500ms"}},
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
                }));
                if let Ok(job) = job {
                    let _ = jobs.create(&PostParams::default(), &job).await;
                }
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    })
}

pub async fn run(args: BenchFleetArgs) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("bench-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let sim = SimCluster::start(SimConfig { nodes: 4, ..SimConfig::default() })
        .await
        .context("starting the sim")?;
    let kubeconfig = dir.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig)?;
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse()?))?;
    let nss: Api<Namespace> = Api::all(client.clone());
    for i in 0..args.namespaces {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": format!("bench-{i}")}}))?;
        nss.create(&PostParams::default(), &ns).await?;
    }
    let layout = FleetLayout {
        shards: args.shards,
        coordinators: 2,
        workers: 3,
        worker_lease: Some(args.worker_lease.clone()),
        ..FleetLayout::default()
    };
    let mut fleet = fleet_processes::start(&kubeconfig, &layout, &dir.join("logs")).await?;
    let placed_started = Instant::now();
    fleet.wait_placed(Duration::from_secs(120)).await?;
    let initial_placement = placed_started.elapsed();
    let load = start_load(client.clone(), args.namespaces);

    // Graceful moves, one at a time, each to the next worker round the ring.
    eprintln!("timing {} moves under load", args.moves);
    let mut move_seconds = Vec::new();
    for i in 0..args.moves {
        let shard = (i as u32 * 7) % args.shards;
        let current = owners(&fleet).await.context("shards")?;
        let from = current[&shard].0.clone();
        let to = fleet.workers.iter().map(|(w, _)| w.clone()).find(|w| *w != from).unwrap_or_default();
        let mut rpc = fleet.admin().await.context("admin API")?;
        let started = Instant::now();
        rpc.r#move(pb::ShardToWorkerRequest { shard, worker: to.clone() }).await?;
        wait_for("a move", Duration::from_secs(60), || async {
            owners(&fleet).await.is_some_and(|o| o[&shard] == (to.clone(), "active".to_string()))
        })
        .await?;
        move_seconds.push(started.elapsed().as_secs_f64());
        if (i + 1) % 10 == 0 {
            eprintln!("  {}/{} moves", i + 1, args.moves);
        }
    }
    move_seconds.sort_by(f64::total_cmp);

    eprintln!("draining w-0");
    let mut rpc = fleet.admin().await.context("admin API")?;
    rpc.drain(pb::WorkerRequest { worker: "w-0".into() }).await?;
    let drain = wait_for("the drain", Duration::from_secs(120), || async {
        owners(&fleet).await.is_some_and(|o| o.values().all(|(w, s)| w != "w-0" && s == "active"))
    })
    .await?;
    rpc.undrain(pb::WorkerRequest { worker: "w-0".into() }).await?;

    eprintln!("killing w-1 with SIGKILL");
    fleet.workers[1].1.start_kill()?;
    let reassigned = wait_for("reassignment", Duration::from_secs(120), || async {
        owners(&fleet).await.is_some_and(|o| o.values().all(|(w, s)| w != "w-1" && s == "active"))
    })
    .await?;

    eprintln!("killing the leading coordinator with SIGKILL");
    let leader =
        fleet.admin().await.context("admin")?.status(pb::StatusRequest {}).await?.into_inner().leader;
    let index = leader.strip_prefix("coordinator-").and_then(|i| i.parse::<usize>().ok()).unwrap_or(0);
    let before = owners(&fleet).await.context("shards")?;
    fleet.coordinators[index].start_kill()?;
    let _ = fleet.coordinators[index].wait().await;
    let failover = wait_for("fail-over", Duration::from_secs(120), || async {
        let Some(rpc) = fleet.admin().await else { return false };
        let mut rpc = rpc;
        let leads = rpc.status(pb::StatusRequest {}).await.is_ok_and(|s| s.into_inner().leader != leader);
        leads && owners(&fleet).await.is_some_and(|o| o.values().all(|(_, s)| s == "active"))
    })
    .await?;
    let after = owners(&fleet).await.context("shards")?;
    let moved = before.iter().filter(|(s, o)| after.get(s) != Some(o)).count();
    load.abort();

    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    println!(
        "## fleet benchmark ({cpus} CPUs; {} shards, 3 workers, 2 coordinators, worker lease {})",
        args.shards, args.worker_lease
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!("| initial placement (all shards active) | {:.2} s |", initial_placement.as_secs_f64());
    println!(
        "| graceful move, request → active on the new owner ({} moves) | p50 {:.3} s, p99 {:.3} s, max {:.3} s |",
        move_seconds.len(),
        percentile(&move_seconds, 0.5),
        percentile(&move_seconds, 0.99),
        move_seconds.last().copied().unwrap_or(f64::NAN)
    );
    println!("| drain of one worker (all its shards moved) | {:.2} s |", drain.as_secs_f64());
    println!("| SIGKILL of a worker → every shard active again | {:.2} s |", reassigned.as_secs_f64());
    println!(
        "| SIGKILL of the leader → standby leads, every shard active | {:.2} s ({moved} shards moved) |",
        failover.as_secs_f64()
    );
    crate::plot::latency_cdf_chart(
        &args.plot,
        "graceful shard moves under load: request to active on the new owner",
        &[crate::plot::Series { name: "move".into(), points: crate::plot::cdf_points(&move_seconds, 200) }],
        None,
    )?;
    eprintln!("plot: {}", args.plot.display());
    Ok(())
}
