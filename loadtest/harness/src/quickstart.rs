//! `loadtest up`: the sim cluster, the fleet beside it as separate processes (a coordinator and
//! three workers, or with `--standalone` one worker that owns every shard), and about a minute
//! of mixed work across several namespaces (demo Jobs, a stream of Jobs of several shapes, a
//! CronJob, TTLs, failing pods) while one worker is drained and another killed, with live
//! progress; then a report from the cluster's objects and the audit log, and the kubectl and
//! fleetctl commands to look around. `--keep` leaves everything running until Ctrl-C.

mod fleet_view;
mod mix;
mod progress;
mod report;
mod tools;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use batchfleet_audits::handover::Bounds;
use batchfleet_audits::objects::{ObjectWatch, ObjectsSeen};
use batchfleet_audits::{Outcome, agents, tenure};
use batchfleet_sim::SimCluster;
use batchfleet_sim::audit::AuditEvent;
use jiff::Timestamp;
use parking_lot::Mutex;
use tokio::process::Child;
use tokio::time::Instant;

use crate::fleet_processes::{self, FleetLayout, FleetProcesses};
use crate::proc_stat::UsageSampler;
use crate::run::faults::{self, FaultRecord};
use crate::run::report::{HandOverReport, processes, seconds};
use crate::scenario::{Fault, FaultAction, Span};
use fleet_view::ShardMap;
use mix::{DEMO_NAMESPACE, EXPECT_LABEL, NAMESPACES, PlannedJob, Sent};
use progress::UpProgress;
use report::{FaultHandling, JobsReport, UpReport};
pub use tools::{Kubectl, kubectl_or_install};

/// What runs the controllers beside the sim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A coordinator and three workers, each a process; their gRPC over TLS with a throwaway CA
    /// when `tls`, else plaintext.
    Fleet { tls: bool },
    /// One `fleet-worker --standalone` process that owns every shard.
    Standalone,
}

/// How `up` runs.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub mode: Mode,
    /// How long the workload runs; the drain comes at a third, the kill at half of it.
    pub duration: Duration,
    /// Leave everything running after the report, until Ctrl-C.
    pub keep: bool,
    pub kubectl: Kubectl,
    /// Where the report, the logs and the audit log go (the kubeconfig's folder).
    pub out: PathBuf,
    pub audit_log: PathBuf,
}

/// The fleet's worker lease and lease margin (the defaults `fleet_processes` starts with) and
/// the slack a lost worker's shards get beyond them, for the hand-over audit.
const WORKER_LEASE: Duration = Duration::from_secs(15);
const LEASE_MARGIN: Duration = Duration::from_secs(2);
const LOSS_SLACK: Duration = Duration::from_secs(10);
/// A graceful move answers a change in its shard within this.
const GRACEFUL_BOUND: Duration = Duration::from_secs(5);
/// How long the Jobs may take to finish after the work stopped (the demo's flaky Job alone
/// backs off 10 s and 20 s; a killed worker's shards wait for its lease).
const FINISH_WITHIN: Duration = Duration::from_secs(180);

/// The controllers' processes, stopped when dropped.
enum Controllers {
    Fleet(FleetProcesses),
    Standalone(Child),
}

