//! PATCH, as kube-apiserver applies it: pure functions over `serde_json::Value`.
//!
//! - [`apply_json_patch`]: RFC 6902 with evanphx/json-patch v4's quirks (`json.rs`).
//! - [`apply_merge_patch`]: RFC 7386 as evanphx `MergePatch` (`merge.rs`).
//! - [`apply_strategic_merge_patch`]: apimachinery strategicpatch, driven by the patch tags of the
//!   built-in kinds (`strategic.rs`, `schema.rs`).
//! - [`apply_server_side`]: a light server-side apply (`apply.rs`).
//!
//! Errors carry the HTTP status, reason and message of the Status the apiserver answers with.

mod apply;
mod error;
mod fields_v1;
#[cfg(test)]
mod fuzz_tests;
mod goval;
mod json;
mod managed;
mod merge;
mod schema;
mod strategic;
#[cfg(test)]
mod strategic_tests;

use serde_json::{Map, Value};

pub use apply::{ApplyOptions, apply_server_side};
pub use error::{BUILTIN_PATCH_TYPES, CUSTOM_RESOURCE_PATCH_TYPES, GENERIC_INVALID_MESSAGE, PatchError};
pub use json::{MAX_JSON_PATCH_OPERATIONS, apply_json_patch};
pub use managed::{
    Identity, Part, manager_from_user_agent, put_back_live_managed_fields, track_update,
    track_update_moving_live,
};
pub use merge::{
    apply_merge_patch, apply_merge_patch_leaving_managed_fields, parse_merge_patch,
    parse_merge_patch_noting_duplicates,
};
pub use schema::SchemaKind;
/// The patch table as the OpenAPI documents publish it (`kubectl/openapi/definitions.rs`).
pub(crate) use schema::{Schema as PatchSchema, Ssa, SsaList};

/// The patch a PATCH request's Content-Type asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PatchType {
    /// `application/json-patch+json`
    Json,
    /// `application/merge-patch+json`
    Merge,
    /// `application/strategic-merge-patch+json`
    StrategicMerge,
    /// `application/apply-patch+yaml`
    Apply,
}

impl PatchType {
    /// Parses a Content-Type header, ignoring parameters such as `; charset=utf-8`. CBOR apply
    /// (`application/apply-patch+cbor`, feature-gated upstream) and anything else are `None`: the
    /// caller answers [`PatchError::unknown_patch_type`].
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let media = ct.split(';').next().unwrap_or("").trim();
        match media {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }

    /// The media type.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Decodes an `application/strategic-merge-patch+json` body (400 with the decoder's message
/// when it is not JSON).
pub fn parse_strategic_merge_patch(body: &[u8]) -> Result<Value, PatchError> {
    serde_json::from_slice(body).map_err(|e| PatchError::BadRequest(e.to_string()))
}

/// Applies a strategic merge patch to `doc`, an object of kind `kind`.
///
/// The merge is apimachinery's `StrategicMergeMapPatch`. The result is then cleaned the way the
/// apiserver's decode into the typed object cleans it: directive keys (`$patch`, `$retainKeys`,
/// `$setElementOrder/…`, `$deleteFromPrimitiveList/…`) that reach the result inside values taken
/// whole from the patch, and null-valued fields, are dropped.
///
/// A `null` patch changes nothing; a patch that is not an object is a 400.
pub fn apply_strategic_merge_patch(
    doc: &Value,
    patch: &Value,
    kind: &SchemaKind,
) -> Result<Value, PatchError> {
    let patch = match patch {
        Value::Object(p) => p.clone(),
        Value::Null => Map::new(),
        other => {
            return Err(PatchError::BadRequest(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                goval::json_kind_name(other)
            )));
        }
    };
    let original = match doc {
        Value::Object(d) => d.clone(),
        _ => Map::new(),
    };
    let merged = strategic::strategic_merge_map_patch(original, patch, kind.schema()).map_err(smp_error)?;
    let mut out = Value::Object(merged);
    drop_directives_and_nulls(&mut out);
    Ok(out)
}

