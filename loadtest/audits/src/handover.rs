//! Invariant 2 from the audit log and the watches: a shard never goes without an acting owner
//! for longer than its bound while it has work to do. Per shard, the tenures of its writers
//! (`tenure::tenures`) and, between two of them, the time nobody acted for it:
//!
//! - it starts when the old owner provably stopped acting: at a fault that lost that worker
//!   (SIGKILL, SIGSTOP, a lost node), or at the first change someone else made in the shard's
//!   namespaces (a Job created, a pod deleted) that the old owner never answered, whichever
//!   comes first, and never before the old owner's last write;
//! - it ends at the new owner's first write (or at the run's end when nobody took over);
//! - only the part during which a Job of the shard was unfinished, or waited for its TTL, counts
//!   as unowned.
//!
//! A hand-over whose start cannot be told (the new owner wrote first; the shard was idle) is
//! counted but has no gap. The bound is the worker lease, its margin and a slack after a lost
//! worker, a few seconds for a graceful move.

use std::collections::BTreeMap;
use std::time::Duration;

use batchfleet_sim::audit::{AuditEvent, Stage};
use jiff::Timestamp;

use crate::Outcome;
use crate::agents::{shard_of, worker_of};
use crate::objects::ObjectsSeen;
use crate::tenure::{WorkerWrite, tenures, writes_by_shard};

/// A span of time, `from` ≤ `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    pub from: Timestamp,
    pub to: Timestamp,
}

/// How a fault takes a worker away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The worker stops without a word (SIGKILL, SIGSTOP, its node lost, its leader lost): its
    /// shards wait for its lease and the margin.
    Lost,
    /// The coordinator moves its shards by the warm hand-over (drain, SIGTERM, a join).
    Graceful,
}

/// A fault at a wall time, on one worker or (`None`) on the whole fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultAt {
    pub at: Timestamp,
    pub worker: Option<String>,
    pub kind: FaultKind,
}

/// How long a shard may go without an acting owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub graceful: Duration,
    /// Worker lease + margin + slack.
    pub lost: Duration,
}

/// What each shard saw: its workers' writes, the changes others made in it, and when it had
/// work to do.
#[derive(Debug, Clone, Default)]
pub struct ShardActivity {
    pub writes: BTreeMap<u32, Vec<WorkerWrite>>,
    /// Writes by anyone but a fleet worker (the workload, PodGC, kubectl) in the shard's
    /// namespaces, sorted.
    pub changes: BTreeMap<u32, Vec<Timestamp>>,
    /// When a Job of the shard was unfinished or waiting for its TTL.
    pub work: BTreeMap<u32, Vec<Interval>>,
}

/// One change of a shard's writer, or a shard left without one at the end.
#[derive(Debug, Clone, PartialEq)]
pub struct HandOver {
    pub shard: u32,
    pub from: String,
    /// `None`: nobody wrote for the shard again before the end.
    pub to: Option<String>,
    pub last_write: Timestamp,
    /// When the shard provably needed an owner the old one no longer was; `None` when that
    /// cannot be told.
    pub needed_from: Option<Timestamp>,
    pub acted_at: Timestamp,
    /// `acted_at −` the first moment after `needed_from` the shard had work, in seconds (0
    /// without either).
    pub gap_seconds: f64,
    /// The part of the gap during which the shard had work, in seconds.
    pub unowned_seconds: f64,
    pub after_loss: bool,
    pub bound: Duration,
}

fn parse(t: &str) -> Option<Timestamp> {
    t.parse().ok()
}

