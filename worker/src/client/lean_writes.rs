//! Writes whose answers are decoded only as far as the caller reads them: kube's `Api` methods
//! (whose requests these build the same way) decode every answer into the whole object,
//! `managedFields` included. The Job controller reads of a pod it created, patched or deleted
//! only the name and the resourceVersion written (the fence's barrier); the CronJob controller
//! keeps the Jobs it creates and the CronJobs it writes, so those come back as the store keeps
//! them, `managedFields` never built ([`Lean`]).
//!
//! kube's `Api` methods also tag each request with its verb (an extension) for kube-client's
//! tracing layer, which the worker's stack leaves out (`client/fenced_connections.rs`): nothing
//! would read it, and each tag is a map allocated, then copied for a retry, per write.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;
use kube::core::Request;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::ApiWrites;
use super::lean_decode::Lean;
use super::protobuf_answers;
use crate::informer::Cached;
use batchfleet_kube_wire::ProtobufError;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};

/// What a write's answer is read for: whether it is a `Status` (a delete that removed the object
/// at once), and the name and resourceVersion it wrote. Every other field is skipped unbuilt.
#[derive(Debug, Default, Deserialize)]
pub struct Written {
    #[serde(default)]
    pub(super) kind: Option<String>,
    #[serde(default)]
    pub metadata: WrittenMeta,
}

#[derive(Debug, Default, Deserialize)]
pub struct WrittenMeta {
    pub name: Option<String>,
    #[serde(rename = "resourceVersion")]
    pub resource_version: Option<String>,
}

impl Written {
    /// The resourceVersion the write left on the object; none when the answer is a `Status`
    /// (the object is gone), as kube's `Either::Right`.
    pub fn resource_version(&self) -> Option<&str> {
        if self.is_status() { None } else { self.metadata.resource_version.as_deref() }
    }

    /// Whether the API server answered with a `Status` rather than the object.
    pub fn is_status(&self) -> bool {
        self.kind.as_deref() == Some("Status")
    }
}

/// What an Event write's answer is read for: what the recorder's correlator keeps of the Event
/// written (client-go's `eventLog`: its name, resourceVersion, count and firstTimestamp). The
/// rest of it is what was sent; `managedFields` and the involved object are skipped unbuilt.
#[derive(Debug, Default, Deserialize)]
pub struct WrittenEvent {
    #[serde(default)]
    pub metadata: WrittenMeta,
    #[serde(default)]
    pub count: Option<i32>,
    #[serde(default, rename = "firstTimestamp")]
    pub first_timestamp: Option<Time>,
}

/// A write's answer as the worker reads it: from JSON, and from protobuf where it has a decode
/// of its own (`client/protobuf_answers.rs`); the writes then ask for protobuf, as
/// kube-controller-manager's client does, and read whichever the server sent.
pub trait Answer: DeserializeOwned {
    const PROTOBUF: Option<ProtobufAnswer<Self>> = None;
}

/// Decodes an answer from its protobuf envelope.
pub type ProtobufAnswer<A> = fn(&[u8]) -> Result<A, ProtobufError>;

impl Answer for Written {
    const PROTOBUF: Option<ProtobufAnswer<Self>> = Some(protobuf_answers::written);
}

impl Answer for WrittenEvent {
    const PROTOBUF: Option<ProtobufAnswer<Self>> = Some(protobuf_answers::written_event);
}

/// A Job or CronJob kept whole: JSON only (the worker has no protobuf decode of them).
impl<K: Cached> Answer for Lean<K> {}

fn request<K: Resource<DynamicType = ()>>(namespace: &str) -> Request {
    Request::new(K::url_path(&(), Some(namespace)))
}

/// The JSON request body of `data`, as kube's `Api` methods build it. It starts with room for
/// a typical object: serde_json's default of 128 bytes grew four or five times for each.
pub fn body<T: Serialize>(data: &T) -> kube::Result<Vec<u8>> {
    let mut body = Vec::with_capacity(1024);
    serde_json::to_writer(&mut body, data).map_err(kube::Error::SerdeError)?;
    Ok(body)
}

/// `Api::create`, answered with what [`Written`] reads.
pub async fn create<K>(
    client: &ApiWrites,
    namespace: &str,
    pp: &PostParams,
    data: &K,
) -> kube::Result<Written>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    create_answered(client, namespace, pp, data).await
}

/// `Api::create`, answered with what `A` reads of the object created.
pub async fn create_answered<K, A>(
    client: &ApiWrites,
    namespace: &str,
    pp: &PostParams,
    data: &K,
) -> kube::Result<A>
where
    K: Resource<DynamicType = ()> + Serialize,
    A: Answer,
{
    create_built::<K, A>(client, namespace, pp, body(data)?).await
}

