//! The sweeper's one decision, pure: whether a pod holding `batch.kubernetes.io/job-tracking`
//! should lose it now, should be looked at again later, or is none of the sweeper's business.
//!
//! The sweeper is a safety net under the Job controller, never a second Job controller: it
//! releases a pod only when no Job controller will, i.e. its Job is gone (or it has no
//! controller at all), or its Job finished and no longer lists the pod as uncounted; and only
//! after a grace, so that the Job controller's own removal (its sync, its orphan queue) always
//! goes first.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use crate::job::core::{JOB_CONTROLLER_NAME, has_tracking_finalizer, is_job_finished};

/// Why a pod's finalizer goes: the label of the releases counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReleaseReason {
    /// Its controlling Job is not in the shard's synced cache, and was not deleted lately.
    JobGone,
    /// It has no controller reference (a Job deleted with `propagationPolicy: Orphan` leaves
    /// its pods so).
    NoController,
    /// Its Job finished and does not list the pod in `uncountedTerminatedPods`.
    JobFinished,
}

impl ReleaseReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::JobGone => "job_gone",
            Self::NoController => "no_controller",
            Self::JobFinished => "job_finished",
        }
    }
}

/// What the sweeper does with one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not the sweeper's: no tracking finalizer, another controller's pod, or a Job the Job
    /// controller is still working on.
    Leave,
    /// Likely to need a release, but the Job controller may still act: look again after this.
    Wait(Duration),
    /// Remove the finalizer.
    Release(ReleaseReason),
}

/// What the shell knows of the Job a pod's controller reference names.
#[derive(Debug, Clone, Copy)]
pub enum JobSeen<'a> {
    /// In the cache under the reference's uid.
    Cached(&'a Job),
    /// Not in the cache; the cache's watch reported a Job of that uid deleted this long ago
    /// (`None`: not lately, or never seen).
    Missing { deleted_ago: Option<Duration> },
}

/// The sweeper's settings that the decision reads.
#[derive(Debug, Clone)]
pub struct Rules {
    /// How long a pod, a deletion or a finished Job is left to the Job controller first.
    pub grace: Duration,
    /// The `spec.managedBy` value whose Jobs this worker reconciles.
    pub managed_by: String,
}

impl Default for Rules {
    fn default() -> Self {
        Self { grace: Duration::from_secs(30), managed_by: JOB_CONTROLLER_NAME.to_string() }
    }
}

/// How long ago `t` was at `now`; a time in the future counts as just now.
fn since(t: Option<Timestamp>, now: Timestamp) -> Option<Duration> {
    t.map(|t| Duration::try_from(now.duration_since(t)).unwrap_or(Duration::ZERO))
}

