//! Job /status updates: `ValidateJobUpdateStatus` (pkg/apis/batch/validation) with the
//! `JobStatusValidationOptions` that `getStatusValidationOptions` (pkg/registry/batch/job/
//! strategy.go) builds when JobManagedBy is enabled, as it is (GA) in 1.37. Most rules only
//! fire when the fields they look at change, so a bad status a controller left earlier does not
//! block unrelated updates.

use serde_json::Value;

use super::common::*;
use super::job::{is_condition_true, parse_index_interval, validate_indexes_format};
use crate::field_error::FieldError;

/// The options upstream derives from the old and new Job.
#[derive(Debug, Default, Clone, Copy)]
struct Opts {
    reject_decreasing_succeeded_counter: bool,
    reject_decreasing_failed_counter: bool,
    reject_disabling_terminal_condition: bool,
    reject_invalid_completed_indexes: bool,
    reject_invalid_failed_indexes: bool,
    reject_failed_indexes_overlapping_completed: bool,
    reject_completed_indexes_for_non_indexed_job: bool,
    reject_failed_indexes_for_no_backoff_limit_per_index: bool,
    reject_failed_job_without_failure_target: bool,
    reject_complete_job_without_success_criteria_met: bool,
    reject_finished_job_with_active_pods: bool,
    reject_finished_job_without_start_time: bool,
    reject_finished_job_with_uncounted_terminated_pods: bool,
    reject_start_time_update_for_unsuspended_job: bool,
    reject_completion_time_before_start_time: bool,
    reject_mutating_completion_time: bool,
    reject_complete_job_without_completion_time: bool,
    reject_not_complete_job_with_completion_time: bool,
    reject_complete_job_with_failed_condition: bool,
    reject_complete_job_with_failure_target_condition: bool,
    reject_more_ready_than_active_pods: bool,
    reject_finished_job_with_terminating_pods: bool,
}

fn complete(j: &Value) -> bool {
    is_condition_true(j, "Complete")
}
fn failed(j: &Value) -> bool {
    is_condition_true(j, "Failed")
}
fn failure_target(j: &Value) -> bool {
    is_condition_true(j, "FailureTarget")
}
fn success_criteria_met(j: &Value) -> bool {
    is_condition_true(j, "SuccessCriteriaMet")
}
fn finished(j: &Value) -> bool {
    complete(j) || failed(j)
}

fn status_options(new: &Value, old: &Value) -> Opts {
    let st = |j: &Value, k: &str| at(j, &["status", k]).cloned();
    let changed = |k: &str| !semantic_eq(at(new, &["status", k]), at(old, &["status", k]));
    let indexed = at_str(new, &["spec", "completionMode"]) == Some("Indexed");
    let finished_changed = finished(old) != finished(new);
    let complete_changed = complete(old) != complete(new);
    let failed_changed = failed(old) != failed(new);
    let failure_target_changed = failure_target(old) != failure_target(new);
    let scm_changed = success_criteria_met(old) != success_criteria_met(new);
    let completed_indexes_changed = at_str(old, &["status", "completedIndexes"]).unwrap_or("")
        != at_str(new, &["status", "completedIndexes"]).unwrap_or("");
    let failed_indexes_changed = st(old, "failedIndexes") != st(new, "failedIndexes");
    let active_changed =
        at_i64(old, &["status", "active"]).unwrap_or(0) != at_i64(new, &["status", "active"]).unwrap_or(0);
    let start_changed = !same_time(at(old, &["status", "startTime"]), at(new, &["status", "startTime"]));
    let completion_changed =
        !same_time(at(old, &["status", "completionTime"]), at(new, &["status", "completionTime"]));
    let uncounted_changed = changed("uncountedTerminatedPods");
    let ready_changed = st(old, "ready") != st(new, "ready");
    let terminating_changed = st(old, "terminating") != st(new, "terminating");
    let suspended_zero_completions =
        at_bool(new, &["spec", "suspend"]) == Some(true) && at_i64(new, &["spec", "completions"]) == Some(0);
    Opts {
        reject_decreasing_succeeded_counter: !indexed
            || at(new, &["spec", "completions"]) != at(new, &["spec", "parallelism"]),
        reject_decreasing_failed_counter: true,
        reject_disabling_terminal_condition: true,
        reject_invalid_completed_indexes: completed_indexes_changed,
        reject_invalid_failed_indexes: failed_indexes_changed,
        reject_completed_indexes_for_non_indexed_job: completed_indexes_changed,
        reject_failed_indexes_for_no_backoff_limit_per_index: failed_indexes_changed,
        reject_failed_indexes_overlapping_completed: failed_indexes_changed || completed_indexes_changed,
        reject_failed_job_without_failure_target: failed_changed || failed_indexes_changed,
        reject_complete_job_without_success_criteria_met: complete_changed || scm_changed,
        reject_finished_job_with_active_pods: finished_changed || active_changed,
        reject_finished_job_without_start_time: (finished_changed || start_changed)
            && !suspended_zero_completions,
        reject_finished_job_with_uncounted_terminated_pods: finished_changed || uncounted_changed,
        reject_start_time_update_for_unsuspended_job: start_changed,
        reject_completion_time_before_start_time: start_changed || completion_changed,
        reject_mutating_completion_time: true,
        reject_not_complete_job_with_completion_time: complete_changed || completion_changed,
        reject_complete_job_without_completion_time: complete_changed || completion_changed,
        reject_complete_job_with_failed_condition: complete_changed || failed_changed,
        reject_complete_job_with_failure_target_condition: complete_changed || failure_target_changed,
        reject_more_ready_than_active_pods: ready_changed || active_changed,
        reject_finished_job_with_terminating_pods: finished_changed || terminating_changed,
    }
}

