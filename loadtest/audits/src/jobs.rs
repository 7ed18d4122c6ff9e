//! Checks on how Jobs ended: with the status a single upstream controller gives their shape, and
//! deleted by their TTL (from the audit log's deletes), never before it.

use std::collections::HashMap;
use std::time::Duration;

use batchfleet_sim::audit::{AuditEvent, Stage};
use jiff::Timestamp;

use crate::Outcome;
use crate::cron::CronClock;
use crate::objects::{JobRecord, ObjectsSeen};

/// The final status upstream's Job controller gives a Job of a known shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedStatus {
    /// `Complete` or `Failed`.
    pub condition: String,
    /// `None` where the shape does not fix it (failures racing in parallel pods).
    pub succeeded: Option<i32>,
    pub failed: Option<i32>,
    /// For Indexed Jobs, `status.completedIndexes`.
    pub completed_indexes: Option<String>,
}

fn describe(record: &JobRecord) -> String {
    let st = record.status.clone().unwrap_or_default();
    format!(
        "{} succeeded {} failed {} active {} completedIndexes {:?}",
        record.finished.as_ref().map_or("unfinished", |f| f.condition.as_str()),
        st.succeeded.unwrap_or(0),
        st.failed.unwrap_or(0),
        st.active.unwrap_or(0),
        st.completed_indexes.as_deref().unwrap_or("")
    )
}

/// Every Job `expected` knows finished with that status and no pod still active.
pub fn final_status_as_upstream(
    seen: &ObjectsSeen,
    expected: impl Fn(&JobRecord) -> Option<ExpectedStatus>,
) -> Outcome {
    let mut checked = 0;
    let mut violations = Vec::new();
    for record in seen.jobs.values() {
        let Some(want) = expected(record) else { continue };
        checked += 1;
        let st = record.status.clone().unwrap_or_default();
        let matches = record.finished.as_ref().is_some_and(|f| f.condition == want.condition)
            && want.succeeded.is_none_or(|n| st.succeeded.unwrap_or(0) == n)
            && want.failed.is_none_or(|n| st.failed.unwrap_or(0) == n)
            && st.active.unwrap_or(0) == 0
            && (want.completed_indexes.is_none()
                || st.completed_indexes.as_deref().filter(|s| !s.is_empty())
                    == want.completed_indexes.as_deref());
        if !matches {
            violations.push(format!(
                "{}/{}: {} (want {} succeeded {:?} failed {:?} completedIndexes {:?})",
                record.namespace,
                record.name,
                describe(record),
                want.condition,
                want.succeeded,
                want.failed,
                want.completed_indexes.unwrap_or_default()
            ));
        }
    }
    Outcome::from_violations(
        "jobs-finish-as-upstream",
        "every Job finished with upstream's conditions and counts",
        checked,
        "Jobs",
        violations,
    )
}

/// The first successful delete of each Job (namespace, name) in the audit log.
pub fn job_deletes(events: &[AuditEvent]) -> HashMap<(String, String), Timestamp> {
    let mut out: HashMap<(String, String), Timestamp> = HashMap::new();
    for e in events {
        let Some(o) = &e.object_ref else { continue };
        if e.stage != Stage::ResponseComplete
            || e.verb != "delete"
            || o.resource != "jobs"
            || !o.subresource.is_empty()
            || !e.succeeded()
        {
            continue;
        }
        let Ok(at) = e.request_received_timestamp.parse::<Timestamp>() else { continue };
        let slot = out.entry((o.namespace.clone(), o.name.clone())).or_insert(at);
        *slot = (*slot).min(at);
    }
    out
}

/// When a watch first saw each Job (namespace, name) terminating or deleted: the delete times
/// a run without the audit log has, each no earlier than the delete itself.
pub fn watched_deletes(seen: &ObjectsSeen) -> HashMap<(String, String), Timestamp> {
    seen.jobs
        .values()
        .filter_map(|j| Some(((j.namespace.clone(), j.name.clone()), j.deleting_seen?)))
        .collect()
}

/// Where a TTL check's delete times came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteSource {
    /// [`job_deletes`]: when the server received each delete.
    AuditLog,
    /// [`watched_deletes`]: when a watch saw it; a delete seen before the expiry surely was
    /// early, and each lag is at most the watch's delay too long.
    Watch,
}

/// What the TTL check measured besides its outcome: seconds from each Job's expiry (finish +
/// TTL) to its delete.
pub struct TtlCheck {
    pub outcome: Outcome,
    pub lags: Vec<f64>,
}

