//! `batchfleet.io/delete-counted-pods` (issue 30 §4, kubernetes/kubernetes#116159, #118085;
//! docs/beyond-upstream.md "Very large Indexed Jobs"): the Job's succeeded pods that its status
//! already counts are deleted, so a Job of 100,000 completions does not keep 100,000 pods.
//!
//! A pod is *counted* only when its count has landed in the Job's status as read (the write that
//! counted it succeeded) and the cache shows its tracking finalizer gone:
//! - Indexed: its completion index is in `status.completedIndexes`;
//! - NonIndexed: its UID is not in `status.uncountedTerminatedPods.succeeded` (the controller moves
//!   a UID from there into `status.succeeded` only after the finalizer is gone, and counts only pods
//!   that carry the finalizer, so a succeeded pod without it that is not listed there is either in
//!   `succeeded` or never counted by this controller at all).
//!
//! Deleting such a pod cannot change a later count: the controller counts from the status, and a
//! pod without the finalizer is never counted again. Failed pods are kept (people debug them).

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use super::has_tracking_finalizer;
use super::indexed::completion_index;
use super::intervals::OrderedIntervals;
use super::plan::{Event, PodRef};
use super::view::INDEXED;

/// The Job annotation that turns the deletion on (`"true"`); `"false"` or none leaves it off.
pub const DELETE_COUNTED_PODS_ANNOTATION: &str = "batchfleet.io/delete-counted-pods";
/// Reason of the Warning Event for a value that is neither `"true"` nor `"false"`.
pub const EVENT_INVALID_ANNOTATION: &str = "InvalidDeleteCountedPods";

/// A counted pod to DELETE, with the version it was decided on as preconditions (UID and
/// resourceVersion), so the API server deletes exactly the pod that was seen succeeded and counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountedPodDelete {
    pub pod: PodRef,
    pub resource_version: String,
}

/// The counted-pod deletion of one sync.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CountedPods {
    /// The annotation's value when it is neither `"true"` nor `"false"`: the deletion is off, and
    /// the shell warns once per value with [`invalid_annotation_event`].
    pub invalid_value: Option<String>,
    /// Pods to delete (none unless the annotation is `"true"`), in the pod list's order. The shell
    /// skips those whose delete it has issued and not yet seen, and sends at most its per-sync cap.
    pub delete: Vec<CountedPodDelete>,
}

/// The annotation's setting on `job`: on, off, or a bad value (off).
fn setting(job: &Job) -> Result<bool, String> {
    match job.metadata.annotations.as_ref().and_then(|a| a.get(DELETE_COUNTED_PODS_ANNOTATION)) {
        None => Ok(false),
        Some(v) if v == "true" => Ok(true),
        Some(v) if v == "false" => Ok(false),
        Some(v) => Err(v.clone()),
    }
}

/// The Warning Event for a bad annotation value.
pub fn invalid_annotation_event(value: &str) -> Event {
    Event::warning(
        EVENT_INVALID_ANNOTATION,
        format!(
            "Ignoring {DELETE_COUNTED_PODS_ANNOTATION}={value:?}: the value must be \"true\" or \"false\"; \
             counted pods are kept"
        ),
    )
}