/// How the apiserver classifies strategicpatch errors (handlers/patch.go
/// `interpretStrategicMergePatchError`).
fn smp_error(e: strategic::SmpError) -> PatchError {
    use strategic::SmpError::*;
    match e {
        BadPatchFormatForPrimitiveList
        | BadPatchFormatForRetainKeys
        | BadPatchFormatForSetElementOrderList => PatchError::BadRequest(e.text()),
        NoListOfLists => PatchError::invalid(e.text()),
        Other(text) => PatchError::Internal(text),
    }
}

/// Go's `fmt.Sprintf("%v", v)` of a decoded JSON value (`map[a:1 b:[x y]]`), as upstream error
/// texts print patches.
pub fn go_format(v: &Value) -> String {
    goval::fmt(v)
}

/// Drops `$`-prefixed keys and null-valued members from every object, as decoding into a Go
/// struct does (no field is named `$…`; a null leaves an omitempty field unset). No object key
/// of a valid built-in object starts with `$` (label, annotation and data keys cannot).
pub fn drop_directives_and_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, v| !k.starts_with('$') && !v.is_null());
            m.values_mut().for_each(drop_directives_and_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_directives_and_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types() {
        let cases = [
            ("application/json-patch+json", Some(PatchType::Json)),
            ("application/merge-patch+json; charset=utf-8", Some(PatchType::Merge)),
            ("application/strategic-merge-patch+json", Some(PatchType::StrategicMerge)),
            ("application/apply-patch+yaml", Some(PatchType::Apply)),
            ("application/apply-patch+cbor", None),
            ("application/json", None),
            ("", None),
        ];
        for (ct, want) in cases {
            assert_eq!(PatchType::from_content_type(ct), want, "{ct}");
            if let Some(t) = want {
                assert!(ct.starts_with(t.content_type()));
            }
        }
    }

    #[test]
    fn strategic_entry_point_errors_and_cleanup() {
        let job = SchemaKind::for_kind("batch/v1", "Job").unwrap();
        let doc = json!({"metadata": {"name": "j"}});
        let err = apply_strategic_merge_patch(&doc, &json!([1]), &job).unwrap_err();
        assert_eq!(err.http_status(), 400);
        assert_eq!(apply_strategic_merge_patch(&doc, &Value::Null, &job).unwrap(), doc);
        // A list of lists in a merging list is a 422.
        let p = json!({"metadata": {"finalizers": [["a"]]}});
        let doc2 = json!({"metadata": {"finalizers": []}});
        assert_eq!(apply_strategic_merge_patch(&doc2, &p, &job).unwrap_err().http_status(), 422);
        // A missing merge key is a plain error: 500 with an empty reason.
        let p = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
        let doc3 = json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}});
        let err = apply_strategic_merge_patch(&doc3, &p, &job).unwrap_err();
        assert_eq!((err.http_status(), err.reason()), (500, ""));
        assert_eq!(err.message(), "map: map[image:x] does not contain declared merge key: name");
        // Malformed directives are 400s.
        let p = json!({"metadata": {"$retainKeys": "name"}});
        assert_eq!(
            apply_strategic_merge_patch(&doc, &p, &job).unwrap_err().message(),
            "invalid patch format of retainKeys"
        );
        let p = json!({"metadata": {"$setElementOrderfinalizers": []}});
        assert_eq!(apply_strategic_merge_patch(&doc, &p, &job).unwrap_err().http_status(), 400);
        // Directives inside a container appended whole do not reach the stored object; a new
        // item goes before the live ones (it has no position in the live list).
        let p = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "b", "$setElementOrder/env": [{"name": "E"}], "env": [{"name": "E", "value": null}]}
        ]}}}});
        let out = apply_strategic_merge_patch(&doc3, &p, &job).unwrap();
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name": "b", "env": [{"name": "E"}]}, {"name": "a"}])
        );
    }

    #[test]
    fn smp_on_a_custom_resource_is_415() {
        assert!(SchemaKind::for_kind("example.com/v1", "Widget").is_none());
        let err = PatchError::strategic_merge_unsupported();
        assert_eq!((err.http_status(), err.reason()), (415, "UnsupportedMediaType"));
    }
}
