//! `meta.k8s.io` Tables as the apiserver returns them to `kubectl get` (apiserver
//! `pkg/endpoints/handlers/response.go` asTable, `pkg/printers/storage` with `Wide: true`), plus the
//! Accept-header negotiation that decides whether a Table was asked for.

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::printers;
use crate::resources::ResourceType;

/// The API group of Table and PartialObjectMetadata.
pub const META_GROUP: &str = "meta.k8s.io";

/// What a request's `Accept` header negotiated to (`negotiation.NegotiateOutputMediaType`), for
/// the JSON serializer, the only one the sim offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptTarget {
    /// The object as stored (`application/json`, `*/*`, or no header).
    Json,
    /// `as=Table;g=meta.k8s.io;v=v1|v1beta1`; `version` is `v1` or `v1beta1`.
    Table { version: &'static str },
    /// `as=PartialObjectMetadata` (single objects).
    PartialObjectMetadata { version: &'static str },
    /// `as=PartialObjectMetadataList` (lists).
    PartialObjectMetadataList { version: &'static str },
}

impl AcceptTarget {
    /// `meta.k8s.io/<version>` for the transformed kinds, `None` for plain JSON.
    pub fn meta_api_version(self) -> Option<String> {
        match self {
            Self::Json => None,
            Self::Table { version }
            | Self::PartialObjectMetadata { version }
            | Self::PartialObjectMetadataList { version } => Some(format!("{META_GROUP}/{version}")),
        }
    }
}

/// Negotiates an `Accept` header: the clauses in order of preference (q, then specificity, then
/// header order); the first JSON clause whose `as`/`g`/`v` conversion is one the apiserver allows
/// wins. `None` means nothing acceptable (answer 406 NotAcceptable). An empty header is plain JSON.
///
/// kubectl get sends `application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;
/// v=v1beta1;g=meta.k8s.io,application/json`, which negotiates to a v1 Table.
pub fn negotiate(accept: &str) -> Option<AcceptTarget> {
    if accept.trim().is_empty() {
        return Some(AcceptTarget::Json);
    }
    struct Clause<'a> {
        q: f64,
        specificity: u8,
        mime: String,
        params: Vec<(String, &'a str)>,
    }
    let mut clauses: Vec<Clause> = Vec::new();
    for raw in accept.split(',') {
        let mut parts = raw.split(';');
        let mime = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        if mime.is_empty() {
            continue;
        }
        let mut q = 1.0;
        let mut params = Vec::new();
        for p in parts {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().trim_matches('"'));
            if k == "q" {
                q = v.parse().unwrap_or(0.0);
            } else if !k.is_empty() {
                params.push((k, v));
            }
        }
        let specificity = match mime.as_str() {
            "*/*" => 0,
            m if m.ends_with("/*") => 1,
            _ => 2,
        };
        clauses.push(Clause { q, specificity, mime, params });
    }
    // Stable: equal preference keeps header order.
    clauses.sort_by(|a, b| b.q.total_cmp(&a.q).then(b.specificity.cmp(&a.specificity)));
    clauses.into_iter().filter(|c| c.q > 0.0).find_map(|c| {
        if !matches!(c.mime.as_str(), "application/json" | "application/*" | "*/*") {
            return None;
        }
        let param = |name: &str| c.params.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
        let (kind, group, version) = (param("as"), param("g"), param("v"));
        if kind.is_none() && group.is_none() && version.is_none() {
            return Some(AcceptTarget::Json);
        }
        if group != Some(META_GROUP) {
            return None;
        }
        let version = match version? {
            "v1" => "v1",
            "v1beta1" => "v1beta1",
            _ => return None,
        };
        match kind? {
            "Table" => Some(AcceptTarget::Table { version }),
            "PartialObjectMetadata" => Some(AcceptTarget::PartialObjectMetadata { version }),
            "PartialObjectMetadataList" => Some(AcceptTarget::PartialObjectMetadataList { version }),
            _ => None,
        }
    })
}

/// Whether `accept` negotiates to a Table (of either meta.k8s.io version).
pub fn wants_table(accept: &str) -> bool {
    matches!(negotiate(accept), Some(AcceptTarget::Table { .. }))
}

/// `?includeObject=` on a Table request: what each row's `object` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// `"object": null`.
    None,
    /// A PartialObjectMetadata (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

/// An `includeObject` value the apiserver rejects with 400 BadRequest; `Display` is the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Unable to convert to Table as requested: includeObject: Invalid value: \"{0}\": must be 'Metadata', 'Object', 'None', or empty"
)]
pub struct IncludeObjectError(pub String);

