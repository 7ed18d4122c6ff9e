//! The schemas of the built-in kinds, as kube-apiserver publishes them: generated from
//! k8s-openapi's `JsonSchema` impls (upstream definition names and descriptions), then given what
//! the generator leaves out and kubectl reads:
//!
//! - `x-kubernetes-group-version-kind` on each kind and its list (`kubectl explain` and
//!   client-side validation find a kind's schema by it);
//! - `x-kubernetes-patch-strategy`/`-merge-key` and the list/map types (client-side apply builds
//!   its strategic merge patch from these once `/openapi/v2` is served), from the sim's own patch
//!   table ([`crate::patch::SchemaKind`]), so kubectl and the sim's strategic merge agree;
//! - the types apimachinery marshals by hand (`Quantity`, `IntOrString`, apiextensions' `JSON`…)
//!   in upstream's form;
//! - `$ref`s with siblings wrapped in `allOf`, as kube-apiserver writes OpenAPI v3.
//!
//! Built once per process; kubectl fetches the documents on every command.

use k8s_openapi::api::{apps, autoscaling, batch, coordination, core, events, networking, policy, rbac};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use crate::patch::SchemaKind;
use crate::patch::SsaList;

/// Where OpenAPI v3 keeps its schemas; v2 rewrites it to `#/definitions/`.
pub(super) const V3_REF_PREFIX: &str = "#/components/schemas/";

/// A built-in kind and the names of its schema and its list's.
#[derive(Debug, Clone)]
pub(super) struct KindSchema {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub name: String,
    pub list_name: String,
}

/// Every definition the built-in kinds reach, in OpenAPI v3 form.
pub(super) struct BuiltinSchemas {
    pub definitions: Map<String, Value>,
    pub kinds: Vec<KindSchema>,
}

impl BuiltinSchemas {
    pub fn kind(&self, group: &str, version: &str, kind: &str) -> Option<&KindSchema> {
        self.kinds.iter().find(|k| k.group == group && k.version == version && k.kind == kind)
    }

    /// `names` and every definition they reach through `$ref`s, sorted by name.
    pub fn closure<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Map<String, Value> {
        let mut out = std::collections::BTreeMap::new();
        let mut todo: Vec<String> = names.into_iter().map(str::to_string).collect();
        while let Some(name) = todo.pop() {
            if out.contains_key(&name) {
                continue;
            }
            let Some(schema) = self.definitions.get(&name) else { continue };
            collect_refs(schema, &mut todo);
            out.insert(name, schema.clone());
        }
        out.into_iter().collect()
    }
}

fn collect_refs(schema: &Value, out: &mut Vec<String>) {
    walk_schemas(schema, &mut |m| {
        if let Some(r) = m.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(V3_REF_PREFIX)) {
            out.push(r.to_string());
        }
    });
}

/// Calls `f` on `schema` and on every schema nested in it (property schemas, `items`,
/// `additionalProperties`, `not`, `allOf`/`anyOf`/`oneOf` members), parents first. Only schema
/// positions: JSONSchemaProps has properties named `$ref` and `allOf` that are not references.
pub(super) fn walk_schemas(schema: &Value, f: &mut impl FnMut(&Map<String, Value>)) {
    let Value::Object(m) = schema else { return };
    f(m);
    if let Some(Value::Object(props)) = m.get("properties") {
        props.values().for_each(|v| walk_schemas(v, f));
    }
    for key in ["items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"] {
        match m.get(key) {
            Some(Value::Array(a)) => a.iter().for_each(|v| walk_schemas(v, f)),
            Some(v) => walk_schemas(v, f),
            None => {}
        }
    }
}

/// [`walk_schemas`], changing them.
pub(super) fn walk_schemas_mut(schema: &mut Value, f: &mut impl FnMut(&mut Map<String, Value>)) {
    let Value::Object(m) = schema else { return };
    f(m);
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        props.values_mut().for_each(|v| walk_schemas_mut(v, f));
    }
    for key in ["items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"] {
        match m.get_mut(key) {
            Some(Value::Array(a)) => a.iter_mut().for_each(|v| walk_schemas_mut(v, f)),
            Some(v) => walk_schemas_mut(v, f),
            None => {}
        }
    }
}

/// Meta types the paths refer to besides the kinds.
pub(super) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub(super) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
pub(super) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub(super) const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

