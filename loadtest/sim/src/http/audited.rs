//! Wraps request handling with the audit log: what the request was (verb, object reference, user
//! agent, source address) is read before it is handled, and the event is written when the
//! response is complete — for a watch, also when its headers go out.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::query::Query;
use super::route::{self, Route};
use super::{Body, Shared, handle, resource};
use crate::audit::{AuditEvent, AuditLog, ObjectReference, ResponseStatus, Stage, UserInfo, micro_time};

/// Handles `req`, writing its audit events to `log`.
pub async fn handle_audited(
    shared: Arc<Shared>,
    log: AuditLog,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Response<Body> {
    let received = jiff::Timestamp::now();
    let mut event = describe(&req, peer, received);
    let response = handle(shared, req).await;
    event.response_status =
        Some(ResponseStatus { metadata: Default::default(), code: response.status().as_u16() });
    if event.verb != "watch" || !response.status().is_success() {
        event.stage = Stage::ResponseComplete;
        event.stage_timestamp = micro_time(jiff::Timestamp::now());
        log.record(&event);
        return response;
    }
    event.stage = Stage::ResponseStarted;
    event.stage_timestamp = micro_time(jiff::Timestamp::now());
    log.record(&event);
    let (parts, body) = response.into_parts();
    let body = CompletesOnDrop { inner: body, pending: Some((log, event)) };
    Response::from_parts(parts, body.boxed())
}

/// The event's request half, as the audit filter fills it before the handler runs.
fn describe(req: &Request<Incoming>, peer: SocketAddr, received: jiff::Timestamp) -> AuditEvent {
    let uri = req.uri();
    let request_uri =
        uri.path_and_query().map_or_else(|| uri.path().to_string(), |pq| pq.as_str().to_string());
    let (verb, object_ref) = match route::parse(uri.path()) {
        Route::Resource(path) => {
            let q = Query::parse(uri.query());
            let verb = resource::verb(req.method(), &path, &q).to_string();
            let object_ref = ObjectReference {
                resource: path.plural.clone(),
                namespace: path.namespace.clone().unwrap_or_default(),
                name: path.name.clone().unwrap_or_default(),
                api_group: path.group.clone(),
                api_version: path.version.clone(),
                subresource: path.subresource.clone().unwrap_or_default(),
            };
            (verb, Some(object_ref))
        }
        // Non-resource requests carry the lower-cased HTTP method as their verb upstream.
        _ => (req.method().as_str().to_lowercase(), None),
    };
    let user_agent =
        req.headers().get(http::header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    AuditEvent {
        kind: "Event".into(),
        api_version: "audit.k8s.io/v1".into(),
        level: "Metadata".into(),
        audit_id: uuid::Uuid::new_v4().to_string(),
        stage: Stage::ResponseComplete,
        request_uri,
        verb,
        // The sim authenticates nobody; every client is the kubeconfig's one user.
        user: UserInfo { username: "sim".into(), groups: vec!["system:authenticated".into()] },
        source_ips: vec![peer.ip().to_string()],
        user_agent,
        object_ref,
        response_status: None,
        request_received_timestamp: micro_time(received),
        stage_timestamp: String::new(),
    }
}

/// A watch's body: writes the `ResponseComplete` event when the stream ends or the client goes.
struct CompletesOnDrop {
    inner: Body,
    pending: Option<(AuditLog, AuditEvent)>,
}

impl Drop for CompletesOnDrop {
    fn drop(&mut self) {
        if let Some((log, mut event)) = self.pending.take() {
            event.stage = Stage::ResponseComplete;
            event.stage_timestamp = micro_time(jiff::Timestamp::now());
            log.record(&event);
        }
    }
}

impl HttpBody for CompletesOnDrop {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
