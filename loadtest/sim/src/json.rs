//! `serde_json::Value` work on the write path, done cheaper with the same answers.
//!
//! - [`parse`] decodes JSON as `serde_json::from_slice::<Value>` does, but builds each object
//!   with the capacity it ends with: serde_json's own visitor grows every map and list from
//!   empty (a reallocation and, for maps, a rehash with SipHash at each doubling), which was a
//!   large share of parsing a stored pod on every patch.
//! - [`equal`] compares two values as `==` does, but walks objects whose keys come in the same
//!   order pairwise instead of looking every key up in the other map (a SipHash per key): the
//!   objects a write compares are mostly a copy and its edit, in the same order.
//!
//! Tests pin both to serde_json's own answers.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Decodes `bytes` as `serde_json::from_slice::<Value>` does: the same value (key order, the
/// last of duplicate keys winning at the first one's place, numbers), the same errors.
pub fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut scratch = Scratch::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Seed { scratch: &mut scratch }.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Members and items of the objects and lists being decoded, innermost last: each object or list
/// is built from its own tail once it is complete, so it is allocated once, at its size.
#[derive(Default)]
struct Scratch {
    members: Vec<(String, Value)>,
    items: Vec<Value>,
}

struct Seed<'a> {
    scratch: &'a mut Scratch,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
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
        // serde_json's visitor: a non-finite float is null.
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
        let scratch = self.scratch;
        let start = scratch.items.len();
        while let Some(v) = seq.next_element_seed(Seed { scratch: &mut *scratch })? {
            scratch.items.push(v);
        }
        Ok(Value::Array(scratch.items.drain(start..).collect()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let scratch = self.scratch;
        let start = scratch.members.len();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Seed { scratch: &mut *scratch })?;
            scratch.members.push((key, value));
        }
        let mut out = Map::with_capacity(scratch.members.len() - start);
        for (k, v) in scratch.members.drain(start..) {
            // As serde_json's visitor: a repeated key keeps its first place and its last value.
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

/// `a == b`, without hashing where both objects list their keys in the same order.
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => objects_equal(x, y),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q)),
        _ => a == b,
    }
}

