//! API errors rendered as the exact `Status` objects the real apiserver returns; kube-rs checks the
//! `reason` before the code, so reasons and codes must match upstream's.

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

fn details(rt: &ResourceType, name: &str) -> Value {
    let mut d = json!({ "name": name, "kind": rt.plural });
    if !rt.group.is_empty() {
        d["group"] = json!(rt.group);
    }
    d
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into(), details: None, retry_after: None }
    }

    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        let mut e = Self::new(404, "NotFound", format!("{} \"{name}\" not found", qualified(rt)));
        e.details = Some(Box::new(details(rt, name)));
        e
    }

    /// A namespace that does not exist, on create.
    pub fn namespace_not_found(name: &str) -> Self {
        let mut e = Self::new(404, "NotFound", format!("namespaces \"{name}\" not found"));
        e.details = Some(Box::new(json!({ "name": name, "kind": "namespaces" })));
        e
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        let mut e = Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", qualified(rt)));
        e.details = Some(Box::new(details(rt, name)));
        e
    }

    /// A stale resourceVersion or a failed precondition.
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

    pub fn invalid(rt: &ResourceType, name: &str, errors: &[FieldError]) -> Self {
        let list: Vec<&str> = errors.iter().map(|e| e.message.as_str()).collect();
        let rendered = if list.len() == 1 { list[0].to_string() } else { format!("[{}]", list.join(", ")) };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {rendered}", rt.kind_for_messages()),
        );
        let causes: Vec<Value> = errors
            .iter()
            .map(|fe| {
                let detail = fe.message.strip_prefix(&format!("{}: ", fe.field)).unwrap_or(&fe.message);
                json!({ "reason": fe.kind.reason(), "message": detail, "field": fe.field })
            })
            .collect();
        let mut d = json!({ "name": name, "kind": rt.kind, "causes": causes });
        if !rt.group.is_empty() {
            d["group"] = json!(rt.group);
        }
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

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn forbidden(rt: &ResourceType, name: &str, why: &str) -> Self {
        let message = format!("{} \"{name}\" is forbidden: {why}", qualified(rt));
        let mut e = Self::new(403, "Forbidden", message);
        e.details = Some(Box::new(details(rt, name)));
        e
    }

    pub fn method_not_supported(rt: &ResourceType, verb: &str) -> Self {
        let mut e = Self::new(
            405,
            "MethodNotAllowed",
            format!("{verb} is not supported on resources of kind \"{}\"", qualified(rt)),
        );
        e.details = Some(Box::new(json!({ "kind": rt.plural })));
        e
    }

    pub fn page_not_found() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource")
    }

    /// 410 Gone for an expired continue token or resourceVersion.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut e =
            Self::new(504, "Timeout", format!("Too large resource version: {requested}, current: {current}"));
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

    pub fn request_entity_too_large(limit: usize) -> Self {
        Self::new(413, "RequestEntityTooLarge", format!("Request entity too large: limit is {limit}"))
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        let mut e = Self::new(500, "InternalError", format!("Internal error occurred: {message}"));
        e.details = Some(Box::new(json!({ "causes": [{ "message": message }] })));
        e
    }

    pub fn too_many_requests(retry_after: u64) -> Self {
        let mut e = Self::new(429, "TooManyRequests", "Too many requests, please try again later.");
        e.retry_after = Some(retry_after);
        e
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
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
