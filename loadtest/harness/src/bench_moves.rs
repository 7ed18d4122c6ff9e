//! `loadtest bench-moves`: the gap of an in-process shard move, from the old owner's stop
//! (REVOKE received, or its last write if later) to the new owner's first possible reconcile
//! (ACTIVATE done), while Jobs keep running in the moving namespaces. Two worker runtimes share
//! one sim cluster in this process and hand each shard back and forth by the protocol's steps:
//! PREPARE → warm → REVOKE → ACTIVATE(barrier) → DROP.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use batchfleet_sim::{SimCluster, SimConfig};
use batchfleet_worker::client::{self, ClientLimits};
use batchfleet_worker::runtime::protocol::ShardRuntime;
use batchfleet_worker::runtime::shard::ShardTable;
use batchfleet_worker::runtime::watch::Progress;
use batchfleet_worker::shards::ShardSpace;
use batchfleet_worker::start::{self, JobTiming, Worker, WorkerOptions};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct BenchMovesArgs {
    /// Moves to make, one shard at a time, round robin.
    #[arg(long, default_value_t = 200)]
    pub moves: u32,
    /// S, the shards (one namespace each).
    #[arg(long, default_value_t = 4)]
    pub shards: u32,
    /// Jobs per namespace, running through the whole benchmark.
    #[arg(long, default_value_t = 10)]
    pub jobs: i32,
    /// Completions of each Job.
    #[arg(long, default_value_t = 400)]
    pub completions: i32,
    /// Parallelism of each Job.
    #[arg(long, default_value_t = 4)]
    pub parallelism: i32,
    /// How long each pod runs (the sim's `sim.batchfleet.io/run`).
    #[arg(long, default_value = "200ms")]
    pub pod_run: String,
    /// An API server without KEP-5866: the workers watch every namespace and filter by hash.
    #[arg(long)]
    pub no_shard_selector: bool,
}

/// One move's timings.
struct Move {
    shard: u32,
    gap: Duration,
    revoke: Duration,
    activate: Duration,
    /// Per watch of the new owner: kind, how far behind the barrier it was when ACTIVATE began
    /// (0 if past it), whether ACTIVATE made it list again, objects it held.
    watches: Vec<(String, u64, bool, usize)>,
}

async fn worker(sim: &SimCluster, id: &str, shards: u32) -> anyhow::Result<Worker> {
    let config = client::with_user_agent(kube::Config::new(sim.url().parse()?), &client::user_agent(id))?;
    let worker_client = client::from_config(config, ClientLimits::UNLIMITED)?;
    let opts = WorkerOptions {
        metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        // Upstream's back-offs would idle the Jobs; pods are batched every 100 ms.
        job_timing: JobTiming {
            pod_failure_backoff: Duration::from_millis(100),
            max_pod_failure_backoff: Duration::from_secs(1),
            sync_job_batch_period: Duration::from_millis(100),
        },
        worker_id: id.to_string(),
        shards,
        ..WorkerOptions::default()
    };
    let table = ShardTable::new(ShardSpace::new(shards)?);
    Ok(start::start_on_shards(worker_client, opts, table, None).await?)
}

/// One namespace per shard: the first of `bench-0`, `bench-1`, … that hashes to it.
fn namespaces(space: ShardSpace) -> Vec<String> {
    let mut by_shard: Vec<Option<String>> = vec![None; space.count() as usize];
    let mut i = 0u64;
    while by_shard.iter().any(Option::is_none) {
        let ns = format!("bench-{i}");
        let slot = &mut by_shard[space.shard_of(&ns) as usize];
        if slot.is_none() {
            *slot = Some(ns);
        }
        i += 1;
    }
    by_shard.into_iter().flatten().collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).saturating_sub(1).min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

