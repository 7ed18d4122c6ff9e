//! A defaulted, panic-free view of the Job spec and a one-pass summary of each pod, so the decision
//! never re-reads optional API fields and never scans the pod list twice for the same fact.

use std::collections::HashSet;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, PodFailurePolicy, SuccessPolicy};
use k8s_openapi::api::core::v1::Pod;

use super::backoff::finished_time;
use super::failure_policy::{PfpMatch, match_pod_failure_policy};
use super::indexed::{completion_index, parse_failure_count};
use super::plan::PodRef;
use super::{
    JOB_CONTROLLER_NAME, JOB_INDEX_FAILURE_COUNT_ANNOTATION, JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION,
    has_tracking_finalizer,
};

pub(super) const NON_INDEXED: &str = "NonIndexed";
pub(super) const INDEXED: &str = "Indexed";

/// The Job spec with apiserver defaults applied where a field is missing.
#[derive(Debug)]
pub(super) struct JobView<'a> {
    pub job: &'a Job,
    pub indexed: bool,
    pub completions: Option<i32>,
    pub parallelism: i32,
    pub backoff_limit: i32,
    pub backoff_limit_per_index: Option<i32>,
    pub max_failed_indexes: Option<i32>,
    pub suspended: bool,
    pub deleting: bool,
    pub pod_failure_policy: Option<&'a PodFailurePolicy>,
    pub success_policy: Option<&'a SuccessPolicy>,
    /// `onlyReplaceFailedPods`: podReplacementPolicy=Failed or any podFailurePolicy.
    pub only_replace_failed: bool,
    /// `spec.podReplacementPolicy` (defaulted) is `Failed`; used by `job_pods_creation_total`.
    pub replacement_policy_failed: bool,
    pub restart_on_failure: bool,
    pub active_deadline_seconds: Option<i64>,
}

impl<'a> JobView<'a> {
    pub fn new(job: &'a Job) -> Self {
        let spec = job.spec.as_ref();
        let completions = spec.and_then(|s| s.completions);
        let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
        let backoff_limit_per_index = spec.and_then(|s| s.backoff_limit_per_index);
        let default_backoff = if backoff_limit_per_index.is_some() { i32::MAX } else { 6 };
        let pod_failure_policy = spec.and_then(|s| s.pod_failure_policy.as_ref());
        let replacement = spec.and_then(|s| s.pod_replacement_policy.as_deref());
        let replacement_policy_failed = match replacement {
            Some(p) => p == "Failed",
            None => pod_failure_policy.is_some(),
        };
        let restart_policy =
            spec.and_then(|s| s.template.spec.as_ref()).and_then(|ps| ps.restart_policy.as_deref());
        Self {
            job,
            indexed: spec.and_then(|s| s.completion_mode.as_deref()) == Some(INDEXED),
            completions,
            parallelism,
            backoff_limit: spec.and_then(|s| s.backoff_limit).unwrap_or(default_backoff),
            backoff_limit_per_index,
            max_failed_indexes: spec.and_then(|s| s.max_failed_indexes),
            suspended: spec.and_then(|s| s.suspend).unwrap_or(false),
            deleting: job.metadata.deletion_timestamp.is_some(),
            pod_failure_policy,
            success_policy: spec.and_then(|s| s.success_policy.as_ref()),
            only_replace_failed: replacement == Some("Failed") || pod_failure_policy.is_some(),
            replacement_policy_failed,
            restart_on_failure: restart_policy == Some("OnFailure"),
            active_deadline_seconds: spec.and_then(|s| s.active_deadline_seconds),
        }
    }

    /// `completions` as the index bound of an Indexed Job (validation requires it; 0 if missing).
    pub fn index_bound(&self) -> i64 {
        i64::from(self.completions.unwrap_or(0))
    }

    pub fn completion_mode(&self) -> &'static str {
        if self.indexed { INDEXED } else { NON_INDEXED }
    }

    pub fn has_backoff_limit_per_index(&self) -> bool {
        self.backoff_limit_per_index.is_some()
    }

    pub fn managed_by(&self) -> &'a str {
        self.job.spec.as_ref().and_then(|s| s.managed_by.as_deref()).unwrap_or(JOB_CONTROLLER_NAME)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
    Other,
}