/// The changes made by anyone but a fleet worker to Jobs, CronJobs and pods, per shard.
pub fn changes_by_shard(
    events: &[AuditEvent],
    shards: u32,
    in_scope: impl Fn(&str) -> bool,
) -> BTreeMap<u32, Vec<Timestamp>> {
    let mut out: BTreeMap<u32, Vec<Timestamp>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.is_write() && e.succeeded() && e.stage == Stage::ResponseComplete) {
        let Some(o) = e.object_ref.as_ref() else { continue };
        if worker_of(&e.user_agent).is_some()
            || o.namespace.is_empty()
            || !in_scope(&o.namespace)
            || !matches!(o.resource.as_str(), "jobs" | "cronjobs" | "pods")
        {
            continue;
        }
        let Some(at) = parse(&e.request_received_timestamp) else { continue };
        out.entry(shard_of(&o.namespace, shards)).or_default().push(at);
    }
    for changes in out.values_mut() {
        changes.sort();
    }
    out
}

/// When each shard had work: from a Job's first sight until it finished (until it was deleted
/// when it has a TTL), or `end`.
pub fn work_by_shard(seen: &ObjectsSeen, shards: u32, end: Timestamp) -> BTreeMap<u32, Vec<Interval>> {
    let mut out: BTreeMap<u32, Vec<Interval>> = BTreeMap::new();
    for job in seen.jobs.values() {
        let Some(from) = job.first_seen else { continue };
        let done = match job.ttl_seconds {
            Some(_) => job.deleted_seen,
            None => job.finished.as_ref().map(|f| f.seen).or(job.deleted_seen),
        };
        let to = done.unwrap_or(end).max(from);
        out.entry(shard_of(&job.namespace, shards)).or_default().push(Interval { from, to });
    }
    out
}

/// Everything a shard saw, from the audit log and the watches.
pub fn activity(
    events: &[AuditEvent],
    seen: &ObjectsSeen,
    shards: u32,
    end: Timestamp,
    in_scope: impl Fn(&str) -> bool,
) -> ShardActivity {
    ShardActivity {
        writes: writes_by_shard(events, shards, &in_scope),
        changes: changes_by_shard(events, shards, &in_scope),
        work: work_by_shard(seen, shards, end),
    }
}

/// Seconds of `[from, to]` covered by the union of `work`.
fn covered_seconds(from: Timestamp, to: Timestamp, work: &[Interval]) -> f64 {
    let mut spans: Vec<(Timestamp, Timestamp)> =
        work.iter().map(|w| (w.from.max(from), w.to.min(to))).filter(|(a, b)| a < b).collect();
    spans.sort();
    let mut total = 0.0;
    let mut current: Option<(Timestamp, Timestamp)> = None;
    for (a, b) in spans {
        match &mut current {
            Some((_, end)) if a <= *end => *end = (*end).max(b),
            _ => {
                if let Some((s, e)) = current.take() {
                    total += e.duration_since(s).as_secs_f64();
                }
                current = Some((a, b));
            }
        }
    }
    if let Some((s, e)) = current {
        total += e.duration_since(s).as_secs_f64();
    }
    total
}

/// The first moment within `[from, to)` that `work` covers.
fn first_work(from: Timestamp, to: Timestamp, work: &[Interval]) -> Option<Timestamp> {
    work.iter().filter(|w| w.from < to && w.to > from).map(|w| w.from.max(from)).min()
}

