//! Field-level validation errors, rendered as the `causes` of a 422 Invalid Status the way
//! apimachinery's `field.ErrorList` is.

/// The `reason` of one cause, as apimachinery's `field.ErrorType` strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    Required,
    Invalid,
    Forbidden,
    Duplicate,
    NotSupported,
    TooLong,
    TooMany,
    NotFound,
}

impl FieldErrorKind {
    /// The `reason` string of a StatusCause.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::Forbidden => "FieldValueForbidden",
            Self::Duplicate => "FieldValueDuplicate",
            Self::NotSupported => "FieldValueNotSupported",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::NotFound => "FieldValueNotFound",
        }
    }
}

/// One invalid field. `message` is the full text apimachinery prints for it, for example
/// `spec.completions: Invalid value: 3: field is immutable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub kind: FieldErrorKind,
    pub field: String,
    pub message: String,
}

impl FieldError {
    fn new(kind: FieldErrorKind, field: impl Into<String>, detail: String) -> Self {
        Self { kind, field: field.into(), message: detail }
    }

    /// `field: Required value` (+ `: detail`).
    pub fn required(field: impl Into<String>, detail: &str) -> Self {
        let field = field.into();
        let message = with_detail(format!("{field}: Required value"), detail);
        Self::new(FieldErrorKind::Required, field, message)
    }

    /// `field: Invalid value: <value>: detail`; `value` is rendered as JSON like apimachinery
    /// renders scalars (strings quoted).
    pub fn invalid(field: impl Into<String>, value: &serde_json::Value, detail: &str) -> Self {
        let field = field.into();
        let message = with_detail(format!("{field}: Invalid value: {}", render_value(value)), detail);
        Self::new(FieldErrorKind::Invalid, field, message)
    }

    /// `field: Forbidden: detail`.
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        let field = field.into();
        let message = with_detail(format!("{field}: Forbidden"), detail);
        Self::new(FieldErrorKind::Forbidden, field, message)
    }

    /// `field: Duplicate value: <value>`.
    pub fn duplicate(field: impl Into<String>, value: &serde_json::Value) -> Self {
        let field = field.into();
        let message = format!("{field}: Duplicate value: {}", render_value(value));
        Self::new(FieldErrorKind::Duplicate, field, message)
    }

    /// `field: Unsupported value: <value>: supported values: "a", "b"`.
    pub fn not_supported(field: impl Into<String>, value: &serde_json::Value, supported: &[&str]) -> Self {
        let field = field.into();
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        let message = format!(
            "{field}: Unsupported value: {}: supported values: {}",
            render_value(value),
            list.join(", ")
        );
        Self::new(FieldErrorKind::NotSupported, field, message)
    }

    /// `field: Too long: may not be more than N bytes`.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        let field = field.into();
        let message = format!("{field}: Too long: may not be more than {max} bytes");
        Self::new(FieldErrorKind::TooLong, field, message)
    }

    /// `field: Not found: <value>`.
    pub fn not_found(field: impl Into<String>, value: &serde_json::Value) -> Self {
        let field = field.into();
        let message = format!("{field}: Not found: {}", render_value(value));
        Self::new(FieldErrorKind::NotFound, field, message)
    }

    /// `field: Too many: N: must have at most M items`.
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        let field = field.into();
        let message = format!("{field}: Too many: {actual}: must have at most {max} items");
        Self::new(FieldErrorKind::TooMany, field, message)
    }
}

fn with_detail(head: String, detail: &str) -> String {
    if detail.is_empty() { head } else { format!("{head}: {detail}") }
}

fn render_value(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => format!("{s:?}"),
        serde_json::Value::Null => "null".to_string(),
        other => other.to_string(),
    }
}
