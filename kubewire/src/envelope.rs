//! The `k8s\0` envelope around every Kubernetes protobuf body: a `runtime.Unknown` message.

use crate::ProtobufError;
use crate::wire::FieldReader;

/// The 4-byte prefix apimachinery's protobuf serializer writes before the `runtime.Unknown`.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// A decoded `runtime.Unknown` (k8s.io/apimachinery/pkg/runtime/generated.proto).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Unknown<'a> {
    pub api_version: String,
    pub kind: String,
    pub raw: &'a [u8],
    pub content_encoding: String,
    pub content_type: String,
}

/// Whether a body carries the envelope's prefix (JSON and YAML never start with a NUL-terminated `k8s`).
pub fn has_magic(body: &[u8]) -> bool {
    body.starts_with(MAGIC)
}

/// Strips the prefix and reads the `runtime.Unknown` around the object.
pub fn decode(body: &[u8]) -> Result<Unknown<'_>, ProtobufError> {
    let message = body.strip_prefix(MAGIC).ok_or(ProtobufError::MissingPrefix)?;
    let mut out = Unknown::default();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => {
                let mut type_meta = FieldReader::new(value.as_bytes("TypeMeta")?);
                while let Some((n, v)) = type_meta.next_field()? {
                    match n {
                        1 => out.api_version = v.as_string("APIVersion")?,
                        2 => out.kind = v.as_string("Kind")?,
                        _ => {}
                    }
                }
            }
            2 => out.raw = value.as_bytes("Raw")?,
            3 => out.content_encoding = value.as_string("ContentEncoding")?,
            4 => out.content_type = value.as_string("ContentType")?,
            _ => {}
        }
    }
    Ok(out)
}
