//! `crash_recovery`: how long a SIGKILLed worker's shards go without an acting owner, measured
//! from outside the fleet. Right before each `kill-worker` the leader's shard map says which
//! shards the victim held; right after the SIGKILL each of them gets a probe Job, in a namespace
//! of that shard made for probes. A shard has recovered when its probe's first pod is created
//! (the audit log's create, or the watch's sight of it against a cluster without one); a kill
//! has recovered when every shard of its victim has.

use std::collections::BTreeMap;

use anyhow::Context;
use batchfleet_audits::Outcome;
use batchfleet_audits::agents::worker_of;
use batchfleet_audits::objects::{JobRecord, ObjectsSeen};
use batchfleet_proto::v1 as pb;
use batchfleet_shards::ShardSpace;
use batchfleet_sim::audit::{AuditEvent, Stage};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use serde::Serialize;

use super::expect::Shape;
use super::report::{Percentiles, seconds};
use crate::fleet_processes::FleetProcesses;
use crate::plot::{self, Series};
use crate::scenario::{CrashRecoverySpec, JobSpec, Span};

/// How many names `<prefix>-probe-<i>` are tried to find one in every shard: names differing
/// only in their last characters share FNV-1a's high bits, so shards fill slowly.
const NAME_CANDIDATES: usize = 10_000_000;

/// One namespace per shard for the probes: `<prefix>-probe-<i>`, the first `i` whose name the
/// fleet's shard function puts in that shard.
pub fn probe_namespaces(prefix: &str, shards: u32) -> anyhow::Result<BTreeMap<u32, String>> {
    let space = ShardSpace::new(shards)?;
    let mut out = BTreeMap::new();
    for i in 0..NAME_CANDIDATES {
        if out.len() == shards as usize {
            return Ok(out);
        }
        let name = format!("{prefix}-probe-{i}");
        out.entry(space.shard_of(&name)).or_insert(name);
    }
    anyhow::bail!("no probe namespace name found for {} of {shards} shards", shards as usize - out.len())
}

/// The probe Job's shape: one pod, behaving as `crash_recovery.probe` says.
fn probe_job(spec: &CrashRecoverySpec) -> JobSpec {
    JobSpec {
        name: "probe".into(),
        count: 1,
        rate: None,
        start: Span::default(),
        completions: Some(1),
        parallelism: Some(1),
        indexed: false,
        backoff_limit: None,
        ttl_seconds_after_finished: None,
        pod: spec.probe.clone(),
    }
}

/// How a probe Job ends, for `jobs-finish-as-upstream`.
pub fn probe_shape(spec: &CrashRecoverySpec) -> Shape {
    Shape::of_job(&probe_job(spec))
}

/// A probe Job sent for one shard of a victim.
#[derive(Debug, Clone)]
pub struct ProbeSent {
    pub shard: u32,
    pub namespace: String,
    pub job: String,
    /// When its create was answered; `None` when it failed (`error`).
    pub created: Option<Timestamp>,
    pub error: Option<String>,
}

/// One kill and the probes of its victim's shards.
#[derive(Debug, Clone)]
pub struct KillProbed {
    pub worker: String,
    /// Right before the SIGKILL.
    pub killed_at: Timestamp,
    /// Why the victim's shards are unknown (the shard map could not be read).
    pub map_error: Option<String>,
    pub probes: Vec<ProbeSent>,
}

/// Kills workers and probes their shards; what it sent, for [`measure`].
pub struct Probes {
    client: kube::Client,
    namespaces: BTreeMap<u32, String>,
    label: (String, String),
    job: JobSpec,
    pub kills: Vec<KillProbed>,
}

impl Probes {
    pub fn new(
        client: kube::Client,
        namespaces: BTreeMap<u32, String>,
        label: (&str, &str),
        spec: &CrashRecoverySpec,
    ) -> Self {
        Self {
            client,
            namespaces,
            label: (label.0.into(), label.1.into()),
            job: probe_job(spec),
            kills: Vec::new(),
        }
    }

    /// The shards `worker` owns in the leader's shard map.
    async fn shards_of(fleet: &FleetProcesses, worker: &str) -> anyhow::Result<Vec<u32>> {
        let mut admin = fleet.admin().await.context("no coordinator leads")?;
        let shards = admin.shards(pb::ShardsRequest {}).await?.into_inner().shards;
        Ok(shards.into_iter().filter(|s| s.owner == worker).map(|s| s.shard).collect())
    }