/// `ValidateJobStatusUpdate(new, old, getStatusValidationOptions(new, old))`.
pub(crate) fn validate_job_status_update(new: &Value, old: &Value) -> Errs {
    let opts = status_options(new, old);
    let mut errs = validate_job_status(new, &opts);
    if opts.reject_disabling_terminal_condition {
        for t in ["Failed", "Complete", "FailureTarget"] {
            if is_condition_true(old, t) && !is_condition_true(new, t) {
                errs.push(invalid_omit(
                    "status.conditions",
                    &format!("cannot disable the terminal {t}=True condition"),
                ));
            }
        }
    }
    let counter = |j: &Value, k: &str| at_i64(j, &["status", k]).unwrap_or(0);
    if opts.reject_decreasing_failed_counter && counter(new, "failed") < counter(old, "failed") {
        errs.push(FieldError::invalid(
            "status.failed",
            &Value::from(counter(new, "failed")),
            "cannot decrease the failed counter",
        ));
    }
    if opts.reject_decreasing_succeeded_counter && counter(new, "succeeded") < counter(old, "succeeded") {
        errs.push(FieldError::invalid(
            "status.succeeded",
            &Value::from(counter(new, "succeeded")),
            "cannot decrease the succeeded counter",
        ));
    }
    let new_ct = at(new, &["status", "completionTime"]);
    let old_ct = at(old, &["status", "completionTime"]);
    if opts.reject_mutating_completion_time
        && new_ct.is_some()
        && old_ct.is_some()
        && !same_time(new_ct, old_ct)
    {
        errs.push(invalid_go("status.completionTime", &go_time(new_ct), "completionTime cannot be mutated"));
    }
    if opts.reject_start_time_update_for_unsuspended_job {
        let old_st = at(old, &["status", "startTime"]);
        let new_st = at(new, &["status", "startTime"]);
        // k/k#134769: resuming (Suspended True -> False) may reset startTime.
        let resuming = is_condition_true(old, "Suspended")
            && at_arr(new, &["status", "conditions"]).iter().any(|c| {
                at_str(c, &["type"]) == Some("Suspended") && at_str(c, &["status"]) == Some("False")
            });
        if old_st.is_some()
            && !same_time(old_st, new_st)
            && at_bool(new, &["spec", "suspend"]) != Some(true)
            && !resuming
        {
            errs.push(invalid_go(
                "status.startTime",
                &go_time(new_st),
                "startTime cannot be removed for unsuspended job",
            ));
        }
    }
    if success_criteria_met(old) && !success_criteria_met(new) {
        errs.push(invalid_omit("status.conditions", "cannot disable the SuccessCriteriaMet=True condition"));
    }
    if complete(old) && !success_criteria_met(old) && success_criteria_met(new) {
        errs.push(invalid_omit(
            "status.conditions",
            "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
        ));
    }
    errs
}

