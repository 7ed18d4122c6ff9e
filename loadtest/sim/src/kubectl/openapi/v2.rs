//! The Swagger 2.0 form of the built-in kinds' OpenAPI v3 document, as kube-apiserver serves
//! `/openapi/v2`: `#/definitions/` references written bare next to their descriptions (v2 has no
//! `allOf` wrapping), parameters typed inline, request bodies as `in: body` parameters.

use serde_json::{Map, Value, json};

use super::definitions::{V3_REF_PREFIX, walk_schemas_mut};

const V2_REF_PREFIX: &str = "#/definitions/";
const OPERATIONS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

pub(super) fn document(v3: &Value) -> Value {
    let definitions: Map<String, Value> = v3["components"]["schemas"]
        .as_object()
        .map(|m| m.iter().map(|(name, s)| (name.clone(), schema(s))).collect())
        .unwrap_or_default();
    let paths: Map<String, Value> = v3["paths"]
        .as_object()
        .map(|m| m.iter().map(|(path, item)| (path.clone(), path_item(item))).collect())
        .unwrap_or_default();
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0"},
        "paths": paths,
        "definitions": definitions,
    })
}

/// A v3 schema in v2 form: `{"allOf": [{"$ref": R}], …}` becomes `{"$ref": R, …}`, references
/// point into `definitions`.
pub(super) fn schema(v: &Value) -> Value {
    let mut out = v.clone();
    walk_schemas_mut(&mut out, &mut |m| {
        let single_ref = match m.get("allOf") {
            Some(Value::Array(parts)) if parts.len() == 1 => parts[0].get("$ref").cloned(),
            _ => None,
        };
        if let Some(r) = single_ref {
            m.remove("allOf");
            m.insert("$ref".into(), r);
        }
        if let Some(r) = m.get("$ref") {
            let rewritten = rewrite_ref(r);
            m.insert("$ref".into(), rewritten);
        }
    });
    out
}

fn rewrite_ref(r: &Value) -> Value {
    match r.as_str().and_then(|s| s.strip_prefix(V3_REF_PREFIX)) {
        Some(name) => json!(format!("{V2_REF_PREFIX}{name}")),
        None => r.clone(),
    }
}

fn path_item(item: &Value) -> Value {
    let mut out = Map::new();
    for op in OPERATIONS {
        if let Some(o) = item.get(op) {
            out.insert(op.into(), operation(o));
        }
    }
    if let Some(Value::Array(params)) = item.get("parameters") {
        out.insert("parameters".into(), Value::Array(params.iter().map(parameter).collect()));
    }
    Value::Object(out)
}

/// `{name, in, description, required, schema: {type, uniqueItems}}` → the type inline.
fn parameter(p: &Value) -> Value {
    let mut out = Map::new();
    for key in ["description", "in", "name", "required"] {
        if let Some(v) = p.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    if let Some(Value::Object(s)) = p.get("schema") {
        out.extend(s.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    Value::Object(out)
}

fn operation(op: &Value) -> Value {
    let mut out = Map::new();
    for key in ["tags", "description", "operationId"] {
        if let Some(v) = op.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    let body = op.get("requestBody");
    let consumes: Vec<Value> = match body.and_then(|b| b["content"].as_object()) {
        Some(content) if op.get("x-kubernetes-action") == Some(&json!("patch")) => {
            content.keys().map(|k| json!(k)).collect()
        }
        _ => vec![json!("*/*")],
    };
    out.insert("consumes".into(), Value::Array(consumes));
    out.insert(
        "produces".into(),
        json!(["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]),
    );
    out.insert("schemes".into(), json!(["https"]));
    let mut params: Vec<Value> = op
        .get("parameters")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().map(parameter).collect())
        .unwrap_or_default();
    if let Some(b) = body
        && let Some(s) =
            b["content"].as_object().and_then(|c| c.values().next()).and_then(|m| m.get("schema"))
    {
        let required = b.get("required").and_then(Value::as_bool).unwrap_or(false);
        params.insert(0, json!({"in": "body", "name": "body", "required": required, "schema": schema(s)}));
    }
    out.insert("parameters".into(), Value::Array(params));
    if let Some(Value::Object(responses)) = op.get("responses") {
        let v2: Map<String, Value> = responses
            .iter()
            .map(|(code, r)| {
                let mut resp = Map::new();
                resp.insert("description".into(), r.get("description").cloned().unwrap_or(json!("")));
                if let Some(s) = r.pointer("/content/application~1json/schema") {
                    resp.insert("schema".into(), schema(s));
                }
                (code.clone(), Value::Object(resp))
            })
            .collect();
        out.insert("responses".into(), Value::Object(v2));
    }
    for (k, v) in op.as_object().into_iter().flatten() {
        if k.starts_with("x-") {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_unwrap_into_definitions_and_bodies_become_parameters() {
        let v3 = json!({
            "paths": {"/api/v1/namespaces/{namespace}/pods/{name}": {
                "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
                "patch": {
                    "operationId": "patchCoreV1NamespacedPod",
                    "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
                    "requestBody": {"content": {"application/merge-patch+json": {"schema": {"$ref": "#/components/schemas/P"}}}, "required": true},
                    "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pod"}}}}},
                    "x-kubernetes-action": "patch",
                },
            }},
            "components": {"schemas": {
                "Pod": {"properties": {
                    "spec": {"allOf": [{"$ref": "#/components/schemas/PodSpec"}], "description": "d"},
                    "$ref": {"type": "string"},
                }},
            }},
        });
        let v2 = document(&v3);
        let spec = &v2["definitions"]["Pod"]["properties"]["spec"];
        assert_eq!(spec, &json!({"$ref": "#/definitions/PodSpec", "description": "d"}));
        assert_eq!(v2["definitions"]["Pod"]["properties"]["$ref"], json!({"type": "string"}));
        let item = &v2["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"];
        assert_eq!(
            item["parameters"][0],
            json!({"in": "path", "name": "name", "required": true, "type": "string"})
        );
        let patch = &item["patch"];
        assert_eq!(patch["consumes"], json!(["application/merge-patch+json"]));
        assert_eq!(patch["parameters"][0]["in"], "body");
        assert_eq!(patch["parameters"][0]["schema"]["$ref"], "#/definitions/P");
        assert_eq!(patch["parameters"][1]["name"], "fieldValidation");
        assert_eq!(patch["responses"]["200"]["schema"]["$ref"], "#/definitions/Pod");
        assert_eq!(patch["x-kubernetes-action"], "patch");
    }
}
