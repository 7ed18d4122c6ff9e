//! `loadtest run SCENARIO`: the sim cluster (in this process, with its audit log) or any cluster
//! through a kubeconfig, the fleet as processes beside it (or the one already deployed), a
//! scenario's workload and faults over time with live progress, then the audits from the
//! server's side, the goals, and the report in the run's folder.

pub mod cron_outage;
mod expect;
pub(crate) mod faults;
pub mod finalizer_leak;
pub mod fleet_scale;
pub mod indexed_large_job;
mod leader_metrics;
mod lease_lapses;
pub mod noisy_neighbour;
pub mod own_kind;
pub mod podgc_policy;
pub(crate) mod progress;
pub mod quota_deadlock;
mod recovery;
mod replay;
pub(crate) mod report;
mod rollout;
mod scaling;
mod stored_map;
mod target;
pub mod ttl_wave;
mod workload;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use batchfleet_audits::cron::{CronClock, CronJobUnderTest};
use batchfleet_audits::handover::{Bounds, HandOver};
use batchfleet_audits::logs::ExpectedError;
use batchfleet_audits::objects::{ObjectWatch, ObjectsSeen};
use batchfleet_audits::{Outcome, api_usage, cron, jobs, logs, objects, podgc, tenure};
use batchfleet_sim::audit::AuditEvent;
use jiff::Timestamp;
use tokio::process::Child;
use tokio::time::Instant;

use crate::fleet_processes::{self, EtcdProcess, FleetLayout, FleetProcesses};
use crate::proc_stat::UsageSampler;
use crate::scenario::{Fault, FaultAction, Scenario, Store};
use progress::Progress;
use report::{HARNESS, HandOverReport, JobCounts, Latencies, Report};
pub use target::{FleetChoice, TargetArgs};
use target::{RUN_LABEL, Target};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// A scenario file, or the name of one in loadtest/scenarios/ (`job-burst`, `worker-churn`, …).
    pub scenario: String,
    /// The run's folder: report.json, latency-cdf.svg, audit.log, the processes' logs and the
    /// harness's own log (default target/loadtest/<scenario>-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Then run the same workload again under one `fleet-worker --standalone` on a fresh sim
    /// (in `<out>/replay`), and fail the audit `jobs-finish-as-standalone` for every Job whose
    /// final status (conditions, counts, completedIndexes, failedIndexes) differs.
    #[arg(long)]
    pub replay: bool,
    /// Start this many workers (w-0 … w-<N-1>) instead of the scenario's `fleet.workers`;
    /// fleet-scale: M, the light workers [default: 1000].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Run the fleet on this coordination store, whatever the scenario's `fleet.store` says
    /// (fleet-scale: kubernetes unless given).
    #[arg(long, value_enum)]
    pub store: Option<Store>,
    #[command(flatten)]
    pub fleet_scale: fleet_scale::FleetScaleArgs,
}

/// The scenario `args` name, fitted to their target; the error (exit 2) names the file and
/// field, or the fault the target cannot apply.
pub fn load(args: &RunArgs) -> Result<(String, Scenario), String> {
    if args.fleet_scale.any() {
        return Err(format!(
            "--shards, --worker-lease and --rest are for `loadtest run {}` only",
            fleet_scale::NAME
        ));
    }
    let (name, mut scenario) = crate::scenario::load(&args.scenario).map_err(|e| e.to_string())?;
    if let Some(store) = args.store {
        scenario =
            crate::scenario::on_store(scenario, store).map_err(|e| format!("{}: {e}", args.scenario))?;
    }
    if args.replay && scenario.scaling.is_some() {
        return Err(format!("{}: --replay is for one run, not a scaling run", args.scenario));
    }
    if let Some(workers) = args.workers {
        if scenario.scaling.is_some() || scenario.fleet.standalone {
            return Err(format!(
                "{}: --workers sizes a fleet of workers; this scenario runs {}",
                args.scenario,
                if scenario.fleet.standalone {
                    "one standalone worker"
                } else {
                    "the sizes in scaling.workers"
                }
            ));
        }
        if workers == 0 {
            return Err("--workers: a fleet needs at least one worker".into());
        }
        scenario.fleet.workers = workers;
    }
    let scenario = target::fit(scenario, &args.target).map_err(|e| format!("{}: {e}", args.scenario))?;
    Ok((name, scenario))
}

