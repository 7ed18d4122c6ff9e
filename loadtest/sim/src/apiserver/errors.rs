//! API errors rendered as the exact `Status` objects the real apiserver returns; kube-rs checks the
//! `reason` before the code, so reasons and codes must match upstream's. Each constructor names the
//! apimachinery `pkg/api/errors` function it reproduces, with its message and `details`.

use serde_json::{Value, json};

use crate::field_error::FieldError;
use crate::resources::ResourceType;

/// A failed request, as a `metav1.Status`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Box<Value>>,
    /// Seconds, for 429 and 503.
    pub retry_after: Option<u64>,
}

/// `pods` or `jobs.batch`, as apimachinery's GroupResource prints.
pub fn qualified(rt: &ResourceType) -> String {
    if rt.group.is_empty() { rt.plural.clone() } else { format!("{}.{}", rt.plural, rt.group) }
}

/// `metav1.StatusDetails{Group, Kind, Name}`; empty fields are omitted (`omitempty`), so a Go
/// client still sees a non-nil `Details` when all three are empty.
fn status_details(group: &str, kind: &str, name: &str) -> Value {
    let mut d = serde_json::Map::new();
    for (key, value) in [("name", name), ("group", group), ("kind", kind)] {
        if !value.is_empty() {
            d.insert(key.into(), json!(value));
        }
    }
    Value::Object(d)
}

