//! Invariant 1 from the audit log: a shard's namespaces are written by one worker at a time. Per
//! shard, the writes of every worker in its namespaces, in the order the server received them,
//! switch writer at most as often as the shard changed owner (its epoch counts its placements);
//! a worker writing again for a shard another worker took over shows as a switch too many.

use std::collections::BTreeMap;

use batchfleet_sim::audit::{AuditEvent, Stage};

use crate::Outcome;
use crate::agents::{shard_of, worker_of};

/// One write a worker sent for a namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct WorkerWrite {
    /// `requestReceivedTimestamp` (fixed-width RFC 3339, so it sorts as text).
    pub received: String,
    pub worker: String,
    pub namespace: String,
    /// `verb resource/name`, for the report.
    pub what: String,
}

/// Every worker's writes in the namespaces `in_scope` accepts, per shard, in received order.
pub fn writes_by_shard(
    events: &[AuditEvent],
    shards: u32,
    in_scope: impl Fn(&str) -> bool,
) -> BTreeMap<u32, Vec<WorkerWrite>> {
    let mut out: BTreeMap<u32, Vec<WorkerWrite>> = BTreeMap::new();
    // A watch has two stages; a write has only ResponseComplete, but be explicit.
    for e in events.iter().filter(|e| e.is_write() && e.stage == Stage::ResponseComplete) {
        let (Some(worker), Some(o)) = (worker_of(&e.user_agent), e.object_ref.as_ref()) else { continue };
        if o.namespace.is_empty() || !in_scope(&o.namespace) {
            continue;
        }
        out.entry(shard_of(&o.namespace, shards)).or_default().push(WorkerWrite {
            received: e.request_received_timestamp.clone(),
            worker: worker.to_string(),
            namespace: o.namespace.clone(),
            what: format!("{} {}/{}", e.verb, o.resource, o.name),
        });
    }
    for writes in out.values_mut() {
        writes.sort();
    }
    out
}

/// The tenures of a shard: each maximal run of one worker's writes, as (worker, first, last).
pub fn tenures(writes: &[WorkerWrite]) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = Vec::new();
    for w in writes {
        match out.last_mut() {
            Some((worker, _, last)) if *worker == w.worker => last.clone_from(&w.received),
            _ => out.push((w.worker.clone(), w.received.clone(), w.received.clone())),
        }
    }
    out
}

/// Passes when every shard's writer switched at most as many times as the shard moved.
/// `moves`: per shard, its changes of owner (epoch − 1; missing means none, as for a standalone
/// worker that owns every shard).
pub fn tenures_never_overlap(
    events: &[AuditEvent],
    shards: u32,
    moves: &BTreeMap<u32, u64>,
    in_scope: impl Fn(&str) -> bool,
) -> Outcome {
    let by_shard = writes_by_shard(events, shards, in_scope);
    let mut violations = Vec::new();
    for (shard, writes) in &by_shard {
        let runs = tenures(writes);
        let switches = runs.len().saturating_sub(1) as u64;
        let moved = moves.get(shard).copied().unwrap_or(0);
        if switches > moved {
            let runs: Vec<String> =
                runs.iter().map(|(w, first, last)| format!("{w} {first}..{last}")).collect();
            violations.push(format!(
                "shard {shard}: writers switched {switches} times over {moved} moves: {}",
                runs.join(", ")
            ));
        }
    }
    Outcome::from_violations(
        "shard-tenures-never-overlap",
        "writers of a shard switch at most once per move",
        by_shard.len(),
        "shards written",
        violations,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::shard_of;
    use crate::test_events::audit_event;

    fn write(at: &str, worker: &str, ns: &str) -> AuditEvent {
        audit_event(at, "create", &format!("fleet-worker/0.1.0 ({worker})"), "pods", ns, "p", 201)
    }

    #[test]
    fn a_worker_writing_after_another_took_over_fails_the_audit() {
        let ns = "team-a";
        let shard = shard_of(ns, 16);
        let events = vec![
            write("2026-11-26T10:00:00.000001Z", "w-0", ns),
            write("2026-11-26T10:00:01.000000Z", "w-1", ns),
            // w-0 again, with no second move: it wrote while w-1 held the shard.
            write("2026-11-26T10:00:02.000000Z", "w-0", ns),
        ];
        let one_move = BTreeMap::from([(shard, 1)]);
        let outcome = tenures_never_overlap(&events, 16, &one_move, |_| true);
        assert!(!outcome.passed, "{outcome:?}");
        assert!(outcome.violations[0].contains("switched 2 times over 1 moves"), "{outcome:?}");
        // Two moves (w-0 → w-1 → w-0) allow the same writes.
        let two_moves = BTreeMap::from([(shard, 2)]);
        assert!(tenures_never_overlap(&events, 16, &two_moves, |_| true).passed);
    }

    #[test]
    fn namespaces_of_one_shard_share_its_tenures_and_other_writers_do_not_count() {
        let names: Vec<String> = (0..200).map(|i| format!("ns-{i}")).collect();
        let first = &names[0];
        let twin = names[1..].iter().find(|n| shard_of(n, 16) == shard_of(first, 16)).expect("a twin");
        let mut events = vec![
            write("2026-11-26T10:00:00.000000Z", "w-0", first),
            write("2026-11-26T10:00:01.000000Z", "w-1", twin),
        ];
        // The harness's own writes (not a fleet worker) are no tenure.
        events.push(audit_event(
            "2026-11-26T10:00:02.000000Z",
            "create",
            "loadtest",
            "jobs",
            first,
            "j",
            201,
        ));
        let outcome = tenures_never_overlap(&events, 16, &BTreeMap::new(), |_| true);
        assert!(!outcome.passed, "two workers wrote one shard that never moved: {outcome:?}");
        let scoped = tenures_never_overlap(&events, 16, &BTreeMap::new(), |ns| ns == first);
        assert!(scoped.passed, "{scoped:?}");
    }
}
