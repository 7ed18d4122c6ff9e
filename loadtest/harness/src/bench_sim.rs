//! `loadtest bench-sim`: how fast the sim cluster serves kube-rs clients over loopback — creates
//! and updates per second, watch events delivered per second to 1, 10 and 100 watchers, and
//! resident memory per 100k stored pods. The sim runs as a separate process (`loadtest sim`), so
//! its memory is measured alone.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Pods to create (and then update); memory is reported per 100k of them.
    #[arg(long, default_value_t = 100_000)]
    pub pods: usize,
    /// Concurrent requests in flight during the create and update phases.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Client connections the requests spread over.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Watcher counts to measure fan-out with.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100")]
    pub watchers: Vec<usize>,
    /// Seconds each fan-out measurement lasts.
    #[arg(long, default_value_t = 10)]
    pub watch_seconds: u64,
    /// Skip the update phase.
    #[arg(long)]
    pub no_updates: bool,
    /// Pods created with JSON bodies and then with protobuf bodies, back to back, to compare the
    /// two encodings in one run (0 skips the comparison).
    #[arg(long, default_value_t = 20_000)]
    pub encoding_pods: usize,
    /// Where to write the fan-out plot (SVG).
    #[arg(long, default_value = "target/bench/sim-fanout.svg")]
    pub plot: PathBuf,
}

/// What the fan-out watchers watch: full pods, or small ConfigMaps (client decoding cost aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Object {
    Pod,
    ConfigMap,
}

pub(crate) struct SimProcess {
    child: tokio::process::Child,
    pub(crate) url: String,
    pid: u32,
}

impl SimProcess {
    pub(crate) async fn start() -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = std::env::temp_dir().join(format!("bench-sim-{}", std::process::id()));
        let kubeconfig: PathBuf = dir.join("kubeconfig");
        let exe = std::env::current_exe()?;
        let child = tokio::process::Command::new(exe)
            .args(["sim", "--listen", &format!("127.0.0.1:{port}"), "--nodes", "0", "--no-kubelet"])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting `loadtest sim`")?;
        let pid = child.id().context("sim pid")?;
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                break;
            }
            if Instant::now() > deadline {
                bail!("the sim did not start listening on {port}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Self { child, url, pid })
    }

    /// CPU seconds the sim process has used (user + system).
    pub(crate) fn cpu_seconds(&self) -> anyhow::Result<f64> {
        crate::proc_stat::cpu_seconds(&self.pid.to_string())
    }

    fn rss_bytes(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .context("VmRSS")?;
        Ok(kb * 1024)
    }
}

fn client(url: &str) -> anyhow::Result<kube::Client> {
    let mut config = kube::Config::new(url.parse()?);
    config.default_retry = false;
    Ok(kube::Client::try_from(config)?)
}

fn bench_pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("pod-{i:07}"), "labels": {"app": "bench", "batch.kubernetes.io/job-name": format!("job-{}", i / 100)}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}]}
    }))
    .expect("static pod")
}

/// Creates `pods` pods with JSON bodies, then as many with protobuf bodies (and protobuf accepted
/// first, as client-go sends them), each into a namespace of its own; returns (creates/s, sim
/// cores) for each.
async fn compare_encodings(
    sim: &SimProcess,
    clients: &[kube::Client],
    pods: usize,
    concurrency: usize,
) -> anyhow::Result<((f64, f64), (f64, f64))> {
    let nss: Api<Namespace> = Api::all(clients[0].clone());
    for ns in ["encoding-json", "encoding-protobuf"] {
        nss.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": ns}}))?)
            .await?;
    }
    eprintln!("creating {pods} pods with JSON bodies, then {pods} with protobuf bodies");
    let cpu_before = sim.cpu_seconds()?;
    let started = Instant::now();
    let json_rate = drive(pods, concurrency, "create (JSON)", |i| {
        let api: Api<Pod> = Api::namespaced(clients[i % clients.len()].clone(), "encoding-json");
        async move {
            api.create(&PostParams::default(), &bench_pod(i)).await?;
            Ok(())
        }
    })
    .await?;
    let json_cores = (sim.cpu_seconds()? - cpu_before) / started.elapsed().as_secs_f64();
    let cpu_before = sim.cpu_seconds()?;
    let started = Instant::now();
    let pb_rate = drive(pods, concurrency, "create (protobuf)", |i| {
        let client = clients[i % clients.len()].clone();
        async move { create_with_protobuf(&client, "encoding-protobuf", i).await }
    })
    .await?;
    let pb_cores = (sim.cpu_seconds()? - cpu_before) / started.elapsed().as_secs_f64();
    Ok(((json_rate, json_cores), (pb_rate, pb_cores)))
}

