//! The LIST and WATCH requests of [`super::watch`] and their answers, in either of the API
//! server's formats: protobuf for the kinds that have a protobuf decode ([`Cached::PROTOBUF`],
//! pods) when [`ContentType::Protobuf`] is asked for, as kube-controller-manager's
//! `--kube-api-content-type` does; JSON otherwise, and whenever the server answers in JSON (a
//! server or proxy that does not serve protobuf). The answer's `Content-Type` decides how it is
//! read, never the request.
//!
//! A protobuf list is a `k8s\0` envelope around the `PodList`; a protobuf watch is a stream of
//! `WatchEvent` messages, each behind a 4-byte big-endian length, with the object in its own
//! envelope (`k8s.io/apimachinery/pkg/runtime/serializer/protobuf`). A JSON watch is one event per
//! line.

use std::collections::BTreeMap;

use batchfleet_kube_wire::ProtobufError;
use batchfleet_kube_wire::envelope;
use batchfleet_kube_wire::wire::FieldReader;
use bytes::{Buf, Bytes, BytesMut};
use http_body_util::BodyExt;
use kube::api::WatchEvent;
use kube::client::Body;
use kube::core::watch::{Bookmark, BookmarkMeta};
use kube::core::{ObjectList, Status, TypeMeta};

use crate::client::lean_decode::Lean;
use crate::client::lean_identity::{ObjectIdentity, watched_identity};
use crate::client::protobuf_answers;
use crate::informer::Cached;
use crate::informer::trim::ProtobufDecode;

/// What the watches ask the API server to answer in, as kube-controller-manager's
/// `--kube-api-content-type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ContentType {
    /// `application/vnd.kubernetes.protobuf` for the kinds with a protobuf decode, JSON accepted
    /// too; kube-controller-manager's default.
    #[default]
    Protobuf,
    /// `application/json` only.
    Json,
}

impl ContentType {
    pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
    pub const JSON: &str = "application/json";

    pub fn parse(media_type: &str) -> Result<Self, String> {
        match media_type {
            Self::PROTOBUF => Ok(Self::Protobuf),
            Self::JSON => Ok(Self::Json),
            other => Err(format!("{other:?} is neither {:?} nor {:?}", Self::PROTOBUF, Self::JSON)),
        }
    }
}

/// Why a list or a watch failed; the watch lists again after any of them.
#[derive(Debug, thiserror::Error)]
pub enum ListWatchError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("the API server answered {code}: {message}")]
    Api { code: u16, message: String },
    #[error("decoding a protobuf answer: {0}")]
    Protobuf(#[from] ProtobufError),
    #[error("decoding a JSON answer: {0}")]
    Json(#[from] serde_json::Error),
}

/// One page of a LIST.
pub struct Page<K> {
    /// The answer came in protobuf.
    pub protobuf: bool,
    pub items: Vec<K>,
    pub resource_version: Option<String>,
    pub continue_token: Option<String>,
}

fn asks_protobuf<K: Cached>(content_type: ContentType) -> bool {
    content_type == ContentType::Protobuf && K::PROTOBUF.is_some()
}

fn with_accept<K: Cached>(
    mut request: http::Request<Vec<u8>>,
    content_type: ContentType,
) -> http::Request<Vec<u8>> {
    if asks_protobuf::<K>(content_type) {
        request
            .headers_mut()
            .insert(http::header::ACCEPT, http::HeaderValue::from_static(protobuf_answers::ACCEPT_PROTOBUF));
    }
    request
}

fn is_protobuf(response: &http::Response<Body>) -> bool {
    protobuf_answers::is_protobuf(response.headers())
}

/// Sends `request`; an answer other than 2xx is an error carrying its Status.
async fn send(
    client: &kube::Client,
    request: http::Request<Vec<u8>>,
) -> Result<http::Response<Body>, ListWatchError> {
    let response = client.send(request.map(Body::from)).await?;
    let code = response.status();
    if code.is_success() {
        return Ok(response);
    }
    let protobuf = is_protobuf(&response);
    let body = response.into_body().collect().await?.to_bytes();
    let message = if protobuf {
        protobuf_answers::status(&body).map(|s| s.message).unwrap_or_default()
    } else {
        serde_json::from_slice::<Status>(&body)
            .map(|s| s.message)
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).trim().to_string())
    };
    Err(ListWatchError::Api { code: code.as_u16(), message })
}

