//! The protobuf schema of every kind the sim serves, read from `schema.table`, which
//! `tests/protobuf_schema.rs` generates from k8s-pb (field numbers, wire types) and k8s-openapi
//! (JSON names, kinds).

use std::collections::HashMap;
use std::sync::LazyLock;

/// FNV-1a, for the fixed tables of field names and numbers: SipHash's setup was most of the cost
/// of looking a member's field up, which the schema walk of every write does once per member.
/// The tables are built from the schema, not from input, so a weaker hash costs nothing there.
type FnvMap<K, V> = HashMap<K, V, fnv::FnvBuildHasher>;

/// A message's index in [`Schema::messages`].
pub type MessageId = usize;

/// A scalar or message type of a field or map value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    String,
    Bytes,
    Bool,
    Int32,
    Int64,
    Uint32,
    Uint64,
    Double,
    Float,
    Message(MessageId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    Optional,
    Repeated,
    /// `map<string, value>`: repeated entries with the key at 1 and the value at 2.
    Map,
    /// A Go struct embedded with `json:",inline"`: a message field whose fields are the parent's
    /// in JSON.
    Inline,
}

#[derive(Debug, Clone)]
pub struct Field {
    pub tag: u32,
    pub json: String,
    pub label: Label,
    /// The map's value type for [`Label::Map`].
    pub ty: FieldType,
}

/// Messages whose JSON form is not an object of their fields (apimachinery's custom marshallers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// `metav1.Time`: RFC 3339 in seconds.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds.
    MicroTime,
    /// `metav1.Duration`: Go's duration text.
    Duration,
    /// `resource.Quantity`: its canonical text.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `runtime.RawExtension`: embedded JSON (or an enveloped protobuf object).
    RawExtension,
    /// `metav1.FieldsV1`: embedded JSON.
    FieldsV1,
}

#[derive(Debug, Clone)]
pub struct Message {
    pub name: String,
    pub fields: Vec<Field>,
    pub special: Option<Special>,
    by_tag: FnvMap<u32, usize>,
    /// Fields that are not inlined, by JSON name.
    by_json: FnvMap<String, usize>,
}

impl Message {
    pub fn field(&self, tag: u32) -> Option<&Field> {
        self.by_tag.get(&tag).map(|&i| &self.fields[i])
    }

    /// The field named `json` in JSON, not looking into inlined messages.
    pub fn field_named(&self, json: &str) -> Option<&Field> {
        self.by_json.get(json).map(|&i| &self.fields[i])
    }
}

#[derive(Debug, Default)]
pub struct Schema {
    pub messages: Vec<Message>,
    by_name: HashMap<String, MessageId>,
    kinds: HashMap<(String, String), MessageId>,
}

static TABLE: &str = include_str!("schema.table");
static SCHEMA: LazyLock<Schema> = LazyLock::new(|| Schema::parse(TABLE));

/// The schema of the sim's built-in kinds.
pub fn schema() -> &'static Schema {
    &SCHEMA
}

impl Schema {
    /// The message of a kind (`("batch/v1", "Job")`, `("v1", "Status")`, `("v1", "PodList")`).
    pub fn kind(&self, api_version: &str, kind: &str) -> Option<MessageId> {
        self.kinds.get(&(api_version.to_string(), kind.to_string())).copied()
    }

    pub fn message(&self, id: MessageId) -> &Message {
        &self.messages[id]
    }

    pub fn by_name(&self, name: &str) -> Option<MessageId> {
        self.by_name.get(name).copied()
    }

    /// Every (apiVersion, kind) the table has a message for.
    pub fn kinds(&self) -> impl Iterator<Item = (&str, &str)> {
        self.kinds.keys().map(|(v, k)| (v.as_str(), k.as_str()))
    }

    /// Parses the generated table. The table is part of the build, so a malformed line is a bug
    /// caught by the schema tests, not input: it is skipped rather than trusted.
    fn parse(table: &str) -> Self {
        let mut schema = Schema::default();
        let lines: Vec<Vec<&str>> = table
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| l.split(' ').collect())
            .collect();
        for line in &lines {
            if let ["M", name] = line.as_slice() {
                schema.by_name.insert(name.to_string(), schema.messages.len());
                schema.messages.push(Message {
                    name: name.to_string(),
                    fields: Vec::new(),
                    special: special(name),
                    by_tag: FnvMap::default(),
                    by_json: FnvMap::default(),
                });
            }
        }
        let mut current = None;
        for line in &lines {
            match line.as_slice() {
                ["M", name] => current = schema.by_name.get(*name).copied(),
                ["K", api_version, kind, message] => {
                    if let Some(id) = schema.by_name.get(*message).copied() {
                        schema.kinds.insert((api_version.to_string(), kind.to_string()), id);
                    }
                }
                ["F", tag, json, label, rest @ ..] => {
                    let (Some(id), Ok(tag)) = (current, tag.parse()) else { continue };
                    let (label, ty) = match (*label, rest) {
                        ("map", [_key, value]) => (Label::Map, *value),
                        ("inline", [ty]) => (Label::Inline, *ty),
                        ("rep", [ty]) => (Label::Repeated, *ty),
                        (_, [ty]) => (Label::Optional, *ty),
                        _ => continue,
                    };
                    let Some(ty) = schema.field_type(ty) else { continue };
                    let message = &mut schema.messages[id];
                    message.by_tag.insert(tag, message.fields.len());
                    if label != Label::Inline {
                        message.by_json.insert(json.to_string(), message.fields.len());
                    }
                    message.fields.push(Field { tag, json: json.to_string(), label, ty });
                }
                _ => {}
            }
        }
        schema
    }

    fn field_type(&self, name: &str) -> Option<FieldType> {
        Some(match name {
            "string" => FieldType::String,
            "bytes" => FieldType::Bytes,
            "bool" => FieldType::Bool,
            "int32" => FieldType::Int32,
            "int64" => FieldType::Int64,
            "uint32" => FieldType::Uint32,
            "uint64" => FieldType::Uint64,
            "double" => FieldType::Double,
            "float" => FieldType::Float,
            message => FieldType::Message(self.by_name(message)?),
        })
    }
}

fn special(name: &str) -> Option<Special> {
    Some(match name {
        "apimachinery.pkg.apis.meta.v1.Time" => Special::Time,
        "apimachinery.pkg.apis.meta.v1.MicroTime" => Special::MicroTime,
        "apimachinery.pkg.apis.meta.v1.Duration" => Special::Duration,
        "apimachinery.pkg.apis.meta.v1.FieldsV1" => Special::FieldsV1,
        "apimachinery.pkg.api.resource.Quantity" => Special::Quantity,
        "apimachinery.pkg.util.intstr.IntOrString" => Special::IntOrString,
        "apimachinery.pkg.runtime.RawExtension" => Special::RawExtension,
        _ => return None,
    })
}
