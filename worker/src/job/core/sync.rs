//! `syncJob`: counting, the failure/success decision, the choice between finishing and managing the
//! pods, and the fold of pod-operation results into the status (then handed to tracking).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::JobCondition;

use super::backoff::{BackoffRecord, new_backoff_record};
use super::conditions::{self, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED, TRUE, new_condition};
use super::indexed::{calculate_failed_indexes, calculate_succeeded_indexes, pods_with_delayed_deletion_per_index};
use super::intervals::OrderedIntervals;
use super::manage::{ManageInput, ManageOps, manage_job};
use super::plan::{
    CreateOutcome, CreatePlan, DeleteOutcome, Event, JobPlan, Metric, PodOpResults, PodOps, Skip, SkipReason,
    StatusPlan, SyncAction, SyncError, SyncInput, SyncPlan,
};
use super::success_policy::match_success_policy;
use super::tracking::{JobFacts, TrackInput, WorkStatus, track};
use super::view::{INDEXED, JobView, NON_INDEXED, Phase, PodFacts, pod_facts};

/// What [`SyncPlan::after_pod_ops`] needs to continue.
#[derive(Debug)]
pub(crate) struct SyncState {
    job: JobFacts,
    facts: Vec<PodFacts>,
    status: WorkStatus,
    uncounted_succeeded: HashSet<String>,
    uncounted_failed: HashSet<String>,
    finished: Option<JobCondition>,
    /// The finished branch of syncJob was taken (active pods deleted, no manageJob).
    finishing: bool,
    manage_called: bool,
    expectations_satisfied: bool,
    suspended: bool,
    /// `jobCtx.succeeded` (Indexed: the succeeded indexes).
    succeeded: i64,
    active: i64,
    ready: i64,
    terminating: i64,
    /// Positions of the pods in [`PodOps`] deletions.
    deleting_pods: Vec<usize>,
    creation_reason: &'static str,
    prev_succeeded_indexes: OrderedIntervals,
    succeeded_indexes: OrderedIntervals,
    failed_indexes: Option<OrderedIntervals>,
    delayed: HashMap<i64, usize>,
    backoff_record: BackoffRecord,
}

/// Decides one sync of `input.job`. Pure: same input, same plan.
pub fn sync_job(input: &SyncInput<'_>) -> JobPlan {
    let job = input.job;
    let cfg = input.config;
    let view = JobView::new(job);
    let now = input.now;

    let managed_by = view.managed_by();
    if managed_by != cfg.managed_by {
        return JobPlan::Skip(Skip {
            reason: SkipReason::ManagedByOther(managed_by.to_string()),
            events: Vec::new(),
            forget_backoff_record: false,
        });
    }
    if conditions::is_job_finished(job) {
        return JobPlan::Skip(Skip { reason: SkipReason::Finished, events: Vec::new(), forget_backoff_record: true });
    }
    if let Some(mode) = job.spec.as_ref().and_then(|s| s.completion_mode.as_deref())
        && mode != NON_INDEXED
        && mode != INDEXED
    {
        return JobPlan::Skip(Skip {
            reason: SkipReason::UnknownCompletionMode(mode.to_string()),
            events: vec![Event::warning("UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")],
            forget_backoff_record: false,
        });
    }

    let facts = pod_facts(&view, input.pods, input.expected_removed_finalizers);
    let mut status = WorkStatus::from_status(job.status.as_ref());
    let uncounted_succeeded: HashSet<String> = status.uncounted_succeeded.iter().cloned().collect();
    let uncounted_failed: HashSet<String> = status.uncounted_failed.iter().cloned().collect();
    let active: Vec<usize> = (0..facts.len()).filter(|&i| facts[i].active()).collect();
    let ready = active.iter().filter(|&&i| facts[i].ready).count() as i64;
    let terminating = facts.iter().filter(|p| p.terminating()).count() as i64;
    let completions = view.index_bound();

    // getNewFinishedPods
    let counts_for_job = |p: &PodFacts| !view.indexed || p.index.is_some_and(|ix| ix < completions);
    let new_succeeded: Vec<&PodFacts> = facts
        .iter()
        .filter(|p| p.tracked() && !uncounted_succeeded.contains(&p.uid) && counts_for_job(p))
        .filter(|p| p.phase == Phase::Succeeded)
        .collect();
    let new_failed: Vec<&PodFacts> = facts
        .iter()
        .filter(|p| p.tracked() && !uncounted_failed.contains(&p.uid) && counts_for_job(p))
        .filter(|p| p.failed)
        .collect();
    let mut succeeded = i64::from(status.succeeded) + new_succeeded.len() as i64 + uncounted_succeeded.len() as i64;
    let non_ignored = new_failed.iter().filter(|p| view.pod_failure_policy.is_none() || p.pfp.count_failed).count();
    let failed = i64::from(status.failed) + non_ignored as i64 + uncounted_failed.len() as i64;

    if status.start_time.is_none() && !view.suspended {
        status.start_time = Some(now.into());
    }
    let backoff_record = new_backoff_record(
        input.backoff,
        &mut new_succeeded.iter().map(|p| p.finish_time).collect::<Vec<_>>(),
        &mut new_failed.iter().map(|p| p.finish_time).collect::<Vec<_>>(),
    );

    let failure = |reason: &str, message: &str| new_condition(FAILURE_TARGET, TRUE, reason, message, now);
    let mut requeue: Option<Duration> = None;
    let mut finished = conditions::find_true(&status.conditions, SUCCESS_CRITERIA_MET).cloned();
    if finished.is_none() {
        if let Some(target) = conditions::find_true(&status.conditions, FAILURE_TARGET) {
            finished =
                Some(new_condition(FAILED, TRUE, conditions::reason(target), conditions::message(target), now));
        } else if let Some(msg) = facts.iter().filter(|p| p.failed).find_map(|p| p.pfp.fail_job_message.as_deref()) {
            finished = Some(failure(conditions::REASON_POD_FAILURE_POLICY, msg));
        }
    }
    if finished.is_none() {
        if failed > i64::from(view.backoff_limit) || past_backoff_limit_on_failure(&view, &facts) {
            finished = Some(failure(conditions::REASON_BACKOFF_LIMIT_EXCEEDED, conditions::MSG_BACKOFF_LIMIT_EXCEEDED));
        } else if let Some(remaining) = active_deadline_remaining(&view, &status, now) {
            if remaining <= SignedDuration::ZERO {
                finished = Some(failure(conditions::REASON_DEADLINE_EXCEEDED, conditions::MSG_DEADLINE_EXCEEDED));
            } else {
                requeue = Duration::try_from(remaining).ok();
            }
        }
    }

    let mut prev_succeeded_indexes = OrderedIntervals::default();
    let mut succeeded_indexes = OrderedIntervals::default();
    let mut failed_indexes = None;
    let mut delayed = HashMap::new();
    if view.indexed {
        (prev_succeeded_indexes, succeeded_indexes) =
            calculate_succeeded_indexes(&status.completed_indexes, completions, &facts);
        succeeded = succeeded_indexes.total();
        if view.has_backoff_limit_per_index() {
            let failed_ix = calculate_failed_indexes(&view, status.failed_indexes.as_deref(), &facts);
            if finished.is_none() {
                if view.max_failed_indexes.is_some_and(|max| failed_ix.total() > i64::from(max)) {
                    finished = Some(failure(
                        conditions::REASON_MAX_FAILED_INDEXES_EXCEEDED,
                        conditions::MSG_MAX_FAILED_INDEXES_EXCEEDED,
                    ));
                } else if failed_ix.total() > 0 && failed_ix.total() + succeeded_indexes.total() >= completions {
                    finished = Some(failure(conditions::REASON_FAILED_INDEXES, conditions::MSG_FAILED_INDEXES));
                }
            }
            delayed = pods_with_delayed_deletion_per_index(&facts, completions, &succeeded_indexes, &failed_ix);
            failed_indexes = Some(failed_ix);
        }
        if finished.is_none()
            && let Some(msg) = match_success_policy(view.success_policy, completions, &succeeded_indexes)
        {
            finished = Some(new_condition(SUCCESS_CRITERIA_MET, TRUE, conditions::REASON_SUCCESS_POLICY, &msg, now));
        }
    }

    let finishing = finished.is_some();
    let mut action = SyncAction::Reconciling;
    let mut pod_ops = PodOps::None;
    let mut deleting_pods = Vec::new();
    let mut creation_reason = "new";
    let mut manage_called = false;
    if finishing {
        pod_ops = PodOps::DeleteActive(active.iter().map(|&i| facts[i].pod_ref()).collect());
        deleting_pods = active.clone();
    } else if input.expectations_satisfied && !view.deleting {
        manage_called = true;
        let decision = manage_job(&ManageInput {
            view: &view,
            pods: input.pods,
            facts: &facts,
            active: &active,
            terminating,
            succeeded,
            failed,
            succeeded_indexes: &succeeded_indexes,
            failed_indexes: failed_indexes.as_ref(),
            delayed: &delayed,
            backoff: &backoff_record,
            now,
            config: cfg,
        });
        action = decision.action;
        requeue = match (requeue, decision.requeue) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match decision.ops {
            ManageOps::None => {}
            ManageOps::Delete(pods) => {
                pod_ops = PodOps::RemoveFinalizerAndDelete(pods.iter().map(|&i| facts[i].pod_ref()).collect());
                deleting_pods = pods;
            }
            ManageOps::Create { pods, reason } => {
                creation_reason = reason;
                let batches = slow_start_batches(pods.len());
                pod_ops = PodOps::Create(CreatePlan { pods, batches });
            }
        }
    }

    JobPlan::Sync(Box::new(SyncPlan {
        completion_mode: view.completion_mode(),
        action,
        pod_ops,
        requeue_after: requeue,
        state: SyncState {
            job: JobFacts {
                completion_mode: view.completion_mode(),
                indexed: view.indexed,
                completions: view.completions,
                deleting: view.deleting,
                has_pod_failure_policy: view.pod_failure_policy.is_some(),
                backoff_limit_per_index: view.has_backoff_limit_per_index(),
                max_uncounted_pods: cfg.max_uncounted_pods,
                now,
            },
            facts,
            status,
            uncounted_succeeded,
            uncounted_failed,
            finished,
            finishing,
            manage_called,
            expectations_satisfied: input.expectations_satisfied,
            suspended: view.suspended,
            succeeded,
            active: active.len() as i64,
            ready,
            terminating,
            deleting_pods,
            creation_reason,
            prev_succeeded_indexes,
            succeeded_indexes,
            failed_indexes,
            delayed,
            backoff_record,
        },
    }))
}