/// The details of errors about a resource: `Kind` carries the resource (plural), as upstream's.
fn details(rt: &ResourceType, name: &str) -> Value {
    status_details(&rt.group, &rt.plural, name)
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into(), details: None, retry_after: None }
    }

    /// `NewNotFound`.
    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        let mut e = Self::new(404, "NotFound", format!("{} \"{name}\" not found", qualified(rt)));
        e.details = Some(Box::new(details(rt, name)));
        e
    }

    /// A namespace that does not exist, on create (NamespaceLifecycle's `NewNotFound`).
    pub fn namespace_not_found(name: &str) -> Self {
        let mut e = Self::new(404, "NotFound", format!("namespaces \"{name}\" not found"));
        e.details = Some(Box::new(status_details("", "namespaces", name)));
        e
    }

    /// `NewAlreadyExists`.
    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        let mut e = Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", qualified(rt)));
        e.details = Some(Box::new(details(rt, name)));
        e
    }

    /// `NewConflict`: a stale resourceVersion or a failed precondition.
    pub fn conflict(rt: &ResourceType, name: &str, why: &str) -> Self {
        let mut e = Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {} \"{name}\": {why}", qualified(rt)),
        );
        e.details = Some(Box::new(details(rt, name)));
        e
    }

    pub fn stale(rt: &ResourceType, name: &str) -> Self {
        Self::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// `NewInvalid`: the aggregate of the field errors (one message alone, several in brackets,
    /// duplicates once), and one cause per error with its `ErrorBody` (the message without the
    /// field path). Details name the kind, not the resource.
    pub fn invalid(rt: &ResourceType, name: &str, errors: &[FieldError]) -> Self {
        Self::invalid_kind(&rt.group, &rt.kind, name, errors)
    }

    /// `NewInvalid` for a kind that is not a served resource (`PodLogOptions`, …).
    pub fn invalid_kind(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Self {
        let mut list: Vec<&str> = Vec::with_capacity(errors.len());
        for e in errors {
            if !list.contains(&e.message.as_str()) {
                list.push(e.message.as_str());
            }
        }
        let qualified_kind = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let message = match list.as_slice() {
            [] => format!("{qualified_kind} \"{name}\" is invalid"),
            [one] => format!("{qualified_kind} \"{name}\" is invalid: {one}"),
            many => format!("{qualified_kind} \"{name}\" is invalid: [{}]", many.join(", ")),
        };
        let mut e = Self::new(422, "Invalid", message);
        let causes: Vec<Value> = errors
            .iter()
            .map(|fe| {
                let detail = fe.message.strip_prefix(&format!("{}: ", fe.field)).unwrap_or(&fe.message);
                let mut cause = json!({ "reason": fe.kind.reason(), "message": detail });
                if !fe.field.is_empty() {
                    cause["field"] = json!(fe.field);
                }
                cause
            })
            .collect();
        let mut d = status_details(group, kind, name);
        d["causes"] = Value::Array(causes);
        e.details = Some(Box::new(d));
        e
    }

    /// A 422 for an object of no known kind (`errors.NewInvalid(schema.GroupKind{}, "", errs)`),
    /// as the patch handler answers when the patched document does not decode: the message
    /// starts with ` "" is invalid:` and the details carry only the causes.
    pub fn invalid_unnamed(errors: &[FieldError]) -> Self {
        let list: Vec<&str> = errors.iter().map(|e| e.message.as_str()).collect();
        let rendered = if list.len() == 1 { list[0].to_string() } else { format!("[{}]", list.join(", ")) };
        let mut e = Self::new(422, "Invalid", format!(" \"\" is invalid: {rendered}"));
        let causes: Vec<Value> = errors
            .iter()
            .map(|fe| {
                let detail = fe.message.strip_prefix(&format!("{}: ", fe.field)).unwrap_or(&fe.message);
                json!({ "reason": fe.kind.reason(), "message": detail, "field": fe.field })
            })
            .collect();
        e.details = Some(Box::new(json!({ "causes": causes })));
        e
    }

    /// An injected error with a message of the fault rule's: the reason apimachinery gives
    /// the code (a webhook's denial carries its code, 400 unless it says otherwise).
    pub fn injected(code: u16, message: String, retry_after: Option<u64>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        let mut e = Self::new(code, reason, message);
        e.retry_after = retry_after;
        e
    }

    /// `NewBadRequest`: no details.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// `NewForbidden`: an unnamed request (a create with generateName, a list) has no quoted name.
    pub fn forbidden(rt: &ResourceType, name: &str, why: &str) -> Self {
        let message = if name.is_empty() {
            format!("{} is forbidden: {why}", qualified(rt))
        } else {
            format!("{} \"{name}\" is forbidden: {why}", qualified(rt))
        };
        let mut e = Self::new(403, "Forbidden", message);
        e.details = Some(Box::new(details(rt, name)));
        e
    }

    /// `NewMethodNotSupported`: details carry group and resource, no name.
    pub fn method_not_supported(rt: &ResourceType, verb: &str) -> Self {
        let mut e = Self::new(
            405,
            "MethodNotAllowed",
            format!("{verb} is not supported on resources of kind \"{}\"", qualified(rt)),
        );
        e.details = Some(Box::new(status_details(&rt.group, &rt.plural, "")));
        e
    }

    /// The apiserver's `notfoundhandler`: a path nothing serves. No details.
    pub fn page_not_found() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource")
    }

    /// A method a path does not serve (a GET of a create-only review): the apiserver's 405.
    pub fn method_not_allowed() -> Self {
        Self::new(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    }

    /// A subresource the sim does not serve (`pods/NAME/ephemeralcontainers`, …): the same 404,
    /// but with empty details, which is what kubectl looks at to tell a missing subresource from
    /// a missing object (`kubectl debug` dereferences `Details` and would panic on none).
    pub fn subresource_not_found(rt: &ResourceType, subresource: &str) -> Self {
        let mut e = Self::new(
            404,
            "NotFound",
            format!(
                "the server could not find the requested resource: the sim cluster does not serve {}/{subresource}",
                qualified(rt)
            ),
        );
        e.details = Some(Box::new(json!({})));
        e
    }

    /// `NewResourceExpired`: 410 for an expired continue token or resourceVersion.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// storage's `NewTooLargeResourceVersionError`: a `NewTimeoutError` with a cause.
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        );
        e.details = Some(Box::new(
            json!({ "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }], "retryAfterSeconds": 1 }),
        ));
        e.retry_after = Some(1);
        e
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {content_type:?})"
            ),
        )
    }

    /// `NewRequestEntityTooLargeError`, as the body reader words it.
    pub fn request_entity_too_large(limit: usize) -> Self {
        Self::new(413, "RequestEntityTooLarge", format!("Request entity too large: limit is {limit}"))
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// `NewInternalError`: the error again as the one cause.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        let mut e = Self::new(500, "InternalError", format!("Internal error occurred: {message}"));
        e.details = Some(Box::new(json!({ "causes": [{ "message": message }] })));
        e
    }

    /// `NewTooManyRequests` (the JSON form; the HTTP layer answers 429 in plain text as
    /// priority-and-fairness does).
    pub fn too_many_requests(retry_after: u64) -> Self {
        let mut e = Self::new(429, "TooManyRequests", "Too many requests, please try again later.");
        e.details = Some(Box::new(json!({ "retryAfterSeconds": retry_after })));
        e.retry_after = Some(retry_after);
        e
    }

    /// `NewServiceUnavailable`: no details.
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// `NewTimeoutError` with no retry hint: "Timeout: " and empty details.
    pub fn timeout(message: impl Into<String>) -> Self {
        let mut e = Self::new(504, "Timeout", format!("Timeout: {}", message.into()));
        e.details = Some(Box::new(json!({})));
        e
    }

    /// The `Status` body.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = (**d).clone();
        }
        s
    }
}

