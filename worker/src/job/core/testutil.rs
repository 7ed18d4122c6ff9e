//! Test builders (`mk_job`, `mk_pod`, modelled on upstream's `newJob`/`buildPod`) and a fake shell that
//! executes plans the way upstream's `FakePodControl` + `updateStatusHandler` behave in
//! job_controller_test.go.

use std::collections::{BTreeMap, HashSet};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{
    Job, JobCondition, JobSpec, JobStatus, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule, SuccessPolicy, UncountedTerminatedPods,
};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, Pod,
    PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference, Time};

use super::backoff::{BackoffRecord, go_zero_time};
use super::conditions::new_condition;
use super::config::Config;
use super::plan::{
    CreateOutcome, DeleteOutcome, Event, FinalizerRemoval, JobPlan, Metric, PodOpResults, PodOps, Skip,
    SyncAction, SyncError, SyncInput,
};
use super::view::{JobView, PodFacts, pod_facts};
use super::{JOB_COMPLETION_INDEX_ANNOTATION, JOB_INDEX_FAILURE_COUNT_ANNOTATION, JOB_TRACKING_FINALIZER};

pub fn ts(s: &str) -> Timestamp {
    s.parse().expect("test timestamp")
}

/// The fixed controller clock of the sync tests.
pub fn now() -> Timestamp {
    ts("2024-06-01T12:00:00Z")
}

/// Upstream `testFinishedAt`: one second after Go's zero time, so back-off never applies.
pub fn test_finished_at() -> Timestamp {
    go_zero_time().checked_add(SignedDuration::from_secs(1)).expect("time")
}

pub fn secs_ago(n: i64) -> Timestamp {
    now().checked_sub(SignedDuration::from_secs(n)).expect("time")
}

// ---------------------------------------------------------------- Jobs

pub struct JobBuilder(Job);

/// `newJob(parallelism, completions, backoffLimit, NonIndexed)`: -1 leaves a field unset.
pub fn mk_job(name: &str, parallelism: i32, completions: i32, backoff_limit: i32) -> JobBuilder {
    let labels = BTreeMap::from([("foo".to_string(), "bar".to_string())]);
    JobBuilder(Job {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            uid: Some(format!("uid-{name}")),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(JobSpec {
            selector: Some(LabelSelector { match_labels: Some(labels.clone()), match_expressions: None }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..Default::default() }),
                spec: Some(PodSpec {
                    containers: vec![Container { image: Some("foo/bar".into()), ..Default::default() }],
                    ..Default::default()
                }),
            },
            parallelism: (parallelism >= 0).then_some(parallelism),
            completions: (completions >= 0).then_some(completions),
            backoff_limit: Some(backoff_limit),
            ..Default::default()
        }),
        status: None,
    })
}

