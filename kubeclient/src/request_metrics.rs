//! client-go's request metrics, which kube-controller-manager's dashboards and alerts read:
//! `rest_client_requests_total{code,method,host}` and
//! `rest_client_request_duration_seconds{verb,host}`.
//!
//! Measured as client-go's `rest.Request` measures them (k8s.io/client-go `rest/request.go`):
//! - every request counts once, with the response's status code, or `<error>` when no response
//!   came (a connection refused, a reset, a timeout): `updateRequestResultMetric`. A watch counts
//!   too, with the status its response opened with.
//! - the duration is `request()`'s, which `Do` runs: its clock starts before `tryThrottle`, so it
//!   includes the wait for the client-side rate limit (here also for a place under the cap on
//!   requests in flight: this layer goes outside both), and stops once the response's body has
//!   been read, or the request failed. `Watch` and `Stream` do not go through `request()` and
//!   record no duration: a watch's response stays open for minutes, its length says nothing about
//!   the API server's latency. Neither does one here (a request whose query has `watch=true`).
//!
//! Like `rest_client_rate_limiter_duration_seconds`, the wait counts from when the request is the
//! next one the client's queue sends (tower's `poll_ready`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use prometheus::{Histogram, IntCounter};
use tokio::time::Instant;
use tower::{Layer, Service};

use crate::ClientMetrics;

/// client-go's label for a request that got no response.
pub const NO_RESPONSE_CODE: &str = "<error>";

/// Tower layer recording each request in [`ClientMetrics::requests`] and
/// [`ClientMetrics::request_duration`]; outside the limits' layers, so the duration includes
/// their waits, as client-go's does.
#[derive(Clone)]
pub struct RequestMetricsLayer(Arc<Recorder>);

impl RequestMetricsLayer {
    /// Records the requests to `host` (the API server's `host[:port]`, the metrics' label).
    pub fn new(host: &str, metrics: ClientMetrics) -> Self {
        Self(Arc::new(Recorder { host: host.to_string(), metrics, series: Series::default() }))
    }
}

/// What every clone of a layer's service records into, shared: a request clones one `Arc`.
struct Recorder {
    host: String,
    metrics: ClientMetrics,
    series: Series,
}

impl<S> Layer<S> for RequestMetricsLayer {
    type Service = RequestMetrics<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RequestMetrics { inner, recorder: self.0.clone(), waiting_since: None }
    }
}

/// The methods and codes nearly every request has: their series are looked up once, not by
/// `with_label_values` for each request (which hashes the label values under a lock). Each is
/// made when first recorded, so no series shows before a request of its kind, as in client-go.
const METHODS: [http::Method; 5] =
    [http::Method::GET, http::Method::POST, http::Method::PUT, http::Method::PATCH, http::Method::DELETE];
const CODES: [u16; 4] = [200, 201, 404, 409];

#[derive(Default)]
struct Series {
    durations: [OnceLock<Histogram>; METHODS.len()],
    counts: [[OnceLock<IntCounter>; CODES.len()]; METHODS.len()],
}

impl Recorder {
    fn duration(&self, method: &http::Method) -> Histogram {
        let labels = || [method.as_str(), &self.host];
        match METHODS.iter().position(|m| m == method) {
            Some(m) => self.series.durations[m]
                .get_or_init(|| self.metrics.request_duration.with_label_values(&labels()))
                .clone(),
            None => self.metrics.request_duration.with_label_values(&labels()),
        }
    }

    fn count(&self, code: Option<http::StatusCode>, method: &http::Method) {
        let label = code.as_ref().map_or(NO_RESPONSE_CODE, http::StatusCode::as_str);
        let labels = || [label, method.as_str(), &self.host];
        let m = METHODS.iter().position(|m| m == method);
        let c = code.and_then(|code| CODES.iter().position(|c| *c == code.as_u16()));
        match (m, c) {
            (Some(m), Some(c)) => self.series.counts[m][c]
                .get_or_init(|| self.metrics.requests.with_label_values(&labels()))
                .inc(),
            _ => self.metrics.requests.with_label_values(&labels()).inc(),
        }
    }
}

pub struct RequestMetrics<S> {
    inner: S,
    recorder: Arc<Recorder>,
    /// When the next request started waiting for the client to be ready (its limits).
    waiting_since: Option<Instant>,
}

impl<S: Clone> Clone for RequestMetrics<S> {
    /// A clone's next request waits on its own.
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), recorder: self.recorder.clone(), waiting_since: None }
    }
}