/// `validateJobStatus`.
fn validate_job_status(job: &Value, opts: &Opts) -> Errs {
    let mut errs = Errs::new();
    for k in ["active", "succeeded", "failed", "ready", "terminating"] {
        nonnegative(job, &["status", k], &format!("status.{k}"), &mut errs);
    }
    let uncounted = at(job, &["status", "uncountedTerminatedPods"]);
    if let Some(u) = uncounted {
        let mut seen: Vec<&str> = Vec::new();
        for k in ["succeeded", "failed"] {
            for (i, uid) in at_arr(u, &[k]).iter().enumerate() {
                let uid = uid.as_str().unwrap_or("");
                let p = format!("status.uncountedTerminatedPods.{k}[{i}]");
                if uid.is_empty() {
                    errs.push(FieldError::invalid(p, &Value::from(""), "must not be empty"));
                } else if seen.contains(&uid) {
                    errs.push(FieldError::duplicate(p, &Value::from(uid)));
                } else {
                    seen.push(uid);
                }
            }
        }
    }
    let is_complete = complete(job);
    let is_failed = failed(job);
    let ft = failure_target(job);
    let scm = success_criteria_met(job);
    let ct = at(job, &["status", "completionTime"]);
    let st = at(job, &["status", "startTime"]);
    if opts.reject_complete_job_with_failed_condition && is_complete && is_failed {
        errs.push(invalid_omit("status.conditions", "cannot set Complete=True and Failed=true conditions"));
    }
    if opts.reject_complete_job_with_failure_target_condition && is_complete && ft {
        errs.push(invalid_omit(
            "status.conditions",
            "cannot set Complete=True and FailureTarget=true conditions",
        ));
    }
    if opts.reject_not_complete_job_with_completion_time && ct.is_some() && !is_complete {
        errs.push(invalid_go(
            "status.completionTime",
            &go_time(ct),
            "cannot set completionTime when there is no Complete=True condition",
        ));
    }
    if opts.reject_complete_job_without_completion_time && ct.is_none() && is_complete {
        errs.push(FieldError::required(
            "status.completionTime",
            "completionTime is required for Complete jobs",
        ));
    }
    if opts.reject_completion_time_before_start_time
        && let (Some(s), Some(c)) = (timestamp(st), timestamp(ct))
        && c < s
    {
        errs.push(invalid_go(
            "status.completionTime",
            &go_time(ct),
            "completionTime cannot be set before startTime",
        ));
    }
    if opts.reject_failed_job_without_failure_target && is_failed && !ft {
        errs.push(invalid_omit(
            "status.conditions",
            "cannot set Failed=True condition without the FailureTarget=true condition",
        ));
    }
    if opts.reject_complete_job_without_success_criteria_met && is_complete && !scm {
        errs.push(invalid_omit(
            "status.conditions",
            "cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
        ));
    }
    let is_finished = is_complete || is_failed;
    let active = at_i64(job, &["status", "active"]).unwrap_or(0);
    if opts.reject_finished_job_with_active_pods && active > 0 && is_finished {
        errs.push(FieldError::invalid(
            "status.active",
            &Value::from(active),
            "active>0 is invalid for finished job",
        ));
    }
    if opts.reject_finished_job_without_start_time && st.is_none() && is_finished {
        errs.push(FieldError::required("status.startTime", "startTime is required for finished job"));
    }
    if opts.reject_finished_job_with_uncounted_terminated_pods
        && is_finished
        && let Some(u) = uncounted
        && at_arr(u, &["failed"]).len() + at_arr(u, &["succeeded"]).len() > 0
    {
        errs.push(invalid_go(
            "status.uncountedTerminatedPods",
            &go_uncounted(u),
            "uncountedTerminatedPods needs to be empty for finished job",
        ));
    }
    let completions = at_i64(job, &["spec", "completions"]);
    let per_index = at(job, &["spec", "backoffLimitPerIndex"]).is_some();
    let completed_indexes = at_str(job, &["status", "completedIndexes"]).unwrap_or("");
    let failed_indexes = at_str(job, &["status", "failedIndexes"]);
    if opts.reject_invalid_completed_indexes
        && let Some(c) = completions
        && let Err(e) = validate_indexes_format(completed_indexes, c)
    {
        errs.push(FieldError::invalid(
            "status.completedIndexes",
            &Value::from(completed_indexes),
            &format!("error parsing completedIndexes: {e}"),
        ));
    }
    if opts.reject_invalid_failed_indexes
        && per_index
        && let (Some(c), Some(fi)) = (completions, failed_indexes)
        && let Err(e) = validate_indexes_format(fi, c)
    {
        errs.push(FieldError::invalid(
            "status.failedIndexes",
            &Value::from(fi),
            &format!("error parsing failedIndexes: {e}"),
        ));
    }
    let indexed = at_str(job, &["spec", "completionMode"]) == Some("Indexed");
    if opts.reject_completed_indexes_for_non_indexed_job && !completed_indexes.is_empty() && !indexed {
        errs.push(FieldError::invalid(
            "status.completedIndexes",
            &Value::from(completed_indexes),
            "cannot set non-empty completedIndexes when non-indexed completion mode",
        ));
    }
    if opts.reject_failed_indexes_for_no_backoff_limit_per_index
        && !per_index
        && let Some(fi) = failed_indexes
    {
        errs.push(FieldError::invalid(
            "status.failedIndexes",
            &Value::from(fi),
            "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
        ));
    }
    if opts.reject_failed_indexes_overlapping_completed
        && let (Some(c), Some(fi)) = (completions, failed_indexes)
        && let Err(e) = failed_indexes_not_overlap_completed(completed_indexes, fi, c)
    {
        errs.push(FieldError::invalid("status.failedIndexes", &Value::from(fi), &e));
    }
    if opts.reject_finished_job_with_terminating_pods
        && let Some(t) = at_i64(job, &["status", "terminating"]).filter(|t| *t > 0)
        && is_finished
    {
        errs.push(FieldError::invalid(
            "status.terminating",
            &Value::from(t),
            "terminating>0 is invalid for finished job",
        ));
    }
    if opts.reject_more_ready_than_active_pods
        && let Some(r) = at_i64(job, &["status", "ready"]).filter(|r| *r > active)
    {
        errs.push(FieldError::invalid(
            "status.ready",
            &Value::from(r),
            "cannot set more ready pods than active",
        ));
    }
    // AllowForSuccessCriteriaMetInExtendedScope is true: the NonIndexed / no-SuccessPolicy
    // SuccessCriteriaMet rules are off.
    if scm && is_failed {
        errs.push(invalid_omit(
            "status.conditions",
            "cannot set SuccessCriteriaMet=True and Failed=true conditions",
        ));
    }
    if scm && ft {
        errs.push(invalid_omit(
            "status.conditions",
            "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
        ));
    }
    if at(job, &["spec", "successPolicy"]).is_some() && !scm && is_complete {
        errs.push(invalid_omit(
            "status.conditions",
            "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
        ));
    }
    errs
}

