//! Which object a JSON watch event carries, read before the rest of it.
//!
//! A controller's own write goes into its store from the write's answer ([`Store::wrote`]), so
//! the watch event that follows for the same version (its echo) brings nothing the store lacks.
//! In `million`, four of a Job's six watch events are such echoes (the Job controller's status
//! writes), and decoding them was most of the tenth of a worker's CPU that Job watch events
//! cost. Reading the object's namespace, name, uid and resourceVersion first lets the watch see
//! an echo for what it is and step over the rest: the parse stops at the last of the four, which
//! the API server writes near the top of `metadata`, before `managedFields`, `spec` and `status`.
//!
//! [`Store::wrote`]: crate::informer::Store::wrote

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// An object's identity as a watch event names it: which object, and which version of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectIdentity<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub resource_version: &'a str,
}

/// The identity of the object in a JSON watch event (`{"type":…,"object":{…}}`), or `None` when
/// its metadata lacks any of the four (a BOOKMARK, an ERROR's Status, a cluster-scoped object),
/// writes one escaped, or the line is not an event: those are decoded in full.
pub fn watched_identity(line: &[u8]) -> Option<ObjectIdentity<'_>> {
    let mut found = Found::default();
    let mut de = serde_json::Deserializer::from_slice(line);
    // The probe ends in an error as soon as it has read what it looks for, or has passed the
    // object's metadata without it: either way, what it found is all it reports.
    let _ = EventProbe(&mut found).deserialize(&mut de);
    Some(ObjectIdentity {
        namespace: found.namespace?,
        name: found.name?,
        uid: found.uid?,
        resource_version: found.resource_version?,
    })
}

#[derive(Default)]
struct Found<'de> {
    namespace: Option<&'de str>,
    name: Option<&'de str>,
    uid: Option<&'de str>,
    resource_version: Option<&'de str>,
}

impl Found<'_> {
    fn complete(&self) -> bool {
        self.namespace.is_some()
            && self.name.is_some()
            && self.uid.is_some()
            && self.resource_version.is_some()
    }
}

fn stop<E: de::Error>() -> E {
    E::custom("the probe has read what it reads")
}

/// The event: only its `object` is read.
struct EventProbe<'s, 'de>(&'s mut Found<'de>);
/// The object: only its `metadata` is read.
struct ObjectProbe<'s, 'de>(&'s mut Found<'de>);
/// The metadata: the four fields of the identity.
struct MetadataProbe<'s, 'de>(&'s mut Found<'de>);

macro_rules! map_probe {
    ($probe:ident, $expecting:literal, |$found:ident, $key:ident, $map:ident| $body:block) => {
        impl<'de> DeserializeSeed<'de> for $probe<'_, 'de> {
            type Value = ();

            fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
                deserializer.deserialize_map(self)
            }
        }

        impl<'de> Visitor<'de> for $probe<'_, 'de> {
            type Value = ();

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str($expecting)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut $map: A) -> Result<(), A::Error> {
                let $found = self.0;
                while let Some($key) = $map.next_key::<&'de str>()? {
                    $body
                }
                Ok(())
            }
        }
    };
}

map_probe!(EventProbe, "a watch event", |found, key, map| {
    if key == "object" {
        map.next_value_seed(ObjectProbe(found))?;
        return Err(stop());
    }
    map.next_value::<IgnoredAny>()?;
});

map_probe!(ObjectProbe, "an object", |found, key, map| {
    if key == "metadata" {
        map.next_value_seed(MetadataProbe(found))?;
        return Err(stop());
    }
    map.next_value::<IgnoredAny>()?;
});

map_probe!(MetadataProbe, "object metadata", |found, key, map| {
    let slot = match key {
        "namespace" => &mut found.namespace,
        "name" => &mut found.name,
        "uid" => &mut found.uid,
        "resourceVersion" => &mut found.resource_version,
        _ => {
            map.next_value::<IgnoredAny>()?;
            continue;
        }
    };
    *slot = Some(map.next_value::<&'de str>()?);
    if found.complete() {
        return Err(stop());
    }
});

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: ObjectIdentity<'static> =
        ObjectIdentity { namespace: "ns", name: "j", uid: "u-1", resource_version: "42" };

    #[test]
    fn reads_the_identity_in_the_api_servers_order_and_in_the_sims() {
        // kube-apiserver: ObjectMeta in its Go field order, managedFields last.
        let apiserver = br#"{"type":"MODIFIED","object":{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"j","namespace":"ns","uid":"u-1","resourceVersion":"42","generation":1,"managedFields":[{"manager":"m"}]},"spec":{},"status":{}}}"#;
        // The sim: apiVersion and kind first, metadata's keys sorted but managedFields.
        let sim = br#"{"type":"MODIFIED","object":{"apiVersion":"batch/v1","kind":"Job","metadata":{"creationTimestamp":"2026-11-30T05:23:52Z","generation":1,"labels":{"a":"b"},"name":"j","namespace":"ns","resourceVersion":"42","uid":"u-1","managedFields":[]},"spec":{"parallelism":1},"status":{}}}"#;
        // The object before its type, and spec before metadata: any order is read.
        let reordered = br#"{"object":{"spec":{"x":[1,{"y":"z"}]},"metadata":{"uid":"u-1","resourceVersion":"42","name":"j","namespace":"ns"}},"type":"ADDED"}"#;
        for line in [&apiserver[..], &sim[..], &reordered[..]] {
            assert_eq!(watched_identity(line), Some(JOB), "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn stops_at_the_identity_without_reading_the_rest() {
        // What follows the identity is not even JSON: the probe never gets there.
        let line = br#"{"type":"MODIFIED","object":{"metadata":{"name":"j","namespace":"ns","uid":"u-1","resourceVersion":"42","managedFields":[not json"#;
        assert_eq!(watched_identity(line), Some(JOB));
    }

    #[test]
    fn an_event_without_the_whole_identity_has_none() {
        let lines: [&[u8]; 6] = [
            // A BOOKMARK carries only a resourceVersion.
            br#"{"type":"BOOKMARK","object":{"kind":"Job","apiVersion":"batch/v1","metadata":{"resourceVersion":"42"}}}"#,
            // An ERROR carries a Status.
            br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":410}}"#,
            // A cluster-scoped object has no namespace.
            br#"{"type":"ADDED","object":{"metadata":{"name":"n","uid":"u","resourceVersion":"1"},"spec":{}}}"#,
            // An escaped string is not read in place: decoded in full instead.
            br#"{"type":"ADDED","object":{"metadata":{"name":"j\u0041","namespace":"ns","uid":"u-1","resourceVersion":"42"}}}"#,
            // A null where a string belongs.
            br#"{"type":"ADDED","object":{"metadata":{"name":null,"namespace":"ns","uid":"u-1","resourceVersion":"42"}}}"#,
            b"not an event",
        ];
        for line in lines {
            assert_eq!(watched_identity(line), None, "{}", String::from_utf8_lossy(line));
        }
    }
}
