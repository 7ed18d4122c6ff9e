//! `status.active`, as upstream's `inActiveList`, `inActiveListByName`, `deleteFromActiveList`
//! and `getRef` treat it. The reconcile of the active list against the Jobs (UnexpectedJob,
//! SawCompletedJob, lastSuccessfulTime, MissingJob) is driven from `sync.rs` with these.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `status.active`, empty when absent.
pub fn active_refs(cronjob: &CronJob) -> &[ObjectReference] {
    cronjob.status.as_ref().and_then(|s| s.active.as_deref()).unwrap_or_default()
}

/// upstream `inActiveList`: a reference with this UID (an absent UID is `""`, as in Go).
pub fn in_active_list(cronjob: &CronJob, uid: &str) -> bool {
    active_refs(cronjob).iter().any(|r| r.uid.as_deref().unwrap_or_default() == uid)
}

/// upstream `inActiveListByName`: a reference with this name and namespace.
pub fn in_active_list_by_name(cronjob: &CronJob, namespace: &str, name: &str) -> bool {
    active_refs(cronjob).iter().any(|r| {
        r.name.as_deref().unwrap_or_default() == name
            && r.namespace.as_deref().unwrap_or_default() == namespace
    })
}

/// upstream `deleteFromActiveList`: drop every reference with this UID (an empty list is stored as
/// absent; the API serializes both the same way).
pub fn delete_from_active_list(cronjob: &mut CronJob, uid: &str) {
    let Some(status) = cronjob.status.as_mut() else { return };
    if let Some(active) = status.active.as_mut() {
        active.retain(|r| r.uid.as_deref().unwrap_or_default() != uid);
        if active.is_empty() {
            status.active = None;
        }
    }
}

/// Append to `status.active`.
pub(super) fn push_active(cronjob: &mut CronJob, r: ObjectReference) {
    cronjob.status.get_or_insert_with(Default::default).active.get_or_insert_with(Vec::new).push(r);
}

/// `status.lastScheduleTime = t`.
pub(super) fn set_last_schedule_time(cronjob: &mut CronJob, t: Timestamp) {
    cronjob.status.get_or_insert_with(Default::default).last_schedule_time = Some(Time(t));
}

/// upstream `getRef(job)` (`reference.GetReference`): kind `Job`, apiVersion `batch/v1`, and the
/// Job's name, namespace, UID and resourceVersion (empty ones omitted, as Go's `omitempty`).
pub fn job_ref(job: &Job) -> ObjectReference {
    let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    ObjectReference {
        api_version: Some("batch/v1".to_string()),
        kind: Some("Job".to_string()),
        name: non_empty(&job.metadata.name),
        namespace: non_empty(&job.metadata.namespace),
        uid: non_empty(&job.metadata.uid),
        resource_version: non_empty(&job.metadata.resource_version),
        field_path: None,
    }
}

/// The Job's `lastSuccessfulTime` fold (upstream syncCronJob, for a succeeded Job): unset → the
/// Job's completionTime (even if that is unset too); later completionTime → that. Returns whether
/// upstream marks the status for update.
pub(super) fn fold_last_successful_time(cronjob: &mut CronJob, completion: Option<Timestamp>) -> bool {
    let status = cronjob.status.get_or_insert_with(Default::default);
    let mut update = false;
    if status.last_successful_time.is_none() {
        status.last_successful_time = completion.map(Time);
        update = true;
    }
    if let (Some(c), Some(last)) = (completion, status.last_successful_time.as_ref())
        && c > last.0
    {
        status.last_successful_time = Some(Time(c));
        update = true;
    }
    update
}