/// The time of a finished Job's `Complete` or `Failed` condition (`completionTime` besides).
fn finished_at(job: &Job) -> Option<Timestamp> {
    let status = job.status.as_ref()?;
    let from_condition = status
        .conditions
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .filter(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
        .max();
    from_condition.or_else(|| status.completion_time.as_ref().map(|t| t.0))
}

fn uncounted(job: &Job, pod_uid: &str) -> bool {
    let Some(u) = job.status.as_ref().and_then(|s| s.uncounted_terminated_pods.as_ref()) else {
        return false;
    };
    u.succeeded.iter().chain(u.failed.iter()).flatten().any(|uid| uid == pod_uid)
}

/// What wait is left of `grace` after `elapsed` (`None`: the grace is over).
fn left(grace: Duration, elapsed: Option<Duration>) -> Option<Duration> {
    let elapsed = elapsed.unwrap_or(grace);
    (elapsed < grace).then(|| grace - elapsed)
}

/// Whether `pod` loses its tracking finalizer now. `job` is what the shard's synced cache says
/// of the Job its controller reference names (unused when it names none or not a batch/v1 Job).
pub fn decide(pod: &Pod, job: JobSeen<'_>, rules: &Rules, now: Timestamp) -> Verdict {
    if !has_tracking_finalizer(pod) {
        return Verdict::Leave;
    }
    let pod_age = since(pod.metadata.creation_timestamp.as_ref().map(|t| t.0), now);
    let owners = pod.metadata.owner_references.as_deref().unwrap_or(&[]);
    let Some(controller) = owners.iter().find(|o| o.controller == Some(true)) else {
        // upstream's syncOrphanPod releases such a pod at once; the grace leaves it to that.
        return match left(rules.grace, pod_age) {
            Some(wait) => Verdict::Wait(wait),
            None => Verdict::Release(ReleaseReason::NoController),
        };
    };
    if controller.kind != "Job" || controller.api_version != "batch/v1" {
        return Verdict::Leave;
    }
    match job {
        JobSeen::Cached(job) if job.metadata.uid.as_deref() == Some(controller.uid.as_str()) => {
            let managed_by =
                job.spec.as_ref().and_then(|s| s.managed_by.as_deref()).unwrap_or(JOB_CONTROLLER_NAME);
            if managed_by != rules.managed_by || !is_job_finished(job) {
                return Verdict::Leave;
            }
            if uncounted(job, pod.metadata.uid.as_deref().unwrap_or_default()) {
                // The Job controller counts it, then removes the finalizer itself.
                return Verdict::Wait(rules.grace);
            }
            match left(rules.grace, since(finished_at(job), now)) {
                Some(wait) => Verdict::Wait(wait),
                None => Verdict::Release(ReleaseReason::JobFinished),
            }
        }
        // A cached Job of another uid is another Job under the same name: this one is gone.
        JobSeen::Cached(_) => release_if_past(rules.grace, pod_age, None),
        JobSeen::Missing { deleted_ago } => release_if_past(rules.grace, pod_age, deleted_ago),
    }
}

/// A Job that is gone: released once the pod is older than the grace (its Job may not have
/// reached the cache yet) and the deletion, if the watch reported it lately, is too (the Job
/// controller's orphan queue acts on it first).
fn release_if_past(grace: Duration, pod_age: Option<Duration>, deleted_ago: Option<Duration>) -> Verdict {
    let wait =
        [left(grace, pod_age), deleted_ago.and_then(|d| left(grace, Some(d)))].into_iter().flatten().max();
    match wait {
        Some(wait) => Verdict::Wait(wait),
        None => Verdict::Release(ReleaseReason::JobGone),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::core::JOB_TRACKING_FINALIZER;
    use serde_json::{Value, json};

    const NOW: &str = "2026-11-28T12:00:00Z";
    const GRACE: Duration = Duration::from_secs(30);

    fn now() -> Timestamp {
        NOW.parse().expect("time")
    }

    fn ago(secs: i64) -> String {
        now().checked_sub(jiff::SignedDuration::from_secs(secs)).expect("time").to_string()
    }

    fn pod(owner: Option<Value>, created_ago: i64, finalizer: bool) -> Pod {
        let finalizers: Vec<&str> = if finalizer { vec![JOB_TRACKING_FINALIZER] } else { vec![] };
        serde_json::from_value(json!({"metadata": {
            "name": "p", "namespace": "ns", "uid": "pod-uid", "creationTimestamp": ago(created_ago),
            "finalizers": finalizers, "ownerReferences": owner.map(|o| vec![o]),
        }}))
        .expect("a pod")
    }

    fn job_ref(kind: &str, api_version: &str, controller: bool) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "name": "j", "uid": "job-uid", "controller": controller})
    }

    fn controlled() -> Option<Value> {
        Some(job_ref("Job", "batch/v1", true))
    }

    fn job(uid: &str, finished_ago: Option<i64>, uncounted: &[&str], managed_by: Option<&str>) -> Job {
        let conditions = finished_ago
            .map(|a| vec![json!({"type": "Complete", "status": "True", "lastTransitionTime": ago(a)})]);
        serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": uid},
            "spec": {"template": {}, "managedBy": managed_by},
            "status": {"conditions": conditions, "uncountedTerminatedPods": {"succeeded": uncounted}},
        }))
        .expect("a job")
    }

    fn gone(deleted_ago: Option<u64>) -> JobSeen<'static> {
        JobSeen::Missing { deleted_ago: deleted_ago.map(Duration::from_secs) }
    }

    /// Each row names the upstream report whose leak it releases, or the Job controller's work
    /// it must not race.
    #[test]
    fn which_pods_lose_the_tracking_finalizer() {
        let rules = Rules { grace: GRACE, ..Rules::default() };
        let running = job("job-uid", None, &[], None);
        let finished_long_ago = job("job-uid", Some(600), &[], None);
        let finished_just_now = job("job-uid", Some(5), &[], None);
        let finished_uncounted = job("job-uid", Some(600), &["pod-uid"], None);
        let other_manager = job("job-uid", Some(600), &[], Some("example.com/mk"));
        let same_name_new_uid = job("other-uid", None, &[], None);
        let cases: Vec<(&str, Pod, JobSeen, Verdict)> = vec![
            // k/k#108645, #109429: the Job was deleted and the event that would have queued
            // its pods was missed (or the removal failed once, #141329): the pod keeps the
            // finalizer for ever upstream.
            (
                "k/k#108645: Job gone long ago",
                pod(controlled(), 600, true),
                gone(None),
                Verdict::Release(ReleaseReason::JobGone),
            ),
            (
                "k/k#141329: Job gone, its deletion seen over the grace ago",
                pod(controlled(), 600, true),
                gone(Some(45)),
                Verdict::Release(ReleaseReason::JobGone),
            ),
            (
                "Job deleted just now: the Job controller's orphan queue goes first",
                pod(controlled(), 600, true),
                gone(Some(10)),
                Verdict::Wait(Duration::from_secs(20)),
            ),
            (
                "pod just created, its Job not cached yet: never race the Job's watch",
                pod(controlled(), 3, true),
                gone(None),
                Verdict::Wait(Duration::from_secs(27)),
            ),
            (
                "a Job recreated under the same name is another Job (k/k#108752)",
                pod(controlled(), 600, true),
                JobSeen::Cached(&same_name_new_uid),
                Verdict::Release(ReleaseReason::JobGone),
            ),
            // kubectl delete job --cascade=orphan: the garbage collector strips the owner
            // reference; upstream's syncOrphanPod releases it if its one attempt succeeds.
            (
                "k/k#108752: no controller (orphaned by the garbage collector)",
                pod(None, 600, true),
                gone(None),
                Verdict::Release(ReleaseReason::NoController),
            ),
            (
                "no controller, just created",
                pod(None, 10, true),
                gone(None),
                Verdict::Wait(Duration::from_secs(20)),
            ),
            // k/k#109429: a finished Job with pods that still hold the finalizer (an extra pod
            // the Job never counted).
            (
                "k/k#109429: Job finished, pod counted",
                pod(controlled(), 600, true),
                JobSeen::Cached(&finished_long_ago),
                Verdict::Release(ReleaseReason::JobFinished),
            ),
            (
                "Job finished just now: its last sync may still be removing it",
                pod(controlled(), 600, true),
                JobSeen::Cached(&finished_just_now),
                Verdict::Wait(Duration::from_secs(25)),
            ),
            (
                "Job finished, pod still uncounted: the Job controller counts it first",
                pod(controlled(), 600, true),
                JobSeen::Cached(&finished_uncounted),
                Verdict::Wait(GRACE),
            ),
            (
                "Job running: the Job controller's pod",
                pod(controlled(), 600, true),
                JobSeen::Cached(&running),
                Verdict::Leave,
            ),
            (
                "Job managed by another controller: not ours",
                pod(controlled(), 600, true),
                JobSeen::Cached(&other_manager),
                Verdict::Leave,
            ),
            (
                "controlled by a CronJob: not a Job's pod",
                pod(Some(job_ref("CronJob", "batch/v1", true)), 600, true),
                gone(None),
                Verdict::Leave,
            ),
            (
                "controlled by a custom Job kind",
                pod(Some(job_ref("Job", "example.com/v1", true)), 600, true),
                gone(None),
                Verdict::Leave,
            ),
            (
                "owned, not controlled, by a Job: no controller",
                pod(Some(job_ref("Job", "batch/v1", false)), 600, true),
                gone(None),
                Verdict::Release(ReleaseReason::NoController),
            ),
            ("no tracking finalizer", pod(controlled(), 600, false), gone(None), Verdict::Leave),
        ];
        for (name, pod, job, want) in cases {
            assert_eq!(decide(&pod, job, &rules, now()), want, "{name}");
        }
    }

    #[test]
    fn a_finished_job_without_condition_times_falls_back_to_its_completion_time() {
        let rules = Rules { grace: GRACE, ..Rules::default() };
        let mut j = job("job-uid", Some(600), &[], None);
        let status = j.status.as_mut().expect("status");
        status.conditions.as_mut().expect("conditions")[0].last_transition_time = None;
        status.completion_time =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ago(10).parse().expect("time")));
        assert_eq!(
            decide(&pod(controlled(), 600, true), JobSeen::Cached(&j), &rules, now()),
            Verdict::Wait(Duration::from_secs(20))
        );
    }
}
