//! How cached objects are named and who controls them.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self { namespace: namespace.into(), name: name.into() }
    }

    pub fn of(meta: &ObjectMeta) -> Self {
        Self::new(meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The uid of a pod's controlling owner when that owner is a batch/v1 Job.
pub fn controlling_job_uid(pod: &Pod) -> Option<&str> {
    pod.metadata.owner_references.as_deref()?.iter().find_map(|o| {
        (o.controller == Some(true) && o.kind == "Job" && o.api_version == "batch/v1")
            .then_some(o.uid.as_str())
    })
}