impl JobBuilder {
    fn spec(&mut self) -> &mut JobSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }
    fn status(&mut self) -> &mut JobStatus {
        self.0.status.get_or_insert_with(Default::default)
    }
    pub fn indexed(mut self) -> Self {
        self.spec().completion_mode = Some("Indexed".into());
        self
    }
    pub fn completion_mode(mut self, m: &str) -> Self {
        self.spec().completion_mode = Some(m.into());
        self
    }
    pub fn backoff_limit_per_index(mut self, n: i32) -> Self {
        self.spec().backoff_limit_per_index = Some(n);
        self
    }
    pub fn max_failed_indexes(mut self, n: i32) -> Self {
        self.spec().max_failed_indexes = Some(n);
        self
    }
    pub fn suspend(mut self, s: bool) -> Self {
        self.spec().suspend = Some(s);
        self
    }
    pub fn replacement_policy(mut self, p: &str) -> Self {
        self.spec().pod_replacement_policy = Some(p.into());
        self
    }
    pub fn pod_failure_policy(mut self, p: PodFailurePolicy) -> Self {
        self.spec().pod_failure_policy = Some(p);
        self
    }
    pub fn success_policy(mut self, p: SuccessPolicy) -> Self {
        self.spec().success_policy = Some(p);
        self
    }
    pub fn active_deadline(mut self, secs: i64) -> Self {
        self.spec().active_deadline_seconds = Some(secs);
        self
    }
    pub fn restart_policy(mut self, p: &str) -> Self {
        self.spec().template.spec.get_or_insert_with(Default::default).restart_policy = Some(p.into());
        self
    }
    pub fn managed_by(mut self, m: &str) -> Self {
        self.spec().managed_by = Some(m.into());
        self
    }
    pub fn uid(mut self, u: &str) -> Self {
        self.0.metadata.uid = Some(u.into());
        self
    }
    pub fn deleting(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(now().into());
        self
    }
    pub fn start_time(mut self, t: Timestamp) -> Self {
        self.status().start_time = Some(t.into());
        self
    }
    pub fn counts(mut self, active: i32, succeeded: i32, failed: i32) -> Self {
        let s = self.status();
        s.active = Some(active);
        s.succeeded = Some(succeeded);
        s.failed = Some(failed);
        self
    }
    pub fn ready(mut self, n: i32) -> Self {
        self.status().ready = Some(n);
        self
    }
    pub fn completed_indexes(mut self, s: &str) -> Self {
        self.status().completed_indexes = Some(s.into());
        self
    }
    pub fn failed_indexes(mut self, s: &str) -> Self {
        self.status().failed_indexes = Some(s.into());
        self
    }
    pub fn uncounted(mut self, succeeded: &[&str], failed: &[&str]) -> Self {
        let list = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
        self.status().uncounted_terminated_pods =
            Some(UncountedTerminatedPods { succeeded: list(succeeded), failed: list(failed) });
        self
    }
    pub fn condition(self, type_: &str, status: &str) -> Self {
        self.condition_full(type_, status, "", "")
    }
    pub fn condition_full(mut self, type_: &str, status: &str, reason: &str, message: &str) -> Self {
        let c = new_condition(type_, status, reason, message, secs_ago(60));
        self.status().conditions.get_or_insert_with(Vec::new).push(c);
        self
    }
    pub fn build(self) -> Job {
        self.0
    }
}

fn rule(action: &str) -> PodFailurePolicyRule {
    PodFailurePolicyRule { action: action.into(), on_exit_codes: None, on_pod_conditions: None }
}

pub fn pfp_exit_codes(rules: &[(&str, &str, &[i32])]) -> PodFailurePolicy {
    PodFailurePolicy {
        rules: rules
            .iter()
            .map(|(action, op, values)| PodFailurePolicyRule {
                on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                    container_name: None,
                    operator: op.to_string(),
                    values: values.to_vec(),
                }),
                ..rule(action)
            })
            .collect(),
    }
}

pub fn pfp_pod_conditions(rules: &[(&str, &str, &str)]) -> PodFailurePolicy {
    PodFailurePolicy {
        rules: rules
            .iter()
            .map(|(action, type_, status)| PodFailurePolicyRule {
                on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                    type_: type_.to_string(),
                    status: Some(status.to_string()),
                }]),
                ..rule(action)
            })
            .collect(),
    }
}

pub fn success_policy(rules: &[(Option<&str>, Option<i32>)]) -> SuccessPolicy {
    SuccessPolicy {
        rules: rules
            .iter()
            .map(|(i, c)| k8s_openapi::api::batch::v1::SuccessPolicyRule {
                succeeded_indexes: i.map(str::to_string),
                succeeded_count: *c,
            })
            .collect(),
    }
}

// ---------------------------------------------------------------- Pods

pub struct PodBuilder(Pod);

/// A pod in namespace `default` with UID = name.
pub fn mk_pod(name: &str) -> PodBuilder {
    PodBuilder(Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            uid: Some(name.to_string()),
            ..Default::default()
        },
        spec: Some(PodSpec::default()),
        status: Some(PodStatus::default()),
    })
}