/// The counted pods of `job` to delete, from the Job and its pods as the cache shows them.
pub(super) fn counted_pods(job: &Job, pods: &[Arc<Pod>]) -> CountedPods {
    let on = match setting(job) {
        Ok(on) => on,
        Err(value) => return CountedPods { invalid_value: Some(value), delete: Vec::new() },
    };
    if !on {
        return CountedPods::default();
    }
    let spec = job.spec.as_ref();
    let status = job.status.as_ref();
    let indexed = spec.and_then(|s| s.completion_mode.as_deref()) == Some(INDEXED);
    let completions = i64::from(spec.and_then(|s| s.completions).unwrap_or(0));
    let completed = if indexed {
        OrderedIntervals::parse(
            status.and_then(|s| s.completed_indexes.as_deref()).unwrap_or(""),
            completions,
        )
    } else {
        OrderedIntervals::default()
    };
    let uncounted: &[String] = status
        .and_then(|s| s.uncounted_terminated_pods.as_ref())
        .and_then(|u| u.succeeded.as_deref())
        .unwrap_or(&[]);
    let counted = |pod: &Pod, uid: &str| {
        if indexed {
            completion_index(pod).is_some_and(|ix| ix < completions && completed.has(ix))
        } else {
            !uncounted.iter().any(|u| u == uid)
        }
    };
    let delete = pods
        .iter()
        .filter_map(|pod| {
            let meta = &pod.metadata;
            let uid = meta.uid.as_deref().filter(|u| !u.is_empty())?;
            let succeeded = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
            let deletable = succeeded
                && meta.deletion_timestamp.is_none()
                && !has_tracking_finalizer(pod)
                && counted(pod, uid);
            deletable.then(|| CountedPodDelete {
                pod: PodRef {
                    namespace: meta.namespace.clone().unwrap_or_default(),
                    name: meta.name.clone().unwrap_or_default(),
                    uid: uid.to_string(),
                },
                resource_version: meta.resource_version.clone().unwrap_or_default(),
            })
        })
        .collect();
    CountedPods { invalid_value: None, delete }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::core::testutil::*;

    fn indexed_job(annotation: Option<&str>, completed: &str) -> Job {
        let mut job = mk_job("j", 2, 4, 6).indexed().completed_indexes(completed).build();
        if let Some(v) = annotation {
            job.metadata.annotations =
                Some([(DELETE_COUNTED_PODS_ANNOTATION.to_string(), v.to_string())].into());
        }
        job
    }

    fn names(c: &CountedPods) -> Vec<&str> {
        c.delete.iter().map(|d| d.pod.name.as_str()).collect()
    }

    fn arcs(pods: Vec<Pod>) -> Vec<Arc<Pod>> {
        pods.into_iter().map(Arc::new).collect()
    }

    /// (name, pod) → deleted? for an Indexed Job with completedIndexes "0,1" of 4.
    #[test]
    fn only_succeeded_pods_whose_index_is_in_status_and_finalizer_gone() {
        let job = indexed_job(Some("true"), "0,1");
        let mut rv = mk_pod("counted").index("0").phase("Succeeded").build();
        rv.metadata.resource_version = Some("42".into());
        let cases: Vec<(&str, Pod, bool)> = vec![
            ("counted: index 0 in status, no finalizer", rv, true),
            (
                "not yet counted: finalizer still on",
                mk_pod("p1").index("1").phase("Succeeded").finalizer().build(),
                false,
            ),
            ("index not in status yet", mk_pod("p2").index("2").phase("Succeeded").build(), false),
            ("failed pods are kept", mk_pod("p3").index("1").phase("Failed").build(), false),
            ("running", mk_pod("p4").index("1").phase("Running").build(), false),
            (
                "already deleting",
                mk_pod("p5").index("1").phase("Succeeded").deleted_at(now(), Some(0)).build(),
                false,
            ),
            ("no index", mk_pod("p6").phase("Succeeded").build(), false),
            ("bad index", mk_pod("p7").index("x").phase("Succeeded").build(), false),
            ("index beyond completions", mk_pod("p8").index("7").phase("Succeeded").build(), false),
        ];
        for (name, pod, want) in cases {
            let got = counted_pods(&job, &arcs(vec![pod]));
            assert_eq!(got.invalid_value, None, "{name}");
            assert_eq!(!got.delete.is_empty(), want, "{name}");
        }
        let got = counted_pods(&job, &arcs(vec![mk_pod("counted").index("0").phase("Succeeded").build()]));
        assert_eq!(
            got.delete[0].pod,
            PodRef { namespace: "default".into(), name: "counted".into(), uid: "counted".into() }
        );
    }

    #[test]
    fn the_resource_version_seen_is_the_precondition() {
        let job = indexed_job(Some("true"), "0");
        let mut pod = mk_pod("a").index("0").phase("Succeeded").build();
        pod.metadata.resource_version = Some("1234".into());
        assert_eq!(counted_pods(&job, &arcs(vec![pod])).delete[0].resource_version, "1234");
    }

    #[test]
    fn off_without_the_annotation_or_with_false_and_a_bad_value_is_reported() {
        let pods = arcs(vec![mk_pod("a").index("0").phase("Succeeded").build()]);
        assert_eq!(counted_pods(&indexed_job(None, "0"), &pods), CountedPods::default());
        assert_eq!(counted_pods(&indexed_job(Some("false"), "0"), &pods), CountedPods::default());
        let bad = counted_pods(&indexed_job(Some("yes"), "0"), &pods);
        assert_eq!(bad.invalid_value.as_deref(), Some("yes"));
        assert!(bad.delete.is_empty(), "a bad value behaves as off");
        let e = invalid_annotation_event("yes");
        assert_eq!(
            (e.reason.as_str(), e.type_),
            (EVENT_INVALID_ANNOTATION, super::super::EventType::Warning)
        );
        assert!(e.message.contains(r#"batchfleet.io/delete-counted-pods="yes""#), "{}", e.message);
    }

    #[test]
    fn non_indexed_counted_means_finalizer_gone_and_not_uncounted() {
        let mut job = mk_job("j", 2, 4, 6).counts(0, 1, 0).uncounted(&["listed"], &[]).build();
        job.metadata.annotations =
            Some([(DELETE_COUNTED_PODS_ANNOTATION.to_string(), "true".to_string())].into());
        let pods = arcs(vec![
            mk_pod("counted").phase("Succeeded").build(),
            mk_pod("listed").phase("Succeeded").build(),
            mk_pod("tracked").phase("Succeeded").finalizer().build(),
            mk_pod("failed").phase("Failed").build(),
        ]);
        assert_eq!(names(&counted_pods(&job, &pods)), vec!["counted"]);
    }
}
