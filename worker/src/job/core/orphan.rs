//! Pure helpers for the informer side of the controller: orphan finalizer cleanup (`syncOrphanPod`),
//! the requeue rules of Job updates, and the metrics recorded from watch events.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use super::JOB_CONTROLLER_NAME;
use super::conditions::is_job_finished;
use super::config::Config;
use super::has_tracking_finalizer;
use super::plan::Metric;
use super::view::{Phase, phase_of};

fn managed_by(job: &Job) -> &str {
    job.spec.as_ref().and_then(|s| s.managed_by.as_deref()).unwrap_or(JOB_CONTROLLER_NAME)
}

/// `syncOrphanPod`: whether to patch the tracking finalizer away from `pod`. `owner_job` is the Job
/// the shell found under the name of the pod's controller reference (if any); its UID is checked here.
/// No if the pod has no finalizer, is controlled by something that is not a batch/v1 Job, or its Job
/// exists, is managed by another controller than `config.managed_by`, or has not finished.
pub fn orphan_needs_finalizer_removal(pod: &Pod, owner_job: Option<&Job>, config: &Config) -> bool {
    if !has_tracking_finalizer(pod) {
        return false;
    }
    let owners = pod.metadata.owner_references.as_deref().unwrap_or(&[]);
    let Some(controller) = owners.iter().find(|o| o.controller == Some(true)) else { return true };
    if controller.kind != "Job" || controller.api_version != "batch/v1" {
        return false;
    }
    let job = owner_job.filter(|j| {
        j.metadata.name.as_deref() == Some(controller.name.as_str())
            && j.metadata.uid.as_deref() == Some(controller.uid.as_str())
    });
    match job {
        Some(job) if managed_by(job) != config.managed_by => false,
        Some(job) => is_job_finished(job),
        None => true,
    }
}

/// What a Job update event asks of the work queue (`updateJob`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobUpdateEnqueue {
    /// Spec changed (generation bumped): sync at once; otherwise after `syncJobBatchPeriod`.
    pub delay: Duration,
    /// The active deadline was set or changed: also sync when it expires (0 if already past).
    pub deadline_after: Option<Duration>,
    /// The Job is finished: check its pods for leftover tracking finalizers (`cleanupPodFinalizers`).
    pub cleanup_pod_finalizers: bool,
}

pub fn job_update_enqueue(old: &Job, new: &Job, now: Timestamp, config: &Config) -> JobUpdateEnqueue {
    let delay = if old.metadata.generation == new.metadata.generation {
        config.sync_job_batch_period
    } else {
        Duration::ZERO
    };
    let ads = |j: &Job| j.spec.as_ref().and_then(|s| s.active_deadline_seconds);
    let start = new.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0);
    let deadline_after = match (start, ads(new)) {
        (Some(start), Some(cur)) if ads(old) != Some(cur) => {
            let left = SignedDuration::from_secs(cur).saturating_sub(now.duration_since(start));
            Some(Duration::try_from(left).unwrap_or(Duration::ZERO))
        }
        _ => None,
    };
    JobUpdateEnqueue { delay, deadline_after, cleanup_pod_finalizers: is_job_finished(new) }
}

/// `recordFinishedPodWithTrackingFinalizer` for a watch event (`None`: no old / no new object).
pub fn tracking_finalizer_metric(old: Option<&Pod>, new: Option<&Pod>) -> Option<Metric> {
    let finished_with_finalizer = |p: Option<&Pod>| {
        p.is_some_and(|p| {
            matches!(phase_of(p), Phase::Succeeded | Phase::Failed) && has_tracking_finalizer(p)
        })
    };
    let (was, is) = (finished_with_finalizer(old), finished_with_finalizer(new));
    (was != is)
        .then_some(Metric::TerminatedPodsTrackingFinalizer { event: if is { "add" } else { "delete" } })
}