impl IncludeObject {
    /// Parses the query parameter (`None`, `Metadata`, `Object`; absent or empty means Metadata).
    pub fn from_query(value: Option<&str>) -> Result<Self, IncludeObjectError> {
        match value.unwrap_or("") {
            "" | "Metadata" => Ok(Self::Metadata),
            "None" => Ok(Self::None),
            "Object" => Ok(Self::Object),
            other => Err(IncludeObjectError(other.to_string())),
        }
    }
}

/// `meta.AsPartialObjectMetadata`: the object's whole `metadata` under meta.k8s.io/`version`.
pub fn partial_object_metadata(obj: &Value, version: &str) -> Value {
    let metadata = obj.get("metadata").filter(|m| m.is_object()).cloned().unwrap_or_else(|| json!({}));
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("{META_GROUP}/{version}"),
        "metadata": metadata,
    })
}

/// The Table's `columnDefinitions` for `rt`, wide (priority 1) columns included.
pub fn column_definitions(rt: &ResourceType) -> Vec<Value> {
    printers::columns(rt)
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.kind,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            })
        })
        .collect()
}

/// One Table row: every cell (the server always prints wide), the row conditions printPod sets,
/// and `object` per `include_object`.
pub fn table_row(rt: &ResourceType, obj: &Value, now: Timestamp, include_object: IncludeObject) -> Value {
    row_in(rt, obj, now, include_object, "v1")
}

fn row_in(rt: &ResourceType, obj: &Value, now: Timestamp, include: IncludeObject, version: &str) -> Value {
    let printed = printers::row(rt, obj, now);
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array(printed.cells));
    if let Some(conditions) = printed.conditions {
        row.insert("conditions".into(), conditions);
    }
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Metadata => partial_object_metadata(obj, version),
        IncludeObject::Object => obj.clone(),
    };
    row.insert("object".into(), object);
    Value::Object(row)
}

/// A whole Table (meta.k8s.io/v1). `list_metadata` is the ListMeta (`resourceVersion`,
/// `continue`, `remainingItemCount`; null reads as `{}`). Without column definitions — as in
/// every watch event after the first — `columnDefinitions` is null, as upstream encodes it.
pub fn table(
    rt: &ResourceType,
    objs: &[&Value],
    list_metadata: Value,
    now: Timestamp,
    include_object: IncludeObject,
    with_column_definitions: bool,
) -> Value {
    table_in(rt, objs, list_metadata, now, include_object, with_column_definitions, "v1")
}

/// [`table`] for a negotiated meta.k8s.io version (`v1` or `v1beta1`).
pub fn table_for_version(
    version: &str,
    rt: &ResourceType,
    objs: &[&Value],
    list_metadata: Value,
    now: Timestamp,
    include_object: IncludeObject,
    with_column_definitions: bool,
) -> Value {
    table_in(rt, objs, list_metadata, now, include_object, with_column_definitions, version)
}

