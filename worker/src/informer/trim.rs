//! What the stores keep of an object: the transform applied to every object before it is
//! stored, as kube-controller-manager's informers apply `informers.WithTransform(trim)`.
//!
//! What a store keeps is also what is decoded of a watch event or a list: each kind's
//! [`Cached::DECODED`] names the fields the decode reads, and the parser steps over the rest
//! without building them. The trim still runs on what is decoded (it filters a pod's annotations,
//! and objects that reach a store from elsewhere, such as a write's answer, come whole).
//!
//! Every kind loses `managedFields`, which no controller reads and which is the bulk of a decoded
//! object (a tree of maps per field manager). Jobs and CronJobs keep everything else: the
//! controllers send them back whole (`replace_status`), and a Job's pod template is what its
//! pods are made from. A Job's larger lists (its template's containers, its conditions) are
//! stored without spare capacity.
//!
//! A pod keeps only what the Job controller reads of it (`job/core`: `view.rs`, `ordering.rs`,
//! `backoff.rs`, `failure_policy.rs`, `indexed.rs`, `orphan.rs`; the CronJob controller reads no
//! pods), which is what upstream's Job controller reads too — except labels, which upstream
//! matches the Job's selector against and this worker, finding a Job's pods by their controller
//! reference, does not — and, on bare pods only, the one annotation the TTL of bare pods adds
//! (`ttl/pod_core.rs`; a Job's pods, the many, keep nothing for it):
//!
//! | kept | read for |
//! |---|---|
//! | `metadata.name`, `namespace`, `uid`, `resourceVersion` | keys, expectations, the writes' targets, which version is newer |
//! | `metadata.ownerReferences` | the controlling Job (the store's index), orphans |
//! | `metadata.finalizers` | the tracking finalizer |
//! | `metadata.creationTimestamp`, `deletionTimestamp`, `deletionGracePeriodSeconds` | active-pod order, terminating pods, failure times |
//! | `metadata.annotations` under `batch.kubernetes.io/` | completion index, index failure counts |
//! | `metadata.annotations["batchfleet.io/ttl-seconds-after-finished"]`, on a pod with no controller owner only | the TTL of bare pods (`ttl/pod_core.rs`), which reads the rest of its finish time from what the Job controller keeps |
//! | `spec.nodeName` | active-pod order (an assigned pod goes first) |
//! | `status.phase`; each condition's `type`, `status`, `lastTransitionTime` | succeeded/failed/active, Ready and its time, podFailurePolicy `onPodConditions` |
//! | container and init container statuses' `name`, `restartCount`, `state` (of a terminated state, `exitCode` and `finishedAt`) | podFailurePolicy `onExitCodes`, restart counts, failure times |
//!
//! Everything else goes: the pod spec's containers, volumes, env and the rest (the bulk of a pod:
//! the Job's pod *template* is what new pods are made from), labels, other annotations (the
//! sim's behaviour annotations among them), the status's addresses, QoS class and start time,
//! conditions' reasons and messages, and each container status's image, ids, last state and
//! resources. Lists are stored without spare capacity, and an empty one as none (as protobuf,
//! which sends no empty list, reads it).
//!
//! What this cannot trim is the decoded types' own size: a `Pod` is 2,464 bytes inline (its
//! `PodSpec` 1,488 of them, all but `nodeName` empty here), a `ContainerStatus` 752. A compact
//! projection of a pod, as the coordinator's PodGC keeps, would go further, at the cost of the Job
//! controller's core reading a type of its own instead of `Pod`.

use std::fmt::Debug;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use batchfleet_kube_wire::ProtobufError;

use crate::client::lean_decode::Fields;
use crate::client::lean_protobuf;
use crate::ttl;

/// Reads an object from its protobuf message (what its `k8s\0` envelope carries).
pub type ProtobufDecode<K> = fn(&[u8]) -> Result<K, ProtobufError>;

