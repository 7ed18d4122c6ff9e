//! The HTTP front: routing, bodies, content negotiation, fault injection, and the chunked watch
//! responses. Real clients (kube-rs, kubectl) talk to this.

mod admin;
mod audited;
mod list;
pub mod negotiate;
mod pod_streams;
mod query;
mod resource;
mod route;
mod watch;

pub use admin::NodeAdmin;
pub use list::Snapshots;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::apiserver::{ApiError, ApiServer};
use crate::counters::Counters;
use crate::faults::Faults;
use crate::kubectl;
use query::Query;
use route::Route;

pub type Body = BoxBody<Bytes, Infallible>;

/// The largest request body the apiserver accepts (3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// State every request handler shares.
pub struct Shared {
    pub api: Arc<ApiServer>,
    pub faults: Faults,
    pub counters: Counters,
    pub snapshots: Snapshots,
    pub bookmark_interval: Duration,
    pub address: String,
    pub nodes: Option<Arc<dyn NodeAdmin>>,
    /// Where every request is recorded, when the sim keeps an audit log.
    pub audit: Option<crate::audit::AuditLog>,
    /// KEP-5866 served: off, `shardSelector` is ignored as an API server without the feature
    /// ignores an unknown parameter (no filtering, no `shardInfo` echo).
    pub shard_selector: std::sync::atomic::AtomicBool,
}

/// A response before encoding.
pub struct Reply {
    status: StatusCode,
    body: ReplyBody,
    warnings: Vec<String>,
    retry_after: Option<u64>,
}

enum ReplyBody {
    Bytes(Bytes, &'static str),
    Stream(mpsc::Receiver<Bytes>, &'static str),
}

impl Reply {
    pub fn bytes(status: StatusCode, body: Bytes) -> Self {
        Self {
            status,
            body: ReplyBody::Bytes(body, "application/json"),
            warnings: Vec::new(),
            retry_after: None,
        }
    }

    pub fn json(status: StatusCode, body: &Value) -> Self {
        Self::bytes(status, Bytes::from(serde_json::to_vec(body).unwrap_or_default()))
    }

    pub fn text(status: StatusCode, body: &str) -> Self {
        let body = ReplyBody::Bytes(Bytes::from(body.to_string()), "text/plain; charset=utf-8");
        Self { status, body, warnings: Vec::new(), retry_after: None }
    }

    fn stream(rx: mpsc::Receiver<Bytes>) -> Self {
        Self::stream_of(rx, "application/json")
    }

    /// A chunked 200 of `content_type`, flushed per message, ended when the sender drops.
    pub fn stream_of(rx: mpsc::Receiver<Bytes>, content_type: &'static str) -> Self {
        let body = ReplyBody::Stream(rx, content_type);
        Self { status: StatusCode::OK, body, warnings: Vec::new(), retry_after: None }
    }

    /// A 200 with a body of `content_type`.
    pub fn bytes_of(body: Bytes, content_type: &'static str) -> Self {
        let body = ReplyBody::Bytes(body, content_type);
        Self { status: StatusCode::OK, body, warnings: Vec::new(), retry_after: None }
    }

    fn error(e: &ApiError) -> Self {
        let status = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut reply = if e.code == 429 && e.details.as_ref().is_none_or(|d| d.get("causes").is_none()) {
            // Upstream's priority-and-fairness filter answers 429 in plain text; a 429 with
            // causes (an eviction a disruption budget refuses) is a Status.
            Self::text(status, "Too many requests, please try again later.\n")
        } else {
            Self::json(status, &e.status())
        };
        reply.retry_after = e.retry_after;
        reply
    }

    fn into_response(self) -> Response<Body> {
        let mut builder = Response::builder().status(self.status);
        if let Some(seconds) = self.retry_after {
            builder = builder.header(http::header::RETRY_AFTER, seconds);
        }
        for w in &self.warnings {
            // net.NewWarningHeader: the text quoted, `"` and `\` escaped with a backslash.
            let quoted = w.replace('\\', "\\\\").replace('"', "\\\"");
            if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{quoted}\"")) {
                builder = builder.header("Warning", v);
            }
        }
        let response = match self.body {
            ReplyBody::Bytes(b, ct) => {
                builder.header(http::header::CONTENT_TYPE, ct).body(Full::new(b).boxed())
            }
            ReplyBody::Stream(rx, ct) => {
                let stream = ReceiverStream::new(rx).map(|b| Ok::<_, Infallible>(Frame::data(b)));
                builder
                    .header(http::header::CONTENT_TYPE, ct)
                    .header(http::header::CACHE_CONTROL, "no-cache, private")
                    .body(BodyExt::boxed(StreamBody::new(stream)))
            }
        };
        response.unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
    }
}

