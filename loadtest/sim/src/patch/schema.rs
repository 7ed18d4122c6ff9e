//! Patch metadata of the built-in kinds the sim serves: a small graph of Go types whose fields
//! carry the `patchStrategy`/`patchMergeKey` struct tags of k8s.io/api (read by strategic merge
//! patch) and the `+listType`/`+listMapKey`/`+mapType`/`+structType` markers (read by server-side
//! apply, as client-go `applyconfigurations/internal/internal.go` lists them).
//!
//! Only fields that matter are listed: those with a strategy or a list/map type other than the
//! default, and the struct-typed fields leading to them. Any other field is "opaque": its maps
//! merge key by key and its lists are replaced, which is what strategicpatch does for a known
//! field without tags (where it would refuse an unknown one with a 500 instead).

/// A Go struct type.
pub(crate) struct TypeDef {
    pub name: &'static str,
    pub fields: &'static [FieldDef],
}

/// One field of a [`TypeDef`].
#[derive(Clone, Copy)]
pub(crate) struct FieldDef {
    /// The JSON name.
    pub json: &'static str,
    /// The struct type of the field, or of its list items; `None` when opaque.
    pub ty: Option<&'static TypeDef>,
    /// The raw `patchStrategy` tag, e.g. `"merge,retainKeys"` ("" when absent).
    pub strategy: &'static str,
    /// The `patchMergeKey` tag ("" when absent).
    pub merge_key: &'static str,
    /// How server-side apply treats the field.
    pub ssa: Ssa,
    /// Whether the field is in its type's zero value as kube-apiserver converts it to compare
    /// (`DefaultUnstructuredConverter`): a struct that is not a pointer, or a list without
    /// `omitempty` (as null). A create is compared with the zero value of its kind, so such a
    /// field is not new on create and its creator's entry has no `.` for it.
    pub in_zero_value: bool,
}

/// Server-side apply semantics of a field (`elementRelationship` in the SSA schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ssa {
    /// Follow the SMP tags: merge with a key → associative list keyed by it; merge without a key
    /// → set; anything else → atomic (lists) or granular (maps/structs).
    Derived,
    /// An atomic list.
    Atomic,
    /// An associative list with these keys (when they differ from the single SMP merge key).
    Map(&'static [&'static str]),
    /// A map or struct applied as a whole (`+mapType=atomic`, `+structType=atomic`).
    AtomicStruct,
}

/// The list semantics server-side apply gives a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SsaList {
    Atomic,
    Set,
    Map(SsaKeys),
}

/// The keys of an associative list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SsaKeys {
    One(&'static str),
    Many(&'static [&'static str]),
}

impl SsaKeys {
    pub fn iter(&self) -> impl Iterator<Item = &'static str> {
        let (one, many): (Option<&'static str>, &'static [&'static str]) = match *self {
            SsaKeys::One(k) => (Some(k), &[]),
            SsaKeys::Many(ks) => (None, ks),
        };
        one.into_iter().chain(many.iter().copied())
    }
}

impl FieldDef {
    pub fn ssa_list(&self) -> SsaList {
        match self.ssa {
            Ssa::Atomic | Ssa::AtomicStruct => SsaList::Atomic,
            Ssa::Map(keys) => SsaList::Map(SsaKeys::Many(keys)),
            Ssa::Derived => {
                if self.strategy.split(',').any(|s| s == "merge") {
                    if self.merge_key.is_empty() {
                        SsaList::Set
                    } else {
                        SsaList::Map(SsaKeys::One(self.merge_key))
                    }
                } else {
                    SsaList::Atomic
                }
            }
        }
    }
}

const fn field(
    json: &'static str,
    ty: Option<&'static TypeDef>,
    strategy: &'static str,
    key: &'static str,
) -> FieldDef {
    FieldDef { json, ty, strategy, merge_key: key, ssa: Ssa::Derived, in_zero_value: false }
}