/// A kind the worker's stores hold, and what they keep of it.
pub trait Cached:
    kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
    /// What is read of the object as it is decoded from the API ([`crate::client::lean_decode`]):
    /// no more than [`Cached::trimmed`] keeps, so that what the trim would drop is never built.
    const DECODED: &'static Fields = &Fields::AN_OBJECT;

    /// How the object is decoded from its protobuf form (the message inside its `k8s\0`
    /// envelope), reading no more than [`Cached::trimmed`] keeps; `None`: the kind is read as
    /// JSON only ([`crate::runtime::list_watch`]).
    const PROTOBUF: Option<ProtobufDecode<Self>> = None;

    /// The object as stored: what no controller reads dropped.
    fn trimmed(self) -> Self;
}

fn without_managed_fields<K: kube::Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj
}

impl Cached for Job {
    /// All but managedFields, its larger lists without spare capacity (the same content).
    fn trimmed(self) -> Self {
        let mut job = without_managed_fields(self);
        if let Some(pod) = job.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
            pod.containers.shrink_to_fit();
            pod.init_containers.as_mut().map(Vec::shrink_to_fit);
        }
        if let Some(status) = job.status.as_mut() {
            status.conditions.as_mut().map(Vec::shrink_to_fit);
        }
        job.metadata.owner_references.as_mut().map(Vec::shrink_to_fit);
        job.metadata.finalizers.as_mut().map(Vec::shrink_to_fit);
        job
    }
}

impl Cached for CronJob {
    fn trimmed(self) -> Self {
        without_managed_fields(self)
    }
}

/// The prefix of the pod annotations the Job controller reads.
const JOB_ANNOTATIONS: &str = "batch.kubernetes.io/";

impl Cached for Pod {
    const DECODED: &'static Fields = &POD;
    const PROTOBUF: Option<ProtobufDecode<Self>> = Some(lean_protobuf::pod);

    fn trimmed(self) -> Self {
        // A Job's pods are the many; the bare pods' TTL is read of bare pods alone.
        let keeps_ttl = ttl::pod_core::is_bare(&self);
        let Pod { metadata, spec, status } = self;
        let annotations = metadata.annotations.map(|mut a| {
            a.retain(|k, _| keeps_pod_annotation(k) && (keeps_ttl || k != ttl::pod_core::TTL_ANNOTATION));
            a
        });
        let metadata = ObjectMeta {
            name: metadata.name,
            namespace: metadata.namespace,
            uid: metadata.uid,
            resource_version: metadata.resource_version,
            owner_references: non_empty(metadata.owner_references),
            finalizers: non_empty(metadata.finalizers),
            creation_timestamp: metadata.creation_timestamp,
            deletion_timestamp: metadata.deletion_timestamp,
            deletion_grace_period_seconds: metadata.deletion_grace_period_seconds,
            annotations: annotations.filter(|a| !a.is_empty()),
            ..ObjectMeta::default()
        };
        let spec = spec.map(|s| PodSpec { node_name: s.node_name, ..PodSpec::default() });
        let status = status.map(|s| PodStatus {
            phase: s.phase,
            conditions: non_empty(s.conditions.map(trimmed_conditions)),
            container_statuses: non_empty(s.container_statuses.map(trimmed_container_statuses)),
            init_container_statuses: non_empty(s.init_container_statuses.map(trimmed_container_statuses)),
            ..PodStatus::default()
        });
        Pod { metadata, spec, status }
    }
}

/// Whether a pod's annotation `key` may be kept: the Job controller's, and the TTL of bare pods
/// (which [`Cached::trimmed`] then drops from a Job's pods).
pub(crate) fn keeps_pod_annotation(key: &str) -> bool {
    key.starts_with(JOB_ANNOTATIONS) || key == ttl::pod_core::TTL_ANNOTATION
}

/// What a pod's decode reads ([`crate::client::lean_decode`]): the fields the table above keeps,
/// so [`Cached::trimmed`] is left only the annotations to filter.
const POD: Fields = Fields {
    skip: &[],
    only: None,
    nested: &[("metadata", &POD_METADATA), ("spec", &POD_SPEC), ("status", &POD_STATUS)],
};

