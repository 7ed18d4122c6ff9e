//! Helpers shared by the admission files: tolerant JSON accessors, label-selector checks and matching
//! (meta/v1/validation, meta/v1/helpers.go), Go-style rendering of bad values the way
//! `field.Error.ErrorBody` prints them, and `apiequality.Semantic.DeepEqual` on JSON.

use serde_json::{Map, Value};

use crate::field_error::{FieldError, FieldErrorKind};

pub(crate) type Errs = Vec<FieldError>;
pub(crate) type Obj = Map<String, Value>;

// ---------------------------------------------------------------------------------------------
// Accessors. `null` counts as absent, like a nil pointer in Go.

pub(crate) fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for key in path {
        cur = cur.as_object()?.get(*key)?;
    }
    if cur.is_null() { None } else { Some(cur) }
}

pub(crate) fn at_i64(v: &Value, path: &[&str]) -> Option<i64> {
    at(v, path)?.as_i64()
}

pub(crate) fn at_str<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path)?.as_str()
}

pub(crate) fn at_bool(v: &Value, path: &[&str]) -> Option<bool> {
    at(v, path)?.as_bool()
}

pub(crate) fn at_obj<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Obj> {
    at(v, path)?.as_object()
}

pub(crate) fn at_arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

/// The object under `key`, created when missing or null; `None` when it holds another type.
pub(crate) fn child_obj<'a>(m: &'a mut Obj, key: &str) -> Option<&'a mut Obj> {
    let slot = m.entry(key.to_string()).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// Inserts `value` under `key` when it is missing or null.
pub(crate) fn set_default(m: &mut Obj, key: &str, value: Value) {
    match m.get(key) {
        None | Some(Value::Null) => {
            m.insert(key.to_string(), value);
        }
        Some(_) => {}
    }
}

