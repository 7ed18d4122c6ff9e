//! A scenario's faults, each at its time since the workload started, on the fleet's processes.

use std::time::Duration;

use anyhow::Context;
use batchfleet_audits::Outcome;
use batchfleet_audits::handover::{self, Bounds, FaultAt, FaultKind};
use batchfleet_audits::objects::ObjectsSeen;
use batchfleet_proto::v1 as pb;
use batchfleet_sim::SimCluster;
use batchfleet_sim::audit::AuditEvent;
use jiff::Timestamp;
use serde::Serialize;
use tokio::time::Instant;

use super::report::{HandOverReport, Percentiles, seconds};
use super::rollout::RolloutRecord;
use super::stored_map::StoredMap;
use crate::fleet_processes::{EtcdProcess, FleetProcesses};
use crate::proc_stat::UsageSampler;
use crate::scenario::{Fault, FaultAction};

/// What one fault did, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRecord {
    /// Seconds since the start it was due, and when it was applied.
    pub due_seconds: f64,
    pub applied_seconds: f64,
    pub action: String,
    pub target: String,
    pub result: String,
    /// For `lose-node`: the pods bound to the node when it was deleted (`namespace/name`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub orphaned_pods: Vec<String>,
    /// For `rolling-restart`: what each step did (the report's `rollout` holds it).
    #[serde(skip)]
    pub rollout: Option<RolloutRecord>,
}

/// What faults act on.
pub struct Targets<'a> {
    pub fleet: &'a mut FleetProcesses,
    /// The sim, when the harness started it (`api-faults` need it).
    pub sim: Option<&'a SimCluster>,
    pub etcd: Option<&'a mut EtcdProcess>,
    /// The coordination store's shard map (`rolling-restart` judges its moves by it).
    pub map: Option<&'a StoredMap>,
    /// With `crash_recovery`: each kill-worker probes the victim's shards.
    pub probes: Option<&'a mut super::recovery::Probes>,
}

/// How long a SIGTERMed worker may take to be drained and exit (its `--drain-timeout` is 60 s).
const EXIT_WITHIN: Duration = Duration::from_secs(90);

pub(super) fn signal(pid: Option<u32>, signal: &str) -> anyhow::Result<()> {
    let pid = pid.context("the process has exited")?;
    let status = std::process::Command::new("kill").args([signal, &pid.to_string()]).status()?;
    anyhow::ensure!(status.success(), "kill {signal} {pid} failed");
    Ok(())
}

fn worker_index(fleet: &FleetProcesses, id: &str) -> anyhow::Result<usize> {
    fleet.workers.iter().position(|(w, _)| w == id).with_context(|| format!("no worker {id}"))
}

/// Applies `faults` in time order; `on_applied` hears of each as it happens. Returns what each
/// did once every paused worker was resumed.
pub async fn run(
    mut targets: Targets<'_>,
    faults: &[Fault],
    start: Instant,
    sampler: &UsageSampler,
    on_applied: impl Fn(&FaultRecord),
) -> Vec<FaultRecord> {
    let mut faults: Vec<&Fault> = faults.iter().collect();
    faults.sort_by_key(|f| f.at);
    let mut records = Vec::new();
    let mut restarts = 0;
    let mut pauses: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    // Killed workers to start again (`restart_after`): when, since the start, and which.
    let mut starts_due: Vec<(Duration, String)> = Vec::new();
    for fault in faults {
        let until = Some(fault.at.0);
        let restarted = (&mut records, &on_applied as &dyn Fn(&FaultRecord));
        start_due_workers(&mut targets, &mut starts_due, until, start, sampler, &mut restarts, restarted)
            .await;
        tokio::time::sleep_until(start + fault.at.0).await;
        let applied = start.elapsed().as_secs_f64();
        let target = fault.worker.clone().or(fault.node.clone()).unwrap_or_default();
        let mut orphaned_pods = Vec::new();
        let mut rollout = None;
        let result = apply(
            &mut targets,
            fault,
            sampler,
            &mut restarts,
            &mut pauses,
            Outputs { orphaned_pods: &mut orphaned_pods, rollout: &mut rollout },
        )
        .await;
        let record = FaultRecord {
            due_seconds: fault.at.0.as_secs_f64(),
            applied_seconds: applied,
            action: fault.action.name().to_string(),
            target,
            result: match result {
                Ok(what) => what,
                Err(e) => format!("failed: {e:#}"),
            },
            orphaned_pods,
            rollout,
        };
        // From the kill's end: with probes, the shard map is read before the SIGKILL.
        if let (Some(after), false) = (fault.restart_after, record.result.starts_with("failed")) {
            starts_due.push((start.elapsed() + after.0, record.target.clone()));
        }
        tracing::info!(?record, "fault");
        on_applied(&record);
        records.push(record);
    }
    let restarted = (&mut records, &on_applied as &dyn Fn(&FaultRecord));
    start_due_workers(&mut targets, &mut starts_due, None, start, sampler, &mut restarts, restarted).await;
    for pause in pauses {
        let _ = pause.await;
    }
    records
}

