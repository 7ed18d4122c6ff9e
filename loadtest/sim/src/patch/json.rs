//! JSON patch (RFC 6902) with the behaviour of the apiserver's gopkg.in/evanphx/json-patch.v4.
//!
//! Operations run one at a time through the `json-patch` crate, except `test`, which follows
//! evanphx: a `test` of `null` passes when the last path segment is missing from an existing
//! object (kube-runtime's `finalizer()` sends `test /metadata/finalizers == null` when there are
//! none), and array indices may be negative. `add` at the document root is refused, as evanphx
//! does. Any failing operation is a 422 whose Status message is the generic one
//! (`errors.NewGenericServerResponse(422, …)` in apiserver handlers/patch.go); an undecodable body
//! is a 400 and more than 10000 operations a 413.

use json_patch::{PatchErrorKind, PatchOperation};
use serde_json::{Map, Value};

use super::error::PatchError;
use super::goval;

/// `maxJSONPatchOperations` in apiserver handlers/patch.go.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10000;

/// Applies an `application/json-patch+json` body to `doc`.
pub fn apply_json_patch(doc: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let body: Value = serde_json::from_slice(patch).map_err(|e| PatchError::BadRequest(e.to_string()))?;
    let ops = match body {
        // DecodePatch("null") is an empty patch.
        Value::Null => return Ok(doc.clone()),
        Value::Array(ops) => ops,
        other => {
            return Err(PatchError::BadRequest(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                goval::json_kind_name(&other)
            )));
        }
    };
    if let Some(bad) = ops.iter().find(|op| !matches!(op, Value::Object(_) | Value::Null)) {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            goval::json_kind_name(bad)
        )));
    }
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations { max: MAX_JSON_PATCH_OPERATIONS, got: ops.len() });
    }
    let mut out = doc.clone();
    for op in &ops {
        apply_operation(&mut out, op).map_err(PatchError::invalid)?;
    }
    Ok(out)
}

/// Applies one operation; the error is evanphx's text.
fn apply_operation(doc: &mut Value, op: &Value) -> Result<(), String> {
    let empty = Map::new();
    let obj = op.as_object().unwrap_or(&empty);
    let kind = obj.get("op").and_then(Value::as_str).unwrap_or("unknown");
    if !matches!(kind, "add" | "remove" | "replace" | "move" | "copy" | "test") {
        return Err(format!("Unexpected kind: {kind}"));
    }
    let Some(path) = obj.get("path").and_then(Value::as_str) else {
        return Err(format!(
            "{kind} operation failed to decode path: operation missing path field: missing value"
        ));
    };
    let value = obj.get("value").cloned().unwrap_or(Value::Null);
    match kind {
        "test" => test(doc, path, &value),
        "add" if path.is_empty() => {
            Err(format!("add operation does not apply: doc is missing path: {path:?}: missing value"))
        }
        _ => {
            let mut obj = obj.clone();
            if matches!(kind, "add" | "replace") {
                obj.insert("value".into(), value);
            }
            let op: PatchOperation = serde_json::from_value(Value::Object(obj))
                .map_err(|e| format!("{kind} operation is malformed: {e}"))?;
            json_patch::patch_unsafe(doc, std::slice::from_ref(&op))
                .map_err(|e| evanphx_message(kind, &op, &e.kind))
        }
    }
}

fn evanphx_message(kind: &str, op: &PatchOperation, err: &PatchErrorKind) -> String {
    let path = op.path().as_str();
    let from = match op {
        PatchOperation::Move(m) => m.from.as_str(),
        PatchOperation::Copy(c) => c.from.as_str(),
        _ => "",
    };
    match (kind, err) {
        ("add", _) => format!("add operation does not apply: doc is missing path: {path:?}: missing value"),
        ("remove", _) => {
            format!("remove operation does not apply: doc is missing path: {path:?}: missing value")
        }
        ("replace", _) => {
            format!("replace operation does not apply: doc is missing key: {path}: missing value")
        }
        (_, PatchErrorKind::InvalidFromPointer) => {
            format!("{kind} operation does not apply: doc is missing from path: {from}: missing value")
        }
        (_, PatchErrorKind::CannotMoveInsideItself) => {
            format!("{kind} operation does not apply: cannot move {from} into its own child {path}")
        }
        _ => {
            format!("{kind} operation does not apply: doc is missing destination path: {path}: missing value")
        }
    }
}

/// Splits an RFC 6901 pointer into unescaped tokens.
fn pointer_tokens(path: &str) -> Result<Vec<String>, String> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("test operation does not apply: is missing path: {path}: missing value"));
    };
    Ok(rest.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect())
}

/// evanphx partialArray index: an integer, negative counting from the end.
fn array_index(len: usize, token: &str) -> Option<usize> {
    let i: i64 = token.parse().ok()?;
    let i = if i < 0 { i.checked_add(i64::try_from(len).ok()?)? } else { i };
    usize::try_from(i).ok().filter(|i| *i < len)
}

fn child<'a>(v: &'a Value, token: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => m.get(token),
        Value::Array(items) => array_index(items.len(), token).and_then(|i| items.get(i)),
        _ => None,
    }
}

