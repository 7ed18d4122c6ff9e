//! client-go's client-side rate limit: a token bucket of `qps` with `burst`, so a worker's API
//! load is bounded the way kube-controller-manager's is (QPS 20, burst 30 by default).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tower::{Layer, Service};

use super::ClientLimits;

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

/// Tower layer applying a [`TokenBucket`] before each request.
#[derive(Clone)]
pub struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
}

impl RateLimitLayer {
    pub fn new(limit: ClientLimits) -> Self {
        Self { bucket: Arc::new(TokenBucket::new(limit)) }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimited { inner, bucket: self.bucket.clone(), sleep: None, permitted: false }
    }
}

/// Waits for a token in `poll_ready`, so the requests of one client queue behind the bucket in
/// order, as client-go's rate limiter makes them.
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    permitted: bool,
}

impl<S, Req> Service<Req> for RateLimited<S>
where
    S: Service<Req>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.permitted {
            if self.sleep.is_none() {
                let wait = self.bucket.reserve();
                if wait.is_zero() {
                    self.permitted = true;
                } else {
                    self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
                }
            }
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
                self.permitted = true;
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        self.permitted = false;
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
}
