//! `loadtest run fleet-scale`: the coordinator at the scale it exists for. Two coordinators (as
//! processes) on the sim, with the Kubernetes store or etcd, and M light workers in this process
//! (`light_workers.rs`: real sessions, real leases, the protocol's answers, no controllers). In
//! turn: every shard placed from nothing; the fleet at rest (the leader's CPU and memory, the
//! store's writes, the balance of load); a leader fail-over (SIGTERM: every session registers
//! with the new leader, and nothing moves); a storm (a tenth of the workers leave and come back
//! at once: the shards they held, and few more, move). Audits and goals as every run's report
//! has them; exits 0 only when all pass.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use batchfleet_audits::Outcome;
use batchfleet_audits::logs;
use batchfleet_coordinator::store::CoordinationStore;
use batchfleet_coordinator::store::cli::StoreKind;

use crate::scenario::Store;
use batchfleet_coordinator::store::etcd::EtcdStore;
use batchfleet_coordinator::store::kubernetes::KubernetesStore;
use batchfleet_proto::v1 as pb;
use batchfleet_sim::{SimCluster, SimConfig};
use jiff::Timestamp;
use serde::Serialize;

use crate::fleet_processes::{self, EtcdProcess, FleetLayout, FleetProcesses};
use crate::light_workers::{LightFleet, LightFleetConfig};
use crate::proc_stat;

/// The name `loadtest run` knows this run by.
pub const NAME: &str = "fleet-scale";

#[derive(clap::Args, Debug, Clone, Default)]
#[command(next_help_heading = "fleet-scale (only with `loadtest run fleet-scale`)")]
pub struct FleetScaleArgs {
    /// S, the shards [default: 4096].
    #[arg(long, value_name = "S", value_parser = parse_shard_count)]
    pub shards: Option<u32>,
    /// The light workers' lease TTL (fleet-worker's --lease-duration) [default:
    /// the store's, as fleet-worker's].
    #[arg(long, value_name = "TTL", value_parser = humantime::parse_duration)]
    pub worker_lease: Option<Duration>,
    /// How long the settled fleet is measured at rest [default: 20s].
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub rest: Option<Duration>,
}

fn parse_shard_count(s: &str) -> Result<u32, String> {
    let n: u32 = s.parse().map_err(|e| format!("{e}"))?;
    if n == 0 || !n.is_power_of_two() {
        return Err("S must be a power of two".into());
    }
    Ok(n)
}

impl FleetScaleArgs {
    /// Whether any of these flags was given (they are refused for any other scenario).
    pub fn any(&self) -> bool {
        self.shards.is_some() || self.worker_lease.is_some() || self.rest.is_some()
    }

    /// M (`loadtest run --workers`) and the store (`--store`) are the run's common flags.
    fn spec(&self, workers: Option<usize>, store: Option<Store>) -> Spec {
        let store = match store.unwrap_or_default() {
            Store::Kubernetes => StoreKind::Kubernetes,
            Store::Etcd => StoreKind::Etcd,
        };
        Spec {
            workers: workers.unwrap_or(1000),
            shards: self.shards.unwrap_or(4096),
            store: match store {
                StoreKind::Kubernetes => "kubernetes",
                StoreKind::Etcd => "etcd",
            },
            worker_lease_seconds: self.worker_lease.unwrap_or(store.default_worker_lease()).as_secs_f64(),
            rest_seconds: self.rest.unwrap_or(Duration::from_secs(20)).as_secs_f64(),
        }
    }
}

/// The run's parameters, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct Spec {
    pub workers: usize,
    pub shards: u32,
    pub store: &'static str,
    pub worker_lease_seconds: f64,
    pub rest_seconds: f64,
}

/// The goals of issue 27 §3 (set at M = 1,000, S = 4,096; checked at every size).
const FAILOVER_SESSIONS_WITHIN: Duration = Duration::from_secs(10);
const STORM_MOVES_OVER_MINIMUM: f64 = 1.1;
const STEP_P99: Duration = Duration::from_millis(50);
const LEADER_RSS_BYTES: u64 = 256 * 1024 * 1024;
const LEADER_CPU_AT_REST: f64 = 0.2;
const BALANCE: f64 = 1.25;
/// How long every shard must stay active with no move under way to count as settled.
const QUIET: Duration = Duration::from_secs(3);
/// The longest any phase may take before the run gives up (debug builds, a busy machine).
const PHASE_WITHIN: Duration = Duration::from_secs(300);

