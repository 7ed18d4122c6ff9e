//! Finalizer accounting (KEP-2307): `trackJobStatusAndRemoveFinalizers`,
//! `flushUncountedAndRemoveFinalizers`, `enactJobFinished`, and the status bookkeeping they share.

use std::collections::{BTreeMap, HashMap, HashSet};

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::backoff::BackoffRecord;
use super::conditions::{self, COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, TRUE, new_condition};
use super::failure_policy::PfpAction;
use super::intervals::OrderedIntervals;
use super::plan::{Event, FinalPlan, FinalizerRemoval, Metric, PodRef, StatusPlan, SyncError};
use super::view::{Phase, PodFacts};

/// `batch.JobStatus` as the controller edits it (counters as plain integers).
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct WorkStatus {
    pub active: i32,
    pub ready: Option<i32>,
    pub terminating: Option<i32>,
    pub succeeded: i32,
    pub failed: i32,
    pub completed_indexes: String,
    pub failed_indexes: Option<String>,
    pub uncounted_succeeded: Vec<String>,
    pub uncounted_failed: Vec<String>,
    pub conditions: Vec<JobCondition>,
    pub start_time: Option<Time>,
    pub completion_time: Option<Time>,
}

impl WorkStatus {
    pub fn from_status(s: Option<&JobStatus>) -> Self {
        let Some(s) = s else { return Self::default() };
        let uncounted = s.uncounted_terminated_pods.as_ref();
        Self {
            active: s.active.unwrap_or(0),
            ready: s.ready,
            terminating: s.terminating,
            succeeded: s.succeeded.unwrap_or(0),
            failed: s.failed.unwrap_or(0),
            completed_indexes: s.completed_indexes.clone().unwrap_or_default(),
            failed_indexes: s.failed_indexes.clone(),
            uncounted_succeeded: uncounted.and_then(|u| u.succeeded.clone()).unwrap_or_default(),
            uncounted_failed: uncounted.and_then(|u| u.failed.clone()).unwrap_or_default(),
            conditions: s.conditions.clone().unwrap_or_default(),
            start_time: s.start_time.clone(),
            completion_time: s.completion_time.clone(),
        }
    }

    /// The status as the API server would store it (Go `omitempty`: zero counters, empty strings and
    /// lists omitted; `ready`, `terminating`, `failedIndexes` and `uncountedTerminatedPods` are pointers).
    pub fn to_job_status(&self) -> JobStatus {
        let nz = |v: i32| (v != 0).then_some(v);
        let list = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        JobStatus {
            active: nz(self.active),
            ready: self.ready,
            terminating: self.terminating,
            succeeded: nz(self.succeeded),
            failed: nz(self.failed),
            completed_indexes: (!self.completed_indexes.is_empty()).then(|| self.completed_indexes.clone()),
            failed_indexes: self.failed_indexes.clone(),
            uncounted_terminated_pods: Some(UncountedTerminatedPods {
                succeeded: list(&self.uncounted_succeeded),
                failed: list(&self.uncounted_failed),
            }),
            conditions: (!self.conditions.is_empty()).then(|| self.conditions.clone()),
            start_time: self.start_time.clone(),
            completion_time: self.completion_time.clone(),
        }
    }

    fn has_uncounted(&self) -> bool {
        !self.uncounted_succeeded.is_empty() || !self.uncounted_failed.is_empty()
    }
}

/// The counters `recordJobPodFinished` compares against.
#[derive(Clone, Debug, Default)]
pub(super) struct Counters {
    succeeded: i32,
    failed: i32,
    completed_indexes: String,
    failed_indexes: Option<String>,
}

impl Counters {
    fn of(s: &WorkStatus) -> Self {
        Self {
            succeeded: s.succeeded,
            failed: s.failed,
            completed_indexes: s.completed_indexes.clone(),
            failed_indexes: s.failed_indexes.clone(),
        }
    }
}

/// Facts about the Job the tracking stages need.
#[derive(Clone, Debug)]
pub(super) struct JobFacts {
    pub completion_mode: &'static str,
    pub indexed: bool,
    pub completions: Option<i32>,
    pub deleting: bool,
    pub has_pod_failure_policy: bool,
    pub backoff_limit_per_index: bool,
    pub max_uncounted_pods: usize,
    pub now: Timestamp,
}

impl JobFacts {
    fn index_bound(&self) -> i64 {
        i64::from(self.completions.unwrap_or(0))
    }
}