/// A page of `K`s.
pub async fn list<K: Cached>(
    client: &kube::Client,
    request: http::Request<Vec<u8>>,
    content_type: ContentType,
) -> Result<Page<K>, ListWatchError> {
    let response = send(client, with_accept::<K>(request, content_type)).await?;
    let protobuf = is_protobuf(&response);
    let body = response.into_body().collect().await?.to_bytes();
    match (protobuf, K::PROTOBUF) {
        (true, Some(decode)) => Ok(protobuf_list(&body, decode)?),
        _ => {
            let list: ObjectList<Lean<K>> = serde_json::from_slice(&body)?;
            Ok(Page {
                protobuf: false,
                items: list.items.into_iter().map(|Lean(k)| k).collect(),
                resource_version: list.metadata.resource_version,
                continue_token: list.metadata.continue_,
            })
        }
    }
}

/// A `…List` message: `ListMeta` at 1 (its resourceVersion at 2, continue at 3), items at 2.
fn protobuf_list<K>(body: &[u8], decode: ProtobufDecode<K>) -> Result<Page<K>, ProtobufError> {
    let unknown = envelope::decode(body)?;
    let mut page = Page { protobuf: true, items: Vec::new(), resource_version: None, continue_token: None };
    let mut fields = FieldReader::new(unknown.raw);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => {
                let mut meta = FieldReader::new(value.as_bytes("ListMeta")?);
                while let Some((n, v)) = meta.next_field()? {
                    match n {
                        2 => page.resource_version = Some(v.as_string("ListMeta.resourceVersion")?),
                        3 => page.continue_token = Some(v.as_string("ListMeta.continue")?),
                        _ => {}
                    }
                }
            }
            2 => page.items.push(decode(value.as_bytes("items")?)?),
            _ => {}
        }
    }
    Ok(page)
}

/// An open WATCH, read event by event.
pub struct Events<K> {
    body: Body,
    buffer: BytesMut,
    decode: Option<ProtobufDecode<K>>,
    ended: bool,
}

/// Opens a WATCH.
pub async fn watch<K: Cached>(
    client: &kube::Client,
    mut request: http::Request<Vec<u8>>,
    content_type: ContentType,
) -> Result<Events<K>, ListWatchError> {
    // As kube's watches: one gzip member per event is more than its decompression reads.
    request
        .headers_mut()
        .entry(http::header::ACCEPT_ENCODING)
        .or_insert(http::HeaderValue::from_static("identity"));
    let response = send(client, with_accept::<K>(request, content_type)).await?;
    let decode = if is_protobuf(&response) { K::PROTOBUF } else { None };
    Ok(Events { body: response.into_body(), buffer: BytesMut::new(), decode, ended: false })
}

/// Whether a failed read of a watch body is its end rather than a fault: the server or a proxy
/// closed it mid-chunk (it happens after minutes of watching), or the client's read timed out.
/// The watch resumes from its last version, as kube's does.
fn is_resumable(error: &kube::Error) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    for _ in 0..16 {
        let Some(e) = current else { break };
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(io.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        current = e.source();
    }
    error.to_string().contains("unexpected EOF during chunk")
}

/// What a watch brought: an event, or the echo of a version its store holds already.
#[derive(Debug)]
pub enum Seen<K> {
    Event(WatchEvent<K>),
    /// A JSON event whose object [`Events::next_unless_echo`]'s check took as the echo of a
    /// version its store holds (and dealt with), stepped over undecoded; its resourceVersion.
    Echo(u64),
}

impl<K: Cached> Events<K> {
    /// The events come in protobuf.
    pub fn protobuf(&self) -> bool {
        self.decode.is_some()
    }