/// A struct-typed field without tags.
const fn nested(json: &'static str, ty: &'static TypeDef) -> FieldDef {
    field(json, Some(ty), "", "")
}

/// `patchStrategy:"merge" patchMergeKey:"<key>"`.
const fn merge_by(json: &'static str, key: &'static str, ty: Option<&'static TypeDef>) -> FieldDef {
    field(json, ty, "merge", key)
}

/// `patchStrategy:"merge"` on a list of primitives.
const fn merge_set(json: &'static str) -> FieldDef {
    field(json, None, "merge", "")
}

/// A field without SMP tags whose SSA semantics are not the default.
const fn ssa_only(json: &'static str, ssa: Ssa) -> FieldDef {
    FieldDef { json, ty: None, strategy: "", merge_key: "", ssa, in_zero_value: false }
}

impl FieldDef {
    const fn with_ssa(self, ssa: Ssa) -> FieldDef {
        FieldDef { ssa, ..self }
    }

    /// See [`FieldDef::in_zero_value`].
    const fn in_zero_value(self) -> FieldDef {
        FieldDef { in_zero_value: true, ..self }
    }
}

// ---- meta/v1 ----

static OBJECT_META: TypeDef = TypeDef {
    name: "ObjectMeta",
    fields: &[
        // +patchStrategy=merge +listType=set
        merge_set("finalizers"),
        // +patchMergeKey=uid +patchStrategy=merge +listType=map +listMapKey=uid
        merge_by("ownerReferences", "uid", None),
        // +listType=atomic
        ssa_only("managedFields", Ssa::Atomic),
    ],
};

// ---- core/v1 ----

static RESOURCE_REQUIREMENTS: TypeDef = TypeDef {
    name: "ResourceRequirements",
    // claims: +listType=map +listMapKey=name, no SMP tags.
    fields: &[ssa_only("claims", Ssa::Map(&["name"]))],
};

/// Container; EphemeralContainer inlines EphemeralContainerCommon, which has the same tags.
static CONTAINER: TypeDef = TypeDef {
    name: "Container",
    fields: &[
        // SMP merges ports by containerPort; SSA keys them by containerPort and protocol.
        merge_by("ports", "containerPort", None).with_ssa(Ssa::Map(&["containerPort", "protocol"])),
        merge_by("env", "name", None),
        merge_by("volumeMounts", "mountPath", None),
        merge_by("volumeDevices", "devicePath", None),
        nested("resources", &RESOURCE_REQUIREMENTS).in_zero_value(),
        // resizePolicy, restartPolicyRules, envFrom, command, args: atomic, no SMP tags.
    ],
};

static POD_SPEC: TypeDef = TypeDef {
    name: "PodSpec",
    fields: &[
        field("volumes", None, "merge,retainKeys", "name"),
        merge_by("initContainers", "name", Some(&CONTAINER)),
        // `json:"containers"`, no omitempty: null in the zero value.
        merge_by("containers", "name", Some(&CONTAINER)).in_zero_value(),
        merge_by("ephemeralContainers", "name", Some(&CONTAINER)),
        merge_by("imagePullSecrets", "name", None),
        merge_by("hostAliases", "ip", None),
        merge_by("topologySpreadConstraints", "topologyKey", None)
            .with_ssa(Ssa::Map(&["topologyKey", "whenUnsatisfiable"])),
        merge_by("schedulingGates", "name", None),
        field("resourceClaims", None, "merge,retainKeys", "name"),
        // +mapType=atomic
        ssa_only("nodeSelector", Ssa::AtomicStruct),
        // tolerations, readinessGates: atomic, no SMP tags.
    ],
};

static POD_STATUS: TypeDef = TypeDef {
    name: "PodStatus",
    fields: &[
        merge_by("conditions", "type", None),
        merge_by("podIPs", "ip", None),
        merge_by("hostIPs", "ip", None),
        field("resourceClaimStatuses", None, "merge,retainKeys", "name"),
        // containerStatuses, initContainerStatuses, ephemeralContainerStatuses: atomic.
    ],
};