pub async fn run(args: BenchMovesArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.moves > 0, "--moves must be positive");
    let sim = SimCluster::start(SimConfig {
        nodes: 3,
        shard_selector: !args.no_shard_selector,
        ..SimConfig::default()
    })
    .await?;
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse()?))?;
    let space = ShardSpace::new(args.shards)?;
    let a = worker(&sim, "w-a", args.shards).await?;
    let b = worker(&sim, "w-b", args.shards).await?;
    let runtimes: [Arc<ShardRuntime>; 2] = [a.runtime.clone(), b.runtime.clone()];
    for s in 0..args.shards {
        runtimes[0].prepare(s, 1)?;
        runtimes[0].activate(s, 1, 0).await?;
    }
    let namespace_api: Api<Namespace> = Api::all(client.clone());
    for ns in namespaces(space) {
        namespace_api
            .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": ns}}))?)
            .await?;
        let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
        for i in 0..args.jobs {
            let job: Job = serde_json::from_value(json!({
                "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": format!("load-{i}")},
                "spec": {"completions": args.completions, "parallelism": args.parallelism,
                         "template": {"metadata": {"annotations": {"sim.batchfleet.io/run": args.pod_run}},
                                      "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}
            }))?;
            jobs.create(&PostParams::default(), &job)
                .await
                .with_context(|| format!("creating {ns}/load-{i}"))?;
        }
    }
    eprintln!(
        "{} moves over {} shards, {} Jobs of parallelism {} per namespace, shardSelector {}",
        args.moves,
        args.shards,
        args.jobs,
        args.parallelism,
        if args.no_shard_selector { "off" } else { "on" }
    );
    let mut owner = vec![0usize; args.shards as usize];
    let mut epoch = vec![1u64; args.shards as usize];
    let mut moves = Vec::new();
    let started = Instant::now();
    for i in 0..args.moves {
        let s = i % args.shards;
        let (from, to) = (owner[s as usize], 1 - owner[s as usize]);
        epoch[s as usize] += 1;
        let e = epoch[s as usize];
        runtimes[to].prepare(s, e)?;
        runtimes[to].warmed(s).await;
        let stop = Instant::now();
        let barrier = runtimes[from].revoke(s).await?;
        let revoked = Instant::now();
        let last_write = runtimes[from].table().status(s).and_then(|st| st.last_write_at);
        let before: Vec<(String, Progress)> = runtimes[to].watch_progress(s);
        runtimes[to].activate(s, e, barrier).await?;
        let active = Instant::now();
        let after = runtimes[to].watch_progress(s);
        let from_at = last_write.map_or(stop, |w| w.max(stop));
        let watches = before
            .iter()
            .zip(&after)
            .map(|((kind, b), (_, a))| {
                (kind.clone(), barrier.saturating_sub(b.seen_rv), a.lists > b.lists, a.objects)
            })
            .collect();
        moves.push(Move {
            shard: s,
            gap: active.duration_since(from_at),
            revoke: revoked.duration_since(stop),
            activate: active.duration_since(revoked),
            watches,
        });
        runtimes[from].drop_shard(s);
        owner[s as usize] = to;
        if (i + 1) % 20 == 0 {
            eprintln!("  {} moves after {:.0}s", i + 1, started.elapsed().as_secs_f64());
        }
    }
    let sorted = |f: fn(&Move) -> Duration| {
        let mut v: Vec<Duration> = moves.iter().map(f).collect();
        v.sort();
        v
    };
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    println!("## Shard move gap ({cpus} CPUs)");
    println!();
    println!("| measure | moves | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    for (label, values) in [
        ("gap: old owner's stop → new owner's ACTIVATE done", sorted(|m| m.gap)),
        ("REVOKE (stop → answer)", sorted(|m| m.revoke)),
        ("ACTIVATE (answer → done)", sorted(|m| m.activate)),
    ] {
        println!(
            "| {label} | {} | {} | {} | {} |",
            values.len(),
            ms(percentile(&values, 0.50)),
            ms(percentile(&values, 0.99)),
            ms(*values.last().unwrap_or(&Duration::ZERO))
        );
    }
    println!();
    let kinds: Vec<String> =
        moves.first().map(|m| m.watches.iter().map(|w| w.0.clone()).collect()).unwrap_or_default();
    for (k, kind) in kinds.iter().enumerate() {
        let behind = moves.iter().filter(|m| m.watches.get(k).is_some_and(|w| w.1 > 0)).count();
        let relisted = moves.iter().filter(|m| m.watches.get(k).is_some_and(|w| w.2)).count();
        println!(
            "- {kind} watch: behind the barrier at ACTIVATE in {behind} moves, listed again in {relisted}"
        );
    }
    let mut worst: Vec<&Move> = moves.iter().collect();
    worst.sort_by_key(|m| std::cmp::Reverse(m.gap));
    println!("- slowest moves:");
    for m in worst.iter().take(5) {
        let detail: Vec<String> = m
            .watches
            .iter()
            .map(|(kind, behind, relisted, objects)| {
                format!(
                    "{kind} {behind} behind{}, {objects} objects",
                    if *relisted { ", relisted" } else { "" }
                )
            })
            .collect();
        println!(
            "  - shard {}: gap {}, REVOKE {}, ACTIVATE {} ({})",
            m.shard,
            ms(m.gap),
            ms(m.revoke),
            ms(m.activate),
            detail.join("; ")
        );
    }
    Ok(())
}
