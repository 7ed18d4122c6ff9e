//! Label, field and shard selectors as the kube-apiserver parses and evaluates them.
//!
//! Pure functions only: parsing happens once per request, matching happens for every event
//! of every watcher, so the parsed forms are pre-validated and `matches` borrows the object's
//! data without allocating.
//!
//! Upstream sources reproduced here (k8s 1.36/1.37 era):
//! - `apimachinery/pkg/labels/selector.go` (lexer, parser, error texts) and
//!   `apimachinery/pkg/api/validate/content` (label key/value validation texts) → [`label`].
//! - `apimachinery/pkg/fields/selector.go` (`ParseSelector`, `\` escaping) → [`field`].
//! - `pkg/apis/*/v*/conversion.go` (`AddFieldLabelConversionFunc`: which field labels a kind
//!   accepts, and the 400 text for one it does not), `runtime.DefaultMetaV1FieldSelectorConversion`
//!   and the registries' `ToSelectableFields` → [`fields_by_kind`].
//! - KEP-5866 `shardSelector`: `apiserver/pkg/sharding/parser.go` (CEL grammar, error texts) and
//!   `apimachinery/pkg/sharding` (FNV-1a, `[start, end)` ranges, `String()` echo) → [`shard`].

mod cel;
pub mod field;
pub mod fields_by_kind;
pub mod label;
pub mod shard;

pub use field::{FieldOp, FieldRequirement, FieldSelector};
pub use fields_by_kind::{check_fields, field_value, field_value_ref};
pub use label::{LabelOp, LabelRequirement, LabelSelector};
pub use shard::{ShardKey, ShardRange, ShardSelector, fnv1a64};

/// A selector the apiserver would reject. `Display` is the `message` of the apiserver's
/// Status; every variant is answered as HTTP 400 with reason `BadRequest`
/// (`errors.NewBadRequest(err.Error())` in the list/watch handlers).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// `labelSelector` did not parse, e.g.
    /// `unable to parse requirement: <nil>: Invalid value: "a b": name part must consist of …`.
    #[error("{0}")]
    Label(String),
    /// `fieldSelector` did not parse, e.g. `invalid selector: 'x'; can't understand 'x'`.
    #[error("{0}")]
    Field(String),
    /// `fieldSelector` names a field the kind does not support, e.g.
    /// `field label not supported: spec.foo` or
    /// `"x" is not a known field selector: only "metadata.name", "metadata.namespace"`.
    #[error("{0}")]
    UnknownField(String),
    /// `shardSelector` did not parse (KEP-5866), e.g.
    /// `shard range start 0x8000000000000000 must be less than end 0x0000000000000000`.
    #[error("{0}")]
    Shard(String),
}

impl SelectorError {
    /// The HTTP status the sim answers with.
    pub fn status_code(&self) -> u16 {
        400
    }

    /// The Status `reason`.
    pub fn reason(&self) -> &'static str {
        "BadRequest"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go `strconv.Quote` behaviour (strconv/quote_test.go TestQuote, the cases that apply to
    /// valid UTF-8).

    #[test]
    fn every_error_is_a_bad_request() {
        for e in [
            SelectorError::Label("l".into()),
            SelectorError::Field("f".into()),
            SelectorError::UnknownField("u".into()),
            SelectorError::Shard("s".into()),
        ] {
            assert_eq!(e.status_code(), 400);
            assert_eq!(e.reason(), "BadRequest");
            assert_eq!(e.to_string().len(), 1);
        }
    }
}