static POD: TypeDef = TypeDef {
    name: "Pod",
    fields: &[nested("metadata", &OBJECT_META), nested("spec", &POD_SPEC), nested("status", &POD_STATUS)],
};

static POD_TEMPLATE_SPEC: TypeDef = TypeDef {
    name: "PodTemplateSpec",
    fields: &[nested("metadata", &OBJECT_META).in_zero_value(), nested("spec", &POD_SPEC).in_zero_value()],
};

static NODE_SPEC: TypeDef = TypeDef {
    name: "NodeSpec",
    // podCIDRs: patchStrategy:"merge" (+listType=set); taints: atomic, no SMP tags.
    fields: &[merge_set("podCIDRs")],
};

static NODE_STATUS: TypeDef = TypeDef {
    name: "NodeStatus",
    fields: &[merge_by("conditions", "type", None), merge_by("addresses", "type", None)],
};

static NODE: TypeDef = TypeDef {
    name: "Node",
    fields: &[nested("metadata", &OBJECT_META), nested("spec", &NODE_SPEC), nested("status", &NODE_STATUS)],
};

static CONDITIONS_STATUS: TypeDef =
    TypeDef { name: "ConditionsStatus", fields: &[merge_by("conditions", "type", None)] };

static NAMESPACE: TypeDef = TypeDef {
    name: "Namespace",
    fields: &[nested("metadata", &OBJECT_META), nested("status", &CONDITIONS_STATUS)],
};

/// core/v1 Event: `involvedObject` is an ObjectReference (`+structType=atomic`) that is not a
/// pointer, `source` a struct that is not one either; `related` a pointer to an ObjectReference.
static CORE_EVENT: TypeDef = TypeDef {
    name: "Event",
    fields: &[
        nested("metadata", &OBJECT_META),
        ssa_only("involvedObject", Ssa::AtomicStruct).in_zero_value(),
        field("source", None, "", "").in_zero_value(),
        ssa_only("related", Ssa::AtomicStruct),
    ],
};

/// events.k8s.io/v1 Event: `regarding` an ObjectReference that is not a pointer,
/// `deprecatedSource` a struct that is not one; `related` a pointer to an ObjectReference.
static EVENTS_EVENT: TypeDef = TypeDef {
    name: "Event",
    fields: &[
        nested("metadata", &OBJECT_META),
        ssa_only("regarding", Ssa::AtomicStruct).in_zero_value(),
        field("deprecatedSource", None, "", "").in_zero_value(),
        ssa_only("related", Ssa::AtomicStruct),
    ],
};

/// ConfigMap, Secret, Endpoints, Lease, RBAC kinds: nothing but ObjectMeta carries patch tags.
static META_ONLY: TypeDef = TypeDef { name: "Object", fields: &[nested("metadata", &OBJECT_META)] };

static SERVICE_SPEC: TypeDef = TypeDef {
    name: "ServiceSpec",
    fields: &[
        merge_by("ports", "port", None).with_ssa(Ssa::Map(&["port", "protocol"])),
        // +mapType=atomic
        ssa_only("selector", Ssa::AtomicStruct),
    ],
};

static SERVICE: TypeDef = TypeDef {
    name: "Service",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &SERVICE_SPEC),
        nested("status", &CONDITIONS_STATUS),
    ],
};

static SERVICE_ACCOUNT: TypeDef = TypeDef {
    name: "ServiceAccount",
    fields: &[nested("metadata", &OBJECT_META), merge_by("secrets", "name", None)],
};

static PERSISTENT_VOLUME_CLAIM: TypeDef = TypeDef {
    name: "PersistentVolumeClaim",
    fields: &[nested("metadata", &OBJECT_META), nested("status", &CONDITIONS_STATUS)],
};