pub(super) fn phase_of(pod: &Pod) -> Phase {
    match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Pending") => Phase::Pending,
        Some("Running") => Phase::Running,
        Some("Succeeded") => Phase::Succeeded,
        Some("Failed") => Phase::Failed,
        Some("Unknown") => Phase::Unknown,
        _ => Phase::Other,
    }
}

/// `podutil.IsPodReady`: the first `Ready` condition has status `True`.
pub(super) fn is_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

pub(super) fn ready_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[])
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// What the decision needs to know about one pod, computed once.
#[derive(Clone, Debug)]
pub(super) struct PodFacts {
    /// The pod itself, shared with the cache: its name, namespace and uid are read from it
    /// rather than copied for every pod of every sync.
    pub pod: Arc<Pod>,
    pub phase: Phase,
    pub deleting: bool,
    pub has_finalizer: bool,
    /// The pod's finalizer removal is still expected (treated as already processed).
    pub expected_rm: bool,
    /// Valid completion index (>= 0), whatever its range.
    pub index: Option<i64>,
    pub ready: bool,
    /// `isPodFailed` for this Job.
    pub failed: bool,
    /// `matchPodFailurePolicy` for this pod (no policy: counted, no action).
    pub pfp: PfpMatch,
    pub failure_count: i32,
    pub ignored_failure_count: i32,
    pub finish_time: Timestamp,
    /// Σ container and init-container restarts if Running or Pending (OnFailure back-off).
    pub restarts_if_active_phase: i64,
}

impl PodFacts {
    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or("")
    }
    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("")
    }
    pub fn uid(&self) -> &str {
        self.pod.metadata.uid.as_deref().unwrap_or("")
    }
    pub fn terminal(&self) -> bool {
        matches!(self.phase, Phase::Succeeded | Phase::Failed)
    }
    /// `IsPodActive`.
    pub fn active(&self) -> bool {
        !self.terminal() && !self.deleting
    }
    /// `IsPodTerminating`.
    pub fn terminating(&self) -> bool {
        !self.terminal() && self.deleting
    }
    /// Has the finalizer and is not expected to lose it (`uidsWithFinalizer`).
    pub fn tracked(&self) -> bool {
        self.has_finalizer && !self.expected_rm
    }
    pub fn absolute_failure_count(&self) -> i64 {
        i64::from(self.failure_count) + i64::from(self.ignored_failure_count)
    }
    pub fn pod_ref(&self) -> PodRef {
        PodRef {
            namespace: self.namespace().to_string(),
            name: self.name().to_string(),
            uid: self.uid().to_string(),
        }
    }
}

pub(super) fn pod_facts(
    view: &JobView<'_>,
    pods: &[Arc<Pod>],
    expected_rm: &HashSet<String>,
) -> Vec<PodFacts> {
    pods.iter()
        .map(|pod| {
            let phase = phase_of(pod);
            let deleting = pod.metadata.deletion_timestamp.is_some();
            let uid = pod.metadata.uid.as_deref().unwrap_or("");
            let failed = phase == Phase::Failed
                || (!view.only_replace_failed && deleting && phase != Phase::Succeeded);
            let annotations = pod.metadata.annotations.as_ref();
            let annotation = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
            let restarts_if_active_phase = if matches!(phase, Phase::Running | Phase::Pending) {
                let status = pod.status.as_ref();
                let sum = |list: Option<&Vec<k8s_openapi::api::core::v1::ContainerStatus>>| {
                    list.map_or(0i64, |l| l.iter().map(|c| i64::from(c.restart_count)).sum())
                };
                sum(status.and_then(|s| s.init_container_statuses.as_ref()))
                    + sum(status.and_then(|s| s.container_statuses.as_ref()))
            } else {
                0
            };
            PodFacts {
                pod: pod.clone(),
                expected_rm: expected_rm.contains(uid),
                phase,
                deleting,
                has_finalizer: has_tracking_finalizer(pod),
                index: completion_index(pod),
                ready: is_ready(pod),
                failed,
                pfp: match_pod_failure_policy(view.pod_failure_policy, pod),
                failure_count: annotation(JOB_INDEX_FAILURE_COUNT_ANNOTATION).map_or(0, parse_failure_count),
                ignored_failure_count: annotation(JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION)
                    .map_or(0, parse_failure_count),
                finish_time: finished_time(pod),
                restarts_if_active_phase,
            }
        })
        .collect()
}
