//! The controllers' writes, sent on the client's own stack of layers rather than through
//! `kube::Client`, which queues every request for one task (tower's `Buffer`) that calls the
//! stack, and copies every answer into a `String` before decoding it. A write here calls its
//! own clone of the same stack (the same connections, limits, lease gate and metrics) and decodes
//! the answer from the bytes read. The saving is small, about 2% of a worker's CPU on
//! `loadtest run million`'s Jobs (docs/benchmarks.md, cut 14); the reads and the watches keep
//! kube's client.
//!
//! A write's errors are kube's, as `kube::Client::request` makes them: an answer of 4xx or 5xx
//! is `Error::Api` with the `Status` the server sent (or one made from its text), so upstream's
//! branches (`api_errors`) read them the same, whether the `Status` came in JSON or in protobuf.

use bytes::Bytes;
use http_body_util::BodyExt;
use kube::client::{Body, DynBody};
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Service, ServiceExt};

use super::fenced_connections::ApiService;
use super::lean_writes::Answer;
use super::protobuf_answers;

/// A handle on a client's stack for writes: cheap to clone, each clone calling the stack itself.
#[derive(Clone)]
pub struct ApiWrites {
    service: ApiService,
    protobuf_answers: bool,
}

/// An answer's body, and whether it came in protobuf.
struct Answered {
    body: Bytes,
    protobuf: bool,
}

impl ApiWrites {
    pub(super) fn new(service: ApiService) -> Self {
        Self { service, protobuf_answers: false }
    }

    /// Asks for the answers that have a protobuf decode ([`Answer::PROTOBUF`]) in protobuf, as
    /// `--kube-api-content-type` of `application/vnd.kubernetes.protobuf` asks of
    /// kube-controller-manager's client; JSON otherwise (the default).
    pub fn with_protobuf_answers(self, protobuf_answers: bool) -> Self {
        Self { protobuf_answers, ..self }
    }

    /// Writes through `client`, queue and all: for a client built elsewhere (tests, kube's
    /// default client), whose stack is not at hand.
    pub fn through(client: kube::Client) -> Self {
        let service = tower::service_fn(move |request: http::Request<Body>| {
            let client = client.clone();
            async move {
                let response = client.send(request).await.map_err(BoxError::from)?;
                Ok::<_, BoxError>(response.map(|body| Box::new(body.map_err(BoxError::from)) as Box<DynBody>))
            }
        });
        Self { service: BoxCloneSyncService::new(service), protobuf_answers: false }
    }

    /// Sends `request` and decodes its answer as `A`: `kube::Client::request`.
    pub async fn request<A: Answer>(&self, request: http::Request<Vec<u8>>) -> kube::Result<A> {
        self.answer(request).await.map(|(answer, _)| answer)
    }

    /// [`ApiWrites::request`], and whether the answer came in protobuf.
    async fn answer<A: Answer>(&self, mut request: http::Request<Vec<u8>>) -> kube::Result<(A, bool)> {
        if self.protobuf_answers && A::PROTOBUF.is_some() {
            request.headers_mut().insert(
                http::header::ACCEPT,
                http::HeaderValue::from_static(protobuf_answers::ACCEPT_PROTOBUF),
            );
        }
        let Answered { body, protobuf } = self.send(request).await?;
        match A::PROTOBUF.filter(|_| protobuf) {
            Some(decode) => decode(&body).map(|a| (a, true)).map_err(|e| {
                tracing::warn!(error = %e, bytes = body.len(), "a write's protobuf answer could not be read");
                kube::Error::Service(Box::new(e))
            }),
            None => serde_json::from_slice(&body).map(|a| (a, false)).map_err(|e| {
                tracing::warn!("{}, {e:?}", String::from_utf8_lossy(&body));
                kube::Error::SerdeError(e)
            }),
        }
    }

    /// Sends `request` and reads its answer, an API error if the server refused it.
    async fn send(&self, request: http::Request<Vec<u8>>) -> kube::Result<Answered> {
        let mut service = self.service.clone();
        let response = service
            .ready()
            .await
            .map_err(kube::Error::Service)?
            .call(request.map(Body::from))
            .await
            .map_err(sent_error)?;
        let status = response.status();
        let protobuf = protobuf_answers::is_protobuf(response.headers());
        let body = response.into_body().collect().await.map_err(kube::Error::Service)?.to_bytes();
        if status.is_client_error() || status.is_server_error() {
            return Err(if protobuf { refused_in_protobuf(status, &body) } else { refused(status, body) });
        }
        Ok(Answered { body, protobuf })
    }
}