impl ResourceType {
    /// The kind as validation messages name it (`Job.batch`, `Pod`).
    pub fn kind_for_messages(&self) -> String {
        if self.group.is_empty() { self.kind.clone() } else { format!("{}.{}", self.kind, self.group) }
    }
}

/// The `Status` answered for a DELETE that removed the object at once.
pub fn delete_success(rt: &ResourceType, name: &str, uid: &str) -> Value {
    let mut d = details(rt, name);
    d["uid"] = json!(uid);
    json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;
    use serde_json::json;

    fn rt(group: &str, plural: &str) -> std::sync::Arc<ResourceType> {
        let version = "v1";
        Registry::default().find(group, version, plural).expect("built-in resource")
    }

    /// Each constructor against the Status apimachinery's errors.go builds (TestNewXxx-style):
    /// code, reason, message and details as JSON, omitempty fields left out.
    #[test]
    fn statuses_match_apimachinery_constructors() {
        let jobs = rt("batch", "jobs");
        let pods = rt("", "pods");
        /// (upstream constructor, error, code, reason, message, details)
        type Case = (&'static str, ApiError, u16, &'static str, &'static str, Option<Value>);
        let cases: Vec<Case> = vec![
            (
                "NewNotFound",
                ApiError::not_found(&jobs, "j"),
                404,
                "NotFound",
                r#"jobs.batch "j" not found"#,
                Some(json!({"name": "j", "group": "batch", "kind": "jobs"})),
            ),
            (
                "NewNotFound (core group)",
                ApiError::not_found(&pods, "p"),
                404,
                "NotFound",
                r#"pods "p" not found"#,
                Some(json!({"name": "p", "kind": "pods"})),
            ),
            (
                "NewAlreadyExists",
                ApiError::already_exists(&pods, "p"),
                409,
                "AlreadyExists",
                r#"pods "p" already exists"#,
                Some(json!({"name": "p", "kind": "pods"})),
            ),
            (
                "NewConflict",
                ApiError::conflict(&jobs, "j", "why"),
                409,
                "Conflict",
                r#"Operation cannot be fulfilled on jobs.batch "j": why"#,
                Some(json!({"name": "j", "group": "batch", "kind": "jobs"})),
            ),
            (
                "NewForbidden (named)",
                ApiError::forbidden(&pods, "p", "no"),
                403,
                "Forbidden",
                r#"pods "p" is forbidden: no"#,
                Some(json!({"name": "p", "kind": "pods"})),
            ),
            (
                "NewForbidden (unnamed)",
                ApiError::forbidden(&pods, "", "no"),
                403,
                "Forbidden",
                "pods is forbidden: no",
                Some(json!({"kind": "pods"})),
            ),
            (
                "NewMethodNotSupported",
                ApiError::method_not_supported(&jobs, "create"),
                405,
                "MethodNotAllowed",
                r#"create is not supported on resources of kind "jobs.batch""#,
                Some(json!({"group": "batch", "kind": "jobs"})),
            ),
            ("NewBadRequest", ApiError::bad_request("bad"), 400, "BadRequest", "bad", None),
            ("NewResourceExpired", ApiError::expired("too old"), 410, "Expired", "too old", None),
            ("NewTimeoutError", ApiError::timeout("slow"), 504, "Timeout", "Timeout: slow", Some(json!({}))),
            (
                "NewTooLargeResourceVersionError",
                ApiError::too_large_resource_version(9, 5),
                504,
                "Timeout",
                "Timeout: Too large resource version: 9, current: 5",
                Some(
                    json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
                ),
            ),
            (
                "NewTooManyRequests",
                ApiError::too_many_requests(2),
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
                Some(json!({"retryAfterSeconds": 2})),
            ),
            (
                "NewInternalError",
                ApiError::internal("boom"),
                500,
                "InternalError",
                "Internal error occurred: boom",
                Some(json!({"causes": [{"message": "boom"}]})),
            ),
            (
                "notfoundhandler",
                ApiError::page_not_found(),
                404,
                "NotFound",
                "the server could not find the requested resource",
                None,
            ),
        ];
        for (name, e, code, reason, message, details) in cases {
            let s = e.status();
            assert_eq!(
                (s["code"].as_u64(), s["reason"].as_str()),
                (Some(code.into()), Some(reason)),
                "{name}"
            );
            assert_eq!(s["message"], message, "{name}");
            assert_eq!(s.get("details").cloned(), details, "{name}");
            assert_eq!(
                (s["kind"].as_str(), s["status"].as_str()),
                (Some("Status"), Some("Failure")),
                "{name}"
            );
        }
    }

    /// `NewInvalid` (TestNewInvalid): causes carry the error body, an empty field is omitted,
    /// duplicate messages are aggregated once, and details name the kind.
    #[test]
    fn invalid_aggregates_and_renders_causes() {
        let jobs = rt("batch", "jobs");
        let one = FieldError::required("spec.template", "");
        let s = ApiError::invalid(&jobs, "j", std::slice::from_ref(&one)).status();
        assert_eq!(s["message"], r#"Job.batch "j" is invalid: spec.template: Required value"#);
        assert_eq!(
            s["details"],
            json!({"name": "j", "group": "batch", "kind": "Job", "causes": [
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.template"}
            ]})
        );
        let s = ApiError::invalid(&jobs, "j", &[one.clone(), one.clone()]).status();
        assert_eq!(s["message"], r#"Job.batch "j" is invalid: spec.template: Required value"#);
        assert_eq!(s["details"]["causes"].as_array().map(Vec::len), Some(2));
        let bare = FieldError { field: String::new(), ..FieldError::required("x", "") };
        let s = ApiError::invalid(&jobs, "j", &[bare, one]).status();
        assert!(s["details"]["causes"][0].get("field").is_none(), "{s}");
        assert_eq!(ApiError::invalid(&jobs, "j", &[]).status()["message"], r#"Job.batch "j" is invalid"#);
    }

    /// kubectl debug tells a missing subresource from a missing pod by empty details.
    #[test]
    fn an_unserved_subresource_has_empty_details() {
        let s = ApiError::subresource_not_found(&rt("", "pods"), "ephemeralcontainers").status();
        assert_eq!((s["code"].as_u64(), s["reason"].as_str()), (Some(404), Some("NotFound")));
        assert_eq!(s["details"], json!({}));
    }
}
