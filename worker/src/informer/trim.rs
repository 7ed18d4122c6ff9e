//! What the stores keep of an object: the transform applied to every object before it is
//! stored, as kube-controller-manager's informers apply `informers.WithTransform(trim)`.
//!
//! Every kind loses `managedFields`, which no controller reads and which is the bulk of a decoded
//! object (a tree of maps per field manager). Jobs and CronJobs keep everything else: the
//! controllers send them back whole (`replace_status`), and a Job's pod template is what its
//! pods are made from.

use std::fmt::Debug;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use serde::de::DeserializeOwned;

/// A kind the worker's stores hold, and what they keep of it.
pub trait Cached:
    kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
    /// The object as stored: what no controller reads dropped.
    fn trimmed(self) -> Self;
}

fn without_managed_fields<K: kube::Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj
}

impl Cached for Job {
    fn trimmed(self) -> Self {
        without_managed_fields(self)
    }
}

impl Cached for CronJob {
    fn trimmed(self) -> Self {
        without_managed_fields(self)
    }
}

impl Cached for Pod {
    fn trimmed(self) -> Self {
        without_managed_fields(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};

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