/// Slow start: batches of 1, 2, 4, … covering `n` pods.
fn slow_start_batches(n: usize) -> Vec<std::ops::Range<usize>> {
    let mut batches = Vec::new();
    let (mut start, mut size) = (0, 1usize);
    while start < n {
        let end = (start + size).min(n);
        batches.push(start..end);
        start = end;
        size = size.saturating_mul(2);
    }
    batches
}

/// `pastBackoffLimitOnFailure`: restartPolicy OnFailure and Σ restarts of Running/Pending pods reached
/// the limit (any restart when the limit is 0).
fn past_backoff_limit_on_failure(view: &JobView<'_>, facts: &[PodFacts]) -> bool {
    if !view.restart_on_failure {
        return false;
    }
    let restarts: i64 = facts.iter().map(|p| p.restarts_if_active_phase).sum();
    if view.backoff_limit == 0 { restarts > 0 } else { restarts >= i64::from(view.backoff_limit) }
}

/// `activeDeadlineSeconds − (now − startTime)`, if a deadline applies (set, started, not suspended).
fn active_deadline_remaining(view: &JobView<'_>, status: &WorkStatus, now: Timestamp) -> Option<SignedDuration> {
    let ads = view.active_deadline_seconds?;
    let start = status.start_time.as_ref()?.0;
    if view.suspended {
        return None;
    }
    Some(SignedDuration::from_secs(ads).saturating_sub(now.duration_since(start)))
}

