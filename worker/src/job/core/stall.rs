//! Stall signals beyond upstream (issue 29 §2, docs/beyond-upstream.md "Stall signals"): what a
//! Job that cannot make progress tells its user, decided from the sync's inputs and the shell's
//! create results, with the per-Job [`StallRecord`] the shell keeps between syncs so that each
//! signal is sent once per back-off step (or once per change), never once per attempt.
//!
//! Three signals, all additive (an Event, a condition type under `batchfleet.io/`):
//! - pod creates refused by the API (quota, an admission webhook, validation): a Warning
//!   `PodCreationBlocked` Event per back-off step of the controller's failed-sync back-off, and the
//!   condition [`POD_CREATION_BLOCKED`];
//! - the pod-failure back-off: a Normal `PodFailureBackoff` Event saying until when, once per step;
//! - pods stuck Terminating past their grace period, named with their nodes: a Warning
//!   `PodsTerminatingOnLostNode` Event once per change of the node set.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::config::Config;
use super::plan::Event;

/// The condition a Job carries while its pod creates are refused. Upstream's Job status
/// validation accepts condition types it does not know (it only constrains its own types), so the
/// type is API-compatible; it is never `Complete`/`Failed`, so nothing reads the Job as finished.
pub const POD_CREATION_BLOCKED: &str = "batchfleet.io/PodCreationBlocked";
/// Reason of the `False` condition once a create succeeds again.
pub const REASON_PODS_CREATED: &str = "PodsCreated";
pub(super) const MSG_PODS_CREATED: &str = "A pod create succeeded after being refused";

pub const EVENT_POD_CREATION_BLOCKED: &str = "PodCreationBlocked";
pub const EVENT_POD_FAILURE_BACKOFF: &str = "PodFailureBackoff";
pub const EVENT_PODS_TERMINATING_ON_LOST_NODE: &str = "PodsTerminatingOnLostNode";

/// How long after its deletion deadline (`deletionTimestamp`, which already includes the grace
/// period) a pod still present is taken as stuck on a node that no longer acts: a live kubelet
/// ends a pod's containers by that deadline and its status update follows within seconds.
pub const TERMINATING_STUCK_AFTER: Duration = Duration::from_secs(60);

/// A pod create the API refused with a status: the code and the Status message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateRefusal {
    pub code: u16,
    pub message: String,
}

/// Why creates are blocked: the condition's reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockReason {
    /// 403 from ResourceQuota admission (`exceeded quota`, `failed quota`).
    QuotaExceeded,
    /// A validating or mutating admission webhook denied the request.
    AdmissionRejected,
    /// Any other 403 (RBAC, an admission plugin).
    Forbidden,
    /// 400/422: the pod the template makes is invalid.
    Invalid,
}

impl BlockReason {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockReason::QuotaExceeded => "QuotaExceeded",
            BlockReason::AdmissionRejected => "AdmissionRejected",
            BlockReason::Forbidden => "Forbidden",
            BlockReason::Invalid => "Invalid",
        }
    }
}

/// Whether a refusal blocks creates (not transient: retrying the same create gets the same
/// answer until someone changes the quota, the webhook or the Job), and why. Transient answers
/// (409, 429, 5xx, timeouts) and transport errors are not: upstream's retries cure them.
pub fn classify_refusal(code: u16, message: &str) -> Option<BlockReason> {
    // kube-apiserver's webhook denial: `admission webhook "NAME" denied the request: …`.
    let webhook = message.contains("admission webhook");
    match code {
        403 if message.contains("exceeded quota") || message.contains("failed quota") => {
            Some(BlockReason::QuotaExceeded)
        }
        400 | 403 | 422 if webhook => Some(BlockReason::AdmissionRejected),
        403 => Some(BlockReason::Forbidden),
        400 | 422 => Some(BlockReason::Invalid),
        _ => None,
    }
}

/// A run of refused creates: its reason and the back-off step it is at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedSteps {
    pub reason: BlockReason,
    /// 0 for the first refusal; one more each time a back-off delay has passed.
    pub step: u32,
    pub step_started: Timestamp,
}

/// What the shell keeps per Job between syncs (dropped with the Job or its shard).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StallRecord {
    pub blocked: Option<BlockedSteps>,
    /// The back-off deadline last announced by a `PodFailureBackoff` Event.
    pub announced_backoff_until: Option<Timestamp>,
    /// The nodes (sorted) last named by a `PodsTerminatingOnLostNode` Event.
    pub announced_lost_nodes: Vec<String>,
}

