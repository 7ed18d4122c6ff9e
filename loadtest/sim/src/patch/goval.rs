//! How Go sees a decoded JSON value: the dynamic type `interface{}` holds after
//! `UnmarshalCaseSensitivePreserveInts` (integers as int64, other numbers as float64), Go's `==` on
//! such values, and `fmt`'s `%v`, so error texts read like apimachinery's.

use serde_json::Value;

/// The dynamic type of a decoded JSON value (`reflect.TypeOf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GoKind {
    Nil,
    Bool,
    Int,
    Float,
    String,
    Slice,
    Map,
}

pub(crate) fn kind(v: &Value) -> GoKind {
    match v {
        Value::Null => GoKind::Nil,
        Value::Bool(_) => GoKind::Bool,
        Value::Number(n) if n.is_f64() => GoKind::Float,
        Value::Number(_) => GoKind::Int,
        Value::String(_) => GoKind::String,
        Value::Array(_) => GoKind::Slice,
        Value::Object(_) => GoKind::Map,
    }
}

/// `reflect.TypeOf(v).String()`, as `mergepatch.ErrBadArgType` prints it.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match kind(v) {
        GoKind::Nil => "<nil>",
        GoKind::Bool => "bool",
        GoKind::Int => "int64",
        GoKind::Float => "float64",
        GoKind::String => "string",
        GoKind::Slice => "[]interface {}",
        GoKind::Map => "map[string]interface {}",
    }
}

/// Go's `==` on two `interface{}` values: same dynamic type and same value. Go panics when both
/// hold maps or slices; here they compare structurally instead.
pub(crate) fn eq(a: &Value, b: &Value) -> bool {
    kind(a) == kind(b) && a == b
}

/// `fmt.Sprintf("%v", v)`.
pub(crate) fn fmt(v: &Value) -> String {
    let mut out = String::new();
    write(&mut out, v);
    out
}

fn write(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => out.push_str(&fmt_float(f)),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // fmt prints maps with their keys sorted.
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push_str("map[");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                if let Some(item) = map.get(k) {
                    write(out, item);
                }
            }
            out.push(']');
        }
    }
}

/// `%v` of a float64 (`strconv.FormatFloat(f, 'g', -1, 64)`).
fn fmt_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-4..1e21).contains(&abs) {
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((mantissa, exp)) => {
                let (sign, digits) = match exp.strip_prefix('-') {
                    Some(d) => ('-', d),
                    None => ('+', exp),
                };
                format!("{mantissa}e{sign}{digits:0>2}")
            }
            None => s,
        }
    } else {
        format!("{f}")
    }
}

/// The JSON kind name Go's decoder uses in "json: cannot unmarshal X into Go value of type …".
pub(crate) fn json_kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_formatting_and_equality() {
        assert_eq!(
            fmt(&json!({"value": "b", "a": [1, 2.5, null, true]})),
            "map[a:[1 2.5 <nil> true] value:b]"
        );
        assert_eq!(fmt(&json!(1e21)), "1e+21");
        assert_eq!(fmt(&json!(0.00001)), "1e-05");
        assert_eq!(type_name(&json!([])), "[]interface {}");
        assert!(eq(&json!(1), &json!(1)));
        assert!(!eq(&json!(1), &json!(1.0)), "int64(1) != float64(1) in Go");
        assert!(eq(&Value::Null, &Value::Null));
    }
}
