//! `syncJob`: counting, the failure/success decision, the choice between finishing and managing the
//! pods, and the fold of pod-operation results into the status (then handed to tracking).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::JobCondition;

use super::backoff::{BackoffRecord, new_backoff_record};
use super::conditions::{self, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED, TRUE, new_condition};
use super::counted_pods::{CountedPods, counted_pods};
use super::indexed::{
    calculate_failed_indexes, calculate_succeeded_indexes, pods_with_delayed_deletion_per_index,
};
use super::intervals::OrderedIntervals;
use super::manage::{ManageInput, ManageOps, manage_job};
use super::plan::{
    CreateOutcome, CreatePlan, DeleteOutcome, Event, JobPlan, Metric, PodOpResults, PodOps, Skip, SkipReason,
    StatusPlan, SyncAction, SyncError, SyncInput, SyncPlan,
};
use super::stall::{self, StallRecord};
use super::status_size::{self, StatusSize};
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
    /// The stall record as the sync found it.
    stall: StallRecord,
    /// The config, when the stall signals are on.
    stall_config: Option<super::config::Config>,
    /// Creates wait on the pod-failure back-off until then, for this many pods.
    backoff_until: Option<(Timestamp, usize)>,
    /// Nodes holding this Job's pods stuck Terminating while the Job waits on them, and how many
    /// such pods.
    lost_nodes: (Vec<String>, usize),
    /// The Job's estimated size after this sync and the guard's limit, for an Indexed Job with the
    /// size guard on.
    status_size: Option<(StatusSize, u64)>,
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
            counted_pods: CountedPods::default(),
        });
    }
    if conditions::is_job_finished(job) {
        return JobPlan::Skip(Skip {
            reason: SkipReason::Finished,
            events: Vec::new(),
            forget_backoff_record: true,
            counted_pods: counted_pods(job, input.pods),
        });
    }
    if let Some(mode) = job.spec.as_ref().and_then(|s| s.completion_mode.as_deref())
        && mode != NON_INDEXED
        && mode != INDEXED
    {
        return JobPlan::Skip(Skip {
            reason: SkipReason::UnknownCompletionMode(mode.to_string()),
            events: vec![Event::warning(
                "UnknownCompletionMode",
                "Skipped Job sync because completion mode is unknown",
            )],
            forget_backoff_record: false,
            counted_pods: CountedPods::default(),
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
        .filter(|p| p.tracked() && !uncounted_succeeded.contains(p.uid()) && counts_for_job(p))
        .filter(|p| p.phase == Phase::Succeeded)
        .collect();
    let new_failed: Vec<&PodFacts> = facts
        .iter()
        .filter(|p| p.tracked() && !uncounted_failed.contains(p.uid()) && counts_for_job(p))
        .filter(|p| p.failed)
        .collect();
    let mut succeeded =
        i64::from(status.succeeded) + new_succeeded.len() as i64 + uncounted_succeeded.len() as i64;
    let non_ignored =
        new_failed.iter().filter(|p| view.pod_failure_policy.is_none() || p.pfp.count_failed).count();
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
            finished = Some(new_condition(
                FAILED,
                TRUE,
                conditions::reason(target),
                conditions::message(target),
                now,
            ));
        } else if let Some(msg) =
            facts.iter().filter(|p| p.failed).find_map(|p| p.pfp.fail_job_message.as_deref())
        {
            finished = Some(failure(conditions::REASON_POD_FAILURE_POLICY, msg));
        }
    }
    if finished.is_none() {
        if failed > i64::from(view.backoff_limit) || past_backoff_limit_on_failure(&view, &facts) {
            finished = Some(failure(
                conditions::REASON_BACKOFF_LIMIT_EXCEEDED,
                conditions::MSG_BACKOFF_LIMIT_EXCEEDED,
            ));
        } else if let Some(remaining) = active_deadline_remaining(&view, &status, now) {
            if remaining <= SignedDuration::ZERO {
                finished =
                    Some(failure(conditions::REASON_DEADLINE_EXCEEDED, conditions::MSG_DEADLINE_EXCEEDED));
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
                } else if failed_ix.total() > 0
                    && failed_ix.total() + succeeded_indexes.total() >= completions
                {
                    finished =
                        Some(failure(conditions::REASON_FAILED_INDEXES, conditions::MSG_FAILED_INDEXES));
                }
            }
            delayed =
                pods_with_delayed_deletion_per_index(&facts, completions, &succeeded_indexes, &failed_ix);
            failed_indexes = Some(failed_ix);
        }
        if finished.is_none()
            && let Some(msg) = match_success_policy(view.success_policy, completions, &succeeded_indexes)
        {
            finished =
                Some(new_condition(SUCCESS_CRITERIA_MET, TRUE, conditions::REASON_SUCCESS_POLICY, &msg, now));
        }
    }

    let finishing = finished.is_some();
    let mut action = SyncAction::Reconciling;
    let mut pod_ops = PodOps::None;
    let mut deleting_pods = Vec::new();
    let mut creation_reason = "new";
    let mut manage_called = false;
    let mut backoff_until = None;
    if finishing {
        if !active.is_empty() {
            pod_ops = PodOps::DeleteActive(active.iter().map(|&i| facts[i].pod_ref()).collect());
            deleting_pods = active.clone();
        }
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
        backoff_until = decision.backoff_until;
        requeue = match (requeue, decision.requeue) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match decision.ops {
            ManageOps::None => {}
            ManageOps::Delete(pods) if pods.is_empty() => {}
            ManageOps::Create { pods, .. } if pods.is_empty() => {}
            ManageOps::Delete(pods) => {
                pod_ops =
                    PodOps::RemoveFinalizerAndDelete(pods.iter().map(|&i| facts[i].pod_ref()).collect());
                deleting_pods = pods;
            }
            ManageOps::Create { pods, reason } => {
                creation_reason = reason;
                let batches = slow_start_batches(pods.len());
                pod_ops = PodOps::Create(CreatePlan { pods, batches });
            }
        }
    }

    // A Job waits on Terminating pods when it only replaces failed pods, or when it is finishing
    // (its terminal condition waits until every pod has terminated).
    let waits_on_terminating = view.only_replace_failed || finishing;
    let lost_nodes = if cfg.stall_signals && waits_on_terminating {
        let terminating: Vec<(&str, Timestamp)> = facts
            .iter()
            .filter(|p| p.terminating())
            .filter_map(|p| {
                let deadline = p.pod.metadata.deletion_timestamp.as_ref()?.0;
                let node = p.pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("");
                Some((node, deadline))
            })
            .collect();
        // Nothing else syncs a Job whose pods just stay Terminating: come back when the next
        // one becomes stuck.
        if let Some(next) = stall::next_stuck_in(terminating.iter().copied(), now) {
            requeue = Some(requeue.map_or(next, |r| r.min(next)));
        }
        let nodes = stall::lost_nodes(terminating.iter().copied(), now);
        let pods = terminating.iter().filter(|&&(n, d)| stall::is_stuck(n, d, now)).count();
        (nodes, pods)
    } else {
        (Vec::new(), 0)
    };

    // Only Indexed Jobs have index strings that grow with the Job.
    let status_size = (view.indexed && cfg.status_size_limit_bytes > 0).then(|| {
        let size = status_size::estimate(job, &succeeded_indexes, failed_indexes.as_ref());
        (size, cfg.status_size_limit_bytes)
    });

    JobPlan::Sync(Box::new(SyncPlan {
        completion_mode: view.completion_mode(),
        action,
        pod_ops,
        requeue_after: requeue,
        counted_pods: counted_pods(job, input.pods),
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
            stall: input.stall.cloned().unwrap_or_default(),
            stall_config: cfg.stall_signals.then(|| cfg.clone()),
            backoff_until,
            lost_nodes,
            status_size,
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
fn active_deadline_remaining(
    view: &JobView<'_>,
    status: &WorkStatus,
    now: Timestamp,
) -> Option<SignedDuration> {
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
        let mut deleted = 0i64;
        let mut created_some = false;
        let mut refusal = None;
        match &self.pod_ops {
            PodOps::None => {}
            PodOps::DeleteActive(pods) | PodOps::RemoveFinalizerAndDelete(pods) => {
                let outcomes: &[DeleteOutcome] = match results {
                    PodOpResults::Deletes(o) => o,
                    _ => &[],
                };
                let finalizer_first = matches!(self.pod_ops, PodOps::RemoveFinalizerAndDelete(_));
                let mut deleted_ready = 0i64;
                for (k, pod) in pods.iter().enumerate() {
                    let outcome = outcomes
                        .get(k)
                        .cloned()
                        .unwrap_or_else(|| DeleteOutcome::DeleteFailed("no result".into()));
                    let is_ready = s.deleting_pods.get(k).is_some_and(|&i| s.facts[i].ready);
                    match &outcome {
                        DeleteOutcome::Deleted => {
                            events.push(Event::normal(
                                "SuccessfulDelete",
                                format!("Deleted pod: {}", pod.name),
                            ));
                        }
                        DeleteOutcome::DeleteFailed(msg) => {
                            events.push(Event::warning("FailedDelete", format!("Error deleting: {msg}")));
                            manage_error.get_or_insert_with(|| SyncError::DeletePods(msg.clone()));
                        }
                        DeleteOutcome::PatchFailed(msg) => {
                            manage_error
                                .get_or_insert_with(|| SyncError::RemoveFinalizerBeforeDelete(msg.clone()));
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
                let mut first_refusal = None;
                for k in 0..plan.pods.len() {
                    match outcomes.get(k).unwrap_or(&CreateOutcome::Skipped) {
                        CreateOutcome::Created(name) => {
                            attempted += 1;
                            active += 1;
                            events.push(Event::normal("SuccessfulCreate", format!("Created pod: {name}")));
                        }
                        CreateOutcome::Failed(msg) | CreateOutcome::Refused(msg, _) => {
                            if let CreateOutcome::Refused(_, refusal) = &outcomes[k] {
                                first_refusal.get_or_insert(refusal);
                            }
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
                    metrics.push(Metric::JobPodsCreation {
                        reason: s.creation_reason,
                        status: "failed",
                        delta: failed,
                    });
                }
                created_some = attempted > failed;
                refusal = first_refusal.cloned();
            }
        }

        if s.finishing && (deleted != s.active || !s.expectations_satisfied) {
            // Pods or finalizers may remain; declare the Job finished in a later sync.
            finished = None;
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
                    if conditions::ensure_status(
                        &mut status.conditions,
                        SUSPENDED,
                        conditions::FALSE,
                        r,
                        m,
                        now,
                    ) {
                        suspend_changed = true;
                        events.push(Event::normal("Resumed", "Job resumed"));
                        // ActiveDeadlineSeconds counts the time the Job is continuously active.
                        status.start_time = Some(now.into());
                    }
                }
            }
        }

        let mut stall_record = s.stall.clone();
        let mut stall_changed = false;
        if let Some(cfg) = &s.stall_config {
            stall_changed = self.stall_signals(
                cfg,
                created_some,
                refusal.as_ref(),
                &mut status.conditions,
                &mut stall_record,
                &mut events,
            );
        }

        let mut size_changed = false;
        if let Some((size, limit)) = &s.status_size {
            size_changed = status_size::apply(size, *limit, &mut status.conditions, &mut events, s.job.now);
        }

        let to_i32 = |v: i64| i32::try_from(v.max(0)).unwrap_or(i32::MAX);
        let (active, ready, terminating) = (to_i32(active), to_i32(ready), to_i32(terminating));
        let needs_flush = stall_changed
            || size_changed
            || suspend_changed
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
        plan.stall_record = stall_record;
        plan
    }

    /// The stall signals of this sync (see [`stall`]): updates the record, the
    /// `batchfleet.io/PodCreationBlocked` condition and the events; returns whether the
    /// conditions changed.
    fn stall_signals(
        &self,
        cfg: &super::config::Config,
        created_some: bool,
        refusal: Option<&stall::CreateRefusal>,
        conditions: &mut Vec<JobCondition>,
        record: &mut StallRecord,
        events: &mut Vec<Event>,
    ) -> bool {
        let s = &self.state;
        let now = s.job.now;
        let mut changed = false;
        let blocked = refusal.and_then(|r| stall::classify_refusal(r.code, &r.message).map(|why| (why, r)));
        if let Some((why, r)) = blocked {
            let (run, new_step) = stall::next_blocked_step(record.blocked.as_ref(), why, now, cfg);
            // The condition's message is refreshed once per step, not per attempt: each refusal
            // quotes another generated pod name, and a status write per attempt is what the
            // signal must not cost.
            let already = conditions::find_true(conditions, stall::POD_CREATION_BLOCKED)
                .is_some_and(|c| conditions::reason(c) == why.as_str());
            if new_step || !already {
                changed |= conditions::ensure_status(
                    conditions,
                    stall::POD_CREATION_BLOCKED,
                    TRUE,
                    why.as_str(),
                    &r.message,
                    now,
                );
            }
            if new_step {
                events.push(stall::blocked_event(
                    why,
                    run.step,
                    stall::step_delay(run.step, cfg),
                    &r.message,
                ));
            }
            record.blocked = Some(run);
        } else if created_some {
            record.blocked = None;
            if conditions::find_true(conditions, stall::POD_CREATION_BLOCKED).is_some() {
                changed |= conditions::ensure_status(
                    conditions,
                    stall::POD_CREATION_BLOCKED,
                    conditions::FALSE,
                    stall::REASON_PODS_CREATED,
                    stall::MSG_PODS_CREATED,
                    now,
                );
            }
        }
        if let Some((until, pods)) = s.backoff_until {
            if let Some(e) = stall::backoff_announcement(record.announced_backoff_until, until, pods) {
                events.push(e);
            }
            record.announced_backoff_until = Some(until);
        }
        let (nodes, pods) = &s.lost_nodes;
        if *nodes != record.announced_lost_nodes {
            if !nodes.is_empty() {
                events.push(stall::lost_node_event(nodes, *pods));
            }
            record.announced_lost_nodes = nodes.clone();
        }
        changed
    }
}

#[cfg(test)]
#[path = "sync_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "stall_sync_tests.rs"]
mod stall_tests;

#[cfg(test)]
#[path = "large_indexed_sync_tests.rs"]
mod large_indexed_tests;
