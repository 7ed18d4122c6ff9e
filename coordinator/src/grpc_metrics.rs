//! go-grpc-prometheus's `grpc_server_handled_total{grpc_service, grpc_method, grpc_code}` for the
//! coordinator's gRPC server: every call counted by how it ended. The limits on gRPC show here
//! when they bite: a message over `--grpc-max-message-size` ends its call with `OutOfRange`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame};
use prometheus::{IntCounterVec, Opts, Registry};
use tower::{Layer, Service};

/// The message size limit of the coordinator's gRPC services, and tonic's default.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 * 1024 * 1024;

#[derive(Clone)]
pub struct GrpcServerMetrics {
    handled: IntCounterVec,
}

impl GrpcServerMetrics {
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let handled = IntCounterVec::new(
            Opts::new(
                "grpc_server_handled_total",
                "Total number of RPCs completed on the server, regardless of success or failure.",
            ),
            &["grpc_service", "grpc_method", "grpc_code"],
        )?;
        registry.register(Box::new(handled.clone()))?;
        Ok(Self { handled })
    }

    /// The count of calls to `service`/`method` that ended with `code` (`OK`, `OutOfRange`, …).
    pub fn handled(&self, service: &str, method: &str, code: tonic::Code) -> u64 {
        self.handled.with_label_values(&[service, method, &code_name(code)]).get()
    }
}

/// go-grpc's names of the codes (`OutOfRange`), as go-grpc-prometheus labels them.
fn code_name(code: tonic::Code) -> String {
    format!("{code:?}")
}

/// Counts every call of the services below it in [`GrpcServerMetrics`].
#[derive(Clone)]
pub struct GrpcMetricsLayer {
    metrics: GrpcServerMetrics,
}

impl GrpcMetricsLayer {
    pub fn new(metrics: GrpcServerMetrics) -> Self {
        Self { metrics }
    }
}

impl<S> Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetered<S>;
    fn layer(&self, inner: S) -> Self::Service {
        GrpcMetered { inner, metrics: self.metrics.clone() }
    }
}

#[derive(Clone)]
pub struct GrpcMetered<S> {
    inner: S,
    metrics: GrpcServerMetrics,
}

/// The call a response belongs to, counted once its status is known.
struct Pending {
    metrics: GrpcServerMetrics,
    service: String,
    method: String,
}

impl Pending {
    /// Counts the call if `headers` carry its status (`grpc-status`); whether they did.
    fn count_from(&self, headers: &http::HeaderMap) -> bool {
        let Some(status) = headers.get("grpc-status") else { return false };
        let code = status
            .to_str()
            .ok()
            .and_then(|s| s.parse::<i32>().ok())
            .map_or(tonic::Code::Unknown, tonic::Code::from_i32);
        self.metrics.handled.with_label_values(&[&self.service, &self.method, &code_name(code)]).inc();
        true
    }
}

impl<S, B, RB> Service<http::Request<B>> for GrpcMetered<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<MeteredBody<RB>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // `/batchfleet.v1.FleetAdmin/Drain`.
        let path = request.uri().path().trim_start_matches('/');
        let (service, method) = path.split_once('/').unwrap_or((path, ""));
        let pending =
            Pending { metrics: self.metrics.clone(), service: service.into(), method: method.into() };
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await?;
            // A call that fails before its reply has its status in the headers ("trailers-only");
            // any other in the trailers that end the body.
            let pending = (!pending.count_from(response.headers())).then_some(pending);
            Ok(response.map(|inner| MeteredBody { inner, pending }))
        })
    }
}

/// A response body that counts its call when its trailers pass.
pub struct MeteredBody<B> {
    inner: B,
    pending: Option<Pending>,
}

impl<B: Body + Unpin> Body for MeteredBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(trailers) = frame.trailers_ref()
            && self.pending.as_ref().is_some_and(|p| p.count_from(trailers))
        {
            self.pending = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;

    use super::*;

    /// A request over the message size limit is refused with OutOfRange, and the count shows
    /// it; a call within it counts as OK.
    #[tokio::test]
    async fn a_message_over_the_limit_is_refused_and_counted() {
        let metrics = GrpcServerMetrics::register(&Registry::new()).unwrap();
        let (reporter, health) = tonic_health::server::health_reporter();
        reporter.set_service_status("", tonic_health::ServingStatus::Serving).await;
        let limited = health.max_decoding_message_size(1024);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(
            tonic::transport::Server::builder()
                .layer(GrpcMetricsLayer::new(metrics.clone()))
                .add_service(limited)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let channel = tonic::transport::Endpoint::from_shared(url).unwrap().connect().await.unwrap();
        let mut client = HealthClient::new(channel);
        let ok = client.check(HealthCheckRequest { service: String::new() }).await;
        assert!(ok.is_ok(), "{ok:?}");
        let refused = client.check(HealthCheckRequest { service: "x".repeat(2048) }).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::OutOfRange, "{refused:?}");
        assert_eq!(metrics.handled("grpc.health.v1.Health", "Check", tonic::Code::Ok), 1);
        assert_eq!(metrics.handled("grpc.health.v1.Health", "Check", tonic::Code::OutOfRange), 1);
    }
}
