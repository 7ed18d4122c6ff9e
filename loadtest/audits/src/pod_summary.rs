//! A pod as the object audits read it: its identity, owners, creation and deletion times and
//! phase. The audit watch decodes every pod change of a run, and decoding the whole `Pod` (its
//! containers, conditions and managedFields) was 5% of the CPU of the process that also serves
//! the sim during `loadtest run throughput`; the rest of a pod is skipped unread.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

/// The fields of a pod the audits use; decodes from a whole pod. Its `kube::Resource` is the
/// `Pod`'s, so kube's `Api` and watcher read pods into it.
#[derive(Debug, Clone, Default, PartialEq, kube::Resource)]
#[resource(inherit = Pod)]
pub struct PodSummary {
    pub metadata: ObjectMeta,
    /// `status.phase`.
    pub phase: Option<String>,
}

#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: WireMeta,
    #[serde(default)]
    status: Option<WireStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    owner_references: Option<Vec<OwnerReference>>,
}

#[derive(Deserialize)]
struct WireStatus {
    phase: Option<String>,
}

impl<'de> Deserialize<'de> for PodSummary {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Wire { metadata: m, status } = Wire::deserialize(d)?;
        Ok(Self {
            metadata: ObjectMeta {
                name: m.name,
                namespace: m.namespace,
                uid: m.uid,
                resource_version: m.resource_version,
                creation_timestamp: m.creation_timestamp,
                deletion_timestamp: m.deletion_timestamp,
                owner_references: m.owner_references,
                ..ObjectMeta::default()
            },
            phase: status.and_then(|s| s.phase),
        })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;

    /// A whole pod decodes to the fields the audits read, the same as from `Pod`.
    #[test]
    fn a_whole_pod_decodes_to_its_summary() {
        let whole = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                "creationTimestamp": "2026-11-26T10:00:00Z", "deletionTimestamp": "2026-11-26T10:01:00Z",
                "labels": {"a": "b"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}],
                "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let pod: Pod = serde_json::from_value(whole.clone()).unwrap();
        let summary: PodSummary = serde_json::from_value(whole).unwrap();
        let m = &summary.metadata;
        assert_eq!(
            (m.name.as_deref(), m.namespace.as_deref(), m.uid.as_deref()),
            (Some("p"), Some("ns"), Some("u"))
        );
        assert_eq!(m.resource_version, pod.metadata.resource_version);
        assert_eq!(m.creation_timestamp, pod.metadata.creation_timestamp);
        assert_eq!(m.deletion_timestamp, pod.metadata.deletion_timestamp);
        assert_eq!(m.owner_references, pod.metadata.owner_references);
        assert_eq!(summary.phase, pod.status.and_then(|s| s.phase));
        let bare: PodSummary = serde_json::from_value(json!({"metadata": {"name": "q"}})).unwrap();
        assert_eq!((bare.metadata.name.as_deref(), bare.phase), (Some("q"), None));
    }
}