/// Serves HTTP/1.1 and h2c on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (stream, peer): (_, SocketAddr) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move {
                    Ok::<_, Infallible>(match shared.audit.clone() {
                        Some(log) => audited::handle_audited(shared, log, peer, req).await,
                        None => handle(shared, req).await,
                    })
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let mut builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            // kube-apiserver's streams per HTTP/2 connection: Go's default, 250
            // (--http2-max-streams-per-connection 0); hyper's own is 200.
            builder.http2().max_concurrent_streams(HTTP2_MAX_STREAMS_PER_CONNECTION);
            if let Err(e) = builder.serve_connection(io, service).await {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
}

const HTTP2_MAX_STREAMS_PER_CONNECTION: u32 = 250;

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let mut q = Query::parse(parts.uri.query());
    if !shared.shard_selector.load(std::sync::atomic::Ordering::Relaxed) {
        q.remove("shardSelector");
    }
    let route = route::parse(parts.uri.path());
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            return Reply::error(&ApiError::request_entity_too_large(MAX_BODY_BYTES)).into_response();
        }
        Err(e) => return Reply::error(&ApiError::bad_request(format!("reading body: {e}"))).into_response(),
    };
    let mut protobuf = false;
    let reply = match route {
        Route::Resource(path) => {
            match protobuf_for(&shared, &path, &parts.headers) {
                Ok(p) => protobuf = p,
                Err(e) => return Reply::error(&e).into_response(),
            }
            let verb = resource::verb(&parts.method, &path, &q);
            let resource_name = match &path.subresource {
                Some(sub) => format!("{}/{sub}", path.plural),
                None => path.plural.clone(),
            };
            shared.counters.request(verb, &resource_name);
            let injection = shared.faults.inject(verb, &resource_name);
            if !injection.latency.is_zero() {
                tokio::time::sleep(injection.latency).await;
            }
            match injection.error {
                Some(error) => Err(injected_error(&shared, &path, error)),
                None => resource::handle(&shared, &parts.method, &path, &q, &parts.headers, body).await,
            }
        }
        other => {
            shared.counters.request(&parts.method.as_str().to_lowercase(), "nonResource");
            non_resource(&shared, &parts.method, other, &q, &parts.headers, body).await
        }
    };
    let reply = match reply {
        Ok(r) => r,
        Err(e) => {
            if e.code >= 500 {
                tracing::warn!(code = e.code, message = %e.message, path = %parts.uri.path(), "request failed");
            }
            Reply::error(&e)
        }
    };
    if protobuf { negotiate::to_protobuf(reply).into_response() } else { reply.into_response() }
}

/// Whether the response goes out in protobuf: the client prefers it and the resource is built in.
/// A custom resource asked for in protobuf only is not acceptable, as kube-apiserver answers.
fn protobuf_for(
    shared: &Shared,
    path: &route::ResourcePath,
    headers: &http::HeaderMap,
) -> Result<bool, ApiError> {
    let wanted = negotiate::wanted(headers);
    if wanted == negotiate::Wanted::Json {
        return Ok(false);
    }
    let builtin = shared
        .api
        .resolve(&path.group, &path.version, &path.plural)
        .is_none_or(|t| t.rt.builtin && t.rt.group != "apiextensions.k8s.io");
    match (builtin, wanted) {
        (true, _) => Ok(true),
        (false, negotiate::Wanted::ProtobufOnly) => Err(ApiError::not_acceptable(
            "only the following media types are accepted: application/json, application/yaml, application/json;stream=watch",
        )),
        (false, _) => Ok(false),
    }
}

