//! A stub OpenAPI v3 (`/openapi/v3`, `/openapi/v3/{api/v1 | apis/G/V}`) that is just enough for
//! kubectl 1.37:
//!
//! - `create`/`apply` default to `--validate=strict`. cli-runtime `query_param_verifier_v3.go`
//!   fetches the group version's document, takes the first `patch` operation (over all paths, in
//!   random order) whose `x-kubernetes-group-version-kind` is the object's GVK, and looks for a
//!   `fieldValidation` operation parameter. Found: kubectl sends `?fieldValidation=Strict` and
//!   skips client-side schema validation (which would need full schemas). So every patch operation
//!   of a kind carries the GVK and the parameter. `components` is not consulted there.
//! - Client-side apply (kubectl `cmd/apply/patcher.go`) builds its strategic merge patch from the
//!   OpenAPI v3 schemas only if that patch operation's requestBody lists
//!   `application/strategic-merge-patch+json`; it is left out, so kubectl falls back to OpenAPI v2
//!   (an error is tolerated there: answer `/openapi/v2` with 404) and then to its compiled-in
//!   types, and still sends a strategic merge patch for built-in kinds.
//! - `kubectl explain` finds a kind's schema in `components.schemas` by its
//!   `x-kubernetes-group-version-kind`; the stub schemas let it name the kind and its top-level
//!   fields, no more.

use serde_json::{Map, Value, json};

use crate::resources::{Registry, ResourceType};

/// `GET /openapi/v3`: one entry per served group version; the hash changes with the document.
pub fn openapi_v3_root(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, version) in reg.group_versions() {
        let Some(doc) = openapi_v3_group_version(reg, &group, &version) else { continue };
        let key = gv_path(&group, &version);
        let hash = fnv1a64(doc.to_string().as_bytes());
        paths
            .insert(key.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash:016X}")}));
    }
    json!({"paths": paths})
}