/// What a fault records beside its result line.
struct Outputs<'a> {
    orphaned_pods: &'a mut Vec<String>,
    rollout: &'a mut Option<RolloutRecord>,
}

/// The run's fault records, and whoever hears of each as it is applied.
type Applied<'a> = (&'a mut Vec<FaultRecord>, &'a dyn Fn(&FaultRecord));

/// Starts again, each at its time, the killed workers due before `before` (all of them when
/// `None`), as a StatefulSet recreates a pod under its name; records what each start did as it
/// happens.
async fn start_due_workers(
    targets: &mut Targets<'_>,
    due: &mut Vec<(Duration, String)>,
    before: Option<Duration>,
    start: Instant,
    sampler: &UsageSampler,
    restarts: &mut usize,
    (records, on_applied): Applied<'_>,
) {
    due.sort();
    while let Some((at, _)) = due.first()
        && before.is_none_or(|b| *at <= b)
    {
        let (at, worker) = due.remove(0);
        tokio::time::sleep_until(start + at).await;
        let applied = start.elapsed().as_secs_f64();
        let result = start_again(targets.fleet, &worker, sampler, restarts);
        let record = FaultRecord {
            due_seconds: at.as_secs_f64(),
            applied_seconds: applied,
            action: "start-worker".into(),
            target: worker,
            result: match result {
                Ok(what) => what,
                Err(e) => format!("failed: {e:#}"),
            },
            orphaned_pods: Vec::new(),
            rollout: None,
        };
        tracing::info!(?record, "fault");
        on_applied(&record);
        records.push(record);
    }
}

/// Starts the exited worker `id` again under its id.
fn start_again(
    fleet: &mut FleetProcesses,
    id: &str,
    sampler: &UsageSampler,
    restarts: &mut usize,
) -> anyhow::Result<String> {
    let i = worker_index(fleet, id)?;
    anyhow::ensure!(fleet.workers[i].1.try_wait()?.is_some(), "{id} is still running");
    let child = fleet.spawn_worker(id)?;
    *restarts += 1;
    sampler.register(&format!("{id} (restart {restarts})"), child.id());
    fleet.workers[i].1 = child;
    Ok("started again".into())
}

