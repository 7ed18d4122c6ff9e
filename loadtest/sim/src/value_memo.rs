//! Answers remembered per thread for JSON values met again: a create's FieldsV1 of its spec
//! (`patch::managed`) and a pod spec's validation (`admission::pod_validation`). The pods of a
//! Job, or of a benchmark, share one spec, and encoding and validating it were a good part of
//! every create and update. A value is remembered the second time its fingerprint turns up, so a
//! value seen once costs only its fingerprint; a remembered answer is given only for a value
//! identical to the one it was made for (same members in the same order, same scalars), at the
//! same place.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::thread::LocalKey;

use serde_json::Value;

/// How many answers a thread remembers, and how many fingerprints of values seen once.
const REMEMBERED: usize = 4;
const SEEN: usize = 16;

/// What else decides an answer besides the value: for FieldsV1, its type and field in the schema
/// (by address: both are static tables).
pub(crate) type Place = (usize, usize);

struct Remembered<T> {
    place: Place,
    value: Value,
    answer: T,
}

/// One kind of answer's memory (a thread-local of each user's).
pub(crate) struct Memo<T> {
    remembered: VecDeque<Remembered<T>>,
    seen: VecDeque<u64>,
}

impl<T> Memo<T> {
    pub(crate) const fn new() -> Self {
        Self { remembered: VecDeque::new(), seen: VecDeque::new() }
    }
}

/// `answer(v)`, or the answer remembered in `memo` for a value identical to `v` at `place`.
pub(crate) fn remembered<T: Clone>(
    memo: &'static LocalKey<RefCell<Memo<T>>>,
    place: Place,
    v: &Value,
    answer: impl FnOnce(&Value) -> Option<T>,
) -> Option<T> {
    // The few remembered values are compared whole (a different one differs early), which is
    // cheaper than a fingerprint on a hit; only a miss takes the fingerprint.
    let hit = memo.with_borrow(|m| {
        m.remembered.iter().find(|r| r.place == place && identical(&r.value, v)).map(|r| r.answer.clone())
    });
    if hit.is_some() {
        return hit;
    }
    let fingerprint = fingerprint(place, v);
    let answer = answer(v)?;
    memo.with_borrow_mut(|m| {
        if m.seen.contains(&fingerprint) {
            if m.remembered.len() == REMEMBERED {
                m.remembered.pop_back();
            }
            m.remembered.push_front(Remembered { place, value: v.clone(), answer: answer.clone() });
        } else {
            if m.seen.len() == SEEN {
                m.seen.pop_back();
            }
            m.seen.push_front(fingerprint);
        }
    });
    Some(answer)
}

/// `a == b` with every object's members in the same order and every number written alike
/// (`==` takes 0.0 and -0.0 for equal): any function of a value's JSON answers the same for both.
pub(crate) fn identical(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((kx, vx), (ky, vy))| kx == ky && identical(vx, vy))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| identical(p, q))
        }
        (Value::Number(x), Value::Number(y)) => {
            x == y && x.as_f64().map(f64::to_bits) == y.as_f64().map(f64::to_bits)
        }
        _ => a == b,
    }
}

/// A hash of the place and of the value's structure and scalars, members in order, eight bytes
/// of text at a time: identical values at one place have the same fingerprint.
fn fingerprint(place: Place, v: &Value) -> u64 {
    fn word(h: &mut u64, w: u64) {
        *h = (h.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn text(h: &mut u64, s: &str) {
        word(h, s.len() as u64);
        let mut chunks = s.as_bytes().chunks_exact(8);
        for c in &mut chunks {
            word(h, u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
        }
        let mut last = [0u8; 8];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        word(h, u64::from_le_bytes(last));
    }
    fn walk(h: &mut u64, v: &Value) {
        match v {
            Value::Null => word(h, 1),
            Value::Bool(b) => word(h, 2 + u64::from(*b)),
            Value::Number(n) => {
                word(h, 4);
                word(h, n.as_f64().map_or(0, f64::to_bits));
            }
            Value::String(s) => {
                word(h, 5);
                text(h, s);
            }
            Value::Array(items) => {
                word(h, 6);
                word(h, items.len() as u64);
                items.iter().for_each(|item| walk(h, item));
            }
            Value::Object(m) => {
                word(h, 7);
                word(h, m.len() as u64);
                for (k, v) in m {
                    text(h, k);
                    walk(h, v);
                }
            }
        }
    }
    let mut h = 0;
    word(&mut h, place.0 as u64);
    word(&mut h, place.1 as u64);
    walk(&mut h, v);
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    thread_local! {
        static TESTED: RefCell<Memo<Value>> = const { RefCell::new(Memo::new()) };
    }

    /// Values alike in every way a fingerprint or `==` could confuse: reordered members, 0.0 and
    /// -0.0, 1 and 1.0, and random ones.
    fn values() -> impl Strategy<Value = Value> {
        let alike = prop::sample::select(vec![
            serde_json::json!({"a": 1, "b": [0.0]}),
            serde_json::json!({"b": [0.0], "a": 1}),
            serde_json::json!({"a": 1, "b": [-0.0]}),
            serde_json::json!({"a": 1.0, "b": [0.0]}),
            serde_json::json!({"a": 1, "b": ["0.0"]}),
        ]);
        prop_oneof![3 => alike, 1 => crate::json::tests::value()]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Whatever values come, in whatever order and at whichever place, the remembered answer
        /// is the one `encode` gives, for an `encode` that reads the value's every byte of JSON.
        #[test]
        fn remembered_answers_are_the_encoded_ones(
            seen in prop::collection::vec((values(), 0..2usize), 1..24),
        ) {
            let encode = |v: &Value| Some(Value::String(serde_json::to_string(v).unwrap_or_default()));
            for (v, place) in &seen {
                let tagged = |v: &Value| encode(v).map(|e| serde_json::json!([place, e]));
                prop_assert_eq!(remembered(&TESTED, (*place, 0), v, tagged), tagged(v));
            }
        }
    }

    /// A value met a second time is remembered, and answered from memory after that.
    #[test]
    fn a_value_is_remembered_the_second_time() {
        let v = serde_json::json!({"containers": [{"name": "main"}]});
        let calls = std::cell::Cell::new(0);
        let encode = |v: &Value| {
            calls.set(calls.get() + 1);
            Some(v.clone())
        };
        for _ in 0..4 {
            assert_eq!(remembered(&TESTED, (7, 7), &v, encode), Some(v.clone()));
        }
        assert_eq!(calls.get(), 2, "encoded when first seen and when remembered, answered after");
    }
}
