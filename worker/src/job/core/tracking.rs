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
fn clean_uncounted<S: std::borrow::Borrow<str> + std::hash::Hash + Eq>(
    status: &mut WorkStatus,
    uids_with_finalizer: &HashSet<S>,
) -> bool {
    let mut updated = false;
    let before = status.uncounted_succeeded.len();
    status.uncounted_succeeded.retain(|u| uids_with_finalizer.contains(u.as_str()));
    let moved = before - status.uncounted_succeeded.len();
    if moved > 0 {
        updated = true;
        status.succeeded = status.succeeded.saturating_add(i32::try_from(moved).unwrap_or(i32::MAX));
    }
    let before = status.uncounted_failed.len();
    status.uncounted_failed.retain(|u| uids_with_finalizer.contains(u.as_str()));
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
    let tracked: HashSet<&str> = facts.iter().filter(|p| p.tracked()).map(|p| p.uid()).collect();
    let mut old = Counters::of(&st);
    let mut needs_flush = t.needs_flush;
    if clean_uncounted(&mut st, &tracked) {
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
                && !(job.backoff_limit_per_index
                    && p.index.is_some_and(|ix| t.delayed.get(&ix) == Some(&i))));
        if !removable {
            continue;
        }
        to_remove.push(i);
        if p.phase == Phase::Succeeded && !t.uncounted_failed.contains(p.uid()) {
            if job.indexed {
                if let Some(ix) = in_range(p)
                    && !t.prev_succeeded_indexes.has(ix)
                {
                    new_succeeded_indexes.push(ix);
                    needs_flush = true;
                }
            } else if !t.uncounted_succeeded.contains(p.uid()) {
                needs_flush = true;
                st.uncounted_succeeded.push(p.uid().to_string());
            }
        } else if (p.failed || finished_is_failure)
            && !t.uncounted_failed.contains(p.uid())
            && (!job.indexed || in_range(p).is_some())
        {
            if job.has_pod_failure_policy {
                if let Some(action) = p.pfp.action {
                    *failure_policy_actions.entry(action).or_default() += 1;
                }
                if p.pfp.count_failed {
                    needs_flush = true;
                    st.uncounted_failed.push(p.uid().to_string());
                }
            } else {
                needs_flush = true;
                st.uncounted_failed.push(p.uid().to_string());
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
    // Every UID still uncounted belongs to a pod that has the finalizer; only those matter later.
    let uids_with_finalizer: HashSet<String> =
        st.uncounted_succeeded.iter().chain(&st.uncounted_failed).cloned().collect();
    StatusPlan {
        events: Vec::new(),
        metrics: Vec::new(),
        backoff_record: interim_status.is_some().then_some(t.backoff_record),
        interim_status,
        metrics_after_interim,
        remove_finalizers,
        stall_record: Default::default(),
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
                    rm_error
                        .get_or_insert_with(|| format!("no result for pod {}/{}", pod.namespace, pod.name));
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
    conditions::ensure_status(
        &mut st.conditions,
        &c.type_,
        &c.status,
        conditions::reason(c),
        conditions::message(c),
        now,
    );
    if c.type_ == COMPLETE {
        st.completion_time = c.last_transition_time.clone();
    }
    true
}

/// `recordJobFinished`: the finish events and `jobs_finished_total`.
fn record_job_finished(
    job: &JobFacts,
    c: &JobCondition,
    st: &WorkStatus,
    events: &mut Vec<Event>,
    metrics: &mut Vec<Metric>,
) {
    if c.type_ == COMPLETE {
        if job.completions.is_some_and(|n| st.succeeded > n) {
            events.push(Event::warning(
                "TooManySucceededPods",
                "Too many succeeded pods running after completion count reached",
            ));
        }
        events.push(Event::normal("Completed", "Job completed"));
        // Since KEP-3998 (1.31) the success reason is the Complete condition's: CompletionsReached
        // or SuccessPolicy.
        metrics.push(Metric::JobsFinished {
            completion_mode: job.completion_mode,
            result: "succeeded",
            reason: conditions::reason(c).to_string(),
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
        out.push(Metric::JobFinishedIndexes {
            status: "succeeded",
            backoff_limit: label,
            delta: to_u64(diff),
        });
        if job.backoff_limit_per_index && st.failed_indexes != old.failed_indexes {
            let failed_diff = count(st.failed_indexes.as_deref().unwrap_or(""))
                - count(old.failed_indexes.as_deref().unwrap_or(""));
            if failed_diff > 0 {
                out.push(Metric::JobFinishedIndexes {
                    status: "failed",
                    backoff_limit: label,
                    delta: to_u64(failed_diff),
                });
            }
        }
        diff
    } else {
        i64::from(st.succeeded) - i64::from(old.succeeded)
    };
    out.push(Metric::JobPodsFinished {
        completion_mode: job.completion_mode,
        result: "succeeded",
        delta: to_u64(succeeded_diff),
    });
    let failed_diff = i64::from(st.failed) - i64::from(old.failed);
    out.push(Metric::JobPodsFinished {
        completion_mode: job.completion_mode,
        result: "failed",
        delta: to_u64(failed_diff),
    });
    out
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // table rows are tuples, as upstream's are anonymous structs
mod tests {
    use super::*;
    use crate::job::core::conditions::new_condition;
    use crate::job::core::indexed::{calculate_failed_indexes, pods_with_delayed_deletion_per_index};
    use crate::job::core::testutil::{Cond, mk_job, mk_pod, now, secs_ago, want_conds};
    use crate::job::core::view::{JobView, pod_facts};
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::Pod;

    /// The projection of a written status that TestTrackJobStatusAndRemoveFinalizers compares
    /// (condition times ignored; completionTime only checked for presence).
    #[derive(Debug, PartialEq)]
    struct Got {
        active: i32,
        succeeded: i32,
        failed: i32,
        completed: String,
        failed_indexes: Option<String>,
        uncounted_succeeded: Vec<String>,
        uncounted_failed: Vec<String>,
        conditions: Vec<(String, String, String, String)>,
        completion_time: bool,
    }

    #[derive(Default)]
    struct Want {
        active: i32,
        succeeded: i32,
        failed: i32,
        completed: &'static str,
        failed_indexes: Option<&'static str>,
        us: Vec<String>,
        uf: Vec<String>,
        conditions: Vec<Cond>,
        completion_time: bool,
    }

    impl Want {
        fn got(&self) -> Got {
            Got {
                active: self.active,
                succeeded: self.succeeded,
                failed: self.failed,
                completed: self.completed.to_string(),
                failed_indexes: self.failed_indexes.map(str::to_string),
                uncounted_succeeded: self.us.clone(),
                uncounted_failed: self.uf.clone(),
                conditions: want_conds(&self.conditions),
                completion_time: self.completion_time,
            }
        }
    }

    fn project(s: &JobStatus) -> Got {
        let u = s.uncounted_terminated_pods.clone().expect("uncountedTerminatedPods is always written");
        Got {
            active: s.active.unwrap_or(0),
            succeeded: s.succeeded.unwrap_or(0),
            failed: s.failed.unwrap_or(0),
            completed: s.completed_indexes.clone().unwrap_or_default(),
            failed_indexes: s.failed_indexes.clone(),
            uncounted_succeeded: u.succeeded.unwrap_or_default(),
            uncounted_failed: u.failed.unwrap_or_default(),
            conditions: crate::job::core::testutil::conds(s),
            completion_time: s.completion_time.is_some(),
        }
    }

    fn strs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    struct Case {
        name: &'static str,
        job: Job,
        pods: Vec<Pod>,
        finished: Option<JobCondition>,
        expected_rm: Vec<&'static str>,
        needs_flush: bool,
        status_err: bool,
        pod_err: bool,
        want_rm: usize,
        want: Vec<Want>,
        want_err: bool,
        want_succeeded_metric: u64,
        want_failed_metric: u64,
    }

    impl Default for Case {
        fn default() -> Self {
            Self {
                name: "",
                job: mk_job("j", -1, -1, 6).build(),
                pods: vec![],
                finished: None,
                expected_rm: vec![],
                needs_flush: false,
                status_err: false,
                pod_err: false,
                want_rm: 0,
                want: vec![],
                want_err: false,
                want_succeeded_metric: 0,
                want_failed_metric: 0,
            }
        }
    }

    /// Mirrors the setup of TestTrackJobStatusAndRemoveFinalizers: the context is built from the Job
    /// status (succeededIndexes parsed from completedIndexes, no previous succeeded indexes).
    fn run(c: &Case) {
        let view = JobView::new(&c.job);
        let rm: HashSet<String> = c.expected_rm.iter().map(|s| s.to_string()).collect();
        let facts = pod_facts(&view, &crate::job::core::testutil::arcs(&c.pods), &rm);
        let status = WorkStatus::from_status(c.job.status.as_ref());
        let us: HashSet<String> = status.uncounted_succeeded.iter().cloned().collect();
        let uf: HashSet<String> = status.uncounted_failed.iter().cloned().collect();
        let completions = view.index_bound();
        let prev = OrderedIntervals::default();
        let succeeded = if view.indexed {
            OrderedIntervals::parse(&status.completed_indexes, completions)
        } else {
            OrderedIntervals::default()
        };
        let (failed, delayed) = if view.indexed && view.has_backoff_limit_per_index() {
            let f = calculate_failed_indexes(&view, status.failed_indexes.as_deref(), &facts);
            let d = pods_with_delayed_deletion_per_index(&facts, completions, &succeeded, &f);
            (Some(f), d)
        } else {
            (None, HashMap::new())
        };
        let terminating = facts.iter().filter(|p| p.terminating()).count() as i32;
        let plan = track(TrackInput {
            job: JobFacts {
                completion_mode: view.completion_mode(),
                indexed: view.indexed,
                completions: view.completions,
                deleting: view.deleting,
                has_pod_failure_policy: view.pod_failure_policy.is_some(),
                backoff_limit_per_index: view.has_backoff_limit_per_index(),
                max_uncounted_pods: 500,
                now: now(),
            },
            facts: &facts,
            status,
            uncounted_succeeded: &us,
            uncounted_failed: &uf,
            finished: c.finished.clone(),
            prev_succeeded_indexes: &prev,
            succeeded_indexes: &succeeded,
            failed_indexes: failed.as_ref(),
            delayed: &delayed,
            terminating,
            needs_flush: c.needs_flush,
            backoff_record: BackoffRecord::default(),
            manage_error: None,
        });
        let name = c.name;
        let mut writes = Vec::new();
        let mut metrics = Vec::new();
        let mut rm_calls = 0;
        if let Some(s) = &plan.interim_status {
            writes.push(project(s));
        }
        let err = if c.status_err && plan.interim_status.is_some() {
            true
        } else {
            metrics.extend(plan.metrics_after_interim.clone());
            let results: Vec<FinalizerRemoval> = plan
                .remove_finalizers
                .iter()
                .map(|_| {
                    rm_calls += 1;
                    if c.pod_err {
                        FinalizerRemoval::Failed("mock error".into())
                    } else {
                        FinalizerRemoval::Removed
                    }
                })
                .collect();
            let last = plan.after_finalizer_removals(&results);
            if let Some(s) = &last.status {
                writes.push(project(s));
            }
            metrics.extend(last.metrics);
            last.error.is_some()
        };
        let want: Vec<Got> = c.want.iter().map(Want::got).collect();
        assert_eq!(writes, want, "{name}: status updates");
        assert_eq!(rm_calls, c.want_rm, "{name}: removed finalizers");
        assert_eq!(err, c.want_err, "{name}: error");
        if !c.want_err {
            let sum = |r: &str| -> u64 {
                metrics
                    .iter()
                    .map(|m| match m {
                        Metric::JobPodsFinished { result, delta, .. } if *result == r => *delta,
                        _ => 0,
                    })
                    .sum()
            };
            assert_eq!(sum("succeeded"), c.want_succeeded_metric, "{name}: succeeded metric");
            assert_eq!(sum("failed"), c.want_failed_metric, "{name}: failed metric");
        }
    }

    fn pod(uid: &str, phase: &str) -> crate::job::core::testutil::PodBuilder {
        mk_pod(uid).uid(uid).phase(phase)
    }

    /// TestTrackJobStatusAndRemoveFinalizers, every row that applies with the gates at GA.
    #[test]
    fn track_job_status_and_remove_finalizers_table() {
        let minute_ago = secs_ago(60);
        let completed = new_condition("Complete", "True", "", "", now());
        let succeeded_cond = new_condition("SuccessCriteriaMet", "True", "", "", minute_ago);
        let failed_cond = new_condition("Failed", "True", "", "", now());
        let failure_target = new_condition("FailureTarget", "True", "", "", now());
        let indexed = |c: i32| mk_job("j", -1, c, 6).indexed();
        let del = || now();
        let many: Vec<Pod> = (0..500)
            .map(|i| pod(&i.to_string(), "Succeeded").finalizer().build())
            .chain([pod("b", "Failed").finalizer().build()])
            .collect();
        let many_indexed: Vec<Pod> = (0..501)
            .map(|i| pod(&i.to_string(), "Succeeded").index(&i.to_string()).finalizer().build())
            .collect();
        let first_499: Vec<String> = (0..499).map(|i| i.to_string()).collect();
        let with_status = |b: crate::job::core::testutil::JobBuilder| b.build();
        let cases = vec![
            Case { name: "no updates", ..Default::default() },
            Case {
                name: "new active",
                job: mk_job("j", -1, -1, 6).counts(1, 0, 0).build(),
                needs_flush: true,
                want: vec![Want { active: 1, ..Default::default() }],
                ..Default::default()
            },
            Case {
                name: "track finished pods",
                pods: vec![
                    pod("a", "Succeeded").finalizer().build(),
                    pod("b", "Failed").finalizer().build(),
                    pod("c", "Succeeded").finalizer().deleted_at(del(), None).build(),
                    pod("d", "Failed").finalizer().deleted_at(del(), None).build(),
                    pod("e", "Pending").finalizer().deleted_at(del(), None).build(),
                    pod("x", "Pending").finalizer().build(),
                    pod("y", "Running").finalizer().build(),
                ],
                want_rm: 5,
                want: vec![
                    Want { us: strs(&["a", "c"]), uf: strs(&["b", "d", "e"]), ..Default::default() },
                    Want { succeeded: 2, failed: 3, ..Default::default() },
                ],
                want_succeeded_metric: 2,
                want_failed_metric: 3,
                ..Default::default()
            },
            Case {
                name: "past and new finished pods",
                job: with_status(mk_job("j", -1, -1, 6).counts(1, 2, 3).uncounted(&["a", "e"], &["b", "f"])),
                pods: vec![
                    pod("e", "Succeeded").build(),
                    pod("x", "Failed").build(),
                    pod("y", "Pending").build(),
                    pod("a", "Succeeded").finalizer().build(),
                    pod("b", "Failed").finalizer().build(),
                    pod("c", "Succeeded").finalizer().build(),
                    pod("d", "Failed").finalizer().build(),
                ],
                want_rm: 4,
                want: vec![
                    Want {
                        active: 1,
                        succeeded: 3,
                        failed: 4,
                        us: strs(&["a", "c"]),
                        uf: strs(&["b", "d"]),
                        ..Default::default()
                    },
                    Want { active: 1, succeeded: 5, failed: 6, ..Default::default() },
                ],
                want_succeeded_metric: 3,
                want_failed_metric: 3,
                ..Default::default()
            },
            Case {
                name: "expecting removed finalizers",
                job: mk_job("j", -1, -1, 6).counts(0, 2, 3).uncounted(&["a", "g"], &["b", "h"]).build(),
                expected_rm: vec!["c", "d", "g", "h"],
                pods: ["a", "b", "c", "d", "e", "f", "g", "h"]
                    .iter()
                    .enumerate()
                    .map(|(i, u)| pod(u, if i % 2 == 0 { "Succeeded" } else { "Failed" }).finalizer().build())
                    .collect(),
                want_rm: 4,
                want: vec![
                    Want {
                        succeeded: 3,
                        failed: 4,
                        us: strs(&["a", "e"]),
                        uf: strs(&["b", "f"]),
                        ..Default::default()
                    },
                    Want { succeeded: 5, failed: 6, ..Default::default() },
                ],
                want_succeeded_metric: 3,
                want_failed_metric: 3,
                ..Default::default()
            },
            Case {
                name: "succeeding job by JobSuccessPolicy",
                pods: vec![
                    pod("a", "Succeeded").finalizer().build(),
                    pod("b", "Failed").finalizer().build(),
                    pod("c", "Pending").finalizer().build(),
                ],
                finished: Some(succeeded_cond.clone()),
                want_rm: 3,
                want: vec![
                    Want {
                        us: strs(&["a"]),
                        uf: strs(&["b"]),
                        conditions: vec![("SuccessCriteriaMet", "True", "", "")],
                        ..Default::default()
                    },
                    Want {
                        succeeded: 1,
                        failed: 1,
                        conditions: vec![
                            ("SuccessCriteriaMet", "True", "", ""),
                            ("Complete", "True", "", ""),
                        ],
                        completion_time: true,
                        ..Default::default()
                    },
                ],
                want_succeeded_metric: 1,
                want_failed_metric: 1,
                ..Default::default()
            },
            Case {
                name: "completing job",
                pods: vec![pod("a", "Succeeded").finalizer().build(), pod("b", "Failed").finalizer().build()],
                finished: Some(completed.clone()),
                want_rm: 2,
                want: vec![
                    Want { us: strs(&["a"]), uf: strs(&["b"]), ..Default::default() },
                    Want {
                        succeeded: 1,
                        failed: 1,
                        conditions: vec![("Complete", "True", "", "")],
                        completion_time: true,
                        ..Default::default()
                    },
                ],
                want_succeeded_metric: 1,
                want_failed_metric: 1,
                ..Default::default()
            },
            Case {
                name: "failing job",
                pods: vec![
                    pod("a", "Succeeded").finalizer().build(),
                    pod("b", "Failed").finalizer().build(),
                    pod("c", "Running").finalizer().build(),
                ],
                finished: Some(failed_cond.clone()),
                want_rm: 3,
                want: vec![
                    Want { us: strs(&["a"]), uf: strs(&["b", "c"]), ..Default::default() },
                    Want {
                        succeeded: 1,
                        failed: 2,
                        conditions: vec![("Failed", "True", "", "")],
                        ..Default::default()
                    },
                ],
                want_succeeded_metric: 1,
                want_failed_metric: 2,
                ..Default::default()
            },
            Case {
                name: "deleted job",
                job: mk_job("j", -1, -1, 6).deleting().counts(1, 0, 0).build(),
                pods: vec![
                    pod("a", "Succeeded").finalizer().build(),
                    pod("b", "Failed").finalizer().build(),
                    pod("r", "Running").finalizer().build(),
                ],
                want_rm: 3,
                want: vec![
                    Want { active: 1, us: strs(&["a"]), uf: strs(&["b"]), ..Default::default() },
                    Want { active: 1, succeeded: 1, failed: 1, ..Default::default() },
                ],
                want_succeeded_metric: 1,
                want_failed_metric: 1,
                ..Default::default()
            },
            Case {
                name: "status update error",
                pods: vec![pod("a", "Succeeded").finalizer().build(), pod("b", "Failed").finalizer().build()],
                status_err: true,
                want_err: true,
                want: vec![Want { us: strs(&["a"]), uf: strs(&["b"]), ..Default::default() }],
                ..Default::default()
            },
            Case {
                name: "pod patch errors",
                pods: vec![pod("a", "Succeeded").finalizer().build(), pod("b", "Failed").finalizer().build()],
                pod_err: true,
                want_err: true,
                want_rm: 2,
                want: vec![Want { us: strs(&["a"]), uf: strs(&["b"]), ..Default::default() }],
                ..Default::default()
            },
            Case {
                name: "pod patch errors with partial success",
                job: mk_job("j", -1, -1, 6).uncounted(&["a"], &["b"]).build(),
                pods: vec![
                    pod("a", "Succeeded").build(),
                    pod("c", "Succeeded").finalizer().build(),
                    pod("d", "Failed").finalizer().build(),
                ],
                pod_err: true,
                want_err: true,
                want_rm: 2,
                want: vec![Want {
                    succeeded: 1,
                    failed: 1,
                    us: strs(&["c"]),
                    uf: strs(&["d"]),
                    ..Default::default()
                }],
                ..Default::default()
            },
            Case {
                name: "indexed job new successful pods",
                job: indexed(6).counts(1, 0, 0).build(),
                pods: vec![
                    pod("p1", "Succeeded").finalizer().index("1").build(),
                    pod("p3", "Succeeded").finalizer().index("3").build(),
                    pod("p3b", "Succeeded").finalizer().index("3").build(),
                    pod("p5", "Running").finalizer().index("5").build(),
                    pod("px", "Succeeded").finalizer().build(),
                ],
                want_rm: 4,
                want: vec![Want { active: 1, succeeded: 2, completed: "1,3", ..Default::default() }],
                want_succeeded_metric: 2,
                ..Default::default()
            },
            Case {
                name: "indexed job prev successful pods outside current completions index range with no new succeeded pods",
                job: mk_job("j", 2, 2, 6).indexed().counts(2, 1, 0).completed_indexes("3").build(),
                pods: vec![
                    pod("p0", "Running").finalizer().index("0").build(),
                    pod("p1", "Running").finalizer().index("1").build(),
                ],
                want: vec![Want { active: 2, ..Default::default() }],
                ..Default::default()
            },
            Case {
                name: "indexed job prev successful pods outside current completions index range with new succeeded pods in range",
                job: mk_job("j", 2, 2, 6).indexed().counts(2, 1, 0).completed_indexes("3").build(),
                pods: vec![
                    pod("p0", "Running").finalizer().index("0").build(),
                    pod("p1", "Succeeded").finalizer().index("1").build(),
                ],
                want_rm: 1,
                want: vec![Want { active: 2, succeeded: 1, completed: "1", ..Default::default() }],
                want_succeeded_metric: 1,
                ..Default::default()
            },
            Case {
                name: "indexed job new failed pods",
                job: indexed(6).counts(1, 0, 0).build(),
                pods: vec![
                    pod("a", "Failed").finalizer().index("1").build(),
                    pod("b", "Failed").finalizer().index("3").build(),
                    pod("c", "Failed").finalizer().index("3").build(),
                    pod("d", "Running").finalizer().index("5").build(),
                    pod("x", "Failed").finalizer().build(),
                ],
                want_rm: 4,
                want: vec![
                    Want { active: 1, uf: strs(&["a", "b", "c"]), ..Default::default() },
                    Want { active: 1, failed: 3, ..Default::default() },
                ],
                want_failed_metric: 3,
                ..Default::default()
            },
            Case {
                name: "indexed job past and new pods",
                job: indexed(7).counts(0, 5, 2).completed_indexes("0-2,4,6,7").build(),
                pods: vec![
                    pod("s0", "Succeeded").index("0").build(),
                    pod("f1", "Failed").index("1").build(),
                    pod("s1", "Succeeded").finalizer().index("1").build(),
                    pod("s3", "Succeeded").finalizer().index("3").build(),
                    pod("a", "Failed").finalizer().index("2").build(),
                    pod("b", "Failed").finalizer().index("5").build(),
                ],
                want_rm: 4,
                want: vec![
                    Want {
                        succeeded: 6,
                        failed: 2,
                        completed: "0-4,6",
                        uf: strs(&["a", "b"]),
                        ..Default::default()
                    },
                    Want { succeeded: 6, failed: 4, completed: "0-4,6", ..Default::default() },
                ],
                want_succeeded_metric: 1,
                want_failed_metric: 2,
                ..Default::default()
            },
            Case {
                name: "too many finished",
                job: mk_job("j", -1, -1, 6).uncounted(&[], &["a", "b"]).build(),
                pods: many,
                want_rm: 499,
                want: vec![
                    Want { failed: 1, us: first_499.clone(), uf: strs(&["b"]), ..Default::default() },
                    Want { succeeded: 499, failed: 1, uf: strs(&["b"]), ..Default::default() },
                ],
                want_succeeded_metric: 499,
                want_failed_metric: 1,
                ..Default::default()
            },
            Case {
                name: "too many indexed finished",
                job: indexed(501).build(),
                pods: many_indexed,
                want_rm: 500,
                want: vec![Want { succeeded: 500, completed: "0-499", ..Default::default() }],
                want_succeeded_metric: 500,
                ..Default::default()
            },
            Case {
                name: "pod flips from failed to succeeded",
                job: mk_job("j", 2, 2, 6).uncounted(&[], &["a", "b"]).build(),
                pods: vec![pod("a", "Failed").finalizer().build(), pod("b", "Succeeded").finalizer().build()],
                finished: Some(failed_cond.clone()),
                want_rm: 2,
                want: vec![Want {
                    failed: 2,
                    conditions: vec![("Failed", "True", "", "")],
                    ..Default::default()
                }],
                want_failed_metric: 2,
                ..Default::default()
            },
            Case {
                name: "pod is terminal; JobFailed condition is set",
                job: mk_job("j", 1, 1, 6).uncounted(&[], &["a"]).build(),
                pods: vec![pod("a", "Failed").finalizer().build()],
                finished: Some(failed_cond.clone()),
                want_rm: 1,
                want: vec![Want {
                    failed: 1,
                    conditions: vec![("Failed", "True", "", "")],
                    ..Default::default()
                }],
                want_failed_metric: 1,
                ..Default::default()
            },
            Case {
                name: "pod is terminating; counted as failed, but the JobFailed condition is delayed; JobManagedBy enabled",
                job: {
                    let mut j = mk_job("j", 1, 1, 6).uncounted(&[], &["a"]).build();
                    j.status.as_mut().unwrap().conditions = Some(vec![failure_target.clone()]);
                    j
                },
                pods: vec![pod("a", "Running").deleted_at(del(), None).build()],
                finished: Some(failed_cond.clone()),
                want: vec![Want {
                    failed: 1,
                    conditions: vec![("FailureTarget", "True", "", "")],
                    ..Default::default()
                }],
                want_failed_metric: 1,
                ..Default::default()
            },
            Case {
                name: "pod is terminating; JobSuccessCriteriaMet, but JobComplete condition is delayed; JobManagedBy enabled",
                job: {
                    let mut j = mk_job("j", 1, 1, 6).uncounted(&["b"], &["a"]).build();
                    j.status.as_mut().unwrap().conditions = Some(vec![succeeded_cond.clone()]);
                    j
                },
                pods: vec![pod("a", "Running").deleted_at(del(), None).build()],
                finished: Some(completed.clone()),
                want: vec![Want {
                    succeeded: 1,
                    failed: 1,
                    conditions: vec![("SuccessCriteriaMet", "True", "", "")],
                    ..Default::default()
                }],
                want_succeeded_metric: 1,
                want_failed_metric: 1,
                ..Default::default()
            },
            Case {
                name: "indexed job with a failed pod with delayed finalizer removal; the pod is not counted",
                job: indexed(6).backoff_limit_per_index(1).build(),
                pods: vec![pod("a", "Failed").failure_count("0").finalizer().index("1").build()],
                want: vec![Want { failed_indexes: Some(""), ..Default::default() }],
                ..Default::default()
            },
            Case {
                name: "indexed job with a failed pod which is recreated by a running pod; the pod is counted",
                job: indexed(6).backoff_limit_per_index(1).counts(1, 0, 0).build(),
                pods: vec![
                    pod("a1", "Failed").failure_count("0").finalizer().index("1").build(),
                    pod("a2", "Running").failure_count("1").finalizer().index("1").build(),
                ],
                want_rm: 1,
                want: vec![
                    Want { active: 1, uf: strs(&["a1"]), failed_indexes: Some(""), ..Default::default() },
                    Want { active: 1, failed: 1, failed_indexes: Some(""), ..Default::default() },
                ],
                want_failed_metric: 1,
                ..Default::default()
            },
            Case {
                name: "indexed job with a failed pod for a failed index; the pod is counted",
                job: indexed(6).backoff_limit_per_index(1).build(),
                pods: vec![pod("a", "Failed").failure_count("1").finalizer().index("1").build()],
                want_rm: 1,
                want: vec![
                    Want { failed_indexes: Some("1"), uf: strs(&["a"]), ..Default::default() },
                    Want { failed: 1, failed_indexes: Some("1"), ..Default::default() },
                ],
                want_failed_metric: 1,
                ..Default::default()
            },
        ];
        for c in &cases {
            run(c);
        }
    }

    /// TestGetNewFinshedPods, via the counters syncJob derives from them.
    #[test]
    fn new_finished_pods_are_counted_once() {
        use crate::job::core::testutil::{RunOpts, run_sync_with};
        let cases = vec![
            (
                "some counted",
                mk_job("j", 0, -1, 100).counts(0, 2, 1).build(),
                vec![
                    pod("a", "Succeeded").build(),
                    pod("b", "Succeeded").finalizer().build(),
                    pod("c", "Succeeded").finalizer().build(),
                    pod("d", "Failed").build(),
                    pod("e", "Failed").finalizer().build(),
                    pod("f", "Running").build(),
                ],
                vec![],
                4,
                2,
            ),
            (
                "some uncounted",
                mk_job("j", 0, -1, 100).counts(0, 1, 1).uncounted(&["a", "c"], &["e", "f"]).build(),
                vec![
                    pod("a", "Succeeded").build(),
                    pod("b", "Succeeded").build(),
                    pod("c", "Succeeded").finalizer().build(),
                    pod("d", "Succeeded").finalizer().build(),
                    pod("e", "Failed").build(),
                    pod("f", "Failed").finalizer().build(),
                    pod("g", "Failed").finalizer().build(),
                ],
                vec![],
                4,
                4,
            ),
            (
                "with expected removed finalizers",
                mk_job("j", 0, -1, 100).counts(0, 2, 2).uncounted(&["a"], &["d"]).build(),
                vec![
                    pod("a", "Succeeded").build(),
                    pod("b", "Succeeded").finalizer().build(),
                    pod("c", "Succeeded").finalizer().build(),
                    pod("d", "Failed").build(),
                    pod("e", "Failed").finalizer().build(),
                    pod("f", "Failed").finalizer().build(),
                    pod("g", "Failed").finalizer().build(),
                ],
                vec!["b", "f"],
                4,
                5,
            ),
            (
                "deleted pods",
                mk_job("j", 0, -1, 100).counts(0, 1, 1).build(),
                vec![
                    pod("a", "Succeeded").finalizer().deleted_at(now(), None).build(),
                    pod("b", "Failed").finalizer().deleted_at(now(), None).build(),
                    pod("c", "Running").finalizer().deleted_at(now(), None).build(),
                    pod("d", "Pending").finalizer().deleted_at(now(), None).build(),
                    pod("e", "Running").deleted_at(now(), None).build(),
                    pod("f", "Pending").deleted_at(now(), None).build(),
                ],
                vec![],
                2,
                4,
            ),
        ];
        for (name, job, pods, rm, want_succeeded, want_failed) in cases {
            let expected_rm = rm.iter().map(|s| s.to_string()).collect();
            let run = run_sync_with(&job, &pods, RunOpts { expected_rm, ..Default::default() });
            let st = run.status(&job);
            let uncounted = st.uncounted_terminated_pods.clone().unwrap_or_default();
            let total =
                |n: Option<i32>, u: Option<Vec<String>>| n.unwrap_or(0) as usize + u.map_or(0, |v| v.len());
            assert_eq!(total(st.succeeded, uncounted.succeeded), want_succeeded, "{name}: succeeded");
            assert_eq!(total(st.failed, uncounted.failed), want_failed, "{name}: failed");
        }
    }
}
