//! Decoding API objects with what no controller reads stepped over as it is read, never built.
//!
//! kube-apiserver (and the sim) put `managedFields` on every object it answers with and every
//! watch event: a tree per field manager that `k8s_openapi` decodes into `serde_json::Value`
//! maps, which the stores' trim ([`crate::informer::trim`]) then dropped unread; a pod's spec
//! (containers, env, volumes) went the same way. Profiled, building and freeing those was about a
//! quarter of the worker's CPU per pod lifecycle. Decoded through [`Lean`], the parser steps over
//! them without allocating.
//!
//! What is skipped is a tree of [`Fields`] per kind ([`Cached::DECODED`], beside the trim it
//! anticipates): at each level, fields stepped over, or the only fields read, and the fields whose
//! values (objects, or lists of objects) have a tree of their own. A value with no tree of its own
//! is decoded as usual, with no cost added. The store still trims what it is given: the decode
//! skips only what the trim would drop.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{
    self, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};

use crate::informer::Cached;

/// `K` decoded without what its [`Cached::DECODED`] skips.
#[derive(Debug, Clone)]
pub struct Lean<K>(pub K);

impl<'de, K: Cached> de::Deserialize<'de> for Lean<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(Filtered { de: deserializer, fields: K::DECODED }).map(Lean)
    }
}

/// What a decode reads of a JSON object, by field name.
#[derive(Debug)]
pub struct Fields {
    /// Fields stepped over unread.
    pub skip: &'static [&'static str],
    /// When set, the only fields read; the rest are stepped over.
    pub only: Option<&'static [&'static str]>,
    /// Fields whose values (an object, or a list of objects) are read by their own `Fields`.
    pub nested: &'static [(&'static str, &'static Fields)],
}

impl Fields {
    /// Every field.
    pub const ALL: Fields = Fields { skip: &[], only: None, nested: &[] };

    /// An object's fields, its metadata without `managedFields`.
    pub const AN_OBJECT: Fields = Fields { skip: &[], only: None, nested: &[("metadata", &Self::METADATA)] };

    /// Object metadata without `managedFields`, which no controller reads.
    pub const METADATA: Fields = Fields { skip: &["managedFields"], only: None, nested: &[] };

    fn skips(&self, key: &str) -> bool {
        self.skip.contains(&key) || self.only.is_some_and(|only| !only.contains(&key))
    }

    fn nested(&self, key: &str) -> Option<&'static Fields> {
        self.nested.iter().find(|(k, _)| *k == key).map(|(_, f)| *f)
    }
}

/// A [`Deserializer`] whose maps read only what `fields` keeps.
struct Filtered<D> {
    de: D,
    fields: &'static Fields,
}

macro_rules! forward_deserialize {
    ($($method:ident),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
                self.de.$method(Wrapped { visitor, fields: self.fields })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Filtered<D> {
    type Error = D::Error;

    forward_deserialize!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_unit_struct(name, Wrapped { visitor, fields: self.fields })
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_newtype_struct(name, Wrapped { visitor, fields: self.fields })
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, D::Error> {
        self.de.deserialize_tuple(len, Wrapped { visitor, fields: self.fields })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_tuple_struct(name, len, Wrapped { visitor, fields: self.fields })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_struct(name, fields, Wrapped { visitor, fields: self.fields })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_enum(name, variants, Wrapped { visitor, fields: self.fields })
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// A visitor whose maps read only what `fields` keeps; options, newtypes and the elements of a
/// list keep the same `fields` (a list of objects is filtered object by object).
struct Wrapped<V> {
    visitor: V,
    fields: &'static Fields,
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
                self.visitor.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrapped<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.visitor.expecting(f)
    }

    forward_visit!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_f64(f64),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>),
    );

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        self.visitor.visit_some(Filtered { de, fields: self.fields })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        self.visitor.visit_newtype_struct(Filtered { de, fields: self.fields })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.visitor.visit_seq(Elements { seq, fields: self.fields })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.visitor.visit_map(Entries { map, fields: self.fields, value: None })
    }

    /// No field the trees name sits inside an enum variant.
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.visitor.visit_enum(data)
    }
}

/// A seed whose value is read by `fields`.
struct Seed<S> {
    seed: S,
    fields: &'static Fields,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Filtered { de, fields: self.fields })
    }
}

struct Elements<A> {
    seq: A,
    fields: &'static Fields,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Elements<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.seq.next_element_seed(Seed { seed, fields: self.fields })
    }

    fn size_hint(&self) -> Option<usize> {
        self.seq.size_hint()
    }
}