/// `GET /openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}` (any `hash` query is
/// ignored); `None` when the group version is not served (answer 404).
pub fn openapi_v3_group_version(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let types: Vec<&ResourceType> =
        reg.all().iter().map(|t| &**t).filter(|t| t.group == group && t.version == version).collect();
    if types.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert(
        PATCH_SCHEMA.into(),
        json!({"description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.",
               "type": "object"}),
    );
    for rt in types {
        add_paths(&mut paths, rt);
        schemas.insert(schema_name(rt), kind_schema(rt));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// `api/v1` or `apis/{group}/{version}`: the root's keys and the documents' URL suffix.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

const PATCH_SCHEMA: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

/// Upstream definition names: `io.k8s.api.batch.v1.Job`, `io.k8s.api.core.v1.Pod`, and for
/// custom resources the reversed group (`com.example.stable.v1.CronTab`).
fn schema_name(rt: &ResourceType) -> String {
    let (g, v, k) = (rt.group.as_str(), rt.version.as_str(), rt.kind.as_str());
    if !rt.builtin {
        let reversed: Vec<&str> = g.split('.').rev().collect();
        return format!("{}.{v}.{k}", reversed.join("."));
    }
    match g {
        "" => format!("io.k8s.api.core.{v}.{k}"),
        "apiextensions.k8s.io" => format!("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{v}.{k}"),
        _ => format!("io.k8s.api.{}.{v}.{k}", g.split('.').next().unwrap_or(g)),
    }
}

fn gvk(rt: &ResourceType) -> Value {
    json!({"group": rt.group, "kind": rt.kind, "version": rt.version})
}

fn kind_schema(rt: &ResourceType) -> Value {
    json!({
        "description": format!(
            "{} is served by the batchfleet sim, whose OpenAPI documents are stubs: only the top-level fields are described.",
            rt.kind
        ),
        "type": "object",
        "properties": {
            "apiVersion": {"description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources", "type": "string"},
            "kind": {"description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds", "type": "string"},
            "metadata": {"description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata", "type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-group-version-kind": [gvk(rt)],
    })
}

/// `batch` -> `Batch`, `rbac.authorization.k8s.io` -> `RbacAuthorization`, `""` -> `Core`.
fn group_camel(group: &str) -> String {
    if group.is_empty() {
        return "Core".into();
    }
    group
        .trim_end_matches(".k8s.io")
        .split(['.', '-'])
        .map(|s| {
            let mut c = s.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

fn query(name: &str, kind: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": kind, "uniqueItems": true},
    })
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "description": description, "required": true,
           "schema": {"type": "string", "uniqueItems": true}})
}

const DRY_RUN: &str = "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed";
const FIELD_MANAGER: &str = "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.";
const FIELD_VALIDATION: &str = "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.";

fn write_params(patch: bool) -> Vec<Value> {
    let mut params = vec![
        query("dryRun", "string", DRY_RUN),
        query("fieldManager", "string", FIELD_MANAGER),
        query("fieldValidation", "string", FIELD_VALIDATION),
    ];
    if patch {
        params.push(query(
            "force",
            "boolean",
            "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
        ));
    }
    params
}

fn list_params() -> Vec<Value> {
    [
        ("allowWatchBookmarks", "boolean"),
        ("continue", "string"),
        ("fieldSelector", "string"),
        ("labelSelector", "string"),
        ("limit", "integer"),
        ("resourceVersion", "string"),
        ("resourceVersionMatch", "string"),
        ("sendInitialEvents", "boolean"),
        ("timeoutSeconds", "integer"),
        ("watch", "boolean"),
    ]
    .iter()
    .map(|(name, kind)| query(name, kind, name))
    .collect()
}

fn delete_params() -> Vec<Value> {
    vec![
        query("dryRun", "string", DRY_RUN),
        query(
            "gracePeriodSeconds",
            "integer",
            "The duration in seconds before the object should be deleted.",
        ),
        query("orphanDependents", "boolean", "Deprecated: please use the PropagationPolicy."),
        query("propagationPolicy", "string", "Whether and how garbage collection will be performed."),
    ]
}

fn json_body(schema: Value) -> Value {
    json!({"content": {"application/json": {"schema": schema}}, "required": true})
}

struct Op<'a> {
    rt: &'a ResourceType,
    tag: String,
    schema_ref: Value,
}

impl Op<'_> {
    fn build(
        &self,
        action: &str,
        op_id: String,
        description: String,
        params: Vec<Value>,
        body: Option<Value>,
    ) -> Value {
        let mut op = Map::new();
        op.insert("tags".into(), json!([self.tag]));
        op.insert("description".into(), json!(description));
        op.insert("operationId".into(), json!(op_id));
        op.insert("parameters".into(), Value::Array(params));
        if let Some(body) = body {
            op.insert("requestBody".into(), body);
        }
        let ok_schema = match action {
            "list" | "deletecollection" | "delete" => json!({"type": "object"}),
            _ => self.schema_ref.clone(),
        };
        op.insert(
            "responses".into(),
            json!({"200": {"description": "OK", "content": {"application/json": {"schema": ok_schema}}},
                   "401": {"description": "Unauthorized"}}),
        );
        op.insert("x-kubernetes-action".into(), json!(action));
        op.insert("x-kubernetes-group-version-kind".into(), gvk(self.rt));
        Value::Object(op)
    }

    /// PATCH: the GVK, `fieldValidation`, and every patch content type but strategic merge.
    fn patch(&self, op_id: String, description: String) -> Value {
        let patch_schema = json!({"$ref": format!("#/components/schemas/{PATCH_SCHEMA}")});
        let content: Map<String, Value> =
            ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
                .iter()
                .map(|t| (t.to_string(), json!({"schema": patch_schema})))
                .collect();
        let body = json!({"content": content, "required": true});
        self.build("patch", op_id, description, write_params(true), Some(body))
    }
}

fn add_paths(paths: &mut Map<String, Value>, rt: &ResourceType) {
    let (g, v, kind, plural) = (rt.group.as_str(), rt.version.as_str(), rt.kind.as_str(), rt.plural.as_str());
    let prefix = format!("/{}", gv_path(g, v));
    let id = format!("{}{}", group_camel(g), {
        let mut c = v.chars();
        c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
    });
    let tag = {
        let camel = group_camel(g);
        let mut c = camel.chars();
        let lower = c.next().map(|f| f.to_ascii_lowercase().to_string() + c.as_str()).unwrap_or_default();
        format!("{lower}_{v}")
    };
    let op = Op { rt, tag, schema_ref: json!({"$ref": format!("#/components/schemas/{}", schema_name(rt))}) };
    let ns = if rt.namespaced { "Namespaced" } else { "" };
    let scope = if rt.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{plural}")
    } else {
        format!("{prefix}/{plural}")
    };
    let pretty = query("pretty", "string", "If 'true', then the output is pretty printed.");
    let mut scope_params = Vec::new();
    if rt.namespaced {
        scope_params
            .push(path_param("namespace", "object name and auth scope, such as for teams and projects"));
    }
    scope_params.push(pretty.clone());
    let mut item_params = vec![path_param("name", &format!("name of the {kind}"))];
    item_params.extend(scope_params.iter().cloned());

    // Collection.
    let mut collection = Map::new();
    collection.insert("parameters".into(), Value::Array(scope_params));
    collection.insert(
        "get".into(),
        op.build(
            "list",
            format!("list{id}{ns}{kind}"),
            format!("list or watch objects of kind {kind}"),
            list_params(),
            None,
        ),
    );
    collection.insert(
        "post".into(),
        op.build(
            "post",
            format!("create{id}{ns}{kind}"),
            format!("create a {kind}"),
            write_params(false),
            Some(json_body(op.schema_ref.clone())),
        ),
    );
    if !(g.is_empty() && plural == "namespaces") {
        let mut params = delete_params();
        params.extend(list_params());
        collection.insert(
            "delete".into(),
            op.build(
                "deletecollection",
                format!("deleteCollection{id}{ns}{kind}"),
                format!("delete collection of {kind}"),
                params,
                None,
            ),
        );
    }
    paths.insert(scope.clone(), Value::Object(collection));

    // Item.
    let mut item = Map::new();
    item.insert("parameters".into(), Value::Array(item_params.clone()));
    item.insert(
        "get".into(),
        op.build("get", format!("read{id}{ns}{kind}"), format!("read the specified {kind}"), vec![], None),
    );
    item.insert(
        "put".into(),
        op.build(
            "put",
            format!("replace{id}{ns}{kind}"),
            format!("replace the specified {kind}"),
            write_params(false),
            Some(json_body(op.schema_ref.clone())),
        ),
    );
    item.insert(
        "patch".into(),
        op.patch(format!("patch{id}{ns}{kind}"), format!("partially update the specified {kind}")),
    );
    item.insert(
        "delete".into(),
        op.build(
            "delete",
            format!("delete{id}{ns}{kind}"),
            format!("delete a {kind}"),
            delete_params(),
            None,
        ),
    );
    paths.insert(format!("{scope}/{{name}}"), Value::Object(item));

    // Status subresource.
    if rt.has_status {
        let mut status = Map::new();
        status.insert("parameters".into(), Value::Array(item_params));
        status.insert(
            "get".into(),
            op.build(
                "get",
                format!("read{id}{ns}{kind}Status"),
                format!("read status of the specified {kind}"),
                vec![],
                None,
            ),
        );
        status.insert(
            "put".into(),
            op.build(
                "put",
                format!("replace{id}{ns}{kind}Status"),
                format!("replace status of the specified {kind}"),
                write_params(false),
                Some(json_body(op.schema_ref.clone())),
            ),
        );
        status.insert(
            "patch".into(),
            op.patch(
                format!("patch{id}{ns}{kind}Status"),
                format!("partially update status of the specified {kind}"),
            ),
        );
        paths.insert(format!("{scope}/{{name}}/status"), Value::Object(status));
    }

    // Namespaced kinds are also listed across namespaces (GET only, as upstream).
    if rt.namespaced {
        let mut all = Map::new();
        all.insert("parameters".into(), Value::Array(vec![pretty]));
        all.insert(
            "get".into(),
            op.build(
                "list",
                format!("list{id}{kind}ForAllNamespaces"),
                format!("list or watch objects of kind {kind}"),
                list_params(),
                None,
            ),
        );
        paths.insert(format!("{prefix}/{plural}"), Value::Object(all));
    }
}

