//! `manageJob`: how many pods the Job wants, which excess pods to delete (ActivePods order, bad
//! indexes first), which pods/indexes to create, and the pod-failure back-off gate.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::backoff::{BackoffRecord, remaining_time};
use super::config::Config;
use super::indexed::{duplicated_index_pods_for_removal, first_pending_indexes, new_index_failure_counts};
use super::intervals::OrderedIntervals;
use super::ordering::{ActivePodsKey, active_pods_key};
use super::plan::SyncAction;
use super::pod_template::pod_from_template;
use super::view::{JobView, PodFacts};

pub(super) struct ManageInput<'a> {
    pub view: &'a JobView<'a>,
    pub pods: &'a [Arc<Pod>],
    pub facts: &'a [PodFacts],
    /// Positions of the active pods.
    pub active: &'a [usize],
    pub terminating: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub succeeded_indexes: &'a OrderedIntervals,
    pub failed_indexes: Option<&'a OrderedIntervals>,
    pub delayed: &'a HashMap<i64, usize>,
    pub backoff: &'a BackoffRecord,
    pub now: Timestamp,
    pub config: &'a Config,
}

pub(super) enum ManageOps {
    None,
    /// Positions of pods to delete (finalizer first).
    Delete(Vec<usize>),
    /// Pods to create and their `job_pods_creation_total` reason.
    Create {
        pods: Vec<Arc<Pod>>,
        reason: &'static str,
    },
}

pub(super) struct ManageDecision {
    pub action: SyncAction,
    pub ops: ManageOps,
    pub requeue: Option<Duration>,
    /// Creates wait on the pod-failure back-off until then, for this many pods.
    pub backoff_until: Option<(Timestamp, usize)>,
}