/// `a == b` for optional members.
pub fn opt_equal(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => equal(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// `x == y` for objects (same keys, equal values, order aside).
pub fn objects_equal(x: &Map<String, Value>, y: &Map<String, Value>) -> bool {
    if x.len() != y.len() {
        return false;
    }
    for ((kx, vx), (ky, vy)) in x.iter().zip(y) {
        if kx != ky {
            // The orders part here: look the keys up, as `==` does (keys are unique, so equal
            // lengths and every key of x found equal in y is equality).
            return x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)));
        }
        if !equal(vx, vy) {
            return false;
        }
    }
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(&["a", "b", "c", "name", "f:x", "k:{\"a\":1}", ""][..])
                .prop_map(String::from),
            "\\PC{0,4}"
        ]
    }

    /// Arbitrary JSON values: every kind of leaf, objects with keys that often repeat.
    pub(crate) fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            prop::sample::select(&[0.0, -0.0, 1.5, 1e300, -2.5e-300][..]).prop_map(Value::from),
            "\\PC{0,6}".prop_map(Value::from),
            prop::sample::select(&["\"", "\\", "\u{0}", "\n", "é", "😀"][..]).prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((key(), inner), 0..7)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// The same value and the same key order as serde_json's own decode.
    fn same_decode(bytes: &[u8]) {
        match (serde_json::from_slice::<Value>(bytes), parse(bytes)) {
            (Ok(want), Ok(got)) => {
                assert_eq!(got, want, "{}", String::from_utf8_lossy(bytes));
                assert_eq!(
                    serde_json::to_string(&got).ok(),
                    serde_json::to_string(&want).ok(),
                    "key order of {}",
                    String::from_utf8_lossy(bytes)
                );
            }
            (Err(want), Err(got)) => assert_eq!(got.to_string(), want.to_string()),
            (want, got) => panic!("{}: {got:?} against {want:?}", String::from_utf8_lossy(bytes)),
        }
    }

    #[test]
    fn decodes_edges_as_serde_json_does() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let bodies: &[&[u8]] = &[
            br#"{"a":1,"b":2,"a":3}"#,
            br#"{"a":{"x":1,"x":{"y":[1,2,{"z":null}]}},"a":[]}"#,
            br#"[1, -1, 1.0, 1e400, -0, 18446744073709551615, -9223372036854775808, 18446744073709551616]"#,
            br#""\u0000\ud83d\ude00\n""#,
            br#"{"a" 1}"#,
            b"{",
            b"",
            b"[1,]",
            b"{} x",
            b" null ",
            br#""\ud800""#,
            deep.as_bytes(),
        ];
        for body in bodies {
            same_decode(body);
        }
    }

    #[test]
    fn equal_answers_as_eq_does() {
        let a = json!({"a": 1, "b": {"c": [1, {"d": 2, "e": 3}]}});
        let reordered = json!({"b": {"c": [1, {"e": 3, "d": 2}]}, "a": 1});
        assert!(equal(&a, &reordered));
        assert!(!equal(&a, &json!({"a": 1, "b": {"c": [1, {"d": 2, "e": 4}]}})));
        assert!(!equal(&a, &json!({"a": 1, "x": {"c": [1, {"d": 2, "e": 3}]}})));
        assert!(!equal(&json!(1), &json!(1.0)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn parse_matches_serde_json(v in value(), cut in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let text = serde_json::to_vec(&v).unwrap();
            same_decode(&text);
            let pretty = serde_json::to_vec_pretty(&v).unwrap();
            same_decode(&pretty);
            // Broken documents fail with the same error.
            let at = cut.index(text.len().max(1));
            same_decode(&text[..at.min(text.len())]);
            let mut changed = text.clone();
            if let Some(b) = changed.get_mut(at) {
                *b = byte;
            }
            same_decode(&changed);
        }

        #[test]
        fn equal_matches_eq(a in value(), b in value(), shuffle in any::<u64>()) {
            prop_assert_eq!(equal(&a, &b), a == b);
            prop_assert!(equal(&a, &a.clone()));
            // The same members in another order, and a copy with one leaf changed.
            let reordered = reorder(&a, shuffle);
            prop_assert_eq!(equal(&a, &reordered), a == reordered);
            prop_assert!(equal(&a, &reordered));
            let edited = edit(&a, shuffle);
            prop_assert_eq!(equal(&a, &edited), a == edited);
        }
    }

    /// Every object's members rotated by an amount derived from `seed`.
    pub(crate) fn reorder(v: &Value, seed: u64) -> Value {
        match v {
            Value::Object(m) => {
                let mut entries: Vec<(String, Value)> =
                    m.iter().map(|(k, v)| (k.clone(), reorder(v, seed.rotate_left(7)))).collect();
                if !entries.is_empty() {
                    let by = (seed as usize) % entries.len();
                    entries.rotate_left(by);
                }
                Value::Object(entries.into_iter().collect())
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|i| reorder(i, seed.rotate_left(3))).collect())
            }
            other => other.clone(),
        }
    }

    /// `v` with its first leaf (depth first) replaced by one derived from `seed`.
    pub(crate) fn edit(v: &Value, seed: u64) -> Value {
        fn go(v: &mut Value, seed: u64) -> bool {
            match v {
                Value::Object(m) => m.values_mut().any(|c| go(c, seed)),
                Value::Array(items) => items.iter_mut().any(|c| go(c, seed)),
                leaf => {
                    *leaf = if seed.is_multiple_of(2) { json!(seed) } else { json!("x") };
                    true
                }
            }
        }
        let mut out = v.clone();
        go(&mut out, seed);
        out
    }
}