async fn create_with_protobuf(client: &kube::Client, namespace: &str, i: usize) -> anyhow::Result<()> {
    use batchfleet_sim::protobuf::{codec, schema};
    let mut pod = serde_json::to_value(bench_pod(i))?;
    pod["apiVersion"] = json!("v1");
    pod["kind"] = json!("Pod");
    let body =
        codec::encode_enveloped(schema::schema(), &pod).ok_or_else(|| anyhow::anyhow!("no protobuf Pod"))?;
    let request = http::Request::post(format!("/api/v1/namespaces/{namespace}/pods"))
        .header(http::header::CONTENT_TYPE, "application/vnd.kubernetes.protobuf")
        .header(http::header::ACCEPT, "application/vnd.kubernetes.protobuf, application/json")
        .body(kube::client::Body::from(body))?;
    let response = client.send(request).await?;
    anyhow::ensure!(
        response.status() == http::StatusCode::CREATED,
        "protobuf create answered {}",
        response.status()
    );
    http_body_util::BodyExt::collect(response.into_body()).await?;
    Ok(())
}

/// Runs `total` operations with `concurrency` in flight; returns ops per second.
async fn drive<F, Fut>(total: usize, concurrency: usize, label: &str, op: F) -> anyhow::Result<f64>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let started = Instant::now();
    let done = AtomicU64::new(0);
    let progress_every = (total / 10).max(1) as u64;
    futures::stream::iter(0..total)
        .map(|i| {
            let f = op(i);
            let done = &done;
            async move {
                f.await?;
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_multiple_of(progress_every) {
                    eprintln!("  {label}: {n}/{total} ({:.0}/s)", n as f64 / started.elapsed().as_secs_f64());
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// Delivered events per second to `watchers` kube-rs watches of one namespace while a writer
/// updates pods as fast as it can.
struct FanOut {
    delivered_per_second: f64,
    writes_per_second: f64,
    /// Cores the sim process used during the measurement.
    sim_cores: f64,
}

fn small_configmap(i: usize) -> k8s_openapi::api::core::v1::ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": format!("pod-{i:07}")}, "data": {"k": "v"}}))
        .expect("static configmap")
}

async fn fan_out(
    sim: &SimProcess,
    object: Object,
    watchers: usize,
    seconds: u64,
    objects: usize,
) -> anyhow::Result<FanOut> {
    match object {
        Object::Pod => fan_out_of::<Pod>(sim, watchers, seconds, objects, bench_pod).await,
        Object::ConfigMap => fan_out_of(sim, watchers, seconds, objects, small_configmap).await,
    }
}

async fn fan_out_of<K>(
    sim: &SimProcess,
    watchers: usize,
    seconds: u64,
    objects: usize,
    make: fn(usize) -> K,
) -> anyhow::Result<FanOut>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + 'static,
{
    let url = sim.url.as_str();
    let ns = format!("fanout-{}-{watchers}", K::plural(&()));
    let c = client(url)?;
    let nss: Api<Namespace> = Api::all(c.clone());
    nss.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": ns}}))?).await?;
    let pods: Api<K> = Api::namespaced(c.clone(), &ns);
    for i in 0..objects {
        pods.create(&PostParams::default(), &make(i)).await?;
    }
    let rv = pods.list(&ListParams::default().limit(1)).await?.metadata.resource_version.unwrap_or_default();
    let delivered = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    // Watches spread over several connections, as separate controllers would hold them.
    let clients: Vec<kube::Client> =
        (0..watchers.clamp(1, 8)).map(|_| client(url)).collect::<anyhow::Result<_>>()?;
    for w in 0..watchers {
        let api: Api<K> = Api::namespaced(clients[w % clients.len()].clone(), &ns);
        let delivered = delivered.clone();
        let rv = rv.clone();
        tasks.push(tokio::spawn(async move {
            let Ok(stream) = api.watch(&WatchParams::default().timeout(290), &rv).await else { return };
            let mut stream = stream.boxed();
            while let Some(Ok(e)) = stream.next().await {
                if matches!(e, WatchEvent::Modified(_)) {
                    delivered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for wi in 0..8 {
        let pods = Api::<K>::namespaced(client(url)?, &ns);
        let stop = stop.clone();
        let writes = writes.clone();
        writers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let i = (wi + 8 * n as usize) % objects;
                n += 1;
                let patch = json!({"metadata": {"annotations": {"bench/n": n.to_string()}}});
                if pods
                    .patch(&format!("pod-{i:07}"), &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .is_ok()
                {
                    writes.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let start_delivered = delivered.load(Ordering::Relaxed);
    let start_cpu = sim.cpu_seconds()?;
    let started = Instant::now();
    for s in 1..=seconds {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let d = delivered.load(Ordering::Relaxed) - start_delivered;
        eprintln!(
            "  {watchers} watchers, {s}s: {:.0} events/s delivered",
            d as f64 / started.elapsed().as_secs_f64()
        );
    }
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    let total = delivered.load(Ordering::Relaxed) - start_delivered;
    let sim_cores = (sim.cpu_seconds()? - start_cpu) / elapsed;
    for w in writers {
        let _ = w.await;
    }
    for t in tasks {
        t.abort();
    }
    Ok(FanOut {
        delivered_per_second: total as f64 / elapsed,
        writes_per_second: writes.load(Ordering::Relaxed) as f64 / elapsed,
        sim_cores,
    })
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let sim = SimProcess::start().await?;
    let clients: Vec<kube::Client> =
        (0..args.clients.max(1)).map(|_| client(&sim.url)).collect::<anyhow::Result<_>>()?;
    let nss: Api<Namespace> = Api::all(clients[0].clone());
    nss.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "bench"}}))?)
        .await?;
    let rss_before = sim.rss_bytes()?;
    let cpu_before = sim.cpu_seconds()?;
    let create_started = Instant::now();
    eprintln!(
        "creating {} pods with {} in flight over {} connections",
        args.pods,
        args.concurrency,
        clients.len()
    );
    let creates = drive(args.pods, args.concurrency, "create", |i| {
        let api: Api<Pod> = Api::namespaced(clients[i % clients.len()].clone(), "bench");
        async move {
            api.create(&PostParams::default(), &bench_pod(i)).await?;
            Ok(())
        }
    })
    .await?;
    let rss_after = sim.rss_bytes()?;
    let create_cores = (sim.cpu_seconds()? - cpu_before) / create_started.elapsed().as_secs_f64();
    let updates = if args.no_updates {
        None
    } else {
        eprintln!("updating {} pods", args.pods);
        Some(
            drive(args.pods, args.concurrency, "update", |i| {
                let api: Api<Pod> = Api::namespaced(clients[i % clients.len()].clone(), "bench");
                async move {
                    let patch = json!({"metadata": {"labels": {"bench/updated": "true"}}});
                    api.patch(&format!("pod-{i:07}"), &PatchParams::default(), &Patch::Merge(&patch)).await?;
                    Ok(())
                }
            })
            .await?,
        )
    };
    let per_100k = (rss_after.saturating_sub(rss_before)) as f64 * 100_000.0 / args.pods as f64;
    let mut fan = Vec::new();
    for object in [Object::Pod, Object::ConfigMap] {
        for w in &args.watchers {
            eprintln!("fan-out of {object:?} changes to {w} watchers for {}s", args.watch_seconds);
            fan.push((object, *w, fan_out(&sim, object, *w, args.watch_seconds, 200).await?));
        }
    }
    let encodings = if args.encoding_pods == 0 {
        None
    } else {
        Some(compare_encodings(&sim, &clients, args.encoding_pods, args.concurrency).await?)
    };
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    println!("## sim cluster benchmark ({cpus} CPUs, {} pods)", args.pods);
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| pod creates/s ({} in flight) | {creates:.0} (sim used {create_cores:.2} cores) |",
        args.concurrency
    );
    if let Some(u) = updates {
        println!("| pod updates/s (merge patch) | {u:.0} |");
    }
    println!(
        "| sim RSS before / after | {:.0} MiB / {:.0} MiB |",
        rss_before as f64 / 1048576.0,
        rss_after as f64 / 1048576.0
    );
    println!("| RSS per 100k pods | {:.0} MiB |", per_100k / 1048576.0);
    if let Some(((json_rate, json_cores), (pb_rate, pb_cores))) = encodings {
        println!(
            "| pod creates/s, JSON bodies ({} pods, {} in flight) | {json_rate:.0} (sim used {json_cores:.2} cores) |",
            args.encoding_pods, args.concurrency
        );
        println!(
            "| pod creates/s, protobuf bodies and answers (same run) | {pb_rate:.0} (sim used {pb_cores:.2} cores); protobuf/JSON = {:.2} |",
            pb_rate / json_rate
        );
    }
    for (object, w, f) in &fan {
        println!(
            "| {object:?} watch events delivered/s, {w} watchers | {:.0} (writes/s {:.0}; sim used {:.2} cores) |",
            f.delivered_per_second, f.writes_per_second, f.sim_cores
        );
    }
    let series: Vec<crate::plot::Series> = [Object::Pod, Object::ConfigMap]
        .iter()
        .map(|o| crate::plot::Series {
            name: format!("{o:?} events delivered/s"),
            points: fan
                .iter()
                .filter(|(x, _, _)| x == o)
                .map(|(_, w, f)| (*w as f64, f.delivered_per_second))
                .collect(),
        })
        .collect();
    crate::plot::log_x_line_chart(
        &args.plot,
        "sim watch fan-out to kube-rs watchers (2 cores, clients in the same machine)",
        "watchers",
        "events delivered per second",
        &series,
    )?;
    eprintln!("plot written to {}", args.plot.display());
    drop(sim.child);
    Ok(())
}
