//! The one set of name, label and annotation validators the sim uses (apimachinery
//! `pkg/api/validate/content`: `IsDNS1123Label`, `IsDNS1123Subdomain`, `IsLabelKey`,
//! `IsLabelValue`; `pkg/util/validation`: `IsDNS1035Label`, `IsValidPortName`, `IsEnvVarName`;
//! `pkg/api/validation/objectmeta.go`: `ValidateLabels`, `ValidateAnnotations`), with upstream's
//! messages. Lengths are counted in bytes, as Go's `len()` counts them.

use serde_json::Value;

use crate::field_error::FieldError;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const ENV_VAR_NAME_RELAXED_ERR: &str =
    "a valid environment variable name must consist only of printable ASCII characters other than '='";

/// `DNS1123LabelMaxLength`, `DNS1123SubdomainMaxLength`, `LabelValueMaxLength`.
pub(crate) const DNS1123_LABEL_MAX: usize = 63;
pub(crate) const DNS1123_SUBDOMAIN_MAX: usize = 253;
const LABEL_MAX: usize = 63;
/// `TotalAnnotationSizeLimitB`.
pub(crate) const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// `content.RegexError`.
pub(crate) fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, ex) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(ex);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt);
    out.push_str("')");
    out
}

/// `content.MaxLenError` (bytes; the legacy `validation.MaxLenError` says characters, see
/// [`max_chars_error`]).
pub(crate) fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

/// `validation.MaxLenError`, still used by `IsValidPortName`.
pub(crate) fn max_chars_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

pub(crate) fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_lower_alnum(b[0])
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
}

fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
fn matches_label_key_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.')
}

/// `content.IsDNS1123Label`.
pub(crate) fn is_dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !matches_dns1123_label(s) {
        if matches_dns1123_subdomain(s) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(DNS1123_LABEL_ERR, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

/// `content.IsDNS1123Subdomain`.
pub(crate) fn is_dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !matches_dns1123_subdomain(s) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_ERR, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// `validation.IsDNS1035Label`.
pub(crate) fn is_dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_lowercase()
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-');
    if !ok {
        errs.push(regex_error(DNS1035_LABEL_ERR, DNS1035_LABEL_FMT, &["my-name", "abc-123"]));
    }
    errs
}

/// `content.IsLabelKey` (alias `IsQualifiedName`).
pub(crate) fn label_key_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(is_dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_MAX {
        errs.push(format!("name part {}", max_len_error(LABEL_MAX)));
    }
    if !matches_label_key_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// `content.IsLabelValue`.
pub(crate) fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_MAX {
        errs.push(max_len_error(LABEL_MAX));
    }
    if !value.is_empty() && !matches_label_key_name(value) {
        errs.push(regex_error(LABEL_VALUE_ERR, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// `validation.IsValidPortName`.
pub(crate) fn port_name_errors(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_chars_error(15));
    }
    if port.is_empty() || !port.bytes().all(|c| is_lower_alnum(c) || c == b'-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string());
    }
    if !port.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

/// `validation.IsRelaxedEnvVarName` (RelaxedEnvironmentVariableValidation is GA in 1.37).
pub(crate) fn env_var_name_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push("environment variable name must be non-empty".to_string());
    }
    if name.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(ENV_VAR_NAME_RELAXED_ERR.to_string());
    }
    errs
}

/// `ValidateLabels`: each key must be a label key and each value a label value; every error is
/// reported at `field` itself (upstream does not index by key).
pub(crate) fn validate_labels(labels: Option<&Value>, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(map) = labels.and_then(Value::as_object) else { return errs };
    for (k, v) in map {
        for msg in label_key_errors(k) {
            errs.push(FieldError::invalid(field, &Value::from(k.as_str()), &msg));
        }
        let v = v.as_str().unwrap_or("");
        for msg in label_value_errors(v) {
            errs.push(FieldError::invalid(field, &Value::from(v), &msg));
        }
    }
    errs
}

/// `ValidateAnnotations`: keys are label keys (checked lower-cased), and keys plus values may
/// total at most 256 KiB (`TotalAnnotationSizeLimitB`, counted in bytes).
pub(crate) fn validate_annotations(annotations: Option<&Value>, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(map) = annotations.and_then(Value::as_object) else { return errs };
    let mut total = 0usize;
    for (k, v) in map {
        for msg in label_key_errors(&k.to_lowercase()) {
            errs.push(FieldError::invalid(field, &Value::from(k.as_str()), &msg));
        }
        total += k.len() + v.as_str().map_or(0, str::len);
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    // apimachinery validation_test.go TestIsDNS1123Label / TestIsQualifiedName / TestIsValidLabelValue.
    #[test]
    fn name_validators() {
        let cases: &[(&str, bool)] = &[
            ("a", true),
            ("ab-c", true),
            ("1-2", true),
            ("-a", false),
            ("a-", false),
            ("A", false),
            ("a.b", false),
        ];
        for (s, ok) in cases {
            assert_eq!(is_dns1123_label(s).is_empty(), *ok, "{s}");
        }
        assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots".to_string()]);
        assert_eq!(
            is_dns1123_label("A"),
            vec!["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string()]
        );
        for (s, ok) in [
            ("simple", true),
            ("now-with-dashes", true),
            ("example.com/a_b", true),
            ("a/b/c", false),
            ("/a", false),
            ("-a", false),
            ("Ab.cd", true),
        ] {
            assert_eq!(label_key_errors(s).is_empty(), ok, "{s}");
        }
        assert_eq!(label_key_errors("/a"), vec!["prefix part must be non-empty".to_string()]);
        for (s, ok) in [("", true), ("a_b", true), ("-a", false), (&"a".repeat(64)[..], false)] {
            assert_eq!(label_value_errors(s).is_empty(), ok, "{s}");
        }
    }
}