/// Every finished Job with a TTL was deleted, never before `finished + ttl` (upstream's rule, on
/// the condition's whole-second `lastTransitionTime`), both on the controllers' `clock`; one
/// whose expiry is more than `grace` (wall time) before `end` must have been deleted by then.
/// The lags are in wall seconds.
pub fn ttl_respected(
    seen: &ObjectsSeen,
    deletes: &HashMap<(String, String), Timestamp>,
    source: DeleteSource,
    end: Timestamp,
    grace: Duration,
    clock: &CronClock,
) -> TtlCheck {
    let mut checked = 0;
    let mut lags = Vec::new();
    let mut violations = Vec::new();
    for record in seen.jobs.values() {
        let (Some(ttl), Some(finished)) = (record.ttl_seconds, &record.finished) else { continue };
        checked += 1;
        let expiry = finished.at + jiff::SignedDuration::from_secs(i64::from(ttl));
        let key = (record.namespace.clone(), record.name.clone());
        match deletes.get(&key).map(|d| clock.at(*d)) {
            Some(deleted) if deleted < expiry => violations.push(format!(
                "{}/{}: deleted {deleted}, before its TTL expired at {expiry} (controllers' clock)",
                record.namespace, record.name
            )),
            Some(deleted) => lags.push(deleted.duration_since(expiry).as_secs_f64() / clock.speed),
            None => {
                let overdue =
                    clock.at(end).duration_since(expiry).as_secs_f64() / clock.speed > grace.as_secs_f64();
                if overdue {
                    violations.push(format!(
                        "{}/{}: TTL expired at {expiry}, not deleted by {end}",
                        record.namespace, record.name
                    ));
                }
            }
        }
    }
    let from = match source {
        DeleteSource::AuditLog => "deletes from the audit log",
        DeleteSource::Watch => "deletes as a watch saw them",
    };
    let outcome = Outcome::from_violations(
        "ttl-jobs-deleted-after-their-ttl",
        format!("deleted at or after finish + TTL, within {grace:?} ({from})").as_str(),
        checked,
        "Jobs with a TTL",
        violations,
    );
    TtlCheck { outcome, lags }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_events::audit_event;
    use serde_json::json;

    fn finished_job(
        name: &str,
        ttl: Option<i32>,
        succeeded: i32,
        at: &str,
    ) -> k8s_openapi::api::batch::v1::Job {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {"ttlSecondsAfterFinished": ttl, "template": {"spec": {"containers": []}}},
            "status": {"succeeded": succeeded, "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": at}]},
        }))
        .expect("job")
    }

    #[test]
    fn a_job_deleted_before_its_ttl_or_never_fails() {
        let mut seen = ObjectsSeen::default();
        let now = Timestamp::now();
        seen.apply_job(&finished_job("early", Some(10), 1, "2026-11-26T10:00:00Z"), now, false);
        seen.apply_job(&finished_job("kept", Some(10), 1, "2026-11-26T10:00:00Z"), now, false);
        seen.apply_job(&finished_job("ok", Some(10), 1, "2026-11-26T10:00:00Z"), now, false);
        let worker = "fleet-worker/0.1.0 (w-0)";
        let events = vec![
            audit_event("2026-11-26T10:00:09.500000Z", "delete", worker, "jobs", "ns", "early", 200),
            audit_event("2026-11-26T10:00:10.250000Z", "delete", worker, "jobs", "ns", "ok", 200),
        ];
        let end: Timestamp = "2026-11-26T10:01:00Z".parse().expect("time");
        let deletes = job_deletes(&events);
        let check = ttl_respected(
            &seen,
            &deletes,
            DeleteSource::AuditLog,
            end,
            Duration::from_secs(5),
            &CronClock::wall(),
        );
        assert!(!check.outcome.passed);
        let mut v = check.outcome.violations.clone();
        v.sort();
        assert!(v[0].starts_with("ns/early: deleted"), "{v:?}");
        assert!(v[1].starts_with("ns/kept: TTL expired"), "{v:?}");
        assert_eq!(check.lags, vec![0.25]);
        // Within the grace, a Job not yet deleted is no violation.
        let soon: Timestamp = "2026-11-26T10:00:12Z".parse().expect("time");
        let deletes = job_deletes(&events[1..]);
        let check = ttl_respected(
            &seen,
            &deletes,
            DeleteSource::AuditLog,
            soon,
            Duration::from_secs(5),
            &CronClock::wall(),
        );
        assert!(check.outcome.passed, "{:?}", check.outcome);
    }

    #[test]
    fn without_the_audit_log_the_watched_delete_counts() {
        let mut seen = ObjectsSeen::default();
        let early: Timestamp = "2026-11-26T10:00:05Z".parse().expect("time");
        let late: Timestamp = "2026-11-26T10:00:11Z".parse().expect("time");
        seen.apply_job(&finished_job("early", Some(10), 1, "2026-11-26T10:00:00Z"), early, true);
        seen.apply_job(&finished_job("ok", Some(10), 1, "2026-11-26T10:00:00Z"), late, true);
        let deletes = watched_deletes(&seen);
        let end: Timestamp = "2026-11-26T10:01:00Z".parse().expect("time");
        let check = ttl_respected(
            &seen,
            &deletes,
            DeleteSource::Watch,
            end,
            Duration::from_secs(5),
            &CronClock::wall(),
        );
        assert_eq!(check.outcome.violations.len(), 1, "{:?}", check.outcome);
        assert!(check.outcome.violations[0].starts_with("ns/early: deleted"), "{:?}", check.outcome);
        assert!(check.outcome.target.contains("as a watch saw them"), "{:?}", check.outcome);
        assert_eq!(check.lags, vec![1.0]);
    }

    #[test]
    fn a_status_other_than_upstreams_fails() {
        let mut seen = ObjectsSeen::default();
        seen.apply_job(&finished_job("j", None, 2, "2026-11-26T10:00:00Z"), Timestamp::now(), false);
        let want = |succeeded| ExpectedStatus {
            condition: "Complete".into(),
            succeeded: Some(succeeded),
            failed: Some(0),
            completed_indexes: None,
        };
        assert!(final_status_as_upstream(&seen, |_| Some(want(2))).passed);
        let outcome = final_status_as_upstream(&seen, |_| Some(want(3)));
        assert!(!outcome.passed);
        assert!(outcome.violations[0].contains("want Complete succeeded Some(3)"), "{outcome:?}");
    }
}
