//! JSON merge patch (RFC 7386) as evanphx/json-patch v4 `MergePatch` applies it for the
//! apiserver: null deletes a key, objects merge recursively, anything else replaces; values that
//! land in the document have their null members pruned (inside arrays too).

use serde_json::{Map, Value};

use super::error::PatchError;

/// evanphx `ErrBadJSONPatch`, answered with a 400.
const BAD_JSON_PATCH: &str = "Invalid JSON Patch";

/// Decodes an `application/merge-patch+json` body. Invalid JSON, `null` and scalars are the
/// apiserver's 400 "Invalid JSON Patch"; arrays and objects are accepted.
pub fn parse_merge_patch(body: &[u8]) -> Result<Value, PatchError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(v @ (Value::Object(_) | Value::Array(_))) => Ok(v),
        _ => Err(PatchError::BadRequest(BAD_JSON_PATCH.into())),
    }
}

/// [`parse_merge_patch`] that also tells whether the body repeats a key: the one decode a merge
/// patch needs when its duplicate keys are looked for (`fieldValidation` other than Ignore).
pub fn parse_merge_patch_noting_duplicates(body: &[u8]) -> Result<(Value, bool), PatchError> {
    match crate::fields::json_keys::parse_noting_duplicates(body) {
        Ok((v @ (Value::Object(_) | Value::Array(_)), duplicate)) => Ok((v, duplicate)),
        _ => Err(PatchError::BadRequest(BAD_JSON_PATCH.into())),
    }
}

/// Applies a JSON merge patch. A non-object patch replaces the document (an array patch then
/// fails the caller's decode into an object, as it does upstream).
pub fn apply_merge_patch(doc: &Value, patch: &Value) -> Value {
    match (doc, patch) {
        (Value::Object(d), Value::Object(p)) => {
            let mut out = d.clone();
            merge_docs(&mut out, p);
            Value::Object(out)
        }
        (_, p) => pruned(p),
    }
}

/// [`apply_merge_patch`] of a `patch` that does not name `metadata.managedFields`, except that
/// the result holds `null` in their place: the update moves the live ones over from `live`
/// (`track_update_moving_live`) instead of the merge copying them, a third of a pod's bytes.
/// Returns whether it left them out (`live` had them).
pub fn apply_merge_patch_leaving_managed_fields(live: &mut Value, patch: &Value) -> (Value, bool) {
    let slot =
        |v: &mut Value| v.get_mut("metadata").and_then(|m| m.get_mut("managedFields")).map(std::mem::take);
    let Some(managed) = slot(live) else { return (apply_merge_patch(live, patch), false) };
    let patched = apply_merge_patch(live, patch);
    if let Some(place) = live.get_mut("metadata").and_then(|m| m.get_mut("managedFields")) {
        *place = managed;
    }
    (patched, true)
}

fn merge_docs(doc: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (k, v) in patch {
        if v.is_null() {
            doc.shift_remove(k);
            continue;
        }
        match doc.get_mut(k) {
            Some(Value::Object(cur)) => match v {
                Value::Object(p) => merge_docs(cur, p),
                // merge(): the current node is a document but the patch is not: taken as is.
                other => {
                    doc.insert(k.clone(), other.clone());
                }
            },
            // Absent, null or not an object: the patch value, pruned of nulls.
            _ => {
                doc.insert(k.clone(), pruned(v));
            }
        }
    }
}

fn pruned(v: &Value) -> Value {
    let mut v = v.clone();
    prune_nulls(&mut v);
    v
}

/// evanphx `pruneNulls`: drop null members of objects, recursing through objects and arrays
/// (null array items stay).
fn prune_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(prune_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(prune_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 7386 appendix A, plus the evanphx pruning cases.
    #[test]
    fn rfc7386_appendix_a_and_evanphx_pruning() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (json!({"a": "b", "b": "c"}), json!({"a": null}), json!({"b": "c"})),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (json!({"a": {"b": "c"}}), json!({"a": {"b": "d", "c": null}}), json!({"a": {"b": "d"}})),
            (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
            (json!({}), json!({"a": {"bb": {"ccc": null}}}), json!({"a": {"bb": {}}})),
            // evanphx prunes nulls of new values, inside arrays as well.
            (
                json!({"spec": {"containers": [{"name": "a"}]}}),
                json!({"spec": {"containers": [{"name": "a", "image": null}, null]}}),
                json!({"spec": {"containers": [{"name": "a"}, null]}}),
            ),
            // kube-rs Recorder: merge-patch an events.k8s.io Event's series.
            (
                json!({"metadata": {"name": "e"}, "series": {"count": 1, "lastObservedTime": "t1"}}),
                json!({"series": {"count": 2, "lastObservedTime": "t2"}}),
                json!({"metadata": {"name": "e"}, "series": {"count": 2, "lastObservedTime": "t2"}}),
            ),
        ];
        for (doc, patch, want) in cases {
            assert_eq!(apply_merge_patch(&doc, &patch), want, "doc {doc} patch {patch}");
        }
    }

    #[test]
    fn keeps_key_order_of_the_document() {
        let doc = json!({"a": 1, "b": 2, "c": 3});
        let out = apply_merge_patch(&doc, &json!({"a": null, "d": 4, "b": 5}));
        let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["b", "c", "d"]);
    }

    #[test]
    fn parse_rejects_what_evanphx_rejects() {
        for body in [&b"null"[..], b"1", b"\"x\"", b"{", b""] {
            let err = parse_merge_patch(body).unwrap_err();
            assert_eq!((err.http_status(), err.message()), (400, BAD_JSON_PATCH.to_string()));
        }
        assert!(parse_merge_patch(b"{\"a\":1}").is_ok());
        assert!(parse_merge_patch(b"[1]").is_ok());
    }
}
