//! `/openapi/v2` as gnostic's `openapi_v2.Document` protobuf, the only form kubectl (client-go
//! `discovery.OpenAPISchema`) asks for. Converted from the JSON document; vendor extensions and
//! defaults travel as YAML text, as gnostic carries them (`Any.yaml`).

use prost::Message;
use serde_json::{Map, Value};

#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod pb {
    include!(concat!(env!("OUT_DIR"), "/openapi.v2.rs"));
}

pub(super) fn encode(doc: &Value) -> Vec<u8> {
    document(doc).encode_to_vec()
}

fn document(doc: &Value) -> pb::Document {
    let paths = doc["paths"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, item)| pb::NamedPathItem { name: name.clone(), value: Some(path_item(item)) })
        .collect();
    pb::Document {
        swagger: str_at(doc, "swagger"),
        info: Some(pb::Info {
            title: str_at(&doc["info"], "title"),
            version: str_at(&doc["info"], "version"),
        }),
        paths: Some(pb::Paths { path: paths }),
        definitions: Some(pb::Definitions { additional_properties: named_schemas(doc.get("definitions")) }),
    }
}

fn str_at(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

fn any(v: &Value) -> pb::Any {
    pb::Any { yaml: serde_yaml::to_string(v).unwrap_or_default() }
}

fn vendor_extensions(m: &Map<String, Value>) -> Vec<pb::NamedAny> {
    m.iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| pb::NamedAny { name: k.clone(), value: Some(any(v)) })
        .collect()
}

fn named_schemas(v: Option<&Value>) -> Vec<pb::NamedSchema> {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, s)| pb::NamedSchema { name: name.clone(), value: Some(schema(s)) })
        .collect()
}

fn schema(v: &Value) -> pb::Schema {
    let mut s = pb::Schema::default();
    let Some(m) = v.as_object() else { return s };
    for (k, x) in m {
        match k.as_str() {
            "$ref" => s.xref = x.as_str().unwrap_or_default().to_string(),
            "format" => s.format = x.as_str().unwrap_or_default().to_string(),
            "title" => s.title = x.as_str().unwrap_or_default().to_string(),
            "description" => s.description = x.as_str().unwrap_or_default().to_string(),
            "default" => s.default = Some(any(x)),
            "required" => s.required = strings(Some(x)),
            "enum" => s.r#enum = x.as_array().into_iter().flatten().map(any).collect(),
            "additionalProperties" => {
                let item = match x {
                    Value::Bool(b) => pb::additional_properties_item::Oneof::Boolean(*b),
                    other => pb::additional_properties_item::Oneof::Schema(Box::new(schema(other))),
                };
                s.additional_properties = Some(Box::new(pb::AdditionalPropertiesItem { oneof: Some(item) }));
            }
            "type" => {
                let value = match x {
                    Value::String(t) => vec![t.clone()],
                    other => strings(Some(other)),
                };
                s.r#type = Some(pb::TypeItem { value });
            }
            "items" => {
                let items = match x {
                    Value::Array(a) => a.iter().map(schema).collect(),
                    one => vec![schema(one)],
                };
                s.items = Some(pb::ItemsItem { schema: items });
            }
            "allOf" => s.all_of = x.as_array().into_iter().flatten().map(schema).collect(),
            "properties" => {
                s.properties = Some(pb::Properties { additional_properties: named_schemas(Some(x)) })
            }
            _ => {}
        }
    }
    s.vendor_extension = vendor_extensions(m);
    s
}

fn path_item(item: &Value) -> pb::PathItem {
    let op = |name: &str| item.get(name).map(operation);
    pb::PathItem {
        get: op("get"),
        put: op("put"),
        post: op("post"),
        delete: op("delete"),
        patch: op("patch"),
        parameters: item["parameters"].as_array().into_iter().flatten().map(parameter).collect(),
    }
}

fn parameter(p: &Value) -> pb::ParametersItem {
    let required = p.get("required").and_then(Value::as_bool).unwrap_or(false);
    let (name, r#in, description) = (str_at(p, "name"), str_at(p, "in"), str_at(p, "description"));
    let unique_items = p.get("uniqueItems").and_then(Value::as_bool).unwrap_or(false);
    let r#type = str_at(p, "type");
    use pb::non_body_parameter::Oneof as NonBody;
    use pb::parameter::Oneof as Param;
    let param = match r#in.as_str() {
        "body" => Param::BodyParameter(pb::BodyParameter {
            description,
            name,
            r#in,
            required,
            schema: p.get("schema").map(schema),
        }),
        "path" => Param::NonBodyParameter(pb::NonBodyParameter {
            oneof: Some(NonBody::PathParameterSubSchema(pb::PathParameterSubSchema {
                required,
                r#in,
                description,
                name,
                r#type,
                unique_items,
            })),
        }),
        _ => Param::NonBodyParameter(pb::NonBodyParameter {
            oneof: Some(NonBody::QueryParameterSubSchema(pb::QueryParameterSubSchema {
                required,
                r#in,
                description,
                name,
                r#type,
                unique_items,
            })),
        }),
    };
    pb::ParametersItem {
        oneof: Some(pb::parameters_item::Oneof::Parameter(pb::Parameter { oneof: Some(param) })),
    }
}

