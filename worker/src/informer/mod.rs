//! The worker's informer layer: one shared, indexed, trimmed [`Store`] per kind (Jobs, Pods,
//! CronJobs), as kube-controller-manager has one `SharedIndexInformer` per kind. The per-shard
//! watches of [`crate::runtime::watch`] fill the stores; the Job, CronJob and TTL-after-finished
//! controllers register [`Handler`]s and read the stores, keeping no copy of their own.
//!
//! - [`store`]: objects, handlers, the synced signal, the recently-deleted guard.
//! - [`index`]: secondary indexes; the ones the controllers use are named here.
//! - [`trim`]: what a store keeps of each kind, and why.

pub mod index;
pub mod key;
mod recently_deleted;
pub mod store;
pub mod trim;

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub use index::Indexer;
pub use key::{ObjectKey, controlling_job_uid};
pub use store::{Store, Synced, Writes};
pub use trim::Cached;

use crate::runtime::shard::ShardTable;

/// What a controller does with the changes of one kind.
pub trait Handler<K>: Send + Sync {
    /// An object was added or changed; `old` is the version the store held before, if any.
    fn applied(&self, old: Option<&Arc<K>>, obj: &Arc<K>);
    /// An object was deleted (seen in the watch, or missing from a relist).
    fn deleted(&self, obj: &Arc<K>);
}

/// Whether `incoming` should replace `cached`: another object under the same name (a new uid),
/// or a later version of the same one. Resource versions are opaque by contract, but etcd-backed
/// API servers (and the sim) issue increasing integers; when either does not parse, `incoming`
/// counts as newer, which is what an informer assumes.
pub fn is_newer(cached: &ObjectMeta, incoming: &ObjectMeta) -> bool {
    if cached.uid != incoming.uid {
        return true;
    }
    let version = |m: &ObjectMeta| m.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok());
    match (version(cached), version(incoming)) {
        (Some(c), Some(i)) => i > c,
        _ => true,
    }
}

/// Pods by the uid of their controlling batch/v1 Job: the pods a Job sync reads.
pub const PODS_BY_JOB_UID: Indexer<Pod> =
    Indexer { name: "job-uid", value: |p: &Pod| controlling_job_uid(p).map(Cow::Borrowed) };

/// Jobs by uid: the Job a pod's controller reference names.
pub const JOBS_BY_UID: Indexer<Job> =
    Indexer { name: "uid", value: |j: &Job| j.metadata.uid.as_deref().map(Cow::Borrowed) };

/// Jobs by `namespace/name` of their controller reference, whatever its kind: the Jobs a CronJob
/// sync reads. Upstream's `getJobsToBeReconciled` matches a CronJob's Jobs by that name alone, not
/// by uid or kind, and so does this index.
pub const JOBS_BY_CONTROLLER_NAME: Indexer<Job> = Indexer {
    name: "controller-name",
    value: |j: &Job| {
        let controller =
            j.metadata.owner_references.as_deref()?.iter().find(|r| r.controller == Some(true))?;
        Some(Cow::Owned(controller_name_value(
            j.metadata.namespace.as_deref().unwrap_or_default(),
            &controller.name,
        )))
    },
};

/// The [`JOBS_BY_CONTROLLER_NAME`] value of the Jobs that `name` in `namespace` controls.
pub fn controller_name_value(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The worker's stores, one per kind.
#[derive(Clone)]
pub struct Informers {
    pub jobs: Arc<Store<Job>>,
    pub pods: Arc<Store<Pod>>,
    pub cronjobs: Arc<Store<CronJob>>,
}

impl Informers {
    pub fn new(shards: ShardTable) -> Self {
        Self {
            jobs: Arc::new(Store::new(
                shards.clone(),
                &[JOBS_BY_UID, JOBS_BY_CONTROLLER_NAME],
                Writes::Taken,
            )),
            pods: Arc::new(Store::new(shards.clone(), &[PODS_BY_JOB_UID], Writes::NotTaken)),
            cronjobs: Arc::new(Store::new(shards, &[], Writes::Taken)),
        }
    }

    /// The worker starts holding no shard: nothing to wait for before syncing.
    pub fn start_empty(&self) {
        self.jobs.start_empty();
        self.pods.start_empty();
        self.cronjobs.start_empty();
    }

    /// Empties a shard the worker no longer holds.
    pub fn forget_shard(&self, shard: u32) {
        self.jobs.forget_shard(shard);
        self.pods.forget_shard(shard);
        self.cronjobs.forget_shard(shard);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(rv: Option<&str>) -> ObjectMeta {
        ObjectMeta { resource_version: rv.map(String::from), ..ObjectMeta::default() }
    }

    #[test]
    fn a_later_integer_version_is_newer_and_an_equal_or_earlier_one_is_not() {
        assert!(is_newer(&at(Some("9")), &at(Some("10"))), "numeric, not string, order");
        assert!(!is_newer(&at(Some("10")), &at(Some("10"))), "the echo of our own write");
        assert!(!is_newer(&at(Some("11")), &at(Some("10"))), "a late response must not roll the cache back");
    }

    #[test]
    fn another_object_under_the_same_name_is_newer_whatever_its_version() {
        let old = ObjectMeta { uid: Some("a".into()), ..at(Some("10")) };
        let recreated = ObjectMeta { uid: Some("b".into()), ..at(Some("5")) };
        assert!(is_newer(&old, &recreated));
    }

    #[test]
    fn an_unparseable_or_missing_version_counts_as_newer() {
        assert!(is_newer(&at(Some("abc")), &at(Some("10"))));
        assert!(is_newer(&at(Some("10")), &at(Some("opaque"))));
        assert!(is_newer(&at(None), &at(Some("1"))));
    }

    #[test]
    fn jobs_are_filed_under_their_controllers_name_whatever_its_kind_and_pods_under_their_jobs_uid() {
        let job: Job = serde_json::from_value(json!({"metadata": {"name": "j", "namespace": "ns", "uid": "u",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Other", "name": "cj", "uid": "x", "controller": true}]}}))
        .expect("a job");
        assert_eq!(
            (JOBS_BY_CONTROLLER_NAME.value)(&job).as_deref(),
            Some(controller_name_value("ns", "cj").as_str())
        );
        assert_eq!((JOBS_BY_UID.value)(&job).as_deref(), Some("u"));
        let owned = |kind: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p", "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": kind, "name": "j", "uid": "u", "controller": true}]}}))
            .expect("a pod")
        };
        assert_eq!((PODS_BY_JOB_UID.value)(&owned("Job")).as_deref(), Some("u"));
        assert_eq!((PODS_BY_JOB_UID.value)(&owned("ReplicaSet")), None);
    }
}