/// `jobs_by_external_controller_total` on Job add: the Job is managed by another controller.
pub fn job_added_metric(job: &Job, config: &Config) -> Option<Metric> {
    let name = job.spec.as_ref().and_then(|s| s.managed_by.as_deref())?;
    (name != config.managed_by)
        .then(|| Metric::JobsByExternalController { controller_name: name.to_string() })
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // table rows are tuples, as upstream's are anonymous structs
mod tests {
    use super::*;
    use crate::job::core::testutil::{mk_job, mk_pod, ts};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn owner(api_version: &str, kind: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: "j".into(),
            uid: "111".into(),
            controller: controller.then_some(true),
            block_owner_deletion: controller.then_some(true),
        }
    }

    /// TestSyncOrphanPod, every row, plus TestWatchOrphanPods and the managedBy rule of syncOrphanPod.
    #[test]
    fn orphan_finalizer_removal_matches_test_sync_orphan_pod() {
        let cfg = Config::default();
        let running = mk_job("j", 2, 2, 6).uid("111").build();
        let finished = mk_job("j", 2, 2, 6).uid("111").condition("Complete", "True").build();
        let external = mk_job("j", 2, 2, 6).uid("111").managed_by("example.com/other").build();
        let pod = |o: Option<OwnerReference>| {
            let mut b = mk_pod("p").finalizer().deleted_at(ts("2024-01-01T00:00:00Z"), None);
            if let Some(o) = o {
                b = b.owner(o);
            }
            b.build()
        };
        let cases: Vec<(&str, Pod, Option<&Job>, bool)> = vec![
            (
                "controlled_by_existing_running_job",
                pod(Some(owner("batch/v1", "Job", true))),
                Some(&running),
                false,
            ),
            (
                "controlled_by_existing_finished_job",
                pod(Some(owner("batch/v1", "Job", true))),
                Some(&finished),
                true,
            ),
            ("controlled_by_non_existing_job", pod(Some(owner("batch/v1", "Job", true))), None, true),
            ("controlled_by_cronjob", pod(Some(owner("batch/v1", "CronJob", true))), None, false),
            ("not_controlled", pod(None), None, true),
            ("controlled_by_custom_crd", pod(Some(owner("example/v1", "Job", true))), None, false),
            (
                "owned_by_existing_running_job",
                pod(Some(owner("batch/v1", "Job", false))),
                Some(&running),
                true,
            ),
            ("owned_by_custom_crd", pod(Some(owner("example/v1", "Job", false))), None, true),
            (
                "controlled by a Job managed externally",
                pod(Some(owner("batch/v1", "Job", true))),
                Some(&external),
                false,
            ),
            ("no finalizer", mk_pod("p").build(), None, false),
        ];
        for (name, pod, job, want) in cases {
            assert_eq!(orphan_needs_finalizer_removal(&pod, job, &cfg), want, "{name}");
        }
        // A Job with the same name but another UID is a different Job: the pod is an orphan.
        let other_uid = mk_job("j", 2, 2, 6).uid("222").build();
        assert!(orphan_needs_finalizer_removal(
            &pod(Some(owner("batch/v1", "Job", true))),
            Some(&other_uid),
            &cfg
        ));
    }

    /// TestUpdateJobRequeue ("spec update" immediate, "status update" batched) and updateJob's
    /// activeDeadlineSeconds requeue.
    #[test]
    fn job_update_enqueue_matches_update_job() {
        let cfg = Config::default();
        let now = ts("2024-01-01T00:00:10Z");
        let old = mk_job("j", 1, 1, 1).indexed().build();
        let mut spec_update = old.clone();
        spec_update.metadata.generation = Some(2);
        assert_eq!(job_update_enqueue(&old, &spec_update, now, &cfg).delay, Duration::ZERO);
        let mut status_update = old.clone();
        status_update.status.get_or_insert_with(Default::default).start_time =
            Some(ts("2024-01-01T00:00:00Z").into());
        let e = job_update_enqueue(&old, &status_update, now, &cfg);
        assert_eq!(
            (e.delay, e.deadline_after, e.cleanup_pod_finalizers),
            (Duration::from_secs(1), None, false)
        );
        let mut with_deadline = status_update.clone();
        with_deadline.spec.as_mut().unwrap().active_deadline_seconds = Some(30);
        assert_eq!(
            job_update_enqueue(&status_update, &with_deadline, now, &cfg).deadline_after,
            Some(Duration::from_secs(20))
        );
    }

    #[test]
    fn watch_event_metrics() {
        let done = mk_pod("p").phase("Succeeded").finalizer().build();
        let running = mk_pod("p").phase("Running").finalizer().build();
        let stripped = mk_pod("p").phase("Succeeded").build();
        assert_eq!(
            tracking_finalizer_metric(None, Some(&done)),
            Some(Metric::TerminatedPodsTrackingFinalizer { event: "add" })
        );
        assert_eq!(
            tracking_finalizer_metric(Some(&running), Some(&done)),
            Some(Metric::TerminatedPodsTrackingFinalizer { event: "add" })
        );
        assert_eq!(
            tracking_finalizer_metric(Some(&done), Some(&stripped)),
            Some(Metric::TerminatedPodsTrackingFinalizer { event: "delete" })
        );
        assert_eq!(
            tracking_finalizer_metric(Some(&done), None),
            Some(Metric::TerminatedPodsTrackingFinalizer { event: "delete" })
        );
        assert_eq!(tracking_finalizer_metric(Some(&running), None), None);
        let cfg = Config::default();
        let external = mk_job("j", 1, 1, 1).managed_by("example.com/x").build();
        assert_eq!(
            job_added_metric(&external, &cfg),
            Some(Metric::JobsByExternalController { controller_name: "example.com/x".into() })
        );
        assert_eq!(job_added_metric(&mk_job("j", 1, 1, 1).build(), &cfg), None);
    }
}
