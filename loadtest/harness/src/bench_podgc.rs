//! `loadtest bench-podgc`: the coordinator's PodGC cache and passes at cluster scale, with no API
//! server — the bytes each cached pod costs, the resident memory at N pods, and how long one pass
//! takes when there is nothing to delete (issue 12's figures).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use batchfleet_coordinator::podgc::cache::{NodeCache, PodCache};
use batchfleet_coordinator::podgc::core::{self, QUARANTINE_TIME, Quarantine};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct BenchPodgcArgs {
    /// Pods in the cache.
    #[arg(long, default_value_t = 500_000)]
    pods: usize,
    /// Nodes they run on.
    #[arg(long, default_value_t = 5_000)]
    nodes: usize,
    /// Namespaces they live in.
    #[arg(long, default_value_t = 2_000)]
    namespaces: usize,
    /// Timed passes.
    #[arg(long, default_value_t = 10)]
    passes: usize,
}

/// Resident memory of this process, in bytes, from /proc/self/statm.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

fn pod(i: usize, args: &BenchPodgcArgs) -> Pod {
    // 2% terminated: under the default threshold of 12,500 at 500k pods, so nothing is deleted.
    let phase = if i.is_multiple_of(50) { "Succeeded" } else { "Running" };
    serde_json::from_value(json!({
        "metadata": {
            "namespace": format!("team-{}", i % args.namespaces),
            "name": format!("job-{}-{:05}-x7k2q", i / 7, i % 100_000),
            "uid": format!("{:08x}-1f2e-4d3c-8b5a-{:012x}", i, i * 7919),
            "creationTimestamp": "2026-11-24T10:00:00Z",
        },
        "spec": {"nodeName": format!("node-{}", i % args.nodes), "containers": []},
        "status": {"phase": phase},
    }))
    .expect("pod")
}

pub async fn run(args: BenchPodgcArgs) -> anyhow::Result<()> {
    let mut nodes = NodeCache::default();
    for n in 0..args.nodes {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": format!("node-{n}")},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }))?;
        nodes.apply(&node);
    }
    let before = resident_bytes();
    let mut cache = PodCache::default();
    let fill = Instant::now();
    for i in 0..args.pods {
        cache.apply(&pod(i, &args));
        if (i + 1).is_multiple_of(100_000) {
            eprintln!("bench-podgc: {} pods cached", i + 1);
        }
    }
    let filled = fill.elapsed();
    let after = resident_bytes();
    let per_pod = after.saturating_sub(before) as f64 / args.pods as f64;

    let mut quarantine = Quarantine::default();
    let mut times = Vec::new();
    for _ in 0..args.passes.max(1) {
        let t = Instant::now();
        let views = cache.views();
        let mut deleted = core::gc_terminated(&views, core::DEFAULT_TERMINATED_POD_THRESHOLD).len();
        deleted += core::gc_terminating(&views, nodes.nodes()).len();
        let to_check =
            quarantine.nodes_to_check(&views, nodes.nodes(), std::time::Instant::now(), QUARANTINE_TIME);
        deleted += core::gc_orphaned(&views, &BTreeSet::new()).len() + to_check.len();
        deleted += core::gc_unscheduled_terminating(&views).len();
        times.push(t.elapsed());
        anyhow::ensure!(
            deleted == 0,
            "the generated cluster should have nothing to collect, found {deleted}"
        );
    }
    times.sort();
    println!("| what | figure |");
    println!("|---|---:|");
    println!("| pods cached | {} ({} namespaces, {} nodes) |", args.pods, args.namespaces, args.nodes);
    println!("| resident memory growth per cached pod | {per_pod:.0} bytes |");
    println!("| process resident memory with the cache | {:.0} MB |", after as f64 / 1e6);
    println!("| filling the cache (decoding included) | {} |", ms(filled));
    println!("| one pass, nothing to delete: median | {} |", ms(times[times.len() / 2]));
    println!("| one pass, nothing to delete: worst of {} | {} |", times.len(), ms(times[times.len() - 1]));
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