// ---- batch/v1 ----

static JOB_SPEC: TypeDef = TypeDef {
    name: "JobSpec",
    fields: &[
        nested("template", &POD_TEMPLATE_SPEC).in_zero_value(),
        ssa_only("selector", Ssa::AtomicStruct),
    ],
};

static JOB_STATUS: TypeDef = TypeDef {
    name: "JobStatus",
    // patchStrategy:"merge" patchMergeKey:"type" but +listType=atomic for SSA.
    fields: &[merge_by("conditions", "type", None).with_ssa(Ssa::Atomic)],
};

static JOB: TypeDef = TypeDef {
    name: "Job",
    fields: &[nested("metadata", &OBJECT_META), nested("spec", &JOB_SPEC), nested("status", &JOB_STATUS)],
};

static JOB_TEMPLATE_SPEC: TypeDef = TypeDef {
    name: "JobTemplateSpec",
    fields: &[nested("metadata", &OBJECT_META).in_zero_value(), nested("spec", &JOB_SPEC).in_zero_value()],
};

static CRON_JOB_SPEC: TypeDef =
    TypeDef { name: "CronJobSpec", fields: &[nested("jobTemplate", &JOB_TEMPLATE_SPEC).in_zero_value()] };

static CRON_JOB: TypeDef = TypeDef {
    name: "CronJob",
    // status.active: +listType=atomic, no SMP tags.
    fields: &[nested("metadata", &OBJECT_META), nested("spec", &CRON_JOB_SPEC)],
};

// ---- apps/v1 ----

static DEPLOYMENT_SPEC: TypeDef = TypeDef {
    name: "DeploymentSpec",
    fields: &[
        nested("template", &POD_TEMPLATE_SPEC).in_zero_value(),
        ssa_only("selector", Ssa::AtomicStruct),
        // Strategy DeploymentStrategy `patchStrategy:"retainKeys"`
        field("strategy", None, "retainKeys", "").in_zero_value(),
    ],
};

/// StatefulSetSpec, DaemonSetSpec, ReplicaSetSpec (volumeClaimTemplates: atomic, no SMP tags).
static WORKLOAD_SPEC: TypeDef = TypeDef {
    name: "WorkloadSpec",
    fields: &[
        nested("template", &POD_TEMPLATE_SPEC).in_zero_value(),
        ssa_only("selector", Ssa::AtomicStruct),
    ],
};

static DEPLOYMENT: TypeDef = TypeDef {
    name: "Deployment",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &DEPLOYMENT_SPEC),
        nested("status", &CONDITIONS_STATUS),
    ],
};

static WORKLOAD: TypeDef = TypeDef {
    name: "Workload",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &WORKLOAD_SPEC),
        nested("status", &CONDITIONS_STATUS),
    ],
};

// ---- policy/v1 ----

static PDB_SPEC: TypeDef = TypeDef {
    name: "PodDisruptionBudgetSpec",
    // Selector *metav1.LabelSelector `patchStrategy:"replace"`
    fields: &[field("selector", None, "replace", "").with_ssa(Ssa::AtomicStruct)],
};

static PDB: TypeDef = TypeDef {
    name: "PodDisruptionBudget",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &PDB_SPEC),
        nested("status", &CONDITIONS_STATUS),
    ],
};

// ---- autoscaling/v2 ----

/// HorizontalPodAutoscalerStatus.conditions: patchStrategy:"merge" patchMergeKey:"type".
static HPA: TypeDef = TypeDef {
    name: "HorizontalPodAutoscaler",
    fields: &[nested("metadata", &OBJECT_META), nested("status", &CONDITIONS_STATUS)],
};

