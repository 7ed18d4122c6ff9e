//! Decoding API objects with `metadata.managedFields` skipped as it is read, never built.
//!
//! kube-apiserver (and the sim) put `managedFields` on every object it answers with and every
//! watch event: a tree per field manager that `k8s_openapi` decodes into `serde_json::Value`
//! maps, which the stores' trim ([`crate::informer::trim`]) then drops unread. Profiled, building
//! and freeing those trees was about a sixth of the worker's CPU per pod lifecycle. Decoded
//! through [`WithoutManagedFields`], the parser steps over the field without allocating.
//!
//! The adaptor wraps a [`Deserializer`] and every deserializer it hands on (map values, sequence
//! elements, options, newtypes), so the skip applies at any depth; a map key `managedFields` is
//! read, then its value is ignored. No kind the worker reads has another field of that name.
//! Enum contents are passed through unwrapped: no object metadata sits inside an enum variant.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess,
    SeqAccess, Visitor,
};

/// The field skipped.
const MANAGED_FIELDS: &str = "managedFields";

/// `K` decoded without its `managedFields` (left `None`).
#[derive(Debug, Clone)]
pub struct Lean<K>(pub K);

impl<'de, K: DeserializeOwned> de::Deserialize<'de> for Lean<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(WithoutManagedFields(deserializer)).map(Lean)
    }
}

/// A [`Deserializer`] that skips every map entry keyed `managedFields`.
pub struct WithoutManagedFields<D>(pub D);

macro_rules! forward_deserialize {
    ($($method:ident),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
                self.0.$method(Wrapped(visitor))
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for WithoutManagedFields<D> {
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
        self.0.deserialize_unit_struct(name, Wrapped(visitor))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, Wrapped(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Wrapped(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple_struct(name, len, Wrapped(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct(name, fields, Wrapped(visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, Wrapped(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// A visitor whose maps, sequences and nested values are read through the adaptor.
struct Wrapped<V>(V);

macro_rules! forward_visit {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
                self.0.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrapped<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(f)
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
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.visit_some(WithoutManagedFields(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.visit_newtype_struct(WithoutManagedFields(d))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.visit_seq(Elements(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(Entries(map))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.0.visit_enum(data)
    }
}

/// A seed whose value is read through the adaptor.
struct Seed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(WithoutManagedFields(d))
    }
}

struct Elements<A>(A);

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Elements<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

/// A map's entries, those keyed `managedFields` stepped over.
struct Entries<A>(A);

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Entries<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(Key(key)) = self.0.next_key::<Key<'de>>()? else { return Ok(None) };
            if key == MANAGED_FIELDS {
                self.0.next_value::<IgnoredAny>()?;
                continue;
            }
            return match key {
                Cow::Borrowed(k) => seed.deserialize(de::value::BorrowedStrDeserializer::new(k)).map(Some),
                Cow::Owned(k) => seed.deserialize(k.into_deserializer()).map(Some),
            };
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

/// A map key, borrowed from the input when the parser can (no escapes in it).
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(KeyVisitor(PhantomData))
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
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{ObjectList, WatchEvent};
    use serde_json::json;

    use super::*;

    fn pod_json() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                "labels": {"managedFields": "a label of that name is a label", "app": "x"},
                "managedFields": [{"manager": "kubelet", "operation": "Update",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:phase": {}}}}],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}]
            },
            "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "x", "env": [{"name": "A", "value": "b"}]}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "x", "imageID": "", "ready": true,
                        "restartCount": 0, "state": {"running": {"startedAt": "2026-11-28T10:00:00Z"}}}]}
        })
    }

    /// The same object as a plain decode, but for `managedFields`, at the top and in a list and
    /// a watch event (kube's wrappers buffer and re-read their content).
    #[test]
    fn decodes_the_same_object_without_its_managed_fields() {
        let text = pod_json().to_string();
        let mut whole: Pod = serde_json::from_str(&text).unwrap();
        assert!(whole.metadata.managed_fields.is_some());
        whole.metadata.managed_fields = None;
        let Lean(lean) = serde_json::from_str::<Lean<Pod>>(&text).unwrap();
        assert_eq!(lean, whole);
        assert_eq!(
            lean.metadata.labels.as_ref().unwrap()["managedFields"],
            "a label of that name is a label"
        );

        let list = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"},
                          "items": [pod_json(), pod_json()]})
        .to_string();
        let list: ObjectList<Lean<Pod>> = serde_json::from_str(&list).unwrap();
        assert_eq!(list.metadata.resource_version.as_deref(), Some("9"));
        assert_eq!(list.items.len(), 2);
        assert!(list.items.iter().all(|Lean(p)| *p == whole));

        for event in [
            json!({"type": "MODIFIED", "object": pod_json()}),
            json!({"object": pod_json(), "type": "ADDED"}),
        ] {
            let event: WatchEvent<Lean<Pod>> = serde_json::from_str(&event.to_string()).unwrap();
            match event {
                WatchEvent::Added(Lean(p)) | WatchEvent::Modified(Lean(p)) => assert_eq!(p, whole),
                _ => panic!("an ADDED or MODIFIED event"),
            }
        }
    }

    /// Keys with escapes are not borrowed from the input, and still reach the object.
    #[test]
    fn escaped_keys_and_values_are_kept() {
        let text = r#"{"metadata": {"name": "p", "annotations": {"a\/b": "c\"d"}, "managedFields": []}}"#;
        let Lean(pod) = serde_json::from_str::<Lean<Pod>>(text).unwrap();
        assert_eq!(pod.metadata.annotations.unwrap()["a/b"], "c\"d");
        assert_eq!(pod.metadata.managed_fields, None);
    }

    /// Malformed input is an error, as from a plain decode, not a panic.
    #[test]
    fn malformed_input_is_an_error() {
        for text in [r#"{"metadata": {"managedFields": [}}"#, r#"{"metadata": {"name": 3}}"#, "[", ""] {
            assert!(serde_json::from_str::<Lean<Pod>>(text).is_err(), "{text}");
        }
    }
}
