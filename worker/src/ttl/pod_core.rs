//! TTL after finished for bare pods, pure: a pod with no controller owner and the annotation
//! [`TTL_ANNOTATION`] is deleted that many seconds after it finished. Upstream has a TTL for
//! Jobs only; a pod made by hand (or by a tool that makes pods, not Jobs) stays until PodGC's
//! `--terminated-pod-gc-threshold` (12,500 by default) or a person deletes it.
//!
//! A pod's finish time is the one upstream's Job controller judges a pod's by
//! (`getFinishedTime`, [`crate::job::core::finished_time`]): the latest `finishedAt` of its
//! containers and init containers when every one of them is terminated; else the
//! `lastTransitionTime` of its `Ready=False` condition; else its creation time.
//!
//! The shell's steps, as the Job TTL's (`core.rs`), but without the fresh GET: the DELETE carries
//! the cached pod's `uid` and `resourceVersion` as preconditions, so it deletes exactly the version
//! decided on, and fails with a Conflict if the pod changed since (the retry then decides again on
//! the newer version the watch brings).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;

use crate::job::core::finished_time;

/// The annotation that opts a bare pod in: whole seconds after it finished, as a Job's
/// `ttlSecondsAfterFinished`.
pub const TTL_ANNOTATION: &str = "batchfleet.io/ttl-seconds-after-finished";
/// The reason of the Warning Event a bad value gets.
pub const BAD_TTL_REASON: &str = "InvalidTTLSecondsAfterFinished";

/// An annotation value that is not a TTL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "annotation {TTL_ANNOTATION}: {value:?} is not a whole number of seconds from 0 to 2147483647 \
     (as a Job's ttlSecondsAfterFinished); the pod is kept"
)]
pub struct BadTtl {
    pub value: String,
}

/// No owner reference with `controller: true`: nothing else cleans the pod up.
pub fn is_bare(pod: &Pod) -> bool {
    pod.metadata.owner_references.as_deref().unwrap_or_default().iter().all(|r| r.controller != Some(true))
}

/// The annotation's value on a bare pod: what the store's trim keeps.
pub fn ttl_annotation(pod: &Pod) -> Option<&str> {
    let value = pod.metadata.annotations.as_ref()?.get(TTL_ANNOTATION)?;
    is_bare(pod).then_some(value.as_str())
}

/// Parses the annotation: decimal digits only, within a Job's `ttlSecondsAfterFinished` (int32).
pub fn parse_ttl(value: &str) -> Result<i32, BadTtl> {
    let bad = || BadTtl { value: value.to_string() };
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    value.parse::<i32>().map_err(|_| bad())
}

fn has_finished(pod: &Pod) -> bool {
    matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

/// Whether the controller looks at the pod: bare, annotated, finished, not being deleted.
pub fn needs_cleanup(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && has_finished(pod) && ttl_annotation(pod).is_some()
}

/// What to do with a pod now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodTtlDecision {
    /// Not bare, not annotated, not finished, or being deleted.
    Nothing,
    /// The annotation is not a TTL: a Warning Event and a log line, and the pod is kept.
    BadValue(BadTtl),
    /// The TTL expires later.
    Requeue { after: Duration, finished_in_future: bool },
    /// Expired: DELETE with these preconditions.
    DeleteNow(PodDelete),
}

/// The DELETE of an expired pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodDelete {
    pub precondition_uid: String,
    pub precondition_resource_version: String,
    pub finished_at: Timestamp,
    pub expired_at: Timestamp,
}

