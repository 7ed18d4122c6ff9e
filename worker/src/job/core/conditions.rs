//! Job conditions: types, reasons and messages exactly as upstream, and `ensureJobConditionStatus`.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub(super) const COMPLETE: &str = "Complete";
pub(super) const FAILED: &str = "Failed";
pub(super) const SUSPENDED: &str = "Suspended";
pub(super) const FAILURE_TARGET: &str = "FailureTarget";
pub(super) const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";

pub(super) const TRUE: &str = "True";
pub(super) const FALSE: &str = "False";

pub(super) const REASON_BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
pub(super) const MSG_BACKOFF_LIMIT_EXCEEDED: &str = "Job has reached the specified backoff limit";
pub(super) const REASON_DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
pub(super) const MSG_DEADLINE_EXCEEDED: &str = "Job was active longer than specified deadline";
pub(super) const REASON_POD_FAILURE_POLICY: &str = "PodFailurePolicy";
pub(super) const REASON_MAX_FAILED_INDEXES_EXCEEDED: &str = "MaxFailedIndexesExceeded";
pub(super) const MSG_MAX_FAILED_INDEXES_EXCEEDED: &str =
    "Job has exceeded the specified maximal number of failed indexes";
pub(super) const REASON_FAILED_INDEXES: &str = "FailedIndexes";
pub(super) const MSG_FAILED_INDEXES: &str = "Job has failed indexes";
pub(super) const REASON_SUCCESS_POLICY: &str = "SuccessPolicy";
pub(super) const REASON_COMPLETIONS_REACHED: &str = "CompletionsReached";
pub(super) const MSG_COMPLETIONS_REACHED: &str = "Reached expected number of succeeded pods";
pub(super) const REASON_JOB_SUSPENDED: &str = "JobSuspended";
pub(super) const MSG_JOB_SUSPENDED: &str = "Job suspended";
pub(super) const REASON_JOB_RESUMED: &str = "JobResumed";
pub(super) const MSG_JOB_RESUMED: &str = "Job resumed";

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// `newCondition`: both probe and transition time are `now`; empty reason/message are omitted.
pub(super) fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> JobCondition {
    JobCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: non_empty(reason),
        message: non_empty(message),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

pub(super) fn reason(c: &JobCondition) -> &str {
    c.reason.as_deref().unwrap_or("")
}

pub(super) fn message(c: &JobCondition) -> &str {
    c.message.as_deref().unwrap_or("")
}

/// `findConditionByType`: the first condition of that type.
pub(super) fn find<'a>(list: &'a [JobCondition], type_: &str) -> Option<&'a JobCondition> {
    list.iter().find(|c| c.type_ == type_)
}

/// The first condition of that type if its status is `True`.
pub(super) fn find_true<'a>(list: &'a [JobCondition], type_: &str) -> Option<&'a JobCondition> {
    find(list, type_).filter(|c| c.status == TRUE)
}

/// `util.IsJobFinished`: any `Complete` or `Failed` condition with status `True`.
pub fn is_job_finished(job: &Job) -> bool {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or(&[]);
    conditions.iter().any(|c| (c.type_ == COMPLETE || c.type_ == FAILED) && c.status == TRUE)
}

/// `ensureJobConditionStatus`: updates the first condition of the type if status, reason or message
/// differ; appends a new one only if the status is not `False`. Returns whether the list changed.
pub(super) fn ensure_status(
    list: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason_: &str,
    message_: &str,
    now: Timestamp,
) -> bool {
    if let Some(c) = list.iter_mut().find(|c| c.type_ == type_) {
        if c.status != status || reason(c) != reason_ || message(c) != message_ {
            *c = new_condition(type_, status, reason_, message_, now);
            return true;
        }
        return false;
    }
    if status != FALSE {
        list.push(new_condition(type_, status, reason_, message_, now));
        return true;
    }
    false
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // table rows are tuples, as upstream's are anonymous structs
mod tests {
    use super::*;

    fn cond(status: &str, reason: &str) -> JobCondition {
        new_condition(SUSPENDED, status, reason, "", Timestamp::UNIX_EPOCH)
    }

    /// TestEnsureJobConditions, every row.
    #[test]
    fn ensure_status_matches_test_ensure_job_conditions() {
        let now = Timestamp::UNIX_EPOCH;
        let cases: Vec<(&str, Vec<JobCondition>, &str, &str, Vec<JobCondition>, bool)> = vec![
            ("append true condition", vec![], TRUE, "foo", vec![cond(TRUE, "foo")], true),
            ("append false condition", vec![], FALSE, "foo", vec![], false),
            (
                "update true condition reason",
                vec![cond(TRUE, "foo")],
                TRUE,
                "bar",
                vec![cond(TRUE, "bar")],
                true,
            ),
            (
                "update true condition status",
                vec![cond(TRUE, "foo")],
                FALSE,
                "foo",
                vec![cond(FALSE, "foo")],
                true,
            ),
            (
                "update false condition status",
                vec![cond(FALSE, "foo")],
                TRUE,
                "foo",
                vec![cond(TRUE, "foo")],
                true,
            ),
            (
                "condition already exists",
                vec![cond(TRUE, "foo")],
                TRUE,
                "foo",
                vec![cond(TRUE, "foo")],
                false,
            ),
        ];
        for (name, mut have, status, reason_, want, want_update) in cases {
            let updated = ensure_status(&mut have, SUSPENDED, status, reason_, "", now);
            assert_eq!(updated, want_update, "{name}");
            assert_eq!(have, want, "{name}");
        }
    }

    #[test]
    fn finished_means_complete_or_failed_true() {
        let mut job = Job::default();
        assert!(!is_job_finished(&job));
        job.status = Some(Default::default());
        let st = job.status.as_mut().unwrap();
        st.conditions = Some(vec![new_condition(FAILURE_TARGET, TRUE, "", "", Timestamp::UNIX_EPOCH)]);
        assert!(!is_job_finished(&job));
        let st = job.status.as_mut().unwrap();
        st.conditions.as_mut().unwrap().push(new_condition(FAILED, FALSE, "", "", Timestamp::UNIX_EPOCH));
        assert!(!is_job_finished(&job));
        let st = job.status.as_mut().unwrap();
        st.conditions.as_mut().unwrap().push(new_condition(COMPLETE, TRUE, "", "", Timestamp::UNIX_EPOCH));
        assert!(is_job_finished(&job));
    }
}
