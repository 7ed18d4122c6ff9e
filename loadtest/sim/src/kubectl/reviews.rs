//! The review resources kubectl's `auth` commands create, answered as kube-apiserver answers
//! them when every request is allowed (the sim has neither authentication nor authorization):
//! `kubectl auth can-i` (`SelfSubjectAccessReview`, `allowed: true`), `kubectl auth can-i --list`
//! (`SelfSubjectRulesReview`, cluster-admin's `*` rules) and `kubectl auth whoami`
//! (`SelfSubjectReview`, the user the audit log records). kubectl sends them in protobuf; the sim
//! answers in JSON, which client-go accepts, and echoes the spec only of a JSON request.

use serde_json::{Value, json};

/// The user every request is made as (`audit.rs` records the same).
pub const USERNAME: &str = "sim";
pub const GROUPS: [&str; 1] = ["system:authenticated"];

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`.
pub fn self_subject_access_review(body: &[u8]) -> Value {
    let spec = serde_json::from_slice::<Value>(body).ok().and_then(|v| v.get("spec").cloned());
    json!({
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {},
        "spec": spec.unwrap_or_else(|| json!({})),
        "status": {"allowed": true},
    })
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews`: everything, as the RBAC
/// authorizer lists it for cluster-admin.
pub fn self_subject_rules_review(body: &[u8]) -> Value {
    let spec = serde_json::from_slice::<Value>(body).ok().and_then(|v| v.get("spec").cloned());
    json!({
        "kind": "SelfSubjectRulesReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {},
        "spec": spec.unwrap_or_else(|| json!({})),
        "status": {
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        },
    })
}

/// `POST /apis/authentication.k8s.io/v1/selfsubjectreviews`.
pub fn self_subject_review() -> Value {
    json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {},
        "status": {"userInfo": {"username": USERNAME, "groups": GROUPS}},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_review_allows_and_echoes_a_json_spec() {
        let body = br#"{"kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"create","resource":"jobs"}}}"#;
        let r = self_subject_access_review(body);
        assert_eq!(r["status"]["allowed"], true);
        assert_eq!(r["spec"]["resourceAttributes"]["verb"], "create");
        let r = self_subject_access_review(b"k8s\0\x0a\x00");
        assert_eq!((r["spec"].clone(), r["status"]["allowed"].clone()), (json!({}), json!(true)));
        assert_eq!(self_subject_review()["status"]["userInfo"]["username"], "sim");
        let rules = self_subject_rules_review(br#"{"spec":{"namespace":"default"}}"#);
        assert_eq!(rules["spec"]["namespace"], "default");
        assert_eq!(rules["status"]["resourceRules"][0]["verbs"], json!(["*"]));
    }
}