#[derive(Debug, Default, Serialize)]
pub struct Measures {
    /// Light workers started → every shard active.
    pub all_active_seconds: f64,
    /// Light workers started → every shard active with no move for 3 s (loads reported and
    /// balanced).
    pub settled_seconds: f64,
    pub moves_at_rest: u64,
    pub leader_cpu_cores_at_rest: f64,
    pub leader_peak_rss_mib: f64,
    /// The coordination store's writes per second at rest (Kubernetes: create, update, patch
    /// and delete requests the API server served; etcd: puts and deletes, those of
    /// transactions included).
    pub store_writes_per_second_at_rest: f64,
    /// etcd lease renewals per second at rest, as etcd counts them
    /// (`etcd_debugging_lease_renewed_total`; etcd only).
    pub store_keepalives_per_second_at_rest: Option<f64>,
    /// The most loaded worker's load over the average (synthetic loads; every worker counts).
    pub max_over_mean_load: f64,
    pub max_over_mean_shards: f64,
    pub failover_new_leader_seconds: f64,
    /// SIGTERM to the leader → every light worker's session open with the new leader.
    pub failover_sessions_back_seconds: f64,
    pub failover_moves: u64,
    pub storm_workers: usize,
    /// Shards the leaving workers held: each must be placed again.
    pub storm_minimum_moves: u64,
    pub storm_moves: u64,
    /// The storm's start → every shard active with no move for 3 s.
    pub storm_settled_seconds: f64,
    /// Over both leaders' steps, from their histograms.
    pub step_p50_ms: f64,
    pub step_p99_ms: f64,
    pub steps: u64,
    pub load_average: String,
}

#[derive(Debug, Serialize)]
pub struct FleetScaleReport {
    pub scenario: String,
    pub description: String,
    pub started: String,
    pub wall_seconds: f64,
    pub passed: bool,
    pub parameters: Spec,
    pub audits: Vec<Outcome>,
    pub goals: Vec<Outcome>,
    pub violations: BTreeMap<String, Vec<String>>,
    pub measures: Measures,
    pub files: BTreeMap<String, String>,
}