/// [`create_answered`] of a body already built ([`body`]): for objects sent more than once,
/// such as a NonIndexed Job's pods, which are all the same.
pub async fn create_built<K, A>(
    client: &ApiWrites,
    namespace: &str,
    pp: &PostParams,
    body: Vec<u8>,
) -> kube::Result<A>
where
    K: Resource<DynamicType = ()>,
    A: Answer,
{
    let req = request::<K>(namespace).create(pp, body).map_err(kube::Error::BuildRequest)?;
    client.request::<A>(req).await
}

/// `Api::patch`, answered with what [`Written`] reads.
pub async fn patch<K, P>(
    client: &ApiWrites,
    namespace: &str,
    name: &str,
    pp: &PatchParams,
    patch: &Patch<P>,
) -> kube::Result<Written>
where
    K: Resource<DynamicType = ()>,
    P: Serialize + std::fmt::Debug,
{
    patch_answered::<K, P, Written>(client, namespace, name, pp, patch).await
}

/// `Api::patch`, answered with what `A` reads of the object patched.
pub async fn patch_answered<K, P, A>(
    client: &ApiWrites,
    namespace: &str,
    name: &str,
    pp: &PatchParams,
    patch: &Patch<P>,
) -> kube::Result<A>
where
    K: Resource<DynamicType = ()>,
    P: Serialize + std::fmt::Debug,
    A: Answer,
{
    let req = request::<K>(namespace).patch(name, pp, patch).map_err(kube::Error::BuildRequest)?;
    client.request::<A>(req).await
}

/// `Api::delete`, answered with what [`Written`] reads (a `Status` or the object as the delete
/// left it), decoded once rather than kube's twice.
pub async fn delete<K>(
    client: &ApiWrites,
    namespace: &str,
    name: &str,
    dp: &DeleteParams,
) -> kube::Result<Written>
where
    K: Resource<DynamicType = ()>,
{
    let req = request::<K>(namespace).delete(name, dp).map_err(kube::Error::BuildRequest)?;
    client.request::<Written>(req).await
}

/// `Api::create`, answered with the object created, without its `managedFields`.
pub async fn create_whole<K>(
    client: &ApiWrites,
    namespace: &str,
    pp: &PostParams,
    data: &K,
) -> kube::Result<K>
where
    K: Cached + Serialize,
{
    let req = request::<K>(namespace).create(pp, body(data)?).map_err(kube::Error::BuildRequest)?;
    client.request::<Lean<K>>(req).await.map(|Lean(k)| k)
}

/// `Api::replace_status`, answered with the object written, without its `managedFields`.
pub async fn replace_status_whole<K>(
    client: &ApiWrites,
    namespace: &str,
    name: &str,
    pp: &PostParams,
    data: &K,
) -> kube::Result<K>
where
    K: Cached + Serialize,
{
    let req = request::<K>(namespace)
        .replace_subresource("status", name, pp, body(data)?)
        .map_err(kube::Error::BuildRequest)?;
    client.request::<Lean<K>>(req).await.map(|Lean(k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_gives_its_name_and_resource_version_unless_it_is_a_status() {
        let pod = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","resourceVersion":"12",
                      "managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}]},"spec":{"containers":[]}}"#;
        let written: Written = serde_json::from_str(pod).unwrap();
        assert_eq!(written.metadata.name.as_deref(), Some("p"));
        assert_eq!(written.resource_version(), Some("12"));
        assert!(!written.is_status());

        let status = r#"{"kind":"Status","apiVersion":"v1","metadata":{"resourceVersion":"13"},"status":"Success",
                         "details":{"name":"p","kind":"pods","uid":"u"}}"#;
        let written: Written = serde_json::from_str(status).unwrap();
        assert!(written.is_status());
        assert_eq!(written.resource_version(), None);
    }

    #[test]
    fn an_event_answer_gives_what_the_correlator_keeps() {
        let event = r#"{"kind":"Event","apiVersion":"v1","metadata":{"name":"j.187a","namespace":"ns",
                        "resourceVersion":"41","uid":"u","managedFields":[{"manager":"m","fieldsV1":{"f:count":{}}}]},
                        "involvedObject":{"kind":"Job","name":"j"},"reason":"SuccessfulCreate","message":"Created pod: p",
                        "count":3,"firstTimestamp":"2026-11-30T02:00:00Z","lastTimestamp":"2026-11-30T02:00:05Z"}"#;
        let written: WrittenEvent = serde_json::from_str(event).unwrap();
        assert_eq!(written.metadata.name.as_deref(), Some("j.187a"));
        assert_eq!(written.metadata.resource_version.as_deref(), Some("41"));
        assert_eq!(written.count, Some(3));
        assert_eq!(written.first_timestamp.map(|t| t.0.to_string()).as_deref(), Some("2026-11-30T02:00:00Z"));

        let bare: WrittenEvent =
            serde_json::from_str(r#"{"metadata":{"name":"e"},"firstTimestamp":null}"#).unwrap();
        assert_eq!((bare.count, bare.first_timestamp), (None, None));
    }
}
