//! The resource types the sim serves: built-in kinds with their discovery facts, plus kinds
//! registered at run time by CustomResourceDefinitions.

use std::sync::Arc;

/// What kubectl and kube-rs learn about a resource from discovery, plus how the sim treats it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Whether a `/status` subresource is served.
    pub has_status: bool,
    /// Built-in kinds accept strategic merge patches; custom resources get 415.
    pub builtin: bool,
    /// Field selectors accepted besides metadata.name and metadata.namespace: the built-in
    /// kinds' static lists, so every stored object names its selectable fields without a copy.
    pub field_selectors: &'static [&'static str],
}

impl ResourceType {
    /// `v1` or `batch/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// Whether this is `group`'s `plural`.
    pub fn is(&self, group: &str, plural: &str) -> bool {
        self.group == group && self.plural == plural
    }

    /// The list kind, e.g. `PodList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The storage identity: one store per group and resource, whatever the version.
    pub fn key(&self) -> ResourceKey {
        ResourceKey { group: self.group.clone(), plural: self.plural.clone() }
    }
}

/// Identifies a stored resource independent of version: `(group, plural)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    pub group: String,
    pub plural: String,
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    has_status: bool,
    field_selectors: &'static [&'static str],
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];
const EVENTS_V1_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "type",
];
const ALL: &[&str] = &["all"];

const BUILTINS: &[Builtin] = &[
    b("", "v1", "namespaces", "Namespace", false, &["ns"], &[], true, &["status.phase"]),
    b("", "v1", "nodes", "Node", false, &["no"], &[], true, &["spec.unschedulable"]),
    b("", "v1", "pods", "Pod", true, &["po"], ALL, true, POD_FIELDS),
    b("", "v1", "events", "Event", true, &["ev"], &[], false, EVENT_FIELDS),
    b("", "v1", "configmaps", "ConfigMap", true, &["cm"], &[], false, &[]),
    b("", "v1", "secrets", "Secret", true, &[], &[], false, &["type"]),
    b("", "v1", "services", "Service", true, &["svc"], ALL, true, &[]),
    b("", "v1", "serviceaccounts", "ServiceAccount", true, &["sa"], &[], false, &[]),
    b("", "v1", "endpoints", "Endpoints", true, &["ep"], &[], false, &[]),
    b("", "v1", "resourcequotas", "ResourceQuota", true, &["quota"], &[], true, &[]),
    b("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, &["pvc"], &[], true, &[]),
    b("batch", "v1", "jobs", "Job", true, &[], ALL, true, &["status.successful"]),
    b("batch", "v1", "cronjobs", "CronJob", true, &["cj"], ALL, true, &[]),
    b("coordination.k8s.io", "v1", "leases", "Lease", true, &[], &[], false, &[]),
    b("events.k8s.io", "v1", "events", "Event", true, &["ev"], &[], false, EVENTS_V1_FIELDS),
    b("apps", "v1", "deployments", "Deployment", true, &["deploy"], ALL, true, &[]),
    b("apps", "v1", "statefulsets", "StatefulSet", true, &["sts"], ALL, true, &[]),
    b("apps", "v1", "daemonsets", "DaemonSet", true, &["ds"], ALL, true, &[]),
    b("apps", "v1", "replicasets", "ReplicaSet", true, &["rs"], ALL, true, &[]),
    b("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, &["pdb"], &[], true, &[]),
    b("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", true, &["netpol"], &[], false, &[]),
    b(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        true,
        &["hpa"],
        ALL,
        true,
        &[],
    ),
    b("rbac.authorization.k8s.io", "v1", "roles", "Role", true, &[], &[], false, &[]),
    b("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, &[], &[], false, &[]),
    b("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, &[], &[], false, &[]),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
        &[],
        &[],
        false,
        &[],
    ),
    b(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        &[],
        true,
        &[],
    ),
];

#[allow(clippy::too_many_arguments)]
const fn b(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    has_status: bool,
    field_selectors: &'static [&'static str],
) -> Builtin {
    Builtin { group, version, plural, kind, namespaced, short_names, categories, has_status, field_selectors }
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// All served resource types. Cheap to clone; CRDs add to it.
#[derive(Debug, Clone)]
pub struct Registry {
    types: Arc<Vec<Arc<ResourceType>>>,
}

impl Default for Registry {
    fn default() -> Self {
        let types = BUILTINS
            .iter()
            .map(|b| {
                Arc::new(ResourceType {
                    group: b.group.to_string(),
                    version: b.version.to_string(),
                    plural: b.plural.to_string(),
                    singular: b.kind.to_lowercase(),
                    kind: b.kind.to_string(),
                    namespaced: b.namespaced,
                    short_names: owned(b.short_names),
                    categories: owned(b.categories),
                    has_status: b.has_status,
                    builtin: true,
                    field_selectors: b.field_selectors,
                })
            })
            .collect();
        Self { types: Arc::new(types) }
    }
}

impl Registry {
    pub fn all(&self) -> &[Arc<ResourceType>] {
        &self.types
    }

    /// The type served at `/apis/{group}/{version}/{plural}` (or `/api/v1/{plural}`).
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types.iter().find(|t| t.group == group && t.version == version && t.plural == plural).cloned()
    }

    /// The type whose objects carry this `apiVersion` and `kind`.
    pub fn find_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.types.iter().find(|t| t.kind == kind && t.api_version() == api_version).cloned()
    }

    /// Group versions served, in discovery order (core first).
    pub fn group_versions(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for t in self.types.iter() {
            let gv = (t.group.clone(), t.version.clone());
            if !out.contains(&gv) {
                out.push(gv);
            }
        }
        out
    }

    /// A registry that also serves `extra` (from a CustomResourceDefinition); replaces a type with
    /// the same group, version and plural.
    pub fn with(&self, extra: Vec<ResourceType>) -> Self {
        let mut types: Vec<Arc<ResourceType>> = self
            .types
            .iter()
            .filter(|t| {
                !extra.iter().any(|e| e.group == t.group && e.version == t.version && e.plural == t.plural)
            })
            .cloned()
            .collect();
        types.extend(extra.into_iter().map(Arc::new));
        Self { types: Arc::new(types) }
    }

    /// A registry without the versions of `group`/`plural` (a deleted CRD).
    pub fn without(&self, group: &str, plural: &str) -> Self {
        let types =
            self.types.iter().filter(|t| !(t.group == group && t.plural == plural)).cloned().collect();
        Self { types: Arc::new(types) }
    }
}
