//! client-go's client-side rate limit: a token bucket of `qps` with `burst`, so a process's API
//! load is bounded the way kube-controller-manager's is (QPS 20, burst 30 by default).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tower::{Layer, Service};

use crate::{ClientLimits, ClientMetrics};

/// A token bucket shared by every request of one client.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    pub fn new(limit: ClientLimits) -> Self {
        let burst = f64::from(limit.burst.max(1));
        Self { qps: limit.qps, burst, state: Mutex::new((burst, Instant::now())) }
    }

    /// Takes one token, returning how long to wait before the request may go.
    pub fn reserve(&self) -> Duration {
        let mut s = self.state.lock();
        let now = Instant::now();
        let refill = now.duration_since(s.1).as_secs_f64() * self.qps;
        s.0 = (s.0 + refill).min(self.burst);
        s.1 = now;
        s.0 -= 1.0;
        if s.0 >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-s.0 / self.qps) }
    }
}

/// Tower layer applying a [`TokenBucket`] before each request, and recording each request's wait
/// in `rest_client_rate_limiter_duration_seconds`.
#[derive(Clone)]
pub struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
    host: String,
    metrics: ClientMetrics,
}

impl RateLimitLayer {
    /// A bucket for the requests to `host` (the API server's, as the metric's label).
    pub fn new(limit: ClientLimits, host: &str, metrics: ClientMetrics) -> Self {
        Self { bucket: Arc::new(TokenBucket::new(limit)), host: host.to_string(), metrics }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            host: self.host.clone(),
            metrics: self.metrics.clone(),
            sleep: None,
            waited: None,
        }
    }
}

/// Waits for a token in `poll_ready`, so the requests of one client queue behind the bucket in
/// order, as client-go's rate limiter makes them.
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
    host: String,
    metrics: ClientMetrics,
    /// The wait for the next request's token, and the sleep that serves it.
    sleep: Option<(Duration, Pin<Box<tokio::time::Sleep>>)>,
    /// Set once the next request has its token: how long it waited for it.
    waited: Option<Duration>,
}

impl<S: Clone> Clone for RateLimited<S> {
    /// A clone takes its next token on its own, from the same bucket.
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            bucket: self.bucket.clone(),
            host: self.host.clone(),
            metrics: self.metrics.clone(),
            sleep: None,
            waited: None,
        }
    }
}

impl<S, B> Service<http::Request<B>> for RateLimited<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.waited.is_none() {
            if self.sleep.is_none() {
                let wait = self.bucket.reserve();
                if wait.is_zero() {
                    self.waited = Some(Duration::ZERO);
                } else {
                    self.sleep = Some((wait, Box::pin(tokio::time::sleep(wait))));
                }
            }
            if let Some((wait, sleep)) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.waited = Some(*wait);
                self.sleep = None;
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let waited = self.waited.take().unwrap_or_default();
        self.metrics
            .rate_limiter_duration
            .with_label_values(&[req.method().as_str(), &self.host])
            .observe(waited.as_secs_f64());
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_bucket_allows_a_burst_then_paces_at_qps() {
        let b = TokenBucket::new(ClientLimits { qps: 20.0, burst: 30, max_in_flight: 0 });
        for _ in 0..30 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        assert_eq!(b.reserve(), Duration::from_millis(50));
        assert_eq!(b.reserve(), Duration::from_millis(100));
        tokio::time::advance(Duration::from_secs(1)).await;
        // 20 tokens refilled, 2 were owed.
        for _ in 0..18 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        assert!(b.reserve() > Duration::ZERO);
    }

    /// Past the burst, requests wait for their tokens, and the metric shows the waits.
    #[tokio::test(start_paused = true)]
    async fn waits_for_tokens_show_in_the_rate_limiter_metric() {
        use tower::ServiceExt;
        let metrics = ClientMetrics::new();
        let limit = ClientLimits { qps: 10.0, burst: 2, max_in_flight: 0 };
        let layer = RateLimitLayer::new(limit, "api:6443", metrics.clone());
        let mut service = layer.layer(tower::service_fn(|_: http::Request<()>| async { Ok::<_, ()>(()) }));
        let started = Instant::now();
        for _ in 0..4 {
            service.ready().await.unwrap().call(http::Request::post("/x").body(()).unwrap()).await.unwrap();
        }
        // Two from the burst, then one every 100 ms.
        assert_eq!(started.elapsed(), Duration::from_millis(200));
        let waits = metrics.rate_limiter_duration.with_label_values(&["POST", "api:6443"]);
        assert_eq!(waits.get_sample_count(), 4, "every request is observed");
        assert!(
            (waits.get_sample_sum() - 0.2).abs() < 1e-9,
            "waited 0 + 0 + 0.1 + 0.1: {}",
            waits.get_sample_sum()
        );
    }
}