impl PodBuilder {
    fn status(&mut self) -> &mut PodStatus {
        self.0.status.get_or_insert_with(Default::default)
    }
    fn push_container(mut self, init: bool, name: &str, state: ContainerState, restarts: i32) -> Self {
        let cs = ContainerStatus {
            name: name.into(),
            state: Some(state),
            restart_count: restarts,
            ..Default::default()
        };
        let s = self.status();
        let list = if init { &mut s.init_container_statuses } else { &mut s.container_statuses };
        list.get_or_insert_with(Vec::new).push(cs);
        self
    }
    fn terminated(code: i32, at: Option<Timestamp>) -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                finished_at: at.map(Time),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
    pub fn uid(mut self, u: &str) -> Self {
        self.0.metadata.uid = Some(u.into());
        self
    }
    pub fn phase(mut self, p: &str) -> Self {
        self.status().phase = (!p.is_empty()).then(|| p.to_string());
        self
    }
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(k.into(), v.into());
        self
    }
    pub fn index(self, ix: &str) -> Self {
        self.annotation(JOB_COMPLETION_INDEX_ANNOTATION, ix)
    }
    /// `-` means no index annotation (upstream's `noIndex`).
    pub fn maybe_index(self, ix: &str) -> Self {
        if ix == "-" { self } else { self.index(ix) }
    }
    pub fn failure_count(self, c: &str) -> Self {
        self.annotation(JOB_INDEX_FAILURE_COUNT_ANNOTATION, c)
    }
    pub fn finalizer(mut self) -> Self {
        self.0.metadata.finalizers.get_or_insert_with(Vec::new).push(JOB_TRACKING_FINALIZER.into());
        self
    }
    pub fn deleted_at(mut self, t: Timestamp, grace: Option<i64>) -> Self {
        self.0.metadata.deletion_timestamp = Some(t.into());
        self.0.metadata.deletion_grace_period_seconds = grace;
        self
    }
    pub fn condition(self, type_: &str, status: &str) -> Self {
        self.push_condition(type_, status, None)
    }
    pub fn condition_at(self, type_: &str, status: &str, t: Timestamp) -> Self {
        self.push_condition(type_, status, Some(t))
    }
    fn push_condition(mut self, type_: &str, status: &str, t: Option<Timestamp>) -> Self {
        let c = PodCondition {
            type_: type_.into(),
            status: status.into(),
            last_transition_time: t.map(Time),
            ..Default::default()
        };
        self.status().conditions.get_or_insert_with(Vec::new).push(c);
        self
    }
    pub fn ready(self) -> Self {
        self.condition("Ready", "True")
    }
    pub fn container_exit(self, name: &str, code: i32) -> Self {
        self.push_container(false, name, Self::terminated(code, None), 0)
    }
    pub fn init_container_exit(self, name: &str, code: i32) -> Self {
        self.push_container(true, name, Self::terminated(code, None), 0)
    }
    pub fn finished_at(self, t: Timestamp) -> Self {
        self.push_container(false, "", Self::terminated(0, Some(t)), 0)
    }
    pub fn init_finished_at(self, t: Timestamp) -> Self {
        self.push_container(true, "", Self::terminated(0, Some(t)), 0)
    }
    pub fn container_terminated_no_time(self) -> Self {
        self.push_container(false, "", Self::terminated(0, None), 0)
    }
    pub fn container_running(self, name: &str) -> Self {
        let state = ContainerState { running: Some(ContainerStateRunning::default()), ..Default::default() };
        self.push_container(false, name, state, 0)
    }
    pub fn restarts(self, n: i32) -> Self {
        let state = ContainerState { running: Some(ContainerStateRunning::default()), ..Default::default() };
        self.push_container(false, "", state, n)
    }
    pub fn node(mut self, n: &str) -> Self {
        self.0.spec.get_or_insert_with(Default::default).node_name = Some(n.into());
        self
    }
    pub fn created_at(mut self, t: Timestamp) -> Self {
        self.0.metadata.creation_timestamp = Some(t.into());
        self
    }
    pub fn owner(mut self, o: OwnerReference) -> Self {
        self.0.metadata.owner_references.get_or_insert_with(Vec::new).push(o);
        self
    }
    pub fn build(self) -> Pod {
        self.0
    }
}

pub fn facts_of(job: &Job, pods: &[Pod]) -> Vec<PodFacts> {
    pod_facts(&JobView::new(job), &arcs(pods), &HashSet::new())
}

/// Upstream `newPodList` for one phase: pods with the finalizer and a container terminated at
/// `testFinishedAt`.
pub fn pod_list(prefix: &str, n: usize, phase: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let b = mk_pod(&format!("{prefix}-{i}")).phase(phase).finalizer();
            b.push_container(false, "", PodBuilder::terminated(0, Some(test_finished_at())), 0).build()
        })
        .collect()
}