/// Whether `uri` asks for a watch (`?watch=true`, or `1` as Go's `strconv.ParseBool` reads).
fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|q| {
        q.split('&').any(|pair| matches!(pair, "watch=true" | "watch=1" | "watch=True" | "watch=TRUE"))
    })
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for RequestMetrics<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Body + Unpin,
{
    type Response = http::Response<TimedBody<ResBody>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.waiting_since.get_or_insert_with(Instant::now);
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        let started = self.waiting_since.take().unwrap_or_else(Instant::now);
        let method = req.method().clone();
        let duration = (!is_watch(req.uri())).then(|| self.recorder.duration(&method));
        let recorder = self.recorder.clone();
        let call = self.inner.call(req);
        Box::pin(async move {
            let response = call.await;
            recorder.count(response.as_ref().ok().map(|r| r.status()), &method);
            let clock = duration.map(|histogram| Clock { histogram, started });
            match response {
                Ok(response) => Ok(response.map(|inner| TimedBody { inner, clock })),
                Err(e) => {
                    drop(clock);
                    Err(e)
                }
            }
        })
    }
}

/// A request's duration, observed once, when dropped.
struct Clock {
    histogram: Histogram,
    started: Instant,
}

impl Drop for Clock {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

/// A response body that stops its request's clock at its end (or error, or when dropped unread).
pub struct TimedBody<B> {
    inner: B,
    clock: Option<Clock>,
}

impl<B: Body + Unpin> Body for TimedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(frame, Poll::Ready(None | Some(Err(_)))) {
            self.clock = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    type TestBody = http_body_util::Full<bytes::Bytes>;