const POD_METADATA: Fields = Fields {
    skip: &[],
    only: Some(&[
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "ownerReferences",
        "finalizers",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "annotations",
    ]),
    nested: &[],
};

const POD_SPEC: Fields = Fields { skip: &[], only: Some(&["nodeName"]), nested: &[] };

const POD_STATUS: Fields = Fields {
    skip: &[],
    only: Some(&["phase", "conditions", "containerStatuses", "initContainerStatuses"]),
    nested: &[
        ("conditions", &POD_CONDITION),
        ("containerStatuses", &CONTAINER_STATUS),
        ("initContainerStatuses", &CONTAINER_STATUS),
    ],
};

const POD_CONDITION: Fields =
    Fields { skip: &[], only: Some(&["type", "status", "lastTransitionTime"]), nested: &[] };

const CONTAINER_STATUS: Fields = Fields {
    skip: &[],
    only: Some(&["name", "restartCount", "state"]),
    nested: &[("state", &CONTAINER_STATE)],
};

const CONTAINER_STATE: Fields = Fields { skip: &[], only: None, nested: &[("terminated", &TERMINATED)] };

const TERMINATED: Fields = Fields { skip: &[], only: Some(&["exitCode", "finishedAt"]), nested: &[] };

/// `v` without spare capacity. A decoded list grows as it is read: one container status (752
/// bytes inline) sits in room for four, five conditions in room for eight.
fn fitted<T>(mut v: Vec<T>) -> Vec<T> {
    v.shrink_to_fit();
    v
}

/// A pod's list without spare capacity, an empty one as none: protobuf sends no empty list, so a
/// pod is stored the same whichever format it was read in (every reader takes none as empty).
fn non_empty<T>(v: Option<Vec<T>>) -> Option<Vec<T>> {
    v.filter(|v| !v.is_empty()).map(fitted)
}

/// A condition's type, status and transition time: what podFailurePolicy and readiness read.
fn trimmed_conditions(conditions: Vec<PodCondition>) -> Vec<PodCondition> {
    fitted(
        conditions
            .into_iter()
            .map(|c| PodCondition {
                type_: c.type_,
                status: c.status,
                last_transition_time: c.last_transition_time,
                ..PodCondition::default()
            })
            .collect(),
    )
}