pub(super) fn manage_job(m: &ManageInput<'_>) -> ManageDecision {
    let view = m.view;
    let cfg = m.config;
    let active = m.active.len() as i64;
    let keys: Vec<Option<ActivePodsKey>> = m.pods.iter().map(|_| None).collect();
    let mut keys = keys;
    for &i in m.active {
        keys[i] = Some(active_pods_key(&m.pods[i]));
    }
    let order = |a: usize, b: usize| keys[a].cmp(&keys[b]);

    if view.suspended {
        let rm = active_pods_for_removal(m, active, &order);
        return ManageDecision {
            action: SyncAction::PodsDeleted,
            ops: ManageOps::Delete(rm),
            requeue: None,
            backoff_until: None,
        };
    }

    let parallelism = i64::from(view.parallelism);
    let want = match view.completions {
        None if m.succeeded > 0 => active,
        None => parallelism,
        Some(c) => (i64::from(c) - m.succeeded).min(parallelism).max(0),
    };
    let rm_at_least = (active - want).max(0);
    let mut rm = active_pods_for_removal(m, rm_at_least, &order);
    rm.truncate(cfg.max_pod_create_delete_per_sync);
    if !rm.is_empty() {
        return ManageDecision {
            action: SyncAction::PodsDeleted,
            ops: ManageOps::Delete(rm),
            requeue: None,
            backoff_until: None,
        };
    }

    let terminating = if view.only_replace_failed { m.terminating } else { 0 };
    let diff = want - terminating - active;
    if diff <= 0 {
        return ManageDecision {
            action: SyncAction::Tracking,
            ops: ManageOps::None,
            requeue: None,
            backoff_until: None,
        };
    }
    let waiting = usize::try_from(diff).unwrap_or(usize::MAX);
    let backoff_wait = |remaining: Duration| ManageDecision {
        action: SyncAction::PodsCreated,
        ops: ManageOps::None,
        requeue: Some(remaining.max(cfg.sync_job_batch_period)),
        backoff_until: jiff::SignedDuration::try_from(remaining)
            .ok()
            .and_then(|r| m.now.checked_add(r).ok())
            .map(|until| (until, waiting)),
    };
    if !view.has_backoff_limit_per_index() {
        let b = m.backoff;
        let remaining = remaining_time(
            i64::from(b.failures_after_last_success),
            b.last_failure_time,
            m.now,
            cfg.pod_failure_backoff,
            cfg.max_pod_failure_backoff,
        );
        if !remaining.is_zero() {
            return backoff_wait(remaining);
        }
    }
    let diff = usize::try_from(diff).unwrap_or(usize::MAX).min(cfg.max_pod_create_delete_per_sync);

    let reason = if view.replacement_policy_failed && m.failed > 0 {
        "recreate_failed"
    } else if m.failed > 0 || m.terminating > 0 {
        "recreate_terminating_or_failed"
    } else {
        "new"
    };

    if !view.indexed {
        // A NonIndexed Job's pods are one object: the shell builds its request body once.
        let pod = Arc::new(pod_from_template(view.job, None, None));
        let pods = std::iter::repeat_n(pod, diff).collect();
        return ManageDecision {
            action: SyncAction::PodsCreated,
            ops: ManageOps::Create { pods, reason },
            requeue: None,
            backoff_until: None,
        };
    }

    let completions = view.index_bound();
    let active_indexes: Vec<i64> = m.active.iter().filter_map(|&i| m.facts[i].index).collect();
    let terminating_indexes: Option<Vec<i64>> = view
        .only_replace_failed
        .then(|| m.facts.iter().filter(|p| p.terminating()).filter_map(|p| p.index).collect());
    let mut indexes = first_pending_indexes(
        &active_indexes,
        terminating_indexes.as_deref(),
        m.succeeded_indexes,
        m.failed_indexes,
        diff,
        completions,
    );
    if view.has_backoff_limit_per_index() {
        // getPodCreationInfoForIndependentIndexes
        let mut now_indexes = Vec::with_capacity(indexes.len());
        let mut min_remaining: Option<Duration> = None;
        for ix in indexes {
            let remaining = m.delayed.get(&ix).map_or(Duration::ZERO, |&p| {
                let p = &m.facts[p];
                remaining_time(
                    p.absolute_failure_count() + 1,
                    Some(p.finish_time),
                    m.now,
                    cfg.pod_failure_backoff,
                    cfg.max_pod_failure_backoff,
                )
            });
            if remaining.is_zero() {
                now_indexes.push(ix);
            } else if min_remaining.is_none_or(|r| remaining < r) {
                min_remaining = Some(remaining);
            }
        }
        if now_indexes.is_empty()
            && let Some(remaining) = min_remaining
        {
            return backoff_wait(remaining);
        }
        indexes = now_indexes;
    }
    let per_index = view.has_backoff_limit_per_index();
    let pods = indexes
        .into_iter()
        .map(|ix| {
            let counts =
                per_index.then(|| new_index_failure_counts(view, m.delayed.get(&ix).map(|&p| &m.facts[p])));
            Arc::new(pod_from_template(view.job, Some(ix), counts))
        })
        .collect();
    ManageDecision {
        action: SyncAction::PodsCreated,
        ops: ManageOps::Create { pods, reason },
        requeue: None,
        backoff_until: None,
    }
}

/// `activePodsForRemoval`: for Indexed Jobs pods with bad or duplicate indexes first, then (if more
/// are needed) the remaining active pods in ActivePods order.
fn active_pods_for_removal(
    m: &ManageInput<'_>,
    rm_at_least: i64,
    order: &dyn Fn(usize, usize) -> std::cmp::Ordering,
) -> Vec<usize> {
    let (mut rm, mut left) = if m.view.indexed {
        duplicated_index_pods_for_removal(m.active.to_vec(), m.facts, m.view.index_bound(), order)
    } else {
        (Vec::new(), m.active.to_vec())
    };
    let need = usize::try_from(rm_at_least).unwrap_or(0);
    if rm.len() < need {
        left.sort_by(|&a, &b| order(a, b));
        let more = (need - rm.len()).min(left.len());
        rm.extend_from_slice(&left[..more]);
    }
    rm
}