pub(super) fn generate() -> BuiltinSchemas {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    settings.transforms = Vec::new();
    let mut generator = settings.into_generator();
    let mut kinds = Vec::new();
    macro_rules! kinds {
        ($($ty:ty),* $(,)?) => { $( add::<$ty>(&mut generator, &mut kinds); )* };
    }
    kinds![
        core::v1::Namespace,
        core::v1::Node,
        core::v1::Pod,
        core::v1::Event,
        core::v1::ConfigMap,
        core::v1::Secret,
        core::v1::Service,
        core::v1::ServiceAccount,
        core::v1::Endpoints,
        core::v1::PersistentVolumeClaim,
        core::v1::ResourceQuota,
        batch::v1::Job,
        batch::v1::CronJob,
        coordination::v1::Lease,
        events::v1::Event,
        apps::v1::Deployment,
        apps::v1::StatefulSet,
        apps::v1::DaemonSet,
        apps::v1::ReplicaSet,
        policy::v1::PodDisruptionBudget,
        networking::v1::NetworkPolicy,
        autoscaling::v2::HorizontalPodAutoscaler,
        rbac::v1::Role,
        rbac::v1::RoleBinding,
        rbac::v1::ClusterRole,
        rbac::v1::ClusterRoleBinding,
        apiextensions::v1::CustomResourceDefinition,
    ];
    generator.subschema_for::<meta::DeleteOptions>();
    generator.subschema_for::<meta::Patch>();
    generator.subschema_for::<meta::Status>();
    generator.subschema_for::<meta::WatchEvent<()>>();
    generator.subschema_for::<meta::ListMeta>();
    let mut definitions = generator.take_definitions(false);

    upstream_forms(&mut definitions);
    for k in &kinds {
        if let Some(Value::Object(schema)) = definitions.get_mut(&k.name) {
            schema.insert("x-kubernetes-group-version-kind".into(), json!([gvk(k.group, k.version, k.kind)]));
        }
        definitions.insert(k.list_name.clone(), list_schema(k));
        let api_version =
            if k.group.is_empty() { k.version.to_string() } else { format!("{}/{}", k.group, k.version) };
        if let Some(patch_kind) = SchemaKind::for_kind(&api_version, k.kind) {
            annotate(&mut definitions, &k.name, &PatchMeta::Kind(patch_kind), 0);
        }
    }
    for schema in definitions.values_mut() {
        wrap_refs_with_siblings(schema);
    }
    BuiltinSchemas { definitions, kinds }
}

fn add<T: JsonSchema + k8s_openapi::Resource>(generator: &mut SchemaGenerator, kinds: &mut Vec<KindSchema>) {
    generator.subschema_for::<T>();
    let name = T::schema_name().into_owned();
    let list_name = format!("{name}List");
    kinds.push(KindSchema { group: T::GROUP, version: T::VERSION, kind: T::KIND, name, list_name });
}

pub(super) fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// `PodList` and the like: k8s-openapi has one generic `List<T>` with no schema.
fn list_schema(k: &KindSchema) -> Value {
    json!({
        "description": format!("{}List is a list of {} objects.", k.kind, k.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
            "items": {
                "description": format!("List of {} objects.", k.kind),
                "type": "array",
                "items": {"$ref": format!("{V3_REF_PREFIX}{}", k.name)},
            },
            "kind": {"description": KIND_DESCRIPTION, "type": "string"},
            "metadata": {
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "$ref": format!("{V3_REF_PREFIX}{LIST_META}"),
            },
        },
        "x-kubernetes-group-version-kind": [gvk(k.group, k.version, &format!("{}List", k.kind))],
    })
}

pub(super) const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
pub(super) const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// The hand-marshalled types as kube-apiserver describes them (k8s-openapi gives `Quantity` and
/// `IntOrString` no type, apiextensions' `JSON` a type it does not have, and the `…Or…` unions a
/// `oneOf` that OpenAPI v2 cannot carry).
fn upstream_forms(definitions: &mut Map<String, Value>) {
    let mut set = |name: &str, fields: Value| {
        if let Some(Value::Object(schema)) = definitions.get_mut(name) {
            let description = schema.get("description").cloned();
            schema.clear();
            if let Some(d) = description {
                schema.insert("description".into(), d);
            }
            if let Value::Object(fields) = fields {
                schema.extend(fields);
            }
        }
    };
    set("io.k8s.apimachinery.pkg.api.resource.Quantity", json!({"type": "string"}));
    set(
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
        json!({"type": "string", "format": "int-or-string"}),
    );
    for any in ["JSON", "JSONSchemaPropsOrArray", "JSONSchemaPropsOrBool", "JSONSchemaPropsOrStringArray"] {
        set(&format!("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.{any}"), json!({}));
    }
}

/// Where the patch table stands while walking a kind's schema.
enum PatchMeta {
    Kind(SchemaKind),
    Type(crate::patch::PatchSchema),
}

impl PatchMeta {
    fn schema(&self) -> crate::patch::PatchSchema {
        match self {
            PatchMeta::Kind(k) => k.schema(),
            PatchMeta::Type(s) => *s,
        }
    }
}