    /// SIGKILL `worker`, then a probe Job in each shard it held.
    pub async fn kill_and_probe(
        &mut self,
        fleet: &mut FleetProcesses,
        worker: &str,
    ) -> anyhow::Result<String> {
        let i = fleet
            .workers
            .iter()
            .position(|(w, _)| w == worker)
            .with_context(|| format!("no worker {worker}"))?;
        let held = Self::shards_of(fleet, worker).await;
        let killed_at = Timestamp::now();
        fleet.workers[i].1.start_kill()?;
        fleet.workers[i].1.wait().await?;
        let n = self.kills.len();
        let (shards, map_error) = match held {
            Ok(shards) => (shards, None),
            Err(e) => (Vec::new(), Some(format!("{e:#}"))),
        };
        let creates = shards.iter().map(|shard| self.send_probe(*shard, n));
        let probes = futures::future::join_all(creates).await;
        let sent = probes.iter().filter(|p| p.created.is_some()).count();
        self.kills.push(KillProbed {
            worker: worker.into(),
            killed_at,
            map_error: map_error.clone(),
            probes,
        });
        Ok(match map_error {
            Some(e) => format!("SIGKILL; its shards unknown: {e}"),
            None => format!("SIGKILL; {sent} of its {} shards probed", shards.len()),
        })
    }

    async fn send_probe(&self, shard: u32, kill: usize) -> ProbeSent {
        let namespace = self.namespaces.get(&shard).cloned().unwrap_or_default();
        let job = format!("{}-{kill}", self.job.name);
        let mut probe = ProbeSent { shard, namespace: namespace.clone(), job, created: None, error: None };
        let object = super::workload::job_object(&self.job, kill, (&self.label.0, &self.label.1));
        let created = match object {
            Ok(object) if !namespace.is_empty() => Api::<Job>::namespaced(self.client.clone(), &namespace)
                .create(&PostParams::default(), &object)
                .await
                .map_err(anyhow::Error::from),
            Ok(_) => Err(anyhow::anyhow!("no probe namespace for shard {shard}")),
            Err(e) => Err(e),
        };
        match created {
            Ok(_) => probe.created = Some(Timestamp::now()),
            Err(e) => probe.error = Some(format!("{e:#}")),
        }
        probe
    }
}

/// One shard's recovery after a kill.
#[derive(Debug, Clone, Serialize)]
pub struct ShardRecovery {
    pub shard: u32,
    pub namespace: String,
    pub job: String,
    /// Kill → the probe's first pod created; `None`: never (or the probe was not sent).
    pub seconds: Option<f64>,
    /// The worker that created that pod (from the audit log).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acted_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One kill's recovery: the slowest of its victim's shards.
#[derive(Debug, Clone, Serialize)]
pub struct KillRecovery {
    pub worker: String,
    /// Seconds since the workload started.
    pub at_seconds: f64,
    pub shards: usize,
    /// The max over its shards; `None` when one never recovered or it held none.
    pub seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub per_shard: Vec<ShardRecovery>,
}

/// The distribution of recoveries over the run's kills.
#[derive(Debug, Clone, Serialize)]
pub struct RecoveryReport {
    /// `audit log` (the pod's create) or `watches` (when a watch saw the pod).
    pub measured_from: String,
    pub kills: usize,
    /// Kills whose victim held at least one shard and whose shards all recovered.
    pub kills_measured: usize,
    /// Kills whose victim held no shard in the map (nothing to measure).
    pub kills_without_shards: usize,
    pub shards_probed: usize,
    pub shards_unrecovered: usize,
    /// Shards first acted on by their killed owner itself, started again (not another worker).
    pub shards_recovered_by_victim: usize,
    pub per_kill_seconds: Percentiles,
    pub per_shard_seconds: Percentiles,
    /// The shards another worker took over, and those the restarted victim took back (from the
    /// audit log; both empty without one).
    pub per_shard_by_another_worker_seconds: Percentiles,
    pub per_shard_by_the_victim_seconds: Percentiles,
    pub per_kill: Vec<KillRecovery>,
}

/// The first successful pod create in each probe namespace at or after `from`, and who sent it.
fn first_pod_create(events: &[AuditEvent], namespace: &str, from: Timestamp) -> Option<(Timestamp, String)> {
    events
        .iter()
        .filter(|e| e.verb == "create" && e.stage == Stage::ResponseComplete && e.succeeded())
        .filter(|e| {
            e.object_ref
                .as_ref()
                .is_some_and(|o| o.resource == "pods" && o.subresource.is_empty() && o.namespace == namespace)
        })
        .filter_map(|e| {
            let at: Timestamp = e.request_received_timestamp.parse().ok()?;
            (at >= from).then(|| (at, worker_of(&e.user_agent).unwrap_or(&e.user_agent).to_string()))
        })
        .min_by_key(|(at, _)| *at)
}

fn job_named<'a>(seen: &'a ObjectsSeen, namespace: &str, name: &str) -> Option<&'a JobRecord> {
    seen.jobs.values().find(|j| j.namespace == namespace && j.name == name)
}

