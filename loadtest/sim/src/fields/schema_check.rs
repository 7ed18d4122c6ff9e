//! A fast answer to "would the typed round trip drop anything from this object?", from the
//! protobuf schema table the sim already generates from its dependencies (`protobuf/schema.rs`:
//! every field's JSON name and type, from k8s-pb and k8s-openapi).
//!
//! Most writes (a controller's pods, status updates) carry only known fields of the right JSON
//! types, and for them the typed round trip over the k8s-openapi struct (about 20 µs for a pod)
//! finds nothing. This walk proves that much in a fraction of the time. It answers only when it
//! is certain: an unknown member, a null, a JSON type the field does not decode from, or a value
//! whose content the typed decoder checks and this walk does not (bytes, unsigned numbers) makes
//! it give up, and the caller goes the typed way, which remains the reference
//! (`fields/schema_check_tests.rs` compares the two).

use serde_json::{Map, Value};

use super::Segment;
use crate::protobuf::schema::{Field, FieldType, Label, MessageId, Schema, Special, schema};

/// The empty members of `obj` (as paths, in document order) when every member of it is one the
/// typed decoder of its kind keeps as it is; `None` when unsure, or when the kind is not in the
/// schema table.
pub fn clean_empties(obj: &Value, api_version: &str, kind: &str) -> Option<Vec<Vec<Segment>>> {
    let schema = schema();
    let root = schema.kind(api_version, kind)?;
    let Value::Object(members) = obj else { return None };
    let mut walk = Walk { schema, segments: Vec::new(), empties: Vec::new() };
    for (key, value) in members {
        // TypeMeta is the object's envelope in protobuf, a member in JSON.
        if key == "apiVersion" || key == "kind" {
            if !value.is_string() {
                return None;
            }
            continue;
        }
        let field = find_field(schema, root, key)?;
        walk.member(key, value, field)?;
    }
    Some(walk.empties)
}

struct Walk<'s, 'v> {
    schema: &'s Schema,
    /// The path to the member being walked, borrowed from the object: an owned path is made
    /// only for an empty member (allocating a key per member was a good part of the walk).
    segments: Vec<Step<'v>>,
    empties: Vec<Vec<Segment>>,
}

/// One step of the path being walked.
#[derive(Clone, Copy)]
enum Step<'v> {
    Key(&'v str),
    Index(usize),
}

impl<'v> Walk<'_, 'v> {
    /// A member of a message: a known field's value.
    fn member(&mut self, key: &'v str, value: &'v Value, field: &Field) -> Option<()> {
        self.segments.push(Step::Key(key));
        let empty = match value {
            Value::Object(m) => m.is_empty(),
            Value::Array(a) => a.is_empty(),
            _ => false,
        };
        // managedFields' fieldsV1 is free-form: `{}` there is a value (as the typed walk says).
        if empty && !self.in_managed_fields() {
            let path = self
                .segments
                .iter()
                .map(|s| match *s {
                    Step::Key(k) => Segment::Key(k.to_string()),
                    Step::Index(i) => Segment::Index(i),
                })
                .collect();
            self.empties.push(path);
        }
        let ok = match field.label {
            Label::Repeated => match value {
                Value::Array(items) => items.iter().enumerate().try_for_each(|(i, item)| {
                    self.segments.push(Step::Index(i));
                    let ok = self.value(item, field.ty);
                    self.segments.pop();
                    ok
                }),
                _ => None,
            },
            // Map keys are strings in JSON already; their values are not walked for empties
            // (a map's values are whole values, never omitted).
            Label::Map => match value {
                Value::Object(entries) => entries.values().try_for_each(|v| self.map_value(v, field.ty)),
                _ => None,
            },
            Label::Optional | Label::Inline => self.value(value, field.ty),
        };
        self.segments.pop();
        ok
    }

    fn in_managed_fields(&self) -> bool {
        matches!(self.segments.first(), Some(Step::Key("metadata")))
            && matches!(self.segments.get(1), Some(Step::Key("managedFields")))
    }

    fn map_value(&mut self, value: &'v Value, ty: FieldType) -> Option<()> {
        match ty {
            FieldType::String => value.is_string().then_some(()),
            // Nested messages in maps are rare (none in the served kinds' hot paths): the typed
            // way handles them.
            FieldType::Message(id) => match self.schema.message(id).special {
                Some(special) => scalar_special(value, special),
                None => None,
            },
            scalar => scalar_ok(value, scalar),
        }
    }

    fn value(&mut self, value: &'v Value, ty: FieldType) -> Option<()> {
        match ty {
            FieldType::Message(id) => {
                let message = self.schema.message(id);
                match message.special {
                    // The typed walk takes managedFields' fieldsV1 as it is (free-form).
                    Some(Special::FieldsV1) if self.in_managed_fields() => (!value.is_null()).then_some(()),
                    Some(special) => scalar_special(value, special),
                    None => {
                        let Value::Object(members) = value else { return None };
                        self.message(id, members)
                    }
                }
            }
            scalar => scalar_ok(value, scalar),
        }
    }

    fn message(&mut self, id: MessageId, members: &'v Map<String, Value>) -> Option<()> {
        for (key, value) in members {
            let field = find_field(self.schema, id, key)?;
            self.member(key, value, field)?;
        }
        Some(())
    }
}

/// The field `key` names in message `id`, looking into its inlined messages too.
fn find_field<'s>(schema: &'s Schema, id: MessageId, key: &str) -> Option<&'s Field> {
    let message = schema.message(id);
    message.field_named(key).or_else(|| {
        message.fields.iter().filter(|f| f.label == Label::Inline).find_map(|f| match f.ty {
            FieldType::Message(inner) => find_field(schema, inner, key),
            _ => None,
        })
    })
}

/// A scalar field's JSON value, as the typed decoder takes it without complaint.
fn scalar_ok(value: &Value, ty: FieldType) -> Option<()> {
    let ok = match ty {
        FieldType::String => value.is_string(),
        FieldType::Bool => value.is_boolean(),
        FieldType::Int32 => value.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        FieldType::Int64 => value.as_i64().is_some(),
        FieldType::Double | FieldType::Float => value.is_number(),
        // Base64 text and unsigned numbers are checked by the typed decoder in ways not
        // reproduced here.
        FieldType::Bytes | FieldType::Uint32 | FieldType::Uint64 | FieldType::Message(_) => false,
    };
    ok.then_some(())
}

/// The JSON forms of apimachinery's custom-marshalled types that k8s-openapi decodes.
fn scalar_special(value: &Value, special: Special) -> Option<()> {
    let ok = match special {
        Special::Time | Special::MicroTime => {
            value.as_str().is_some_and(|s| s.parse::<jiff::Timestamp>().is_ok())
        }
        Special::Duration | Special::Quantity => value.is_string(),
        Special::IntOrString => value.is_string() || value.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        // Embedded JSON: the typed walk looks inside it for empty members, which this walk does
        // not; managedFields' fieldsV1 is let through by the caller.
        Special::RawExtension | Special::FieldsV1 => false,
    };
    ok.then_some(())
}