/// The run, its output in `out`; answers whether every audit and goal passed, and the report.
pub async fn run(
    args: &FleetScaleArgs,
    workers: Option<usize>,
    store: Option<Store>,
    out: &Path,
) -> anyhow::Result<(bool, PathBuf)> {
    let spec = args.spec(workers, store);
    anyhow::ensure!(spec.workers > 0, "--workers must be at least 1");
    let started = Timestamp::now();
    let wall = Instant::now();
    let logs_dir = out.join("logs");
    std::fs::create_dir_all(&logs_dir)?;
    println!(
        "scenario {NAME}: {} light workers, {} shards, {} store, worker lease {}s",
        spec.workers, spec.shards, spec.store, spec.worker_lease_seconds
    );
    let sim = SimCluster::start(SimConfig { nodes: 1, kubelet: false, ..SimConfig::default() })
        .await
        .context("starting the sim cluster")?;
    let kubeconfig = out.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig)?;
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse()?))?;
    let etcd = match spec.store {
        "etcd" => Some(
            fleet_processes::start_etcd(&out.join("etcd-data"), &logs_dir, Duration::from_secs(30)).await?,
        ),
        _ => None,
    };
    let store_flags = match &etcd {
        Some(etcd) => vec!["--store".into(), "etcd".into(), "--etcd-endpoints".into(), etcd.endpoint.clone()],
        None => Vec::new(),
    };
    let layout = FleetLayout {
        shards: spec.shards,
        coordinators: 2,
        workers: 0,
        worker_lease: Some(
            humantime::format_duration(Duration::from_secs_f64(spec.worker_lease_seconds)).to_string(),
        ),
        common_flags: store_flags,
        ..FleetLayout::default()
    };
    println!("starting two coordinators (logs in {})", logs_dir.display());
    let mut fleet = fleet_processes::start(&kubeconfig, &layout, &logs_dir).await?;
    let writes = StoreWrites { sim: &sim, etcd: etcd.as_ref() };
    let result = match &etcd {
        Some(etcd) => {
            let store = EtcdStore::connect(std::slice::from_ref(&etcd.endpoint), "/batchfleet/")
                .await
                .context("connecting to etcd")?;
            phases(Arc::new(store), &spec, &mut fleet, &writes).await
        }
        None => {
            phases(Arc::new(KubernetesStore::new(client, "kube-system")), &spec, &mut fleet, &writes).await
        }
    };
    for child in &mut fleet.coordinators {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    let (mut measures, mut audits) = result?;
    measures.load_average = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    let log_files: Vec<(String, PathBuf)> = (0..fleet.coordinators.len())
        .map(|i| format!("coordinator-{i}"))
        .map(|n| (n.clone(), logs_dir.join(format!("{n}.log"))))
        .collect();
    audits.push(logs::no_errors_logged(log_files.iter().map(|(n, p)| (n.as_str(), p.as_path())), &[]));
    let goals = goals(&measures);
    let passed = audits.iter().chain(&goals).all(Outcome::not_failed);
    let violations = super::report::violations(audits.iter().chain(&goals));
    let files = BTreeMap::from([("process_logs".to_string(), logs_dir.display().to_string())]);
    let report = FleetScaleReport {
        scenario: NAME.into(),
        description: "M light workers (real sessions and leases, no controllers) against two coordinators: \
                      placement from nothing, the fleet at rest, a leader fail-over, a storm"
            .into(),
        started: started.to_string(),
        wall_seconds: super::report::seconds(wall.elapsed()),
        passed,
        parameters: spec,
        audits,
        goals,
        violations,
        measures,
        files,
    };
    let path = out.join("report.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    print!("{}", summary(&report));
    Ok((passed, path))
}

/// Where the store's writes are counted.
struct StoreWrites<'a> {
    sim: &'a SimCluster,
    etcd: Option<&'a EtcdProcess>,
}

impl StoreWrites<'_> {
    /// Writes so far, and etcd's lease keep-alives.
    async fn count(&self) -> (u64, Option<u64>) {
        match self.etcd {
            None => {
                let snapshot = self.sim.counters().snapshot();
                let writes = snapshot["requests"]
                    .as_array()
                    .map(|requests| {
                        requests
                            .iter()
                            .filter(|r| {
                                matches!(
                                    r["verb"].as_str(),
                                    Some("create" | "update" | "patch" | "delete" | "deletecollection")
                                )
                            })
                            .filter_map(|r| r["count"].as_u64())
                            .sum()
                    })
                    .unwrap_or(0);
                (writes, None)
            }
            Some(etcd) => {
                let addr: Option<SocketAddr> =
                    etcd.endpoint.strip_prefix("http://").and_then(|a| a.parse().ok());
                let text = match addr {
                    Some(addr) => fleet_processes::http_get(addr, "/metrics").await.unwrap_or_default(),
                    None => String::new(),
                };
                let sum = |names: &[&str]| -> u64 { names.iter().map(|n| metric_sum(&text, n) as u64).sum() };
                (
                    // Not etcd_mvcc_txn_total: every read is a transaction to etcd's store too.
                    sum(&["etcd_mvcc_put_total", "etcd_mvcc_delete_total"]),
                    Some(sum(&["etcd_debugging_lease_renewed_total"])),
                )
            }
        }
    }
}

/// The sum of every series of `name` in a Prometheus text exposition.
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{')))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A histogram's cumulative buckets (`le` → count) in a Prometheus text exposition.
fn histogram(text: &str, name: &str) -> BTreeMap<OrderedLe, u64> {
    let prefix = format!("{name}_bucket{{");
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with(&prefix)) {
        let Some(le) = line.split("le=\"").nth(1).and_then(|r| r.split('"').next()) else { continue };
        let le = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(f64::NAN) };
        let Some(count) = line.rsplit(' ').next().and_then(|c| c.parse::<f64>().ok()) else { continue };
        if !le.is_nan() {
            *out.entry(OrderedLe(le)).or_default() += count as u64;
        }
    }
    out
}