/// `target/loadtest/<scenario>-<UTC time>` of the workspace.
pub fn default_out(scenario: &str) -> PathBuf {
    let time = Timestamp::now().strftime("%Y%m%dT%H%M%SZ").to_string();
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/loadtest").join(format!("{scenario}-{time}"))
}

/// How long the fleet may take to start and place every shard (debug builds, a busy machine).
const START_WITHIN: Duration = Duration::from_secs(240);
/// A scheduled time this close to the workload's end may not have been acted on yet; the cron
/// audit's window closes this much (wall time) before it.
const CRON_WINDOW_LAG: Duration = Duration::from_secs(5);

/// The controllers beside the cluster; every process is killed when dropped.
enum Controllers {
    Fleet(FleetProcesses),
    Standalone(Child),
    /// Already deployed on the cluster (`--fleet none`): none of the harness's.
    Deployed,
}

impl Controllers {
    async fn start(
        scenario: &Scenario,
        kubeconfig: &Path,
        logs: &Path,
        store_flags: Vec<String>,
        clock: &CronClock,
        sampler: &UsageSampler,
    ) -> anyhow::Result<Self> {
        let fleet = &scenario.fleet;
        let mut worker_flags = Vec::new();
        if fleet.cron_clock_speed != 1.0 {
            worker_flags.extend(["--test-clock".to_string(), clock.flag()]);
        }
        if let Some(qps) = fleet.kube_api_qps {
            worker_flags.extend(["--kube-api-qps".to_string(), qps.to_string()]);
        }
        if let Some(burst) = fleet.kube_api_burst {
            worker_flags.extend(["--kube-api-burst".to_string(), burst.to_string()]);
        }
        worker_flags.extend(fleet.worker_args.iter().cloned());
        if fleet.standalone {
            let metrics: SocketAddr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
            worker_flags.extend(["--shards".to_string(), fleet.shards.to_string()]);
            let mut worker = fleet_processes::start_standalone(kubeconfig, metrics, logs, &worker_flags)?;
            sampler.register("standalone", worker.id());
            fleet_processes::wait_standalone_ready(&mut worker, metrics, logs, START_WITHIN).await?;
            return Ok(Self::Standalone(worker));
        }
        let leader = fleet.leader_lease.0;
        let format = |d: Duration| humantime::format_duration(d).to_string();
        let layout = FleetLayout {
            shards: fleet.shards,
            coordinators: fleet.coordinators,
            workers: fleet.workers,
            worker_lease: fleet.worker_lease.flag(),
            common_flags: store_flags,
            coordinator_flags: fleet
                .lease_margin
                .flag()
                .map(|margin| vec!["--worker-lease-margin".to_string(), margin])
                .unwrap_or_default()
                .into_iter()
                .chain([
                    "--leader-elect-lease-duration".into(),
                    format(leader),
                    "--leader-elect-renew-deadline".into(),
                    format(leader * 3 / 4),
                    "--leader-elect-retry-period".into(),
                    format(leader / 10),
                ])
                .collect(),
            worker_flags,
            tls_dir: None,
        };
        let processes = fleet_processes::start(kubeconfig, &layout, logs).await?;
        for (i, c) in processes.coordinators.iter().enumerate() {
            sampler.register(&format!("coordinator-{i}"), c.id());
        }
        for (id, w) in &processes.workers {
            sampler.register(id, w.id());
        }
        processes.wait_placed(START_WITHIN).await?;
        Ok(Self::Fleet(processes))
    }