/// Every hand-over of every shard, and every shard left without a writer while it had work.
pub fn hand_overs(
    activity: &ShardActivity,
    faults: &[FaultAt],
    bounds: Bounds,
    end: Timestamp,
) -> Vec<HandOver> {
    let no_changes = Vec::new();
    let no_work = Vec::new();
    let mut out = Vec::new();
    for (&shard, writes) in &activity.writes {
        let changes = activity.changes.get(&shard).unwrap_or(&no_changes);
        let work = activity.work.get(&shard).unwrap_or(&no_work);
        let runs: Vec<(String, Timestamp, Timestamp)> = tenures(writes)
            .into_iter()
            .filter_map(|(w, first, last)| Some((w, parse(&first)?, parse(&last)?)))
            .collect();
        for (i, (worker, first, last)) in runs.iter().enumerate() {
            let next = runs.get(i + 1);
            let acted_at = next.map(|(_, first, _)| *first).unwrap_or(end);
            // The fault that took this worker away during its tenure, if one did.
            let loss = faults
                .iter()
                .filter(|f| f.kind == FaultKind::Lost)
                .filter(|f| f.worker.as_deref().is_none_or(|w| w == worker))
                .filter(|f| f.at >= *first && f.at <= acted_at)
                .map(|f| f.at)
                .min();
            let unanswered = changes.iter().find(|c| **c > *last && **c < acted_at).copied();
            let needed_from = match (loss, unanswered) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
            .map(|t| t.max(*last));
            // The last tenure ends the run without a hand-over unless the shard was left
            // wanting an owner.
            if next.is_none() && needed_from.is_none() {
                continue;
            }
            // The gap runs from the first moment after `needed_from` the shard had work: a
            // change nobody needed to answer (PodGC deleting a finished pod) starts none.
            let (gap_seconds, unowned_seconds) = match needed_from {
                Some(from) if from < acted_at => match first_work(from, acted_at, work) {
                    Some(busy) => {
                        (acted_at.duration_since(busy).as_secs_f64(), covered_seconds(from, acted_at, work))
                    }
                    None => (0.0, 0.0),
                },
                _ => (0.0, 0.0),
            };
            out.push(HandOver {
                shard,
                from: worker.clone(),
                to: next.map(|(w, _, _)| w.clone()),
                last_write: *last,
                needed_from,
                acted_at,
                gap_seconds,
                unowned_seconds,
                after_loss: loss.is_some(),
                bound: if loss.is_some() { bounds.lost } else { bounds.graceful },
            });
        }
    }
    out
}

/// Passes when no shard went without an acting owner, while it had work, past its bound.
pub fn owner_acting_within_bound(hand_overs: &[HandOver], bounds: Bounds) -> Outcome {
    let violations = hand_overs
        .iter()
        .filter(|h| h.unowned_seconds > h.bound.as_secs_f64())
        .map(|h| {
            let to = h.to.as_deref().unwrap_or("nobody");
            let from = h.needed_from.map(|t| t.to_string()).unwrap_or_default();
            format!(
                "shard {}: {} → {to}: unowned {:.1}s with work from {from} to {} (bound {:?}{})",
                h.shard,
                h.from,
                h.unowned_seconds,
                h.acted_at,
                h.bound,
                if h.after_loss { ", after a lost worker" } else { "" }
            )
        })
        .collect();
    Outcome::from_violations(
        "shard-owner-acting-within-bound",
        &format!(
            "no shard with work unowned past {:?} after a graceful move, {:?} after a lost worker",
            bounds.graceful, bounds.lost
        ),
        hand_overs.len(),
        "hand-overs",
        violations,
    )
}