/// A bucket bound, ordered (bounds are never NaN).
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrderedLe(f64);

impl Eq for OrderedLe {}

impl PartialOrd for OrderedLe {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderedLe {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The `q` quantile of cumulative buckets, interpolated within its bucket as Prometheus's
/// `histogram_quantile` does; the largest finite bound when it falls in `+Inf`.
fn quantile(buckets: &BTreeMap<OrderedLe, u64>, q: f64) -> f64 {
    let total = buckets.values().copied().max().unwrap_or(0);
    if total == 0 {
        return f64::NAN;
    }
    let rank = q * total as f64;
    let (mut lower, mut below) = (0.0, 0u64);
    for (le, count) in buckets {
        if *count as f64 >= rank {
            if le.0.is_infinite() {
                return lower;
            }
            let within = (*count - below) as f64;
            let into = if within > 0.0 { (rank - below as f64) / within } else { 1.0 };
            return lower + (le.0 - lower) * into;
        }
        (lower, below) = (le.0, *count);
    }
    lower
}

async fn step_histogram(fleet: &FleetProcesses, index: usize) -> BTreeMap<OrderedLe, u64> {
    match fleet.coordinator_metrics.get(index) {
        Some(addr) => histogram(
            &fleet_processes::http_get(*addr, "/metrics").await.unwrap_or_default(),
            "fleet_step_duration_seconds",
        ),
        None => BTreeMap::new(),
    }
}

/// Every shard's owner, epoch and load as the leader reports them.
async fn shards(fleet: &FleetProcesses) -> Option<Vec<pb::ShardInfo>> {
    Some(fleet.admin().await?.shards(pb::ShardsRequest {}).await.ok()?.into_inner().shards)
}

/// Waits until `check` holds, polling; how long it took.
async fn wait_for<F, Fut>(what: &str, within: Duration, mut check: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if check().await {
            return Ok(started.elapsed());
        }
        anyhow::ensure!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether every shard is active with no move under way, as the leader answers.
async fn all_active(fleet: &FleetProcesses, shard_count: u32) -> bool {
    let Some(mut rpc) = fleet.admin().await else { return false };
    let Ok(status) = rpc.status(pb::StatusRequest {}).await else { return false };
    let status = status.into_inner();
    status.moves_in_progress == 0 && status.shards_by_state.get("active").copied() == Some(shard_count)
}

/// Waits until every shard was active with no move under way for [`QUIET`]; from the call.
async fn settled(fleet: &FleetProcesses, shard_count: u32, what: &str) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut quiet_since: Option<Instant> = None;
    loop {
        if all_active(fleet, shard_count).await {
            let since = *quiet_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= QUIET {
                return Ok(since.duration_since(started));
            }
        } else {
            quiet_since = None;
        }
        anyhow::ensure!(started.elapsed() < PHASE_WITHIN, "{what}: not settled within {PHASE_WITHIN:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn moves_between(before: &BTreeMap<u32, u64>, after: &BTreeMap<u32, u64>) -> u64 {
    after.iter().map(|(s, e)| e.saturating_sub(before.get(s).copied().unwrap_or(0))).sum()
}

async fn epochs(fleet: &FleetProcesses) -> anyhow::Result<BTreeMap<u32, u64>> {
    fleet.shard_epochs().await.context("reading shard epochs from the leader")
}

/// The phases, on a fleet whose coordinators run; the measures and the audits made on the way.
async fn phases<S: CoordinationStore + 'static>(
    store: Arc<S>,
    spec: &Spec,
    fleet: &mut FleetProcesses,
    writes: &StoreWrites<'_>,
) -> anyhow::Result<(Measures, Vec<Outcome>)> {
    let mut m = Measures::default();
    let shard_count = spec.shards;
    wait_for("a leader", PHASE_WITHIN, || async { fleet.leader_index().await.is_some() }).await?;
    let mut light = LightFleet::new(
        store,
        LightFleetConfig {
            coordinators: fleet.admin_urls.clone(),
            ttl: Duration::from_secs_f64(spec.worker_lease_seconds),
            heartbeat: Duration::from_secs(1),
            shard_count,
            load_seed: 1,
        },
        spec.workers,
    );

    println!("placing {shard_count} shards on {} light workers", spec.workers);
    let start = Instant::now();
    for i in 0..spec.workers {
        light.start(i);
    }
    wait_for("every shard active", PHASE_WITHIN, || all_active(fleet, shard_count)).await?;
    m.all_active_seconds = start.elapsed().as_secs_f64();
    settled(fleet, shard_count, "the initial placement").await?;
    m.settled_seconds = start.elapsed().as_secs_f64();
    println!("  every shard active in {:.1}s, settled in {:.1}s", m.all_active_seconds, m.settled_seconds);

    let leader = fleet.leader_index().await.context("no leader")?;
    let pid = fleet.coordinators[leader].id().map(|p| p.to_string()).context("the leader exited")?;
    println!("at rest for {}s", spec.rest_seconds);
    let before = epochs(fleet).await?;
    let (writes_before, keepalives_before) = writes.count().await;
    let cpu_before = proc_stat::cpu_seconds(&pid)?;
    let rest_started = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(spec.rest_seconds)).await;
    let cpu = proc_stat::cpu_seconds(&pid)? - cpu_before;
    let (writes_after, keepalives_after) = writes.count().await;
    let rested = rest_started.elapsed().as_secs_f64();
    m.moves_at_rest = moves_between(&before, &epochs(fleet).await?);
    m.leader_cpu_cores_at_rest = cpu / rested;
    m.leader_peak_rss_mib = proc_stat::peak_rss_bytes(&pid)? as f64 / (1024.0 * 1024.0);
    m.store_writes_per_second_at_rest = writes_after.saturating_sub(writes_before) as f64 / rested;
    m.store_keepalives_per_second_at_rest =
        keepalives_after.zip(keepalives_before).map(|(a, b)| a.saturating_sub(b) as f64 / rested);
    (m.max_over_mean_load, m.max_over_mean_shards) =
        balance(&shards(fleet).await.context("reading the shards")?, spec.workers);
    println!(
        "  leader CPU {:.3} cores, peak RSS {:.0} MiB, store writes {:.1}/s, max/mean load {:.3}",
        m.leader_cpu_cores_at_rest,
        m.leader_peak_rss_mib,
        m.store_writes_per_second_at_rest,
        m.max_over_mean_load
    );

    // A planned fail-over (the coordinator's rolling update): SIGTERM resigns the leadership.
    let mut steps = step_histogram(fleet, leader).await;
    let standby = 1 - leader;
    let before = epochs(fleet).await?;
    println!("fail-over: SIGTERM to coordinator-{leader}");
    let terminated = Instant::now();
    signal(fleet.coordinators[leader].id(), "-TERM")?;
    let standby_url = fleet.admin_urls[standby].clone();
    m.failover_new_leader_seconds =
        wait_for("the standby leads", PHASE_WITHIN, || async { fleet.leader_index().await == Some(standby) })
            .await?
            .as_secs_f64();
    wait_for("every session back", PHASE_WITHIN, || async {
        light.sessions_with(&standby_url, terminated) == spec.workers
    })
    .await?;
    m.failover_sessions_back_seconds =
        light.last_session_opened().map_or(f64::NAN, |t| t.duration_since(terminated).as_secs_f64());
    settled(fleet, shard_count, "the fail-over").await?;
    m.failover_moves = moves_between(&before, &epochs(fleet).await?);
    let _ = tokio::time::timeout(Duration::from_secs(30), fleet.coordinators[leader].wait()).await;
    println!(
        "  sessions back in {:.1}s, {} shards moved",
        m.failover_sessions_back_seconds, m.failover_moves
    );

    // A tenth of the workers leave at once, as processes that are killed (sessions cut,
    // everything they held forgotten, their lease records left), and come straight back under
    // the same ids, within their leases: each registers holding nothing.
    let leaving: Vec<usize> = (0..spec.workers).step_by(10).collect();
    m.storm_workers = leaving.len();
    let before = epochs(fleet).await?;
    m.storm_minimum_moves = leaving.iter().map(|i| light.held_by(*i) as u64).sum();
    println!("storm: {} workers leave and come back", leaving.len());
    let storm = Instant::now();
    for i in &leaving {
        light.stop(*i).await;
    }
    for i in &leaving {
        light.start(*i);
    }
    wait_for("the leavers registered again", PHASE_WITHIN, || async {
        light.all_registered_since(&leaving, storm)
    })
    .await?;
    settled(fleet, shard_count, "the storm").await?;
    m.storm_settled_seconds = storm.elapsed().as_secs_f64();
    m.storm_moves = moves_between(&before, &epochs(fleet).await?);
    println!(
        "  {} moves for {} shards held by the leavers, settled in {:.1}s",
        m.storm_moves, m.storm_minimum_moves, m.storm_settled_seconds
    );

    for (le, count) in step_histogram(fleet, standby).await {
        *steps.entry(le).or_default() += count;
    }
    m.steps = steps.values().copied().max().unwrap_or(0);
    m.step_p50_ms = quantile(&steps, 0.50) * 1000.0;
    m.step_p99_ms = quantile(&steps, 0.99) * 1000.0;

    let audits = vec![
        Outcome::from_violations(
            "one-active-owner-per-shard",
            "no shard activated on a worker while another held it active within its lease",
            light.total(|w| &w.prepares) as usize,
            "tenures",
            light.violations(),
        ),
        map_matches_workers(&shards(fleet).await.context("reading the shards")?, &light),
        Outcome::from_violations(
            "no-worker-lease-lapsed",
            "every light worker renewed its lease within its TTL (else the harness, not the coordinator, \
             was the bottleneck)",
            spec.workers,
            "workers",
            light
                .workers()
                .iter()
                .filter(|w| w.lapses.load(std::sync::atomic::Ordering::Relaxed) > 0)
                .map(|w| format!("{} lapsed", w.id))
                .collect(),
        ),
    ];
    // The coordinators first: a leader would otherwise go on moving the shards of every worker
    // as it stops.
    for child in &mut fleet.coordinators {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    light.stop_all().await;
    Ok((m, audits))
}

fn signal(pid: Option<u32>, signal: &str) -> anyhow::Result<()> {
    let pid = pid.context("the process has exited")?;
    let status = std::process::Command::new("kill").args([signal, &pid.to_string()]).status()?;
    anyhow::ensure!(status.success(), "kill {signal} {pid} failed");
    Ok(())
}

/// The most loaded worker over the mean, by load and by shard count; every worker counts, those
/// holding nothing too.
fn balance(shards: &[pb::ShardInfo], workers: usize) -> (f64, f64) {
    let mut per: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for s in shards.iter().filter(|s| !s.owner.is_empty()) {
        let entry = per.entry(s.owner.as_str()).or_default();
        entry.0 += s.load;
        entry.1 += 1.0;
    }
    let n = workers.max(1) as f64;
    let (total_load, total_shards) = per.values().fold((0.0, 0.0), |(l, c), (wl, wc)| (l + wl, c + wc));
    let (max_load, max_shards) =
        per.values().fold((0.0f64, 0.0f64), |(l, c), (wl, wc)| (l.max(*wl), c.max(*wc)));
    (max_load / (total_load / n), max_shards / (total_shards / n))
}

/// The leader's map and the light workers agree: each shard active on exactly the worker the map
/// names, at the map's epoch.
fn map_matches_workers<S: CoordinationStore + 'static>(
    shards: &[pb::ShardInfo],
    light: &LightFleet<S>,
) -> Outcome {
    let mut holders: BTreeMap<u32, Vec<(String, u64)>> = BTreeMap::new();
    for (index, shard, epoch) in light.active() {
        holders.entry(shard).or_default().push((light.workers()[index].id.0.clone(), epoch));
    }
    let mut violations = Vec::new();
    for s in shards {
        let held = holders.remove(&s.shard).unwrap_or_default();
        if held != [(s.owner.clone(), s.epoch)] {
            violations.push(format!(
                "shard {}: the map says {:?} at epoch {} ({}), the workers hold it active as {held:?}",
                s.shard, s.owner, s.epoch, s.state
            ));
        }
    }
    for (shard, held) in holders {
        violations
            .push(format!("shard {shard} is not in the map, and the workers hold it active as {held:?}"));
    }
    Outcome::from_violations(
        "map-matches-workers",
        "at the end every shard is active on exactly the worker the leader's map names, at its epoch",
        shards.len(),
        "shards",
        violations,
    )
}

fn at_most(name: &str, measured: f64, limit: f64, shown: String, target: String) -> Outcome {
    Outcome {
        name: name.into(),
        target,
        measured: shown,
        passed: measured.is_finite() && measured <= limit,
        skipped: None,
        violations: Vec::new(),
    }
}

fn goals(m: &Measures) -> Vec<Outcome> {
    let minimum = m.storm_minimum_moves.max(1) as f64;
    vec![
        at_most(
            "failover-moves",
            m.failover_moves as f64,
            0.0,
            format!("{} shards moved", m.failover_moves),
            "0 (a fail-over moves nothing)".into(),
        ),
        at_most(
            "failover-sessions-back",
            m.failover_sessions_back_seconds,
            FAILOVER_SESSIONS_WITHIN.as_secs_f64(),
            format!(
                "{:.2} s (SIGTERM to the last session open with the new leader)",
                m.failover_sessions_back_seconds
            ),
            format!("every session back within {} s", FAILOVER_SESSIONS_WITHIN.as_secs()),
        ),
        at_most(
            "storm-moves",
            m.storm_moves as f64 / minimum,
            STORM_MOVES_OVER_MINIMUM,
            format!(
                "{} moves for {} shards the {} leavers held ({:.2}×)",
                m.storm_moves,
                m.storm_minimum_moves,
                m.storm_workers,
                m.storm_moves as f64 / minimum
            ),
            format!("≤ {STORM_MOVES_OVER_MINIMUM}× the minimum (the shards the leavers held)"),
        ),
        at_most(
            "step-p99",
            m.step_p99_ms,
            STEP_P99.as_secs_f64() * 1000.0,
            format!("{:.2} ms (p50 {:.2} ms, {} steps)", m.step_p99_ms, m.step_p50_ms, m.steps),
            format!("< {} ms", STEP_P99.as_millis()),
        ),
        at_most(
            "leader-rss",
            m.leader_peak_rss_mib,
            (LEADER_RSS_BYTES / (1024 * 1024)) as f64,
            format!("{:.0} MiB peak", m.leader_peak_rss_mib),
            format!("< {} MiB", LEADER_RSS_BYTES / (1024 * 1024)),
        ),
        at_most(
            "leader-cpu-at-rest",
            m.leader_cpu_cores_at_rest,
            LEADER_CPU_AT_REST,
            format!("{:.3} cores", m.leader_cpu_cores_at_rest),
            format!("< {LEADER_CPU_AT_REST} cores"),
        ),
        at_most(
            "load-balance",
            m.max_over_mean_load,
            BALANCE,
            format!(
                "{:.3} max/mean load ({:.3} by shard count)",
                m.max_over_mean_load, m.max_over_mean_shards
            ),
            format!("≤ {BALANCE}"),
        ),
        at_most(
            "no-moves-at-rest",
            m.moves_at_rest as f64,
            0.0,
            format!("{} moves", m.moves_at_rest),
            "0 (a settled fleet with steady loads moves nothing)".into(),
        ),
    ]
}

fn summary(report: &FleetScaleReport) -> String {
    use std::fmt::Write;
    let m = &report.measures;
    let p = &report.parameters;
    let mut s = String::new();
    let verdict = if report.passed { "PASSED" } else { "FAILED" };
    let _ = writeln!(
        s,
        "\n{NAME} {verdict} in {:.0} s: M = {}, S = {}, {} store, worker lease {} s (load average {})",
        report.wall_seconds, p.workers, p.shards, p.store, p.worker_lease_seconds, m.load_average
    );
    let _ = writeln!(
        s,
        "  every shard active        {:.1} s (settled {:.1} s)",
        m.all_active_seconds, m.settled_seconds
    );
    let keepalives = m
        .store_keepalives_per_second_at_rest
        .map_or(String::new(), |k| format!(", {k:.1} lease keep-alives/s"));
    let _ = writeln!(s, "  store writes at rest      {:.1}/s{keepalives}", m.store_writes_per_second_at_rest);
    for o in report.audits.iter().chain(&report.goals) {
        let mark = if o.skipped.is_some() {
            "skip"
        } else if o.passed {
            "ok  "
        } else {
            "FAIL"
        };
        let _ = writeln!(s, "  {mark} {:<28} {} (target: {})", o.name, o.measured, o.target);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPOSITION: &str = "# HELP fleet_step_duration_seconds x\n\
        fleet_step_duration_seconds_bucket{le=\"0.001\"} 50\n\
        fleet_step_duration_seconds_bucket{le=\"0.01\"} 90\n\
        fleet_step_duration_seconds_bucket{le=\"0.05\"} 100\n\
        fleet_step_duration_seconds_bucket{le=\"+Inf\"} 100\n\
        fleet_step_duration_seconds_sum 0.3\n\
        etcd_mvcc_put_total 7\n\
        etcd_mvcc_put_totals 1000\n\
        etcd_mvcc_delete_total{a=\"b\"} 3\n";

    #[test]
    fn quantiles_interpolate_within_their_bucket() {
        let buckets = histogram(EXPOSITION, "fleet_step_duration_seconds");
        assert_eq!(buckets.len(), 4);
        assert!((quantile(&buckets, 0.5) - 0.001).abs() < 1e-12);
        // The 99th of 100 lies nine tenths into the (0.01, 0.05] bucket.
        assert!((quantile(&buckets, 0.99) - 0.046).abs() < 1e-9, "{}", quantile(&buckets, 0.99));
        assert!(quantile(&BTreeMap::new(), 0.99).is_nan());
    }

    #[test]
    fn metric_sums_take_the_named_series_only() {
        assert_eq!(metric_sum(EXPOSITION, "etcd_mvcc_put_total"), 7.0);
        assert_eq!(metric_sum(EXPOSITION, "etcd_mvcc_delete_total"), 3.0);
    }

    fn shard(shard: u32, owner: &str, load: f64) -> pb::ShardInfo {
        pb::ShardInfo { shard, owner: owner.into(), epoch: 1, state: "active".into(), load, pinned: false }
    }

    #[test]
    fn balance_counts_every_worker_including_idle_ones() {
        let shards = [shard(0, "a", 2.0), shard(1, "a", 1.0), shard(2, "b", 1.0)];
        let (load, count) = balance(&shards, 3);
        assert!((load - 3.0 / (4.0 / 3.0)).abs() < 1e-9, "{load}");
        assert!((count - 2.0).abs() < 1e-9, "{count}");
    }

    #[test]
    fn storm_and_failover_goals_follow_the_issue() {
        let m = Measures {
            failover_moves: 0,
            failover_sessions_back_seconds: 3.0,
            storm_minimum_moves: 400,
            storm_moves: 441,
            step_p99_ms: 12.0,
            leader_peak_rss_mib: 100.0,
            leader_cpu_cores_at_rest: 0.05,
            max_over_mean_load: 1.2,
            ..Measures::default()
        };
        let failed: Vec<String> = goals(&m).into_iter().filter(|g| !g.passed).map(|g| g.name).collect();
        assert_eq!(failed, ["storm-moves"], "441 > 1.1 × 400");
        let m = Measures { storm_moves: 440, failover_moves: 1, ..m };
        let failed: Vec<String> = goals(&m).into_iter().filter(|g| !g.passed).map(|g| g.name).collect();
        assert_eq!(failed, ["failover-moves"]);
    }
}