/// `syncJobCtx` at the time `trackJobStatusAndRemoveFinalizers` runs.
#[derive(Debug)]
pub(super) struct TrackInput<'a> {
    pub job: JobFacts,
    pub facts: &'a [PodFacts],
    /// The status so far (startTime, active, ready, terminating, suspend condition already set).
    pub status: WorkStatus,
    /// `jobCtx.uncounted`: the uncounted UIDs as read from the Job.
    pub uncounted_succeeded: &'a HashSet<String>,
    pub uncounted_failed: &'a HashSet<String>,
    pub finished: Option<JobCondition>,
    pub prev_succeeded_indexes: &'a OrderedIntervals,
    pub succeeded_indexes: &'a OrderedIntervals,
    pub failed_indexes: Option<&'a OrderedIntervals>,
    pub delayed: &'a HashMap<i64, usize>,
    pub terminating: i32,
    pub needs_flush: bool,
    pub backoff_record: BackoffRecord,
    pub manage_error: Option<SyncError>,
}

/// What the last stage needs.
#[derive(Clone, Debug)]
pub(super) struct TrackState {
    job: JobFacts,
    status: WorkStatus,
    old: Counters,
    uids_with_finalizer: HashSet<String>,
    reached_max_uncounted: bool,
    finished: Option<JobCondition>,
    terminating: i32,
    manage_error: Option<SyncError>,
}

fn is_success_criteria_met(c: &JobCondition) -> bool {
    c.type_ == SUCCESS_CRITERIA_MET && c.status == TRUE
}

/// `cleanUncountedPodsWithoutFinalizers`: uncounted UIDs whose finalizer is gone move to the counters.
fn clean_uncounted(status: &mut WorkStatus, uids_with_finalizer: &HashSet<String>) -> bool {
    let mut updated = false;
    let before = status.uncounted_succeeded.len();
    status.uncounted_succeeded.retain(|u| uids_with_finalizer.contains(u));
    let moved = before - status.uncounted_succeeded.len();
    if moved > 0 {
        updated = true;
        status.succeeded = status.succeeded.saturating_add(i32::try_from(moved).unwrap_or(i32::MAX));
    }
    let before = status.uncounted_failed.len();
    status.uncounted_failed.retain(|u| uids_with_finalizer.contains(u));
    let moved = before - status.uncounted_failed.len();
    if moved > 0 {
        updated = true;
        status.failed = status.failed.saturating_add(i32::try_from(moved).unwrap_or(i32::MAX));
    }
    updated
}

