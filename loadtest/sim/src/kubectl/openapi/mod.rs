//! The OpenAPI documents kube-apiserver serves, for kubectl 1.37 and other clients:
//!
//! - `/openapi/v3` lists one document per group version, `/openapi/v3/{api/v1 | apis/G/V}` is
//!   that document: the group version's paths (`paths.rs`) and the schemas they reach
//!   (`definitions.rs`). `kubectl explain` reads the schemas to any depth; `create`/`apply` read
//!   the patch operations to decide on server-side field validation.
//! - `/openapi/v2` is every built-in kind in one Swagger 2.0 document (`v2.rs`), which kubectl
//!   only fetches as protobuf (`gnostic.rs`): client-side validation of a `kind: List` (whose
//!   items kubectl checks against these schemas) and client-side apply's strategic merge patches
//!   need it, and a 404 there fails both.
//!
//! The built-in documents are built once per process. Custom resources get a document per group
//! version built on request, with a stub schema (kind and top-level fields), and no place in v2
//! (kubectl then skips their client-side validation, as it does for kinds v2 does not list).

mod definitions;
mod gnostic;
mod paths;
mod v2;

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::resources::{Registry, ResourceType};
use definitions::{
    API_VERSION_DESCRIPTION, BuiltinSchemas, DELETE_OPTIONS, KIND_DESCRIPTION, PATCH, STATUS, WATCH_EVENT,
};

/// What client-go asks `/openapi/v2` for: the gnostic protobuf form.
pub const OPENAPI_V2_PROTOBUF_ACCEPT: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// What kube-openapi answers it with: the same with `.` for `@`, which Go's `mime` parses
/// (client-go refuses a response whose Content-Type it cannot parse).
pub const OPENAPI_V2_PROTOBUF_CONTENT_TYPE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// A document serialized once, with its content hash.
struct Cached {
    body: Bytes,
    hash: String,
}

impl Cached {
    fn new(doc: &Value) -> Cached {
        let body = Bytes::from(serde_json::to_vec(doc).unwrap_or_default());
        let hash = format!("{:016X}", fnv1a64(&body));
        Cached { body, hash }
    }
}

struct Builtin {
    schemas: BuiltinSchemas,
    /// The v3 document of each built-in group version, with the number of kinds it serves.
    v3: HashMap<(String, String), (usize, Cached)>,
    v2_json: Bytes,
    v2_protobuf: Bytes,
}

fn builtin() -> &'static Builtin {
    static BUILTIN: OnceLock<Builtin> = OnceLock::new();
    BUILTIN.get_or_init(|| {
        let schemas = definitions::generate();
        let reg = Registry::default();
        let mut v3 = HashMap::new();
        for (group, version) in reg.group_versions() {
            let types = types_of(&reg, &group, &version);
            let doc = build_v3(&types, &schemas);
            v3.insert((group, version), (types.len(), Cached::new(&doc)));
        }
        let all: Vec<&ResourceType> = reg.all().iter().map(|t| &**t).collect();
        let v2 = v2::document(&build_v3(&all, &schemas));
        let v2_json = Bytes::from(serde_json::to_vec(&v2).unwrap_or_default());
        let v2_protobuf = Bytes::from(gnostic::encode(&v2));
        Builtin { schemas, v3, v2_json, v2_protobuf }
    })
}

fn types_of<'a>(reg: &'a Registry, group: &str, version: &str) -> Vec<&'a ResourceType> {
    reg.all().iter().map(|t| &**t).filter(|t| t.group == group && t.version == version).collect()
}

/// `GET /openapi/v2` as JSON (`Accept: application/json`).
pub fn openapi_v2_json() -> Bytes {
    builtin().v2_json.clone()
}

/// `GET /openapi/v2` as gnostic protobuf ([`OPENAPI_V2_PROTOBUF_ACCEPT`]), the form kubectl asks for.
pub fn openapi_v2_protobuf() -> Bytes {
    builtin().v2_protobuf.clone()
}