/// (apiVersion, kind, root type) of every kind with a schema.
static KINDS: &[(&str, &str, &TypeDef)] = &[
    ("v1", "Pod", &POD),
    ("v1", "Node", &NODE),
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ConfigMap", &META_ONLY),
    ("v1", "Secret", &META_ONLY),
    ("v1", "Service", &SERVICE),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Endpoints", &META_ONLY),
    ("v1", "PersistentVolumeClaim", &PERSISTENT_VOLUME_CLAIM),
    ("v1", "ResourceQuota", &META_ONLY),
    ("v1", "Event", &CORE_EVENT),
    ("batch/v1", "Job", &JOB),
    ("batch/v1", "CronJob", &CRON_JOB),
    ("coordination.k8s.io/v1", "Lease", &META_ONLY),
    ("events.k8s.io/v1", "Event", &EVENTS_EVENT),
    ("apps/v1", "Deployment", &DEPLOYMENT),
    ("apps/v1", "StatefulSet", &WORKLOAD),
    ("apps/v1", "DaemonSet", &WORKLOAD),
    ("apps/v1", "ReplicaSet", &WORKLOAD),
    ("policy/v1", "PodDisruptionBudget", &PDB),
    // kubectl apply sends strategic merge patches for every kind compiled into it; these carry
    // no patch tags but ObjectMeta's (CRD status conditions are an SSA map without SMP tags).
    ("networking.k8s.io/v1", "NetworkPolicy", &META_ONLY),
    ("autoscaling/v2", "HorizontalPodAutoscaler", &HPA),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", &META_ONLY),
    ("rbac.authorization.k8s.io/v1", "Role", &META_ONLY),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", &META_ONLY),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", &META_ONLY),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", &META_ONLY),
];

/// The root type of a kind that has patch metadata (a built-in kind).
#[derive(Clone, Copy)]
pub struct SchemaKind {
    api_version: &'static str,
    kind: &'static str,
    root: &'static TypeDef,
}

impl SchemaKind {
    /// The schema of a built-in kind, `None` for kinds without one (custom resources: a strategic
    /// merge patch on those is a 415, see [`crate::patch::PatchError::strategic_merge_unsupported`]).
    pub fn for_kind(api_version: &str, kind: &str) -> Option<SchemaKind> {
        KINDS
            .iter()
            .find(|(v, k, _)| *v == api_version && *k == kind)
            .map(|&(api_version, kind, root)| SchemaKind { api_version, kind, root })
    }

    pub fn api_version(&self) -> &'static str {
        self.api_version
    }

    pub fn kind(&self) -> &'static str {
        self.kind
    }

    pub(crate) fn schema(&self) -> Schema {
        Schema(Some(self.root))
    }

    #[cfg(test)]
    pub(crate) fn for_test(root: &'static TypeDef) -> SchemaKind {
        SchemaKind { api_version: "test/v1", kind: root.name, root }
    }
}

impl std::fmt::Debug for SchemaKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaKind")
            .field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .finish()
    }
}

impl PartialEq for SchemaKind {
    fn eq(&self, other: &Self) -> bool {
        self.api_version == other.api_version && self.kind == other.kind
    }
}

impl Eq for SchemaKind {}

/// A position in the type graph: a known struct, or opaque.
#[derive(Clone, Copy)]
pub(crate) struct Schema(Option<&'static TypeDef>);

impl Schema {
    pub const OPAQUE: Schema = Schema(None);

    /// Whether this is a listed type (a built-in kind's), not an opaque one.
    pub fn is_listed(&self) -> bool {
        self.0.is_some()
    }

    /// The Go type name, for error messages.
    pub fn name(&self) -> &'static str {
        self.0.map_or("", |t| t.name)
    }

    /// The type's address (0 for opaque values): which type it is, for remembering answers.
    pub fn address(&self) -> usize {
        self.0.map_or(0, |t| std::ptr::from_ref(t) as usize)
    }

    /// The field's metadata, if the field is listed.
    pub fn field(&self, json: &str) -> Option<&'static FieldDef> {
        self.0.and_then(|t| t.fields.iter().find(|f| f.json == json))
    }

    /// `LookupPatchMetadataForStruct`/`ForSlice`: the schema of the field's value (or list item)
    /// and its `patchStrategy` tag and `patchMergeKey`.
    pub fn lookup(&self, json: &str) -> (Schema, &'static str, &'static str) {
        match self.field(json) {
            Some(f) => (Schema(f.ty), f.strategy, f.merge_key),
            None => (Schema::OPAQUE, "", ""),
        }
    }
}