/// `trackJobStatusAndRemoveFinalizers` up to the first flush: which pods get counted and lose their
/// finalizer, the interim conditions, and the interim status write.
pub(super) fn track(t: TrackInput<'_>) -> StatusPlan {
    let job = t.job;
    let facts = t.facts;
    let completions = job.index_bound();
    let mut st = t.status;
    let mut order: Vec<usize> = (0..facts.len()).collect();
    if job.indexed {
        order.sort_by_key(|&i| facts[i].index.unwrap_or(-1));
    }
    let uids_with_finalizer: HashSet<String> = facts.iter().filter(|p| p.tracked()).map(|p| p.uid.clone()).collect();
    let mut old = Counters::of(&st);
    let mut needs_flush = t.needs_flush;
    if clean_uncounted(&mut st, &uids_with_finalizer) {
        needs_flush = true;
    }
    let mut finished = t.finished;
    let finished_is_failure = finished.as_ref().is_some_and(|c| !is_success_criteria_met(c));
    let mut failure_policy_actions: BTreeMap<PfpAction, u64> = BTreeMap::new();
    let mut reached_max = false;
    let mut to_remove: Vec<usize> = Vec::new();
    let mut new_succeeded_indexes: Vec<i64> = Vec::new();
    let in_range = |p: &PodFacts| p.index.filter(|&ix| ix < completions);
    for &i in &order {
        let p = &facts[i];
        if !p.tracked() {
            continue;
        }
        // canRemoveFinalizer
        let removable = job.deleting
            || finished.is_some()
            || p.phase == Phase::Succeeded
            || (p.failed
                && !(job.backoff_limit_per_index && p.index.is_some_and(|ix| t.delayed.get(&ix) == Some(&i))));
        if !removable {
            continue;
        }
        to_remove.push(i);
        if p.phase == Phase::Succeeded && !t.uncounted_failed.contains(&p.uid) {
            if job.indexed {
                if let Some(ix) = in_range(p)
                    && !t.prev_succeeded_indexes.has(ix)
                {
                    new_succeeded_indexes.push(ix);
                    needs_flush = true;
                }
            } else if !t.uncounted_succeeded.contains(&p.uid) {
                needs_flush = true;
                st.uncounted_succeeded.push(p.uid.clone());
            }
        } else if (p.failed || finished_is_failure)
            && !t.uncounted_failed.contains(&p.uid)
            && (!job.indexed || in_range(p).is_some())
        {
            if job.has_pod_failure_policy {
                if let Some(action) = p.pfp.action {
                    *failure_policy_actions.entry(action).or_default() += 1;
                }
                if p.pfp.count_failed {
                    needs_flush = true;
                    st.uncounted_failed.push(p.uid.clone());
                }
            } else {
                needs_flush = true;
                st.uncounted_failed.push(p.uid.clone());
            }
        }
        if new_succeeded_indexes.len() + st.uncounted_succeeded.len() + st.uncounted_failed.len()
            >= job.max_uncounted_pods
        {
            reached_max = true;
            break;
        }
    }
    if job.indexed {
        let succeeded = t.succeeded_indexes.with_ordered_indexes(&new_succeeded_indexes);
        let completed = succeeded.to_string();
        if completed != st.completed_indexes {
            needs_flush = true;
        }
        st.succeeded = i32::try_from(succeeded.total()).unwrap_or(i32::MAX);
        st.completed_indexes = completed;
        let failed = t.failed_indexes.map(|f| f.to_string());
        if failed != st.failed_indexes {
            st.failed_indexes = failed;
            needs_flush = true;
        }
    }
    let now = job.now;
    if let Some(c) = finished.as_ref().filter(|c| c.type_ == FAILURE_TARGET) {
        // The interim FailureTarget goes out before any finalizer is removed.
        st.conditions.push(c.clone());
        needs_flush = true;
        finished = Some(new_condition(FAILED, TRUE, conditions::reason(c), conditions::message(c), now));
    }
    if let Some(c) = finished.as_ref().filter(|c| is_success_criteria_met(c)) {
        if conditions::find_true(&st.conditions, SUCCESS_CRITERIA_MET).is_none() {
            st.conditions.push(c.clone());
            needs_flush = true;
        }
        finished = Some(new_condition(COMPLETE, TRUE, conditions::reason(c), conditions::message(c), now));
    }

    let interim_status = needs_flush.then(|| st.to_job_status());
    let mut metrics_after_interim = Vec::new();
    if interim_status.is_some() {
        metrics_after_interim = record_job_pod_finished(&job, &st, &old);
        old = Counters::of(&st);
    }
    metrics_after_interim.extend(
        failure_policy_actions
            .into_iter()
            .map(|(a, delta)| Metric::PodFailuresHandledByFailurePolicy { action: a.as_str(), delta }),
    );
    let remove_finalizers: Vec<PodRef> = to_remove.iter().map(|&i| facts[i].pod_ref()).collect();
    StatusPlan {
        events: Vec::new(),
        metrics: Vec::new(),
        backoff_record: interim_status.is_some().then_some(t.backoff_record),
        interim_status,
        metrics_after_interim,
        remove_finalizers,
        state: TrackState {
            job,
            status: st,
            old,
            uids_with_finalizer,
            reached_max_uncounted: reached_max,
            finished,
            terminating: t.terminating,
            manage_error: t.manage_error,
        },
    }
}