/// Each kill's recovery. With the audit log, a probe's first pod is the first pod created in
/// its namespace after the kill (only probes run there; a probe still unanswered from an
/// earlier kill of the same shard's owner would be counted for the later one); without, when the
/// watch first saw the probe's pod.
pub fn measure(
    kills: &[KillProbed],
    events: Option<&[AuditEvent]>,
    seen: &ObjectsSeen,
    work_started: Timestamp,
) -> RecoveryReport {
    let since = |from: Timestamp, to: Timestamp| seconds(to.duration_since(from).unsigned_abs());
    let per_kill: Vec<KillRecovery> = kills
        .iter()
        .map(|kill| {
            let per_shard: Vec<ShardRecovery> = kill
                .probes
                .iter()
                .map(|p| {
                    let acted = match (p.created, events) {
                        (None, _) => None,
                        (Some(_), Some(events)) => first_pod_create(events, &p.namespace, kill.killed_at)
                            .map(|(at, by)| (since(kill.killed_at, at), Some(by))),
                        (Some(_), None) => job_named(seen, &p.namespace, &p.job)
                            .and_then(|j| j.first_pod_seen)
                            .map(|at| (since(kill.killed_at, at), None)),
                    };
                    ShardRecovery {
                        shard: p.shard,
                        namespace: p.namespace.clone(),
                        job: p.job.clone(),
                        seconds: acted.as_ref().map(|a| a.0),
                        acted_by: acted.and_then(|a| a.1),
                        error: p.error.clone(),
                    }
                })
                .collect();
            let all_recovered = per_shard.iter().all(|s| s.seconds.is_some());
            let slowest = per_shard
                .iter()
                .filter_map(|s| s.seconds)
                .fold(None, |m: Option<f64>, s| Some(m.map_or(s, |m| m.max(s))));
            KillRecovery {
                worker: kill.worker.clone(),
                at_seconds: since(work_started, kill.killed_at),
                shards: per_shard.len(),
                seconds: slowest.filter(|_| all_recovered),
                error: kill.map_error.clone(),
                per_shard,
            }
        })
        .collect();
    let kill_seconds: Vec<f64> = per_kill.iter().filter_map(|k| k.seconds).collect();
    let shards = || per_kill.iter().flat_map(|k| k.per_shard.iter().map(move |s| (k, s)));
    let shard_seconds: Vec<f64> = shards().filter_map(|(_, s)| s.seconds).collect();
    let by = |victim: bool| -> Vec<f64> {
        shards()
            .filter(|(k, s)| s.acted_by.as_ref().is_some_and(|w| (*w == k.worker) == victim))
            .filter_map(|(_, s)| s.seconds)
            .collect()
    };
    RecoveryReport {
        measured_from: if events.is_some() { "audit log" } else { "watches" }.into(),
        kills: per_kill.len(),
        kills_measured: kill_seconds.len(),
        kills_without_shards: per_kill.iter().filter(|k| k.shards == 0).count(),
        shards_probed: shards().count(),
        shards_unrecovered: shards().filter(|(_, s)| s.seconds.is_none()).count(),
        shards_recovered_by_victim: by(true).len(),
        per_kill_seconds: Percentiles::of(&kill_seconds),
        per_shard_seconds: Percentiles::of(&shard_seconds),
        per_shard_by_another_worker_seconds: Percentiles::of(&by(false)),
        per_shard_by_the_victim_seconds: Percentiles::of(&by(true)),
        per_kill,
    }
}

