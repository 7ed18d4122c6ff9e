//! `meta/v1 DeleteOptions` in protobuf (kubectl drain, client-go) to the JSON the sim reads.

use serde_json::Value;

use super::ProtobufError;
use super::schema::schema;
use super::{codec, envelope};

/// Decodes an enveloped DeleteOptions into its JSON form. The envelope may leave the kind out
/// (the handler knows what it expects), but may not name another one.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let unknown = envelope::decode(body)?;
    if !unknown.kind.is_empty() && unknown.kind != "DeleteOptions" {
        return Err(ProtobufError::UnexpectedKind(unknown.kind));
    }
    let schema = schema();
    let id =
        schema.kind("v1", "DeleteOptions").ok_or(ProtobufError::UnexpectedKind("DeleteOptions".into()))?;
    codec::decode(schema, id, unknown.raw)
}
