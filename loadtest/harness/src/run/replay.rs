//! The replay against standalone (`loadtest run --replay`): the same workload again on a fresh
//! sim under one `fleet-worker --standalone` (a single controller, as upstream runs it), and each
//! Job's final status compared with the run's. A Job that ends otherwise under the fleet than
//! under the single controller fails the audit.

use std::collections::BTreeMap;

use batchfleet_audits::Outcome;
use batchfleet_audits::objects::ObjectsSeen;
use serde::Serialize;

use super::expect;
use crate::scenario::{Scenario, WorkloadSpec};

/// What a Job ended with, as compared between the runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FinalStatus {
    /// The true conditions' `type/reason`, sorted.
    pub conditions: Vec<String>,
    /// `None` where the Job's shape leaves the count to chance (failures racing in parallel
    /// pods), so that it is not compared.
    pub succeeded: Option<i32>,
    pub failed: Option<i32>,
    pub completed_indexes: String,
    pub failed_indexes: String,
}

/// Each workload Job's final status, by (namespace's position, name): namespaces differ between
/// runs on a kubeconfig, their order does not. CronJobs' Jobs are left out (their names carry
/// the scheduled minute, which differs between runs).
pub type FinalStatuses = BTreeMap<(usize, String), FinalStatus>;

pub fn final_statuses(seen: &ObjectsSeen, namespaces: &[String], workload: &WorkloadSpec) -> FinalStatuses {
    let mut out = FinalStatuses::new();
    for job in seen.jobs.values().filter(|j| j.cronjob.is_none()) {
        let (Some(ns), Some(shape)) =
            (namespaces.iter().position(|n| *n == job.namespace), expect::shape_of(workload, job))
        else {
            continue;
        };
        let expected = shape.expected();
        let status = job.status.clone().unwrap_or_default();
        let mut conditions: Vec<String> = status
            .conditions
            .iter()
            .flatten()
            .filter(|c| c.status == "True")
            .map(|c| format!("{}/{}", c.type_, c.reason.as_deref().unwrap_or("")))
            .collect();
        conditions.sort();
        out.insert(
            (ns, job.name.clone()),
            FinalStatus {
                conditions,
                succeeded: expected.succeeded.map(|_| status.succeeded.unwrap_or(0)),
                failed: expected.failed.map(|_| status.failed.unwrap_or(0)),
                completed_indexes: status.completed_indexes.unwrap_or_default(),
                failed_indexes: status.failed_indexes.unwrap_or_default(),
            },
        );
    }
    out
}

/// The scenario of the replay: the workload under one standalone worker, no faults.
pub fn standalone(scenario: &Scenario) -> Scenario {
    let mut s = scenario.clone();
    s.fleet.standalone = true;
    s.faults.clear();
    // Nothing is killed, so nothing to probe.
    s.crash_recovery = None;
    s.goals = Default::default();
    s
}

/// Every Job of the run ended as it did under the standalone worker.
pub fn same_as_standalone(
    fleet: &FinalStatuses,
    standalone: &FinalStatuses,
    namespaces: &[String],
) -> Outcome {
    let shown =
        |(ns, name): &(usize, String)| format!("{}/{name}", namespaces.get(*ns).map_or("?", String::as_str));
    let mut violations = Vec::new();
    for (key, theirs) in standalone {
        match fleet.get(key) {
            None => violations.push(format!("{}: not seen in the run", shown(key))),
            Some(ours) if ours != theirs => {
                violations.push(format!("{}: {ours:?} in the run, {theirs:?} standalone", shown(key)))
            }
            Some(_) => {}
        }
    }
    for key in fleet.keys().filter(|k| !standalone.contains_key(*k)) {
        violations.push(format!("{}: not seen in the standalone replay", shown(key)));
    }
    Outcome::from_violations(
        "jobs-finish-as-standalone",
        "every Job's final conditions, counts, completedIndexes and failedIndexes as under one standalone worker",
        standalone.len().max(fleet.len()),
        "Jobs",
        violations,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(conditions: &[&str], succeeded: i32, completed: &str) -> FinalStatus {
        FinalStatus {
            conditions: conditions.iter().map(|c| c.to_string()).collect(),
            succeeded: Some(succeeded),
            failed: Some(0),
            completed_indexes: completed.into(),
            failed_indexes: String::new(),
        }
    }

    #[test]
    fn a_job_ending_otherwise_than_standalone_fails() {
        let ns = ["lt-0".to_string()];
        let done =
            status(&["Complete/CompletionsReached", "SuccessCriteriaMet/CompletionsReached"], 3, "0-2");
        let standalone =
            FinalStatuses::from([((0, "a-0".into()), done.clone()), ((0, "a-1".into()), done.clone())]);
        let mut fleet = standalone.clone();
        assert!(same_as_standalone(&fleet, &standalone, &ns).passed);
        fleet.insert((0, "a-1".into()), status(&["Complete/CompletionsReached"], 3, "0,2"));
        fleet.insert((0, "extra-0".into()), done);
        let outcome = same_as_standalone(&fleet, &standalone, &ns);
        assert!(!outcome.passed);
        assert_eq!(outcome.violations.len(), 2, "{outcome:?}");
        assert!(outcome.violations[0].starts_with("lt-0/a-1: "), "{outcome:?}");
        assert_eq!(outcome.violations[1], "lt-0/extra-0: not seen in the standalone replay");
    }
}
