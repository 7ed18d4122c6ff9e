//! The codec against itself (every served kind, every field, JSON → protobuf → JSON) and against
//! an independent implementation of the same messages (k8s-pb's prost types).

use serde_json::{Map, Value, json};

use super::codec::{self, decode_enveloped, encode_enveloped};
use super::schema::{FieldType, Label, MessageId, Schema, Special, schema};

/// A value for every field of a message, each distinct enough that a swapped tag shows.
fn example(schema: &Schema, id: MessageId, depth: usize, seed: &mut u64) -> Value {
    let message = schema.message(id);
    if let Some(special) = message.special {
        *seed += 1;
        return match special {
            Special::Time => json!(format!("2026-11-24T10:{:02}:00Z", *seed % 60)),
            Special::MicroTime => json!(format!("2026-11-24T10:00:00.{:06}Z", *seed % 1_000_000)),
            Special::Duration => json!("1m30s"),
            Special::Quantity => json!(format!("{}m", *seed)),
            Special::IntOrString if seed.is_multiple_of(2) => json!(*seed as i32),
            Special::IntOrString => json!(format!("port-{seed}")),
            Special::RawExtension => json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}),
            Special::FieldsV1 => json!({"f:metadata": {"f:labels": {".": {}}}}),
        };
    }
    let mut out = Map::new();
    for field in &message.fields {
        if depth > 10 && matches!(field.ty, FieldType::Message(_)) {
            continue;
        }
        let one = |seed: &mut u64| scalar_or_message(schema, field.ty, depth, seed);
        match field.label {
            Label::Optional => {
                out.insert(field.json.clone(), one(seed));
            }
            Label::Repeated => {
                out.insert(field.json.clone(), json!([one(seed), one(seed)]));
            }
            Label::Map => {
                out.insert(field.json.clone(), json!({"a": one(seed), "b/c": one(seed)}));
            }
            Label::Inline => {
                if let Value::Object(inner) = one(seed) {
                    out.extend(inner);
                }
            }
        }
    }
    Value::Object(out)
}

fn scalar_or_message(schema: &Schema, ty: FieldType, depth: usize, seed: &mut u64) -> Value {
    *seed += 1;
    let n = *seed as i64;
    match ty {
        FieldType::String => json!(format!("s{n}")),
        FieldType::Bytes => json!(base64_of(&format!("bytes {n}"))),
        FieldType::Bool => json!(n % 2 == 0),
        FieldType::Int32 => json!(if n % 3 == 0 { -(n as i32) } else { n as i32 }),
        FieldType::Int64 => json!(if n % 3 == 0 { -n * 1_000_000_007 } else { n * 1_000_000_007 }),
        FieldType::Uint32 | FieldType::Uint64 => json!(n),
        FieldType::Double | FieldType::Float => json!(n as f64 + 0.5),
        FieldType::Message(id) => example(schema, id, depth + 1, seed),
    }
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn full_object(api_version: &str, kind: &str) -> Value {
    let schema = schema();
    let id = schema.kind(api_version, kind).expect("kind in the schema");
    let mut seed = 0;
    let mut object = example(schema, id, 0, &mut seed);
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    object
}

#[test]
fn every_served_kind_round_trips_through_protobuf_losing_nothing() {
    let schema = schema();
    let registry = crate::resources::Registry::default();
    let mut checked = 0;
    for rt in registry.all().iter().filter(|rt| rt.group != "apiextensions.k8s.io") {
        for kind in [rt.kind.clone(), rt.list_kind()] {
            let api_version = rt.api_version();
            assert!(
                schema.kind(&api_version, &kind).is_some(),
                "no protobuf message for {api_version} {kind}"
            );
            let object = full_object(&api_version, &kind);
            let body = encode_enveloped(schema, &object).expect("a known kind");
            let back = decode_enveloped(schema, &body, 0).expect("decodes");
            assert_eq!(back, object, "{api_version} {kind} changed in a round trip");
            checked += 1;
        }
    }
    assert!(checked >= 40, "only {checked} kinds checked");
}

#[test]
fn zero_values_a_typed_client_writes_are_read_as_json_leaves_them() {
    // gogo writes a non-pointer string even when empty and a zero Time as an empty message.
    let schema = schema();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "", "creationTimestamp": "1970-01-01T00:00:00Z"}, "spec": {"containers": [{"name": "c", "image": "busybox", "stdin": false}], "restartPolicy": ""}});
    let body = encode_enveloped(schema, &pod).expect("known kind");
    let back = decode_enveloped(schema, &body, 0).expect("decodes");
    assert_eq!(
        back,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox", "stdin": false}]}})
    );
}