    /// The next event; `None` when the server ended the watch.
    pub async fn next(&mut self) -> Option<Result<WatchEvent<K>, ListWatchError>> {
        loop {
            match self.next_unless_echo(None).await? {
                Ok(Seen::Event(event)) => return Some(Ok(event)),
                Ok(Seen::Echo(_)) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The next event, or the echo of one: before a JSON event is decoded, `echo` is shown the
    /// identity of its object ([`watched_identity`]), and when it answers that it has dealt with
    /// it (the store holds that very version), the rest of the event is stepped over. `None`
    /// when the server ended the watch.
    pub async fn next_unless_echo(
        &mut self,
        echo: Option<&(dyn Fn(&ObjectIdentity) -> bool + Sync)>,
    ) -> Option<Result<Seen<K>, ListWatchError>> {
        loop {
            if let Some(frame) = self.next_frame() {
                if self.decode.is_none()
                    && let Some(echo) = echo
                    && let Some(identity) = watched_identity(&frame)
                    && echo(&identity)
                {
                    return Some(Ok(Seen::Echo(identity.resource_version.parse().unwrap_or(0))));
                }
                match self.event(&frame) {
                    Some(event) => return Some(event.map(Seen::Event)),
                    None => continue,
                }
            }
            if self.ended {
                return None;
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) if is_resumable(&e) => {
                    tracing::debug!(error = %e, "watch body ended early");
                    self.ended = true;
                }
                Some(Err(e)) => return Some(Err(e.into())),
                None => self.ended = true,
            }
        }
    }

    /// The next whole frame in the buffer: a length-prefixed message, or a line. What is left
    /// unfinished when the body ends is dropped, as kube drops a last partial line.
    fn next_frame(&mut self) -> Option<Bytes> {
        if self.decode.is_some() {
            let len = u32::from_be_bytes(self.buffer.get(..4)?.try_into().ok()?) as usize;
            if self.buffer.len() < 4 + len {
                return None;
            }
            self.buffer.advance(4);
            Some(self.buffer.split_to(len).freeze())
        } else {
            let end = self.buffer.iter().position(|b| *b == b'\n')?;
            let line = self.buffer.split_to(end + 1).freeze();
            Some(line.slice(..end))
        }
    }

    /// The event of one frame; `None` for an empty line.
    fn event(&self, frame: &[u8]) -> Option<Result<WatchEvent<K>, ListWatchError>> {
        match self.decode {
            Some(decode) => Some(protobuf_event(frame, decode).map_err(ListWatchError::from)),
            None if frame.iter().all(u8::is_ascii_whitespace) => None,
            None => Some(json_event(frame)),
        }
    }
}

fn json_event<K: Cached>(line: &[u8]) -> Result<WatchEvent<K>, ListWatchError> {
    match serde_json::from_slice::<WatchEvent<Lean<K>>>(line) {
        Ok(event) => Ok(match event {
            WatchEvent::Added(Lean(k)) => WatchEvent::Added(k),
            WatchEvent::Modified(Lean(k)) => WatchEvent::Modified(k),
            WatchEvent::Deleted(Lean(k)) => WatchEvent::Deleted(k),
            WatchEvent::Bookmark(b) => WatchEvent::Bookmark(b),
            WatchEvent::Error(status) => WatchEvent::Error(status),
        }),
        // A line that is not an event may be a Status on its own, as kube reads it.
        Err(e) => match serde_json::from_slice::<Status>(line) {
            Ok(status) => Err(ListWatchError::Api { code: status.code, message: status.message }),
            Err(_) => Err(e.into()),
        },
    }
}

/// A `WatchEvent` message: its type at 1, at 2 a `RawExtension` whose `raw` (1) is the object in
/// its envelope: a `Status` for ERROR, the kind watched otherwise (of a BOOKMARK, only its
/// resourceVersion is read).
fn protobuf_event<K: Cached>(
    frame: &[u8],
    decode: ProtobufDecode<K>,
) -> Result<WatchEvent<K>, ProtobufError> {
    let (mut kind, mut object): (&[u8], &[u8]) = (b"", b"");
    let mut fields = FieldReader::new(frame);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => kind = value.as_bytes("WatchEvent.type")?,
            2 => {
                let mut raw = FieldReader::new(value.as_bytes("WatchEvent.object")?);
                while let Some((n, v)) = raw.next_field()? {
                    if n == 1 {
                        object = v.as_bytes("RawExtension.raw")?;
                    }
                }
            }
            _ => {}
        }
    }
    if kind == b"ERROR" {
        return Ok(WatchEvent::Error(Box::new(protobuf_answers::status(object)?)));
    }
    let unknown = envelope::decode(object)?;
    let obj = decode(unknown.raw)?;
    Ok(match kind {
        b"ADDED" => WatchEvent::Added(obj),
        b"MODIFIED" => WatchEvent::Modified(obj),
        b"DELETED" => WatchEvent::Deleted(obj),
        b"BOOKMARK" => WatchEvent::Bookmark(Bookmark {
            types: TypeMeta { api_version: unknown.api_version, kind: unknown.kind },
            metadata: BookmarkMeta {
                resource_version: obj.meta().resource_version.clone().unwrap_or_default(),
                annotations: BTreeMap::new(),
            },
        }),
        other => return Err(ProtobufError::UnknownEventType(String::from_utf8_lossy(other).into_owned())),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use batchfleet_sim::{SimCluster, SimConfig};
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, DeleteParams, ListParams, PostParams};
    use kube::core::Request;
    use serde_json::json;

    use super::*;

    const DEADLINE: Duration = Duration::from_secs(20);

    fn pods_request() -> Request {
        Request::new("/api/v1/namespaces/default/pods")
    }

    /// Job `j` in `default`, created.
    async fn job_j(client: &kube::Client) -> Job {
        let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
        let job: Job =
            serde_json::from_value(json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}))
            .expect("a job");
        jobs.create(&PostParams::default(), &job).await.expect("job created")
    }

    /// A Job's two pods, which the sim runs to Succeeded, and a bare one with the TTL
    /// annotation: every field the pod store keeps is set on one of them.
    async fn pods_of_every_kind(client: &kube::Client) {
        let job = job_j(client).await;
        let uid = job.metadata.uid.expect("a uid");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        for (name, owned) in [("j-0", true), ("j-1", true), ("bare", false)] {
            let owners = if owned {
                json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": uid, "controller": true}])
            } else {
                json!([])
            };
            let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name,
                "labels": {"batch.kubernetes.io/job-name": "j"},
                "annotations": {"batch.kubernetes.io/job-completion-index": "0", "sim.batchfleet.io/run": "0s",
                                "batchfleet.io/ttl-seconds-after-finished": "30"},
                "finalizers": ["batch.kubernetes.io/job-tracking"], "ownerReferences": owners},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}))
            .expect("a pod");
            pods.create(&PostParams::default(), &pod).await.expect("pod created");
        }
        let all_done = async {
            loop {
                let list = pods.list(&ListParams::default()).await.expect("pods listed");
                let done = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
                if list.items.len() == 3 && list.items.iter().all(done) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::time::timeout(DEADLINE, all_done).await.expect("the sim runs the pods to Succeeded");
    }

    fn trimmed(pods: Vec<Pod>) -> Vec<Pod> {
        pods.into_iter().map(Cached::trimmed).collect()
    }

    #[tokio::test]
    async fn a_list_of_pods_read_in_protobuf_is_stored_as_in_json() {
        let sim = SimCluster::start(SimConfig::default()).await.expect("sim");
        let client =
            kube::Client::try_from(kube::Config::new(sim.url().parse().expect("url"))).expect("client");
        pods_of_every_kind(&client).await;
        let lp = ListParams::default().limit(2);
        let read = |content_type| {
            let client = client.clone();
            let lp = lp.clone();
            async move {
                let mut pages = Vec::new();
                let mut lp = lp;
                loop {
                    let page: Page<Pod> =
                        list(&client, pods_request().list(&lp).expect("a request"), content_type)
                            .await
                            .expect("a page");
                    let next = page.continue_token.clone().filter(|c| !c.is_empty());
                    pages.push(page);
                    match next {
                        Some(c) => lp = lp.continue_token(&c),
                        None => return pages,
                    }
                }
            }
        };
        let (protobuf, json) = (read(ContentType::Protobuf).await, read(ContentType::Json).await);
        assert_eq!(protobuf.len(), 2, "three pods in pages of two");
        assert!(protobuf.iter().all(|p| p.protobuf) && json.iter().all(|p| !p.protobuf));
        assert_eq!(
            protobuf.iter().map(|p| p.resource_version.clone()).collect::<Vec<_>>(),
            json.iter().map(|p| p.resource_version.clone()).collect::<Vec<_>>()
        );
        let items = |pages: Vec<Page<Pod>>| trimmed(pages.into_iter().flat_map(|p| p.items).collect());
        let (protobuf, json) = (items(protobuf), items(json));
        assert_eq!(protobuf.len(), 3);
        assert_eq!(protobuf, json);
    }

    /// Reads events until the DELETED of `name`, as (type, stored pod).
    async fn events_until_deleted(events: &mut Events<Pod>, name: &str) -> Vec<(&'static str, Pod)> {
        let mut seen = Vec::new();
        let read = async {
            while let Some(event) = events.next().await {
                let (kind, pod) = match event.expect("an event") {
                    WatchEvent::Added(p) => ("ADDED", p),
                    WatchEvent::Modified(p) => ("MODIFIED", p),
                    WatchEvent::Deleted(p) => ("DELETED", p),
                    WatchEvent::Bookmark(_) => continue,
                    WatchEvent::Error(e) => panic!("watch error {e:?}"),
                };
                let done = kind == "DELETED" && pod.metadata.name.as_deref() == Some(name);
                seen.push((kind, pod.trimmed()));
                if done {
                    return;
                }
            }
            panic!("the watch ended before {name} was deleted");
        };
        tokio::time::timeout(DEADLINE, read).await.expect("the deletion is seen");
        seen
    }

    #[tokio::test]
    async fn a_watch_of_pods_in_protobuf_sees_what_one_in_json_sees() {
        let sim = SimCluster::start(SimConfig::default()).await.expect("sim");
        let client =
            kube::Client::try_from(kube::Config::new(sim.url().parse().expect("url"))).expect("client");
        let from = sim.api().store().compact().to_string();
        let wp = kube::api::WatchParams::default().timeout(60);
        let mut protobuf: Events<Pod> =
            watch(&client, pods_request().watch(&wp, &from).expect("a request"), ContentType::Protobuf)
                .await
                .expect("watching");
        let mut json: Events<Pod> =
            watch(&client, pods_request().watch(&wp, &from).expect("a request"), ContentType::Json)
                .await
                .expect("watching");
        assert!(protobuf.protobuf() && !json.protobuf());
        pods_of_every_kind(&client).await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        pods.patch(
            "bare",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("finalizer removed");
        pods.delete("bare", &DeleteParams::default()).await.expect("deleted");
        let (protobuf, json) = (
            events_until_deleted(&mut protobuf, "bare").await,
            events_until_deleted(&mut json, "bare").await,
        );
        assert!(
            protobuf.len() >= 7,
            "three creations, the runs, the patch and the deletion: {}",
            protobuf.len()
        );
        assert_eq!(protobuf, json);
    }

    #[tokio::test]
    async fn a_watch_from_a_compacted_version_ends_in_410_in_either_format() {
        let sim = SimCluster::start(SimConfig::default()).await.expect("sim");
        let client =
            kube::Client::try_from(kube::Config::new(sim.url().parse().expect("url"))).expect("client");
        pods_of_every_kind(&client).await;
        sim.api().store().compact();
        let wp = kube::api::WatchParams::default().timeout(60);
        for content_type in [ContentType::Protobuf, ContentType::Json] {
            let mut events: Events<Pod> =
                watch(&client, pods_request().watch(&wp, "1").expect("a request"), content_type)
                    .await
                    .expect("watching");
            let first = tokio::time::timeout(DEADLINE, events.next()).await.expect("an answer");
            match first {
                Some(Ok(WatchEvent::Error(status))) => {
                    assert_eq!(status.code, 410, "{content_type:?}: {status:?}")
                }
                Some(Err(ListWatchError::Api { code, .. })) => assert_eq!(code, 410, "{content_type:?}"),
                other => {
                    panic!("{content_type:?}: expected 410 Gone, got {:?}", other.map(|e| e.map(|_| ())))
                }
            }
        }
    }

    /// A server that answers every request with one JSON body, whatever it asked for.
    async fn json_only_server(body: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    let mut chunk = [0u8; 1024];
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&chunk[..n]),
                    }
                }
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
            }
        });
        url
    }

    #[tokio::test]
    async fn a_json_answer_to_a_protobuf_request_is_read_as_json() {
        let url = json_only_server(
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"p","namespace":"default","resourceVersion":"5"}}]}"#,
        )
        .await;
        let client = kube::Client::try_from(kube::Config::new(url.parse().expect("url"))).expect("client");
        let lp = ListParams::default();
        let page: Page<Pod> =
            list(&client, pods_request().list(&lp).expect("a request"), ContentType::Protobuf)
                .await
                .expect("a page");
        assert!(!page.protobuf);
        assert_eq!(page.resource_version.as_deref(), Some("7"));
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.items[0].metadata.name.as_deref(), Some("p"));
    }

    /// Counts what a handler is told.
    #[derive(Default)]
    struct Calls(std::sync::atomic::AtomicUsize);

    impl crate::informer::Handler<Job> for Calls {
        fn applied(&self, _: Option<&std::sync::Arc<Job>>, _: &std::sync::Arc<Job>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        fn deleted(&self, _: &std::sync::Arc<Job>) {}
    }

    #[tokio::test]
    async fn the_echo_of_a_status_written_into_the_store_is_not_decoded_and_the_next_change_is() {
        use crate::informer::{Store, Writes};
        use crate::runtime::shard::ShardTable;
        use crate::shards::ShardSpace;

        let sim = SimCluster::start(SimConfig::default()).await.expect("sim");
        let client =
            kube::Client::try_from(kube::Config::new(sim.url().parse().expect("url"))).expect("client");
        let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
        let created = job_j(&client).await;
        let created_rv = created.metadata.resource_version.clone().expect("a version");

        let store: Store<Job> =
            Store::new(ShardTable::all_active(ShardSpace::new(4).expect("shards")), &[], Writes::Taken);
        let (writer, other) = (std::sync::Arc::new(Calls::default()), std::sync::Arc::new(Calls::default()));
        store.add_handler(writer.clone());
        store.add_handler(other.clone());
        store.observe(created.clone(), |_| true);
        // The controller's write, into the store from its answer; then a change of someone else's.
        let mut with_status = created.clone();
        with_status.status = Some(serde_json::from_value(json!({"active": 1})).expect("a status"));
        let written =
            jobs.replace_status("j", &PostParams::default(), &with_status).await.expect("status written");
        let written_rv: u64 =
            written.metadata.resource_version.as_deref().expect("a version").parse().expect("n");
        assert!(store.wrote(written, &*writer));
        let labelled = jobs
            .patch(
                "j",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
            )
            .await
            .expect("labelled");
        let calls = |c: &Calls| c.0.load(std::sync::atomic::Ordering::Relaxed);
        let (writer_before, other_before) = (calls(&writer), calls(&other));

        let wp = kube::api::WatchParams::default().timeout(60);
        let request = Request::new("/apis/batch/v1/namespaces/default/jobs")
            .watch(&wp, &created_rv)
            .expect("a request");
        let mut events: Events<Job> = watch(&client, request, ContentType::Protobuf).await.expect("watching");
        assert!(!events.protobuf(), "Jobs are read in JSON");
        let echo = |id: &ObjectIdentity| store.observe_echo(id, |_| true);
        let mut next = async || {
            tokio::time::timeout(DEADLINE, events.next_unless_echo(Some(&echo)))
                .await
                .expect("an event in time")
                .expect("the watch goes on")
                .expect("an event")
        };
        match next().await {
            Seen::Echo(rv) => assert_eq!(rv, written_rv),
            Seen::Event(e) => panic!("the status write came back decoded: {e:?}"),
        }
        assert_eq!(
            (calls(&writer), calls(&other)),
            (writer_before + 1, other_before + 1),
            "handlers called as for the event"
        );
        match next().await {
            Seen::Event(WatchEvent::Modified(job)) => {
                assert_eq!(job.metadata.resource_version, labelled.metadata.resource_version);
                assert_eq!(job.metadata.labels, labelled.metadata.labels);
            }
            other => panic!("the label change was not decoded: {other:?}"),
        }
    }

    #[test]
    fn the_content_type_flag_takes_the_two_media_types_and_nothing_else() {
        assert_eq!(ContentType::parse("application/vnd.kubernetes.protobuf"), Ok(ContentType::Protobuf));
        assert_eq!(ContentType::parse("application/json"), Ok(ContentType::Json));
        assert!(ContentType::parse("application/yaml").is_err());
    }
}