fn injected_error(
    shared: &Shared,
    path: &route::ResourcePath,
    injected: crate::faults::InjectedError,
) -> ApiError {
    let crate::faults::InjectedError { code, retry_after_seconds: retry_after, message } = injected;
    if let Some(message) = message {
        // As the rule words it: an admission webhook's denial, a policy's refusal.
        return ApiError::injected(code, message, (code == 429 || code == 503).then_some(retry_after.max(1)));
    }
    let name = path.name.clone().unwrap_or_default();
    match code {
        400 => ApiError::bad_request("injected: bad request"),
        403 | 422 => match shared.api.resolve(&path.group, &path.version, &path.plural) {
            Some(t) if code == 403 => ApiError::forbidden(&t.rt, &name, "injected"),
            Some(t) => ApiError::invalid(&t.rt, &name, &[]),
            None => ApiError::bad_request("injected: bad request"),
        },
        409 => match shared.api.resolve(&path.group, &path.version, &path.plural) {
            Some(t) => ApiError::stale(&t.rt, &name),
            None => ApiError::internal("injected conflict"),
        },
        429 => ApiError::too_many_requests(retry_after.max(1)),
        503 => {
            let mut e = ApiError::service_unavailable(
                "injected: the server is currently unable to handle the request",
            );
            e.retry_after = Some(retry_after.max(1));
            e
        }
        504 => ApiError::timeout("injected: the server was unable to return a response in the time allotted"),
        _ => ApiError::internal("injected server error"),
    }
}

async fn non_resource(
    shared: &Arc<Shared>,
    method: &http::Method,
    route: Route,
    q: &Query,
    headers: &http::HeaderMap,
    body: Bytes,
) -> Result<Reply, ApiError> {
    let registry = shared.api.registry();
    let ok = |v: Value| Ok(Reply::json(StatusCode::OK, &v));
    match route {
        Route::Version => ok(kubectl::version_info()),
        Route::Health => Ok(Reply::text(StatusCode::OK, "ok")),
        Route::Api => ok(kubectl::api_versions(&shared.address)),
        Route::Apis => ok(kubectl::api_group_list(&registry)),
        Route::Group { group } => {
            let list = kubectl::api_group_list(&registry);
            let found = list
                .get("groups")
                .and_then(Value::as_array)
                .and_then(|gs| {
                    gs.iter().find(|g| g.get("name").and_then(Value::as_str) == Some(group.as_str()))
                })
                .cloned();
            match found {
                Some(mut g) => {
                    g["kind"] = "APIGroup".into();
                    g["apiVersion"] = "v1".into();
                    ok(g)
                }
                None => Err(ApiError::page_not_found()),
            }
        }
        Route::GroupVersion { group, version } => kubectl::api_resource_list(&registry, &group, &version)
            .map_or_else(|| Err(ApiError::page_not_found()), ok),
        Route::OpenApiV3Root => ok(kubectl::openapi_v3_root(&registry)),
        Route::OpenApiV3 { group, version } => kubectl::openapi_v3_group_version(&registry, &group, &version)
            .map_or_else(
                || Err(ApiError::page_not_found()),
                |doc| Ok(Reply::bytes_of(doc, "application/json")),
            ),
        Route::OpenApiV2 => match negotiate::openapi_v2(headers) {
            Some(negotiate::OpenApiV2::Json) => {
                Ok(Reply::bytes_of(kubectl::openapi_v2_json(), "application/json"))
            }
            Some(negotiate::OpenApiV2::Protobuf) => {
                Ok(Reply::bytes_of(kubectl::openapi_v2_protobuf(), kubectl::OPENAPI_V2_PROTOBUF_CONTENT_TYPE))
            }
            None => Err(ApiError::not_acceptable(
                "only the following media types are accepted: application/json, application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
            )),
        },
        Route::SelfSubjectAccessReview | Route::SelfSubjectRulesReview | Route::SelfSubjectReview
            if method != http::Method::POST =>
        {
            Err(ApiError::method_not_allowed())
        }
        Route::SelfSubjectAccessReview => {
            Ok(Reply::json(StatusCode::CREATED, &kubectl::self_subject_access_review(&body)))
        }
        Route::SelfSubjectRulesReview => {
            Ok(Reply::json(StatusCode::CREATED, &kubectl::self_subject_rules_review(&body)))
        }
        Route::SelfSubjectReview => Ok(Reply::json(StatusCode::CREATED, &kubectl::self_subject_review())),
        Route::Admin(rest) => admin::handle(shared, method, &rest, q, body).await,
        Route::Resource(_) | Route::NotFound => Err(ApiError::page_not_found()),
    }
}
