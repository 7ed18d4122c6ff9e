//! A JSON decoder that also reports every object key it meets, in document order, with its
//! path and whether it repeats a key of the same object: what sigs.k8s.io/json's strict mode
//! needs to report `duplicate field "spec.paused"` in the order kube-apiserver does. The last of
//! duplicate keys wins, as in Go.

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// One key of one object, in document order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEvent {
    /// `spec.template.spec.containers[0].image`.
    pub path: String,
    /// The key already appeared in the same object.
    pub duplicate: bool,
}

/// Decodes `body` as JSON, with its key events.
pub fn parse(body: &[u8]) -> Result<(Value, Vec<KeyEvent>), serde_json::Error> {
    let events = RefCell::new(Vec::new());
    let duplicate = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = ValueSeed { path: String::new(), events: Some(&events), duplicate: &duplicate }
        .deserialize(&mut de)?;
    de.end()?;
    Ok((value, events.into_inner()))
}

/// Decodes `body` as [`parse`] does (the same value, the same errors) without recording key
/// events, and says whether any object repeats a key. Events cost a path per key; a body with no
/// repeated key needs them only to order the unknown fields it has, which most bodies do not.
pub fn parse_noting_duplicates(body: &[u8]) -> Result<(Value, bool), serde_json::Error> {
    let duplicate = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(body);
    let value =
        ValueSeed { path: String::new(), events: None, duplicate: &duplicate }.deserialize(&mut de)?;
    de.end()?;
    Ok((value, duplicate.get()))
}

/// `parent.key`, or `key` at the root.
pub fn child_path(parent: &str, key: &str) -> String {
    if parent.is_empty() { key.to_string() } else { format!("{parent}.{key}") }
}

struct ValueSeed<'a> {
    /// The value's path; kept only while events are recorded.
    path: String,
    events: Option<&'a RefCell<Vec<KeyEvent>>>,
    /// Set when an object repeats a key.
    duplicate: &'a Cell<bool>,
}

impl<'a> ValueSeed<'a> {
    fn at(&self, path: impl FnOnce() -> String) -> Self {
        let path = if self.events.is_some() { path() } else { String::new() };
        Self { path, events: self.events, duplicate: self.duplicate }
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let seed = self.at(|| format!("{}[{}]", self.path, items.len()));
            match seq.next_element_seed(seed)? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.events.is_none() {
                // Without events a repeated key is noted once its value is in: one lookup (the
                // insert's) per key instead of two.
                let value = map.next_value_seed(self.at(String::new))?;
                if out.insert(key, value).is_some() {
                    self.duplicate.set(true);
                }
                continue;
            }
            // Keys are only ever added to `out`, so a key it holds is one seen before.
            let duplicate = out.contains_key(&key);
            if duplicate {
                self.duplicate.set(true);
            }
            let seed = self.at(|| child_path(&self.path, &key));
            if let Some(events) = self.events {
                events.borrow_mut().push(KeyEvent { path: seed.path.clone(), duplicate });
            }
            let value = map.next_value_seed(seed)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_keys_in_document_order_and_keeps_the_last_duplicate() {
        let body = br#"{"metadata":{"name":"a","name":"b"},"spec":{"paused":true,"x":[{"k":1,"k":2}],"paused":false}}"#;
        let (v, events) = parse(body).unwrap();
        assert_eq!(v, json!({"metadata": {"name": "b"}, "spec": {"paused": false, "x": [{"k": 2}]}}));
        let dups: Vec<&str> = events.iter().filter(|e| e.duplicate).map(|e| e.path.as_str()).collect();
        assert_eq!(dups, ["metadata.name", "spec.x[0].k", "spec.paused"]);
        assert_eq!(events[0].path, "metadata");
    }

    #[test]
    fn noting_duplicates_decodes_as_the_event_parse_does() {
        let bodies: [&[u8]; 7] = [
            br#"{"metadata":{"name":"a","name":"b"}}"#,
            br#"{"spec":{"x":[{"k":1},{"k":2,"k":3}]}}"#,
            br#"{"spec":{"x":[{"k":1},{"j":2}]},"a":null,"b":[1,"s",true,1.5]}"#,
            b"[]",
            b"{",
            b"{} x",
            br#"{"a" 1}"#,
        ];
        for body in bodies {
            let full = parse(body).map(|(v, events)| (v, events.iter().any(|e| e.duplicate)));
            let fast = parse_noting_duplicates(body);
            match (full, fast) {
                (Ok(full), Ok(fast)) => assert_eq!(full, fast, "{}", String::from_utf8_lossy(body)),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("{}: {a:?} against {b:?}", String::from_utf8_lossy(body)),
            }
        }
    }

    #[test]
    fn rejects_what_serde_json_rejects() {
        for body in [&b"{"[..], b"", b"{} x", b"[1,]", b"{\"a\" 1}"] {
            assert!(parse(body).is_err(), "{}", String::from_utf8_lossy(body));
            assert!(parse_noting_duplicates(body).is_err(), "{}", String::from_utf8_lossy(body));
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(parse(deep.as_bytes()).is_err(), "the recursion limit holds");
        assert!(parse_noting_duplicates(deep.as_bytes()).is_err(), "the recursion limit holds");
    }
}
