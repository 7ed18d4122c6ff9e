//! `meta/v1 DeleteOptions` in protobuf (kubectl drain, client-go) to the JSON the sim reads.

use serde_json::{Map, Value};

use super::ProtobufError;
use super::envelope;
use super::wire::FieldReader;

/// Decodes an enveloped DeleteOptions into its JSON form (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto).
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let unknown = envelope::decode(body)?;
    if !unknown.kind.is_empty() && unknown.kind != "DeleteOptions" {
        return Err(ProtobufError::UnexpectedKind(unknown.kind));
    }
    let mut out = Map::new();
    let mut dry_run = Vec::new();
    let mut fields = FieldReader::new(unknown.raw);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            // int64 travels as a two's-complement varint.
            1 => {
                let grace = value.as_varint("GracePeriodSeconds")? as i64;
                out.insert("gracePeriodSeconds".into(), grace.into());
            }
            2 => {
                out.insert("preconditions".into(), preconditions(value.as_bytes("Preconditions")?)?);
            }
            3 => {
                let orphan = value.as_varint("OrphanDependents")? != 0;
                out.insert("orphanDependents".into(), orphan.into());
            }
            4 => {
                out.insert("propagationPolicy".into(), value.as_string("PropagationPolicy")?.into());
            }
            5 => dry_run.push(Value::String(value.as_string("DryRun")?)),
            6 => {
                let ignore = value.as_varint("IgnoreStoreReadErrorWithClusterBreakingPotential")? != 0;
                out.insert("ignoreStoreReadErrorWithClusterBreakingPotential".into(), ignore.into());
            }
            _ => {}
        }
    }
    if !dry_run.is_empty() {
        out.insert("dryRun".into(), Value::Array(dry_run));
    }
    Ok(Value::Object(out))
}

fn preconditions(message: &[u8]) -> Result<Value, ProtobufError> {
    let mut out = Map::new();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => {
                out.insert("uid".into(), value.as_string("UID")?.into());
            }
            2 => {
                out.insert("resourceVersion".into(), value.as_string("ResourceVersion")?.into());
            }
            _ => {}
        }
    }
    Ok(Value::Object(out))
}