/// `setPodsStatuses`: pending, running (the first `ready` of them Ready), succeeded, failed and
/// terminating (Running with a deletionTimestamp) pods.
pub fn pods_with_statuses(
    pending: usize,
    active: usize,
    succeeded: usize,
    failed: usize,
    terminating: usize,
    ready: usize,
) -> Vec<Pod> {
    let mut pods = pod_list("pending", pending, "Pending");
    let mut running = pod_list("running", active, "Running");
    for p in running.iter_mut().take(ready) {
        let c = PodCondition { type_: "Ready".into(), status: "True".into(), ..Default::default() };
        p.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new).push(c);
    }
    pods.extend(running);
    pods.extend(pod_list("succeeded", succeeded, "Succeeded"));
    pods.extend(pod_list("failed", failed, "Failed"));
    let mut term = pod_list("terminating", terminating, "Running");
    for p in &mut term {
        p.metadata.deletion_timestamp = Some(now().into());
    }
    pods.extend(term);
    pods
}

/// `setPodsStatusesWithIndexes`: (index, phase); terminal pods get a container terminated at
/// `testFinishedAt`; "-" means no index.
pub fn pods_with_indexes(list: &[(&str, &str)]) -> Vec<Pod> {
    list.iter()
        .enumerate()
        .map(|(i, (ix, phase))| {
            let mut b = mk_pod(&format!("idx-{i}")).phase(phase).maybe_index(ix).finalizer();
            if *phase == "Failed" || *phase == "Succeeded" {
                b = b.push_container(false, "", PodBuilder::terminated(0, Some(test_finished_at())), 0);
            }
            b.build()
        })
        .collect()
}

// ---------------------------------------------------------------- the fake shell

/// Failure injection, as upstream's `FakePodControl{Err, CreateLimit}`.
#[derive(Clone, Debug, Default)]
pub struct Fake {
    /// Every pod create, delete and patch fails with this error.
    pub err: Option<String>,
    /// Creates after this many calls fail (0: no limit).
    pub create_limit: usize,
    /// Every status write fails.
    pub status_err: bool,
}

/// Everything a sync did, as upstream's tests observe it.
#[derive(Debug, Default)]
pub struct Run {
    pub skip: Option<Skip>,
    pub action: Option<SyncAction>,
    pub requeue: Option<std::time::Duration>,
    /// Pod templates passed to create (recorded before an injected error, like FakePodControl).
    pub creates: Vec<Pod>,
    pub deletes: Vec<String>,
    pub patches: usize,
    pub statuses: Vec<JobStatus>,
    pub events: Vec<Event>,
    pub metrics: Vec<Metric>,
    pub error: Option<SyncError>,
    pub backoff: Option<BackoffRecord>,
}

impl Run {
    /// The status the test would see: the last one written, else the Job's own.
    pub fn status(&self, job: &Job) -> JobStatus {
        self.statuses.last().cloned().or_else(|| job.status.clone()).unwrap_or_default()
    }
    pub fn created_indexes(&self) -> Vec<i64> {
        let mut v: Vec<i64> = self
            .creates
            .iter()
            .filter_map(|p| {
                p.metadata.annotations.as_ref()?.get(JOB_COMPLETION_INDEX_ANNOTATION)?.parse().ok()
            })
            .collect();
        v.sort_unstable();
        v
    }
    pub fn pods_finished_metric(&self, result: &str) -> u64 {
        self.metrics
            .iter()
            .map(|m| match m {
                Metric::JobPodsFinished { result: r, delta, .. } if *r == result => *delta,
                _ => 0,
            })
            .sum()
    }
}

pub struct RunOpts<'a> {
    pub expectations_satisfied: bool,
    pub expected_rm: HashSet<String>,
    pub backoff: Option<BackoffRecord>,
    pub config: Config,
    pub now: Timestamp,
    pub fake: Fake,
    /// Check every write against the apiserver's rules (needs a consistent starting status).
    pub validate: bool,
    #[allow(dead_code)]
    pub _p: std::marker::PhantomData<&'a ()>,
}

