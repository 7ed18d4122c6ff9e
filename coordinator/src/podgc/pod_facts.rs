//! A pod as PodGC's cache reads it: identity, node, finalizers, times, phase and reason. The
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
    /// Namespace, name, uid, resourceVersion, creation and deletion times, finalizers.
    pub metadata: ObjectMeta,
    /// `spec.nodeName`.
    pub node_name: Option<String>,
    /// `status.phase`.
    pub phase: Option<String>,
    /// `status.reason`.
    pub reason: Option<String>,
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
                finalizers: m.finalizers.clone(),
                ..ObjectMeta::default()
            },
            node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
            reason: pod.status.as_ref().and_then(|s| s.reason.clone()),
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
    finalizers: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    node_name: Option<String>,
}

#[derive(Deserialize)]
struct WireStatus {
    phase: Option<String>,
    reason: Option<String>,
}

impl<'de> Deserialize<'de> for PodFacts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Wire { metadata: m, spec, status } = Wire::deserialize(d)?;
        let (phase, reason) = status.map_or((None, None), |s| (s.phase, s.reason));
        Ok(Self {
            metadata: ObjectMeta {
                namespace: m.namespace,
                name: m.name,
                uid: m.uid,
                resource_version: m.resource_version,
                creation_timestamp: m.creation_timestamp,
                deletion_timestamp: m.deletion_timestamp,
                finalizers: m.finalizers,
                ..ObjectMeta::default()
            },
            node_name: spec.and_then(|s| s.node_name),
            phase,
            reason,
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
                "finalizers": ["batch.kubernetes.io/job-tracking"], "labels": {"a": "b"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju"}],
                "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Failed", "reason": "Evicted", "conditions": [{"type": "Ready", "status": "False"}]}
        });
        let pod: Pod = serde_json::from_value(whole.clone()).unwrap();
        let facts: PodFacts = serde_json::from_value(whole).unwrap();
        assert_eq!(facts, PodFacts::from(&pod));
        assert_eq!(facts.node_name.as_deref(), Some("node-1"));
        assert_eq!((facts.phase.as_deref(), facts.reason.as_deref()), (Some("Failed"), Some("Evicted")));
        let bare: PodFacts = serde_json::from_value(json!({"metadata": {"name": "q"}})).unwrap();
        assert_eq!(
            bare,
            PodFacts {
                metadata: ObjectMeta { name: Some("q".into()), ..ObjectMeta::default() },
                ..PodFacts::default()
            }
        );
    }
}
