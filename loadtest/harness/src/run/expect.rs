//! The status upstream's Job controller gives each Job of the workload, from its shape: how its
//! pods behave (the sim's annotations), its completions, mode and backoffLimit.

use batchfleet_audits::jobs::ExpectedStatus;
use batchfleet_audits::objects::JobRecord;

use crate::scenario::{CronJobSpec, JobSpec, PodBehaviour, WorkloadSpec};

/// What decides a Job's end.
#[derive(Debug, Clone)]
pub struct Shape {
    pub completions: i32,
    pub parallelism: i32,
    pub indexed: bool,
    pub backoff_limit: i32,
    pub pod: PodBehaviour,
}

/// Upstream's default `backoffLimit`.
const DEFAULT_BACKOFF_LIMIT: i32 = 6;

impl Shape {
    pub fn of_job(spec: &JobSpec) -> Self {
        let completions = spec.completions.unwrap_or(1);
        Self {
            completions,
            parallelism: spec.parallelism.unwrap_or(1),
            indexed: spec.indexed,
            backoff_limit: spec.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT),
            pod: spec.pod.clone(),
        }
    }

    pub fn of_cronjob(spec: &CronJobSpec) -> Self {
        Self {
            completions: 1,
            parallelism: 1,
            indexed: false,
            backoff_limit: DEFAULT_BACKOFF_LIMIT,
            pod: spec.pod.clone(),
        }
    }

    /// The end upstream gives it: pods failing `fail_attempts` times (per index when Indexed)
    /// then succeeding complete it when the failures stay within backoffLimit; past it, or
    /// when every pod fails, it fails, with counts fixed only when one pod runs at a time.
    pub fn expected(&self) -> ExpectedStatus {
        let failing = self.pod.exit_code.unwrap_or(0) != 0;
        let always_fails = failing && self.pod.fail_attempts.is_none();
        let failures_per_run = if failing { self.pod.fail_attempts.unwrap_or(0) } else { 0 };
        let failures = if self.indexed { failures_per_run * self.completions } else { failures_per_run };
        if !always_fails && failures <= self.backoff_limit {
            let completed_indexes = self.indexed.then(|| match self.completions {
                1 => "0".to_string(),
                n => format!("0-{}", n - 1),
            });
            return ExpectedStatus {
                condition: "Complete".into(),
                succeeded: Some(self.completions),
                failed: Some(failures),
                completed_indexes,
            };
        }
        let serial = self.parallelism.min(self.completions) <= 1;
        ExpectedStatus {
            condition: "Failed".into(),
            succeeded: if always_fails { Some(0) } else { None },
            failed: serial.then_some(self.backoff_limit + 1),
            completed_indexes: None,
        }
    }
}

/// The shape of a Job seen in the cluster: a CronJob's by its owner, a workload stream's by
/// its name `<stream>-<n>`; `None` for a Job the workload did not create.
pub fn shape_of(workload: &WorkloadSpec, job: &JobRecord) -> Option<Shape> {
    if let Some(cronjob) = &job.cronjob {
        return workload.cronjobs.iter().find(|c| c.name == *cronjob).map(Shape::of_cronjob);
    }
    let (stream, n) = job.name.rsplit_once('-')?;
    n.parse::<u64>().ok()?;
    workload.jobs.iter().find(|j| j.name == stream).map(Shape::of_job)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(
        completions: i32,
        parallelism: i32,
        indexed: bool,
        exit_code: Option<i32>,
        fail_attempts: Option<i32>,
    ) -> Shape {
        Shape {
            completions,
            parallelism,
            indexed,
            backoff_limit: 2,
            pod: PodBehaviour { exit_code, fail_attempts, ..PodBehaviour::default() },
        }
    }

    #[test]
    fn upstream_ends_by_shape() {
        let ok = shape(3, 3, false, None, None).expected();
        assert_eq!((ok.condition.as_str(), ok.succeeded, ok.failed), ("Complete", Some(3), Some(0)));
        let retried = shape(3, 1, false, Some(1), Some(2)).expected();
        assert_eq!(
            (retried.condition.as_str(), retried.succeeded, retried.failed),
            ("Complete", Some(3), Some(2))
        );
        let indexed = shape(4, 2, true, None, None).expected();
        assert_eq!(indexed.completed_indexes.as_deref(), Some("0-3"));
        // Two indexes failing twice each are 4 failures, over backoffLimit 2.
        let over = shape(2, 1, true, Some(1), Some(2)).expected();
        assert_eq!((over.condition.as_str(), over.failed), ("Failed", Some(3)));
        let always = shape(1, 1, false, Some(3), None).expected();
        assert_eq!(
            (always.condition.as_str(), always.succeeded, always.failed),
            ("Failed", Some(0), Some(3))
        );
        let racing = shape(4, 4, false, Some(3), None).expected();
        assert_eq!((racing.condition.as_str(), racing.failed), ("Failed", None));
    }
}
