//! upstream `cleanupFinishedJobs`/`removeOldestJobs` and the `byJobStartTime` order: which finished
//! Jobs go over the history limits. The deletes themselves (Background propagation, events, the
//! active-list update) are steps of the sync.

use std::cmp::Ordering;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};

use super::jobs::{FinishedType, JobView};

/// upstream `byJobStartTime.Less` as an order: by `status.startTime`, Jobs without one last, ties
/// (equal or both absent) by name.
fn by_start_time(a: (Option<Timestamp>, &str), b: (Option<Timestamp>, &str)) -> Ordering {
    match (a.0, b.0) {
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        _ => a.1.cmp(b.1),
    }
}

fn start_time(job: &Job) -> Option<Timestamp> {
    job.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0)
}

/// `sort.Sort(byJobStartTime(jobs))`.
pub fn sort_by_job_start_time(jobs: &mut [&Job]) {
    jobs.sort_by(|a, b| {
        by_start_time(
            (start_time(a), a.metadata.name.as_deref().unwrap_or_default()),
            (start_time(b), b.metadata.name.as_deref().unwrap_or_default()),
        )
    });
}

/// The Jobs `cleanupFinishedJobs` deletes, in the order it deletes them: the oldest successful
/// (`Complete=True`) Jobs over `successfulJobsHistoryLimit`, then the oldest failed ones over
/// `failedJobsHistoryLimit`. A limit that is not set keeps everything of its kind. A negative limit
/// (which validation rejects, and which makes upstream index out of range) deletes all.
pub fn finished_jobs_to_delete<'a>(cronjob: &CronJob, jobs: &[&'a Job]) -> Vec<&'a Job> {
    let views: Vec<JobView> = jobs.iter().map(|j| JobView::of(j)).collect();
    to_delete(cronjob, &views).into_iter().filter_map(|i| jobs.get(i).copied()).collect()
}

/// Indexes into `jobs` of the history deletions, in order.
pub(super) fn to_delete(cronjob: &CronJob, jobs: &[JobView]) -> Vec<usize> {
    let successful_limit = cronjob.spec.successful_jobs_history_limit;
    let failed_limit = cronjob.spec.failed_jobs_history_limit;
    if successful_limit.is_none() && failed_limit.is_none() {
        return Vec::new();
    }
    // upstream getFinishedStatus: the first Complete/Failed=True condition decides.
    let of_kind = |kind: FinishedType| -> Vec<usize> {
        (0..jobs.len()).filter(|&i| jobs[i].finished == Some(kind)).collect()
    };
    let mut out = Vec::new();
    for (kind, limit) in [(FinishedType::Complete, successful_limit), (FinishedType::Failed, failed_limit)] {
        let Some(limit) = limit else { continue };
        let mut idx = of_kind(kind);
        let excess = i64::try_from(idx.len()).unwrap_or(i64::MAX).saturating_sub(i64::from(limit));
        if excess <= 0 {
            continue;
        }
        idx.sort_by(|&a, &b| {
            by_start_time((jobs[a].start_time, &jobs[a].name), (jobs[b].start_time, &jobs[b].name))
        });
        let n = usize::try_from(excess).unwrap_or(usize::MAX).min(idx.len());
        out.extend_from_slice(&idx[..n]);
    }
    out
}