/// The gaps (seconds) of the hand-overs that left work waiting, and the unowned seconds in all.
pub fn gaps_and_unowned(hand_overs: &[HandOver]) -> (Vec<f64>, f64) {
    let gaps = hand_overs.iter().filter(|h| h.gap_seconds > 0.0).map(|h| h.gap_seconds).collect();
    (gaps, hand_overs.iter().map(|h| h.unowned_seconds).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(17);

    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("time")
    }

    fn write(seconds: i64, worker: &str) -> WorkerWrite {
        WorkerWrite {
            received: batchfleet_sim::audit::micro_time(t(seconds)),
            worker: worker.into(),
            namespace: "team-a".into(),
            what: "create pods/p".into(),
        }
    }

    fn bounds() -> Bounds {
        Bounds { graceful: Duration::from_secs(5), lost: LEASE + Duration::from_secs(10) }
    }

    fn lost(seconds: i64, worker: &str) -> FaultAt {
        FaultAt { at: t(seconds), worker: Some(worker.into()), kind: FaultKind::Lost }
    }

    /// One shard with `writes`, `changes` (seconds) and work over `[0, busy_until]`.
    fn shard(writes: Vec<WorkerWrite>, changes: &[i64], busy_until: i64) -> ShardActivity {
        ShardActivity {
            writes: BTreeMap::from([(7, writes)]),
            changes: BTreeMap::from([(7, changes.iter().map(|s| t(*s)).collect())]),
            work: BTreeMap::from([(7, vec![Interval { from: t(0), to: t(busy_until) }])]),
        }
    }

    struct Case {
        name: &'static str,
        activity: ShardActivity,
        faults: Vec<FaultAt>,
        /// (to, gap, unowned, after_loss) of each hand-over.
        expect: Vec<(Option<&'static str>, f64, f64, bool)>,
        passes: bool,
    }

    #[test]
    fn hand_overs_and_their_bounds() {
        let cases = vec![
            Case {
                name: "a graceful move answered within a second",
                activity: shard(vec![write(1, "w-0"), write(10, "w-0"), write(13, "w-1")], &[12], 60),
                faults: vec![],
                expect: vec![(Some("w-1"), 1.0, 1.0, false)],
                passes: true,
            },
            Case {
                name: "a graceful move that left a created Job waiting 9 s",
                activity: shard(vec![write(1, "w-0"), write(20, "w-1")], &[11], 60),
                faults: vec![],
                expect: vec![(Some("w-1"), 9.0, 9.0, false)],
                passes: false,
            },
            Case {
                name: "a killed worker's shard taken over after its lease and margin",
                activity: shard(vec![write(1, "w-2"), write(9, "w-2"), write(28, "w-1")], &[], 60),
                faults: vec![lost(10, "w-2")],
                expect: vec![(Some("w-1"), 18.0, 18.0, true)],
                passes: true,
            },
            Case {
                name: "a killed worker's shard nobody took over",
                activity: shard(vec![write(1, "w-2"), write(9, "w-2")], &[], 60),
                faults: vec![lost(10, "w-2")],
                expect: vec![(None, 50.0, 50.0, true)],
                passes: false,
            },
            Case {
                name: "a kill of another worker does not count for this shard",
                activity: shard(vec![write(1, "w-0"), write(9, "w-0"), write(30, "w-1")], &[], 60),
                faults: vec![lost(10, "w-2")],
                expect: vec![(Some("w-1"), 0.0, 0.0, false)],
                passes: true,
            },
            Case {
                name: "time without work is not unowned",
                activity: shard(vec![write(1, "w-2"), write(30, "w-1")], &[], 5),
                faults: vec![lost(2, "w-2")],
                expect: vec![(Some("w-1"), 28.0, 3.0, true)],
                passes: true,
            },
            Case {
                name: "a change with no work left (a finished pod deleted) starts no gap",
                activity: shard(vec![write(1, "w-0"), write(40, "w-1")], &[20], 10),
                faults: vec![],
                expect: vec![(Some("w-1"), 0.0, 0.0, false)],
                passes: true,
            },
            Case {
                name: "an idle last tenure is no hand-over",
                activity: shard(vec![write(1, "w-0"), write(3, "w-0")], &[2], 60),
                faults: vec![],
                expect: vec![],
                passes: true,
            },
        ];
        for case in cases {
            let found = hand_overs(&case.activity, &case.faults, bounds(), t(60));
            let got: Vec<(Option<&str>, f64, f64, bool)> = found
                .iter()
                .map(|h| (h.to.as_deref(), h.gap_seconds, h.unowned_seconds, h.after_loss))
                .collect();
            assert_eq!(got, case.expect, "{}", case.name);
            let outcome = owner_acting_within_bound(&found, bounds());
            assert_eq!(outcome.passed, case.passes, "{}: {outcome:?}", case.name);
            if !case.passes {
                assert!(outcome.violations[0].starts_with("shard 7: "), "{}: {outcome:?}", case.name);
            }
        }
    }

    #[test]
    fn unowned_time_counts_overlapping_work_once() {
        let work = [
            Interval { from: t(0), to: t(10) },
            Interval { from: t(5), to: t(12) },
            Interval { from: t(20), to: t(25) },
        ];
        assert_eq!(covered_seconds(t(8), t(22), &work), 6.0);
        assert_eq!(covered_seconds(t(12), t(20), &work), 0.0);
    }
}
