//! One mapping between the sim's JSON objects and Kubernetes protobuf messages, driven by the
//! generated schema: the wire format as gogo-protobuf writes it, and the JSON form as
//! apimachinery's marshallers write it for the special types.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value};

use super::ProtobufError;
use super::envelope;
use super::schema::{Field, FieldType, Label, MessageId, Schema, Special};
use super::wire::{FieldReader, WireValue, Writer};

/// How deep messages may nest before a body is refused (gogo's default recursion limit).
const MAX_DEPTH: usize = 100;

/// Decodes one message (without envelope) into its JSON form.
pub fn decode(schema: &Schema, id: MessageId, bytes: &[u8]) -> Result<Value, ProtobufError> {
    decode_message(schema, id, bytes, 0)
}

/// Encodes a JSON object as one message (without envelope). Values the message cannot hold
/// (a field the kind does not have, a string where a number belongs) are left out, as a typed
/// client would never have had them.
pub fn encode(schema: &Schema, id: MessageId, value: &Value) -> Vec<u8> {
    let mut out = Writer::default();
    encode_message(schema, id, value, &mut out);
    out.into_bytes()
}

fn decode_message(
    schema: &Schema,
    id: MessageId,
    bytes: &[u8],
    depth: usize,
) -> Result<Value, ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep);
    }
    let message = schema.message(id);
    if let Some(special) = message.special {
        return decode_special(special, bytes, depth);
    }
    let mut out = Map::new();
    let mut reader = FieldReader::new(bytes);
    while let Some((tag, value)) = reader.next_field()? {
        let Some(field) = message.field(tag) else { continue };
        match field.label {
            Label::Optional => {
                let decoded = decode_value(schema, field, field.ty, value, depth)?;
                // gogo writes a Go string that is not a pointer even when empty; JSON leaves it out.
                if decoded.as_str() != Some("") && !decoded.is_null() {
                    out.insert(field.json.clone(), decoded);
                } else {
                    out.remove(&field.json);
                }
            }
            Label::Repeated => {
                let items = out.entry(field.json.clone()).or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(items) = items else { continue };
                match (field.ty, value) {
                    // A packed run of numbers (gogo writes them unpacked; protoc-style writers pack).
                    (ty, WireValue::Bytes(run)) if is_numeric(ty) => {
                        let mut run = FieldReader::packed(run);
                        while let Some(v) = run.next_packed(wire_type_of(ty))? {
                            items.push(decode_value(schema, field, ty, v, depth)?);
                        }
                    }
                    (ty, v) => items.push(decode_value(schema, field, ty, v, depth)?),
                }
            }
            Label::Inline => {
                let FieldType::Message(inner) = field.ty else { continue };
                if let Value::Object(fields) =
                    decode_message(schema, inner, value.as_bytes("inline")?, depth + 1)?
                {
                    out.extend(fields);
                }
            }
            Label::Map => {
                let entry = value.as_bytes(field_name(field))?;
                let (key, val) = decode_map_entry(schema, field, entry, depth)?;
                let map = out.entry(field.json.clone()).or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, val);
                }
            }
        }
    }
    Ok(Value::Object(out))
}

fn decode_map_entry(
    schema: &Schema,
    field: &Field,
    entry: &[u8],
    depth: usize,
) -> Result<(String, Value), ProtobufError> {
    let mut key = String::new();
    let mut val = None;
    let mut reader = FieldReader::new(entry);
    while let Some((tag, v)) = reader.next_field()? {
        match tag {
            1 => key = utf8(v.as_bytes(field_name(field))?, field)?,
            2 => val = Some(decode_value(schema, field, field.ty, v, depth)?),
            _ => {}
        }
    }
    let val = match val {
        Some(v) => v,
        // An absent value is the type's zero value.
        None => match field.ty {
            FieldType::String | FieldType::Bytes => Value::String(String::new()),
            FieldType::Bool => Value::Bool(false),
            FieldType::Message(id) => decode_message(schema, id, &[], depth + 1)?,
            _ => Value::from(0),
        },
    };
    Ok((key, val))
}

fn decode_value(
    schema: &Schema,
    field: &Field,
    ty: FieldType,
    value: WireValue<'_>,
    depth: usize,
) -> Result<Value, ProtobufError> {
    let name = field_name(field);
    Ok(match ty {
        FieldType::String => Value::String(utf8(value.as_bytes(name)?, field)?),
        FieldType::Bytes => Value::String(BASE64.encode(value.as_bytes(name)?)),
        FieldType::Bool => Value::Bool(value.as_varint(name)? != 0),
        // int32 and int64 travel as the two's complement of their 64-bit value.
        FieldType::Int32 => Value::from(value.as_varint(name)? as i64 as i32),
        FieldType::Int64 => Value::from(value.as_varint(name)? as i64),
        FieldType::Uint32 => Value::from(value.as_varint(name)? as u32),
        FieldType::Uint64 => Value::from(value.as_varint(name)?),
        FieldType::Double => match value {
            WireValue::Fixed64(bits) => number(f64::from_bits(bits)),
            _ => return Err(ProtobufError::WrongWireType(name.to_string())),
        },
        FieldType::Float => match value {
            WireValue::Fixed32(bits) => number(f64::from(f32::from_bits(bits))),
            _ => return Err(ProtobufError::WrongWireType(name.to_string())),
        },
        FieldType::Message(id) => decode_message(schema, id, value.as_bytes(name)?, depth + 1)?,
    })
}