impl Default for RunOpts<'_> {
    fn default() -> Self {
        Self {
            expectations_satisfied: true,
            expected_rm: HashSet::new(),
            backoff: None,
            config: Config::default(),
            now: now(),
            fake: Fake::default(),
            validate: true,
            _p: std::marker::PhantomData,
        }
    }
}

pub fn run_sync(job: &Job, pods: &[Pod]) -> Run {
    run_sync_with(job, pods, RunOpts::default())
}

/// Runs one sync through all stages with a fake API, like upstream's `syncJob` under test.
pub fn run_sync_with(job: &Job, pods: &[Pod], o: RunOpts<'_>) -> Run {
    let pods = arcs(pods);
    let input = SyncInput {
        job,
        pods: &pods,
        now: o.now,
        expectations_satisfied: o.expectations_satisfied,
        expected_removed_finalizers: &o.expected_rm,
        backoff: o.backoff.as_ref(),
        stall: None,
        config: &o.config,
    };
    let mut run = Run::default();
    let plan = match super::sync_job(&input) {
        JobPlan::Skip(s) => {
            run.events = s.events.clone();
            run.skip = Some(s);
            return run;
        }
        JobPlan::Sync(p) => p,
    };
    run.action = Some(plan.action);
    run.requeue = plan.requeue_after;
    let err = o.fake.err.clone();
    let results = match &plan.pod_ops {
        PodOps::None => PodOpResults::None,
        PodOps::DeleteActive(pods) => PodOpResults::Deletes(
            pods.iter()
                .map(|p| {
                    run.deletes.push(p.name.clone());
                    err.clone().map_or(DeleteOutcome::Deleted, DeleteOutcome::DeleteFailed)
                })
                .collect(),
        ),
        PodOps::RemoveFinalizerAndDelete(pods) => PodOpResults::Deletes(
            pods.iter()
                .map(|p| {
                    run.patches += 1;
                    if let Some(e) = &err {
                        return DeleteOutcome::PatchFailed(e.clone());
                    }
                    run.deletes.push(p.name.clone());
                    DeleteOutcome::Deleted
                })
                .collect(),
        ),
        PodOps::Create(c) => {
            let mut out = vec![CreateOutcome::Skipped; c.pods.len()];
            let mut calls = 0;
            for batch in &c.batches {
                let mut batch_failed = false;
                for k in batch.clone() {
                    calls += 1;
                    if o.fake.create_limit != 0 && calls > o.fake.create_limit {
                        out[k] = CreateOutcome::Failed(format!(
                            "not creating pod, limit {} already reached",
                            o.fake.create_limit
                        ));
                        batch_failed = true;
                        continue;
                    }
                    run.creates.push(Pod::clone(&c.pods[k]));
                    out[k] = match &err {
                        Some(e) => {
                            batch_failed = true;
                            CreateOutcome::Failed(e.clone())
                        }
                        None => CreateOutcome::Created(format!(
                            "{}{k:05}",
                            c.pods[k].metadata.generate_name.as_deref().unwrap_or("")
                        )),
                    };
                }
                if batch_failed {
                    break;
                }
            }
            PodOpResults::Creates(out)
        }
    };
    let status_plan = plan.after_pod_ops(&results);
    run.events.extend(status_plan.events.iter().cloned());
    run.metrics.extend(status_plan.metrics.iter().cloned());
    let mut current = job.status.clone().unwrap_or_default();
    let scalable = job
        .spec
        .as_ref()
        .is_some_and(|s| s.completion_mode.as_deref() == Some("Indexed") && s.completions == s.parallelism);
    if let Some(s) = &status_plan.interim_status {
        if let Err(e) = validate_status_update(&current, s, scalable)
            && o.validate
        {
            panic!("the apiserver would reject the interim status: {e}\n{s:#?}");
        }
        current = s.clone();
        run.statuses.push(s.clone());
        if o.fake.status_err {
            return run;
        }
    }
    run.backoff = status_plan.backoff_record.clone();
    run.metrics.extend(status_plan.metrics_after_interim.iter().cloned());
    let removals: Vec<FinalizerRemoval> = status_plan
        .remove_finalizers
        .iter()
        .map(|_| {
            run.patches += 1;
            err.clone().map_or(FinalizerRemoval::Removed, FinalizerRemoval::Failed)
        })
        .collect();
    let last = status_plan.after_finalizer_removals(&removals);
    if let Some(s) = &last.status {
        if let Err(e) = validate_status_update(&current, s, scalable)
            && o.validate
        {
            panic!("the apiserver would reject the final status: {e}\n{s:#?}");
        }
        run.statuses.push(s.clone());
        if o.fake.status_err {
            return run;
        }
    }
    run.events.extend(last.events);
    run.metrics.extend(last.metrics);
    run.error = last.error;
    run
}