/// `%#v` of `batch.UncountedTerminatedPods`.
fn go_uncounted(u: &Value) -> String {
    let uids = |k: &str| match at(u, &[k]).and_then(Value::as_array) {
        None => "[]types.UID(nil)".to_string(),
        Some(items) => {
            let body: Vec<String> = items.iter().map(|x| go_quote(x.as_str().unwrap_or(""))).collect();
            format!("[]types.UID{{{}}}", body.join(", "))
        }
    };
    format!("batch.UncountedTerminatedPods{{Succeeded:{}, Failed:{}}}", uids("succeeded"), uids("failed"))
}

/// `validateFailedIndexesNotOverlapCompleted`.
fn failed_indexes_not_overlap_completed(
    completed: &str,
    failed: &str,
    completions: i64,
) -> Result<(), String> {
    if completed.is_empty() || failed.is_empty() {
        return Ok(());
    }
    let c_iv: Vec<&str> = completed.split(',').collect();
    let f_iv: Vec<&str> = failed.split(',').collect();
    let (mut cp, mut fp) = (0, 0);
    let mut c = parse_index_interval(c_iv[0], completions);
    let mut f = parse_index_interval(f_iv[0], completions);
    while cp < c_iv.len() && fp < f_iv.len() {
        match (&c, &f) {
            (Err(_), _) => {
                cp += 1;
                if cp < c_iv.len() {
                    c = parse_index_interval(c_iv[cp], completions);
                }
            }
            (_, Err(_)) => {
                fp += 1;
                if fp < f_iv.len() {
                    f = parse_index_interval(f_iv[fp], completions);
                }
            }
            (Ok((cx, cy)), Ok((fx, fy))) => {
                if cx <= fy && fx <= cy {
                    return Err(format!(
                        "failedIndexes and completedIndexes overlap at index: {}",
                        cx.max(fx)
                    ));
                }
                if cx <= fx {
                    cp += 1;
                    if cp < c_iv.len() {
                        c = parse_index_interval(c_iv[cp], completions);
                    }
                } else {
                    fp += 1;
                    if fp < f_iv.len() {
                        f = parse_index_interval(f_iv[fp], completions);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::admit_status_update;
    use serde_json::{Value, json};

    const NOW: &str = "2026-01-01T00:00:00Z";
    const LATER: &str = "2026-01-01T00:01:00Z";

    fn job(spec: Value, status: Value) -> Value {
        let mut s = json!({"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "abc", "image": "image"}]}}});
        for (k, v) in spec.as_object().into_iter().flatten() {
            s[k] = v.clone();
        }
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "myjob", "namespace": "default", "resourceVersion": "10"}, "spec": s, "status": status})
    }

    fn cond(t: &str) -> Value {
        json!({"type": t, "status": "True"})
    }

    /// (field, kind reason) of each error, as strategy_test.go compares them.
    fn check(old: Value, new: Value) -> Vec<(String, &'static str)> {
        let mut new = new;
        match admit_status_update("batch/v1", "Job", &old, &mut new) {
            Ok(()) => vec![],
            Err(errs) => errs.into_iter().map(|e| (e.field, e.kind.reason())).collect(),
        }
    }

    // strategy_test.go TestStatusStrategy_ValidateUpdate (JobManagedBy enabled, as in 1.37).
    #[test]
    fn status_strategy_validate_update() {
        let inv = "FieldValueInvalid";
        let req = "FieldValueRequired";
        let e = |f: &str, k: &'static str| (f.to_string(), k);
        type Want = Vec<(String, &'static str)>;
        let cases: Vec<(&str, Value, Value, Want)> = vec![
            (
                "incoming resource version on update should not be mutated",
                job(json!({"parallelism": 4}), json!({})),
                job(json!({"parallelism": 4}), json!({})),
                vec![],
            ),
            (
                "invalid addition of both Failed=True and Complete=True",
                job(json!({}), json!({})),
                job(
                    json!({}),
                    json!({"startTime": NOW, "completionTime": NOW, "conditions": [cond("Complete"), cond("Failed")]}),
                ),
                vec![e("status.conditions", inv), e("status.conditions", inv), e("status.conditions", inv)],
            ),
            (
                "invalid addition of Complete=True without SuccessCriteriaMet=True",
                job(json!({}), json!({})),
                job(
                    json!({}),
                    json!({"startTime": NOW, "completionTime": NOW, "conditions": [cond("Complete")]}),
                ),
                vec![e("status.conditions", inv)],
            ),
            (
                "invalid addition of Failed=True without FailureTarget=True",
                job(json!({}), json!({})),
                job(json!({}), json!({"startTime": NOW, "conditions": [cond("Failed")]})),
                vec![e("status.conditions", inv)],
            ),
            (
                "completionTime can be removed to fix still running job",
                job(json!({}), json!({"startTime": NOW, "completionTime": NOW})),
                job(json!({}), json!({"startTime": NOW})),
                vec![],
            ),
            (
                "invalid attempt to transition to Failed=True without startTime",
                job(json!({}), json!({"conditions": [cond("FailureTarget")]})),
                job(json!({}), json!({"conditions": [cond("FailureTarget"), cond("Failed")]})),
                vec![e("status.startTime", req)],
            ),
            (
                "invalid attempt to transition to Complete=True without startTime",
                job(json!({}), json!({"conditions": [cond("SuccessCriteriaMet")]})),
                job(
                    json!({}),
                    json!({"completionTime": NOW, "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}),
                ),
                vec![e("status.startTime", req)],
            ),
            (
                "invalid attempt to transition to Complete=True with active > 0",
                job(
                    json!({}),
                    json!({"startTime": NOW, "active": 1, "conditions": [cond("SuccessCriteriaMet")]}),
                ),
                job(
                    json!({}),
                    json!({"startTime": NOW, "completionTime": NOW, "active": 1, "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}),
                ),
                vec![e("status.active", inv)],
            ),
            (
                "invalid attempt to transition to Failed=True with terminating > 0",
                job(
                    json!({}),
                    json!({"startTime": NOW, "terminating": 1, "conditions": [cond("FailureTarget")]}),
                ),
                job(
                    json!({}),
                    json!({"startTime": NOW, "terminating": 1, "conditions": [cond("FailureTarget"), cond("Failed")]}),
                ),
                vec![e("status.terminating", inv)],
            ),
            (
                "invalid attempt to transition to Failed=True with active > 0",
                job(json!({}), json!({"startTime": NOW, "active": 1, "conditions": [cond("FailureTarget")]})),
                job(
                    json!({}),
                    json!({"startTime": NOW, "active": 1, "conditions": [cond("FailureTarget"), cond("Failed")]}),
                ),
                vec![e("status.active", inv)],
            ),
            (
                "invalid attempt to transition to Failed=True with uncountedTerminatedPods.Failed>0",
                job(
                    json!({}),
                    json!({"startTime": NOW, "uncountedTerminatedPods": {"failed": ["a"]}, "conditions": [cond("FailureTarget")]}),
                ),
                job(
                    json!({}),
                    json!({"startTime": NOW, "uncountedTerminatedPods": {"failed": ["a"]}, "conditions": [cond("FailureTarget"), cond("Failed")]}),
                ),
                vec![e("status.uncountedTerminatedPods", inv)],
            ),
            (
                "invalid attempt to update uncountedTerminatedPods.Succeeded for Complete job",
                job(
                    json!({}),
                    json!({"startTime": NOW, "completionTime": NOW, "uncountedTerminatedPods": {"failed": ["a"]}, "conditions": [cond("Complete")]}),
                ),
                job(
                    json!({}),
                    json!({"startTime": NOW, "completionTime": NOW, "uncountedTerminatedPods": {"failed": ["b"]}, "conditions": [cond("Complete")]}),
                ),
                vec![e("status.uncountedTerminatedPods", inv)],
            ),
            (
                "non-empty uncountedTerminatedPods for complete job, unrelated update",
                job(
                    json!({}),
                    json!({"startTime": NOW, "completionTime": NOW, "uncountedTerminatedPods": {"failed": ["a"]}, "conditions": [cond("Complete")]}),
                ),
                job(
                    json!({}),
                    json!({"startTime": NOW, "completionTime": NOW, "uncountedTerminatedPods": {"failed": ["a"]}, "conditions": [cond("Complete"), cond("CustomJobCondition")]}),
                ),
                vec![],
            ),
            (
                "invalid addition Complete=True without setting CompletionTime",
                job(json!({}), json!({"startTime": NOW, "conditions": [cond("SuccessCriteriaMet")]})),
                job(
                    json!({}),
                    json!({"startTime": NOW, "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}),
                ),
                vec![e("status.completionTime", req)],
            ),
            (
                "invalid attempt to remove completionTime",
                job(json!({}), json!({"completionTime": NOW, "conditions": [cond("Complete")]})),
                job(json!({}), json!({"startTime": NOW, "conditions": [cond("Complete")]})),
                vec![e("status.completionTime", req)],
            ),
            (
                "verify startTime can be cleared for suspended job",
                job(json!({"suspend": true}), json!({"startTime": NOW})),
                job(json!({"suspend": true}), json!({})),
                vec![],
            ),
            (
                "verify startTime cannot be removed for unsuspended job",
                job(json!({}), json!({"startTime": NOW})),
                job(json!({}), json!({})),
                vec![e("status.startTime", inv)],
            ),
            (
                "verify startTime cannot be updated for unsuspended job",
                job(json!({}), json!({"startTime": NOW})),
                job(json!({}), json!({"startTime": LATER})),
                vec![e("status.startTime", inv)],
            ),
            (
                "verify startTime can be updated when resuming job (JobSuspended: True -> False)",
                job(json!({}), json!({"startTime": NOW, "conditions": [cond("Suspended")]})),
                job(
                    json!({}),
                    json!({"startTime": LATER, "conditions": [{"type": "Suspended", "status": "False"}]}),
                ),
                vec![],
            ),
            (
                "invalid attempt to set completionTime before startTime",
                job(json!({}), json!({"startTime": LATER, "conditions": [cond("SuccessCriteriaMet")]})),
                job(
                    json!({}),
                    json!({"startTime": LATER, "completionTime": NOW, "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}),
                ),
                vec![e("status.completionTime", inv)],
            ),
            (
                "invalid attempt to modify completionTime",
                job(json!({}), json!({"completionTime": NOW, "conditions": [cond("Complete")]})),
                job(
                    json!({}),
                    json!({"startTime": NOW, "completionTime": LATER, "conditions": [cond("Complete")]}),
                ),
                vec![e("status.completionTime", inv)],
            ),
            (
                "invalid removal of terminal condition Failed=True",
                job(json!({}), json!({"conditions": [cond("Failed")]})),
                job(json!({}), json!({})),
                vec![e("status.conditions", inv)],
            ),
            (
                "invalid removal of terminal condition Complete=True",
                job(json!({}), json!({"conditions": [cond("Complete")]})),
                job(json!({}), json!({})),
                vec![e("status.conditions", inv)],
            ),
            (
                "invalid removal of terminal condition FailureTarget=True",
                job(json!({}), json!({"conditions": [cond("FailureTarget")]})),
                job(json!({}), json!({})),
                vec![e("status.conditions", inv)],
            ),
            (
                "invalid addition of FailureTarget=True when Complete=True",
                job(
                    json!({}),
                    json!({"startTime": NOW, "completionTime": NOW, "conditions": [cond("Complete")]}),
                ),
                job(
                    json!({}),
                    json!({"startTime": NOW, "completionTime": NOW, "conditions": [cond("Complete"), cond("FailureTarget")]}),
                ),
                vec![e("status.conditions", inv)],
            ),
            (
                "invalid attempt setting of CompletionTime when there is no Complete condition",
                job(json!({}), json!({})),
                job(json!({}), json!({"completionTime": NOW})),
                vec![e("status.completionTime", inv)],
            ),
            (
                "invalid CompletionTime when there is no Complete condition, but allowed",
                job(json!({}), json!({"completionTime": NOW})),
                job(json!({}), json!({"completionTime": NOW, "active": 1})),
                vec![],
            ),
            (
                "invalid attempt setting CompletedIndexes when non-indexed completion mode is used",
                job(json!({"completions": 5, "completionMode": "NonIndexed"}), json!({})),
                job(
                    json!({"completions": 5, "completionMode": "NonIndexed"}),
                    json!({"startTime": NOW, "completedIndexes": "0"}),
                ),
                vec![e("status.completedIndexes", inv)],
            ),
            (
                "invalid because CompletedIndexes set when non-indexed completion mode is used; but allowed",
                job(
                    json!({"completions": 5, "completionMode": "NonIndexed"}),
                    json!({"completedIndexes": "0"}),
                ),
                job(
                    json!({"completions": 5, "completionMode": "NonIndexed"}),
                    json!({"completedIndexes": "0", "active": 1}),
                ),
                vec![],
            ),
            (
                "invalid attempt setting FailedIndexes when not backoffLimitPerIndex",
                job(json!({"completions": 5, "completionMode": "Indexed"}), json!({})),
                job(json!({"completions": 5, "completionMode": "Indexed"}), json!({"failedIndexes": "0"})),
                vec![e("status.failedIndexes", inv)],
            ),
            (
                "invalid attempt to decrease the failed counter",
                job(json!({"completions": 5}), json!({"failed": 3})),
                job(json!({"completions": 5}), json!({"failed": 1})),
                vec![e("status.failed", inv)],
            ),
            (
                "invalid attempt to decrease the succeeded counter",
                job(json!({"completions": 5}), json!({"succeeded": 3})),
                job(json!({"completions": 5}), json!({"succeeded": 1})),
                vec![e("status.succeeded", inv)],
            ),
            (
                "invalid attempt to set bad format for CompletedIndexes",
                job(json!({"completions": 5, "completionMode": "Indexed"}), json!({})),
                job(
                    json!({"completions": 5, "completionMode": "Indexed"}),
                    json!({"completedIndexes": "invalid format"}),
                ),
                vec![e("status.completedIndexes", inv)],
            ),
            (
                "invalid format for CompletedIndexes, but allowed",
                job(
                    json!({"completions": 5, "completionMode": "Indexed"}),
                    json!({"completedIndexes": "invalid format"}),
                ),
                job(
                    json!({"completions": 5, "completionMode": "Indexed"}),
                    json!({"completedIndexes": "invalid format", "active": 1}),
                ),
                vec![],
            ),
            (
                "invalid attempt to set bad format for FailedIndexes",
                job(
                    json!({"completions": 5, "completionMode": "Indexed", "backoffLimitPerIndex": 1}),
                    json!({}),
                ),
                job(
                    json!({"completions": 5, "completionMode": "Indexed", "backoffLimitPerIndex": 1}),
                    json!({"failedIndexes": "invalid format"}),
                ),
                vec![e("status.failedIndexes", inv)],
            ),
            (
                "more ready pods than active, but allowed",
                job(json!({"completions": 5}), json!({"active": 1, "ready": 2})),
                job(json!({"completions": 5}), json!({"active": 1, "ready": 2, "succeeded": 1})),
                vec![],
            ),
            (
                "invalid addition of both FailureTarget=True and Complete=True",
                job(json!({}), json!({})),
                job(
                    json!({}),
                    json!({"startTime": NOW, "completionTime": NOW, "conditions": [cond("Complete"), cond("FailureTarget")]}),
                ),
                vec![e("status.conditions", inv), e("status.conditions", inv)],
            ),
            (
                "invalid failedIndexes, which overlap with completedIndexes",
                job(
                    json!({"completions": 5, "completionMode": "Indexed"}),
                    json!({"failedIndexes": "0,2", "completedIndexes": "3-4"}),
                ),
                job(
                    json!({"completions": 5, "completionMode": "Indexed"}),
                    json!({"failedIndexes": "0,2", "completedIndexes": "2-4"}),
                ),
                vec![e("status.failedIndexes", inv)],
            ),
            (
                "failedIndexes overlap with completedIndexes, unrelated field change",
                job(
                    json!({"completions": 5, "completionMode": "Indexed"}),
                    json!({"failedIndexes": "0,2", "completedIndexes": "2-4"}),
                ),
                job(
                    json!({"completions": 5, "completionMode": "Indexed"}),
                    json!({"failedIndexes": "0,2", "completedIndexes": "2-4", "active": 1}),
                ),
                vec![],
            ),
            (
                "invalid addition of SuccessCriteriaMet for Job with Failed",
                job(
                    json!({"completionMode": "Indexed", "completions": 10}),
                    json!({"conditions": [cond("Failed")]}),
                ),
                job(
                    json!({"completionMode": "Indexed", "completions": 10}),
                    json!({"conditions": [cond("Failed"), cond("SuccessCriteriaMet")]}),
                ),
                vec![e("status.conditions", inv)],
            ),
            (
                "invalid addition of SuccessCriteriaMet for Job with FailureTarget",
                job(
                    json!({"completionMode": "Indexed", "completions": 10}),
                    json!({"conditions": [cond("FailureTarget")]}),
                ),
                job(
                    json!({"completionMode": "Indexed", "completions": 10}),
                    json!({"conditions": [cond("FailureTarget"), cond("SuccessCriteriaMet")]}),
                ),
                vec![e("status.conditions", inv)],
            ),
            (
                "invalid addition of SuccessCriteriaMet for Job with Complete",
                job(
                    json!({"completionMode": "Indexed", "completions": 10}),
                    json!({"conditions": [cond("Complete")]}),
                ),
                job(
                    json!({"completionMode": "Indexed", "completions": 10}),
                    json!({"conditions": [cond("Complete"), cond("SuccessCriteriaMet")]}),
                ),
                vec![e("status.conditions", inv)],
            ),
            (
                "invalid removing of SuccessCriteriaMet for Job",
                job(
                    json!({"completionMode": "Indexed", "completions": 10}),
                    json!({"conditions": [cond("SuccessCriteriaMet")]}),
                ),
                job(json!({"completionMode": "Indexed", "completions": 10}), json!({})),
                vec![e("status.conditions", inv)],
            ),
            (
                "valid addition of SuccessCriteriaMet when JobManagedBy is enabled",
                job(json!({}), json!({})),
                job(json!({}), json!({"conditions": [cond("SuccessCriteriaMet")]})),
                vec![],
            ),
            (
                "invalid attempt to set more ready pods than active",
                job(json!({"completions": 5}), json!({})),
                job(json!({"completions": 5}), json!({"active": 1, "ready": 2})),
                vec![e("status.ready", inv)],
            ),
            (
                "valid transition to Complete for suspended Job with completions=0; without startTime",
                job(json!({"completions": 0, "suspend": true}), json!({})),
                job(
                    json!({"completions": 0, "suspend": true}),
                    json!({"completionTime": NOW, "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}),
                ),
                vec![],
            ),
            (
                "valid Complete with SuccessCriteriaMet and completionTime",
                job(json!({}), json!({"startTime": NOW, "conditions": [cond("SuccessCriteriaMet")]})),
                job(
                    json!({}),
                    json!({"startTime": NOW, "completionTime": LATER, "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}),
                ),
                vec![],
            ),
            (
                "valid Failed after FailureTarget with nothing left",
                job(json!({}), json!({"startTime": NOW, "failed": 7, "conditions": [cond("FailureTarget")]})),
                job(
                    json!({}),
                    json!({"startTime": NOW, "failed": 7, "uncountedTerminatedPods": {}, "conditions": [cond("FailureTarget"), cond("Failed")]}),
                ),
                vec![],
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(check(old, new), want, "{name}");
        }
    }

    // validation_test.go TestValidateJobUpdateStatus: exact texts of the common rejections.
    #[test]
    fn status_messages() {
        let mut new = job(
            json!({}),
            json!({"startTime": NOW, "active": 1, "conditions": [cond("FailureTarget"), cond("Failed")], "uncountedTerminatedPods": {"failed": ["a", "a", ""]}}),
        );
        let old = job(json!({}), json!({"startTime": NOW, "conditions": [cond("FailureTarget")]}));
        let errs: Vec<String> = admit_status_update("batch/v1", "Job", &old, &mut new)
            .expect_err("invalid")
            .into_iter()
            .map(|e| e.message)
            .collect();
        assert_eq!(
            errs,
            vec![
                "status.uncountedTerminatedPods.failed[1]: Duplicate value: \"a\"",
                "status.uncountedTerminatedPods.failed[2]: Invalid value: \"\": must not be empty",
                "status.active: Invalid value: 1: active>0 is invalid for finished job",
                "status.uncountedTerminatedPods: Invalid value: batch.UncountedTerminatedPods{Succeeded:[]types.UID(nil), Failed:[]types.UID{\"a\", \"a\", \"\"}}: uncountedTerminatedPods needs to be empty for finished job",
            ]
        );
        let mut new = job(json!({}), json!({"completionTime": LATER, "conditions": [cond("Complete")]}));
        let old = job(json!({}), json!({"completionTime": NOW, "conditions": [cond("Complete")]}));
        let errs = admit_status_update("batch/v1", "Job", &old, &mut new).expect_err("invalid");
        assert!(errs.iter().any(|e| e.message == "status.completionTime: Invalid value: 2026-01-01 00:01:00 +0000 UTC: completionTime cannot be mutated"), "{errs:#?}");
        let mut new = job(json!({}), json!({}));
        let old = job(json!({}), json!({"conditions": [cond("Failed")]}));
        let errs = admit_status_update("batch/v1", "Job", &old, &mut new).expect_err("invalid");
        assert_eq!(
            errs[0].message,
            "status.conditions: Invalid value: cannot disable the terminal Failed=True condition"
        );
    }

    // The status writes a correct Job controller makes (job_controller_test.go TestControllerSyncJob
    // "job finish", "suspending", "resuming" flows and TestSyncJobPastDeadline) all pass, and
    // the shortcuts a sloppy controller could take are rejected.
    #[test]
    fn controller_status_sequences() {
        let base = job(json!({"completions": 1}), json!({}));
        let step = |old: &Value, status: Value| -> Result<Value, Vec<String>> {
            let mut new = old.clone();
            new["status"] = status;
            admit_status_update("batch/v1", "Job", old, &mut new)
                .map_err(|e| e.into_iter().map(|e| e.message).collect::<Vec<_>>())?;
            Ok(new)
        };
        let running = step(&base, json!({"startTime": NOW, "active": 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}})).expect("start");
        let uncounted = step(&running, json!({"startTime": NOW, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {"succeeded": ["p1"]}})).expect("uncounted");
        let counted = step(&uncounted, json!({"startTime": NOW, "succeeded": 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}, "conditions": [cond("SuccessCriteriaMet")]})).expect("counted");
        step(&counted, json!({"startTime": NOW, "completionTime": LATER, "succeeded": 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}, "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]})).expect("complete");

        // Failure: FailureTarget first, Failed once nothing is left.
        let target = step(&running, json!({"startTime": NOW, "active": 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}, "conditions": [cond("FailureTarget")]})).expect("target");
        let rejected = step(&target, json!({"startTime": NOW, "active": 0, "terminating": 1, "uncountedTerminatedPods": {}, "conditions": [cond("FailureTarget"), cond("Failed")]})).expect_err("terminating");
        assert_eq!(
            rejected,
            vec!["status.terminating: Invalid value: 1: terminating>0 is invalid for finished job"]
        );
        step(&target, json!({"startTime": NOW, "failed": 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}, "conditions": [cond("FailureTarget"), cond("Failed")]})).expect("failed");

        // Sloppy writes.
        let errs = step(&running, json!({"startTime": NOW, "failed": 1, "conditions": [cond("Failed")]}))
            .expect_err("no target");
        assert_eq!(
            errs,
            vec![
                "status.conditions: Invalid value: cannot set Failed=True condition without the FailureTarget=true condition"
            ]
        );
        let errs = step(
            &counted,
            json!({"startTime": NOW, "succeeded": 0, "conditions": [cond("SuccessCriteriaMet")]}),
        )
        .expect_err("decrease");
        assert_eq!(errs, vec!["status.succeeded: Invalid value: 0: cannot decrease the succeeded counter"]);
        let errs = step(&running, json!({"startTime": NOW, "active": 1, "ready": 2})).expect_err("ready");
        assert_eq!(errs, vec!["status.ready: Invalid value: 2: cannot set more ready pods than active"]);
        let errs = step(&counted, json!({"startTime": NOW, "succeeded": 1, "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]})).expect_err("no completionTime");
        assert_eq!(
            errs,
            vec!["status.completionTime: Required value: completionTime is required for Complete jobs"]
        );

        // Suspend and resume: startTime may be cleared while suspended and reset on resume.
        let mut suspended = running.clone();
        suspended["spec"]["suspend"] = json!(true);
        let s1 =
            step(&suspended, json!({"conditions": [cond("Suspended")]})).expect("suspended clears startTime");
        let mut resumed = s1.clone();
        resumed["spec"]["suspend"] = json!(false);
        step(&resumed, json!({"startTime": LATER, "conditions": [{"type": "Suspended", "status": "False"}]}))
            .expect("resume");
        let mut kept = suspended.clone();
        kept["status"]["conditions"] = json!([cond("Suspended")]);
        kept["spec"]["suspend"] = json!(false);
        step(&kept, json!({"startTime": LATER, "active": 1, "conditions": [{"type": "Suspended", "status": "False"}]})).expect("resume resets startTime");
    }

    // strategy_test.go TestStatusStrategy_PrepareForUpdate: spec changes are dropped on /status.
    #[test]
    fn status_update_keeps_old_spec() {
        let old = job(json!({"parallelism": 3}), json!({"active": 1}));
        let mut new = job(json!({"parallelism": 4}), json!({"active": 2}));
        admit_status_update("batch/v1", "Job", &old, &mut new).expect("valid");
        assert_eq!(new["spec"]["parallelism"], 3);
        assert_eq!(new["status"]["active"], 2);
    }
}
