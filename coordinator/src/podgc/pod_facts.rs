//! A pod as PodGC's cache reads it: identity, node, finalizers, times, phase, reason and when it
//! terminated. The
//! coordinator decodes every pod change in the cluster; decoding whole pods (containers,
//! conditions, managedFields, most of each event's bytes) was most of its CPU under load, for
//! a projection that keeps a few fields. The rest of each pod is skipped unread.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Deserializer};

/// What [`super::cache::PodCache`] reads of a pod; decodes from a whole pod. Its
/// `kube::Resource` is the `Pod`'s, so kube's `Api` and watcher read pods into it.
#[derive(Debug, Clone, Default, PartialEq, kube::Resource)]
#[resource(inherit = Pod)]
pub struct PodFacts {
    /// Namespace, name, uid, resourceVersion, creation and deletion times, deletion grace
    /// period, finalizers.
    pub metadata: ObjectMeta,
    /// `spec.nodeName`.
    pub node_name: Option<String>,
    /// `status.phase`.
    pub phase: Option<String>,
    /// `status.reason`.
    pub reason: Option<String>,
    /// When the pod terminated, seconds since the epoch, by [`termination_time`]; `None` when
    /// neither a container nor a condition says.
    pub terminated_at: Option<i64>,
}

/// A pod's termination time, which Kubernetes does not record: the latest `finishedAt` of its
/// containers' (and init containers') terminated states, as test-infra's sinker defines it for
/// `terminated_pod_ttl` (kubernetes/test-infra#15748); when no container ever terminated (a pod
/// failed before it started, or evicted while pending), the latest condition
/// `lastTransitionTime`, which is when the kubelet or a controller last changed it. The caller
/// falls back to the creation time.
pub fn termination_time(
    container_finished: impl IntoIterator<Item = i64>,
    condition_transitions: impl IntoIterator<Item = i64>,
) -> Option<i64> {
    container_finished.into_iter().max().or_else(|| condition_transitions.into_iter().max())
}

impl From<&Pod> for PodFacts {
    fn from(pod: &Pod) -> Self {
        let m = &pod.metadata;
        Self {
            metadata: ObjectMeta {
                namespace: m.namespace.clone(),
                name: m.name.clone(),
                uid: m.uid.clone(),
                resource_version: m.resource_version.clone(),
                creation_timestamp: m.creation_timestamp.clone(),
                deletion_timestamp: m.deletion_timestamp.clone(),
                deletion_grace_period_seconds: m.deletion_grace_period_seconds,
                finalizers: m.finalizers.clone(),
                ..ObjectMeta::default()
            },
            node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
            reason: pod.status.as_ref().and_then(|s| s.reason.clone()),
            terminated_at: pod.status.as_ref().and_then(|s| {
                let statuses =
                    s.container_statuses.iter().flatten().chain(s.init_container_statuses.iter().flatten());
                termination_time(
                    statuses.filter_map(|c| {
                        c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref().map(|t| t.0.as_second())
                    }),
                    s.conditions
                        .iter()
                        .flatten()
                        .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0.as_second())),
                )
            }),
        }
    }
}

#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: WireMeta,
    #[serde(default)]
    spec: Option<WireSpec>,
    #[serde(default)]
    status: Option<WireStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    finalizers: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    node_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    phase: Option<String>,
    reason: Option<String>,
    #[serde(default)]
    container_statuses: Option<Vec<WireContainerStatus>>,
    #[serde(default)]
    init_container_statuses: Option<Vec<WireContainerStatus>>,
    #[serde(default)]
    conditions: Option<Vec<WireCondition>>,
}

#[derive(Deserialize)]
struct WireContainerStatus {
    state: Option<WireContainerState>,
}