impl StatusPlan {
    /// Folds the finalizer-removal results (in the order of [`StatusPlan::remove_finalizers`]) into the
    /// last status write, the finish events and the sync error.
    pub fn after_finalizer_removals(&self, results: &[FinalizerRemoval]) -> FinalPlan {
        let state = &self.state;
        let mut st = state.status.clone();
        let mut uids = state.uids_with_finalizer.clone();
        let mut rm_error: Option<String> = None;
        for (k, pod) in self.remove_finalizers.iter().enumerate() {
            match results.get(k) {
                Some(FinalizerRemoval::Removed | FinalizerRemoval::NotFound) => {
                    uids.remove(&pod.uid);
                }
                Some(FinalizerRemoval::Failed(msg)) => {
                    rm_error.get_or_insert_with(|| msg.clone());
                }
                None => {
                    rm_error.get_or_insert_with(|| format!("no result for pod {}/{}", pod.namespace, pod.name));
                }
            }
        }
        let mut needs_flush = clean_uncounted(&mut st, &uids);
        if let Some(err) = rm_error {
            return FinalPlan {
                status: needs_flush.then(|| st.to_job_status()),
                events: Vec::new(),
                metrics: Vec::new(),
                error: Some(SyncError::RemoveTrackingFinalizer(err)),
            };
        }
        let job_finished = !state.reached_max_uncounted && enact_job_finished(state, &mut st);
        needs_flush |= job_finished;
        let mut events = Vec::new();
        let mut metrics = Vec::new();
        if needs_flush {
            if job_finished && let Some(c) = &state.finished {
                record_job_finished(&state.job, c, &st, &mut events, &mut metrics);
            }
            metrics.extend(record_job_pod_finished(&state.job, &st, &state.old));
        }
        FinalPlan {
            status: needs_flush.then(|| st.to_job_status()),
            events,
            metrics,
            error: state.manage_error.clone(),
        }
    }
}

/// `enactJobFinished`: Complete/Failed only once nothing is uncounted and nothing is terminating.
fn enact_job_finished(state: &TrackState, st: &mut WorkStatus) -> bool {
    let Some(c) = &state.finished else { return false };
    if st.has_uncounted() || state.terminating > 0 {
        return false;
    }
    let now = state.job.now;
    conditions::ensure_status(&mut st.conditions, &c.type_, &c.status, conditions::reason(c), conditions::message(c), now);
    if c.type_ == COMPLETE {
        st.completion_time = c.last_transition_time.clone();
    }
    true
}

/// `recordJobFinished`: the finish events and `jobs_finished_total`.
fn record_job_finished(job: &JobFacts, c: &JobCondition, st: &WorkStatus, events: &mut Vec<Event>, metrics: &mut Vec<Metric>) {
    if c.type_ == COMPLETE {
        if job.completions.is_some_and(|n| st.succeeded > n) {
            events.push(Event::warning(
                "TooManySucceededPods",
                "Too many succeeded pods running after completion count reached",
            ));
        }
        events.push(Event::normal("Completed", "Job completed"));
        metrics.push(Metric::JobsFinished {
            completion_mode: job.completion_mode,
            result: "succeeded",
            reason: String::new(),
        });
    } else {
        events.push(Event::warning(conditions::reason(c), conditions::message(c)));
        metrics.push(Metric::JobsFinished {
            completion_mode: job.completion_mode,
            result: "failed",
            reason: conditions::reason(c).to_string(),
        });
    }
}

/// `recordJobPodFinished`: `job_pods_finished_total` and `job_finished_indexes_total` deltas.
fn record_job_pod_finished(job: &JobFacts, st: &WorkStatus, old: &Counters) -> Vec<Metric> {
    let mut out = Vec::new();
    let count = |s: &str| OrderedIntervals::parse(s, job.index_bound()).total();
    let to_u64 = |d: i64| u64::try_from(d.max(0)).unwrap_or(0);
    let succeeded_diff = if job.indexed {
        let diff = if st.completed_indexes != old.completed_indexes {
            count(&st.completed_indexes) - count(&old.completed_indexes)
        } else {
            0
        };
        let label = if job.backoff_limit_per_index { "perIndex" } else { "global" };
        out.push(Metric::JobFinishedIndexes { status: "succeeded", backoff_limit: label, delta: to_u64(diff) });
        if job.backoff_limit_per_index && st.failed_indexes != old.failed_indexes {
            let failed_diff = count(st.failed_indexes.as_deref().unwrap_or(""))
                - count(old.failed_indexes.as_deref().unwrap_or(""));
            if failed_diff > 0 {
                out.push(Metric::JobFinishedIndexes { status: "failed", backoff_limit: label, delta: to_u64(failed_diff) });
            }
        }
        diff
    } else {
        i64::from(st.succeeded) - i64::from(old.succeeded)
    };
    out.push(Metric::JobPodsFinished { completion_mode: job.completion_mode, result: "succeeded", delta: to_u64(succeeded_diff) });
    let failed_diff = i64::from(st.failed) - i64::from(old.failed);
    out.push(Metric::JobPodsFinished { completion_mode: job.completion_mode, result: "failed", delta: to_u64(failed_diff) });
    out
}