fn decode_special(special: Special, bytes: &[u8], depth: usize) -> Result<Value, ProtobufError> {
    let mut ints = [0i64; 4];
    let mut texts: [Option<&[u8]>; 4] = [None; 4];
    let mut reader = FieldReader::new(bytes);
    while let Some((tag, value)) = reader.next_field()? {
        let slot = (tag as usize).min(3);
        match value {
            WireValue::Varint(v) => ints[slot] = v as i64,
            WireValue::Bytes(b) => texts[slot] = Some(b),
            _ => return Err(ProtobufError::WrongWireType("special".into())),
        }
    }
    let text = |slot: usize| -> Result<String, ProtobufError> {
        String::from_utf8(texts[slot].unwrap_or_default().to_vec())
            .map_err(|_| ProtobufError::InvalidUtf8("string".into()))
    };
    Ok(match special {
        Special::Time | Special::MicroTime => {
            let (seconds, nanos) = (ints[1], ints[2] as i32);
            if seconds == 0 && nanos == 0 {
                // Go's zero time marshals as null.
                return Ok(Value::Null);
            }
            Value::String(render_time(seconds, nanos, special == Special::MicroTime))
        }
        Special::Duration => Value::String(go_duration_signed(ints[1])),
        Special::Quantity => Value::String(text(1)?),
        Special::IntOrString => match ints[1] {
            1 => Value::String(text(3)?),
            _ => Value::from(ints[2] as i32),
        },
        Special::RawExtension | Special::FieldsV1 => {
            let raw = texts[1].unwrap_or_default();
            if raw.is_empty() {
                Value::Null
            } else if envelope::has_magic(raw) {
                decode_enveloped(super::schema::schema(), raw, depth + 1)?
            } else {
                serde_json::from_slice(raw).map_err(|_| ProtobufError::InvalidEmbeddedJson)?
            }
        }
    })
}

/// Decodes an enveloped body (`k8s\0` + `runtime.Unknown`) of a kind the schema knows, with
/// `apiVersion` and `kind` from the envelope.
pub fn decode_enveloped(schema: &Schema, body: &[u8], depth: usize) -> Result<Value, ProtobufError> {
    let unknown = envelope::decode(body)?;
    let id = schema
        .kind(&unknown.api_version, &unknown.kind)
        .ok_or_else(|| ProtobufError::UnknownKind(unknown.api_version.clone(), unknown.kind.clone()))?;
    let mut object = decode_message(schema, id, unknown.raw, depth)?;
    if let Value::Object(map) = &mut object {
        map.insert("apiVersion".into(), Value::String(unknown.api_version));
        map.insert("kind".into(), Value::String(unknown.kind));
    }
    Ok(object)
}

fn encode_message(schema: &Schema, id: MessageId, value: &Value, out: &mut Writer) {
    let message = schema.message(id);
    if let Some(special) = message.special {
        encode_special(special, value, out);
        return;
    }
    let Value::Object(object) = value else { return };
    for field in &message.fields {
        if field.label == Label::Inline {
            encode_value(schema, field.tag, field.ty, value, out);
            continue;
        }
        let Some(v) = object.get(&field.json).filter(|v| !v.is_null()) else { continue };
        match field.label {
            Label::Optional => encode_value(schema, field.tag, field.ty, v, out),
            Label::Repeated => {
                for item in v.as_array().into_iter().flatten() {
                    encode_value(schema, field.tag, field.ty, item, out);
                }
            }
            Label::Inline => {}
            Label::Map => {
                let Value::Object(map) = v else { continue };
                // gogo writes map entries in key order.
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for key in keys {
                    let mut entry = Writer::default();
                    entry.bytes(1, key.as_bytes());
                    encode_value(schema, 2, field.ty, &map[key], &mut entry);
                    out.bytes(field.tag, &entry.into_bytes());
                }
            }
        }
    }
}

