//! `loadtest bench-jobs`: the Job controller's cost. (1) The decision core alone for Jobs of 10,
//! 1k and 10k pods; (2) end-to-end pod lifecycles per second against the sim cluster
//! (create, run, finish, count, finalizer removed), unthrottled and at kube-controller-manager's
//! client defaults (QPS 20, burst 30).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use batchfleet_sim::{SimCluster, SimConfig};
use batchfleet_worker::client::ClientLimits;
use batchfleet_worker::job::core::{Config, SyncInput, sync_job};
use batchfleet_worker::start::{self, WorkerOptions};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

/// The environment variable of `fleet-worker --kube-api-protocol`.
const API_PROTOCOL_ENV: &str = "FLEET_KUBE_API_PROTOCOL";

/// Has a worker this benchmark starts speak to the sim as it speaks to a real API server over TLS:
/// HTTP/2, which `auto` agrees on in the TLS handshake. The sim serves plain HTTP, where `auto`
/// speaks HTTP/1.1, so the worker is told `http2` (prior knowledge). A `FLEET_KUBE_API_PROTOCOL`
/// in the harness's own environment is passed on instead; a worker built before the flag ignores
/// the variable. The fleets of `loadtest run` and `up` are not told: on HTTP/2 three of their
/// tests stalled under CI's load (2026-11-29, docs/operations.md), so they speak what `auto`
/// speaks over plain HTTP, HTTP/1.1, unless the harness's environment says otherwise.
fn speak_api_as_over_tls(command: &mut tokio::process::Command) -> &mut tokio::process::Command {
    if std::env::var_os(API_PROTOCOL_ENV).is_none() {
        command.env(API_PROTOCOL_ENV, "http2");
    }
    command
}

#[derive(clap::Args, Debug)]
pub struct BenchJobsArgs {
    /// Pods of the unthrottled end-to-end run, spread over `--jobs` Jobs.
    #[arg(long, default_value_t = 20_000)]
    pub pods: i32,
    /// Jobs the pods are spread over (a cluster runs many Jobs at once).
    #[arg(long, default_value_t = 10)]
    pub jobs: i32,
    /// Parallelism of each Job.
    #[arg(long, default_value_t = 200)]
    pub parallelism: i32,
    /// Pods of the throttled (QPS 20, burst 30) end-to-end Job.
    #[arg(long, default_value_t = 300)]
    pub throttled_pods: i32,
    /// Repetitions of each decision-core measurement.
    #[arg(long, default_value_t = 50)]
    pub repeat: usize,
    /// Skip the end-to-end runs.
    #[arg(long)]
    pub core_only: bool,
    /// Run the unthrottled end-to-end case a second time without the kubelet's pod events, to
    /// show what they cost.
    #[arg(long)]
    pub compare_kubelet_events: bool,
    /// Compare `fleet-worker` builds: `LABEL=PATH`, repeatable. Each runs as its own
    /// `--standalone` process, unthrottled, against one sim cluster per run in this process, the
    /// builds taking turns for `--rounds` rounds, so their ratio comes from one sitting.
    #[arg(long = "worker-binary", value_parser = parse_worker_binary)]
    pub worker_binaries: Vec<(String, PathBuf)>,
    /// Rounds of the `--worker-binary` comparison.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
}

fn parse_worker_binary(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((label, path)) if !label.is_empty() && !path.is_empty() => Ok((label.into(), path.into())),
        _ => Err(format!("{s:?} is not LABEL=PATH, such as new=target/release/fleet-worker")),
    }
}

fn bench_job(pods: i32, indexed: bool) -> Job {
    let mode = if indexed { "Indexed" } else { "NonIndexed" };
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "bench", "namespace": "ns", "uid": "job-uid", "resourceVersion": "1"},
        "spec": {"completions": pods, "parallelism": pods, "completionMode": mode, "backoffLimit": 6,
                 "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "job-uid"}},
                 "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "job-uid"}},
                              "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}},
        "status": {"startTime": "2026-01-01T00:00:00Z", "active": pods}
    }))
    .expect("static job")
}

/// Pods of a Job in flight: a quarter succeeded (still holding the tracking finalizer), a
/// quarter running, the rest pending.
fn bench_pods(pods: i32, indexed: bool) -> Vec<std::sync::Arc<Pod>> {
    (0..pods)
        .map(|i| {
            let phase = match i % 4 {
                0 => "Succeeded",
                1 => "Running",
                _ => "Pending",
            };
            let mut annotations = json!({});
            if indexed {
                annotations["batch.kubernetes.io/job-completion-index"] = json!(i.to_string());
            }
            serde_json::from_value(json!({
                "metadata": {"name": format!("bench-{i}"), "namespace": "ns", "uid": format!("pod-{i}"),
                    "creationTimestamp": "2026-01-01T00:00:00Z",
                    "labels": {"batch.kubernetes.io/controller-uid": "job-uid"}, "annotations": annotations,
                    "finalizers": ["batch.kubernetes.io/job-tracking"],
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "bench", "uid": "job-uid", "controller": true}]},
                "spec": {"nodeName": "n", "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if phase == "Running" {"True"} else {"False"}}]}
            }))
            .map(std::sync::Arc::new)
            .expect("static pod")
        })
        .collect()
}