/// FNV-1a, 64 bit: a stable content hash for `serverRelativeURL` (upstream uses SHA-512; clients
/// only treat it as an opaque cache key).
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn every_kind_supports_field_validation_and_not_smp() {
        let reg = Registry::default();
        for rt in reg.all() {
            let doc = openapi_v3_group_version(&reg, &rt.group, &rt.version).unwrap();
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
                assert!(!content.contains_key("application/strategic-merge-patch+json"), "{}", rt.plural);
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
        let batch = openapi_v3_group_version(&reg, "batch", "v1").unwrap();
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

        let core = openapi_v3_group_version(&reg, "", "v1").unwrap();
        let cp = core["paths"].as_object().unwrap();
        assert_eq!(cp["/api/v1/nodes/{name}"]["patch"]["operationId"], "patchCoreV1Node");
        assert_eq!(
            cp["/api/v1/namespaces/{namespace}/pods/{name}/status"]["patch"]["operationId"],
            "patchCoreV1NamespacedPodStatus"
        );
        assert!(cp["/api/v1/namespaces"].get("delete").is_none());
        assert!(core["components"]["schemas"].get("io.k8s.api.core.v1.Pod").is_some());

        let rbac = openapi_v3_group_version(&reg, "rbac.authorization.k8s.io", "v1").unwrap();
        assert_eq!(
            rbac["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"]["patch"]["operationId"],
            "patchRbacAuthorizationV1ClusterRole"
        );
        assert!(openapi_v3_group_version(&reg, "batch", "v9").is_none());
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
        let doc = openapi_v3_group_version(&reg2, "stable.example.com", "v1").unwrap();
        assert!(doc["components"]["schemas"].get("com.example.stable.v1.CronTab").is_some());
        assert_eq!(
            doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]["patch"]["operationId"],
            "patchStableExampleComV1NamespacedCronTab"
        );
    }
}
