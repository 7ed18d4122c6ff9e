//! `loadtest bench-podgc`: the coordinator's PodGC cache and passes at cluster scale, with no API
//! server — the bytes each cached pod costs, the resident memory at N pods, and how long one pass
//! takes when there is nothing to delete; then how fast it deletes through an in-process sim,
//! with and without a client rate limit (issue 12's figures).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use std::sync::Arc;

use batchfleet_coordinator::kube_client::{self, ClientLimits};
use batchfleet_coordinator::leader::{self, ElectionTiming};
use batchfleet_coordinator::podgc::cache::{NodeCache, PodCache};
use batchfleet_coordinator::podgc::controller::{self, PodGcConfig, PodGcMetrics};
use batchfleet_coordinator::podgc::core::{self, QUARANTINE_TIME, Quarantine};
use batchfleet_coordinator::podgc::pod_facts::PodFacts;
use batchfleet_coordinator::store::kubernetes::KubernetesStore;
use batchfleet_sim::{SimCluster, SimConfig};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;

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
    /// Also delete this many terminated pods over the threshold through an in-process sim
    /// cluster, unthrottled (0: skip).
    #[arg(long, default_value_t = 50_000)]
    delete: usize,
    /// Pods deleted again with the client limited to `--qps` (0: skip).
    #[arg(long, default_value_t = 2_000)]
    delete_limited: usize,
    /// The client's rate limit for the limited run (kube-controller-manager's --kube-api-qps).
    #[arg(long, default_value_t = 100.0)]
    qps: f64,
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
        cache.apply(&PodFacts::from(&pod(i, &args)));
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
    let unthrottled =
        if args.delete > 0 { Some(deletion_rate(args.delete, ClientLimits::UNLIMITED).await?) } else { None };
    let limited = if args.delete_limited > 0 {
        Some(
            deletion_rate(args.delete_limited, ClientLimits { qps: args.qps, burst: 1, max_in_flight: 0 })
                .await?,
        )
    } else {
        None
    };
    println!("| what | figure |");
    println!("|---|---:|");
    println!("| pods cached | {} ({} namespaces, {} nodes) |", args.pods, args.namespaces, args.nodes);
    println!("| resident memory growth per cached pod | {per_pod:.0} bytes |");
    println!("| process resident memory with the cache | {:.0} MB |", after as f64 / 1e6);
    println!("| filling the cache (decoding included) | {} |", ms(filled));
    println!("| one pass, nothing to delete: median | {} |", ms(times[times.len() / 2]));
    println!("| one pass, nothing to delete: worst of {} | {} |", times.len(), ms(times[times.len() - 1]));
    if let Some((n, took)) = unthrottled {
        println!(
            "| {n} terminated pods deleted through the sim, no client limit | {:.1} s, {:.0} pods/s |",
            took.as_secs_f64(),
            n as f64 / took.as_secs_f64()
        );
    }
    if let Some((n, took)) = limited {
        let rate = n as f64 / took.as_secs_f64();
        println!(
            "| {n} deleted with --kube-api-qps {} | {:.1} s, {rate:.0} pods/s ({:.2} × the limit) |",
            args.qps,
            took.as_secs_f64(),
            rate / args.qps
        );
    }
    Ok(())
}

/// Creates `n` terminated pods (plus the threshold's worth) in an in-process sim cluster, runs the
/// coordinator's PodGC on them as leader, and times until the `n` over the threshold are gone.
async fn deletion_rate(n: usize, limit: ClientLimits) -> anyhow::Result<(usize, Duration)> {
    use futures::StreamExt;
    let threshold = 100;
    let sim = SimCluster::start(SimConfig { nodes: 1, kubelet: false, ..SimConfig::default() }).await?;
    let config = || kube::Config::new(sim.url().parse().expect("the sim's url"));
    let setup = kube::Client::try_from(config())?;
    let pods: Api<Pod> = Api::namespaced(setup.clone(), "default");
    let created = std::sync::atomic::AtomicUsize::new(0);
    futures::stream::iter(0..n + threshold)
        .map(|i| {
            let (pods, created) = (&pods, &created);
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("done-{i:06}")},
                    "spec": {"nodeName": "sim-node-0", "containers": [{"name": "c", "image": "busybox"}]}
                }))?;
                pods.create(&PostParams::default(), &pod).await?;
                let done = json!({"status": {"phase": "Succeeded"}});
                pods.patch_status(&format!("done-{i:06}"), &PatchParams::default(), &Patch::Merge(&done))
                    .await?;
                let c = created.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if c.is_multiple_of(10_000) {
                    eprintln!("bench-podgc: {c} terminated pods created");
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<()>>>()?;

    let client = kube_client::from_config(config(), &kube_client::user_agent("bench"), limit)?;
    let (stop_tx, stop) = watch::channel(false);
    let store = Arc::new(KubernetesStore::new(setup, "kube-system"));
    let (leadership, _election) =
        leader::start(store, "bench".into(), ElectionTiming::default(), stop.clone());
    let registry = prometheus::Registry::new();
    let metrics = PodGcMetrics::register(&registry)?;
    let gc_config = PodGcConfig {
        terminated_pod_threshold: threshold,
        period: Duration::from_millis(200),
        ..PodGcConfig::default()
    };
    let started = Instant::now();
    tokio::spawn(controller::run(client, gc_config, metrics, leadership, stop));
    let mut last_report = Instant::now();
    loop {
        let deleted: u64 = registry
            .gather()
            .iter()
            .filter(|m| m.name() == "pod_gc_collector_force_delete_pods_total")
            .flat_map(|m| m.get_metric().iter())
            .map(|m| m.get_counter().value() as u64)
            .sum();
        if deleted as usize >= n {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(5) {
            eprintln!("bench-podgc: {deleted} of {n} deleted");
            last_report = Instant::now();
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(1800),
            "deletion did not finish in 30 minutes"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed();
    let _ = stop_tx.send(true);
    Ok((n, took))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