    fn respond_with(status: u16) -> http::Response<TestBody> {
        http::Response::builder().status(status).body(TestBody::from("{}")).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn requests_count_by_status_method_and_host_and_their_duration_by_verb() {
        let metrics = ClientMetrics::new();
        let layer = RequestMetricsLayer::new("api:6443", metrics.clone());
        let service = layer.layer(tower::service_fn(|req: http::Request<()>| async move {
            tokio::time::sleep(Duration::from_millis(40)).await;
            let status = if req.uri().path() == "/missing" { 404 } else { 201 };
            Ok::<_, std::io::Error>(respond_with(status))
        }));
        let post = http::Request::post("/api/v1/namespaces/a/pods").body(()).unwrap();
        let response = service.clone().oneshot(post).await.unwrap();
        response.into_body().collect().await.unwrap();
        let get = http::Request::get("/missing").body(()).unwrap();
        let response = service.clone().oneshot(get).await.unwrap();
        response.into_body().collect().await.unwrap();

        use prometheus::core::Collector;
        let series = |collector: &dyn Collector| collector.collect()[0].get_metric().len();
        assert_eq!(series(&metrics.requests), 2, "a series only for what was sent");
        assert_eq!(series(&metrics.request_duration), 2);
        assert_eq!(metrics.requests.with_label_values(&["201", "POST", "api:6443"]).get(), 1);
        assert_eq!(metrics.requests.with_label_values(&["404", "GET", "api:6443"]).get(), 1);
        let posts = metrics.request_duration.with_label_values(&["POST", "api:6443"]);
        assert_eq!(posts.get_sample_count(), 1);
        assert!((posts.get_sample_sum() - 0.04).abs() < 1e-3, "{}", posts.get_sample_sum());
    }

    /// Methods and codes beyond the few looked up once are recorded the same, and the series
    /// looked up once are shared by every clone of the layer's service.
    #[tokio::test]
    async fn every_method_and_code_counts_and_clones_share_the_series() {
        let metrics = ClientMetrics::new();
        let layer = RequestMetricsLayer::new("api:6443", metrics.clone());
        let service = layer.layer(tower::service_fn(|req: http::Request<()>| async move {
            let status = if req.method() == http::Method::HEAD { 503 } else { 200 };
            Ok::<_, std::io::Error>(respond_with(status))
        }));
        for method in [http::Method::HEAD, http::Method::GET, http::Method::GET, http::Method::OPTIONS] {
            let request = http::Request::builder().method(method).uri("/x").body(()).unwrap();
            let response = service.clone().oneshot(request).await.unwrap();
            response.into_body().collect().await.unwrap();
        }
        assert_eq!(metrics.requests.with_label_values(&["503", "HEAD", "api:6443"]).get(), 1);
        assert_eq!(metrics.requests.with_label_values(&["200", "GET", "api:6443"]).get(), 2);
        assert_eq!(metrics.requests.with_label_values(&["200", "OPTIONS", "api:6443"]).get(), 1);
        let durations =
            |verb| metrics.request_duration.with_label_values(&[verb, "api:6443"]).get_sample_count();
        assert_eq!((durations("HEAD"), durations("GET"), durations("OPTIONS")), (1, 2, 1));
    }

    #[tokio::test]
    async fn a_request_without_a_response_counts_as_error() {
        let metrics = ClientMetrics::new();
        let layer = RequestMetricsLayer::new("api:6443", metrics.clone());
        let service = layer.layer(tower::service_fn(|_: http::Request<()>| async {
            Err::<http::Response<TestBody>, _>(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
        }));
        let result = service.oneshot(http::Request::delete("/x").body(()).unwrap()).await;
        assert!(result.is_err());
        assert_eq!(metrics.requests.with_label_values(&["<error>", "DELETE", "api:6443"]).get(), 1);
        assert_eq!(
            metrics.request_duration.with_label_values(&["DELETE", "api:6443"]).get_sample_count(),
            1,
            "a failed request has its duration too, as in client-go"
        );
    }

    /// The clock runs until the body has been read, as client-go's `Do` reads it inside
    /// `request()`.
    #[tokio::test(start_paused = true)]
    async fn the_duration_ends_when_the_body_has_been_read() {
        let metrics = ClientMetrics::new();
        let layer = RequestMetricsLayer::new("api:6443", metrics.clone());
        let service =
            layer.layer(tower::service_fn(|_: http::Request<()>| async { Ok::<_, ()>(respond_with(200)) }));
        let response = service.oneshot(http::Request::get("/x").body(()).unwrap()).await.unwrap();
        let durations = metrics.request_duration.with_label_values(&["GET", "api:6443"]);
        assert_eq!(durations.get_sample_count(), 0, "not observed before the body is read");
        tokio::time::sleep(Duration::from_millis(250)).await;
        response.into_body().collect().await.unwrap();
        assert_eq!(durations.get_sample_count(), 1);
        assert!((durations.get_sample_sum() - 0.25).abs() < 1e-3, "{}", durations.get_sample_sum());
    }

    #[tokio::test]
    async fn a_watch_counts_but_records_no_duration() {
        let metrics = ClientMetrics::new();
        let layer = RequestMetricsLayer::new("api:6443", metrics.clone());
        let service =
            layer.layer(tower::service_fn(|_: http::Request<()>| async { Ok::<_, ()>(respond_with(200)) }));
        let watch = http::Request::get("/api/v1/pods?resourceVersion=5&watch=true").body(()).unwrap();
        let response = service.oneshot(watch).await.unwrap();
        response.into_body().collect().await.unwrap();
        assert_eq!(metrics.requests.with_label_values(&["200", "GET", "api:6443"]).get(), 1);
        assert_eq!(metrics.request_duration.with_label_values(&["GET", "api:6443"]).get_sample_count(), 0);
        assert!(!is_watch(&"/api/v1/pods?watchCache=true".parse().unwrap()));
        assert!(is_watch(&"/api/v1/pods?watch=1".parse().unwrap()));
    }

    /// The wait for the client-side rate limit is part of the duration, as in client-go.
    #[tokio::test(start_paused = true)]
    async fn the_duration_includes_the_wait_for_the_rate_limit() {
        use crate::{ClientLimits, RateLimitLayer};
        let metrics = ClientMetrics::new();
        let limit = ClientLimits { qps: 10.0, burst: 1, max_in_flight: 0 };
        let service = tower::ServiceBuilder::new()
            .layer(RequestMetricsLayer::new("api:6443", metrics.clone()))
            .layer(RateLimitLayer::new(limit, "api:6443", metrics.clone()))
            .service_fn(|_: http::Request<()>| async { Ok::<_, ()>(respond_with(200)) });
        let mut service = service;
        for _ in 0..2 {
            let response = service
                .ready()
                .await
                .unwrap()
                .call(http::Request::get("/x").body(()).unwrap())
                .await
                .unwrap();
            response.into_body().collect().await.unwrap();
        }
        let durations = metrics.request_duration.with_label_values(&["GET", "api:6443"]);
        assert_eq!(durations.get_sample_count(), 2);
        assert!(
            (durations.get_sample_sum() - 0.1).abs() < 1e-3,
            "the second waited 100 ms: {}",
            durations.get_sample_sum()
        );
    }
}