struct CoreCost {
    pods: i32,
    indexed: bool,
    median: Duration,
    p99: Duration,
}

fn core_cost(pods: i32, indexed: bool, repeat: usize) -> CoreCost {
    let job = bench_job(pods, indexed);
    let pod_list = bench_pods(pods, indexed);
    let config = Config::default();
    let none = HashSet::new();
    let now = "2026-01-01T00:01:00Z".parse().expect("static time");
    let mut samples: Vec<Duration> = (0..repeat.max(1))
        .map(|_| {
            let input = SyncInput {
                job: &job,
                pods: &pod_list,
                now,
                expectations_satisfied: true,
                expected_removed_finalizers: &none,
                backoff: None,
                stall: None,
                config: &config,
            };
            let started = Instant::now();
            let plan = sync_job(&input);
            let took = started.elapsed();
            std::hint::black_box(plan);
            took
        })
        .collect();
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    CoreCost { pods, indexed, median: at(0.5), p99: at(0.99) }
}

struct EndToEnd {
    label: String,
    pods: i32,
    seconds: f64,
    cores: f64,
    /// The worker process's own CPU milliseconds per pod lifecycle, when it is a process of its
    /// own: the worker's share, apart from the sim's.
    worker_cpu_ms_per_lifecycle: Option<f64>,
    requests_per_second: f64,
}

/// Where the standalone worker of a run lives.
enum WorkerUnder<'a> {
    /// In this process, with these client limits.
    InProcess(ClientLimits),
    /// A `fleet-worker` binary run as a process, unthrottled; its CPU is counted with ours.
    Binary(&'a Path),
}

/// A sim in this process and a standalone worker; `jobs_n` Jobs sharing `pods` zero-length pods.
async fn end_to_end(
    label: &str,
    pods: i32,
    jobs_n: i32,
    parallelism: i32,
    worker: WorkerUnder<'_>,
    kubelet_events: bool,
) -> anyhow::Result<EndToEnd> {
    let sim = SimCluster::start(SimConfig { nodes: 10, kubelet_events, ..SimConfig::default() }).await?;
    let config = kube::Config::new(sim.url().parse()?);
    let kubeconfig = std::env::temp_dir().join(format!("bench-jobs-{}.kubeconfig", std::process::id()));
    let (_in_process, child) = match worker {
        WorkerUnder::InProcess(limit) => {
            let worker_client = batchfleet_worker::client::from_config(config.clone(), limit)?;
            let opts = WorkerOptions {
                metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                ..WorkerOptions::default()
            };
            (Some(start::start_with_client(worker_client, opts).await?), None)
        }
        WorkerUnder::Binary(path) => {
            sim.write_kubeconfig(&kubeconfig)?;
            let child = speak_api_as_over_tls(&mut tokio::process::Command::new(path))
                .args(["--standalone", "--kube-api-qps", "0", "--kube-api-max-in-flight", "0"])
                .args(["--metrics-addr", "127.0.0.1:0", "--worker-id", label])
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .env("RUST_LOG", "warn")
                .stdout(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("starting {}", path.display()))?;
            (None, Some(child))
        }
    };
    let child_cpu = || {
        child
            .as_ref()
            .and_then(|c| c.id())
            .and_then(|pid| crate::proc_stat::cpu_seconds(&pid.to_string()).ok())
            .unwrap_or(0.0)
    };
    let client = kube::Client::try_from(config)?;
    let jobs: Api<Job> = Api::namespaced(client, "default");
    let jobs_n = jobs_n.max(1);
    let per_job = (pods / jobs_n).max(1);
    let pods = per_job * jobs_n;
    let requests_before = total_requests(&sim);
    let child_cpu_before = child_cpu();
    let cpu_before = crate::proc_stat::own_cpu_seconds() + child_cpu_before;
    let started = Instant::now();
    for i in 0..jobs_n {
        let job: Job = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": format!("throughput-{i}")},
            "spec": {"completions": per_job, "parallelism": parallelism.min(per_job),
                     "template": {"metadata": {"annotations": {"sim.batchfleet.io/run": "0s"}},
                                  "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}
        }))?;
        jobs.create(&PostParams::default(), &job).await?;
    }
    let complete = |j: &Job| {
        j.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Complete" && c.status == "True"))
    };
    let mut last_report = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let list = jobs.list(&Default::default()).await?;
        let succeeded: i32 =
            list.items.iter().map(|j| j.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0)).sum();
        if last_report.elapsed() > Duration::from_secs(2) {
            eprintln!(
                "  {label}: {succeeded}/{pods} succeeded after {:.0}s ({:.0}/s)",
                started.elapsed().as_secs_f64(),
                f64::from(succeeded) / started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        if list.items.len() == jobs_n as usize && list.items.iter().all(complete) {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "{label}: the Jobs did not complete in 10 minutes"
        );
    }
    let seconds = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&kubeconfig);
    let requests = total_requests(&sim) - requests_before;
    let child_cpu_after = child_cpu();
    Ok(EndToEnd {
        worker_cpu_ms_per_lifecycle: child
            .as_ref()
            .map(|_| (child_cpu_after - child_cpu_before) * 1e3 / f64::from(pods)),
        label: label.to_string(),
        pods,
        seconds,
        cores: (crate::proc_stat::own_cpu_seconds() + child_cpu_after - cpu_before) / seconds,
        requests_per_second: requests as f64 / seconds,
    })
}