async fn apply(
    targets: &mut Targets<'_>,
    fault: &Fault,
    sampler: &UsageSampler,
    restarts: &mut usize,
    pauses: &mut Vec<tokio::task::JoinHandle<()>>,
    outputs: Outputs<'_>,
) -> anyhow::Result<String> {
    let worker = fault.worker.as_deref().unwrap_or_default();
    let fleet = &mut *targets.fleet;
    match fault.action {
        FaultAction::KillWorker => {
            if let Some(probes) = targets.probes.as_deref_mut() {
                return probes.kill_and_probe(fleet, worker).await;
            }
            let i = worker_index(fleet, worker)?;
            fleet.workers[i].1.start_kill()?;
            fleet.workers[i].1.wait().await?;
            Ok("SIGKILL".into())
        }
        FaultAction::TerminateWorker => {
            let i = worker_index(fleet, worker)?;
            signal(fleet.workers[i].1.id(), "-TERM")?;
            Ok("SIGTERM".into())
        }
        FaultAction::PauseWorker => {
            let i = worker_index(fleet, worker)?;
            let pid = fleet.workers[i].1.id();
            let resume_after = fault.resume_after.map(|s| s.0).unwrap_or_default();
            signal(pid, "-STOP")?;
            pauses.push(tokio::spawn(async move {
                tokio::time::sleep(resume_after).await;
                if let Err(e) = signal(pid, "-CONT") {
                    tracing::warn!(error = %e, "resuming a paused worker failed");
                }
            }));
            Ok(format!("SIGSTOP, SIGCONT after {resume_after:?}"))
        }
        FaultAction::DrainWorker | FaultAction::UndrainWorker => {
            let mut rpc = fleet.admin().await.context("no coordinator leads")?;
            let request = pb::WorkerRequest { worker: worker.to_string() };
            if fault.action == FaultAction::DrainWorker {
                rpc.drain(request).await?;
                Ok("drain requested".into())
            } else {
                rpc.undrain(request).await?;
                Ok("undrain requested".into())
            }
        }
        FaultAction::RestartWorker => {
            let i = worker_index(fleet, worker)?;
            let started = Instant::now();
            signal(fleet.workers[i].1.id(), "-TERM")?;
            let status = tokio::time::timeout(EXIT_WITHIN, fleet.workers[i].1.wait())
                .await
                .with_context(|| format!("{worker} did not exit within {EXIT_WITHIN:?} of SIGTERM"))??;
            let exited = started.elapsed();
            let child = fleet.spawn_worker(worker)?;
            *restarts += 1;
            sampler.register(&format!("{worker} (restart {restarts})"), child.id());
            fleet.workers[i].1 = child;
            Ok(format!("SIGTERM, exited ({status}) after {:.1}s, started again", exited.as_secs_f64()))
        }
        FaultAction::AddWorker => {
            let id = (fleet.workers.len()..)
                .map(|i| format!("w-{i}"))
                .find(|id| fleet.workers.iter().all(|(w, _)| w != id))
                .unwrap_or_default();
            let child = fleet.spawn_worker(&id)?;
            sampler.register(&id, child.id());
            fleet.workers.push((id.clone(), child));
            Ok(format!("started {id}"))
        }
        FaultAction::ApiFaults => {
            let config = fault.api.clone().unwrap_or_default().to_sim();
            let rules = config.rules.len();
            targets.sim.context("api-faults need the sim the harness starts")?.faults().configure(config);
            Ok(format!("{rules} API fault rules set"))
        }
        FaultAction::RestartEtcd => {
            let etcd = targets.etcd.as_deref_mut().context("no etcd runs")?;
            let down = fault.resume_after.map(|s| s.0).unwrap_or_default();
            etcd.restart(down, Duration::from_secs(30)).await?;
            sampler.register("etcd (restarted)", etcd.child.id());
            Ok(format!("SIGKILL, started again after {down:?}"))
        }
        FaultAction::LoseNode => {
            let node = fault.node.as_deref().context("lose-node names no node")?;
            let sim = targets.sim.context("lose-node needs the sim the harness starts")?;
            *outputs.orphaned_pods = lose_node(sim, node).await?;
            Ok(format!("deleted with {} pods bound to it", outputs.orphaned_pods.len()))
        }
        FaultAction::RollingRestart => {
            let map = targets.map.context("rolling-restart reads the stored shard map, and none is open")?;
            let rollout = super::rollout::run(fleet, map, sampler, restarts).await?;
            let ready = rollout.steps.iter().filter(|s| s.ready_after_seconds.is_some()).count();
            let took = rollout.ended.duration_since(rollout.started).as_secs_f64();
            let line = format!(
                "{ready} of {} workers restarted and ready, {} moves, {took:.1}s{}",
                rollout.steps.len(),
                rollout.moves,
                if rollout.completed { "" } else { "; not completed" }
            );
            *outputs.rollout = Some(rollout);
            Ok(line)
        }
        FaultAction::KillLeader => {
            let leader = fleet.leader_index().await.context("no coordinator leads")?;
            let coordinator = fleet.coordinators.get_mut(leader).context("the leader is not one of ours")?;
            coordinator.start_kill()?;
            coordinator.wait().await?;
            Ok(format!("SIGKILL coordinator-{leader}"))
        }
    }
}

/// Deletes `node` as a cloud's node controller does when its machine vanished: its kubelet stops,
/// the Node object goes, and the pods bound to it (answered, `namespace/name`) are left for
/// PodGC.
async fn lose_node(sim: &SimCluster, node: &str) -> anyhow::Result<Vec<String>> {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::api::{Api, ListParams};
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse()?))?;
    let pods: Api<Pod> = Api::all(client.clone());
    let bound = pods.list(&ListParams::default().fields(&format!("spec.nodeName={node}"))).await?;
    sim.nodes().stop_heartbeat(node).map_err(|e| anyhow::anyhow!("stopping {node}'s kubelet: {e:?}"))?;
    Api::<Node>::all(client).delete(node, &Default::default()).await?;
    Ok(bound
        .items
        .iter()
        .filter_map(|p| Some(format!("{}/{}", p.metadata.namespace.as_deref()?, p.metadata.name.as_deref()?)))
        .collect())
}

/// The applied faults as the hand-over audit weighs them: a worker killed or paused is lost
/// (its shards wait for its lease); a killed leader, a restarted etcd or API faults slow every
/// hand-over as a loss does; drains, SIGTERMs, restarts and joins move shards gracefully.
/// `started`: the wall time the workload started, which `applied_seconds` counts from.
pub fn as_audited(records: &[FaultRecord], started: Timestamp) -> Vec<FaultAt> {
    records
        .iter()
        .filter(|r| !r.result.starts_with("failed"))
        .filter_map(|r| {
            let (kind, worker) = match r.action.as_str() {
                "kill-worker" | "pause-worker" => (FaultKind::Lost, Some(r.target.clone())),
                "kill-leader" | "restart-etcd" | "api-faults" => (FaultKind::Lost, None),
                // A node's loss moves no shard.
                "lose-node" => return None,
                _ => (FaultKind::Graceful, Some(r.target.clone()).filter(|t| !t.is_empty())),
            };
            let at = started.checked_add(jiff::SignedDuration::from_secs_f64(r.applied_seconds)).ok()?;
            Some(FaultAt { at, worker, kind })
        })
        .collect()
}