#[cfg(test)]
pub(crate) mod test_types {
    //! The types of apimachinery strategicpatch `patch_test.go` (`mergeItem`, `retainKeysStruct`).
    use super::*;

    pub(crate) static MERGE_ITEM: TypeDef = TypeDef {
        name: "mergeItem",
        fields: &[
            merge_by("mergingList", "name", Some(&MERGE_ITEM)),
            nested("nonMergingList", &MERGE_ITEM),
            merge_set("mergingIntList"),
            merge_by("mergeItemPtr", "name", Some(&MERGE_ITEM)),
            field("replacingItem", None, "replace", ""),
            field("retainKeysMap", Some(&RETAIN_KEYS_STRUCT), "retainKeys", ""),
            field("retainKeysMergingList", Some(&MERGE_ITEM), "merge,retainKeys", "name"),
        ],
    };

    pub(crate) static RETAIN_KEYS_STRUCT: TypeDef = TypeDef {
        name: "retainKeysStruct",
        fields: &[
            merge_by("mergingList", "name", Some(&MERGE_ITEM)),
            nested("nonMergingList", &MERGE_ITEM),
            merge_set("mergingIntList"),
        ],
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_resolve_and_templates_share_pod_spec() {
        assert!(SchemaKind::for_kind("example.com/v1", "Widget").is_none());
        assert!(SchemaKind::for_kind("batch/v1", "Pod").is_none());
        for (v, k, _) in KINDS {
            let kind = SchemaKind::for_kind(v, k).unwrap();
            assert_eq!((kind.api_version(), kind.kind()), (*v, *k));
        }
        // CronJob.spec.jobTemplate.spec.template.spec.containers[].env is merged by name.
        let cron = SchemaKind::for_kind("batch/v1", "CronJob").unwrap().schema();
        let (spec, ..) = cron.lookup("spec");
        let (jt, ..) = spec.lookup("jobTemplate");
        let (jspec, ..) = jt.lookup("spec");
        let (tmpl, ..) = jspec.lookup("template");
        let (pspec, ..) = tmpl.lookup("spec");
        let (container, strategy, key) = pspec.lookup("containers");
        assert_eq!((strategy, key, container.name()), ("merge", "name", "Container"));
        assert_eq!(container.lookup("env").1, "merge");
        assert_eq!(pspec.lookup("volumes").1, "merge,retainKeys");
        assert_eq!(pspec.lookup("tolerations").1, "");
    }

    #[test]
    fn ssa_list_types() {
        let pod = SchemaKind::for_kind("v1", "Pod").unwrap().schema();
        let (spec, ..) = pod.lookup("spec");
        let (container, ..) = spec.lookup("containers");
        let ports = container.field("ports").unwrap();
        assert_eq!(ports.ssa_list(), SsaList::Map(SsaKeys::Many(&["containerPort", "protocol"])));
        assert_eq!(spec.field("containers").unwrap().ssa_list(), SsaList::Map(SsaKeys::One("name")));
        let (meta, ..) = pod.lookup("metadata");
        assert_eq!(meta.field("finalizers").unwrap().ssa_list(), SsaList::Set);
        let job = SchemaKind::for_kind("batch/v1", "Job").unwrap().schema();
        let (status, ..) = job.lookup("status");
        assert_eq!(status.field("conditions").unwrap().ssa_list(), SsaList::Atomic);
    }
}