/// evanphx v4 `test`: a missing key (or a null value) equals a `null` test value.
fn test(doc: &Value, path: &str, expected: &Value) -> Result<(), String> {
    let failed = || format!("testing value {path} failed: test failed");
    if path.is_empty() {
        return if doc == expected { Ok(()) } else { Err(failed()) };
    }
    let tokens = pointer_tokens(path)?;
    let missing = || format!("test operation does not apply: is missing path: {path}: missing value");
    let Some((last, parents)) = tokens.split_last() else { return Err(missing()) };
    let mut container = doc;
    for t in parents {
        container = child(container, t).ok_or_else(missing)?;
    }
    let actual = match container {
        Value::Object(m) => m.get(last),
        Value::Array(items) => match array_index(items.len(), last) {
            Some(i) => items.get(i),
            None => {
                return Err(format!(
                    "error in test for path: '{path}': Unable to access invalid index: {last}"
                ));
            }
        },
        _ => return Err(missing()),
    };
    match actual {
        None | Some(Value::Null) if expected.is_null() => Ok(()),
        Some(v) if !v.is_null() && v == expected => Ok(()),
        _ => Err(failed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn apply(doc: Value, patch: Value) -> Result<Value, PatchError> {
        apply_json_patch(&doc, patch.to_string().as_bytes())
    }

    #[test]
    fn kube_runtime_finalizer_add_when_absent() {
        // kube-runtime finalizer.rs: no finalizers yet → test null, then add the list.
        let doc = json!({"metadata": {"name": "j", "uid": "u1"}});
        let patch = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["batchfleet.io/cleanup"]}
        ]);
        let out = apply(doc, patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["batchfleet.io/cleanup"]));
    }

    #[test]
    fn kube_runtime_finalizer_append_and_remove() {
        // With finalizers present: test the whole list, then add at /- ; removal tests the item.
        let doc = json!({"metadata": {"finalizers": ["other"]}});
        let add = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": ["other"]},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "batchfleet.io/cleanup"}
        ]);
        let out = apply(doc, add).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["other", "batchfleet.io/cleanup"]));
        let remove = json!([
            {"op": "test", "path": "/metadata/finalizers/1", "value": "batchfleet.io/cleanup"},
            {"op": "remove", "path": "/metadata/finalizers/1"}
        ]);
        let out = apply(out, remove).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["other"]));
    }

    #[test]
    fn failing_operations_are_422_with_the_generic_message() {
        let doc = json!({"metadata": {"finalizers": ["a"], "labels": {"x": "1"}}});
        let cases = [
            // The test-null quirk needs the parent to exist and the value to be absent or null.
            json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]),
            json!([{"op": "test", "path": "/metadata/annotations/x", "value": null}]),
            json!([{"op": "test", "path": "/metadata/labels/x", "value": "2"}]),
            json!([{"op": "test", "path": "/metadata/finalizers/5", "value": null}]),
            json!([{"op": "remove", "path": "/metadata/annotations"}]),
            json!([{"op": "replace", "path": "/spec", "value": {}}]),
            json!([{"op": "add", "path": "/spec/x", "value": 1}]),
            json!([{"op": "move", "from": "/nope", "path": "/x"}]),
            json!([{"op": "add", "path": "", "value": {}}]),
            json!([{"op": "frobnicate", "path": "/x"}]),
            json!([{"op": "add", "value": 1}]),
            json!([null]),
        ];
        for patch in cases {
            let err = apply(doc.clone(), patch.clone()).unwrap_err();
            assert_eq!(err.http_status(), 422, "{patch}: {err}");
            assert_eq!(err.reason(), "Invalid");
            assert_eq!(err.message(), "the server rejected our request due to an error in our request");
        }
        let err = apply(doc.clone(), json!([{"op": "test", "path": "/metadata/labels/x", "value": "2"}]));
        assert_eq!(err.unwrap_err().to_string(), "testing value /metadata/labels/x failed: test failed");
    }

    #[test]
    fn evanphx_quirks() {
        let doc = json!({"a": {"b": null}, "l": [1, 2, 3]});
        // test null passes for an explicit null as well; negative index counts from the end.
        let patch = json!([
            {"op": "test", "path": "/a/b", "value": null},
            {"op": "test", "path": "/l/-1", "value": 3},
            {"op": "test", "path": "", "value": {"a": {"b": null}, "l": [1, 2, 3]}},
            {"op": "replace", "path": "", "value": {"z": 1}}
        ]);
        assert_eq!(apply(doc, patch).unwrap(), json!({"z": 1}));
        // A missing "value" is null.
        assert_eq!(
            apply(json!({"a": 1}), json!([{"op": "replace", "path": "/a"}])).unwrap(),
            json!({"a": null})
        );
        // JSON null body: no operations.
        assert_eq!(apply_json_patch(&json!({"a": 1}), b"null").unwrap(), json!({"a": 1}));
    }

    #[test]
    fn rfc6902_operations() {
        let doc = json!({"foo": ["bar", "baz"], "o": {"k": "v"}});
        let patch = json!([
            {"op": "add", "path": "/foo/1", "value": "qux"},
            {"op": "remove", "path": "/foo/0"},
            {"op": "replace", "path": "/o/k", "value": "w"},
            {"op": "copy", "from": "/o", "path": "/p"},
            {"op": "move", "from": "/foo", "path": "/bar"},
            {"op": "add", "path": "/a~1b", "value": 1},
            {"op": "test", "path": "/a~1b", "value": 1}
        ]);
        let want = json!({"o": {"k": "w"}, "p": {"k": "w"}, "bar": ["qux", "baz"], "a/b": 1});
        assert_eq!(apply(doc, patch).unwrap(), want);
    }

    #[test]
    fn undecodable_bodies_are_400_and_oversized_413() {
        for body in [&b"{"[..], b"{\"op\":\"add\"}", b"[\"add\"]", b"7"] {
            let err = apply_json_patch(&json!({}), body).unwrap_err();
            assert_eq!(err.http_status(), 400, "{}", String::from_utf8_lossy(body));
        }
        let ops: Vec<Value> = (0..=MAX_JSON_PATCH_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/a", "value": 1}))
            .collect();
        let err = apply(json!({"a": 1}), Value::Array(ops)).unwrap_err();
        assert_eq!((err.http_status(), err.reason()), (413, "RequestEntityTooLarge"));
    }
}