/// The hand-over audit over the workload's namespaces (`in_scope`), and the gaps and unowned
/// seconds it measured.
pub fn hand_over_audit(
    events: &[AuditEvent],
    seen: &ObjectsSeen,
    shards: u32,
    in_scope: impl Fn(&str) -> bool,
    faults: &[FaultAt],
    bounds: Bounds,
    end: Timestamp,
) -> (Outcome, HandOverReport, Vec<handover::HandOver>) {
    let activity = handover::activity(events, seen, shards, end, in_scope);
    let hand_overs = handover::hand_overs(&activity, faults, bounds, end);
    let (gaps, unowned) = handover::gaps_and_unowned(&hand_overs);
    let gaps: Vec<f64> = gaps.into_iter().map(|g| seconds(Duration::from_secs_f64(g))).collect();
    let report = HandOverReport {
        count: hand_overs.len(),
        gap_seconds: Percentiles::of(&gaps),
        unowned_seconds: seconds(Duration::from_secs_f64(unowned)),
    };
    (handover::owner_acting_within_bound(&hand_overs, bounds), report, hand_overs)
}

/// How the coordinators the harness starts pace PodGC: upstream's period and quarantine, and
/// kube-controller-manager's default client rate (20 QPS), which the harness leaves them at.
pub const PODGC_PACE: batchfleet_audits::podgc::PodGcPace = batchfleet_audits::podgc::PodGcPace {
    period: batchfleet_coordinator::podgc::core::GC_CHECK_PERIOD,
    quarantine: batchfleet_coordinator::podgc::core::QUARANTINE_TIME,
    client_qps: batchfleet_coordinator::kube_client::ClientLimits::DEFAULT.qps,
    slack: Duration::from_secs(15),
};

/// The nodes `lose-node` deleted and their pods, for the PodGC audit.
pub fn lost_nodes(records: &[FaultRecord], started: Timestamp) -> Vec<batchfleet_audits::podgc::LostNode> {
    records
        .iter()
        .filter(|r| r.action == "lose-node" && !r.result.starts_with("failed"))
        .filter_map(|r| {
            Some(batchfleet_audits::podgc::LostNode {
                node: r.target.clone(),
                at: started.checked_add(jiff::SignedDuration::from_secs_f64(r.applied_seconds)).ok()?,
                pods: r
                    .orphaned_pods
                    .iter()
                    .filter_map(|p| p.split_once('/').map(|(ns, n)| (ns.to_string(), n.to_string())))
                    .collect(),
            })
        })
        .collect()
}

/// Which of the lost nodes' pods still exist.
pub async fn pods_left(
    client: &kube::Client,
    lost: &[batchfleet_audits::podgc::LostNode],
) -> std::collections::BTreeSet<(String, String)> {
    use k8s_openapi::api::core::v1::Pod;
    let mut left = std::collections::BTreeSet::new();
    for (ns, name) in lost.iter().flat_map(|l| l.pods.iter()) {
        let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), ns);
        if !matches!(pods.get_opt(name).await, Ok(None)) {
            left.insert((ns.clone(), name.clone()));
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(action: &str, target: &str, at: f64, result: &str) -> FaultRecord {
        FaultRecord {
            due_seconds: at,
            applied_seconds: at,
            action: action.into(),
            target: target.into(),
            result: result.into(),
            orphaned_pods: Vec::new(),
            rollout: None,
        }
    }

    #[test]
    fn kills_and_pauses_lose_a_worker_and_fleet_faults_slow_every_hand_over() {
        let started: Timestamp = "2026-11-26T10:00:00Z".parse().expect("time");
        let records = [
            record("kill-worker", "w-1", 10.0, "SIGKILL"),
            record("drain-worker", "w-0", 20.5, "drain requested"),
            record("kill-leader", "", 30.0, "SIGKILL coordinator-0"),
            record("pause-worker", "w-2", 40.0, "failed: the process has exited"),
        ];
        let audited = as_audited(&records, started);
        let at = |s: &str| -> Timestamp { s.parse().expect("time") };
        assert_eq!(
            audited,
            vec![
                FaultAt { at: at("2026-11-26T10:00:10Z"), worker: Some("w-1".into()), kind: FaultKind::Lost },
                FaultAt {
                    at: at("2026-11-26T10:00:20.5Z"),
                    worker: Some("w-0".into()),
                    kind: FaultKind::Graceful
                },
                FaultAt { at: at("2026-11-26T10:00:30Z"), worker: None, kind: FaultKind::Lost },
            ]
        );
    }
}
