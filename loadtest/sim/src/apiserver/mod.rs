//! The apiserver's semantics over the store: create, update, patch and delete with upstream's
//! metadata rules, defaulting and validation, status subresources, finalizers, graceful pod
//! deletion, and the notifications the garbage collector acts on.

pub mod decode;
pub mod errors;
pub mod events;
pub mod eviction;
pub mod meta;
pub mod namespace;
mod quota;
mod write;
#[cfg(test)]
mod write_tests;

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use tokio::sync::mpsc;

pub use errors::ApiError;
pub use write::{
    DeleteOptions, Deleted, Patched, Propagation, Subresource, WriteOptions, parse_yaml_or_json,
};

use crate::resources::{Registry, ResourceKey, ResourceType};
use crate::store::{ResourceId, Store, StoredObject};

/// How a request's objects relate to the stored form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Stored as served.
    Native,
    /// events.k8s.io/v1, stored as core/v1 Events.
    EventsV1,
}

/// A resolved resource: what the request addressed and where it is stored.
#[derive(Debug, Clone)]
pub struct Target {
    pub rt: Arc<ResourceType>,
    pub rid: ResourceId,
    pub view: View,
}

/// Work for the garbage collector and namespace controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GcWork {
    /// An object is gone; its dependents may be orphaned, and owners in foreground deletion may
    /// be unblocked.
    Removed { uid: Box<str>, owners: Vec<Box<str>> },
    /// An object is being deleted with a garbage-collector finalizer (foreground or orphan).
    Finalizing { uid: Box<str> },
    /// A namespace is terminating.
    NamespaceTerminating { name: Box<str> },
    /// A CustomResourceDefinition was written: accept its names and mark it Established.
    EstablishCrd { name: Box<str> },
}

pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
pub const ORPHAN_FINALIZER: &str = "orphan";

/// The API server. Shared as `Arc<ApiServer>` by the HTTP layer, the garbage collector and the
/// simulated kubelet.
pub struct ApiServer {
    store: Arc<Store>,
    registry: RwLock<Registry>,
    gc: mpsc::UnboundedSender<GcWork>,
    pub(crate) namespaces: ResourceId,
    crds: ResourceId,
    quota_ids: quota::QuotaIds,
    /// Held across a quota-charged create's check and commit, and a quota status recalculation.
    quota_lock: Mutex<()>,
}

impl ApiServer {
    /// The server and the receiving end of its garbage-collector work queue.
    pub fn new(store: Arc<Store>) -> (Arc<Self>, mpsc::UnboundedReceiver<GcWork>) {
        let (gc, gc_rx) = mpsc::unbounded_channel();
        let id = |plural: &str, group: &str| {
            store.resource_id(&ResourceKey { group: group.to_string(), plural: plural.to_string() })
        };
        let namespaces = id("namespaces", "");
        let crds = id("customresourcedefinitions", "apiextensions.k8s.io");
        let quota_ids = quota::QuotaIds {
            quotas: id("resourcequotas", ""),
            pods: id("pods", ""),
            jobs: id("jobs", "batch"),
        };
        let server = Arc::new(Self {
            store,
            registry: RwLock::new(Registry::default()),
            gc,
            namespaces,
            crds,
            quota_ids,
            quota_lock: Mutex::new(()),
        });
        (server, gc_rx)
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn registry(&self) -> Registry {
        self.registry.read().clone()
    }

    /// The target for `/apis/{group}/{version}/{plural}`.
    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<Target> {
        let rt = self.registry.read().find(group, version, plural)?;
        let (storage_key, view) = if rt.is("events.k8s.io", "events") {
            (ResourceKey { group: String::new(), plural: "events".into() }, View::EventsV1)
        } else {
            (rt.key(), View::Native)
        };
        Some(Target { rid: self.store.resource_id(&storage_key), rt, view })
    }

    /// The target of a built-in resource; panics only on a typo in this crate's own code.
    pub fn builtin(&self, group: &str, version: &str, plural: &str) -> Target {
        self.resolve(group, version, plural)
            .unwrap_or_else(|| panic!("built-in resource {group}/{version} {plural}"))
    }

    /// Resource ids of cluster-scoped resources (skipped by namespace cleanup).
    pub fn cluster_scoped(&self) -> HashSet<ResourceId> {
        self.registry
            .read()
            .all()
            .iter()
            .filter(|t| !t.namespaced)
            .map(|t| self.store.resource_id(&t.key()))
            .collect()
    }

    /// Every served resource's target, one per stored resource (preferred versions).
    pub fn namespaced_targets(&self) -> Vec<Target> {
        let registry = self.registry.read().clone();
        let mut seen = HashSet::new();
        registry
            .all()
            .iter()
            .filter(|t| t.namespaced && !t.is("events.k8s.io", "events"))
            .filter(|t| seen.insert(t.key()))
            .filter_map(|t| self.resolve(&t.group, &t.version, &t.plural))
            .collect()
    }

    /// The stored object as the target's view renders it.
    pub fn render(&self, target: &Target, obj: &StoredObject) -> Bytes {
        match target.view {
            View::Native => obj.bytes.clone(),
            View::EventsV1 => {
                Bytes::from(serde_json::to_vec(&events::to_events_v1(&obj.value())).unwrap_or_default())
            }
        }
    }

    /// The stored object as a value in the target's view.
    pub fn view_value(&self, target: &Target, obj: &StoredObject) -> Value {
        match target.view {
            View::Native => obj.value(),
            View::EventsV1 => events::to_events_v1(&obj.value()),
        }
    }

    pub fn get(&self, target: &Target, namespace: &str, name: &str) -> Result<Arc<StoredObject>, ApiError> {
        self.store.get(target.rid, namespace, name).ok_or_else(|| ApiError::not_found(&target.rt, name))
    }

    pub(crate) fn notify(&self, work: GcWork) {
        // The receiver lives as long as the sim; a closed channel only happens at shutdown.
        let _ = self.gc.send(work);
    }

    fn namespace_state(&self, namespace: &str) -> Option<bool> {
        let ns = self.store.get(self.namespaces, "", namespace)?;
        Some(meta::stored_is_deleting(&ns))
    }
}

impl ApiServer {
    /// The native target for a stored resource id.
    pub fn target_for(&self, rid: ResourceId) -> Option<Target> {
        let registry = self.registry.read().clone();
        registry
            .all()
            .iter()
            .filter(|t| !t.is("events.k8s.io", "events"))
            .find(|t| self.store.resource_id(&t.key()) == rid)
            .and_then(|t| self.resolve(&t.group, &t.version, &t.plural))
    }
}