#[derive(Deserialize)]
struct WireContainerState {
    terminated: Option<WireTerminated>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireTerminated {
    finished_at: Option<Time>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireCondition {
    last_transition_time: Option<Time>,
}

impl<'de> Deserialize<'de> for PodFacts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Wire { metadata: m, spec, status } = Wire::deserialize(d)?;
        let (phase, reason, terminated_at) = match status {
            None => (None, None, None),
            Some(s) => {
                let finished = s
                    .container_statuses
                    .iter()
                    .flatten()
                    .chain(s.init_container_statuses.iter().flatten())
                    .filter_map(|c| {
                        c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref().map(|t| t.0.as_second())
                    });
                let transitions = s
                    .conditions
                    .iter()
                    .flatten()
                    .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0.as_second()));
                let at = termination_time(finished, transitions);
                (s.phase, s.reason, at)
            }
        };
        Ok(Self {
            metadata: ObjectMeta {
                namespace: m.namespace,
                name: m.name,
                uid: m.uid,
                resource_version: m.resource_version,
                creation_timestamp: m.creation_timestamp,
                deletion_timestamp: m.deletion_timestamp,
                deletion_grace_period_seconds: m.deletion_grace_period_seconds,
                finalizers: m.finalizers,
                ..ObjectMeta::default()
            },
            node_name: spec.and_then(|s| s.node_name),
            phase,
            reason,
            terminated_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Decoding a whole pod gives what the conversion from a decoded `Pod` gives.
    #[test]
    fn a_whole_pod_decodes_as_its_conversion() {
        let whole = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                "creationTimestamp": "2026-11-26T10:00:00Z", "deletionTimestamp": "2026-11-26T10:01:00Z",
                "deletionGracePeriodSeconds": 0,
                "finalizers": ["batch.kubernetes.io/job-tracking"], "labels": {"a": "b"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju"}],
                "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Failed", "reason": "Evicted",
                       "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-26T10:09:00Z"}],
                       "initContainerStatuses": [{"name": "i", "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-26T10:02:00Z"}}}],
                       "containerStatuses": [
                           {"name": "c", "state": {"terminated": {"exitCode": 1, "finishedAt": "2026-11-26T10:05:00Z"}}},
                           {"name": "d", "state": {"running": {"startedAt": "2026-11-26T10:01:00Z"}}}]}
        });
        let pod: Pod = serde_json::from_value(whole.clone()).unwrap();
        let facts: PodFacts = serde_json::from_value(whole).unwrap();
        assert_eq!(facts, PodFacts::from(&pod));
        assert_eq!(facts.node_name.as_deref(), Some("node-1"));
        assert_eq!((facts.phase.as_deref(), facts.reason.as_deref()), (Some("Failed"), Some("Evicted")));
        assert_eq!(facts.metadata.deletion_grace_period_seconds, Some(0));
        let at = |t: &str| t.parse::<jiff::Timestamp>().unwrap().as_second();
        assert_eq!(facts.terminated_at, Some(at("2026-11-26T10:05:00Z")), "the last container to finish");
        let bare: PodFacts = serde_json::from_value(json!({"metadata": {"name": "q"}})).unwrap();
        assert_eq!(
            bare,
            PodFacts {
                metadata: ObjectMeta { name: Some("q".into()), ..ObjectMeta::default() },
                ..PodFacts::default()
            }
        );
    }

    /// The termination time: containers first (sinker's `terminated_pod_ttl`, test-infra#15748),
    /// then conditions, else none (the cache falls back to the creation time).
    #[test]
    fn the_termination_time_is_the_last_container_to_finish_else_the_last_condition_change() {
        type Case<'a> = (&'a str, &'a [i64], &'a [i64], Option<i64>);
        let cases: [Case<'_>; 4] = [
            ("the latest finishedAt wins over conditions", &[5, 9, 7], &[20], Some(9)),
            ("no container ran: the latest condition change", &[], &[3, 11], Some(11)),
            ("nothing says", &[], &[], None),
            ("one container", &[4], &[], Some(4)),
        ];
        for (what, finished, transitions, want) in cases {
            assert_eq!(
                termination_time(finished.iter().copied(), transitions.iter().copied()),
                want,
                "{what}"
            );
        }
        let failed_before_start: PodFacts = serde_json::from_value(json!({
            "metadata": {"name": "q"},
            "status": {"phase": "Failed", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-26T10:00:00Z"},
                {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-26T10:03:00Z"}],
                "containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "ErrImagePull"}}}]}
        }))
        .unwrap();
        assert_eq!(failed_before_start.terminated_at, Some(1_795_687_380));
    }
}
