//! The typed round trip of a built-in kind: decode into its k8s-openapi struct (which ignores
//! unknown fields, as Go's decoder does) and encode it back. What the round trip loses is what
//! kube-apiserver's decode into the Go struct loses; the schema comes from the dependency, not
//! from a hand-written table.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Decodes `obj` as `T` and encodes it again.
fn round_trip<T: DeserializeOwned + Serialize>(obj: &Value) -> Result<Value, String> {
    let typed = T::deserialize(obj).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

/// A kind's round trip.
pub type RoundTrip = fn(&Value) -> Result<Value, String>;

macro_rules! kinds {
    ($(($api_version:literal, $kind:literal, $ty:ty)),* $(,)?) => {
        /// The round trip of the built-in kind `api_version`/`kind`; `None` for kinds the sim
        /// does not type (custom resources, kinds added without an entry here).
        pub fn round_trip_for(api_version: &str, kind: &str) -> Option<RoundTrip> {
            match (api_version, kind) {
                $(($api_version, $kind) => Some(round_trip::<$ty>),)*
                _ => None,
            }
        }

        /// Every typed kind, for tests.
        #[cfg(test)]
        pub const TYPED_KINDS: &[(&str, &str)] = &[$(($api_version, $kind)),*];
    };
}

use k8s_openapi::api::{apps, autoscaling, batch, coordination, core, events, networking, policy, rbac};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;

kinds![
    ("v1", "Namespace", core::v1::Namespace),
    ("v1", "Node", core::v1::Node),
    ("v1", "Pod", core::v1::Pod),
    ("v1", "Event", core::v1::Event),
    ("v1", "ConfigMap", core::v1::ConfigMap),
    ("v1", "Secret", core::v1::Secret),
    ("v1", "Service", core::v1::Service),
    ("v1", "ServiceAccount", core::v1::ServiceAccount),
    ("v1", "Endpoints", core::v1::Endpoints),
    ("v1", "PersistentVolumeClaim", core::v1::PersistentVolumeClaim),
    ("v1", "PodTemplate", core::v1::PodTemplate),
    ("v1", "LimitRange", core::v1::LimitRange),
    ("v1", "ResourceQuota", core::v1::ResourceQuota),
    ("batch/v1", "Job", batch::v1::Job),
    ("batch/v1", "CronJob", batch::v1::CronJob),
    ("coordination.k8s.io/v1", "Lease", coordination::v1::Lease),
    ("events.k8s.io/v1", "Event", events::v1::Event),
    ("apps/v1", "Deployment", apps::v1::Deployment),
    ("apps/v1", "StatefulSet", apps::v1::StatefulSet),
    ("apps/v1", "DaemonSet", apps::v1::DaemonSet),
    ("apps/v1", "ReplicaSet", apps::v1::ReplicaSet),
    ("policy/v1", "PodDisruptionBudget", policy::v1::PodDisruptionBudget),
    ("policy/v1", "Eviction", policy::v1::Eviction),
    ("networking.k8s.io/v1", "NetworkPolicy", networking::v1::NetworkPolicy),
    ("autoscaling/v2", "HorizontalPodAutoscaler", autoscaling::v2::HorizontalPodAutoscaler),
    ("rbac.authorization.k8s.io/v1", "Role", rbac::v1::Role),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", rbac::v1::RoleBinding),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", rbac::v1::ClusterRole),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", rbac::v1::ClusterRoleBinding),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", apiextensions::v1::CustomResourceDefinition),
];