/// Adds the patch table's tags to definition `name` and, through `$ref`s, to the definitions of
/// the fields the table lists. A definition shared by several kinds (PodSpec) gets the same tags
/// from each.
fn annotate(definitions: &mut Map<String, Value>, name: &str, meta: &PatchMeta, depth: usize) {
    let schema = meta.schema();
    if !schema.is_listed() || depth > 16 {
        return;
    }
    let mut next: Vec<(String, crate::patch::PatchSchema)> = Vec::new();
    let Some(Value::Object(def)) = definitions.get_mut(name) else { return };
    let Some(Value::Object(props)) = def.get_mut("properties") else { return };
    for (field, prop) in props.iter_mut() {
        let Some(f) = schema.field(field) else { continue };
        let Value::Object(prop) = prop else { continue };
        if !f.strategy.is_empty() {
            prop.insert("x-kubernetes-patch-strategy".into(), json!(f.strategy));
        }
        if !f.merge_key.is_empty() {
            prop.insert("x-kubernetes-patch-merge-key".into(), json!(f.merge_key));
        }
        let is_list = prop.get("type").and_then(Value::as_str) == Some("array");
        if is_list {
            match f.ssa_list() {
                SsaList::Atomic => {
                    prop.insert("x-kubernetes-list-type".into(), json!("atomic"));
                }
                SsaList::Set => {
                    prop.insert("x-kubernetes-list-type".into(), json!("set"));
                }
                SsaList::Map(keys) => {
                    prop.insert("x-kubernetes-list-type".into(), json!("map"));
                    prop.insert("x-kubernetes-list-map-keys".into(), json!(keys.iter().collect::<Vec<_>>()));
                }
            }
        } else if f.ssa == crate::patch::Ssa::AtomicStruct {
            prop.insert("x-kubernetes-map-type".into(), json!("atomic"));
        }
        let target = if is_list { prop.get("items") } else { Some(&Value::Object(prop.clone())) };
        let target_ref = target
            .and_then(|t| t.get("$ref"))
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix(V3_REF_PREFIX));
        if let Some(r) = target_ref {
            next.push((r.to_string(), schema.lookup(field).0));
        }
    }
    for (target, sub) in next {
        annotate(definitions, &target, &PatchMeta::Type(sub), depth + 1);
    }
}

/// `{"$ref": R, "description": D}` → `{"allOf": [{"$ref": R}], "description": D}`: OpenAPI v3.0
/// ignores a `$ref`'s siblings, so kube-apiserver wraps it.
fn wrap_refs_with_siblings(schema: &mut Value) {
    walk_schemas_mut(schema, &mut |m| {
        if m.len() > 1
            && let Some(r) = m.remove("$ref")
        {
            m.insert("allOf".into(), json!([{"$ref": r}]));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    fn defs() -> BuiltinSchemas {
        generate()
    }

    #[test]
    fn every_builtin_kind_and_its_list_carry_their_gvk() {
        let schemas = defs();
        for rt in Registry::default().all() {
            let k = schemas
                .kind(&rt.group, &rt.version, &rt.kind)
                .unwrap_or_else(|| panic!("no schema for {}/{}", rt.api_version(), rt.kind));
            let gvk_of = |name: &str| schemas.definitions[name]["x-kubernetes-group-version-kind"].clone();
            assert_eq!(gvk_of(&k.name), json!([gvk(&rt.group, &rt.version, &rt.kind)]));
            assert_eq!(gvk_of(&k.list_name)[0]["kind"], format!("{}List", rt.kind));
        }
    }

    #[test]
    fn every_reference_resolves() {
        let schemas = defs();
        for schema in schemas.definitions.values() {
            let mut refs = Vec::new();
            collect_refs(schema, &mut refs);
            for r in refs {
                assert!(schemas.definitions.contains_key(&r), "dangling $ref {r}");
            }
        }
    }

    #[test]
    fn patch_table_tags_reach_shared_definitions() {
        let d = defs().definitions;
        let prop = |def: &str, field: &str| d[def]["properties"][field].clone();
        let containers = prop("io.k8s.api.core.v1.PodSpec", "containers");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        assert_eq!(
            prop("io.k8s.api.core.v1.PodSpec", "volumes")["x-kubernetes-patch-strategy"],
            "merge,retainKeys"
        );
        let ports = prop("io.k8s.api.core.v1.Container", "ports");
        assert_eq!(ports["x-kubernetes-patch-merge-key"], "containerPort");
        assert_eq!(ports["x-kubernetes-list-map-keys"], json!(["containerPort", "protocol"]));
        assert_eq!(prop("io.k8s.api.batch.v1.JobStatus", "conditions")["x-kubernetes-list-type"], "atomic");
        assert_eq!(prop("io.k8s.api.batch.v1.JobSpec", "selector")["x-kubernetes-map-type"], "atomic");
        assert_eq!(
            prop("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers")["x-kubernetes-list-type"],
            "set"
        );
        // A field the table does not list gets no tags.
        assert!(
            prop("io.k8s.api.core.v1.PodSpec", "tolerations").get("x-kubernetes-patch-strategy").is_none()
        );
    }

    #[test]
    fn references_with_siblings_are_wrapped_and_schema_props_fields_are_not() {
        let d = defs().definitions;
        let spec = &d["io.k8s.api.batch.v1.Job"]["properties"]["spec"];
        assert_eq!(spec["allOf"], json!([{"$ref": "#/components/schemas/io.k8s.api.batch.v1.JobSpec"}]));
        assert!(spec.get("$ref").is_none() && spec.get("description").is_some());
        let props =
            &d["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"]["properties"];
        assert_eq!(props["$ref"]["type"], "string");
        assert_eq!(props["allOf"]["type"], "array");
        assert_eq!(d["io.k8s.apimachinery.pkg.api.resource.Quantity"]["type"], "string");
        assert_eq!(d["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"], "int-or-string");
        assert!(d["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON"].get("type").is_none());
    }
}
