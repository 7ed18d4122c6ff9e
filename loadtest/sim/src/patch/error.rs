//! The errors a PATCH can fail with, each carrying the HTTP status, `reason` and `message` that
//! kube-apiserver puts in the `Status` it answers with.

/// Media types a PATCH on a built-in kind accepts (apiserver `PatchResource`, endpoints/installer.go).
pub const BUILTIN_PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// Media types a PATCH on a custom resource accepts (apiextensions-apiserver crdHandler): no SMP.
pub const CUSTOM_RESOURCE_PATCH_TYPES: &[&str] =
    &["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];

/// A failed PATCH. [`PatchError::http_status`], [`PatchError::reason`] and
/// [`PatchError::message`] give the `code`, `reason` and `message` of the `Status` to answer with;
/// `Display` gives the full detail (for logs), which for 422s is more than the apiserver shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// 400 BadRequest: the body cannot be decoded, or an SMP directive is malformed
    /// (`errors.NewBadRequest`); the message is the decoder's or mergepatch's text.
    #[error("{0}")]
    BadRequest(String),
    /// 422 Invalid. A JSON patch operation that does not apply (failed `test`, missing path) and
    /// SMP "lists of lists" are reported through `errors.NewGenericServerResponse(422, …)`, whose
    /// message is the generic `the server rejected our request due to an error in our request`;
    /// `detail` keeps evanphx/json-patch's or mergepatch's text.
    #[error("{detail}")]
    Invalid { message: String, detail: String },
    /// 413 RequestEntityTooLarge: more than 10000 JSON patch operations (`maxJSONPatchOperations`).
    #[error("The allowed maximum operations in a JSON patch is {max}, got {got}")]
    TooManyOperations { max: usize, got: usize },
    /// 415 UnsupportedMediaType: unknown patch content type, or SMP for a kind without a schema.
    #[error("the body of the request was in an unknown format - accepted media types include: {}", .accepted.join(", "))]
    UnsupportedMediaType { accepted: Vec<&'static str> },
    /// 409 Conflict: an apply changes fields other managers own (fieldmanager
    /// `NewConflictError`); each item is the manager as `printManager` shows it and the path.
    #[error("{}", conflict_message(.0))]
    Conflicts(Vec<(String, String)>),
    /// 500 with an empty reason: strategicpatch errors the apiserver does not translate (missing
    /// merge key, unknown `$patch` value, mismatched list element types…) reach
    /// `responsewriters.ErrorToAPIStatus` as plain Go errors.
    #[error("{0}")]
    Internal(String),
}

/// The message of `errors.NewGenericServerResponse(http.StatusUnprocessableEntity, …)`.
pub const GENERIC_INVALID_MESSAGE: &str = "the server rejected our request due to an error in our request";

impl PatchError {
    /// A 422 whose Status message is the generic one, as for JSON patch failures.
    pub fn invalid(detail: impl Into<String>) -> Self {
        PatchError::Invalid { message: GENERIC_INVALID_MESSAGE.to_string(), detail: detail.into() }
    }

    /// The 415 the apiserver answers a strategic merge patch on a custom resource with.
    pub fn strategic_merge_unsupported() -> Self {
        PatchError::UnsupportedMediaType { accepted: CUSTOM_RESOURCE_PATCH_TYPES.to_vec() }
    }

    /// The 415 for a content type that is no patch type at all (built-in kinds).
    pub fn unknown_patch_type() -> Self {
        PatchError::UnsupportedMediaType { accepted: BUILTIN_PATCH_TYPES.to_vec() }
    }

    /// HTTP status code of the answer.
    pub fn http_status(&self) -> u16 {
        match self {
            PatchError::BadRequest(_) => 400,
            PatchError::Invalid { .. } => 422,
            PatchError::TooManyOperations { .. } => 413,
            PatchError::UnsupportedMediaType { .. } => 415,
            PatchError::Conflicts(_) => 409,
            PatchError::Internal(_) => 500,
        }
    }

    /// `reason` of the Status (`metav1.StatusReason`); empty for plain errors (StatusReasonUnknown).
    pub fn reason(&self) -> &'static str {
        match self {
            PatchError::BadRequest(_) => "BadRequest",
            PatchError::Invalid { .. } => "Invalid",
            PatchError::TooManyOperations { .. } => "RequestEntityTooLarge",
            PatchError::UnsupportedMediaType { .. } => "UnsupportedMediaType",
            PatchError::Conflicts(_) => "Conflict",
            PatchError::Internal(_) => "",
        }
    }

    /// `message` of the Status, as the apiserver writes it.
    pub fn message(&self) -> String {
        match self {
            PatchError::Invalid { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}

/// fieldmanager `getConflictMessage`: one conflict inline, several grouped by manager (sorted).
fn conflict_message(conflicts: &[(String, String)]) -> String {
    if let [(manager, path)] = conflicts {
        return format!("Apply failed with 1 conflict: conflict with {manager}: {path}");
    }
    let mut by_manager: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for (manager, path) in conflicts {
        by_manager.entry(manager).or_default().push(path);
    }
    let mut lines = Vec::new();
    for (manager, paths) in by_manager {
        lines.push(format!("conflicts with {manager}:"));
        lines.extend(paths.into_iter().map(|p| format!("- {p}")));
    }
    format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_messages() {
        let cases: Vec<(PatchError, u16, &str, &str)> = vec![
            (PatchError::BadRequest("Invalid JSON Patch".into()), 400, "BadRequest", "Invalid JSON Patch"),
            (
                PatchError::invalid("testing value /x failed: test failed"),
                422,
                "Invalid",
                GENERIC_INVALID_MESSAGE,
            ),
            (
                PatchError::TooManyOperations { max: 10000, got: 10001 },
                413,
                "RequestEntityTooLarge",
                "The allowed maximum operations in a JSON patch is 10000, got 10001",
            ),
            (
                PatchError::strategic_merge_unsupported(),
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ),
            (PatchError::Internal("boom".into()), 500, "", "boom"),
        ];
        for (err, status, reason, message) in cases {
            assert_eq!(err.http_status(), status, "{err:?}");
            assert_eq!(err.reason(), reason, "{err:?}");
            assert_eq!(err.message(), message, "{err:?}");
        }
    }
}