/// Invariant 2 at every kill: each shard of the victim acted on again (its probe's first pod
/// created) by the end of the run, however long it took; a kill whose victim's shards could
/// not be read, or a probe not sent, is a violation too.
pub fn shards_recovered_audit(report: &RecoveryReport) -> Outcome {
    let mut violations = Vec::new();
    for kill in &report.per_kill {
        if let Some(e) = &kill.error {
            violations
                .push(format!("the kill of {} at {:.1}s: shards unknown: {e}", kill.worker, kill.at_seconds));
        }
        for s in kill.per_shard.iter().filter(|s| s.seconds.is_none()) {
            let why = s.error.as_deref().unwrap_or("no pod created by the end");
            violations.push(format!(
                "the kill of {} at {:.1}s: shard {} ({}/{}): {why}",
                kill.worker, kill.at_seconds, s.shard, s.namespace, s.job
            ));
        }
    }
    Outcome::from_violations(
        "killed-workers-shards-recovered",
        "every shard of each killed worker acting again (its probe Job's first pod created)",
        report.shards_probed,
        "shards probed",
        violations,
    )
}

/// `goals.recovery_p99`: the p99 over the kills, every probed shard recovered, and at least one
/// kill measured.
pub fn recovery_goal(goal: Span, report: &RecoveryReport) -> Outcome {
    let p = &report.per_kill_seconds;
    let passed = report.kills_measured > 0 && report.shards_unrecovered == 0 && p.p99 <= goal.0.as_secs_f64();
    Outcome {
        name: "recovery-p99".into(),
        target: format!("≤ {goal}, kill → every shard of the victim acting again, p99 over the kills"),
        measured: format!(
            "{:.3} s p99 of {} kills ({} shards, {} unrecovered)",
            p.p99, report.kills_measured, report.shards_probed, report.shards_unrecovered
        ),
        passed,
        skipped: None,
        violations: Vec::new(),
    }
}

/// The recoveries' cumulative distributions, per kill and per shard, with the goal's line.
pub fn plot(
    path: &std::path::Path,
    scenario: &str,
    report: &RecoveryReport,
    goal: Option<Span>,
) -> anyhow::Result<()> {
    let cdf = |mut samples: Vec<f64>| {
        samples.sort_by(f64::total_cmp);
        plot::cdf_points(&samples, 400)
    };
    let per_kill = report.per_kill.iter().filter_map(|k| k.seconds).collect();
    let per_shard =
        report.per_kill.iter().flat_map(|k| k.per_shard.iter().filter_map(|s| s.seconds)).collect();
    let series = [
        Series { name: "kill → every shard of the victim acting".into(), points: cdf(per_kill) },
        Series { name: "kill → a shard acting".into(), points: cdf(per_shard) },
    ];
    plot::latency_cdf_chart(
        path,
        &format!("{scenario}: kill → the victim's shards acting again"),
        &series,
        goal.map(|g| g.0.as_secs_f64()),
    )
}