/// A container status's name, restart count and state, a terminated state's exit code and finish
/// time only.
fn trimmed_container_statuses(statuses: Vec<ContainerStatus>) -> Vec<ContainerStatus> {
    fitted(
        statuses
            .into_iter()
            .map(|c| ContainerStatus {
                name: c.name,
                restart_count: c.restart_count,
                state: c.state.map(|s| ContainerState {
                    terminated: s.terminated.map(|t| ContainerStateTerminated {
                        exit_code: t.exit_code,
                        finished_at: t.finished_at,
                        ..ContainerStateTerminated::default()
                    }),
                    ..s
                }),
                ..ContainerStatus::default()
            })
            .collect(),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use serde_json::json;

    /// A pod as the sim's kubelet leaves a failed one, with what the Job controller made it of.
    fn failed_pod() -> Pod {
        serde_json::from_value(failed_pod_json()).expect("a pod")
    }

    fn failed_pod_json() -> serde_json::Value {
        json!({
            "metadata": {
                "name": "j-0-x", "generateName": "j-0-", "namespace": "ns", "uid": "u", "resourceVersion": "42",
                "creationTimestamp": "2026-11-28T10:00:00Z", "deletionTimestamp": "2026-11-28T10:01:00Z",
                "deletionGracePeriodSeconds": 30,
                "labels": {"batch.kubernetes.io/job-name": "j", "run": "x"},
                "annotations": {"batch.kubernetes.io/job-completion-index": "0",
                                "batch.kubernetes.io/job-index-failure-count": "2",
                                "sim.batchfleet.io/run": "1000ms"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}],
                "finalizers": ["batch.kubernetes.io/job-tracking"],
                "managedFields": [{"manager": "kubelet"}]
            },
            "spec": {"nodeName": "node-1", "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox:1.36", "env": [{"name": "A", "value": "b"}]}]},
            "status": {
                "phase": "Failed", "hostIP": "10.0.0.1", "podIP": "10.64.0.1", "qosClass": "BestEffort",
                "startTime": "2026-11-28T10:00:01Z",
                "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                                "lastTransitionTime": "2026-11-28T10:00:30Z"},
                               {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-28T10:00:30Z"}],
                "containerStatuses": [{"name": "main", "image": "busybox:1.36", "imageID": "sim://busybox:1.36",
                    "containerID": "sim://abc", "ready": false, "started": false, "restartCount": 3,
                    "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-11-28T10:00:10Z"}},
                    "state": {"terminated": {"exitCode": 42, "reason": "Error", "startedAt": "2026-11-28T10:00:02Z",
                                             "finishedAt": "2026-11-28T10:00:30Z", "containerID": "sim://def"}}}],
                "initContainerStatuses": [{"name": "init", "image": "busybox", "imageID": "", "ready": false,
                    "restartCount": 1, "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-28T10:00:01Z"}}}]
            }
        })
    }

    #[test]
    fn a_cached_pod_keeps_what_the_job_controller_reads_and_nothing_else() {
        let pod = failed_pod();
        let kept = pod.clone().trimmed();
        let want: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": "j-0-x", "namespace": "ns", "uid": "u", "resourceVersion": "42",
                "creationTimestamp": "2026-11-28T10:00:00Z", "deletionTimestamp": "2026-11-28T10:01:00Z",
                "deletionGracePeriodSeconds": 30,
                "annotations": {"batch.kubernetes.io/job-completion-index": "0",
                                "batch.kubernetes.io/job-index-failure-count": "2"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}],
                "finalizers": ["batch.kubernetes.io/job-tracking"]
            },
            "spec": {"nodeName": "node-1", "containers": []},
            "status": {
                "phase": "Failed",
                "conditions": [{"type": "DisruptionTarget", "status": "True", "lastTransitionTime": "2026-11-28T10:00:30Z"},
                               {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-28T10:00:30Z"}],
                "containerStatuses": [{"name": "main", "image": "", "imageID": "", "ready": false, "restartCount": 3,
                    "state": {"terminated": {"exitCode": 42, "finishedAt": "2026-11-28T10:00:30Z"}}}],
                "initContainerStatuses": [{"name": "init", "image": "", "imageID": "", "ready": false,
                    "restartCount": 1, "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-28T10:00:01Z"}}}]
            }
        }))
        .expect("a pod");
        assert_eq!(kept, want);
    }

    /// A Job's failed pod, and a bare running one (which keeps the TTL annotation), with every
    /// field the trim reads present.
    pub(crate) fn pods_with_every_kept_field() -> [serde_json::Value; 2] {
        let mut bare = failed_pod_json();
        bare["metadata"]["ownerReferences"] = json!([]);
        bare["metadata"]["annotations"][ttl::pod_core::TTL_ANNOTATION] = json!("30");
        bare["status"]["containerStatuses"][0]["state"] =
            json!({"running": {"startedAt": "2026-11-28T10:00:02Z"}});
        [failed_pod_json(), bare]
    }

    /// A pod decoded as the watches decode it ([`Cached::DECODED`]) is stored the same as one
    /// decoded whole: the decode skips no more than the trim drops. A Job's pod and a bare one
    /// (which keeps the TTL annotation), with every field the trim reads present.
    #[test]
    fn a_pod_decoded_lean_is_trimmed_to_the_same() {
        use crate::client::lean_decode::Lean;
        for json in pods_with_every_kept_field() {
            let text = json.to_string();
            let whole: Pod = serde_json::from_str(&text).expect("a pod");
            let Lean(lean) = serde_json::from_str::<Lean<Pod>>(&text).expect("a pod");
            assert_ne!(lean, whole, "the decode skipped something");
            assert_eq!(lean.trimmed(), whole.trimmed());
        }
    }

    /// The bare pods' TTL annotation is kept on bare pods, and dropped from a Job's.
    #[test]
    fn a_bare_pod_keeps_its_ttl_annotation_and_a_jobs_pod_does_not() {
        let ttl = ttl::pod_core::TTL_ANNOTATION;
        let mut pod = failed_pod();
        pod.metadata.annotations.get_or_insert_default().insert(ttl.into(), "30".into());
        let annotations = |p: &Pod| p.metadata.annotations.clone().unwrap_or_default();
        assert!(!annotations(&pod.clone().trimmed()).contains_key(ttl), "a Job's pod");
        pod.metadata.owner_references = None;
        let kept = pod.trimmed();
        assert_eq!(annotations(&kept).get(ttl).map(String::as_str), Some("30"), "a bare pod");
        assert!(!annotations(&kept).contains_key("sim.batchfleet.io/run"));
        assert_eq!(ttl::pod_core::ttl_annotation(&kept), Some("30"));
    }

    /// A pod of Job `j` (uid `ju`) at completion index `index`: `phase`, on a node, with its one
    /// container in `state`, and the Ready condition `ready`.
    fn pod_at(index: u32, phase: &str, state: serde_json::Value, ready: &str) -> Pod {
        let mut pod = failed_pod();
        pod.metadata.name = Some(format!("j-{index}-x"));
        pod.metadata.uid = Some(format!("u{index}"));
        pod.metadata.deletion_timestamp = None;
        pod.metadata.annotations = Some(
            [
                ("batch.kubernetes.io/job-completion-index".to_string(), index.to_string()),
                ("sim.batchfleet.io/run".to_string(), "1000ms".to_string()),
            ]
            .into(),
        );
        let status = pod.status.as_mut().expect("a status");
        status.phase = Some(phase.into());
        status.conditions = Some(vec![
            serde_json::from_value(
                json!({"type": "Ready", "status": ready, "lastTransitionTime": "2026-11-28T10:00:05Z"}),
            )
            .expect("a condition"),
        ]);
        let main = &mut status.container_statuses.as_mut().expect("statuses")[0];
        main.state = Some(serde_json::from_value(state).expect("a state"));
        pod
    }

    /// The Job controller's decision core decides the same on trimmed pods as on whole ones: the
    /// same plan for an Indexed Job with a podFailurePolicy, pods active, succeeded and failed.
    #[test]
    fn the_job_controller_decides_the_same_on_trimmed_pods() {
        use crate::job::core::{
            Config, CreateOutcome, DeleteOutcome, FinalizerRemoval, JobPlan, PodOpResults, PodOps, SyncInput,
            finished_time, orphan_needs_finalizer_removal, sync_job,
        };
        use std::collections::HashSet;
        use std::sync::Arc;
        // What the shell acts on, every pod operation succeeding: not the plan's own copy of the
        // pods, which differs by construction.
        let decided = |plan: JobPlan| match plan {
            JobPlan::Skip(skip) => format!("{skip:?}"),
            JobPlan::Sync(plan) => {
                let results = match &plan.pod_ops {
                    PodOps::None => PodOpResults::None,
                    PodOps::DeleteActive(refs) | PodOps::RemoveFinalizerAndDelete(refs) => {
                        PodOpResults::Deletes(vec![DeleteOutcome::Deleted; refs.len()])
                    }
                    PodOps::Create(c) => PodOpResults::Creates(
                        (0..c.pods.len()).map(|i| CreateOutcome::Created(format!("new-{i}"))).collect(),
                    ),
                };
                let status = plan.after_pod_ops(&results);
                let removals = vec![FinalizerRemoval::Removed; status.remove_finalizers.len()];
                let last = status.after_finalizer_removals(&removals);
                format!(
                    "{:?} {:?} {:?} | {:?} {:?} {:?} {:?} | {:?} {:?} {:?}",
                    plan.action,
                    plan.pod_ops,
                    plan.requeue_after,
                    status.interim_status,
                    status.events,
                    status.backoff_record,
                    status.remove_finalizers,
                    last.status,
                    last.events,
                    last.error
                )
            }
        };
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": "ju", "generation": 1,
                         "creationTimestamp": "2026-11-28T09:59:00Z"},
            "spec": {"completions": 4, "parallelism": 4, "completionMode": "Indexed", "backoffLimit": 6,
                     "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "ju"}},
                     "podFailurePolicy": {"rules": [
                         {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                         {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]},
                     "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}},
            "status": {"startTime": "2026-11-28T10:00:00Z", "active": 4,
                       "uncountedTerminatedPods": {}}
        }))
        .expect("a job");
        let running = json!({"running": {"startedAt": "2026-11-28T10:00:02Z"}});
        let exited =
            |code: i32| json!({"terminated": {"exitCode": code, "finishedAt": "2026-11-28T10:00:30Z"}});
        // One Job too many active pods of the same index: the unscheduled one goes first.
        let mut one_at_a_time = job.clone();
        if let Some(spec) = one_at_a_time.spec.as_mut() {
            spec.parallelism = Some(1);
        }
        let waiting = || pod_at(0, "Pending", json!({"waiting": {}}), "False");
        let mut unscheduled = waiting();
        unscheduled.metadata.uid = Some("unscheduled".into());
        unscheduled.metadata.name = Some("j-0-unscheduled".into());
        unscheduled.spec.as_mut().expect("a spec").node_name = None;
        let cases: Vec<(&Job, Vec<Pod>)> = vec![
            (
                &job,
                vec![
                    pod_at(0, "Running", running.clone(), "True"),
                    pod_at(1, "Pending", json!({"waiting": {}}), "False"),
                ],
            ),
            (
                &job,
                vec![
                    pod_at(0, "Succeeded", exited(0), "False"),
                    pod_at(1, "Running", running.clone(), "True"),
                ],
            ),
            (&job, vec![pod_at(0, "Failed", exited(42), "False"), pod_at(2, "Running", running, "True")]),
            (&job, vec![failed_pod(), pod_at(3, "Failed", exited(1), "False")]),
            (&one_at_a_time, vec![waiting(), unscheduled]),
        ];
        let config = Config::default();
        let now = jiff::Timestamp::from_second(1_795_860_060).expect("a time");
        for (job, pods) in cases {
            let plan = |pods: Vec<Pod>| {
                let pods: Vec<Arc<Pod>> = pods.into_iter().map(Arc::new).collect();
                let none = HashSet::new();
                let input = SyncInput {
                    job,
                    pods: &pods,
                    now,
                    expectations_satisfied: true,
                    expected_removed_finalizers: &none,
                    backoff: None,
                    stall: None,
                    config: &config,
                };
                let facts: Vec<_> = pods
                    .iter()
                    .map(|p| (finished_time(p), orphan_needs_finalizer_removal(p, Some(job), &config)))
                    .collect();
                format!("{} {facts:?}", decided(sync_job(&input)))
            };
            let trimmed: Vec<Pod> = pods.iter().cloned().map(Cached::trimmed).collect();
            assert_eq!(plan(trimmed), plan(pods));
        }
    }

    #[test]
    fn a_cached_job_keeps_everything_but_its_managed_fields() {
        let manager = ManagedFieldsEntry { manager: Some("kubectl".into()), ..ManagedFieldsEntry::default() };
        let job = Job {
            metadata: ObjectMeta {
                managed_fields: Some(vec![manager]),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            spec: Some(Default::default()),
            ..Job::default()
        };
        let kept = job.clone().trimmed();
        assert_eq!(kept.metadata.managed_fields, None);
        assert_eq!(
            Job { metadata: ObjectMeta { managed_fields: None, ..job.metadata.clone() }, ..job },
            kept
        );
    }
}