/// `GET /openapi/v3`: one entry per served group version; the hash changes with the document.
pub fn openapi_v3_root(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, version) in reg.group_versions() {
        let Some(doc) = group_version(reg, &group, &version) else { continue };
        let key = gv_path(&group, &version);
        let url = format!("/openapi/v3/{key}?hash={}", doc.hash);
        paths.insert(key, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// `GET /openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}` (any `hash` query is
/// ignored), serialized; `None` when the group version is not served (answer 404).
pub fn openapi_v3_group_version(reg: &Registry, group: &str, version: &str) -> Option<Bytes> {
    group_version(reg, group, version).map(|c| c.body)
}

fn group_version(reg: &Registry, group: &str, version: &str) -> Option<Cached> {
    let types = types_of(reg, group, version);
    if types.is_empty() {
        return None;
    }
    let b = builtin();
    if types.iter().all(|t| t.builtin)
        && let Some((n, cached)) = b.v3.get(&(group.to_string(), version.to_string()))
        && *n == types.len()
    {
        return Some(Cached { body: cached.body.clone(), hash: cached.hash.clone() });
    }
    Some(Cached::new(&build_v3(&types, &b.schemas)))
}

/// The v3 document of `types` (one group version, or every built-in kind for v2): their paths
/// and every schema those reach.
fn build_v3(types: &[&ResourceType], schemas: &BuiltinSchemas) -> Value {
    let mut paths = Map::new();
    let mut roots: Vec<String> = vec![DELETE_OPTIONS.into(), PATCH.into(), STATUS.into(), WATCH_EVENT.into()];
    let mut custom = Map::new();
    for rt in types {
        let known = if rt.builtin { schemas.kind(&rt.group, &rt.version, &rt.kind) } else { None };
        match known {
            Some(k) => {
                paths::add_paths(&mut paths, rt, &k.name, &k.list_name);
                roots.push(k.name.clone());
                roots.push(k.list_name.clone());
            }
            None => {
                let name = schema_name(rt);
                let list_name = format!("{name}List");
                paths::add_paths(&mut paths, rt, &name, &list_name);
                custom.insert(list_name, stub_list_schema(rt, &name));
                custom.insert(name, kind_schema(rt));
            }
        }
    }
    if !custom.is_empty() {
        roots.push("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta".into());
    }
    let mut components = schemas.closure(roots.iter().map(String::as_str));
    components.extend(custom);
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0"},
        "paths": paths,
        "components": {"schemas": components},
    })
}

/// `api/v1` or `apis/{group}/{version}`: the root's keys and the documents' URL suffix.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// Upstream definition names for custom resources: the reversed group
/// (`com.example.stable.v1.CronTab`).
fn schema_name(rt: &ResourceType) -> String {
    let reversed: Vec<&str> = rt.group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), rt.version, rt.kind)
}

fn gvk(rt: &ResourceType) -> Value {
    definitions::gvk(&rt.group, &rt.version, &rt.kind)
}