/// The delay of back-off step `step` of the controller's failed-sync back-off (the work queue's
/// per-Job rate limiter: `api_backoff·2^step`, capped at `max_api_backoff`).
pub fn step_delay(step: u32, cfg: &Config) -> Duration {
    let factor = 1u32.checked_shl(step.min(31)).unwrap_or(u32::MAX);
    cfg.api_backoff.saturating_mul(factor).min(cfg.max_api_backoff)
}

/// Folds one sync's refusal into the run: `(new run, whether this refusal begins a new step)`.
/// A new run (first refusal, or another reason) begins at step 0; within a run, a new step begins
/// once the current step's delay has passed since the step began. Retries sooner than that
/// (pod events also trigger syncs) are the same step.
pub fn next_blocked_step(
    prev: Option<&BlockedSteps>,
    reason: BlockReason,
    now: Timestamp,
    cfg: &Config,
) -> (BlockedSteps, bool) {
    match prev {
        Some(p) if p.reason == reason => {
            let delay = SignedDuration::try_from(step_delay(p.step, cfg)).unwrap_or(SignedDuration::MAX);
            if now.duration_since(p.step_started) >= delay {
                (BlockedSteps { reason, step: p.step.saturating_add(1), step_started: now }, true)
            } else {
                (p.clone(), false)
            }
        }
        _ => (BlockedSteps { reason, step: 0, step_started: now }, true),
    }
}

pub(super) fn blocked_event(reason: BlockReason, step: u32, next_retry: Duration, message: &str) -> Event {
    Event::warning(
        EVENT_POD_CREATION_BLOCKED,
        format!(
            "Pod creation is blocked ({}, back-off step {}, next attempt within {}s): {message}",
            reason.as_str(),
            step + 1,
            next_retry.as_secs().max(1)
        ),
    )
}

pub(super) fn backoff_event(until: Timestamp, pods: usize) -> Event {
    let until = until.round(jiff::Unit::Second).unwrap_or(until);
    Event::normal(
        EVENT_POD_FAILURE_BACKOFF,
        format!("Waiting for the pod-failure back-off until {until} before creating {pods} pod(s)"),
    )
}

/// Which announcements of the back-off deadline are due: `Some(event)` when `until` differs from
/// the one announced last.
pub fn backoff_announcement(announced: Option<Timestamp>, until: Timestamp, pods: usize) -> Option<Event> {
    (announced != Some(until)).then(|| backoff_event(until, pods))
}

/// Whether a Terminating pod on `node` whose deletion deadline is `deadline` is stuck at `now`:
/// [`TERMINATING_STUCK_AFTER`] past its deadline. A pod with no node cannot be on a lost node.
pub fn is_stuck(node: &str, deadline: Timestamp, now: Timestamp) -> bool {
    let after = SignedDuration::try_from(TERMINATING_STUCK_AFTER).unwrap_or(SignedDuration::MAX);
    !node.is_empty() && now.duration_since(deadline) >= after
}