impl SyncPlan {
    /// Folds the results of [`SyncPlan::pod_ops`] (in request order) into the status, then decides the
    /// finalizer accounting: the interim status write and the finalizers to remove.
    pub fn after_pod_ops(&self, results: &PodOpResults) -> StatusPlan {
        let s = &self.state;
        let mut finished = s.finished.clone();
        let (mut active, mut ready, mut terminating) = (s.active, s.ready, s.terminating);
        let mut events = Vec::new();
        let mut metrics = Vec::new();
        let mut manage_error = None;
        match &self.pod_ops {
            PodOps::None => {}
            PodOps::DeleteActive(pods) | PodOps::RemoveFinalizerAndDelete(pods) => {
                let outcomes: &[DeleteOutcome] = match results {
                    PodOpResults::Deletes(o) => o,
                    _ => &[],
                };
                let finalizer_first = matches!(self.pod_ops, PodOps::RemoveFinalizerAndDelete(_));
                let (mut deleted, mut deleted_ready) = (0i64, 0i64);
                for (k, pod) in pods.iter().enumerate() {
                    let outcome =
                        outcomes.get(k).cloned().unwrap_or_else(|| DeleteOutcome::DeleteFailed("no result".into()));
                    let is_ready = s.deleting_pods.get(k).is_some_and(|&i| s.facts[i].ready);
                    match &outcome {
                        DeleteOutcome::Deleted => {
                            events.push(Event::normal("SuccessfulDelete", format!("Deleted pod: {}", pod.name)));
                        }
                        DeleteOutcome::DeleteFailed(msg) => {
                            events.push(Event::warning("FailedDelete", format!("Error deleting: {msg}")));
                            manage_error.get_or_insert_with(|| SyncError::DeletePods(msg.clone()));
                        }
                        DeleteOutcome::PatchFailed(msg) => {
                            manage_error.get_or_insert_with(|| SyncError::RemoveFinalizerBeforeDelete(msg.clone()));
                        }
                        DeleteOutcome::DeleteNotFound | DeleteOutcome::PatchNotFound => {}
                    }
                    let counts_as_deleted = matches!(
                        outcome,
                        DeleteOutcome::Deleted | DeleteOutcome::DeleteNotFound | DeleteOutcome::PatchNotFound
                    );
                    // Upstream counts a ready pod once its DELETE was attempted.
                    let reached_delete = !finalizer_first
                        || !matches!(outcome, DeleteOutcome::PatchFailed(_) | DeleteOutcome::PatchNotFound);
                    deleted += i64::from(counts_as_deleted);
                    deleted_ready += i64::from(is_ready && reached_delete);
                }
                if s.finishing && (deleted != active || !s.expectations_satisfied) {
                    // Pods or finalizers may remain; declare the Job finished in a later sync.
                    finished = None;
                }
                active -= deleted;
                terminating += deleted;
                ready -= deleted_ready;
            }
            PodOps::Create(plan) => {
                let outcomes: &[CreateOutcome] = match results {
                    PodOpResults::Creates(o) => o,
                    _ => &[],
                };
                let (mut attempted, mut failed) = (0u64, 0u64);
                for k in 0..plan.pods.len() {
                    match outcomes.get(k).unwrap_or(&CreateOutcome::Skipped) {
                        CreateOutcome::Created(name) => {
                            attempted += 1;
                            active += 1;
                            events.push(Event::normal("SuccessfulCreate", format!("Created pod: {name}")));
                        }
                        CreateOutcome::Failed(msg) => {
                            attempted += 1;
                            failed += 1;
                            events.push(Event::warning("FailedCreate", format!("Error creating: {msg}")));
                            manage_error.get_or_insert_with(|| SyncError::CreatePods(msg.clone()));
                        }
                        // Upstream neither counts this pod out of `active` nor in the metric.
                        CreateOutcome::NamespaceTerminating => active += 1,
                        CreateOutcome::Skipped => {}
                    }
                }
                // Upstream increments the "succeeded" series for every attempt that was not refused for a
                // terminating namespace, failed ones included (job_controller.go manageJob).
                if attempted > 0 {
                    metrics.push(Metric::JobPodsCreation {
                        reason: s.creation_reason,
                        status: "succeeded",
                        delta: attempted,
                    });
                }
                if failed > 0 {
                    metrics.push(Metric::JobPodsCreation { reason: s.creation_reason, status: "failed", delta: failed });
                }
            }
        }

        let mut status = s.status.clone();
        let mut suspend_changed = false;
        if !s.finishing {
            let complete = match s.job.completions {
                None => s.succeeded > 0 && active == 0,
                Some(c) => s.succeeded >= i64::from(c) && active == 0,
            };
            if complete {
                finished = Some(new_condition(
                    SUCCESS_CRITERIA_MET,
                    TRUE,
                    conditions::REASON_COMPLETIONS_REACHED,
                    conditions::MSG_COMPLETIONS_REACHED,
                    s.job.now,
                ));
            } else if s.manage_called {
                let now = s.job.now;
                if s.suspended {
                    let (r, m) = (conditions::REASON_JOB_SUSPENDED, conditions::MSG_JOB_SUSPENDED);
                    if conditions::ensure_status(&mut status.conditions, SUSPENDED, TRUE, r, m, now) {
                        suspend_changed = true;
                        events.push(Event::normal("Suspended", "Job suspended"));
                    }
                } else {
                    let (r, m) = (conditions::REASON_JOB_RESUMED, conditions::MSG_JOB_RESUMED);
                    if conditions::ensure_status(&mut status.conditions, SUSPENDED, conditions::FALSE, r, m, now) {
                        suspend_changed = true;
                        events.push(Event::normal("Resumed", "Job resumed"));
                        // ActiveDeadlineSeconds counts the time the Job is continuously active.
                        status.start_time = Some(now.into());
                    }
                }
            }
        }

        let to_i32 = |v: i64| i32::try_from(v.max(0)).unwrap_or(i32::MAX);
        let (active, ready, terminating) = (to_i32(active), to_i32(ready), to_i32(terminating));
        let needs_flush = suspend_changed
            || active != status.active
            || Some(ready) != status.ready
            || Some(terminating) != status.terminating;
        status.active = active;
        status.ready = Some(ready);
        status.terminating = Some(terminating);

        let mut plan = track(TrackInput {
            job: s.job.clone(),
            facts: &s.facts,
            status,
            uncounted_succeeded: &s.uncounted_succeeded,
            uncounted_failed: &s.uncounted_failed,
            finished,
            prev_succeeded_indexes: &s.prev_succeeded_indexes,
            succeeded_indexes: &s.succeeded_indexes,
            failed_indexes: s.failed_indexes.as_ref(),
            delayed: &s.delayed,
            terminating,
            needs_flush,
            backoff_record: s.backoff_record.clone(),
            manage_error,
        });
        plan.events = events;
        plan.metrics = metrics;
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::core::config::Config;
    use crate::job::core::testutil::*;
    use k8s_openapi::api::batch::v1::{Job, PodFailurePolicy};
    use k8s_openapi::api::core::v1::Pod;

    /// One row of upstream's TestControllerSyncJob (same field names), evaluated with the 1.37 feature
    /// gates: `terminating` is always reported and terminal conditions are preceded by
    /// FailureTarget/SuccessCriteriaMet.
    #[derive(Default)]
    struct Row {
        name: &'static str,
        parallelism: i32,
        completions: i32,
        backoff_limit: i32,
        deleting: bool,
        pod_limit: usize,
        indexed: bool,
        was_suspended: bool,
        suspend: bool,
        prp: Option<&'static str>,
        pfp: Option<PodFailurePolicy>,
        initial: Option<(i32, i32, i32)>,
        initial_conditions: Vec<Cond>,
        backoff: Option<BackoffRecord>,
        controller_error: bool,
        pending: usize,
        active: usize,
        ready: usize,
        succeeded: usize,
        failed: usize,
        terminating: usize,
        indexes: Vec<(&'static str, &'static str)>,
        unsatisfied: bool,
        want_creations: usize,
        want_deletions: usize,
        want_active: i32,
        want_ready: i32,
        want_succeeded: i32,
        want_completed: &'static str,
        want_failed: i32,
        want_terminating: i32,
        want_conditions: Vec<Cond>,
        want_created_indexes: Vec<i64>,
        want_patches: usize,
    }

    fn setup(tc: &Row) -> (Job, Vec<Pod>) {
        let mut b = mk_job("foobar", tc.parallelism, tc.completions, tc.backoff_limit).suspend(tc.suspend);
        if tc.indexed {
            b = b.indexed();
        }
        if let Some(p) = tc.prp {
            b = b.replacement_policy(p);
        }
        if let Some(p) = tc.pfp.clone() {
            b = b.pod_failure_policy(p);
        }
        if let Some((a, s, f)) = tc.initial {
            b = b.start_time(now()).counts(a, s, f);
            for (t, st, r, m) in &tc.initial_conditions {
                b = b.condition_full(t, st, r, m);
            }
        }
        if tc.was_suspended {
            b = b.condition_full("Suspended", "True", "JobSuspended", "Job suspended");
        }
        if tc.deleting {
            b = b.deleting();
        }
        let mut pods = pods_with_statuses(tc.pending, tc.active, tc.succeeded, tc.failed, tc.terminating, tc.ready);
        pods.extend(pods_with_indexes(&tc.indexes));
        (b.build(), pods)
    }

    fn check(tc: &Row) {
        let (job, pods) = setup(tc);
        let fake = Fake {
            err: tc.controller_error.then(|| "fake error".to_string()),
            create_limit: tc.pod_limit,
            status_err: false,
        };
        let run = run_sync_with(
            &job,
            &pods,
            RunOpts { expectations_satisfied: !tc.unsatisfied, backoff: tc.backoff.clone(), fake, ..Default::default() },
        );
        let name = tc.name;
        let st = run.status(&job);
        assert_eq!(run.creates.len(), tc.want_creations, "{name}: creations");
        assert_eq!(run.deletes.len(), tc.want_deletions, "{name}: deletions");
        assert_eq!(st.active.unwrap_or(0), tc.want_active, "{name}: active");
        assert_eq!(st.ready, Some(tc.want_ready), "{name}: ready");
        assert_eq!(st.succeeded.unwrap_or(0), tc.want_succeeded, "{name}: succeeded");
        assert_eq!(st.completed_indexes.as_deref().unwrap_or(""), tc.want_completed, "{name}: completedIndexes");
        assert_eq!(st.failed.unwrap_or(0), tc.want_failed, "{name}: failed");
        assert_eq!(st.terminating, Some(tc.want_terminating), "{name}: terminating");
        assert_eq!(st.start_time.is_none(), tc.suspend, "{name}: startTime set iff not suspended");
        assert_eq!(conds(&st), want_conds(&tc.want_conditions), "{name}: conditions");
        assert_eq!(run.patches, tc.want_patches, "{name}: pod patches");
        if tc.indexed {
            assert_eq!(run.created_indexes(), tc.want_created_indexes, "{name}: created indexes");
            for p in &run.creates {
                let ix = &p.metadata.annotations.as_ref().unwrap()[crate::job::core::JOB_COMPLETION_INDEX_ANNOTATION];
                assert_eq!(p.metadata.generate_name.as_deref(), Some(format!("foobar-{ix}-").as_str()), "{name}");
                assert_eq!(p.spec.as_ref().unwrap().hostname.as_deref(), Some(format!("foobar-{ix}").as_str()), "{name}");
            }
        } else {
            for p in &run.creates {
                assert_eq!(p.metadata.generate_name.as_deref(), Some("foobar-"), "{name}");
                assert!(p.spec.as_ref().unwrap().hostname.is_none(), "{name}");
            }
        }
        for p in &run.creates {
            let o = &p.metadata.owner_references.as_ref().unwrap()[0];
            assert_eq!((o.api_version.as_str(), o.kind.as_str(), o.name.as_str()), ("batch/v1", "Job", "foobar"), "{name}");
            assert_eq!((o.controller, o.block_owner_deletion), (Some(true), Some(true)), "{name}");
        }
        let errored = tc.controller_error || (tc.pod_limit > 0 && run.creates.len() >= tc.pod_limit);
        assert_eq!(run.error.is_some(), errored, "{name}: sync error {:?}", run.error);
    }

    fn sm(reason: &'static str, msg: &'static str) -> Vec<Cond> {
        vec![("SuccessCriteriaMet", "True", reason, msg), ("Complete", "True", reason, msg)]
    }

    /// TestControllerSyncJob (job_controller_test.go), gates at their GA values. UPSTREAM.md §2 rows
    /// 1–12 are "job start", "too few active pods", "too many active pods", "more active pods than
    /// remaining completions", "job finish", "WQ job all finished despite one failure", "too many job
    /// failures", "indexed job completed", "indexed job some running and completed pods", "indexed job
    /// with indexes outside of range", "suspending a job with satisfied expectations" / "resuming a
    /// suspended job", and "backoff limit exceeded; JobManagedBy enabled".
    #[test]
    fn controller_sync_job_table() {
        let rows = vec![
            Row { name: "job start", parallelism: 2, completions: 5, backoff_limit: 6, want_creations: 2, want_active: 2, ..Default::default() },
            Row { name: "WQ job start", parallelism: 2, completions: -1, backoff_limit: 6, want_creations: 2, want_active: 2, ..Default::default() },
            Row { name: "pending pods", parallelism: 2, completions: 5, backoff_limit: 6, pending: 2, want_active: 2, ..Default::default() },
            Row {
                name: "correct # of pods",
                parallelism: 3,
                completions: 5,
                backoff_limit: 6,
                active: 3,
                ready: 2,
                want_active: 3,
                want_ready: 2,
                ..Default::default()
            },
            Row { name: "WQ job: correct # of pods", parallelism: 2, completions: -1, backoff_limit: 6, active: 2, want_active: 2, ..Default::default() },
            Row {
                name: "too few active pods",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                active: 1,
                succeeded: 1,
                want_creations: 1,
                want_active: 2,
                want_succeeded: 1,
                want_patches: 1,
                ..Default::default()
            },
            Row {
                name: "WQ job: recreate pods when failed",
                parallelism: 1,
                completions: -1,
                backoff_limit: 6,
                active: 1,
                failed: 1,
                prp: Some("Failed"),
                terminating: 1,
                want_terminating: 1,
                want_patches: 1,
                want_failed: 1,
                want_active: 1,
                ..Default::default()
            },
            Row {
                name: "WQ job: turn on PodReplacementPolicy but not set PodReplacementPolicy",
                parallelism: 1,
                completions: 1,
                backoff_limit: 6,
                active: 1,
                failed: 1,
                terminating: 1,
                want_terminating: 1,
                want_active: 1,
                want_patches: 2,
                want_failed: 2,
                ..Default::default()
            },
            Row {
                name: "WQ job: recreate pods when terminating or failed",
                parallelism: 1,
                completions: -1,
                backoff_limit: 6,
                active: 1,
                failed: 1,
                prp: Some("TerminatingOrFailed"),
                terminating: 1,
                want_terminating: 1,
                want_active: 1,
                want_patches: 2,
                want_failed: 2,
                ..Default::default()
            },
            Row {
                name: "more terminating pods than parallelism",
                parallelism: 1,
                completions: 1,
                backoff_limit: 6,
                active: 2,
                terminating: 4,
                prp: Some("Failed"),
                want_terminating: 5,
                want_active: 1,
                want_deletions: 1,
                want_patches: 1,
                ..Default::default()
            },
            Row {
                name: "more terminating pods than parallelism; PodFailurePolicy used",
                parallelism: 1,
                completions: 1,
                backoff_limit: 6,
                active: 2,
                terminating: 4,
                pfp: Some(PodFailurePolicy::default()),
                want_terminating: 5,
                want_active: 1,
                want_deletions: 1,
                want_patches: 1,
                ..Default::default()
            },
            Row {
                name: "too few active pods and active back-off",
                parallelism: 1,
                completions: 1,
                backoff_limit: 6,
                backoff: Some(BackoffRecord { failures_after_last_success: 1, last_failure_time: Some(now()) }),
                initial: Some((0, 0, 0)),
                ..Default::default()
            },
            Row {
                name: "too few active pods and no back-offs",
                parallelism: 1,
                completions: 1,
                backoff_limit: 6,
                backoff: Some(BackoffRecord { failures_after_last_success: 0, last_failure_time: Some(now()) }),
                want_creations: 1,
                want_active: 1,
                ..Default::default()
            },
            Row {
                name: "too few active pods with a dynamic job",
                parallelism: 2,
                completions: -1,
                backoff_limit: 6,
                active: 1,
                want_creations: 1,
                want_active: 2,
                ..Default::default()
            },
            Row {
                name: "too few active pods, with controller error",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                controller_error: true,
                active: 1,
                succeeded: 1,
                want_creations: 1,
                want_active: 1,
                want_patches: 1,
                ..Default::default()
            },
            Row {
                name: "too many active pods",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                active: 3,
                want_deletions: 1,
                want_active: 2,
                want_patches: 1,
                want_terminating: 1,
                ..Default::default()
            },
            Row {
                name: "too many active pods, with controller error",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                controller_error: true,
                active: 3,
                want_patches: 1,
                want_active: 3,
                ..Default::default()
            },
            Row {
                name: "count ready pods when too many active pods",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                active: 3,
                ready: 3,
                want_deletions: 1,
                want_active: 2,
                want_patches: 1,
                want_ready: 2,
                want_terminating: 1,
                ..Default::default()
            },
            Row {
                name: "failed + succeed pods: reset backoff delay",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                active: 1,
                succeeded: 1,
                failed: 1,
                want_creations: 1,
                want_active: 2,
                want_succeeded: 1,
                want_failed: 1,
                want_patches: 2,
                ..Default::default()
            },
            Row {
                name: "new failed pod",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                active: 1,
                failed: 1,
                want_creations: 1,
                want_active: 2,
                want_failed: 1,
                want_patches: 1,
                ..Default::default()
            },
            Row {
                name: "no new pod; possible finalizer update of failed pod",
                parallelism: 1,
                completions: 1,
                backoff_limit: 6,
                initial: Some((1, 0, 1)),
                active: 1,
                want_active: 1,
                want_failed: 1,
                ..Default::default()
            },
            Row {
                name: "only new failed pod with controller error",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                controller_error: true,
                active: 1,
                failed: 1,
                want_creations: 1,
                want_active: 1,
                want_patches: 1,
                ..Default::default()
            },
            Row {
                name: "job finish",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                succeeded: 5,
                want_succeeded: 5,
                want_conditions: sm(CR, CR_MSG),
                want_patches: 5,
                ..Default::default()
            },
            Row {
                name: "WQ job finishing",
                parallelism: 2,
                completions: -1,
                backoff_limit: 6,
                active: 1,
                succeeded: 1,
                want_active: 1,
                want_succeeded: 1,
                want_patches: 1,
                ..Default::default()
            },
            Row {
                name: "WQ job all finished",
                parallelism: 2,
                completions: -1,
                backoff_limit: 6,
                succeeded: 2,
                want_succeeded: 2,
                want_conditions: sm(CR, CR_MSG),
                want_patches: 2,
                ..Default::default()
            },
            Row {
                name: "WQ job all finished despite one failure",
                parallelism: 2,
                completions: -1,
                backoff_limit: 6,
                succeeded: 1,
                failed: 1,
                want_succeeded: 1,
                want_failed: 1,
                want_conditions: sm(CR, CR_MSG),
                want_patches: 2,
                ..Default::default()
            },
            Row {
                name: "more active pods than parallelism",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                active: 10,
                want_deletions: 8,
                want_active: 2,
                want_patches: 8,
                want_terminating: 8,
                ..Default::default()
            },
            Row {
                name: "more active pods than remaining completions",
                parallelism: 3,
                completions: 4,
                backoff_limit: 6,
                active: 3,
                succeeded: 2,
                want_deletions: 1,
                want_active: 2,
                want_succeeded: 2,
                want_patches: 3,
                want_terminating: 1,
                ..Default::default()
            },
            Row {
                name: "status change",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                active: 2,
                succeeded: 2,
                want_active: 2,
                want_succeeded: 2,
                want_patches: 2,
                ..Default::default()
            },
            Row {
                name: "deleting job",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                deleting: true,
                pending: 1,
                active: 1,
                succeeded: 1,
                want_active: 2,
                want_succeeded: 1,
                want_patches: 3,
                ..Default::default()
            },
            Row {
                name: "limited pods",
                parallelism: 100,
                completions: 200,
                backoff_limit: 6,
                pod_limit: 10,
                want_creations: 10,
                want_active: 10,
                ..Default::default()
            },
            Row {
                name: "too many job failures",
                parallelism: 2,
                completions: 5,
                deleting: true,
                failed: 1,
                want_failed: 1,
                want_conditions: vec![("FailureTarget", "True", BLE, BLE_MSG), ("Failed", "True", BLE, BLE_MSG)],
                want_patches: 1,
                ..Default::default()
            },
            Row {
                name: "job failures, unsatisfied expectations",
                parallelism: 2,
                completions: 5,
                deleting: true,
                failed: 1,
                unsatisfied: true,
                want_failed: 1,
                want_patches: 1,
                ..Default::default()
            },
            Row {
                name: "indexed job start",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                indexed: true,
                want_creations: 2,
                want_active: 2,
                want_created_indexes: vec![0, 1],
                ..Default::default()
            },
            Row {
                name: "indexed job with some pods deleted, podReplacementPolicy Failed",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                indexed: true,
                prp: Some("Failed"),
                terminating: 1,
                want_creations: 1,
                want_active: 1,
                want_created_indexes: vec![0],
                want_terminating: 1,
                ..Default::default()
            },
            Row {
                name: "indexed job with some pods deleted, podReplacementPolicy TerminatingOrFailed",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                indexed: true,
                prp: Some("TerminatingOrFailed"),
                terminating: 1,
                want_creations: 2,
                want_active: 2,
                want_created_indexes: vec![0, 1],
                want_terminating: 1,
                want_patches: 1,
                ..Default::default()
            },
            Row {
                name: "indexed job completed",
                parallelism: 2,
                completions: 3,
                backoff_limit: 6,
                indexed: true,
                indexes: vec![("0", "Succeeded"), ("1", "Failed"), ("1", "Succeeded"), ("2", "Succeeded")],
                want_succeeded: 3,
                want_failed: 1,
                want_completed: "0-2",
                want_conditions: sm(CR, CR_MSG),
                want_patches: 4,
                ..Default::default()
            },
            Row {
                name: "count terminating pods when indexed job fails and PodReplacementPolicy enabled",
                parallelism: 2,
                completions: 3,
                backoff_limit: 0,
                indexed: true,
                indexes: vec![("0", "Succeeded"), ("1", "Failed"), ("2", "Running")],
                want_succeeded: 1,
                want_failed: 2,
                want_completed: "0",
                want_conditions: vec![("FailureTarget", "True", BLE, BLE_MSG)],
                want_patches: 3,
                want_deletions: 1,
                want_terminating: 1,
                ..Default::default()
            },
            Row {
                name: "count ready pods when job fails",
                parallelism: 2,
                completions: 3,
                backoff_limit: 0,
                active: 2,
                ready: 2,
                failed: 1,
                want_failed: 3,
                want_conditions: vec![("FailureTarget", "True", BLE, BLE_MSG)],
                want_patches: 3,
                want_deletions: 2,
                want_terminating: 2,
                ..Default::default()
            },
            Row {
                name: "indexed job repeated completed index",
                parallelism: 2,
                completions: 3,
                backoff_limit: 6,
                indexed: true,
                indexes: vec![("0", "Succeeded"), ("1", "Succeeded"), ("1", "Succeeded")],
                want_creations: 1,
                want_active: 1,
                want_succeeded: 2,
                want_completed: "0,1",
                want_created_indexes: vec![2],
                want_patches: 3,
                ..Default::default()
            },
            Row {
                name: "indexed job some running and completed pods",
                parallelism: 8,
                completions: 20,
                backoff_limit: 6,
                indexed: true,
                indexes: vec![
                    ("0", "Running"),
                    ("2", "Succeeded"),
                    ("3", "Pending"),
                    ("4", "Succeeded"),
                    ("5", "Succeeded"),
                    ("7", "Succeeded"),
                    ("8", "Succeeded"),
                    ("9", "Succeeded"),
                ],
                want_creations: 6,
                want_active: 8,
                want_succeeded: 6,
                want_completed: "2,4,5,7-9",
                want_created_indexes: vec![1, 6, 10, 11, 12, 13],
                want_patches: 6,
                ..Default::default()
            },
            Row {
                name: "indexed job some failed pods",
                parallelism: 3,
                completions: 4,
                backoff_limit: 6,
                indexed: true,
                indexes: vec![("0", "Failed"), ("1", "Pending"), ("2", "Failed")],
                want_creations: 2,
                want_active: 3,
                want_failed: 2,
                want_created_indexes: vec![0, 2],
                want_patches: 2,
                ..Default::default()
            },
            Row {
                name: "indexed job some pods without index",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                indexed: true,
                active: 1,
                succeeded: 1,
                failed: 1,
                indexes: vec![
                    ("invalid", "Running"),
                    ("invalid", "Succeeded"),
                    ("invalid", "Failed"),
                    ("invalid", "Pending"),
                    ("0", "Succeeded"),
                    ("1", "Running"),
                    ("2", "Running"),
                ],
                want_deletions: 3,
                want_active: 2,
                want_succeeded: 1,
                want_completed: "0",
                want_patches: 8,
                want_terminating: 3,
                ..Default::default()
            },
            Row {
                name: "indexed job repeated indexes",
                parallelism: 5,
                completions: 5,
                backoff_limit: 6,
                indexed: true,
                succeeded: 1,
                failed: 1,
                indexes: vec![("invalid", "Running"), ("0", "Succeeded"), ("1", "Running"), ("2", "Running"), ("2", "Pending")],
                want_deletions: 2,
                want_active: 2,
                want_succeeded: 1,
                want_completed: "0",
                want_patches: 5,
                want_terminating: 2,
                ..Default::default()
            },
            Row {
                name: "indexed job with indexes outside of range",
                parallelism: 2,
                completions: 5,
                backoff_limit: 6,
                indexed: true,
                indexes: vec![("0", "Succeeded"), ("5", "Running"), ("6", "Succeeded"), ("7", "Pending"), ("8", "Failed")],
                want_succeeded: 1,
                want_deletions: 2,
                want_completed: "0",
                want_patches: 5,
                want_terminating: 2,
                ..Default::default()
            },
            Row {
                name: "suspending a job with satisfied expectations",
                suspend: true,
                parallelism: 2,
                active: 2,
                completions: 4,
                backoff_limit: 6,
                want_deletions: 2,
                want_conditions: vec![("Suspended", "True", "JobSuspended", "Job suspended")],
                want_patches: 2,
                want_terminating: 2,
                ..Default::default()
            },
            Row {
                name: "count ready pods when suspending a job with satisfied expectations",
                suspend: true,
                parallelism: 2,
                active: 2,
                ready: 2,
                completions: 4,
                backoff_limit: 6,
                want_deletions: 2,
                want_conditions: vec![("Suspended", "True", "JobSuspended", "Job suspended")],
                want_patches: 2,
                want_terminating: 2,
                ..Default::default()
            },
            Row {
                name: "suspending a job with unsatisfied expectations",
                suspend: true,
                parallelism: 2,
                active: 3,
                unsatisfied: true,
                completions: 4,
                backoff_limit: 6,
                want_active: 3,
                ..Default::default()
            },
            Row {
                name: "count ready pods when suspending a job with unsatisfied expectations",
                suspend: true,
                parallelism: 2,
                active: 3,
                ready: 3,
                unsatisfied: true,
                completions: 4,
                backoff_limit: 6,
                want_active: 3,
                want_ready: 3,
                ..Default::default()
            },
            Row {
                name: "resuming a suspended job",
                was_suspended: true,
                parallelism: 2,
                completions: 4,
                backoff_limit: 6,
                want_creations: 2,
                want_active: 2,
                want_conditions: vec![("Suspended", "False", "JobResumed", "Job resumed")],
                ..Default::default()
            },
            Row {
                name: "suspending a deleted job",
                suspend: true,
                deleting: true,
                parallelism: 2,
                active: 2,
                completions: 4,
                backoff_limit: 6,
                want_active: 2,
                want_patches: 2,
                ..Default::default()
            },
            Row {
                name: "FailureTarget=False condition added manually is ignored",
                parallelism: 1,
                completions: 1,
                active: 1,
                ready: 1,
                initial: Some((1, 0, 0)),
                initial_conditions: vec![("FailureTarget", "False", "ConditionAddedManually", "Testing")],
                want_active: 1,
                want_ready: 1,
                want_conditions: vec![("FailureTarget", "False", "ConditionAddedManually", "Testing")],
                ..Default::default()
            },
            Row {
                name: "SuccessCriteriaMet=False condition added manually is ignored",
                parallelism: 1,
                completions: 1,
                active: 1,
                ready: 1,
                initial: Some((1, 0, 0)),
                initial_conditions: vec![("SuccessCriteriaMet", "False", "ConditionAddedManually", "Testing")],
                want_active: 1,
                want_ready: 1,
                want_conditions: vec![("SuccessCriteriaMet", "False", "ConditionAddedManually", "Testing")],
                ..Default::default()
            },
            Row {
                name: "backoff limit exceeded; JobManagedBy enabled",
                parallelism: 2,
                completions: 3,
                backoff_limit: 0,
                indexed: true,
                indexes: vec![("0", "Succeeded"), ("1", "Failed"), ("2", "Running")],
                want_succeeded: 1,
                want_failed: 2,
                want_completed: "0",
                want_conditions: vec![("FailureTarget", "True", BLE, BLE_MSG)],
                want_patches: 3,
                want_deletions: 1,
                want_terminating: 1,
                ..Default::default()
            },
        ];
        assert!(rows.len() >= 50, "{} rows", rows.len());
        for row in &rows {
            check(row);
        }
    }

    /// "too few active pods and active back-off": the pod waits 10s·2^0 and the Job is requeued then.
    #[test]
    fn back_off_requeues_at_remaining_delay() {
        let job = mk_job("foobar", 1, 1, 6).start_time(now()).build();
        let rec = BackoffRecord { failures_after_last_success: 1, last_failure_time: Some(secs_ago(3)) };
        let run = run_sync_with(&job, &[], RunOpts { backoff: Some(rec), ..Default::default() });
        assert_eq!(run.creates.len(), 0);
        assert_eq!(run.action, Some(SyncAction::PodsCreated));
        assert_eq!(run.requeue, Some(Duration::from_secs(7)));
        // A running, ready pod keeps counting as active while the replacement waits (k/k#139428).
        let pods = pods_with_statuses(0, 1, 0, 0, 0, 1);
        let job = mk_job("foobar", 2, 2, 6).start_time(now()).build();
        let rec = BackoffRecord { failures_after_last_success: 2, last_failure_time: Some(now()) };
        let run = run_sync_with(&job, &pods, RunOpts { backoff: Some(rec), ..Default::default() });
        let st = run.status(&job);
        assert_eq!((st.active, st.ready), (Some(1), Some(1)));
        assert_eq!(run.requeue, Some(Duration::from_secs(20)));
    }

    /// TestSyncJobPastDeadline, gates on (the "JobManagedBy enabled" expectations), and UPSTREAM.md §2
    /// row 13.
    #[test]
    fn sync_job_past_deadline_table() {
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, i32, i32, i64, i64, i32, bool, usize, usize, usize, usize, i32, i32, Vec<Cond>)> = vec![
            (
                "activeDeadlineSeconds less than single pod execution",
                1, 1, 10, 15, 6, false, 1, 0, 0,
                1, 0, 1,
                vec![("FailureTarget", "True", DE, DE_MSG)],
            ),
            (
                "activeDeadlineSeconds bigger than single pod execution",
                1, 2, 10, 15, 6, false, 1, 1, 0,
                1, 1, 1,
                vec![("FailureTarget", "True", DE, DE_MSG)],
            ),
            (
                "activeDeadlineSeconds times-out before any pod starts",
                1, 1, 10, 10, 6, false, 0, 0, 0,
                0, 0, 0,
                vec![("FailureTarget", "True", DE, DE_MSG), ("Failed", "True", DE, DE_MSG)],
            ),
            (
                "activeDeadlineSeconds with backofflimit reach",
                1, 1, 1, 10, 0, false, 0, 0, 1,
                0, 0, 1,
                vec![("FailureTarget", "True", BLE, BLE_MSG), ("Failed", "True", BLE, BLE_MSG)],
            ),
            (
                "activeDeadlineSeconds is not triggered when Job is suspended",
                1, 2, 10, 15, 6, true, 0, 0, 0,
                0, 0, 0,
                vec![("Suspended", "True", "JobSuspended", "Job suspended")],
            ),
        ];
        for (name, p, c, ads, start, bl, suspend, active, succeeded, failed, want_del, want_succ, want_failed, want) in
            cases
        {
            let job = mk_job("foobar", p, c, bl).active_deadline(ads).suspend(suspend).start_time(secs_ago(start)).build();
            let pods = pods_with_statuses(0, active, succeeded, failed, 0, 0);
            let run = run_sync(&job, &pods);
            let st = run.status(&job);
            assert_eq!(run.creates.len(), 0, "{name}");
            assert_eq!(run.deletes.len(), want_del, "{name}: deletions");
            assert_eq!(st.active.unwrap_or(0), 0, "{name}: active");
            assert_eq!(st.succeeded.unwrap_or(0), want_succ, "{name}: succeeded");
            assert_eq!(st.failed.unwrap_or(0), want_failed, "{name}: failed");
            assert!(st.start_time.is_some(), "{name}: startTime");
            assert_eq!(conds(&st), want_conds(&want), "{name}: conditions");
        }
        // Not yet past the deadline: requeue when it expires.
        let job = mk_job("foobar", 1, 1, 6).active_deadline(10).start_time(secs_ago(4)).build();
        let run = run_sync(&job, &pods_with_statuses(0, 1, 0, 0, 0, 0));
        assert_eq!(run.requeue, Some(Duration::from_secs(6)));
    }

