//! Answers remembered per thread for JSON values met again: a create's FieldsV1 of its spec
//! (`patch::managed`) and a pod spec's validation (`admission::pod_validation`). The pods of a
//! Job, or of a benchmark, share one spec, and encoding and validating it were a good part of
//! every create and update. A remembered answer is given only for a value identical to the one
//! it was made for (same members in the same order, same scalars), at the same place.
//!
//! Remembering costs a copy of the value and of the answer, so only every
//! [`REMEMBER_EVERY`]th miss is remembered: values met again are remembered after a few misses,
//! and values met once (every pod its own spec) pay a copy now and then rather than on every
//! write. Telling a value met before by a fingerprint cost more: a walk of the whole value on
//! every miss (0.5 µs for a pod's spec, twice a create).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::thread::LocalKey;

use serde_json::Value;

/// How many answers a thread remembers.
const REMEMBERED: usize = 4;
/// Which misses are remembered: one in this many.
const REMEMBER_EVERY: u32 = 16;

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
    /// Misses since the last one remembered.
    misses: u32,
}

impl<T> Memo<T> {
    pub(crate) const fn new() -> Self {
        Self { remembered: VecDeque::new(), misses: 0 }
    }
}

/// `answer(v)`, or the answer remembered in `memo` for a value identical to `v` at `place`.
pub(crate) fn remembered<T: Clone>(
    memo: &'static LocalKey<RefCell<Memo<T>>>,
    place: Place,
    v: &Value,
    answer: impl FnOnce(&Value) -> Option<T>,
) -> Option<T> {
    // The few remembered values are compared whole; a different one differs early.
    let hit = memo.with_borrow(|m| {
        m.remembered.iter().find(|r| r.place == place && identical(&r.value, v)).map(|r| r.answer.clone())
    });
    if hit.is_some() {
        return hit;
    }
    let answer = answer(v)?;
    memo.with_borrow_mut(|m| {
        m.misses += 1;
        if m.misses >= REMEMBER_EVERY {
            m.misses = 0;
            if m.remembered.len() == REMEMBERED {
                m.remembered.pop_back();
            }
            m.remembered.push_front(Remembered { place, value: v.clone(), answer: answer.clone() });
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    thread_local! {
        static TESTED: RefCell<Memo<Value>> = const { RefCell::new(Memo::new()) };
    }

    /// Values alike in every way `==` could confuse: reordered members, 0.0 and
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
            seen in prop::collection::vec((values(), 0..2usize), 1..80),
        ) {
            let encode = |v: &Value| Some(Value::String(serde_json::to_string(v).unwrap_or_default()));
            for (v, place) in &seen {
                let tagged = |v: &Value| encode(v).map(|e| serde_json::json!([place, e]));
                prop_assert_eq!(remembered(&TESTED, (*place, 0), v, tagged), tagged(v));
            }
        }
    }

    /// A value met again is remembered after [`REMEMBER_EVERY`] misses at most, and answered
    /// from memory after that.
    #[test]
    fn a_value_met_again_is_remembered() {
        let v = serde_json::json!({"containers": [{"name": "main"}]});
        let calls = std::cell::Cell::new(0);
        let encode = |v: &Value| {
            calls.set(calls.get() + 1);
            Some(v.clone())
        };
        for _ in 0..3 * REMEMBER_EVERY {
            assert_eq!(remembered(&TESTED, (7, 7), &v, encode), Some(v.clone()));
        }
        assert!(calls.get() <= REMEMBER_EVERY, "encoded {} times", calls.get());
    }
}