    /// Kills every process and waits for each.
    async fn stop(self) {
        match self {
            Self::Fleet(mut fleet) => {
                for child in fleet.coordinators.iter_mut().chain(fleet.workers.iter_mut().map(|(_, c)| c)) {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
            }
            Self::Standalone(mut worker) => {
                let _ = worker.start_kill();
                let _ = worker.wait().await;
            }
            Self::Deployed => {}
        }
    }

    /// The logs of the fleet's processes (every one ever started: a restart appends).
    fn log_files(&self, dir: &Path) -> Vec<(String, PathBuf)> {
        let names: Vec<String> = match self {
            Self::Fleet(fleet) => (0..fleet.coordinators.len())
                .map(|i| format!("coordinator-{i}"))
                .chain(fleet.workers.iter().map(|(id, _)| id.clone()))
                .collect(),
            Self::Standalone(_) => vec!["standalone".into()],
            Self::Deployed => Vec::new(),
        };
        names.into_iter().map(|n| (n.clone(), dir.join(format!("{n}.log")))).collect()
    }
}

/// The audit log once the sim wrote everything it was sent: its size the same twice in a row
/// and every line whole.
pub(crate) async fn settled_audit_log(path: &Path) -> anyhow::Result<Vec<AuditEvent>> {
    settled_audit_events(path, Duration::from_secs(30), |_| true).await
}

/// The events of the lines `keep` accepts, once the audit log is settled as above (those lines
/// whole). Only they are parsed: a large run's whole log is more than the harness needs to hold.
pub(crate) async fn settled_audit_events(
    path: &Path,
    within: Duration,
    keep: impl Fn(&str) -> bool,
) -> anyhow::Result<Vec<AuditEvent>> {
    let deadline = Instant::now() + within;
    let mut last_len = None;
    loop {
        let len = std::fs::metadata(path).map(|m| m.len()).ok();
        if len.is_some()
            && len == last_len
            && let Ok(events) = read_kept_lines(path, &keep)
        {
            return Ok(events);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the audit log {} did not settle within {}s",
            path.display(),
            within.as_secs()
        );
        last_len = len;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn read_kept_lines(path: &Path, keep: &impl Fn(&str) -> bool) -> anyhow::Result<Vec<AuditEvent>> {
    use std::io::BufRead;
    let mut events = Vec::new();
    for line in std::io::BufReader::new(std::fs::File::open(path)?).lines() {
        let line = line?;
        if !line.trim().is_empty() && keep(&line) {
            events.push(serde_json::from_str(&line)?);
        }
    }
    Ok(events)
}

/// Whether everything the workload started is over: every Job finished, every finished Job with
/// a TTL deleted.
fn settled(seen: &ObjectsSeen) -> bool {
    seen.jobs.values().all(|j| j.deleted_seen.is_some() || (j.finished.is_some() && j.ttl_seconds.is_none()))
}

/// What a run saw, for the audits.
struct Observed<'a> {
    scenario: &'a Scenario,
    seen: &'a ObjectsSeen,
    /// The sim's audit log; `None` against a cluster through a kubeconfig, where the audits
    /// come from the watches alone.
    events: Option<&'a [AuditEvent]>,
    /// The workload's namespaces and the probes' (`crash_recovery`).
    namespaces: &'a [String],
    probe_namespaces: &'a [String],
    /// Per shard, its changes of owner (epoch − 1).
    moves: &'a BTreeMap<u32, u64>,
    cronjobs: &'a [CronJobUnderTest],
    /// The scheduled times every CronJob had to run, on the controllers' clock.
    cron_window: (Timestamp, Timestamp),
    clock: &'a CronClock,
    end: Timestamp,
    log_files: &'a [(String, PathBuf)],
    planned: usize,
    create_errors: &'a [String],
    /// The faults as applied, and the wall time the workload started (their clock's zero).
    faults: &'a [faults::FaultRecord],
    work_started: Timestamp,
    /// The pods of lost nodes that still exist at the end.
    orphans_left: &'a std::collections::BTreeSet<(String, String)>,
}

/// The ERROR lines the scenario's faults make processes write: the fault, not a fault of theirs.
fn errors_faults_cause(faults: &[Fault]) -> Vec<ExpectedError> {
    let mut expected = Vec::new();
    for fault in faults {
        match fault.action {
            // A paused worker finds its lease lapsed when it resumes.
            FaultAction::PauseWorker => expected.push(ExpectedError {
                process: fault.worker.clone(),
                contains: "the worker lease lapsed".into(),
            }),
            // kube-rs logs every 5xx answer at ERROR.
            FaultAction::ApiFaults => expected.push(ExpectedError {
                process: None,
                contains: "kube_client::client::builder: failed with status 5".into(),
            }),
            _ => {}
        }
    }
    expected
}

/// Why the tenure audit cannot be made from watches: it needs who wrote each object.
const TENURES_NEED_THE_AUDIT_LOG: &str = "needs the audit log (which worker sent each write); watches show \
     only managedFields managers, and every worker writes as manager `fleet-worker`";

/// How long a shard may go without an acting owner: a few seconds after a graceful move; after a
/// lost worker (or leader) its lease, the margin and a slack.
fn hand_over_bounds(scenario: &Scenario) -> Bounds {
    let fleet = &scenario.fleet;
    let lease = fleet.worker_lease_at_most().max(fleet.leader_lease.0);
    Bounds {
        graceful: Duration::from_secs(5),
        lost: lease + fleet.lease_margin_at_most() + Duration::from_secs(10),
    }
}

/// Every audit, the TTL lags (wall seconds) the TTL audit measured, and the hand-overs (in sum,
/// and each).
fn audit(o: &Observed<'_>) -> (Vec<Outcome>, Vec<f64>, HandOverReport, Vec<HandOver>) {
    let scenario = o.scenario;
    let in_scope = |ns: &str| o.namespaces.iter().any(|n| n == ns);
    // A TTL falling due in a shard whose worker was just lost waits for the shard's new owner.
    let ttl_grace = scenario.fleet.worker_lease_at_most()
        + scenario.fleet.lease_margin_at_most()
        + Duration::from_secs(10);
    let (deletes, source) = match o.events {
        Some(events) => (jobs::job_deletes(events), jobs::DeleteSource::AuditLog),
        None => (jobs::watched_deletes(o.seen), jobs::DeleteSource::Watch),
    };
    let ttl = jobs::ttl_respected(o.seen, &deletes, source, o.end, ttl_grace, o.clock);
    let expected_errors = errors_faults_cause(&scenario.faults);
    let tenures = match o.events {
        Some(events) => tenure::tenures_never_overlap(events, scenario.fleet.shards, o.moves, in_scope),
        None => Outcome::skipped(
            "shard-tenures-never-overlap",
            "writers of a shard switch at most once per move",
            TENURES_NEED_THE_AUDIT_LOG,
        ),
    };
    let logged = if o.log_files.is_empty() {
        Outcome::skipped(
            "no-panic-or-error-logged",
            "no panic or ERROR line in any fleet process's log",
            "the harness started no fleet process (--fleet none); the deployed fleet's logs are not its to read",
        )
    } else {
        logs::no_errors_logged(o.log_files.iter().map(|(n, p)| (n.as_str(), p.as_path())), &expected_errors)
    };
    let loses_nodes = scenario.faults.iter().any(|f| f.action == FaultAction::LoseNode);
    let (owner_acting, hand_overs, each_hand_over) = match o.events {
        Some(events) => faults::hand_over_audit(
            events,
            o.seen,
            scenario.fleet.shards,
            in_scope,
            &faults::as_audited(o.faults, o.work_started),
            hand_over_bounds(scenario),
            o.end,
        ),
        None => (
            Outcome::skipped(
                "shard-owner-acting-within-bound",
                "every shard with work has an acting owner within its bound",
                TENURES_NEED_THE_AUDIT_LOG,
            ),
            HandOverReport::default(),
            Vec::new(),
        ),
    };
    let mut audits = vec![
        Outcome::from_violations(
            "all-jobs-created",
            "every planned Job created",
            o.planned,
            "Jobs planned",
            o.create_errors.to_vec(),
        ),
        tenures,
        owner_acting,
        objects::parallelism_never_exceeded(o.seen),
        objects::no_pod_after_finish(o.seen, o.clock),
        jobs::final_status_as_upstream(o.seen, |j| {
            let probe = match &scenario.crash_recovery {
                Some(spec) if o.probe_namespaces.contains(&j.namespace) => Some(recovery::probe_shape(spec)),
                _ => None,
            };
            // A lost node's pods count as failed where they ran: the Jobs replace them, and
            // their failed counts depend on what ran there.
            probe
                .or_else(|| expect::shape_of(&scenario.workload, j))
                .map(|s| s.expected())
                .map(|e| if loses_nodes { jobs::ExpectedStatus { failed: None, ..e } } else { e })
        }),
        objects::job_names_created_once(o.seen),
        ttl.outcome,
        logged,
    ];
    let lost = faults::lost_nodes(o.faults, o.work_started);
    // Nodes are lost only on the sim the harness starts, whose audit log it reads.
    if let (false, Some(events)) = (lost.is_empty(), o.events) {
        let (outcome, _) = podgc::orphans_collected(events, &lost, o.orphans_left, faults::PODGC_PACE);
        audits.push(outcome);
    }
    if !o.cronjobs.is_empty() {
        let (from, to) = o.cron_window;
        audits.push(cron::every_time_ran_once(o.seen, o.cronjobs, from, to));
    }
    (audits, ttl.lags, hand_overs, each_hand_over)
}

/// The etcd store's process, when the harness starts the fleet on it.
async fn start_store(
    scenario: &Scenario,
    controllers: FleetChoice,
    out: &Path,
    logs_dir: &Path,
    sampler: &UsageSampler,
) -> anyhow::Result<Option<EtcdProcess>> {
    if scenario.fleet.store != Store::Etcd || scenario.fleet.standalone || controllers == FleetChoice::None {
        return Ok(None);
    }
    let etcd = fleet_processes::start_etcd(&out.join("etcd-data"), logs_dir, Duration::from_secs(30)).await?;
    sampler.register("etcd", etcd.child.id());
    Ok(Some(etcd))
}

/// Runs `scenario` against `target` (a scaling run: each of its runs) with its output in
/// `out`; answers whether every audit and goal passed, and the report's path.
pub async fn run(
    name: &str,
    scenario: Scenario,
    out: &Path,
    target: &TargetArgs,
    replay: bool,
) -> anyhow::Result<(bool, PathBuf)> {
    if let Some(spec) = scenario.scaling.clone() {
        return scaling::run(name, scenario, &spec, out).await;
    }
    let mut report = run_once(name, scenario.clone(), out, target).await?;
    if replay {
        println!("\nreplaying the workload under one fleet-worker --standalone");
        let dir = out.join("replay");
        std::fs::create_dir_all(&dir)?;
        let standalone =
            run_once(&format!("{name}-replay"), replay::standalone(&scenario), &dir, &TargetArgs::default())
                .await
                .context("the replay under a standalone worker")?;
        let path = write_report(&standalone, &dir)?;
        println!();
        report.add_audit(replay::same_as_standalone(
            &report.final_statuses,
            &standalone.final_statuses,
            &report.namespaces,
        ));
        report.files.insert("replay_report".into(), path.display().to_string());
    }
    let path = write_report(&report, out)?;
    Ok((report.passed, path))
}

/// `report` as `out/report.json`, and its summary on the terminal.
fn write_report(report: &Report, out: &Path) -> anyhow::Result<PathBuf> {
    let path = out.join("report.json");
    std::fs::write(&path, serde_json::to_vec_pretty(report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    print!("{}", report::summary(report));
    Ok(path)
}

/// One run of `scenario`, its output in `out`; answers its report (not yet written).
async fn run_once(name: &str, scenario: Scenario, out: &Path, target: &TargetArgs) -> anyhow::Result<Report> {
    let started = Timestamp::now();
    let wall = Instant::now();
    let logs_dir = out.join("logs");
    std::fs::create_dir_all(&logs_dir)?;
    let sampler = UsageSampler::start(Duration::from_millis(500));
    sampler.register(HARNESS, Some(std::process::id()));

    let cluster = Target::start(&scenario, target.kubeconfig.as_deref(), out).await?;
    let client = cluster.client.clone();
    let run_label = target::run_label_value();
    let label = (RUN_LABEL, run_label.as_str());
    let namespaces = scenario.workload.namespace_names(scenario.fleet.shards);
    workload::create_namespaces(&client, &namespaces).await?;
    // One namespace per shard for `crash_recovery`'s probes, made before anything is killed.
    let probe_namespaces = match &scenario.crash_recovery {
        Some(_) => recovery::probe_namespaces(&scenario.workload.namespace_prefix, scenario.fleet.shards)?,
        None => BTreeMap::new(),
    };
    let probe_namespace_list: Vec<String> = probe_namespaces.values().cloned().collect();
    workload::create_namespaces(&client, &probe_namespace_list).await?;
    let audited_namespaces: Vec<String> = namespaces.iter().chain(&probe_namespace_list).cloned().collect();

    let mut etcd = start_store(&scenario, target.fleet, out, &logs_dir, &sampler).await?;
    let store_flags = match &etcd {
        Some(etcd) => vec!["--store".into(), "etcd".into(), "--etcd-endpoints".into(), etcd.endpoint.clone()],
        None => Vec::new(),
    };
    let stored_map = if target.fleet == FleetChoice::Scenario && !scenario.fleet.standalone {
        Some(stored_map::StoredMap::open(&client, etcd.as_ref().map(|e| e.endpoint.as_str())).await?)
    } else {
        None
    };
    let clock = CronClock::starting_now(scenario.fleet.cron_clock_speed);
    println!("scenario {name}: {}", scenario.description);
    let mut controllers = if target.fleet == FleetChoice::None {
        println!("using the controllers deployed on the cluster of {}", cluster.kubeconfig.display());
        Controllers::Deployed
    } else {
        println!("starting the fleet (logs in {})", logs_dir.display());
        Controllers::start(&scenario, &cluster.kubeconfig, &logs_dir, store_flags, &clock, &sampler).await?
    };
    if let Some(chaos) = &scenario.chaos {
        println!("chaos, seed {}: {} faults planned", chaos.seed, scenario.faults.len());
        for line in crate::chaos::describe(&scenario.faults) {
            println!("  {line}");
        }
    }
    let selector = format!("{RUN_LABEL}={run_label}");
    let watch = ObjectWatch::start_selected(&client, Duration::from_secs(30), Some(&selector)).await?;
    let cronjobs = workload::create_cronjobs(&client, &scenario.workload, &namespaces, label).await?;
    let cron_from = clock.now();

    let planned = workload::planned_jobs(&scenario.workload, scenario.duration.0);
    let sent = Arc::new(workload::Sent::default());
    let progress = Progress::start(planned, sent.clone(), watch.seen.clone());
    let start = Instant::now();
    let work_started = Timestamp::now();
    let until = start + scenario.duration.0;
    progress.status(format!("workload for {}", scenario.duration));
    let on_fault = |f: &faults::FaultRecord| {
        progress
            .status(format!("fault at {:.1}s: {} {} — {}", f.applied_seconds, f.action, f.target, f.result))
    };
    let generate = workload::send_jobs(
        client.clone(),
        scenario.workload.clone(),
        namespaces.clone(),
        (start, until),
        label,
        sent.clone(),
    );
    let mut probes = scenario
        .crash_recovery
        .as_ref()
        .map(|spec| recovery::Probes::new(client.clone(), probe_namespaces.clone(), label, spec));
    let fault_records = match &mut controllers {
        Controllers::Fleet(fleet) => {
            let (_, records, _) = tokio::join!(
                generate,
                faults::run(
                    faults::Targets {
                        fleet,
                        sim: cluster.sim.as_ref(),
                        etcd: etcd.as_mut(),
                        map: stored_map.as_ref(),
                        probes: probes.as_mut(),
                    },
                    &scenario.faults,
                    start,
                    &sampler,
                    on_fault
                ),
                tokio::time::sleep_until(until)
            );
            records
        }
        Controllers::Standalone(_) | Controllers::Deployed => {
            tokio::join!(generate, tokio::time::sleep_until(until));
            Vec::new()
        }
    };
    let cron_to = clock.at(Timestamp::now() - jiff::SignedDuration::try_from(CRON_WINDOW_LAG)?);
    let settle_deadline = Instant::now() + scenario.settle.0;
    if !cronjobs.is_empty() {
        // A storm's last times may still be queued behind the client rate: they run late, as
        // upstream runs them, so the CronJobs are suspended only once the window's times ran
        // (or the settle ran out, and the audit names what was missed).
        progress.status("waiting for the CronJobs' scheduled times in the window to run".to_string());
        while cron::times_not_yet_run(&watch.seen.lock(), &cronjobs, cron_from, cron_to) > 0
            && Instant::now() < settle_deadline
        {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    workload::suspend_cronjobs(&client, &cronjobs).await;

    progress
        .status(format!("waiting up to {} for every Job to finish and every TTL to pass", scenario.settle));
    while !settled(&watch.seen.lock()) && Instant::now() < settle_deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    progress.finish("workload over; auditing");
    let end = Timestamp::now();

    let epochs = match &controllers {
        Controllers::Fleet(fleet) => {
            fleet.shard_epochs().await.context("reading shard epochs from the leader")?
        }
        Controllers::Standalone(_) | Controllers::Deployed => BTreeMap::new(),
    };
    let moves: BTreeMap<u32, u64> = epochs.into_iter().map(|(s, e)| (s, e.saturating_sub(1))).collect();
    let orphans_left = faults::pods_left(&client, &faults::lost_nodes(&fault_records, work_started)).await;
    let usage = sampler.finish();
    let log_files = controllers.log_files(&logs_dir);
    let fleet_started = matches!(controllers, Controllers::Fleet(_));
    controllers.stop().await;
    if let Some(mut etcd) = etcd {
        let _ = etcd.child.start_kill();
        let _ = etcd.child.wait().await;
    }
    let seen = std::mem::take(&mut *watch.seen.lock());
    drop(watch);
    let events = match &cluster.audit_log {
        Some(path) => Some(settled_audit_log(path).await?),
        None => None,
    };
    if cluster.sim.is_none() {
        // What the run made on a cluster that outlives it goes with the run.
        workload::delete_namespaces(&client, &audited_namespaces).await;
    }

    let create_errors = sent.errors.lock().clone();
    let (mut audits, ttl_lags, hand_overs, each_hand_over) = audit(&Observed {
        scenario: &scenario,
        seen: &seen,
        events: events.as_deref(),
        namespaces: &audited_namespaces,
        probe_namespaces: &probe_namespace_list,
        moves: &moves,
        cronjobs: &cronjobs,
        cron_window: (cron_from, cron_to),
        clock: &clock,
        end,
        log_files: &log_files,
        planned,
        create_errors: &create_errors,
        faults: &fault_records,
        work_started,
        orphans_left: &orphans_left,
    });

    let created_at = sent.created_at.lock().clone();
    let mut latencies = Latencies::default();
    for j in seen.jobs.values() {
        let Some(created) = created_at.get(&(j.namespace.clone(), j.name.clone())) else { continue };
        let since = |t: Option<Timestamp>| t.map(|t| t.duration_since(*created).as_secs_f64());
        latencies.first_pod.extend(since(j.first_pod_seen));
        latencies.all_pods_created.extend(since(j.last_pod_seen));
        latencies.finished.extend(since(j.finished.as_ref().map(|f| f.seen)));
    }
    let latency = report::latency_table(&latencies);
    let ttl_lag = report::Percentiles::of(&ttl_lags);
    let cron_skew = report::Percentiles::of(&cron::skews(&seen, &cronjobs, &clock));
    let finished_jobs: Vec<(Timestamp, u64)> = seen
        .jobs
        .values()
        .filter_map(|j| {
            let pods = j
                .status
                .as_ref()
                .map_or(0, |s| s.succeeded.unwrap_or(0).max(0) + s.failed.unwrap_or(0).max(0));
            Some((j.finished.as_ref()?.seen, pods as u64))
        })
        .collect();
    let throughput = report::Throughput::of(&seen.pods_finished, &finished_jobs, work_started);
    let processes = report::processes(&usage);
    let mut goals = report::goals(&scenario.goals, &latency, &ttl_lag, &throughput, &processes);
    let rollout = fault_records.iter().find_map(|f| f.rollout.as_ref()).map(|record| {
        let finished = seen.jobs.values().filter_map(|j| {
            let created = *created_at.get(&(j.namespace.clone(), j.name.clone()))?;
            Some((created, j.finished.as_ref()?.seen))
        });
        let latencies = rollout::FinishedLatencies::split(finished, work_started, record);
        let (report, outcomes) = rollout::goals(&scenario.goals, record, &each_hand_over, &latencies);
        goals.extend(outcomes);
        report
    });
    if rollout.is_none() && scenario.faults.iter().any(|f| f.action == FaultAction::RollingRestart) {
        goals.push(Outcome::from_violations(
            "rollout-completed",
            "every worker restarted and ready, then the stored shard map settled, nobody draining",
            1,
            "rollouts",
            fault_records
                .iter()
                .filter(|f| f.action == FaultAction::RollingRestart.name())
                .map(|f| f.result.clone())
                .collect(),
        ));
    }
    let recovery = probes.map(|p| recovery::measure(&p.kills, events.as_deref(), &seen, work_started));
    if let Some(recovery) = &recovery {
        audits.push(recovery::shards_recovered_audit(recovery));
        let goal = scenario.goals.recovery_p99.and_then(|g| g.on(scenario.fleet.store));
        goals.extend(goal.map(|goal| recovery::recovery_goal(goal, recovery)));
    }
    let lease_lapses = fleet_started.then(|| {
        // A paused worker finds its lease lapsed once it runs again, within a lease.
        let slack = scenario.fleet.worker_lease_at_most() + Duration::from_secs(5);
        let pauses = lease_lapses::pause_windows(&scenario.faults, &fault_records, work_started, slack);
        lease_lapses::count(&log_files, &pauses)
    });
    if let (Some(max), Some(lapses)) = (scenario.goals.false_expiries_max, &lease_lapses) {
        goals.push(lease_lapses::goal(max, lapses));
    }
    let passed = audits.iter().chain(&goals).all(Outcome::not_failed);
    let violations = report::violations(audits.iter().chain(&goals));
    let finished_with = |c: &str| {
        seen.jobs.values().filter(|j| j.finished.as_ref().is_some_and(|f| f.condition == c)).count()
    };
    let mut files = BTreeMap::from([
        ("process_logs".to_string(), logs_dir.display().to_string()),
        ("harness_log".to_string(), out.join("loadtest.log").display().to_string()),
        ("kubeconfig".to_string(), cluster.kubeconfig.display().to_string()),
    ]);
    if let Some(path) = &cluster.audit_log {
        files.insert("audit_log".into(), path.display().to_string());
    }
    let latency_plot = out.join("latency-cdf.svg");
    let drawn = report::plot_latencies(&latency_plot, name, &latencies);
    report::record_plot(&mut files, "latency_cdf", &latency_plot, drawn);
    let throughput_plot = out.join("throughput.svg");
    let drawn = report::plot_throughput(&throughput_plot, name, &throughput);
    report::record_plot(&mut files, "throughput", &throughput_plot, drawn);
    if let Some(recovery) = &recovery {
        let recovery_plot = out.join("recovery-cdf.svg");
        let goal = scenario.goals.recovery_p99.and_then(|g| g.on(scenario.fleet.store));
        let drawn = recovery::plot(&recovery_plot, name, recovery, goal);
        report::record_plot(&mut files, "recovery_cdf", &recovery_plot, drawn);
    }
    let report = Report {
        scenario: name.to_string(),
        description: scenario.description.clone(),
        started: started.to_string(),
        wall_seconds: report::seconds(wall.elapsed()),
        passed,
        cluster: match &target.kubeconfig {
            Some(_) => format!("kubeconfig {}", cluster.kubeconfig.display()),
            None => "the sim, started by the harness".into(),
        },
        fleet: match (target.fleet, scenario.fleet.standalone) {
            (FleetChoice::None, _) => "deployed (not started by the harness)".into(),
            (_, true) => "fleet-worker --standalone, started by the harness".into(),
            (_, false) => format!(
                "{} coordinators and {} workers, started by the harness",
                scenario.fleet.coordinators, scenario.fleet.workers
            ),
        },
        audits_from: if events.is_some() { "audit log and watches" } else { "watches" }.into(),
        audits,
        goals,
        violations,
        jobs: JobCounts {
            planned,
            created: sent.created(),
            create_errors: create_errors.len(),
            seen: seen.jobs.len(),
            complete: finished_with("Complete"),
            failed: finished_with("Failed"),
            unfinished: seen.jobs.values().filter(|j| j.finished.is_none()).count(),
        },
        latency_seconds: latency,
        ttl_lag_seconds: ttl_lag,
        cron_skew_seconds: cron_skew,
        throughput,
        hand_overs,
        rollout,
        recovery,
        lease_lapses,
        chaos: scenario
            .chaos
            .as_ref()
            .map(|c| report::ChaosPlan { seed: c.seed, faults: crate::chaos::describe(&scenario.faults) }),
        faults: fault_records,
        processes,
        api_requests: events.as_deref().map(api_usage::requests_by_process),
        files,
        final_statuses: replay::final_statuses(&seen, &namespaces, &scenario.workload),
        namespaces,
    };
    drop(cluster);
    Ok(report)
}