    /// TestSyncJobWhenManagedBy (feature enabled rows) plus batchfleet's configurable managedBy.
    #[test]
    fn sync_job_when_managed_by() {
        let base = || mk_job("foobar", 2, 2, 6).counts(1, 0, 0).ready(1).start_time(secs_ago(5));
        let run = run_sync(&base().managed_by("custom-managed-by").build(), &[]);
        assert_eq!(run.skip.unwrap().reason, SkipReason::ManagedByOther("custom-managed-by".into()));
        for job in [base().managed_by("kubernetes.io/job-controller").build(), base().build()] {
            let run = run_sync(&job, &[]);
            let st = run.status(&job);
            let want = k8s_openapi::api::batch::v1::JobStatus {
                active: Some(2),
                ready: Some(0),
                terminating: Some(0),
                start_time: Some(secs_ago(5).into()),
                uncounted_terminated_pods: Some(Default::default()),
                ..Default::default()
            };
            assert_eq!(st, want);
        }
        let fleet = Config { managed_by: "batchfleet.io/job-controller".into(), ..Config::default() };
        let run = run_sync_with(&base().build(), &[], RunOpts { config: fleet.clone(), ..Default::default() });
        assert_eq!(run.skip.unwrap().reason, SkipReason::ManagedByOther("kubernetes.io/job-controller".into()));
        let run = run_sync_with(&base().managed_by("batchfleet.io/job-controller").build(), &[], RunOpts { config: fleet, ..Default::default() });
        assert_eq!(run.creates.len(), 2);
    }