impl Controllers {
    /// Starts them and waits until they act for every shard.
    async fn start(
        mode: Mode,
        kubeconfig: &Path,
        out: &Path,
        sampler: &UsageSampler,
    ) -> anyhow::Result<Self> {
        let log_dir = out.join("fleet-logs");
        match mode {
            Mode::Fleet { tls } => {
                let layout = FleetLayout { tls_dir: tls.then(|| out.join("tls")), ..FleetLayout::default() };
                let fleet = fleet_processes::start(kubeconfig, &layout, &log_dir).await?;
                for (i, c) in fleet.coordinators.iter().enumerate() {
                    sampler.register(&format!("coordinator-{i}"), c.id());
                }
                for (id, w) in &fleet.workers {
                    sampler.register(id, w.id());
                }
                println!("fleet: coordinator-0 and workers w-0, w-1, w-2 (logs in {})", log_dir.display());
                let placing = spinner("placing 256 shards on the workers");
                // Generous: a debug build on a busy machine places 256 shards in about a minute.
                let placed = fleet.wait_placed(Duration::from_secs(240)).await;
                placing.finish_and_clear();
                placed?;
                for w in fleet.workers().await {
                    println!("  {:<6} {} shards", w.name, w.shards);
                }
                if tls {
                    println!(
                        "TLS: the CA, certificates and admin policy are in {}",
                        out.join("tls").display()
                    );
                }
                Ok(Self::Fleet(fleet))
            }
            Mode::Standalone => {
                let metrics: SocketAddr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
                let mut worker = fleet_processes::start_standalone(kubeconfig, metrics, &log_dir, &[])?;
                sampler.register("standalone", worker.id());
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

    /// Resolves when the process everything depends on stopped.
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

fn spinner(message: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// The workers to drain and to kill: those that own the shards of the most workload
/// namespaces, so that the hand-overs show in the work (w-0 and w-1 when the map is unread).
fn choose_victims(map: Option<&ShardMap>) -> (String, String) {
    let mut namespaces_by_owner: BTreeMap<String, usize> = BTreeMap::new();
    for map in map.into_iter() {
        for ns in NAMESPACES {
            if let Some(owner) = map.owner(agents::shard_of(ns, map.shard_count)) {
                *namespaces_by_owner.entry(owner.to_string()).or_default() += 1;
            }
        }
    }
    let mut ranked: Vec<(usize, String)> = namespaces_by_owner.into_iter().map(|(w, n)| (n, w)).collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut names = ranked.into_iter().map(|(_, w)| w).chain(["w-0".to_string(), "w-1".to_string()]);
    let drained = names.next().unwrap_or_default();
    let killed = names.find(|w| *w != drained).unwrap_or_default();
    (drained, killed)
}

/// The shard map over time, polled while the work runs: (seconds since start, map).
type Timeline = Arc<Mutex<Vec<(f64, ShardMap)>>>;

/// Polls the shard map every half second: keeps each distinct one in `timeline` and shows its
/// owners on the progress line.
fn poll_shard_map(
    client: kube::Client,
    start: Instant,
    timeline: Timeline,
    marks: Arc<Mutex<BTreeMap<String, String>>>,
    line: Arc<Mutex<String>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tick.tick().await;
            let Ok(Some(map)) = fleet_view::read(&client).await else { continue };
            let marks = marks.lock().clone();
            let held = map.held();
            let workers: BTreeSet<&String> = held.keys().chain(marks.keys()).collect();
            let parts: Vec<String> = workers
                .into_iter()
                .map(|w| {
                    let n = held.get(w).copied().unwrap_or(0);
                    match marks.get(w) {
                        Some(mark) => format!("{w} {n} ({mark})"),
                        None => format!("{w} {n}"),
                    }
                })
                .collect();
            let moving = if map.moving > 0 { format!(", {} moving", map.moving) } else { String::new() };
            *line.lock() = format!("{}{moving}", parts.join(" · "));
            let mut timeline = timeline.lock();
            if timeline.last().is_none_or(|(_, last)| *last != map) {
                timeline.push((start.elapsed().as_secs_f64(), map));
            }
        }
    })
}

/// For each worker fault: how many shards the worker held, and when the map first showed it
/// holding none with no move in progress.
fn fault_handling(records: &[FaultRecord], timeline: &[(f64, ShardMap)]) -> Vec<FaultHandling> {
    records
        .iter()
        .filter(|r| !r.target.is_empty())
        .map(|r| {
            let at = r.applied_seconds;
            let before = timeline.iter().rev().find(|(t, _)| *t <= at).or(timeline.first()).map(|(_, m)| m);
            let after = timeline.iter().find(|(t, m)| *t >= at && m.held_by(&r.target) == 0 && m.moving == 0);
            let gained = match (before, after) {
                (Some(before), Some((_, after))) => after
                    .held()
                    .into_iter()
                    .filter_map(|(w, n)| {
                        let was = before.held_by(&w);
                        (n > was).then(|| (w, n - was))
                    })
                    .collect(),
                _ => BTreeMap::new(),
            };
            FaultHandling {
                action: r.action.clone(),
                worker: r.target.clone(),
                at_seconds: seconds(Duration::from_secs_f64(at)),
                shards_before: before.map(|m| m.held_by(&r.target)).unwrap_or(0),
                handed_over_after_seconds: after.map(|(t, _)| seconds(Duration::from_secs_f64(t - at))),
                gained,
            }
        })
        .collect()
}

/// The audit log as far as it is written: the sim still runs, so its last line may be torn.
fn audit_events(path: &Path) -> anyhow::Result<Vec<AuditEvent>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut events = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str(line) {
            Ok(event) => events.push(event),
            Err(_) if i + 1 == lines.len() => {}
            Err(e) => anyhow::bail!("{}:{}: {e}", path.display(), i + 1),
        }
    }
    Ok(events)
}

