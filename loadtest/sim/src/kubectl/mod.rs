//! Pure renderers for what kubectl reads: legacy discovery, `/version`, OpenAPI v2 and v3, and
//! server-side `Table`s (`kubectl get`). Nothing here does I/O or reads the clock; the HTTP layer
//! passes `now` in and writes the returned JSON with `Content-Type: application/json`.
//!
//! Upstream references (kubernetes/kubernetes, staging paths abbreviated):
//! - printers: `pkg/printers/internalversion/printers.go`
//! - ages: `apimachinery/pkg/util/duration/duration.go`
//! - Table shape and `includeObject`: `apiserver/pkg/endpoints/handlers/response.go`
//! - Accept negotiation: `apiserver/pkg/endpoints/handlers/negotiation`
//! - OpenAPI checks kubectl makes: `cli-runtime/pkg/resource/query_param_verifier_v3.go`,
//!   `kubectl/pkg/cmd/apply/patcher.go`

mod discovery;
mod duration;
mod openapi;
mod printers;
mod reviews;
mod table;

pub use discovery::{api_group_list, api_resource_list, api_versions, version_info};
pub use duration::{human_duration, short_human_duration};
pub use openapi::{
    OPENAPI_V2_PROTOBUF_ACCEPT, OPENAPI_V2_PROTOBUF_CONTENT_TYPE, openapi_v2_json, openapi_v2_protobuf,
    openapi_v3_group_version, openapi_v3_root,
};
pub use reviews::{self_subject_access_review, self_subject_review, self_subject_rules_review};
pub use table::{
    AcceptTarget, IncludeObject, IncludeObjectError, META_GROUP, column_definitions, negotiate,
    partial_object_metadata, table, table_for_version, table_row, wants_table,
};

use serde_json::Value;

/// Read-only, panic-free access to a stored object: missing or mistyped fields read as Go zero
/// values, the way a typed decode followed by a printer would see them.
#[derive(Clone, Copy)]
pub(crate) struct Obj<'a>(pub(crate) &'a Value);

impl<'a> Obj<'a> {
    /// The value at `path`, if present and not null.
    pub(crate) fn at(self, path: &[&str]) -> Option<&'a Value> {
        let mut cur = self.0;
        for key in path {
            cur = cur.get(key)?;
        }
        if cur.is_null() { None } else { Some(cur) }
    }

    pub(crate) fn sub(self, path: &[&str]) -> Obj<'a> {
        static NULL: Value = Value::Null;
        Obj(self.at(path).unwrap_or(&NULL))
    }

    pub(crate) fn has(self, path: &[&str]) -> bool {
        self.at(path).is_some()
    }

    /// A string field, `""` when absent or not a string.
    pub(crate) fn str(self, path: &[&str]) -> &'a str {
        self.at(path).and_then(Value::as_str).unwrap_or("")
    }

    /// An integer field, 0 when absent; floats are truncated like a Go int conversion.
    pub(crate) fn int(self, path: &[&str]) -> i64 {
        match self.at(path) {
            Some(v) => v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)).unwrap_or(0),
            None => 0,
        }
    }

    pub(crate) fn opt_int(self, path: &[&str]) -> Option<i64> {
        self.at(path).and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
    }

    pub(crate) fn bool(self, path: &[&str]) -> bool {
        self.at(path).and_then(Value::as_bool).unwrap_or(false)
    }

    pub(crate) fn opt_bool(self, path: &[&str]) -> Option<bool> {
        self.at(path).and_then(Value::as_bool)
    }

    /// An array field, empty when absent or not an array.
    pub(crate) fn list(self, path: &[&str]) -> &'a [Value] {
        self.at(path).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Number of entries of an object (map) field, 0 when absent.
    pub(crate) fn map_len(self, path: &[&str]) -> usize {
        self.at(path).and_then(Value::as_object).map_or(0, |m| m.len())
    }

    /// An RFC 3339 timestamp field; `None` when absent, empty or unparsable (a zero `metav1.Time`).
    pub(crate) fn time(self, path: &[&str]) -> Option<jiff::Timestamp> {
        self.str(path).parse().ok()
    }

    pub(crate) fn name(self) -> &'a str {
        self.str(&["metadata", "name"])
    }
}