fn encode_value(schema: &Schema, tag: u32, ty: FieldType, value: &Value, out: &mut Writer) {
    match ty {
        FieldType::String => {
            if let Some(s) = value.as_str() {
                out.bytes(tag, s.as_bytes());
            }
        }
        FieldType::Bytes => {
            if let Some(bytes) = value.as_str().and_then(|s| BASE64.decode(s).ok()) {
                out.bytes(tag, &bytes);
            }
        }
        FieldType::Bool => {
            if let Some(b) = value.as_bool() {
                out.varint_field(tag, u64::from(b));
            }
        }
        FieldType::Int32 | FieldType::Int64 => {
            if let Some(n) = value.as_i64() {
                let n = if ty == FieldType::Int32 { i64::from(n as i32) } else { n };
                out.varint_field(tag, n as u64);
            }
        }
        FieldType::Uint32 | FieldType::Uint64 => {
            if let Some(n) = value.as_u64() {
                out.varint_field(tag, n);
            }
        }
        FieldType::Double => {
            if let Some(f) = value.as_f64() {
                out.fixed64_field(tag, f.to_bits());
            }
        }
        FieldType::Float => {
            if let Some(f) = value.as_f64() {
                out.fixed32_field(tag, (f as f32).to_bits());
            }
        }
        FieldType::Message(id) => {
            let mut inner = Writer::default();
            encode_message(schema, id, value, &mut inner);
            out.bytes(tag, &inner.into_bytes());
        }
    }
}

fn encode_special(special: Special, value: &Value, out: &mut Writer) {
    match special {
        Special::Time | Special::MicroTime => {
            if let Some((seconds, nanos)) = value.as_str().and_then(parse_time) {
                out.varint_field(1, seconds as u64);
                if nanos != 0 {
                    out.varint_field(2, i64::from(nanos) as u64);
                }
            }
        }
        Special::Duration => {
            if let Some(nanos) = value.as_str().and_then(parse_go_duration) {
                out.varint_field(1, nanos as u64);
            }
        }
        Special::Quantity => match value {
            Value::String(s) => out.bytes(1, s.as_bytes()),
            Value::Number(n) => out.bytes(1, n.to_string().as_bytes()),
            _ => {}
        },
        Special::IntOrString => match value {
            Value::Number(n) => {
                out.varint_field(1, 0);
                out.varint_field(2, n.as_i64().unwrap_or_default() as i32 as i64 as u64);
            }
            Value::String(s) => {
                out.varint_field(1, 1);
                out.bytes(3, s.as_bytes());
            }
            _ => {}
        },
        Special::RawExtension | Special::FieldsV1 => {
            out.bytes(1, &serde_json::to_vec(value).unwrap_or_default());
        }
    }
}

/// Wraps a message in the envelope apimachinery's protobuf serializer writes.
pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Writer::default();
    type_meta.bytes(1, api_version.as_bytes());
    type_meta.bytes(2, kind.as_bytes());
    let mut unknown = Writer::default();
    unknown.bytes(1, &type_meta.into_bytes());
    unknown.bytes(2, raw);
    unknown.bytes(3, b"");
    unknown.bytes(4, b"");
    let mut out = envelope::MAGIC.to_vec();
    out.extend_from_slice(&unknown.into_bytes());
    out
}

/// Encodes a JSON object of a kind the schema knows, enveloped; `None` for other kinds.
pub fn encode_enveloped(schema: &Schema, object: &Value) -> Option<Vec<u8>> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    let id = schema.kind(api_version, kind)?;
    Some(envelope(api_version, kind, &encode(schema, id, object)))
}

fn is_numeric(ty: FieldType) -> bool {
    !matches!(ty, FieldType::String | FieldType::Bytes | FieldType::Message(_))
}

fn wire_type_of(ty: FieldType) -> u8 {
    match ty {
        FieldType::Double => 1,
        FieldType::Float => 5,
        _ => 0,
    }
}

fn field_name(field: &Field) -> &str {
    &field.json
}

fn utf8(bytes: &[u8], field: &Field) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| ProtobufError::InvalidUtf8(field.json.clone()))
}

fn number(f: f64) -> Value {
    serde_json::Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null)
}

fn render_time(seconds: i64, nanos: i32, micro: bool) -> String {
    let Ok(ts) = jiff::Timestamp::new(seconds, if micro { nanos / 1000 * 1000 } else { 0 }) else {
        return String::new();
    };
    if micro {
        format!("{}", ts.strftime("%Y-%m-%dT%H:%M:%S.%6fZ"))
    } else {
        format!("{}", ts.strftime("%Y-%m-%dT%H:%M:%SZ"))
    }
}

fn parse_time(text: &str) -> Option<(i64, i32)> {
    let ts: jiff::Timestamp = text.parse().ok()?;
    Some((ts.as_second(), ts.subsec_nanosecond()))
}

/// Go's `time.Duration.String()` for a signed number of nanoseconds.
fn go_duration_signed(nanos: i64) -> String {
    let text = crate::go_fmt::go_duration(std::time::Duration::from_nanos(nanos.unsigned_abs()));
    if nanos < 0 { format!("-{text}") } else { text }
}

/// Go's `time.ParseDuration`: an optional sign, then numbers with units (`1h30m`, `1.5s`, `300ms`).
pub fn parse_go_duration(text: &str) -> Option<i64> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * scale;
    }
    let nanos = total.round() as i64;
    Some(if negative { -nanos } else { nanos })
}