/// How each planned Job and each CronJob run ended, against what it must end as.
fn judge_jobs(seen: &ObjectsSeen, plan: &[PlannedJob], sent: &Sent) -> JobsReport {
    let by_name: BTreeMap<(&str, &str), &batchfleet_audits::objects::JobRecord> =
        seen.jobs.values().map(|j| ((j.namespace.as_str(), j.name.as_str()), j)).collect();
    let created = sent.created.lock().clone();
    let mut report = JobsReport {
        planned: plan.len(),
        created: created.len(),
        create_errors: sent.errors.lock().clone(),
        ..JobsReport::default()
    };
    let expected = plan.iter().filter(|p| created.contains_key(&p.key())).map(|p| (p.key(), p.expect)).chain(
        seen.jobs
            .values()
            .filter(|j| j.cronjob.is_some())
            .map(|j| ((j.namespace.clone(), j.name.clone()), "Complete")),
    );
    for ((ns, name), expect) in expected {
        let job = by_name.get(&(ns.as_str(), name.as_str()));
        let ended = job.and_then(|j| j.finished.as_ref()).map(|f| f.condition.as_str());
        match ended {
            Some("Complete") => report.complete += 1,
            Some(_) => report.failed += 1,
            None => {}
        }
        match ended {
            Some(ended) if ended == expect => report.as_expected += 1,
            Some(ended) => report.unexpected.push(format!("{ns}/{name}: expected {expect}, ended {ended}")),
            None => report.unfinished.push(format!("{ns}/{name}: expected {expect}, never finished")),
        }
    }
    report.cron_runs = seen.jobs.values().filter(|j| j.cronjob.is_some()).count();
    report.ttl_deleted =
        seen.jobs.values().filter(|j| j.ttl_seconds.is_some() && j.deleted_seen.is_some()).count();
    report
}

/// Whether every created Job finished (and every one with a short TTL was deleted).
fn all_finished(seen: &ObjectsSeen, sent: &Sent) -> bool {
    let created = sent.created.lock();
    let planned_done = created.keys().all(|(ns, name)| {
        seen.jobs.values().any(|j| {
            j.namespace == *ns
                && j.name == *name
                && j.finished.is_some()
                && (j.ttl_seconds.is_none_or(|ttl| ttl > 60) || j.deleted_seen.is_some())
        })
    });
    planned_done && seen.jobs.values().filter(|j| j.cronjob.is_some()).all(|j| j.finished.is_some())
}

/// The audits `up` runs on what the audit log and the watches recorded.
fn audit(
    events: &[AuditEvent],
    seen: &ObjectsSeen,
    map: Option<&ShardMap>,
    records: &[FaultRecord],
    started: Timestamp,
    end: Timestamp,
) -> (Vec<Outcome>, HandOverReport) {
    let shards = map.map(|m| m.shard_count).unwrap_or(256);
    let in_scope = |ns: &str| NAMESPACES.contains(&ns);
    let moves = map.map(ShardMap::moves).unwrap_or_default();
    let bounds = Bounds { graceful: GRACEFUL_BOUND, lost: WORKER_LEASE + LEASE_MARGIN + LOSS_SLACK };
    let faults = faults::as_audited(records, started);
    let (owner_acting, report, _) =
        faults::hand_over_audit(events, seen, shards, in_scope, &faults, bounds, end);
    let audits = vec![
        tenure::tenures_never_overlap(events, shards, &moves, in_scope),
        owner_acting,
        batchfleet_audits::objects::parallelism_never_exceeded(seen),
    ];
    (audits, report)
}

/// The commands to look around, as they work on this machine.
fn commands(kubeconfig: &Path, kubectl: &Kubectl, fleet: Option<&FleetProcesses>) -> Vec<String> {
    let kubectl_path = match kubectl {
        Kubectl::Found(path) => path.display().to_string(),
        Kubectl::Missing { .. } => "kubectl".to_string(),
    };
    let mut out = vec![
        format!("export KUBECONFIG={}", kubeconfig.display()),
        format!("{kubectl_path} get nodes"),
        format!("{kubectl_path} get cronjobs,jobs -A -L {EXPECT_LABEL}"),
        format!("{kubectl_path} -n {DEMO_NAMESPACE} describe job flaky"),
        format!("{kubectl_path} get pods -A -w"),
    ];
    if let Some(fleet) = fleet {
        let sibling =
            std::env::current_exe().ok().map(|p| p.with_file_name("fleetctl")).filter(|p| p.is_file());
        let fleetctl = match sibling {
            Some(path) => path.display().to_string(),
            None => "cargo run -q -p batchfleet-fleetctl --".to_string(),
        };
        let base =
            format!("{fleetctl} {} --admin {}", fleet.fleetctl_flags().join(" "), fleet.admin_urls.join(","));
        out.push(format!("{base} workers"));
        out.push(format!("{base} shards"));
    }
    out
}

