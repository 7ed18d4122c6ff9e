//! Classifying API errors the way upstream's controllers branch on them.

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
