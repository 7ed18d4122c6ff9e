//! The paths of one group version's OpenAPI v3 document, laid out as kube-apiserver lays them
//! out (operation ids, tags, parameters), for the checks kubectl makes on them:
//!
//! - `create`/`apply` default to `--validate=strict`. cli-runtime `query_param_verifier_v3.go`
//!   takes the first `patch` operation (over all paths, in random order) whose
//!   `x-kubernetes-group-version-kind` is the object's GVK and looks for a `fieldValidation`
//!   parameter. Found: kubectl sends `?fieldValidation=Strict` and skips client-side validation.
//!   So every patch operation of a kind carries the GVK and the parameter.
//! - Client-side apply (kubectl `cmd/apply/patcher.go`) builds its strategic merge patch from the
//!   OpenAPI v3 schemas when the patch operation's requestBody lists
//!   `application/strategic-merge-patch+json`: listed for the kinds the sim merges strategically,
//!   as upstream lists it for built-in kinds (never for custom resources).

use serde_json::{Map, Value, json};

use super::definitions::{DELETE_OPTIONS, PATCH, STATUS};
use super::{gv_path, gvk};
use crate::patch::SchemaKind;
use crate::resources::ResourceType;

/// `$ref` to a schema of the same document.
pub(super) fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("{}{name}", super::definitions::V3_REF_PREFIX)})
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

/// DELETE's optional `DeleteOptions` body.
fn delete_body() -> Value {
    json!({"content": {"application/json": {"schema": schema_ref(DELETE_OPTIONS)}}})
}

fn json_body(schema: Value) -> Value {
    json!({"content": {"application/json": {"schema": schema}}, "required": true})
}

struct Op<'a> {
    rt: &'a ResourceType,
    tag: String,
    /// The kind's schema and its list's.
    schema_ref: Value,
    list_ref: Value,
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
            "list" => self.list_ref.clone(),
            "deletecollection" | "delete" => schema_ref(STATUS),
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

    /// PATCH: the GVK, `fieldValidation`, and the patch content types the sim accepts for the kind.
    fn patch(&self, op_id: String, description: String) -> Value {
        let patch_schema = schema_ref(PATCH);
        let strategic = SchemaKind::for_kind(&self.rt.api_version(), &self.rt.kind).is_some();
        let content: Map<String, Value> = [
            "application/apply-patch+yaml",
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ]
        .iter()
        .filter(|t| strategic || !t.starts_with("application/strategic"))
        .map(|t| (t.to_string(), json!({"schema": patch_schema})))
        .collect();
        let body = json!({"content": content, "required": true});
        self.build("patch", op_id, description, write_params(true), Some(body))
    }
}

/// Adds `rt`'s paths; `schema` and `list_schema` name its schema and its list's.
pub(super) fn add_paths(paths: &mut Map<String, Value>, rt: &ResourceType, schema: &str, list_schema: &str) {
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
    let op = Op { rt, tag, schema_ref: schema_ref(schema), list_ref: schema_ref(list_schema) };
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
                Some(delete_body()),
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
            Some(delete_body()),
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
