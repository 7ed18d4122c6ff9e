//! Classifying API errors the way upstream's controllers branch on them: one classification,
//! which the shells' write errors and the CronJob core's plan share.

/// The classes of API error upstream branches on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiErrorKind {
    /// Status reason `NotFound`.
    NotFound,
    /// Status reason `AlreadyExists`.
    AlreadyExists,
    /// A status whose `details.causes` has type `NamespaceTerminating` (checked before the reason:
    /// upstream tests `HasStatusCause` first).
    NamespaceTerminating,
    /// Anything else, transport errors included.
    Other,
}

/// The class of `e`, in upstream's order of checks.
pub fn kind(e: &kube::Error) -> ApiErrorKind {
    if is_namespace_terminating(e) {
        ApiErrorKind::NamespaceTerminating
    } else if is_not_found(e) {
        ApiErrorKind::NotFound
    } else if is_already_exists(e) {
        ApiErrorKind::AlreadyExists
    } else {
        ApiErrorKind::Other
    }
}

/// The API status of an error, if the server answered with one.
pub fn status(e: &kube::Error) -> Option<&kube::core::Status> {
    match e {
        kube::Error::Api(s) => Some(s),
        _ => None,
    }
}

pub fn is_not_found(e: &kube::Error) -> bool {
    status(e).is_some_and(|s| s.code == 404)
}

pub fn is_already_exists(e: &kube::Error) -> bool {
    status(e).is_some_and(|s| s.code == 409 && s.reason == "AlreadyExists")
}

/// A create refused because the namespace is terminating (`HasStatusCause(err, NamespaceTerminating)`).
pub fn is_namespace_terminating(e: &kube::Error) -> bool {
    status(e)
        .and_then(|s| s.details.as_ref())
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
}

/// The message an event quotes: the Status message, else the error's text.
pub fn message(e: &kube::Error) -> String {
    status(e).map(|s| s.message.clone()).unwrap_or_else(|| e.to_string())
}

#[cfg(test)]
mod tests {
    use kube::core::Status;
    use kube::core::response::{StatusCause, StatusDetails};

    use super::*;

    fn status(code: u16, reason: &str, cause: Option<&str>) -> kube::Error {
        let mut s = Status::failure("refused", reason).with_code(code);
        s.details = cause.map(|c| StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: vec![StatusCause { reason: c.to_string(), message: String::new(), field: String::new() }],
            retry_after_seconds: 0,
        });
        kube::Error::Api(Box::new(s))
    }

    #[test]
    fn classifies_in_upstreams_order_of_checks() {
        // HasStatusCause(NamespaceTerminating) is checked before the reason (cronjob_controllerv2.go).
        assert_eq!(
            kind(&status(403, "Forbidden", Some("NamespaceTerminating"))),
            ApiErrorKind::NamespaceTerminating
        );
        assert_eq!(
            kind(&status(404, "NotFound", Some("NamespaceTerminating"))),
            ApiErrorKind::NamespaceTerminating
        );
        assert_eq!(kind(&status(404, "NotFound", None)), ApiErrorKind::NotFound);
        assert_eq!(kind(&status(409, "AlreadyExists", None)), ApiErrorKind::AlreadyExists);
        assert_eq!(kind(&status(409, "Conflict", None)), ApiErrorKind::Other);
        assert_eq!(kind(&status(500, "InternalError", None)), ApiErrorKind::Other);
    }
}
