use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::{ProtobufError, delete_options, envelope};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field_varint(out: &mut Vec<u8>, number: u32, v: u64) {
    varint(out, u64::from(number) << 3);
    varint(out, v);
}

fn field_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    varint(out, (u64::from(number) << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Wraps a message as apimachinery's protobuf serializer does: prefix, then runtime.Unknown.
fn enveloped(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    field_bytes(&mut type_meta, 1, api_version.as_bytes());
    field_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = envelope::MAGIC.to_vec();
    field_bytes(&mut out, 1, &type_meta);
    field_bytes(&mut out, 2, raw);
    field_bytes(&mut out, 3, b"");
    field_bytes(&mut out, 4, b"");
    out
}

/// The DeleteOptions kubectl drain sends (gracePeriodSeconds -1 is a 10-byte varint).
fn drain_delete_options() -> Vec<u8> {
    let mut pre = Vec::new();
    field_bytes(&mut pre, 1, b"8f2c");
    field_bytes(&mut pre, 2, b"42");
    let mut raw = Vec::new();
    field_varint(&mut raw, 1, (-1i64) as u64);
    field_bytes(&mut raw, 2, &pre);
    field_varint(&mut raw, 3, 0);
    field_bytes(&mut raw, 4, b"Foreground");
    field_bytes(&mut raw, 5, b"All");
    enveloped("v1", "DeleteOptions", &raw)
}

#[test]
fn envelope_reads_type_meta_and_raw() {
    let body = enveloped("policy/v1", "Eviction", b"\x0a\x00");
    let unknown = envelope::decode(&body).unwrap();
    assert_eq!(unknown.api_version, "policy/v1");
    assert_eq!(unknown.kind, "Eviction");
    assert_eq!(unknown.raw, b"\x0a\x00");
}

/// apimachinery protobuf.Serializer.Decode: data without the prefix is rejected with this text.
#[test]
fn envelope_without_prefix_is_rejected_with_upstream_text() {
    let err = envelope::decode(b"{\"kind\":\"DeleteOptions\"}").unwrap_err();
    assert_eq!(err, ProtobufError::MissingPrefix);
    assert_eq!(
        err.to_string(),
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    );
}

#[test]
fn delete_options_decode_to_their_json_form() {
    let value = delete_options::decode(&drain_delete_options()).unwrap();
    assert_eq!(
        value,
        json!({
            "gracePeriodSeconds": -1,
            "preconditions": {"uid": "8f2c", "resourceVersion": "42"},
            "orphanDependents": false,
            "propagationPolicy": "Foreground",
            "dryRun": ["All"],
        })
    );
}

#[test]
fn delete_options_of_another_kind_are_rejected() {
    let body = enveloped("v1", "Pod", b"");
    assert_eq!(delete_options::decode(&body).unwrap_err(), ProtobufError::UnexpectedKind("Pod".into()));
}

#[test]
fn truncated_and_malformed_messages_are_errors() {
    let body = drain_delete_options();
    for cut in envelope::MAGIC.len()..body.len() {
        // Every strict prefix either decodes (a field boundary) or errors; none panics.
        let _ = delete_options::decode(&body[..cut]);
    }
    let mut overflow = envelope::MAGIC.to_vec();
    overflow.extend_from_slice(&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    assert_eq!(envelope::decode(&overflow).unwrap_err(), ProtobufError::IntegerOverflow);
    let mut long = envelope::MAGIC.to_vec();
    long.extend_from_slice(&[0x12, 0x7f, 0x00]);
    assert_eq!(envelope::decode(&long).unwrap_err(), ProtobufError::UnexpectedEof);
    let mut group = envelope::MAGIC.to_vec();
    group.extend_from_slice(&[0x0b]);
    assert_eq!(envelope::decode(&group).unwrap_err(), ProtobufError::IllegalWireType(3));
    let mut wrong = envelope::MAGIC.to_vec();
    field_varint(&mut wrong, 2, 5);
    assert_eq!(envelope::decode(&wrong).unwrap_err(), ProtobufError::WrongWireType("Raw".into()));
}

/// Random and mutated bodies never panic the decoder (issue 9 §6).
#[test]
fn random_and_mutated_bodies_never_panic() {
    let mut rng = SmallRng::seed_from_u64(9);
    let seed = drain_delete_options();
    for _ in 0..20_000 {
        let mut body = if rng.random_bool(0.5) {
            seed.clone()
        } else {
            let len = rng.random_range(0..64);
            let mut b = envelope::MAGIC.to_vec();
            b.extend((0..len).map(|_| rng.random::<u8>()));
            b
        };
        for _ in 0..rng.random_range(1..6) {
            let at = rng.random_range(0..body.len());
            match rng.random_range(0..3) {
                0 => body[at] = rng.random(),
                1 => body.truncate(at.max(1)),
                _ => body.insert(at, rng.random()),
            }
        }
        let _ = delete_options::decode(&body);
    }
}
