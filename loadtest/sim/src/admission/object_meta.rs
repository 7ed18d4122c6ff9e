//! `ValidateObjectMeta` (apimachinery pkg/api/validation/objectmeta.go) for every kind the sim
//! stores: the name (with the kind's name rule), generateName, labels, annotations,
//! ownerReferences and finalizers, reported under `metadata.`.

use serde_json::Value;

use super::common::*;
use super::names::*;
use crate::field_error::FieldError;

/// A kind's `ValidateNameFunc`: `prefix` is true for generateName, which may end in a dash.
type NameFn = fn(&str, bool) -> Vec<String>;

/// `maskTrailingDash`: a generateName like `job-` is checked as `joa`.
fn mask_trailing_dash(name: &str) -> String {
    match name.strip_suffix('-') {
        Some(rest) if !rest.is_empty() => format!("{rest}a"),
        _ => name.to_string(),
    }
}

fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    if prefix { is_dns1123_subdomain(&mask_trailing_dash(name)) } else { is_dns1123_subdomain(name) }
}

fn name_is_dns_label(name: &str, prefix: bool) -> Vec<String> {
    if prefix { is_dns1123_label(&mask_trailing_dash(name)) } else { is_dns1123_label(name) }
}

fn name_is_dns1035_label(name: &str, prefix: bool) -> Vec<String> {
    if prefix { is_dns1035_label(&mask_trailing_dash(name)) } else { is_dns1035_label(name) }
}

/// The name rule of the built-in kinds the sim checks; other kinds (CRDs, RBAC, events …)
/// keep their names unchecked.
fn name_fn(api_version: &str, kind: &str) -> Option<NameFn> {
    match (api_version, kind) {
        ("v1", "Namespace") => Some(name_is_dns_label),
        ("v1", "Service") => Some(name_is_dns1035_label),
        ("v1", "Pod" | "ConfigMap" | "Secret" | "ServiceAccount" | "Node" | "PersistentVolumeClaim")
        | ("batch/v1", "Job" | "CronJob")
        | ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("coordination.k8s.io/v1", "Lease")
        | ("policy/v1", "PodDisruptionBudget")
        | ("scheduling.k8s.io/v1", "PriorityClass") => Some(name_is_dns_subdomain),
        _ => None,
    }
}

/// `ValidateObjectMeta` on create and (without the generateName part, which no longer matters)
/// on update, as `ValidateObjectMetaUpdate` re-validates the new metadata.
pub(crate) fn validate_object_meta(api_version: &str, kind: &str, obj: &Value) -> Errs {
    let mut errs = Errs::new();
    let Some(meta) = at(obj, &["metadata"]) else { return errs };
    if let Some(name_fn) = name_fn(api_version, kind) {
        let generate_name = at_str(meta, &["generateName"]).unwrap_or("");
        if !generate_name.is_empty() {
            for msg in name_fn(generate_name, true) {
                errs.push(FieldError::invalid("metadata.generateName", &Value::from(generate_name), &msg));
            }
        }
        let name = at_str(meta, &["name"]).unwrap_or("");
        if !name.is_empty() {
            for msg in name_fn(name, false) {
                errs.push(FieldError::invalid("metadata.name", &Value::from(name), &msg));
            }
        }
    }
    errs.extend(validate_labels(at(meta, &["labels"]), "metadata.labels"));
    errs.extend(validate_annotations(at(meta, &["annotations"]), "metadata.annotations"));
    for r in at_arr(meta, &["ownerReferences"]) {
        for (key, what) in [("apiVersion", "version"), ("kind", "kind"), ("name", "name"), ("uid", "uid")] {
            let v = at_str(r, &[key]).unwrap_or("");
            if v.is_empty() {
                errs.push(FieldError::invalid(
                    format!("metadata.ownerReferences.{key}"),
                    &Value::from(v),
                    &format!("{what} must not be empty"),
                ));
            }
        }
    }
    for f in at_arr(meta, &["finalizers"]) {
        let f = f.as_str().unwrap_or("");
        for msg in label_key_errors(f) {
            errs.push(FieldError::invalid("metadata.finalizers", &Value::from(f), &msg));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SUBDOMAIN_REGEX_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

    fn messages(api_version: &str, kind: &str, meta: Value) -> Vec<String> {
        validate_object_meta(api_version, kind, &json!({"metadata": meta}))
            .into_iter()
            .map(|e| e.message)
            .collect()
    }

    /// Each row names the upstream function / test case it reproduces.
    #[test]
    fn object_meta_table() {
        let long = "a".repeat(254);
        let cases: Vec<(&str, &str, &str, Value, Vec<String>)> = vec![
            (
                "ValidateObjectMeta + NameIsDNSSubdomain: upper case",
                "v1",
                "Pod",
                json!({"name": "Bad_Name"}),
                vec![format!("metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN_REGEX_MSG}")],
            ),
            (
                "IsDNS1123Subdomain: longer than 253 bytes",
                "batch/v1",
                "Job",
                json!({"name": long}),
                vec![format!("metadata.name: Invalid value: \"{long}\": must be no more than 253 bytes")],
            ),
            ("NameIsDNSSubdomain prefix: maskTrailingDash", "batch/v1", "Job", json!({"generateName": "job-"}), vec![]),
            (
                "ValidateObjectMeta: generateName",
                "v1",
                "ConfigMap",
                json!({"generateName": "Job-"}),
                vec![format!("metadata.generateName: Invalid value: \"Job-\": {SUBDOMAIN_REGEX_MSG}")],
            ),
            (
                "ValidateNamespaceName: dots",
                "v1",
                "Namespace",
                json!({"name": "a.b"}),
                vec!["metadata.name: Invalid value: \"a.b\": must not contain dots".to_string()],
            ),
            (
                "TestValidateObjectMetaOwnerReferences: empty uid",
                "v1",
                "ConfigMap",
                json!({"name": "x", "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": ""}]}),
                vec!["metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty".to_string()],
            ),
            (
                "ValidateFinalizers: not a qualified name",
                "v1",
                "ConfigMap",
                json!({"name": "x", "finalizers": ["a/b/c"]}),
                vec!["metadata.finalizers: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_string()],
            ),
            (
                "ValidateLabels: TestValidateLabels bad value",
                "v1",
                "Pod",
                json!({"name": "p", "labels": {"app": "-x"}}),
                vec!["metadata.labels: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string()],
            ),
            (
                "ValidateLabels: label value of 64 bytes",
                "v1",
                "Pod",
                json!({"name": "p", "labels": {"app": "é".repeat(32)}}),
                vec![format!("metadata.labels: Invalid value: \"{}\": must be no more than 63 bytes", "é".repeat(32)), format!("metadata.labels: Invalid value: \"{}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')", "é".repeat(32))],
            ),
            (
                "ValidateAnnotations: TotalAnnotationSizeLimitB",
                "v1",
                "ConfigMap",
                json!({"name": "x", "annotations": {"a": "x".repeat(256 * 1024)}}),
                vec!["metadata.annotations: Too long: may not be more than 262144 bytes".to_string()],
            ),
            ("other kinds keep any name", "rbac.authorization.k8s.io/v1", "ClusterRole", json!({"name": "system:x"}), vec![]),
        ];
        for (case, api_version, kind, meta, want) in cases {
            assert_eq!(messages(api_version, kind, meta), want, "{case}");
        }
    }
}