/// A custom resource's schema: its kind and top-level fields, anything else preserved.
fn kind_schema(rt: &ResourceType) -> Value {
    json!({
        "description": format!(
            "{} is a custom resource; the batchfleet sim describes only its top-level fields.",
            rt.kind
        ),
        "type": "object",
        "properties": {
            "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
            "kind": {"description": KIND_DESCRIPTION, "type": "string"},
            "metadata": {"description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata", "type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-group-version-kind": [gvk(rt)],
    })
}

fn stub_list_schema(rt: &ResourceType, item: &str) -> Value {
    json!({
        "description": format!("{}List is a list of {}", rt.kind, rt.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
            "items": {"type": "array", "items": paths::schema_ref(item)},
            "kind": {"description": KIND_DESCRIPTION, "type": "string"},
            "metadata": {"allOf": [paths::schema_ref("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta")]},
        },
        "x-kubernetes-group-version-kind": [definitions::gvk(&rt.group, &rt.version, &format!("{}List", rt.kind))],
    })
}

/// FNV-1a, 64 bit: a stable content hash for `serverRelativeURL` (upstream uses SHA-512; clients
/// only treat it as an opaque cache key).
use batchfleet_shards::fnv1a64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::SchemaKind;

    fn v3_doc(reg: &Registry, group: &str, version: &str) -> Option<Value> {
        openapi_v3_group_version(reg, group, version).map(|b| serde_json::from_slice(&b).expect("JSON"))
    }

    /// What query_param_verifier_v3.go supportsQueryParamV3 computes, for every patch op
    /// (it stops at the first one matching the GVK, in random order, so all must agree).
    fn patch_ops_for<'a>(doc: &'a Value, group: &str, version: &str, kind: &str) -> Vec<&'a Value> {
        let want = json!({"group": group, "kind": kind, "version": version});
        doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(|p| p.get("patch"))
            .filter(|op| op["x-kubernetes-group-version-kind"] == want)
            .collect()
    }

    #[test]
    fn every_kind_supports_field_validation_and_smp_where_the_sim_merges() {
        let reg = Registry::default();
        for rt in reg.all() {
            let doc = v3_doc(&reg, &rt.group, &rt.version).unwrap();
            let ops = patch_ops_for(&doc, &rt.group, &rt.version, &rt.kind);
            let expected = if rt.has_status { 2 } else { 1 };
            assert_eq!(ops.len(), expected, "{}", rt.plural);
            for op in ops {
                let params: Vec<&str> = op["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["name"].as_str().unwrap())
                    .collect();
                assert!(params.contains(&"fieldValidation"), "{}", rt.plural);
                let content = op["requestBody"]["content"].as_object().unwrap();
                let strategic = SchemaKind::for_kind(&rt.api_version(), &rt.kind).is_some();
                assert_eq!(
                    content.contains_key("application/strategic-merge-patch+json"),
                    strategic,
                    "{}",
                    rt.plural
                );
                assert!(content.contains_key("application/merge-patch+json"));
            }
            // kubectl explain: one component schema carries the GVK.
            let want = json!([{"group": rt.group, "kind": rt.kind, "version": rt.version}]);
            let schemas = doc["components"]["schemas"].as_object().unwrap();
            assert_eq!(
                schemas.values().filter(|s| s["x-kubernetes-group-version-kind"] == want).count(),
                1,
                "{}",
                rt.plural
            );
            // Every $ref resolves.
            let text = doc.to_string();
            for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
                let name = &part[..part.find('"').unwrap()];
                assert!(schemas.contains_key(name), "dangling $ref {name}");
            }
        }
    }

    #[test]
    fn paths_follow_upstream_layout() {
        let reg = Registry::default();
        let batch = v3_doc(&reg, "batch", "v1").unwrap();
        let paths = batch["paths"].as_object().unwrap();
        for p in [
            "/apis/batch/v1/namespaces/{namespace}/jobs",
            "/apis/batch/v1/namespaces/{namespace}/jobs/{name}",
            "/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status",
            "/apis/batch/v1/jobs",
        ] {
            assert!(paths.contains_key(p), "{p}");
        }
        assert!(paths["/apis/batch/v1/jobs"].get("patch").is_none());
        let patch = &paths["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"];
        assert_eq!(patch["operationId"], "patchBatchV1NamespacedJob");
        assert_eq!(patch["x-kubernetes-action"], "patch");
        assert!(batch["components"]["schemas"].get("io.k8s.api.batch.v1.Job").is_some());

        let core = v3_doc(&reg, "", "v1").unwrap();
        let cp = core["paths"].as_object().unwrap();
        assert_eq!(cp["/api/v1/nodes/{name}"]["patch"]["operationId"], "patchCoreV1Node");
        assert_eq!(
            cp["/api/v1/namespaces/{namespace}/pods/{name}/status"]["patch"]["operationId"],
            "patchCoreV1NamespacedPodStatus"
        );
        assert!(cp["/api/v1/namespaces"].get("delete").is_none());
        assert!(core["components"]["schemas"].get("io.k8s.api.core.v1.Pod").is_some());

        let rbac = v3_doc(&reg, "rbac.authorization.k8s.io", "v1").unwrap();
        assert_eq!(
            rbac["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"]["patch"]["operationId"],
            "patchRbacAuthorizationV1ClusterRole"
        );
        assert!(v3_doc(&reg, "batch", "v9").is_none());
    }

    #[test]
    fn root_lists_every_group_version_with_a_content_hash() {
        let reg = Registry::default();
        let root = openapi_v3_root(&reg);
        let paths = root["paths"].as_object().unwrap();
        assert_eq!(paths.len(), reg.group_versions().len());
        let url = paths["apis/batch/v1"]["serverRelativeURL"].as_str().unwrap();
        assert!(url.starts_with("/openapi/v3/apis/batch/v1?hash="), "{url}");
        assert!(
            paths["api/v1"]["serverRelativeURL"].as_str().unwrap().starts_with("/openapi/v3/api/v1?hash=")
        );
        assert_eq!(openapi_v3_root(&reg), root, "deterministic");

        // A CRD gets a document (so strict validation works for it too) and changes no other hash.
        let crd = ResourceType {
            group: "stable.example.com".into(),
            version: "v1".into(),
            plural: "crontabs".into(),
            singular: "crontab".into(),
            kind: "CronTab".into(),
            namespaced: true,
            short_names: vec!["ct".into()],
            categories: vec![],
            has_status: true,
            builtin: false,
            field_selectors: &[],
        };
        let reg2 = reg.with(vec![crd]);
        let root2 = openapi_v3_root(&reg2);
        assert_eq!(root2["paths"]["apis/batch/v1"], root["paths"]["apis/batch/v1"]);
        assert!(root2["paths"].get("apis/stable.example.com/v1").is_some());
        let doc = v3_doc(&reg2, "stable.example.com", "v1").unwrap();
        assert!(doc["components"]["schemas"].get("com.example.stable.v1.CronTab").is_some());
        assert_eq!(
            doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]["patch"]["operationId"],
            "patchStableExampleComV1NamespacedCronTab"
        );
    }
}