/// The summary's lines on the recoveries.
pub fn summary(report: &RecoveryReport) -> String {
    let row = |name: &str, p: &Percentiles| {
        format!("  {name:<32} {:>6} {:>6.2} {:>6.2} {:>6.2} {:>6.2}\n", p.count, p.p50, p.p90, p.p99, p.max)
    };
    format!(
        "crash recovery ({}): {} kills, {} measured, {} without shards; {} shards probed, {} unrecovered, \
         {} taken back by their restarted victim\n{}{}{}{}",
        report.measured_from,
        report.kills,
        report.kills_measured,
        report.kills_without_shards,
        report.shards_probed,
        report.shards_unrecovered,
        report.shards_recovered_by_victim,
        row("recovery per kill (s)", &report.per_kill_seconds),
        row("recovery per shard (s)", &report.per_shard_seconds),
        row("  by another worker", &report.per_shard_by_another_worker_seconds),
        row("  by the restarted victim", &report.per_shard_by_the_victim_seconds),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use batchfleet_sim::audit::{ObjectReference, ResponseStatus, UserInfo};

    fn at(s: &str) -> Timestamp {
        s.parse().expect("time")
    }

    fn pod_create(ns: &str, when: &str, agent: &str) -> AuditEvent {
        AuditEvent {
            kind: "Event".into(),
            api_version: "audit.k8s.io/v1".into(),
            level: "Metadata".into(),
            audit_id: String::new(),
            stage: Stage::ResponseComplete,
            request_uri: format!("/api/v1/namespaces/{ns}/pods"),
            verb: "create".into(),
            user: UserInfo { username: "sim".into(), groups: Vec::new() },
            source_ips: Vec::new(),
            user_agent: agent.into(),
            object_ref: Some(ObjectReference {
                resource: "pods".into(),
                namespace: ns.into(),
                api_version: "v1".into(),
                ..ObjectReference::default()
            }),
            response_status: Some(ResponseStatus { metadata: Default::default(), code: 201 }),
            request_received_timestamp: when.into(),
            stage_timestamp: when.into(),
        }
    }

    fn probe(shard: u32, ns: &str, sent: bool) -> ProbeSent {
        ProbeSent {
            shard,
            namespace: ns.into(),
            job: "probe-0".into(),
            created: sent.then(|| at("2026-11-28T10:00:10.1Z")),
            error: (!sent).then(|| "refused".to_string()),
        }
    }

    #[test]
    fn probe_namespaces_cover_every_shard_with_the_fleets_hash() {
        let names = probe_namespaces("lt", 64).expect("found");
        assert_eq!(names.len(), 64);
        let space = ShardSpace::new(64).expect("power of two");
        for (shard, name) in &names {
            assert_eq!(space.shard_of(name), *shard, "{name}");
            assert!(name.starts_with("lt-probe-"), "{name}");
        }
    }

    #[test]
    fn a_kill_recovers_with_its_slowest_shard_and_an_unanswered_probe_fails_the_audit() {
        let started = at("2026-11-28T10:00:00Z");
        let kills = vec![
            KillProbed {
                worker: "w-1".into(),
                killed_at: at("2026-11-28T10:00:10Z"),
                map_error: None,
                probes: vec![probe(3, "p-3", true), probe(7, "p-7", true)],
            },
            KillProbed {
                worker: "w-2".into(),
                killed_at: at("2026-11-28T10:00:30Z"),
                map_error: None,
                probes: vec![probe(5, "p-5", true), probe(9, "p-9", false)],
            },
        ];
        let events = vec![
            // Before the kill: not the probe's.
            pod_create("p-3", "2026-11-28T10:00:05Z", "fleet-worker/0.1.0 (w-1)"),
            pod_create("p-3", "2026-11-28T10:00:12.5Z", "fleet-worker/0.1.0 (w-0)"),
            pod_create("p-3", "2026-11-28T10:00:13Z", "fleet-worker/0.1.0 (w-0)"),
            pod_create("p-7", "2026-11-28T10:00:14Z", "fleet-worker/0.1.0 (w-1)"),
            // p-5 is never answered.
        ];
        let report = measure(&kills, Some(&events), &ObjectsSeen::default(), started);
        assert_eq!((report.kills, report.kills_measured, report.shards_probed), (2, 1, 4));
        assert_eq!((report.shards_unrecovered, report.shards_recovered_by_victim), (2, 1));
        let first = &report.per_kill[0];
        assert_eq!((first.at_seconds, first.seconds), (10.0, Some(4.0)));
        assert_eq!(first.per_shard[0].seconds, Some(2.5));
        assert_eq!(first.per_shard[0].acted_by.as_deref(), Some("w-0"));
        assert_eq!(report.per_kill[1].seconds, None);
        assert_eq!(report.per_kill_seconds.count, 1);
        assert_eq!(report.per_shard_seconds.max, 4.0);
        assert_eq!(report.per_shard_by_another_worker_seconds.count, 1);
        assert_eq!(report.per_shard_by_another_worker_seconds.max, 2.5);
        assert_eq!(report.per_shard_by_the_victim_seconds.max, 4.0);

        let audit = shards_recovered_audit(&report);
        assert!(!audit.passed);
        assert_eq!(audit.violations.len(), 2, "{:?}", audit.violations);
        assert!(audit.violations[1].contains("refused"), "{:?}", audit.violations);
        let goal = recovery_goal(Span(std::time::Duration::from_secs(5)), &report);
        assert!(!goal.passed, "an unrecovered shard fails the goal: {goal:?}");

        let answered = measure(&kills[..1], Some(&events), &ObjectsSeen::default(), started);
        assert!(shards_recovered_audit(&answered).passed);
        assert!(recovery_goal(Span(std::time::Duration::from_secs(5)), &answered).passed);
        assert!(!recovery_goal(Span(std::time::Duration::from_secs(3)), &answered).passed);
    }
}
