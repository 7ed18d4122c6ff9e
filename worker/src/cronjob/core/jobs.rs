//! The Jobs a CronJob controls, as the cache shows them: upstream `getJobsToBeReconciled`, the
//! finished-condition helpers of `pkg/controller/job/util`, and the compact view a sync keeps.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// A finished Job's terminal condition type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishedType {
    Complete,
    Failed,
}

impl FinishedType {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishedType::Complete => "Complete",
            FinishedType::Failed => "Failed",
        }
    }
}

/// upstream `jobutil.FinishedCondition`: the type of the first `Complete` or `Failed` condition
/// whose status is `True`.
pub fn finished_condition(job: &Job) -> Option<FinishedType> {
    conditions(job).find_map(|c| match (c.type_.as_str(), c.status.as_str()) {
        ("Complete", "True") => Some(FinishedType::Complete),
        ("Failed", "True") => Some(FinishedType::Failed),
        _ => None,
    })
}

/// upstream `jobutil.IsJobSucceeded`: any `Complete=True` condition.
pub fn is_job_succeeded(job: &Job) -> bool {
    conditions(job).any(|c| c.type_ == "Complete" && c.status == "True")
}

fn conditions(job: &Job) -> impl Iterator<Item = &k8s_openapi::api::batch::v1::JobCondition> {
    job.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default().iter()
}

/// upstream `metav1.GetControllerOf`: the first owner reference with `controller: true`.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.as_deref().unwrap_or_default().iter().find(|r| r.controller == Some(true))
}

/// upstream `metav1.IsControlledBy(job, cronJob)`: the controller reference's UID is the CronJob's.
pub fn is_controlled_by(job: &Job, cronjob: &CronJob) -> bool {
    controller_of(&job.metadata)
        .is_some_and(|r| r.uid.as_str() == cronjob.metadata.uid.as_deref().unwrap_or_default())
}

/// upstream `getJobsToBeReconciled`: the Jobs in the CronJob's namespace whose controller reference
/// names the CronJob. Only the *name* is compared (not kind or UID), as upstream does, so Jobs
/// whose labels no longer match the template are still reconciled. Order is kept.
pub fn jobs_to_be_reconciled<'a>(cronjob: &CronJob, jobs: impl IntoIterator<Item = &'a Job>) -> Vec<&'a Job> {
    let namespace = cronjob.metadata.namespace.as_deref().unwrap_or_default();
    let name = cronjob.metadata.name.as_deref().unwrap_or_default();
    jobs.into_iter()
        .filter(|j| j.metadata.namespace.as_deref().unwrap_or_default() == namespace)
        .filter(|j| controller_of(&j.metadata).is_some_and(|r| r.name == name))
        .collect()
}

/// What a sync needs of one controlled Job.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct JobView {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub finished: Option<FinishedType>,
    pub succeeded: bool,
    pub completion_time: Option<Timestamp>,
    pub start_time: Option<Timestamp>,
}

impl JobView {
    pub fn of(job: &Job) -> Self {
        let status = job.status.as_ref();
        Self {
            namespace: job.metadata.namespace.clone().unwrap_or_default(),
            name: job.metadata.name.clone().unwrap_or_default(),
            uid: job.metadata.uid.clone().unwrap_or_default(),
            finished: finished_condition(job),
            succeeded: is_job_succeeded(job),
            completion_time: status.and_then(|s| s.completion_time.as_ref()).map(|t| t.0),
            start_time: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
        }
    }
}

/// The CronJob a Job event should wake up (upstream `addJob`/`updateJob`/`deleteJob` before
/// `resolveControllerRef`): the controller reference, if its kind is `CronJob`. The shell enqueues
/// the CronJob only if its cache has one with this name in the Job's namespace and this UID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerKey {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

fn controller_key(job: &Job) -> Option<ControllerKey> {
    let r = controller_of(&job.metadata)?;
    (r.kind == "CronJob").then(|| ControllerKey {
        namespace: job.metadata.namespace.clone().unwrap_or_default(),
        name: r.name.clone(),
        uid: r.uid.clone(),
    })
}

/// A Job was added or deleted (a Job added with a deletionTimestamp is handled as deleted, which
/// wakes the same CronJob).
pub fn cronjob_for_job_event(job: &Job) -> Option<ControllerKey> {
    controller_key(job)
}

/// A Job was updated: nothing if the resourceVersion did not change (a resync); else the old
/// controller if the controller reference changed, then the current one.
pub fn cronjobs_for_job_update(old: &Job, cur: &Job) -> Vec<ControllerKey> {
    if old.metadata.resource_version == cur.metadata.resource_version {
        return Vec::new();
    }
    let mut keys = Vec::new();
    let (old_ref, cur_ref) = (controller_of(&old.metadata), controller_of(&cur.metadata));
    if old_ref != cur_ref
        && let Some(k) = controller_key(old)
    {
        keys.push(k);
    }
    if let Some(k) = controller_key(cur) {
        keys.push(k);
    }
    keys
}