/// Runs `up` on a started sim: the work, the faults, the report; then, with `keep`, waits for
/// Ctrl-C. Answers whether every Job ended as expected and every audit passed.
pub async fn run(sim: &SimCluster, kubeconfig: &Path, options: UpOptions) -> anyhow::Result<bool> {
    let wall = Instant::now();
    let sampler = UsageSampler::start(Duration::from_secs(1));
    sampler.register("loadtest (sim + harness)", Some(std::process::id()));
    let mut controllers = Controllers::start(options.mode, kubeconfig, &options.out, &sampler).await?;
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse()?))?;
    mix::create_namespaces_and_cronjob(&client).await?;
    let watch = ObjectWatch::start(&client, Duration::from_secs(30)).await?;

    let plan = mix::plan(options.duration)?;
    let fault_plan = match &controllers {
        Controllers::Fleet(_) => {
            let (drained, killed) = choose_victims(fleet_view::read(&client).await?.as_ref());
            let fault = |at: Duration, action, worker: &str| Fault {
                at: Span(at),
                action,
                worker: Some(worker.to_string()),
                resume_after: None,
                restart_after: None,
                api: None,
                node: None,
            };
            vec![
                fault(options.duration / 3, FaultAction::DrainWorker, &drained),
                fault(options.duration / 2, FaultAction::KillWorker, &killed),
            ]
        }
        Controllers::Standalone(_) => Vec::new(),
    };
    println!();
    println!("demo Jobs in namespace {DEMO_NAMESPACE}:");
    for p in plan.iter().filter(|p| p.what.is_some()) {
        println!("  {:<8} {}", p.key().1, p.what.unwrap_or_default());
    }
    println!(
        "  ticker   CronJob @every 20s, Forbid (Job names carry the scheduled minute, so one Job a minute)"
    );
    let streamed = plan.iter().filter(|p| p.what.is_none()).count();
    println!(
        "then {streamed} Jobs, one every {:?}, of 5 shapes (fan-out, Indexed, retried, failing, TTL) over namespaces {}",
        mix::stream_interval(options.duration),
        NAMESPACES.join(", ")
    );
    for f in &fault_plan {
        println!(
            "at {}: {} {}",
            humantime::format_duration(f.at.0),
            f.action.name(),
            f.worker.as_deref().unwrap_or("")
        );
    }
    println!("log: {}", options.out.join("loadtest-up.log").display());
    println!();

    let started = Timestamp::now();
    let start = Instant::now();
    let sent = Arc::new(Sent::default());
    let fleet_line = Arc::new(Mutex::new(String::new()));
    let marks: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    let timeline: Timeline = Arc::default();
    let poller = poll_shard_map(client.clone(), start, timeline.clone(), marks.clone(), fleet_line.clone());
    let progress = UpProgress::start(plan.len(), sent.clone(), watch.seen.clone(), fleet_line);
    progress.status(format!("work for {}", humantime::format_duration(options.duration)));
    let sending = mix::send(client.clone(), plan.clone(), start, sent.clone());
    let on_fault = |f: &FaultRecord| {
        let mark = if f.action == "kill-worker" { "killed" } else { "drained" };
        marks.lock().insert(f.target.clone(), mark.to_string());
        progress.status(format!("{:.1}s: {} {} — {}", f.applied_seconds, f.action, f.target, f.result));
    };
    let records = match &mut controllers {
        Controllers::Fleet(fleet) => {
            let targets = faults::Targets { fleet, sim: Some(sim), etcd: None, map: None, probes: None };
            let (_, records, _) = tokio::join!(
                sending,
                faults::run(targets, &fault_plan, start, &sampler, on_fault),
                tokio::time::sleep_until(start + options.duration)
            );
            records
        }
        Controllers::Standalone(_) => {
            tokio::join!(sending, tokio::time::sleep_until(start + options.duration));
            Vec::new()
        }
    };
    mix::suspend_cronjob(&client).await?;
    progress.status(format!("work over; waiting up to {FINISH_WITHIN:?} for every Job to finish"));
    let finish_by = Instant::now() + FINISH_WITHIN;
    while !all_finished(&watch.seen.lock(), &sent) && Instant::now() < finish_by {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The last owners, seen once more after the Jobs settled.
    tokio::time::sleep(Duration::from_millis(600)).await;
    poller.abort();
    progress.finish();
    drop(progress);
    let end = Timestamp::now();

    let map = fleet_view::read(&client).await.ok().flatten();
    let events = audit_events(&options.audit_log)?;
    let seen = std::mem::take(&mut *watch.seen.lock());
    drop(watch);
    let jobs = judge_jobs(&seen, &plan, &sent);
    let (audits, hand_overs) = audit(&events, &seen, map.as_ref(), &records, started, end);
    let fleet = match &controllers {
        Controllers::Fleet(fleet) => Some(fleet),
        Controllers::Standalone(_) => None,
    };
    let commands = commands(kubeconfig, &options.kubectl, fleet);
    let jobs_ok = jobs.unexpected.is_empty()
        && jobs.unfinished.is_empty()
        && jobs.create_errors.is_empty()
        && jobs.created == plan.len();
    let passed = jobs_ok && audits.iter().all(|a| a.passed);
    let report_path = options.out.join("up-report.json");
    let report = UpReport {
        mode: match options.mode {
            Mode::Fleet { tls: true } => "fleet over TLS".into(),
            Mode::Fleet { tls: false } => "fleet".into(),
            Mode::Standalone => "standalone".into(),
        },
        duration_seconds: seconds(options.duration),
        wall_seconds: seconds(wall.elapsed()),
        passed,
        jobs,
        fleet: fault_handling(&records, &timeline.lock()),
        faults: records,
        shards_now: map.as_ref().map(ShardMap::held).unwrap_or_default(),
        hand_overs,
        violations: crate::run::report::violations(audits.iter()),
        audits,
        processes: processes(&sampler.finish()),
        commands: commands.clone(),
        files: BTreeMap::from([
            ("kubeconfig".to_string(), kubeconfig.display().to_string()),
            ("audit_log".to_string(), options.audit_log.display().to_string()),
            ("process_logs".to_string(), options.out.join("fleet-logs").display().to_string()),
            ("harness_log".to_string(), options.out.join("loadtest-up.log").display().to_string()),
        ]),
    };
    std::fs::write(&report_path, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", report_path.display()))?;
    print!("{}", report::summary(&report));
    println!();
    println!("look around:");
    if let Kubectl::Missing { how } = &options.kubectl {
        println!("  ({how})");
    }
    for command in &commands {
        println!("  {command}");
    }
    println!("report: {}", report_path.display());
    if !options.keep {
        return Ok(passed);
    }
    println!("everything keeps running (--keep); press Ctrl-C to stop it");
    tokio::select! {
        stopped = controllers.stopped() => Err(stopped),
        r = crate::stop_signal::stop_requested() => {
            r.context("waiting for Ctrl-C")?;
            println!("stopping");
            Ok(passed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(owners: &[(u32, &str)]) -> ShardMap {
        ShardMap {
            shard_count: 256,
            shards: owners.iter().map(|(s, w)| (*s, (Some(w.to_string()), 1))).collect(),
            moving: 0,
        }
    }

    #[test]
    fn victims_are_two_workers_owning_the_work() {
        let owners: Vec<(u32, &str)> = NAMESPACES
            .iter()
            .enumerate()
            .map(|(i, ns)| (agents::shard_of(ns, 256), if i < 5 { "w-2" } else { "w-1" }))
            .collect();
        assert_eq!(choose_victims(Some(&map(&owners))), ("w-2".into(), "w-1".into()));
        let one_owner: Vec<(u32, &str)> =
            NAMESPACES.iter().map(|ns| (agents::shard_of(ns, 256), "w-1")).collect();
        assert_eq!(choose_victims(Some(&map(&one_owner))), ("w-1".into(), "w-0".into()));
        assert_eq!(choose_victims(None), ("w-0".into(), "w-1".into()));
    }

    #[test]
    fn a_fault_is_handled_when_the_map_shows_the_worker_empty() {
        let record = FaultRecord {
            due_seconds: 10.0,
            applied_seconds: 10.0,
            action: "kill-worker".into(),
            target: "w-2".into(),
            result: "SIGKILL".into(),
            orphaned_pods: Vec::new(),
            rollout: None,
        };
        let timeline = vec![
            (0.0, map(&[(0, "w-0"), (1, "w-2"), (2, "w-2")])),
            (20.0, map(&[(0, "w-0"), (1, "w-0"), (2, "w-2")])),
            (27.5, map(&[(0, "w-0"), (1, "w-0"), (2, "w-1")])),
        ];
        let handled = fault_handling(&[record], &timeline);
        assert_eq!(handled[0].shards_before, 2);
        assert_eq!(handled[0].handed_over_after_seconds, Some(17.5));
        assert_eq!(handled[0].gained, BTreeMap::from([("w-0".into(), 1), ("w-1".into(), 1)]));
    }
}