fn total_requests(sim: &SimCluster) -> u64 {
    sim.counters().snapshot()["requests"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["count"].as_u64()).sum())
        .unwrap_or(0)
}

pub async fn run(args: BenchJobsArgs) -> anyhow::Result<()> {
    let mut costs = Vec::new();
    for pods in [10, 1_000, 10_000] {
        for indexed in [false, true] {
            eprintln!("decision core: {pods} pods, {}", if indexed { "Indexed" } else { "NonIndexed" });
            costs.push(core_cost(pods, indexed, args.repeat));
        }
    }
    let mut runs = Vec::new();
    let rounds = if args.worker_binaries.is_empty() { 0 } else { args.rounds };
    for round in 1..=rounds {
        for (label, path) in &args.worker_binaries {
            let label = format!("{label} (process), round {round}");
            eprintln!("end to end, unthrottled, {label}: {} pods", args.pods);
            let worker = WorkerUnder::Binary(path);
            runs.push(
                end_to_end(&label, args.pods, args.jobs, args.parallelism, worker, true)
                    .await
                    .with_context(|| label.clone())?,
            );
        }
    }
    if !args.core_only && args.worker_binaries.is_empty() {
        eprintln!(
            "end to end, unthrottled: {} pods in {} Jobs, parallelism {}",
            args.pods, args.jobs, args.parallelism
        );
        runs.push(
            end_to_end(
                "unthrottled",
                args.pods,
                args.jobs,
                args.parallelism,
                WorkerUnder::InProcess(ClientLimits::UNLIMITED),
                true,
            )
            .await
            .context("unthrottled run")?,
        );
        if args.compare_kubelet_events {
            eprintln!("end to end, unthrottled, without the kubelet's pod events");
            let label = "unthrottled, no kubelet events";
            runs.push(
                end_to_end(
                    label,
                    args.pods,
                    args.jobs,
                    args.parallelism,
                    WorkerUnder::InProcess(ClientLimits::UNLIMITED),
                    false,
                )
                .await
                .context("unthrottled run without kubelet events")?,
            );
        }
        eprintln!("end to end, QPS 20 burst 30: {} pods", args.throttled_pods);
        runs.push(
            end_to_end(
                "QPS 20, burst 30",
                args.throttled_pods,
                1,
                args.parallelism.min(args.throttled_pods),
                WorkerUnder::InProcess(ClientLimits::DEFAULT),
                true,
            )
            .await
            .context("throttled run")?,
        );
    }
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    println!("## Job controller benchmark ({cpus} CPUs)");
    println!();
    println!("| decision core (sync_job) | median | p99 |");
    println!("|---|---|---|");
    for c in &costs {
        let mode = if c.indexed { "Indexed" } else { "NonIndexed" };
        println!(
            "| {} pods, {mode} | {:.3} ms | {:.3} ms |",
            c.pods,
            c.median.as_secs_f64() * 1e3,
            c.p99.as_secs_f64() * 1e3
        );
    }
    if !runs.is_empty() {
        println!();
        println!(
            "| end to end (sim in this process; standalone worker in it, or a process) | pods | seconds | lifecycles/s | API requests/s | cores used | worker CPU-ms per lifecycle |"
        );
        println!("|---|---|---|---|---|---|---|");
        for r in &runs {
            let worker_cpu =
                r.worker_cpu_ms_per_lifecycle.map_or_else(|| "—".to_string(), |ms| format!("{ms:.3}"));
            println!(
                "| {} | {} | {:.1} | {:.0} | {:.0} | {:.2} | {worker_cpu} |",
                r.label,
                r.pods,
                r.seconds,
                f64::from(r.pods) / r.seconds,
                r.requests_per_second,
                r.cores
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    #[test]
    fn a_worker_is_told_http2_unless_the_harness_itself_was_told_a_protocol() {
        let mut command = tokio::process::Command::new("fleet-worker");
        speak_api_as_over_tls(&mut command);
        let told: Option<Option<&OsStr>> =
            command.as_std().get_envs().find(|(name, _)| *name == API_PROTOCOL_ENV).map(|(_, value)| value);
        match std::env::var_os(API_PROTOCOL_ENV) {
            None => assert_eq!(told, Some(Some(OsStr::new("http2")))),
            // The child inherits the harness's own setting; nothing overrides it.
            Some(_) => assert_eq!(told, None),
        }
    }
}
