//! False expiries: a worker's lease lapsing although nothing stopped the worker. A worker that
//! cannot renew its lease within its TTL stops every shard and logs `the worker lease lapsed:
//! stopping every shard` at ERROR (it counts each lapse in `batchfleet_worker_lease_lapses_total`
//! too, but a killed worker's counter dies with it; its log does not). A lapse during a pause of
//! that worker (SIGSTOP past the lease) is the fault's doing; any other one is a slow renewal
//! judged a death, which short TTLs must not cause.

use std::path::PathBuf;
use std::time::Duration;

use batchfleet_audits::Outcome;
use jiff::Timestamp;
use serde::Serialize;

use super::faults::FaultRecord;
use crate::scenario::{Fault, FaultAction};

/// The line a worker logs when its lease lapsed with shards held.
const LAPSE_LINE: &str = "the worker lease lapsed: stopping every shard";

/// The worker lease lapses the workers' logs show.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LeaseLapses {
    pub total: usize,
    /// During a pause of that worker (from the SIGSTOP until a lease past the SIGCONT).
    pub during_pauses: usize,
    /// The rest: lapses of workers nothing stopped.
    pub false_expiries: usize,
    /// Each false expiry: `worker at TIME`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub false_expiry_lines: Vec<String>,
}

/// When each worker was paused: from the SIGSTOP until `resume_after` and `slack` later.
pub fn pause_windows(
    faults: &[Fault],
    records: &[FaultRecord],
    work_started: Timestamp,
    slack: Duration,
) -> Vec<(String, Timestamp, Timestamp)> {
    records
        .iter()
        .filter(|r| r.action == FaultAction::PauseWorker.name() && !r.result.starts_with("failed"))
        .filter_map(|r| {
            let fault = faults.iter().find(|f| {
                f.action == FaultAction::PauseWorker
                    && f.worker.as_deref() == Some(r.target.as_str())
                    && (f.at.0.as_secs_f64() - r.due_seconds).abs() < 1e-6
            })?;
            let from =
                work_started.checked_add(jiff::SignedDuration::from_secs_f64(r.applied_seconds)).ok()?;
            let paused = fault.resume_after.map(|s| s.0).unwrap_or_default() + slack;
            let to = from.checked_add(jiff::SignedDuration::try_from(paused).ok()?).ok()?;
            Some((r.target.clone(), from, to))
        })
        .collect()
}

/// The lapse lines in each `(process, log)` and whether each fell in a pause of that process.
/// A line's time is its first field (tracing's text format); a lapse whose time cannot be read
/// is counted as false.
pub fn count(logs: &[(String, PathBuf)], pauses: &[(String, Timestamp, Timestamp)]) -> LeaseLapses {
    let mut out = LeaseLapses::default();
    for (process, path) in logs {
        let Ok(text) = std::fs::read_to_string(path) else { continue };
        for line in text.lines().filter(|l| l.contains(LAPSE_LINE)) {
            out.total += 1;
            let at: Option<Timestamp> = line.split_whitespace().next().and_then(|t| t.parse().ok());
            let paused = at.is_some_and(|at| {
                pauses.iter().any(|(w, from, to)| w == process && *from <= at && at <= *to)
            });
            if paused {
                out.during_pauses += 1;
            } else {
                out.false_expiries += 1;
                let when = at.map_or_else(|| "an unknown time".to_string(), |t| t.to_string());
                out.false_expiry_lines.push(format!("{process} at {when}"));
            }
        }
    }
    out
}

/// `goals.false_expiries_max`.
pub fn goal(max: usize, lapses: &LeaseLapses) -> Outcome {
    Outcome {
        name: "false-expiries".into(),
        target: format!("≤ {max} lease lapses of workers not paused"),
        measured: format!("{} ({} more during pauses)", lapses.false_expiries, lapses.during_pauses),
        passed: lapses.false_expiries <= max,
        skipped: None,
        violations: lapses.false_expiry_lines.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Span;

    #[test]
    fn a_lapse_in_a_pause_of_that_worker_is_expected_and_any_other_is_false() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lapse = |t: &str| format!("{t} ERROR batchfleet_worker::fleet::lease: {LAPSE_LINE} shards=4\n");
        let (w0, w1) = (dir.path().join("w-0.log"), dir.path().join("w-1.log"));
        std::fs::write(
            &w0,
            format!("2026-11-28T10:00:01Z  INFO worker running\n{}", lapse("2026-11-28T10:00:20Z")),
        )
        .expect("write");
        std::fs::write(&w1, format!("{}{}", lapse("2026-11-28T10:00:21Z"), lapse("2026-11-28T10:01:30Z")))
            .expect("write");
        let started: Timestamp = "2026-11-28T10:00:00Z".parse().expect("time");
        let pause = Fault {
            at: Span(Duration::from_secs(10)),
            action: FaultAction::PauseWorker,
            worker: Some("w-1".into()),
            resume_after: Some(Span(Duration::from_secs(8))),
            restart_after: None,
            api: None,
            node: None,
        };
        let record = FaultRecord {
            due_seconds: 10.0,
            applied_seconds: 10.2,
            action: "pause-worker".into(),
            target: "w-1".into(),
            result: "SIGSTOP, SIGCONT after 8s".into(),
            orphaned_pods: Vec::new(),
            rollout: None,
        };
        let pauses = pause_windows(&[pause], &[record], started, Duration::from_secs(5));
        assert_eq!(pauses.len(), 1);
        let logs = vec![("w-0".to_string(), w0), ("w-1".to_string(), w1)];
        let lapses = count(&logs, &pauses);
        assert_eq!((lapses.total, lapses.during_pauses, lapses.false_expiries), (3, 1, 2));
        assert_eq!(lapses.false_expiry_lines[0], "w-0 at 2026-11-28T10:00:20Z");
        assert!(!goal(0, &lapses).passed);
        assert!(goal(2, &lapses).passed);
        assert!(goal(0, &count(&logs[..0], &pauses)).passed);
    }
}