/// The nodes holding pods stuck Terminating, from `(node, deletion deadline)` of the Job's
/// Terminating pods; sorted and deduplicated.
pub fn lost_nodes<'a>(
    terminating: impl IntoIterator<Item = (&'a str, Timestamp)>,
    now: Timestamp,
) -> Vec<String> {
    let mut nodes: Vec<String> = terminating
        .into_iter()
        .filter(|&(node, deadline)| is_stuck(node, deadline, now))
        .map(|(node, _)| node.to_string())
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// How long until the next of these pods (on a node) becomes stuck, if any is not yet.
pub fn next_stuck_in<'a>(
    terminating: impl IntoIterator<Item = (&'a str, Timestamp)>,
    now: Timestamp,
) -> Option<Duration> {
    let after = SignedDuration::try_from(TERMINATING_STUCK_AFTER).unwrap_or(SignedDuration::MAX);
    terminating
        .into_iter()
        .filter(|&(node, deadline)| !node.is_empty() && !is_stuck(node, deadline, now))
        .filter_map(|(_, deadline)| Duration::try_from(after - now.duration_since(deadline)).ok())
        .min()
}

pub(super) fn lost_node_event(nodes: &[String], pods: usize) -> Event {
    Event::warning(
        EVENT_PODS_TERMINATING_ON_LOST_NODE,
        format!(
            "{pods} pod(s) of this Job are stuck Terminating past their grace period on node(s) {}: \
             the node is likely lost; the Job waits for them (PodGC removes them once the node is \
             gone or tainted node.kubernetes.io/out-of-service)",
            nodes.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::core::testutil::ts;

    #[test]
    fn refusals_are_classified_by_code_and_message() {
        let quota = r#"pods "j-abc" is forbidden: exceeded quota: q, requested: pods=1, used: pods=3, limited: pods=3"#;
        let failed_quota =
            r#"pods "j-abc" is forbidden: failed quota: q: must specify requests.cpu for: main"#;
        let webhook = r#"admission webhook "deny.example.com" denied the request: no"#;
        let cases: Vec<(u16, &str, Option<BlockReason>)> = vec![
            (403, quota, Some(BlockReason::QuotaExceeded)),
            (403, failed_quota, Some(BlockReason::QuotaExceeded)),
            (403, webhook, Some(BlockReason::AdmissionRejected)),
            (400, webhook, Some(BlockReason::AdmissionRejected)),
            (422, webhook, Some(BlockReason::AdmissionRejected)),
            (403, "pods is forbidden: User cannot create", Some(BlockReason::Forbidden)),
            (422, "Pod \"x\" is invalid: spec.containers: Required value", Some(BlockReason::Invalid)),
            (400, "bad request", Some(BlockReason::Invalid)),
            // Transient answers: upstream's retries cure them, nothing is blocked.
            (409, "already exists", None),
            (429, "too many requests", None),
            (500, webhook, None),
            (503, quota, None),
            (504, "timeout", None),
        ];
        for (code, msg, want) in cases {
            assert_eq!(classify_refusal(code, msg), want, "{code} {msg}");
        }
    }

    #[test]
    fn step_delays_double_from_the_api_backoff_up_to_its_cap() {
        let cfg = Config::default();
        let secs: Vec<u64> = (0..9).map(|s| step_delay(s, &cfg).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(step_delay(u32::MAX, &cfg), cfg.max_api_backoff);
    }

    /// Attempts every 250 ms for 20 s: the refusals open steps at 0, 1, 3, 7 and 15 s only.
    #[test]
    fn retries_within_a_step_are_not_new_steps() {
        let cfg = Config::default();
        let start = ts("2026-11-28T00:00:00Z");
        let mut run: Option<BlockedSteps> = None;
        let mut steps_at = Vec::new();
        for k in 0..80 {
            let now = start + SignedDuration::from_millis(250 * k);
            let (next, new_step) = next_blocked_step(run.as_ref(), BlockReason::QuotaExceeded, now, &cfg);
            if new_step {
                steps_at.push(now.duration_since(start).as_millis());
            }
            run = Some(next);
        }
        assert_eq!(steps_at, vec![0, 1000, 3000, 7000, 15000]);
        assert_eq!(run.map(|r| r.step), Some(4));
    }

    #[test]
    fn another_reason_starts_a_new_run() {
        let cfg = Config::default();
        let t0 = ts("2026-11-28T00:00:00Z");
        let prev = BlockedSteps { reason: BlockReason::QuotaExceeded, step: 5, step_started: t0 };
        let now = t0 + SignedDuration::from_secs(1);
        let (next, new_step) = next_blocked_step(Some(&prev), BlockReason::AdmissionRejected, now, &cfg);
        assert!(new_step);
        assert_eq!(next, BlockedSteps { reason: BlockReason::AdmissionRejected, step: 0, step_started: now });
    }

    #[test]
    fn backoff_is_announced_once_per_deadline() {
        let until = ts("2026-11-28T00:00:10.4Z");
        let first = backoff_announcement(None, until, 2).expect("first deadline is announced");
        assert_eq!(first.reason, EVENT_POD_FAILURE_BACKOFF);
        assert!(first.message.contains("until 2026-11-28T00:00:10Z"), "{}", first.message);
        assert_eq!(backoff_announcement(Some(until), until, 2), None);
        let later = ts("2026-11-28T00:00:30Z");
        assert!(backoff_announcement(Some(until), later, 1).is_some());
    }

    #[test]
    fn lost_nodes_are_those_of_pods_past_their_deadline() {
        let now = ts("2026-11-28T00:10:00Z");
        let pods = vec![
            ("node-b", ts("2026-11-28T00:08:00Z")),
            ("node-a", ts("2026-11-28T00:09:00Z")), // exactly 60 s past
            ("node-b", ts("2026-11-28T00:07:00Z")),
            ("node-c", ts("2026-11-28T00:09:30Z")), // still within the minute
            ("", ts("2026-11-28T00:00:00Z")),       // never scheduled
        ];
        assert_eq!(lost_nodes(pods.clone(), now), vec!["node-a".to_string(), "node-b".to_string()]);
        // node-c's pod becomes stuck 30 s from now; the others are stuck already or have no node.
        assert_eq!(next_stuck_in(pods, now), Some(Duration::from_secs(30)));
        assert_eq!(next_stuck_in([("node-a", ts("2026-11-28T00:00:00Z"))], now), None);
    }
}
