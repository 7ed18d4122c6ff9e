//! The worker's Kubernetes client: kubeconfig or in-cluster config, and client-go's client-side
//! rate limit (a token bucket of `qps` with `burst`), so a worker's API load is bounded the way
//! kube-controller-manager's is (QPS 20, burst 30 by default).

use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use tokio::time::Instant;
use tower::{Layer, Service};

/// Client-side rate limit; `qps <= 0` disables it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub qps: f64,
    pub burst: u32,
}

/// A token bucket shared by every request of one client.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    pub fn new(limit: RateLimit) -> Self {
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
    pub fn new(limit: RateLimit) -> Self {
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

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig { path: String, source: kube::config::KubeconfigError },
    #[error("inferring the cluster config: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("building the client: {0}")]
    Build(#[from] kube::Error),
}

/// A client for `kubeconfig` (or the in-cluster/`$KUBECONFIG` config), with the rate limit.
pub async fn build(kubeconfig: Option<&Path>, limit: RateLimit) -> Result<kube::Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|source| ClientError::Kubeconfig { path: path.display().to_string(), source })?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|source| ClientError::Kubeconfig { path: path.display().to_string(), source })?
        }
        None => kube::Config::infer().await?,
    };
    from_config(config, limit)
}

/// A client for `config` with the rate limit.
pub fn from_config(config: kube::Config, limit: RateLimit) -> Result<kube::Client, ClientError> {
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(if limit.qps > 0.0 {
        builder.with_layer(&RateLimitLayer::new(limit)).build()
    } else {
        builder.build()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_bucket_allows_a_burst_then_paces_at_qps() {
        let b = TokenBucket::new(RateLimit { qps: 20.0, burst: 30 });
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
