//! The Job controller's caches: Jobs by key and uid, and pods indexed by their controlling Job's
//! uid, so a sync reads its pods without scanning every pod of the cluster.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use parking_lot::RwLock;

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

    pub fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
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

#[derive(Default)]
struct Jobs {
    by_key: HashMap<ObjectKey, Arc<Job>>,
    key_by_uid: HashMap<String, ObjectKey>,
}

#[derive(Default)]
struct Pods {
    /// Controlling Job uid (or "" for pods without one) → pod key → pod.
    by_owner: HashMap<String, BTreeMap<ObjectKey, Arc<Pod>>>,
    owner_of: HashMap<ObjectKey, String>,
}

/// Jobs and pods as the watches last showed them.
#[derive(Default)]
pub struct Cache {
    jobs: RwLock<Jobs>,
    pods: RwLock<Pods>,
}

impl Cache {
    pub fn job(&self, key: &ObjectKey) -> Option<Arc<Job>> {
        self.jobs.read().by_key.get(key).cloned()
    }

    pub fn job_by_uid(&self, uid: &str) -> Option<Arc<Job>> {
        let jobs = self.jobs.read();
        jobs.key_by_uid.get(uid).and_then(|k| jobs.by_key.get(k)).cloned()
    }

    /// Stores a Job; returns the previous version.
    pub fn put_job(&self, job: Arc<Job>) -> Option<Arc<Job>> {
        let key = ObjectKey::of(&job.metadata);
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let mut jobs = self.jobs.write();
        let old = jobs.by_key.insert(key.clone(), job);
        // A Job deleted and re-created under the same name has a new uid.
        if let Some(old_uid) = old.as_ref().and_then(|o| o.metadata.uid.clone())
            && old_uid != uid
        {
            jobs.key_by_uid.remove(&old_uid);
        }
        jobs.key_by_uid.insert(uid, key);
        old
    }

    pub fn remove_job(&self, key: &ObjectKey) -> Option<Arc<Job>> {
        let mut jobs = self.jobs.write();
        let old = jobs.by_key.remove(key)?;
        if let Some(uid) = old.metadata.uid.as_deref() {
            jobs.key_by_uid.remove(uid);
        }
        Some(old)
    }

    pub fn job_keys(&self) -> HashSet<ObjectKey> {
        self.jobs.read().by_key.keys().cloned().collect()
    }

    /// The pods whose controller is the Job with `uid`.
    pub fn pods_of(&self, job_uid: &str) -> Vec<Arc<Pod>> {
        self.pods.read().by_owner.get(job_uid).map(|m| m.values().cloned().collect()).unwrap_or_default()
    }

    pub fn pod(&self, key: &ObjectKey) -> Option<Arc<Pod>> {
        let pods = self.pods.read();
        let owner = pods.owner_of.get(key)?;
        pods.by_owner.get(owner)?.get(key).cloned()
    }

    /// Stores a pod; returns the previous version.
    pub fn put_pod(&self, pod: Arc<Pod>) -> Option<Arc<Pod>> {
        let key = ObjectKey::of(&pod.metadata);
        let owner = controlling_job_uid(&pod).unwrap_or("").to_string();
        let mut pods = self.pods.write();
        let old = match pods.owner_of.insert(key.clone(), owner.clone()) {
            Some(previous_owner) => pods.by_owner.get_mut(&previous_owner).and_then(|m| m.remove(&key)),
            None => None,
        };
        pods.by_owner.entry(owner).or_default().insert(key, pod);
        old
    }

    pub fn remove_pod(&self, key: &ObjectKey) -> Option<Arc<Pod>> {
        let mut pods = self.pods.write();
        let owner = pods.owner_of.remove(key)?;
        let removed = pods.by_owner.get_mut(&owner).and_then(|m| m.remove(key));
        if pods.by_owner.get(&owner).is_some_and(BTreeMap::is_empty) {
            pods.by_owner.remove(&owner);
        }
        removed
    }

    pub fn pod_keys(&self) -> HashSet<ObjectKey> {
        self.pods.read().owner_of.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, owner: Option<&str>) -> Pod {
        let refs = owner.map(|uid| json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": uid, "controller": true}]));
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "ns", "ownerReferences": refs}}),
        )
        .unwrap()
    }

    #[test]
    fn pods_are_indexed_by_their_controlling_job() {
        let c = Cache::default();
        c.put_pod(Arc::new(pod("a", Some("u1"))));
        c.put_pod(Arc::new(pod("b", Some("u1"))));
        c.put_pod(Arc::new(pod("c", None)));
        assert_eq!(c.pods_of("u1").len(), 2);
        // Orphaned by the garbage collector: the pod moves out of the Job's index.
        c.put_pod(Arc::new(pod("a", None)));
        assert_eq!(c.pods_of("u1").len(), 1);
        assert!(c.remove_pod(&ObjectKey::new("ns", "b")).is_some());
        assert!(c.pods_of("u1").is_empty());
        assert_eq!(c.pod_keys().len(), 2);
    }

    #[test]
    fn jobs_are_found_by_key_and_uid() {
        let c = Cache::default();
        let job: Job =
            serde_json::from_value(json!({"metadata": {"name": "j", "namespace": "ns", "uid": "u1"}}))
                .unwrap();
        c.put_job(Arc::new(job));
        assert!(c.job_by_uid("u1").is_some());
        c.remove_job(&ObjectKey::new("ns", "j"));
        assert!(c.job_by_uid("u1").is_none());
    }
}