/// The decision for `pod` at `now`.
pub fn decide(pod: &Pod, now: Timestamp) -> PodTtlDecision {
    if !needs_cleanup(pod) {
        return PodTtlDecision::Nothing;
    }
    let Some(value) = ttl_annotation(pod) else { return PodTtlDecision::Nothing };
    let ttl = match parse_ttl(value) {
        Ok(ttl) => ttl,
        Err(bad) => return PodTtlDecision::BadValue(bad),
    };
    let finished_at = finished_time(pod);
    let expired_at =
        finished_at.saturating_add(SignedDuration::from_secs(i64::from(ttl))).unwrap_or(finished_at);
    if expired_at > now {
        return PodTtlDecision::Requeue {
            after: expired_at.duration_since(now).unsigned_abs(),
            finished_in_future: finished_at > now,
        };
    }
    PodTtlDecision::DeleteNow(PodDelete {
        precondition_uid: pod.metadata.uid.clone().unwrap_or_default(),
        precondition_resource_version: pod.metadata.resource_version.clone().unwrap_or_default(),
        finished_at,
        expired_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn now() -> Timestamp {
        "2026-11-28T12:00:00Z".parse().expect("valid")
    }

    fn at(s: i64) -> String {
        (now() + SignedDuration::from_secs(s)).to_string()
    }

    /// A pod that finished 10 s ago (its one container), annotated `ttl`, with `extra` merged
    /// into its metadata.
    fn pod(phase: &str, ttl: Option<&str>, extra: Value) -> Pod {
        let mut metadata = json!({"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
            "creationTimestamp": at(-60)});
        if let Some(ttl) = ttl {
            metadata["annotations"] = json!({TTL_ANNOTATION: ttl});
        }
        if let (Some(m), Some(e)) = (metadata.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        serde_json::from_value(json!({
            "metadata": metadata,
            "spec": {"containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": phase,
                "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": at(-5)}],
                "containerStatuses": [{"name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "finishedAt": at(-10)}}}]}
        }))
        .expect("a pod")
    }

    fn controlled() -> Value {
        json!({"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}]})
    }

    #[test]
    fn ttl_values() {
        let rows: [(&str, Option<i32>); 10] = [
            ("0", Some(0)),
            ("30", Some(30)),
            ("2147483647", Some(i32::MAX)),
            ("2147483648", None),
            ("-1", None),
            ("+5", None),
            (" 5", None),
            ("5s", None),
            ("", None),
            ("1.5", None),
        ];
        for (value, want) in rows {
            assert_eq!(parse_ttl(value).ok(), want, "{value:?}");
        }
        let e = parse_ttl("5s").expect_err("bad");
        assert!(e.to_string().contains("\"5s\" is not a whole number of seconds"), "{e}");
    }

    #[test]
    fn decisions() {
        let deleting = json!({"deletionTimestamp": at(0)});
        let not_controller =
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "nu"}]});
        let rows: Vec<(&str, Pod, PodTtlDecision)> = vec![
            ("not annotated", pod("Succeeded", None, json!({})), PodTtlDecision::Nothing),
            ("running", pod("Running", Some("0"), json!({})), PodTtlDecision::Nothing),
            ("a Job's pod", pod("Succeeded", Some("0"), controlled()), PodTtlDecision::Nothing),
            ("being deleted", pod("Failed", Some("0"), deleting), PodTtlDecision::Nothing),
            (
                "bad value",
                pod("Failed", Some("soon"), json!({})),
                PodTtlDecision::BadValue(BadTtl { value: "soon".into() }),
            ),
            (
                "15 s TTL, finished 10 s ago",
                pod("Succeeded", Some("15"), json!({})),
                PodTtlDecision::Requeue { after: Duration::from_secs(5), finished_in_future: false },
            ),
            (
                "10 s TTL: expired now",
                pod("Failed", Some("10"), not_controller),
                PodTtlDecision::DeleteNow(PodDelete {
                    precondition_uid: "u1".into(),
                    precondition_resource_version: "7".into(),
                    finished_at: now() - SignedDuration::from_secs(10),
                    expired_at: now(),
                }),
            ),
        ];
        for (name, pod, want) in rows {
            assert_eq!(decide(&pod, now()), want, "{name}");
        }
    }

    /// Without terminated containers, the Ready=False time; without that either, the creation
    /// time (upstream's getFinishedTime).
    #[test]
    fn the_finish_time_is_the_job_controllers() {
        let mut p = pod("Failed", Some("0"), json!({}));
        p.status.as_mut().expect("status").container_statuses = None;
        let PodTtlDecision::DeleteNow(d) = decide(&p, now()) else { panic!("expired") };
        assert_eq!(d.finished_at.to_string(), at(-5));
        p.status.as_mut().expect("status").conditions = None;
        let PodTtlDecision::DeleteNow(d) = decide(&p, now()) else { panic!("expired") };
        assert_eq!(d.finished_at.to_string(), at(-60));
    }

    #[test]
    fn finished_in_the_future_waits() {
        let mut p = pod("Succeeded", Some("1"), json!({}));
        let status = p.status.as_mut().expect("status");
        status.container_statuses = None;
        status.conditions = Some(vec![
            serde_json::from_value(json!({"type": "Ready", "status": "False", "lastTransitionTime": at(20)}))
                .expect("a condition"),
        ]);
        assert_eq!(
            decide(&p, now()),
            PodTtlDecision::Requeue { after: Duration::from_secs(21), finished_in_future: true }
        );
    }

    #[test]
    fn only_bare_pods_keep_the_annotation() {
        assert_eq!(ttl_annotation(&pod("Succeeded", Some("3"), json!({}))), Some("3"));
        assert_eq!(ttl_annotation(&pod("Succeeded", Some("3"), controlled())), None);
        assert_eq!(ttl_annotation(&pod("Succeeded", None, json!({}))), None);
    }

    #[test]
    fn extreme_ttl_does_not_panic() {
        let mut p = pod("Succeeded", Some("2147483647"), json!({}));
        assert!(matches!(decide(&p, now()), PodTtlDecision::Requeue { .. }));
        p.status.as_mut().expect("status").container_statuses = None;
        p.status.as_mut().expect("status").conditions = None;
        p.metadata.creation_timestamp = None;
        let _ = decide(&p, Timestamp::MAX);
    }
}