    /// TestSyncJobComplete ("a finished Job is a no-op") and the UnknownCompletionMode warning.
    #[test]
    fn finished_and_unknown_mode_jobs_are_skipped() {
        let done = mk_job("foobar", 1, 1, 6).condition("Complete", "True").build();
        let run = run_sync(&done, &pods_with_statuses(0, 1, 0, 0, 0, 0));
        let skip = run.skip.unwrap();
        assert_eq!((skip.reason, skip.forget_backoff_record), (SkipReason::Finished, true));
        let odd = mk_job("foobar", 1, 1, 6).completion_mode("Sideways").build();
        let run = run_sync(&odd, &[]);
        assert_eq!(run.skip.unwrap().reason, SkipReason::UnknownCompletionMode("Sideways".into()));
        assert_eq!(
            run.events,
            vec![Event::warning("UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")]
        );
    }

    /// TestSingleJobFailedCondition: a Failed=False condition is flipped to True (deadline exceeded;
    /// with the gates on it goes through FailureTarget).
    #[test]
    fn single_job_failed_condition() {
        let job = mk_job("foobar", 1, 1, 6)
            .active_deadline(10)
            .start_time(secs_ago(15))
            .condition_full("Failed", "False", DE, DE_MSG)
            .build();
        let run = run_sync(&job, &[]);
        let st = run.status(&job);
        assert_eq!(
            conds(&st),
            want_conds(&[("Failed", "True", DE, DE_MSG), ("FailureTarget", "True", DE, DE_MSG)]),
            "the existing Failed condition is updated in place"
        );
        assert_eq!(run.deletes.len(), 0);
    }