/// The error of a request that got no answer, as `kube::Client::send` classifies it: an error
/// of kube's own layers as it is, hyper's as `HyperError`, any other layer's as `Service`.
fn sent_error(error: BoxError) -> kube::Error {
    error
        .downcast::<kube::Error>()
        .map(|e| *e)
        .or_else(|e| e.downcast::<hyper::Error>().map(|e| kube::Error::HyperError(*e)))
        .unwrap_or_else(kube::Error::Service)
}

/// A refusal whose `Status` came in protobuf; one that cannot be read carries the code alone.
fn refused_in_protobuf(status: http::StatusCode, body: &[u8]) -> kube::Error {
    match protobuf_answers::status(body) {
        Ok(s) => {
            tracing::debug!("Unsuccessful: {s:?}");
            kube::Error::Api(s.boxed())
        }
        Err(e) => {
            tracing::debug!(error = %e, "Unsuccessful, its protobuf Status unreadable");
            kube::Error::Api(
                kube::core::Status::failure(
                    &format!("an unreadable protobuf Status: {e}"),
                    "Failed to parse error data",
                )
                .with_code(status.as_u16())
                .boxed(),
            )
        }
    }
}

/// A refusal as kube-client reads one: the `Status` the server sent, or, for an answer that is
/// not one (a proxy's page, a path that does not exist), a failure carrying its text and code.
fn refused(status: http::StatusCode, body: Bytes) -> kube::Error {
    let text = match String::from_utf8(body.to_vec()) {
        Ok(text) => text,
        Err(e) => return kube::Error::FromUtf8(e),
    };
    match serde_json::from_str::<kube::core::Status>(&text) {
        Ok(s) => {
            tracing::debug!("Unsuccessful: {s:?}");
            kube::Error::Api(s.boxed())
        }
        Err(_) => {
            let text = text.trim();
            tracing::debug!("Unsuccessful data error parse: {text}");
            kube::Error::Api(
                kube::core::Status::failure(text, "Failed to parse error data")
                    .with_code(status.as_u16())
                    .boxed(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::client::lean_writes::{self, Written};
    use crate::client::test_server::ScriptedServer;
    use crate::client::{ApiProtocol, ClientLimits, LeaseDeadline, TokenOrder, ordered_clients};
    use k8s_openapi::api::core::v1::Pod;

    const CREATED: &str = "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: 73\r\n\r\n\
        {\"kind\":\"Pod\",\"metadata\":{\"name\":\"p-1\",\"resourceVersion\":\"42\"},\"spec\":{}}";
    const NOT_FOUND: &str = "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 102\r\n\r\n\
        {\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"gone\",\"reason\":\"NotFound\",\"code\":404}";
    const BAD_GATEWAY: &str =
        "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\ncontent-length: 13\r\n\r\n bad gateway\n";
    const NOT_JSON: &str =
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 3\r\n\r\nnot";

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({"metadata":{"generateName":"p-"},"spec":{"containers":[]}}))
            .unwrap()
    }

    /// The worker's writes and kube's client, on the same stack, each against a server of its own
    /// answering `reply`: what each write returned, as its `Debug` text.
    async fn both_ways(reply: &'static str, deadline: LeaseDeadline) -> [(String, usize); 2] {
        let mut out = Vec::new();
        for through_kube in [false, true] {
            let server = ScriptedServer::start(vec![reply]).await;
            let client = ordered_clients(
                kube::Config::new(server.url.parse().unwrap()),
                ClientLimits::UNLIMITED,
                Some(deadline.clone()),
                &TokenOrder::Arrival,
                ApiProtocol::Http1,
            )
            .unwrap();
            let writes = if through_kube { ApiWrites::through(client.kube.clone()) } else { client.writes };
            let written = lean_writes::create(&writes, "ns", &Default::default(), &pod()).await;
            let sent = server.requests.borrow().len();
            out.push((
                format!("{:?}", written.map(|w: Written| w.resource_version().map(str::to_string))),
                sent,
            ));
        }
        [out[0].clone(), out[1].clone()]
    }

    #[tokio::test]
    async fn an_answer_is_decoded_as_kube_client_decodes_it() {
        let [direct, kube] = both_ways(CREATED, LeaseDeadline::default()).await;
        assert_eq!(direct, (r#"Ok(Some("42"))"#.to_string(), 1));
        assert_eq!(direct, kube);
    }

    #[tokio::test]
    async fn a_refusal_is_the_status_the_server_sent_as_kube_client_reads_it() {
        let [direct, kube] = both_ways(NOT_FOUND, LeaseDeadline::default()).await;
        assert!(direct.0.starts_with("Err(Api(Status {"), "{direct:?}");
        assert!(direct.0.contains("reason: \"NotFound\"") && direct.0.contains("code: 404"), "{direct:?}");
        assert_eq!(direct, kube);
    }

    #[tokio::test]
    async fn a_refusal_that_is_not_a_status_carries_its_text_and_code() {
        let [direct, kube] = both_ways(BAD_GATEWAY, LeaseDeadline::default()).await;
        assert!(
            direct.0.contains("message: \"bad gateway\"") && direct.0.contains("code: 502"),
            "{direct:?}"
        );
        assert_eq!(direct, kube);
    }

    #[tokio::test]
    async fn an_answer_that_does_not_decode_is_a_serde_error() {
        let [direct, kube] = both_ways(NOT_JSON, LeaseDeadline::default()).await;
        assert!(direct.0.starts_with("Err(SerdeError("), "{direct:?}");
        assert_eq!(direct, kube);
    }

    #[tokio::test]
    async fn a_write_after_the_lease_lapsed_is_refused_unsent_either_way() {
        let deadline = LeaseDeadline::default();
        deadline.0.write().deadline = Some(Instant::now() - Duration::from_secs(1));
        let [direct, kube] = both_ways(CREATED, deadline).await;
        assert!(direct.0.contains("LeaseLapsed"), "{direct:?}");
        assert_eq!(direct, (direct.0.clone(), 0), "never sent");
        assert_eq!(direct, kube);
    }

    /// A sim with no nodes and no kubelet (nothing but a test's writes changes its pods), and a
    /// client on the worker's stack.
    async fn sim_and_client() -> (batchfleet_sim::SimCluster, crate::client::ApiClient) {
        use batchfleet_sim::{SimCluster, SimConfig};
        let sim = SimCluster::start(SimConfig { nodes: 0, kubelet: false, ..SimConfig::default() })
            .await
            .expect("sim");
        let config = kube::Config::new(sim.url().parse().unwrap());
        let client =
            ordered_clients(config, ClientLimits::UNLIMITED, None, &TokenOrder::Arrival, ApiProtocol::Http1)
                .unwrap();
        (sim, client)
    }

    /// A pod named p-1 with the Job controller's tracking finalizer.
    fn tracked_pod() -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p-1",
            "finalizers": ["batch.kubernetes.io/job-tracking"]}, "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        .unwrap()
    }

    /// Against the sim: a pod's create, patch and delete sent on the worker's stack read the
    /// resourceVersion each wrote (the one a read then finds), and a refusal is classified as
    /// upstream branches on it.
    #[tokio::test]
    async fn pod_writes_against_the_sim_read_what_they_wrote() {
        use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
        let (_sim, client) = sim_and_client().await;
        let (pods, writes): (Api<Pod>, _) = (Api::namespaced(client.kube.clone(), "default"), client.writes);
        let pod = tracked_pod();
        let rv_now = || async { pods.get("p-1").await.unwrap().metadata.resource_version };
        let created = lean_writes::create(&writes, "default", &PostParams::default(), &pod).await.unwrap();
        assert_eq!(created.resource_version().map(str::to_string), rv_now().await);
        let label = Patch::Merge(serde_json::json!({"metadata": {"labels": {"a": "b"}}}));
        let params = PatchParams::default();
        let patched = lean_writes::patch::<Pod, _>(&writes, "default", "p-1", &params, &label).await.unwrap();
        assert_eq!(patched.resource_version().map(str::to_string), rv_now().await);
        assert_ne!(patched.resource_version(), created.resource_version());
        // With its finalizer, the delete answers with the pod as it left it.
        let deleted =
            lean_writes::delete::<Pod>(&writes, "default", "p-1", &DeleteParams::default()).await.unwrap();
        assert!(!deleted.is_status());
        assert_eq!(deleted.resource_version().map(str::to_string), rv_now().await);
        let again = lean_writes::create(&writes, "default", &PostParams::default(), &pod).await.unwrap_err();
        assert!(crate::api_errors::is_already_exists(&again), "{again:?}");
        let missing = lean_writes::delete::<Pod>(&writes, "default", "none", &DeleteParams::default()).await;
        assert!(crate::api_errors::is_not_found(&missing.unwrap_err()));
    }

    /// Against the sim, the writes the controllers send read the same answered in protobuf as in
    /// JSON: a pod's create, patch and delete (the resourceVersion each wrote), an Event's create
    /// and patch (what the correlator keeps), and the refusals upstream branches on, down to each
    /// `Status`'s details and causes. The protobuf client's answers did come in protobuf.
    #[tokio::test]
    async fn writes_answered_in_protobuf_read_as_in_json_against_the_sim() {
        use k8s_openapi::api::core::v1::{Event, Namespace};
        use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
        let (_sim, client) = sim_and_client().await;
        let pod = tracked_pod();
        let invalid: Pod = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "Bad_Name"}, "spec": {"containers": []}}),
        )
        .unwrap();
        let event: Event = serde_json::from_value(serde_json::json!({"metadata": {"name": "p-1.187c9a"},
            "involvedObject": {"kind": "Pod", "name": "p-1", "apiVersion": "v1"}, "reason": "Created",
            "message": "m", "count": 1, "firstTimestamp": "2026-12-01T05:00:00Z", "type": "Normal"}))
        .unwrap();
        let mut transcripts = Vec::new();
        for protobuf in [false, true] {
            let namespace = if protobuf { "protobuf" } else { "json" };
            let namespace_object: Namespace =
                serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}})).unwrap();
            Api::<Namespace>::all(client.kube.clone())
                .create(&PostParams::default(), &namespace_object)
                .await
                .unwrap();
            let writes = client.writes.clone().with_protobuf_answers(protobuf);
            let pods: Api<Pod> = Api::namespaced(client.kube.clone(), namespace);
            let rv_now = || async { pods.get("p-1").await.unwrap().metadata.resource_version };
            let mut transcript = Vec::new();
            let req = kube::core::Request::new(<Pod as kube::Resource>::url_path(&(), Some(namespace)))
                .create(&PostParams::default(), lean_writes::body(&pod).unwrap())
                .unwrap();
            let (created, answered_in_protobuf) = writes.answer::<Written>(req).await.unwrap();
            assert_eq!(answered_in_protobuf, protobuf);
            transcript.push(format!(
                "{:?} {:?}",
                created.metadata.name,
                created.resource_version() == rv_now().await.as_deref()
            ));
            let label = Patch::Merge(serde_json::json!({"metadata": {"labels": {"a": "b"}}}));
            let patched =
                lean_writes::patch::<Pod, _>(&writes, namespace, "p-1", &PatchParams::default(), &label)
                    .await
                    .unwrap();
            transcript.push(format!(
                "{:?} {:?}",
                patched.metadata.name,
                patched.resource_version() == rv_now().await.as_deref()
            ));
            let deleted = lean_writes::delete::<Pod>(&writes, namespace, "p-1", &DeleteParams::default())
                .await
                .unwrap();
            transcript.push(format!(
                "{} {:?}",
                deleted.is_status(),
                deleted.resource_version() == rv_now().await.as_deref()
            ));
            let refusals = [
                lean_writes::create(&writes, namespace, &PostParams::default(), &pod).await,
                lean_writes::create(&writes, namespace, &PostParams::default(), &invalid).await,
                lean_writes::delete::<Pod>(&writes, namespace, "none", &DeleteParams::default()).await,
                lean_writes::patch::<Pod, _>(&writes, namespace, "none", &PatchParams::default(), &label)
                    .await,
            ];
            transcript.extend(refusals.into_iter().map(|r| format!("{r:?}")));
            let written: lean_writes::WrittenEvent =
                lean_writes::create_answered(&writes, namespace, &PostParams::default(), &event)
                    .await
                    .unwrap();
            let count =
                Patch::Merge(serde_json::json!({"count": 2, "lastTimestamp": "2026-12-01T05:00:09Z"}));
            let patched: lean_writes::WrittenEvent = lean_writes::patch_answered::<Event, _, _>(
                &writes,
                namespace,
                "p-1.187c9a",
                &PatchParams::default(),
                &count,
            )
            .await
            .unwrap();
            let stored =
                Api::<Event>::namespaced(client.kube.clone(), namespace).get("p-1.187c9a").await.unwrap();
            assert_eq!(patched.metadata.resource_version, stored.metadata.resource_version);
            for e in [written, patched] {
                transcript.push(format!("{:?} {:?} {:?}", e.metadata.name, e.count, e.first_timestamp));
            }
            transcripts.push(transcript);
        }
        assert!(
            transcripts[0][3].contains("AlreadyExists") && transcripts[0][4].contains("causes: [StatusCause")
        );
        assert_eq!(transcripts[1], transcripts[0]);
    }
}