/// A condition as the tests compare it: (type, status, reason, message).
pub type Cond = (&'static str, &'static str, &'static str, &'static str);

pub fn conds(status: &JobStatus) -> Vec<(String, String, String, String)> {
    status
        .conditions
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .map(|c: &JobCondition| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
        .collect()
}

pub fn want_conds(list: &[Cond]) -> Vec<(String, String, String, String)> {
    list.iter().map(|(a, b, c, d)| (a.to_string(), b.to_string(), c.to_string(), d.to_string())).collect()
}

pub const BLE: &str = "BackoffLimitExceeded";
pub const BLE_MSG: &str = "Job has reached the specified backoff limit";
pub const CR: &str = "CompletionsReached";
pub const CR_MSG: &str = "Reached expected number of succeeded pods";
pub const DE: &str = "DeadlineExceeded";
pub const DE_MSG: &str = "Job was active longer than specified deadline";

fn cond_true(s: &JobStatus, t: &str) -> bool {
    s.conditions.as_deref().unwrap_or(&[]).iter().any(|c| c.type_ == t && c.status == "True")
}

/// The part of the apiserver's `ValidateJobStatusUpdate` (JobManagedBy rules) a controller can break.
pub fn validate_status_update(
    old: &JobStatus,
    new: &JobStatus,
    succeeded_may_decrease: bool,
) -> Result<(), String> {
    let finished = cond_true(new, "Complete") || cond_true(new, "Failed");
    let uncounted = new.uncounted_terminated_pods.clone().unwrap_or_default();
    let n = |v: Option<i32>| v.unwrap_or(0);
    if cond_true(new, "Failed") && !cond_true(new, "FailureTarget") {
        return Err("Failed=True without FailureTarget=True".into());
    }
    if cond_true(new, "Complete") && (!cond_true(new, "SuccessCriteriaMet") || new.completion_time.is_none())
    {
        return Err("Complete=True without SuccessCriteriaMet=True and completionTime".into());
    }
    if new.completion_time.is_some() && !cond_true(new, "Complete") {
        return Err("completionTime on a Job that is not Complete".into());
    }
    if cond_true(new, "Complete") && (cond_true(new, "Failed") || cond_true(new, "FailureTarget")) {
        return Err("Complete together with Failed/FailureTarget".into());
    }
    if finished && (n(new.active) > 0 || n(new.terminating) > 0) {
        return Err("finished Job with active or terminating pods".into());
    }
    if finished
        && (uncounted.succeeded.is_some_and(|v| !v.is_empty())
            || uncounted.failed.is_some_and(|v| !v.is_empty()))
    {
        return Err("finished Job with uncounted pods".into());
    }
    if finished && new.start_time.is_none() {
        return Err("finished Job without startTime".into());
    }
    if n(new.ready) > n(new.active) {
        return Err(format!("ready {} > active {}", n(new.ready), n(new.active)));
    }
    if n(new.failed) < n(old.failed) {
        return Err("decreasing failed counter".into());
    }
    if !succeeded_may_decrease && n(new.succeeded) < n(old.succeeded) {
        return Err("decreasing succeeded counter".into());
    }
    if old.completion_time.is_some() && old.completion_time != new.completion_time {
        return Err("completionTime changed".into());
    }
    for t in ["Complete", "Failed"] {
        if cond_true(old, t) && !cond_true(new, t) {
            return Err(format!("terminal condition {t} removed"));
        }
    }
    Ok(())
}

/// Pods as the shell hands them to the core.
pub fn arcs(pods: &[Pod]) -> Vec<std::sync::Arc<Pod>> {
    pods.iter().cloned().map(std::sync::Arc::new).collect()
}