fn table_in(
    rt: &ResourceType,
    objs: &[&Value],
    list_metadata: Value,
    now: Timestamp,
    include: IncludeObject,
    with_columns: bool,
    version: &str,
) -> Value {
    let metadata = if list_metadata.is_object() { list_metadata } else { json!({}) };
    let columns = if with_columns { Value::Array(column_definitions(rt)) } else { Value::Null };
    let rows: Vec<Value> = objs.iter().map(|o| row_in(rt, o, now, include, version)).collect();
    json!({
        "kind": "Table",
        "apiVersion": format!("{META_GROUP}/{version}"),
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    const KUBECTL_GET: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    #[test]
    fn negotiates_accept_headers() {
        let t1 = Some(AcceptTarget::Table { version: "v1" });
        let cases: &[(&str, Option<AcceptTarget>)] = &[
            (KUBECTL_GET, t1),
            (
                "application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json",
                Some(AcceptTarget::Table { version: "v1beta1" }),
            ),
            ("application/json;g=meta.k8s.io;v=v1;as=Table", t1),
            ("application/json", Some(AcceptTarget::Json)),
            ("", Some(AcceptTarget::Json)),
            ("*/*", Some(AcceptTarget::Json)),
            ("application/json, */*", Some(AcceptTarget::Json)),
            // kubectl's discovery Accept: the v2 clause is not a conversion the sim allows.
            (
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
                Some(AcceptTarget::Json),
            ),
            // q-values reorder clauses.
            ("application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io", t1),
            ("application/json;as=Table;v=v1;g=meta.k8s.io;q=0,application/json", Some(AcceptTarget::Json)),
            // Unservable: protobuf only, Table of an unknown version or group.
            ("application/vnd.kubernetes.protobuf", None),
            ("application/json;as=Table;v=v2;g=meta.k8s.io", None),
            ("application/json;as=Table;v=v1", None),
            (
                "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json",
                Some(AcceptTarget::Json),
            ),
            (
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                Some(AcceptTarget::PartialObjectMetadataList { version: "v1" }),
            ),
            (
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                Some(AcceptTarget::PartialObjectMetadata { version: "v1" }),
            ),
        ];
        for &(accept, want) in cases {
            assert_eq!(negotiate(accept), want, "{accept}");
            assert_eq!(wants_table(accept), matches!(want, Some(AcceptTarget::Table { .. })), "{accept}");
        }
    }

    #[test]
    fn parses_include_object() {
        let cases: &[(Option<&str>, Result<IncludeObject, IncludeObjectError>)] = &[
            (None, Ok(IncludeObject::Metadata)),
            (Some(""), Ok(IncludeObject::Metadata)),
            (Some("Metadata"), Ok(IncludeObject::Metadata)),
            (Some("None"), Ok(IncludeObject::None)),
            (Some("Object"), Ok(IncludeObject::Object)),
            (Some("object"), Err(IncludeObjectError("object".into()))),
        ];
        for (value, want) in cases {
            assert_eq!(&IncludeObject::from_query(*value), want, "{value:?}");
        }
        assert_eq!(
            IncludeObjectError("x".into()).to_string(),
            "Unable to convert to Table as requested: includeObject: Invalid value: \"x\": must be 'Metadata', 'Object', 'None', or empty"
        );
    }

    fn now() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn table_shape_matches_response_go() {
        let reg = Registry::default();
        let ns = reg.find("", "v1", "namespaces").unwrap();
        let obj = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "default", "uid": "u1", "resourceVersion": "7", "labels": {"a": "b"},
                         "creationTimestamp": "2026-03-01T11:55:00Z"},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}
        });
        let t = table(&ns, &[&obj], json!({"resourceVersion": "9"}), now(), IncludeObject::Metadata, true);
        assert_eq!(
            t,
            json!({
                "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "9"},
                "columnDefinitions": column_definitions(&ns),
                "rows": [{
                    "cells": ["default", "Active", "5m"],
                    "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": obj["metadata"].clone()}
                }]
            })
        );
        let keys: Vec<&str> = t.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["kind", "apiVersion", "metadata", "columnDefinitions", "rows"]);

        // Watch events after the first: no column definitions (encoded as null), object per option.
        let t = table(&ns, &[&obj], Value::Null, now(), IncludeObject::None, false);
        assert_eq!(t["columnDefinitions"], Value::Null);
        assert_eq!(t["metadata"], json!({}));
        assert_eq!(t["rows"][0]["object"], Value::Null);
        let t = table(&ns, &[&obj], Value::Null, now(), IncludeObject::Object, false);
        assert_eq!(t["rows"][0]["object"], obj);
        let t = table(
            &ns,
            &[],
            json!({"resourceVersion": "1", "continue": "c"}),
            now(),
            IncludeObject::Metadata,
            true,
        );
        assert_eq!(t["rows"], json!([]));
        assert_eq!(t["metadata"]["continue"], "c");

        let t = table_for_version("v1beta1", &ns, &[&obj], Value::Null, now(), IncludeObject::Metadata, true);
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(t["rows"][0]["object"]["apiVersion"], "meta.k8s.io/v1beta1");
    }

    #[test]
    fn column_definitions_carry_all_fields() {
        let reg = Registry::default();
        let pods = reg.find("", "v1", "pods").unwrap();
        let cols = column_definitions(&pods);
        let first = cols[0].as_object().unwrap();
        let keys: Vec<&str> = first.keys().map(String::as_str).collect();
        assert_eq!(keys, ["name", "type", "format", "description", "priority"]);
        assert_eq!(cols[0]["format"], "name");
        assert_eq!(cols[1]["format"], "");
        assert!(cols.iter().all(|c| c["description"].as_str().is_some_and(|d| !d.is_empty())));
    }

    #[test]
    fn rows_never_panic_on_malformed_objects() {
        let reg = Registry::default();
        let junk = [
            json!(null),
            json!(42),
            json!("x"),
            json!([]),
            json!({"metadata": 3, "spec": [], "status": "x"}),
        ];
        for rt in reg.all() {
            for obj in &junk {
                let row = table_row(rt, obj, now(), IncludeObject::Metadata);
                assert_eq!(
                    row["cells"].as_array().unwrap().len(),
                    column_definitions(rt).len(),
                    "{}",
                    rt.plural
                );
                assert_eq!(row["object"]["metadata"], json!({}));
            }
        }
    }
}