/// Applies `f` to every object in the array under `key` (if any).
pub(crate) fn each_obj_in(m: &mut Obj, key: &str, mut f: impl FnMut(&mut Obj)) {
    if let Some(Value::Array(items)) = m.get_mut(key) {
        for item in items.iter_mut() {
            if let Some(o) = item.as_object_mut() {
                f(o);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Field errors the constructors of field_error.rs do not cover.

/// `field: Invalid value: detail` (apimachinery's `field.OmitValueType{}`).
pub(crate) fn invalid_omit(field: impl Into<String>, detail: &str) -> FieldError {
    let field = field.into();
    let message = format!("{field}: Invalid value: {detail}");
    FieldError { kind: FieldErrorKind::Invalid, field, message }
}

/// `field: Invalid value: <rendered>: detail`, with the bad value already rendered the way Go's
/// `%#v` / `String()` prints it (maps, structs, slices, times).
pub(crate) fn invalid_go(field: impl Into<String>, rendered: &str, detail: &str) -> FieldError {
    let field = field.into();
    let message = if detail.is_empty() {
        format!("{field}: Invalid value: {rendered}")
    } else {
        format!("{field}: Invalid value: {rendered}: {detail}")
    };
    FieldError { kind: FieldErrorKind::Invalid, field, message }
}

pub(crate) const IS_NEGATIVE_ERROR_MSG: &str = "must be greater than or equal to 0";
pub(crate) const FIELD_IMMUTABLE_ERROR_MSG: &str = "field is immutable";

/// `apivalidation.ValidateNonnegativeField` for an optional integer at `path` of `v`.
pub(crate) fn nonnegative(v: &Value, path: &[&str], field: &str, errs: &mut Errs) {
    if let Some(n) = at_i64(v, path)
        && n < 0
    {
        errs.push(FieldError::invalid(field, &Value::from(n), IS_NEGATIVE_ERROR_MSG));
    }
}

// ---------------------------------------------------------------------------------------------
// Name, label and annotation validators live in `names.rs`, the sim's one set.

pub(crate) use super::names::{
    is_dns1123_label, is_dns1123_subdomain, label_key_errors as is_qualified_name,
    label_value_errors as is_valid_label_value, regex_error, validate_annotations, validate_labels,
};

// ---------------------------------------------------------------------------------------------
// Label selectors.

/// metav1 `ValidateLabelSelector`.
pub(crate) fn validate_label_selector(sel: &Value, field: &str, allow_invalid_values: bool) -> Errs {
    let mut errs = validate_labels(at(sel, &["matchLabels"]), &format!("{field}.matchLabels"));
    for (i, expr) in at_arr(sel, &["matchExpressions"]).iter().enumerate() {
        let path = format!("{field}.matchExpressions[{i}]");
        let op = at_str(expr, &["operator"]).unwrap_or("");
        let values = at_arr(expr, &["values"]);
        match op {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        format!("{path}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        format!("{path}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            _ => errs.push(FieldError::invalid(
                format!("{path}.operator"),
                &Value::from(op),
                "not a valid selector operator",
            )),
        }
        let key = at_str(expr, &["key"]).unwrap_or("");
        for msg in is_qualified_name(key) {
            errs.push(FieldError::invalid(format!("{path}.key"), &Value::from(key), &msg));
        }
        if !allow_invalid_values {
            for (j, v) in values.iter().enumerate() {
                let v = v.as_str().unwrap_or("");
                for msg in is_valid_label_value(v) {
                    errs.push(FieldError::invalid(format!("{path}.values[{j}]"), &Value::from(v), &msg));
                }
            }
        }
    }
    errs
}

/// Whether a selector carries label values that would fail validation
/// (`LabelSelectorHasInvalidLabelValue`).
pub(crate) fn selector_has_invalid_label_value(sel: Option<&Value>) -> bool {
    let Some(sel) = sel else { return false };
    at_arr(sel, &["matchExpressions"]).iter().any(|e| {
        at_arr(e, &["values"]).iter().any(|v| !is_valid_label_value(v.as_str().unwrap_or("")).is_empty())
    })
}

enum Req<'a> {
    Eq(&'a str, &'a str),
    In(&'a str, Vec<&'a str>),
    NotIn(&'a str, Vec<&'a str>),
    Exists(&'a str),
    DoesNotExist(&'a str),
}

/// `LabelSelectorAsSelector(sel).Matches(labels)`: `None` when the selector does not convert
/// (the callers then skip their check, as upstream does); a nil selector matches nothing, an
/// empty one everything.
pub(crate) fn selector_matches(sel: Option<&Value>, labels: Option<&Obj>) -> Option<bool> {
    let Some(sel) = sel else { return Some(false) };
    let match_labels = at_obj(sel, &["matchLabels"]);
    let exprs = at_arr(sel, &["matchExpressions"]);
    if match_labels.is_none_or(Obj::is_empty) && exprs.is_empty() {
        return Some(true);
    }
    let mut reqs = Vec::new();
    for (k, v) in match_labels.into_iter().flatten() {
        let v = v.as_str()?;
        if !is_qualified_name(k).is_empty() || !is_valid_label_value(v).is_empty() {
            return None;
        }
        reqs.push(Req::Eq(k, v));
    }
    for e in exprs {
        let key = at_str(e, &["key"]).unwrap_or("");
        if !is_qualified_name(key).is_empty() {
            return None;
        }
        let mut values = Vec::new();
        for v in at_arr(e, &["values"]) {
            let v = v.as_str()?;
            if !is_valid_label_value(v).is_empty() {
                return None;
            }
            values.push(v);
        }
        let req = match at_str(e, &["operator"]).unwrap_or("") {
            "In" if !values.is_empty() => Req::In(key, values),
            "NotIn" if !values.is_empty() => Req::NotIn(key, values),
            "Exists" if values.is_empty() => Req::Exists(key),
            "DoesNotExist" if values.is_empty() => Req::DoesNotExist(key),
            _ => return None,
        };
        reqs.push(req);
    }
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    Some(reqs.iter().all(|r| match r {
        Req::Eq(k, v) => get(k) == Some(*v),
        Req::In(k, vs) => get(k).is_some_and(|x| vs.contains(&x)),
        Req::NotIn(k, vs) => get(k).is_none_or(|x| !vs.contains(&x)),
        Req::Exists(k) => get(k).is_some(),
        Req::DoesNotExist(k) => get(k).is_none(),
    }))
}

// ---------------------------------------------------------------------------------------------
// Go rendering of bad values (`%q`, `%#v`, `time.Time.String()`).

pub(crate) use crate::go_fmt::go_quote;

/// `%#v` of a `map[string]string` (Go prints maps with sorted keys).
pub(crate) fn go_string_map(m: Option<&Value>) -> String {
    let Some(map) = m.and_then(Value::as_object) else { return "map[string]string(nil)".to_string() };
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let body: Vec<String> = entries
        .iter()
        .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v.as_str().unwrap_or(""))))
        .collect();
    format!("map[string]string{{{}}}", body.join(", "))
}

/// `%#v` of a `[]string`.
pub(crate) fn go_string_slice(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        None => "[]string(nil)".to_string(),
        Some(items) => {
            let body: Vec<String> = items.iter().map(|x| go_quote(x.as_str().unwrap_or(""))).collect();
            format!("[]string{{{}}}", body.join(", "))
        }
    }
}

/// `%#v` of a `[]int32`.
pub(crate) fn go_int32_slice(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        None => "[]int32(nil)".to_string(),
        Some(items) => {
            let body: Vec<String> = items.iter().map(|x| x.to_string()).collect();
            format!("[]int32{{{}}}", body.join(", "))
        }
    }
}

/// `%#v` of a `metav1.LabelSelector` (what a `*LabelSelector` bad value prints as).
pub(crate) fn go_selector(sel: &Value) -> String {
    let exprs = match at(sel, &["matchExpressions"]).and_then(Value::as_array) {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(items) => {
            let body: Vec<String> = items
                .iter()
                .map(|e| {
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        go_quote(at_str(e, &["key"]).unwrap_or("")),
                        go_quote(at_str(e, &["operator"]).unwrap_or("")),
                        go_string_slice(at(e, &["values"]))
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", body.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{}}}",
        go_string_map(at(sel, &["matchLabels"])),
        exprs
    )
}

/// `time.Time.String()` of a `metav1.Time` decoded from RFC 3339 (the apiserver runs in UTC):
/// `2006-01-02 15:04:05.999999999 +0000 UTC`. Unparsable input is quoted.
pub(crate) fn go_time(v: Option<&Value>) -> String {
    let Some(s) = v.and_then(Value::as_str) else { return "null".to_string() };
    let Ok(ts) = s.parse::<jiff::Timestamp>() else { return go_quote(s) };
    let dt = ts.to_zoned(jiff::tz::TimeZone::UTC).datetime();
    let mut out = format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    );
    let nanos = dt.subsec_nanosecond();
    if nanos > 0 {
        let frac = format!("{nanos:09}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push_str(" +0000 UTC");
    out
}

/// Parses an RFC 3339 timestamp; `None` when absent or unparsable.
pub(crate) fn timestamp(v: Option<&Value>) -> Option<jiff::Timestamp> {
    v.and_then(Value::as_str).and_then(|s| s.parse().ok())
}

/// `ptr.Equal` on two optional `metav1.Time`s: same instant (falls back to the raw strings).
pub(crate) fn same_time(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => match (timestamp(Some(x)), timestamp(Some(y))) {
            (Some(p), Some(q)) => p == q,
            _ => x == y,
        },
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// apiequality.Semantic.DeepEqual on JSON: absent, null, empty list and empty map are all equal
// (nil and empty slices and maps compare equal there); scalars compare exactly.

fn is_empty(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        Some(_) => false,
    }
}

/// Semantic equality of a pointer field: nil differs from a pointer to an empty struct.
pub(crate) fn pointer_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    a.is_some() == b.is_some() && semantic_eq(a, b)
}

fn as_obj(v: Option<&Value>) -> Option<&Obj> {
    static EMPTY: std::sync::OnceLock<Obj> = std::sync::OnceLock::new();
    match v {
        Some(Value::Object(o)) => Some(o),
        None | Some(Value::Null) => Some(EMPTY.get_or_init(Obj::new)),
        _ => None,
    }
}

pub(crate) fn semantic_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    // Equal values are semantically equal; most updates leave what they compare untouched, and
    // `json::opt_equal` tells that without hashing every key.
    crate::json::opt_equal(a, b) || semantic_eq_walk(a, b)
}

fn semantic_eq_walk(a: Option<&Value>, b: Option<&Value>) -> bool {
    if is_empty(a) && is_empty(b) {
        return true;
    }
    match (a, b) {
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| semantic_eq_walk(Some(p), Some(q)))
        }
        (Some(Value::Object(_)), _) | (_, Some(Value::Object(_))) => match (as_obj(a), as_obj(b)) {
            (Some(x), Some(y)) => {
                x.iter().all(|(k, v)| semantic_eq_walk(Some(v), y.get(k)))
                    && y.iter().all(|(k, v)| x.contains_key(k) || semantic_eq_walk(None, Some(v)))
            }
            _ => false,
        },
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // meta/v1 helpers_test.go TestLabelSelectorAsSelector (matching semantics).
    #[test]
    fn selector_matching() {
        let labels = json!({"a": "b", "c": "d"});
        let l = labels.as_object();
        assert_eq!(selector_matches(None, l), Some(false));
        assert_eq!(selector_matches(Some(&json!({})), l), Some(true));
        assert_eq!(selector_matches(Some(&json!({"matchLabels": {"a": "b"}})), l), Some(true));
        assert_eq!(selector_matches(Some(&json!({"matchLabels": {"a": "x"}})), l), Some(false));
        let e = json!({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}, {"key": "c", "operator": "In", "values": ["d"]}]});
        assert_eq!(selector_matches(Some(&e), l), Some(true));
        let bad = json!({"matchExpressions": [{"key": "x", "operator": "Bogus"}]});
        assert_eq!(selector_matches(Some(&bad), l), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// `semantic_eq` answers equal values without walking them; the walk gives the same
        /// answer for any pair, equal, reordered, edited or unrelated.
        #[test]
        fn semantic_eq_is_its_walk(
            a in crate::json::tests::value(),
            b in crate::json::tests::value(),
            seed in proptest::prelude::any::<u64>(),
        ) {
            let reordered = crate::json::tests::reorder(&a, seed);
            let edited = crate::json::tests::edit(&a, seed);
            for other in [&b, &a, &reordered, &edited] {
                proptest::prop_assert_eq!(
                    semantic_eq(Some(&a), Some(other)),
                    semantic_eq_walk(Some(&a), Some(other))
                );
                proptest::prop_assert_eq!(semantic_eq(None, Some(other)), semantic_eq_walk(None, Some(other)));
            }
        }
    }

    #[test]
    fn go_rendering_and_semantic_equality() {
        assert_eq!(
            go_string_map(Some(&json!({"b": "2", "a": "1"}))),
            r#"map[string]string{"a":"1", "b":"2"}"#
        );
        assert_eq!(go_string_map(None), "map[string]string(nil)");
        assert_eq!(
            go_selector(&json!({"matchLabels": {"a": "b"}})),
            r#"v1.LabelSelector{MatchLabels:map[string]string{"a":"b"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"#
        );
        assert_eq!(go_time(Some(&json!("2016-05-19T10:00:00Z"))), "2016-05-19 10:00:00 +0000 UTC");
        assert_eq!(go_int32_slice(Some(&json!([1, 2]))), "[]int32{1, 2}");
        assert!(semantic_eq(Some(&json!({"a": [], "b": {}})), Some(&json!({}))));
        assert!(semantic_eq(Some(&json!({"a": null})), None));
        assert!(!semantic_eq(Some(&json!({"a": false})), Some(&json!({}))));
        assert!(!semantic_eq(Some(&json!([1])), Some(&json!([2]))));
    }
}