/// Our bytes, read by prost into k8s-pb's types and written back by prost, read by us: the same
/// object. A wrong field number, wire type or map layout would lose or garble a field.
fn agrees_with_k8s_pb<M: prost::Message + Default>(api_version: &str, kind: &str) {
    let schema = schema();
    let id = schema.kind(api_version, kind).expect("known kind");
    let object = full_object(api_version, kind);
    let ours = codec::encode(schema, id, &object);
    let typed = M::decode(ours.as_slice()).unwrap_or_else(|e| panic!("k8s-pb cannot read our {kind}: {e}"));
    let theirs = typed.encode_to_vec();
    let mut back = codec::decode(schema, id, &theirs).expect("we read k8s-pb's bytes");
    back["apiVersion"] = json!(api_version);
    back["kind"] = json!(kind);
    assert_eq!(back, object, "{kind} differs after k8s-pb");
    assert_eq!(theirs.len(), ours.len(), "{kind}: prost wrote a different size");
}

#[test]
fn encoding_agrees_with_k8s_pb() {
    use k8s_pb::api;
    agrees_with_k8s_pb::<api::core::v1::Pod>("v1", "Pod");
    agrees_with_k8s_pb::<api::core::v1::Namespace>("v1", "Namespace");
    agrees_with_k8s_pb::<api::core::v1::ConfigMap>("v1", "ConfigMap");
    agrees_with_k8s_pb::<api::core::v1::Secret>("v1", "Secret");
    agrees_with_k8s_pb::<api::core::v1::Event>("v1", "Event");
    agrees_with_k8s_pb::<api::core::v1::Node>("v1", "Node");
    agrees_with_k8s_pb::<api::batch::v1::Job>("batch/v1", "Job");
    agrees_with_k8s_pb::<api::batch::v1::CronJob>("batch/v1", "CronJob");
    agrees_with_k8s_pb::<api::batch::v1::JobList>("batch/v1", "JobList");
    agrees_with_k8s_pb::<api::apps::v1::Deployment>("apps/v1", "Deployment");
    agrees_with_k8s_pb::<api::coordination::v1::Lease>("coordination.k8s.io/v1", "Lease");
    agrees_with_k8s_pb::<api::events::v1::Event>("events.k8s.io/v1", "Event");
    agrees_with_k8s_pb::<api::policy::v1::Eviction>("policy/v1", "Eviction");
    agrees_with_k8s_pb::<k8s_pb::apimachinery::pkg::apis::meta::v1::Status>("v1", "Status");
    agrees_with_k8s_pb::<k8s_pb::apimachinery::pkg::apis::meta::v1::DeleteOptions>("v1", "DeleteOptions");
}

#[test]
fn go_durations_parse_as_time_parse_duration() {
    // time.ParseDuration's examples and edge cases.
    for (text, nanos) in [
        ("0", 0),
        ("0s", 0),
        ("1.5h", 5_400_000_000_000),
        ("1h30m", 5_400_000_000_000),
        ("-1m0s", -60_000_000_000),
        ("300ms", 300_000_000),
        ("2h45m10.5s", 9_910_500_000_000),
        ("1µs", 1_000),
        ("1us", 1_000),
        ("7ns", 7),
    ] {
        assert_eq!(codec::parse_go_duration(text), Some(nanos), "{text}");
    }
    for bad in ["", "1", "1x", "h", "--1s", "1.2.3s"] {
        assert_eq!(codec::parse_go_duration(bad), None, "{bad:?}");
    }
}

#[test]
fn malformed_bodies_are_errors_never_panics() {
    use proptest::prelude::*;
    let schema = schema();
    let pod = encode_enveloped(schema, &full_object("v1", "Pod")).expect("known kind");
    proptest!(ProptestConfig::with_cases(2000), |(cut in 0..pod.len(), flips in proptest::collection::vec((0..pod.len(), any::<u8>()), 0..4))| {
        let mut body = pod[..cut].to_vec();
        for (at, byte) in flips {
            if at < body.len() {
                body[at] = byte;
            }
        }
        let _ = decode_enveloped(schema, &body, 0);
    });
    proptest!(ProptestConfig::with_cases(2000), |(body in proptest::collection::vec(any::<u8>(), 0..256))| {
        let mut enveloped = super::envelope::MAGIC.to_vec();
        enveloped.extend(body);
        let _ = decode_enveloped(schema, &enveloped, 0);
    });
}

#[test]
fn deeply_nested_embedded_objects_are_refused() {
    let schema = schema();
    // A RawExtension holding an enveloped object holding a RawExtension … deeper than the limit.
    let mut body = codec::envelope("v1", "Status", &[]);
    for _ in 0..200 {
        let mut raw = super::wire::Writer::default();
        raw.bytes(1, &body);
        let mut event = super::wire::Writer::default();
        event.bytes(1, b"ADDED");
        event.bytes(2, &raw.into_bytes());
        body = codec::envelope("v1", "WatchEvent", &event.into_bytes());
    }
    assert!(decode_enveloped(schema, &body, 0).is_err());
}