fn operation(op: &Value) -> pb::Operation {
    let responses = op["responses"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(code, r)| pb::NamedResponseValue {
            name: code.clone(),
            value: Some(pb::ResponseValue {
                oneof: Some(pb::response_value::Oneof::Response(pb::Response {
                    description: str_at(r, "description"),
                    schema: r
                        .get("schema")
                        .map(|s| pb::SchemaItem { oneof: Some(pb::schema_item::Oneof::Schema(schema(s))) }),
                })),
            }),
        })
        .collect();
    pb::Operation {
        tags: strings(op.get("tags")),
        description: str_at(op, "description"),
        operation_id: str_at(op, "operationId"),
        produces: strings(op.get("produces")),
        consumes: strings(op.get("consumes")),
        parameters: op["parameters"].as_array().into_iter().flatten().map(parameter).collect(),
        responses: Some(pb::Responses { response_code: responses }),
        schemes: strings(op.get("schemes")),
        vendor_extension: op.as_object().map(vendor_extensions).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_back_with_references_extensions_and_parameters() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.37.0"},
            "paths": {"/apis/batch/v1/namespaces/{namespace}/jobs/{name}": {
                "parameters": [{"name": "namespace", "in": "path", "required": true, "type": "string"}],
                "patch": {
                    "operationId": "patchBatchV1NamespacedJob",
                    "parameters": [
                        {"in": "body", "name": "body", "required": true, "schema": {"$ref": "#/definitions/P"}},
                        {"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true},
                    ],
                    "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/J"}}},
                    "x-kubernetes-group-version-kind": {"group": "batch", "kind": "Job", "version": "v1"},
                },
            }},
            "definitions": {"J": {
                "type": "object",
                "properties": {"spec": {"$ref": "#/definitions/S", "description": "d"},
                               "list": {"type": "array", "items": {"type": "string"},
                                        "x-kubernetes-patch-strategy": "merge"}},
                "x-kubernetes-group-version-kind": [{"group": "batch", "kind": "Job", "version": "v1"}],
            }},
        });
        let bytes = encode(&doc);
        let back = pb::Document::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(back.swagger, "2.0");
        let defs = back.definitions.expect("definitions").additional_properties;
        let job = defs[0].value.as_ref().expect("schema");
        assert_eq!(job.r#type.as_ref().expect("type").value, ["object"]);
        let props = &job.properties.as_ref().expect("properties").additional_properties;
        let list = props.iter().find(|p| p.name == "list").and_then(|p| p.value.as_ref()).expect("list");
        assert_eq!(list.vendor_extension[0].name, "x-kubernetes-patch-strategy");
        assert_eq!(list.vendor_extension[0].value.as_ref().expect("value").yaml, "merge\n");
        let spec = props.iter().find(|p| p.name == "spec").and_then(|p| p.value.as_ref()).expect("spec");
        assert_eq!((spec.xref.as_str(), spec.description.as_str()), ("#/definitions/S", "d"));
        let gvk: Value =
            serde_yaml::from_str(&job.vendor_extension[0].value.as_ref().expect("gvk").yaml).expect("yaml");
        assert_eq!(gvk, json!([{"group": "batch", "kind": "Job", "version": "v1"}]));

        let path = &back.paths.expect("paths").path[0];
        let patch = path.value.as_ref().and_then(|p| p.patch.as_ref()).expect("patch op");
        assert_eq!(patch.operation_id, "patchBatchV1NamespacedJob");
        let names: Vec<String> = patch
            .parameters
            .iter()
            .filter_map(|p| match &p.oneof {
                Some(pb::parameters_item::Oneof::Parameter(pb::Parameter {
                    oneof:
                        Some(pb::parameter::Oneof::NonBodyParameter(pb::NonBodyParameter {
                            oneof: Some(pb::non_body_parameter::Oneof::QueryParameterSubSchema(q)),
                        })),
                })) => Some(q.name.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(names, ["fieldValidation"]);
    }
}
