//! Helpers over an object's `metadata` as JSON.

use serde_json::{Map, Value, json};

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata")?.as_object()
}

/// `obj.metadata`, created when missing or not an object. Callers pass objects; anything else
/// is replaced by an empty object rather than panicking (serde_json's `IndexMut` would).
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(root) = obj else { unreachable!("the value was just made an object") };
    let meta = root.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let Value::Object(meta) = meta else { unreachable!("metadata was just made an object") };
    meta
}

pub fn str_field<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    meta(obj)?.get(key)?.as_str()
}

pub fn name(obj: &Value) -> &str {
    str_field(obj, "name").unwrap_or("")
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

pub fn set_finalizers(obj: &mut Value, finalizers: &[String]) {
    let m = meta_mut(obj);
    if finalizers.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), json!(finalizers));
    }
}

pub fn is_deleting(obj: &Value) -> bool {
    meta(obj).and_then(|m| m.get("deletionTimestamp")).is_some_and(|v| !v.is_null())
}

/// [`is_deleting`] of stored JSON, read without building the object (a create asks it of its
/// namespace every time). `None` when the JSON is not shaped as the probe expects.
pub fn json_is_deleting(json: &[u8]) -> Option<bool> {
    // Stored JSON comes from serde_json, which writes keys as they are (no escapes in plain
    // ASCII): without these bytes there is no such member anywhere, and nothing to read.
    if memchr::memmem::find(json, b"\"deletionTimestamp\"").is_none() {
        return Some(false);
    }
    #[derive(serde::Deserialize)]
    struct Object {
        #[serde(default)]
        metadata: Option<Metadata>,
    }
    #[derive(serde::Deserialize)]
    struct Metadata {
        /// `Option` reads a JSON null as `None`, as `is_deleting` ignores a null.
        #[serde(rename = "deletionTimestamp", default)]
        deletion_timestamp: Option<serde::de::IgnoredAny>,
    }
    let object: Object = serde_json::from_slice(json).ok()?;
    Some(object.metadata.is_some_and(|m| m.deletion_timestamp.is_some()))
}

/// [`is_deleting`] of a stored object: the probe, else the parsed object.
pub fn stored_is_deleting(stored: &crate::store::StoredObject) -> bool {
    json_is_deleting(&stored.bytes).unwrap_or_else(|| is_deleting(&stored.value()))
}

pub fn deletion_grace(obj: &Value) -> Option<i64> {
    meta(obj)?.get("deletionGracePeriodSeconds")?.as_i64()
}

/// The uids named in `metadata.ownerReferences`.
pub fn owner_uids(obj: &Value) -> Vec<Box<str>> {
    // Read in place: `owner_references` copies the whole list.
    let refs = meta(obj).and_then(|m| m.get("ownerReferences")).and_then(Value::as_array);
    refs.into_iter().flatten().filter_map(|r| r.get("uid")?.as_str().map(Into::into)).collect()
}

pub fn owner_references(obj: &Value) -> Vec<Value> {
    meta(obj).and_then(|m| m.get("ownerReferences")).and_then(Value::as_array).cloned().unwrap_or_default()
}

pub fn labels(obj: &Value) -> Option<Map<String, Value>> {
    meta(obj)?.get("labels")?.as_object().filter(|m| !m.is_empty()).cloned()
}

/// [`labels`], moved out of the object (which keeps an empty map in their place) rather than
/// copied: for an object about to be dropped.
pub fn take_labels(obj: &mut Value) -> Option<Map<String, Value>> {
    let labels = obj.get_mut("metadata")?.get_mut("labels")?.as_object_mut()?;
    (!labels.is_empty()).then(|| std::mem::take(labels))
}

/// Now, to the second, as object timestamps are.
pub fn now_seconds() -> String {
    let now = jiff::Timestamp::now();
    timestamp_seconds(now)
}

pub fn timestamp_seconds(t: jiff::Timestamp) -> String {
    jiff::Timestamp::from_second(t.as_second()).map(|t| t.to_string()).unwrap_or_else(|_| t.to_string())
}

/// Now with microseconds, as MicroTime fields (event times, lease renewals) are.
pub fn now_micros() -> String {
    let now = jiff::Timestamp::now();
    format!("{}", now.strftime("%Y-%m-%dT%H:%M:%S.%6fZ"))
}

/// Parses an RFC3339 timestamp.
pub fn parse_time(s: &str) -> Option<jiff::Timestamp> {
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_probe_of_deletion_agrees_with_the_parsed_object() {
        let cases = [
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            json!({"metadata": {"deletionTimestamp": null}}),
            json!({"metadata": null}),
            json!({"metadata": "x"}),
            json!({"kind": "Namespace"}),
            json!([1]),
            json!({"metadata": {"deletionTimestamp": {"nested": [1, 2]}}, "spec": {"x": 1}}),
            // The key's words elsewhere, but no such member of the metadata.
            json!({"metadata": {"annotations": {"deletionTimestamp": "x", "note": "\"deletionTimestamp\""}}}),
            json!({"metadata": {"name": "a"}, "spec": {"deletionTimestamp": "x"}}),
        ];
        for case in cases {
            let bytes = serde_json::to_vec(&case).unwrap();
            let probed = json_is_deleting(&bytes).unwrap_or_else(|| is_deleting(&case));
            assert_eq!(probed, is_deleting(&case), "{case}");
        }
        assert_eq!(json_is_deleting(br#"{"metadata":{"deletionTimestamp":"t"}}"#), Some(true));
        assert_eq!(json_is_deleting(br#"{"metadata":{"name":"n"}}"#), Some(false));
    }
}