    /// TestSyncJobExpectations: unsatisfied expectations never create or delete.
    #[test]
    fn sync_job_expectations() {
        let job = mk_job("foobar", 2, 2, 6).build();
        let pods = pods_with_statuses(1, 0, 0, 0, 0, 0);
        let run = run_sync_with(&job, &pods, RunOpts { expectations_satisfied: false, ..Default::default() });
        assert_eq!((run.creates.len(), run.deletes.len()), (0, 0));
        assert_eq!(run.action, Some(SyncAction::Reconciling));
    }

    /// TestJobBackoffForOnFailure (gates on: FailureTarget first while pods are terminating).
    #[test]
    fn job_backoff_for_on_failure_table() {
        let ft = vec![("FailureTarget", "True", BLE, BLE_MSG)];
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, i32, i32, i32, bool, Vec<i32>, &str, i32, i32, i32, Vec<Cond>)> = vec![
            ("backoffLimit 0 should have 1 pod active", 1, 1, 0, false, vec![0], "Running", 1, 0, 0, vec![]),
            ("backoffLimit 1 with restartCount 0 should have 1 pod active", 1, 1, 1, false, vec![0], "Running", 1, 0, 0, vec![]),
            ("backoffLimit 1 with restartCount 1 and podRunning should have 0 pod active", 1, 1, 1, false, vec![1], "Running", 0, 0, 1, ft.clone()),
            ("backoffLimit 1 with restartCount 1 and podPending should have 0 pod active", 1, 1, 1, false, vec![1], "Pending", 0, 0, 1, ft.clone()),
            ("too many job failures with podRunning - single pod", 1, 5, 2, false, vec![2], "Running", 0, 0, 1, ft.clone()),
            ("too many job failures with podPending - single pod", 1, 5, 2, false, vec![2], "Pending", 0, 0, 1, ft.clone()),
            ("too many job failures with podRunning - multiple pods", 2, 5, 2, false, vec![1, 1], "Running", 0, 0, 2, ft.clone()),
            ("too many job failures with podPending - multiple pods", 2, 5, 2, false, vec![1, 1], "Pending", 0, 0, 2, ft.clone()),
            ("not enough failures", 2, 5, 3, false, vec![1, 1], "Running", 2, 0, 0, vec![]),
            (
                "suspending a job",
                2, 4, 6, true, vec![1, 1], "Running", 0, 0, 0,
                vec![("Suspended", "True", "JobSuspended", "Job suspended")],
            ),
            ("finished job", 2, 4, 6, true, vec![1, 1, 2, 0], "Succeeded", 0, 4, 0, sm(CR, CR_MSG)),
        ];
        for (name, p, c, bl, suspend, restarts, phase, want_active, want_succ, want_failed, want) in cases {
            let job = mk_job("foobar", p, c, bl).restart_policy("OnFailure").suspend(suspend).build();
            let pods: Vec<Pod> = restarts
                .iter()
                .enumerate()
                .map(|(i, &r)| {
                    let mut pod = mk_pod(&format!("p{i}")).phase(phase).finalizer().build();
                    pod.status.as_mut().unwrap().container_statuses =
                        Some(vec![k8s_openapi::api::core::v1::ContainerStatus { restart_count: r, ..Default::default() }]);
                    pod
                })
                .collect();
            let run = run_sync(&job, &pods);
            let st = run.status(&job);
            assert_eq!(st.active.unwrap_or(0), want_active, "{name}: active");
            assert_eq!(st.succeeded.unwrap_or(0), want_succ, "{name}: succeeded");
            assert_eq!(st.failed.unwrap_or(0), want_failed, "{name}: failed");
            assert_eq!(conds(&st), want_conds(&want), "{name}: conditions");
        }
    }

    /// TestJobBackoffOnRestartPolicyNever.
    #[test]
    fn job_backoff_on_restart_policy_never_table() {
        let fail = vec![("FailureTarget", "True", BLE, BLE_MSG), ("Failed", "True", BLE, BLE_MSG)];
        #[allow(clippy::type_complexity)]
        let cases: Vec<(&str, i32, i32, i32, usize, usize, i32, i32, Vec<Cond>)> = vec![
            ("not enough failures with backoffLimit 0 - single pod", 1, 1, 0, 1, 0, 1, 0, vec![]),
            ("not enough failures with backoffLimit 1 - single pod", 1, 1, 1, 0, 1, 1, 1, vec![]),
            ("too many failures with backoffLimit 1 - single pod", 1, 1, 1, 0, 2, 0, 2, fail.clone()),
            ("not enough failures with backoffLimit 6 - multiple pods", 2, 2, 6, 1, 6, 2, 6, vec![]),
            ("too many failures with backoffLimit 6 - multiple pods", 2, 2, 6, 0, 7, 0, 7, fail),
        ];
        for (name, p, c, bl, active, failed, want_active, want_failed, want) in cases {
            let job = mk_job("foobar", p, c, bl).restart_policy("Never").build();
            let pods = pods_with_statuses(0, active, 0, failed, 0, 0);
            let st = run_sync(&job, &pods).status(&job);
            assert_eq!(st.active.unwrap_or(0), want_active, "{name}: active");
            assert_eq!(st.failed.unwrap_or(0), want_failed, "{name}: failed");
            assert_eq!(conds(&st), want_conds(&want), "{name}: conditions");
        }
    }

    /// UPSTREAM.md §2 row 11: suspend deletes, then resume creates and resets startTime; events.
    #[test]
    fn suspend_then_resume_events_and_start_time() {
        let job = mk_job("foobar", 2, 5, 6).suspend(true).start_time(secs_ago(100)).build();
        let run = run_sync(&job, &pods_with_statuses(0, 2, 0, 0, 0, 0));
        assert_eq!(run.deletes.len(), 2);
        assert!(run.events.contains(&Event::normal("Suspended", "Job suspended")));
        assert_eq!(run.events.iter().filter(|e| e.reason == "SuccessfulDelete").count(), 2);
        let st = run.status(&job);
        assert_eq!(st.start_time, Some(secs_ago(100).into()), "suspending keeps startTime");
        let mut resumed = job.clone();
        resumed.spec.as_mut().unwrap().suspend = Some(false);
        resumed.status = Some(st);
        let run = run_sync(&resumed, &[]);
        assert_eq!(run.creates.len(), 2);
        assert!(run.events.contains(&Event::normal("Resumed", "Job resumed")));
        let st = run.status(&resumed);
        assert_eq!(st.start_time, Some(now().into()), "resuming resets startTime");
        assert_eq!(conds(&st), want_conds(&[("Suspended", "False", "JobResumed", "Job resumed")]));
    }

    /// Events and metrics of a full success (recordJobFinished, recordJobPodFinished) and the
    /// TooManySucceededPods warning.
    #[test]
    fn completion_events_and_metrics() {
        let job = mk_job("foobar", 2, 2, 6).build();
        let run = run_sync(&job, &pods_with_statuses(0, 0, 3, 0, 0, 0));
        assert_eq!(
            run.events,
            vec![
                Event::warning("TooManySucceededPods", "Too many succeeded pods running after completion count reached"),
                Event::normal("Completed", "Job completed"),
            ]
        );
        assert!(run.metrics.contains(&Metric::JobsFinished {
            completion_mode: "NonIndexed",
            result: "succeeded",
            reason: String::new()
        }));
        assert_eq!(run.pods_finished_metric("succeeded"), 3);
        let st = run.status(&job);
        assert!(st.completion_time.is_some());
        // The failure event carries the condition's reason and message.
        let job = mk_job("foobar", 1, 1, 0).build();
        let run = run_sync(&job, &pods_with_statuses(0, 0, 0, 1, 0, 0));
        assert_eq!(run.events, vec![Event::warning(BLE, BLE_MSG)]);
        assert!(run.metrics.contains(&Metric::JobsFinished {
            completion_mode: "NonIndexed",
            result: "failed",
            reason: BLE.into()
        }));
    }

    /// Pod events and job_pods_creation_total, slow start (TestControllerSyncJob "limited pods").
    #[test]
    fn pod_events_and_slow_start() {
        assert_eq!(slow_start_batches(0), vec![]);
        assert_eq!(slow_start_batches(10), vec![0..1, 1..3, 3..7, 7..10]);
        let job = mk_job("foobar", 100, 200, 6).build();
        let run = run_sync_with(&job, &[], RunOpts { fake: Fake { create_limit: 10, ..Default::default() }, ..Default::default() });
        assert_eq!(run.events.iter().filter(|e| e.reason == "SuccessfulCreate").count(), 10);
        assert_eq!(run.events.iter().filter(|e| e.reason == "FailedCreate").count(), 5);
        assert!(run.metrics.contains(&Metric::JobPodsCreation { reason: "new", status: "failed", delta: 5 }));
        assert!(run.metrics.contains(&Metric::JobPodsCreation { reason: "new", status: "succeeded", delta: 15 }));
        assert!(matches!(run.error, Some(SyncError::CreatePods(_))));
        // MaxPodCreateDeletePerSync caps one sync's creations.
        let run = run_sync(&mk_job("foobar", 1000, 1000, 6).build(), &[]);
        assert_eq!(run.creates.len(), 500);
    }
}