/// A map's entries, those `fields` skips stepped over.
struct Entries<A> {
    map: A,
    fields: &'static Fields,
    /// The tree of the value about to be read, if its key has one.
    value: Option<&'static Fields>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Entries<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(Key(key)) = self.map.next_key::<Key<'de>>()? else { return Ok(None) };
            if self.fields.skips(&key) {
                self.map.next_value::<IgnoredAny>()?;
                continue;
            }
            self.value = self.fields.nested(&key);
            return match key {
                Cow::Borrowed(k) => seed.deserialize(de::value::BorrowedStrDeserializer::new(k)).map(Some),
                Cow::Owned(k) => seed.deserialize(k.into_deserializer()).map(Some),
            };
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        match self.value.take() {
            Some(fields) => self.map.next_value_seed(Seed { seed, fields }),
            None => self.map.next_value_seed(seed),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// A map key, borrowed from the input when the parser can (no escapes in it).
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_str(KeyVisitor(PhantomData))
    }
}

struct KeyVisitor<'de>(PhantomData<&'de ()>);

impl<'de> Visitor<'de> for KeyVisitor<'de> {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v)))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{ObjectList, WatchEvent};
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    fn job_json() -> serde_json::Value {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {
                "name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                "labels": {"managedFields": "a label of that name is a label", "app": "x"},
                "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:active": {}}}}]
            },
            "spec": {"completions": 3, "template": {"metadata": {"labels": {"a": "b"}},
                     "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x",
                              "env": [{"name": "A", "value": "b"}]}]}}},
            "status": {"active": 1, "conditions": [{"type": "Suspended", "status": "False"}]}
        })
    }

    /// A Job (read whole but for `managedFields`) decodes as a plain decode does without them, at
    /// the top, in a list and in a watch event (kube's wrappers buffer and re-read their content).
    #[test]
    fn a_job_decodes_as_a_plain_decode_without_its_managed_fields() {
        let text = job_json().to_string();
        let mut whole: Job = serde_json::from_str(&text).unwrap();
        assert!(whole.metadata.managed_fields.is_some());
        whole.metadata.managed_fields = None;
        let Lean(lean) = serde_json::from_str::<Lean<Job>>(&text).unwrap();
        assert_eq!(lean, whole);
        assert_eq!(
            lean.metadata.labels.as_ref().unwrap()["managedFields"],
            "a label of that name is a label"
        );

        let list = json!({"kind": "JobList", "apiVersion": "batch/v1", "metadata": {"resourceVersion": "9"},
                          "items": [job_json(), job_json()]})
        .to_string();
        let list: ObjectList<Lean<Job>> = serde_json::from_str(&list).unwrap();
        assert_eq!(list.metadata.resource_version.as_deref(), Some("9"));
        assert_eq!(list.items.len(), 2);
        assert!(list.items.iter().all(|Lean(j)| *j == whole));

        for event in [
            json!({"type": "MODIFIED", "object": job_json()}),
            json!({"object": job_json(), "type": "ADDED"}),
        ] {
            let event: WatchEvent<Lean<Job>> = serde_json::from_str(&event.to_string()).unwrap();
            match event {
                WatchEvent::Added(Lean(j)) | WatchEvent::Modified(Lean(j)) => assert_eq!(j, whole),
                _ => panic!("an ADDED or MODIFIED event"),
            }
        }
    }

    /// Only the fields a tree names are read; with `only`, lists of objects are filtered element by
    /// element, and what has no tree of its own is read whole.
    #[test]
    fn a_tree_reads_only_what_it_names() {
        const SPEC: Fields = Fields {
            skip: &[],
            only: Some(&["nodeName", "containers"]),
            nested: &[("containers", &CONTAINER)],
        };
        const CONTAINER: Fields = Fields { skip: &["env"], only: None, nested: &[] };
        const POD: Fields = Fields { skip: &["status"], only: None, nested: &[("spec", &SPEC)] };
        let text = json!({
            "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"nodeName": "n", "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x", "env": [{"name": "A", "value": "b"}]},
                                    {"name": "d", "env": []}]},
            "status": {"phase": "Running"}
        })
        .to_string();
        let pod: Pod =
            Pod::deserialize(Filtered { de: &mut serde_json::Deserializer::from_str(&text), fields: &POD })
                .unwrap();
        let want: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "x"}, {"name": "d"}]}
        }))
        .unwrap();
        assert_eq!(pod, want);
    }

    /// Keys with escapes are not borrowed from the input, and still reach the object.
    #[test]
    fn escaped_keys_and_values_are_kept() {
        let text = r#"{"metadata": {"name": "j", "annotations": {"a\/b": "c\"d"}, "managedFields": []}}"#;
        let Lean(job) = serde_json::from_str::<Lean<Job>>(text).unwrap();
        assert_eq!(job.metadata.annotations.unwrap()["a/b"], "c\"d");
        assert_eq!(job.metadata.managed_fields, None);
    }

    /// Malformed input is an error, as from a plain decode, not a panic.
    #[test]
    fn malformed_input_is_an_error() {
        for text in [r#"{"metadata": {"managedFields": [}}"#, r#"{"metadata": {"name": 3}}"#, "[", ""] {
            assert!(serde_json::from_str::<Lean<Job>>(text).is_err(), "{text}");
            assert!(serde_json::from_str::<Lean<Pod>>(text).is_err(), "{text}");
        }
    }
}
