//! The worker's Kubernetes client: kubeconfig or in-cluster config, client-go's client-side
//! rate limit (a token bucket of `qps` with `burst`), so a worker's API load is bounded the way
//! kube-controller-manager's is (QPS 20, burst 30 by default), and a cap on requests in flight.

use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use tokio::time::Instant;
use tower::{Layer, Service};

/// Client-side limits on the API load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientLimits {
    /// Token-bucket rate; `qps <= 0` disables it.
    pub qps: f64,
    pub burst: u32,
    /// Requests in flight at once (0: no cap). The rest wait their turn in arrival order, as
    /// streams do on one HTTP/2 connection to kube-apiserver. This, not the number of
    /// concurrent syncs, bounds the connections and the load a burst puts on the API server, and
    /// it serves a burst's requests first come, first served: a CronJob's Job creation, issued
    /// as its sync starts, goes ahead of the status writes of syncs that started later.
    pub max_in_flight: usize,
}

impl ClientLimits {
    /// No rate limit and no cap (tests and benchmarks that measure the system, not the limits).
    pub const UNLIMITED: Self = Self { qps: 0.0, burst: 1, max_in_flight: 0 };
    /// kube-controller-manager's defaults (--kube-api-qps 20, --kube-api-burst 30) and a cap of
    /// 200 requests in flight.
    pub const DEFAULT: Self = Self { qps: 20.0, burst: 30, max_in_flight: 200 };
}

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

/// Whether the worker may write, as the shard table keeps it: until its lease deadline (none
/// before the first renewal, or standalone), and not while writes are held after a lapse.
#[derive(Debug, Clone, Default)]
pub struct LeaseDeadline(pub Arc<parking_lot::RwLock<LeaseWindow>>);

#[derive(Debug, Clone, Copy, Default)]
pub struct LeaseWindow {
    pub deadline: Option<std::time::Instant>,
    /// Set when the lease lapsed, cleared at the next ACTIVATE: a write queued before the lapse
    /// must not go out under a lease renewed after it.
    pub held: bool,
}

impl LeaseDeadline {
    /// Whether a write may be sent now.
    pub fn writable(&self) -> bool {
        let w = *self.0.read();
        !w.held && w.deadline.is_none_or(|d| std::time::Instant::now() < d)
    }

    fn passed(&self) -> bool {
        !self.writable()
    }
}

/// Refuses a write (any method but GET) once the worker's lease deadline passed, at the moment
/// the request is sent, after the rate limiter and the cap on requests in flight let it go. The
/// shard table checks the deadline when a sync issues a write; a request that waited in those
/// queues, or whose process was paused (SIGSTOP) between the two, would otherwise go out after
/// the coordinator may have given its shard to another worker.
#[derive(Clone)]
pub struct LeaseGateLayer {
    deadline: LeaseDeadline,
}

impl LeaseGateLayer {
    pub fn new(deadline: LeaseDeadline) -> Self {
        Self { deadline }
    }
}

impl<S> Layer<S> for LeaseGateLayer {
    type Service = LeaseGated<S>;
    fn layer(&self, inner: S) -> Self::Service {
        LeaseGated { inner, deadline: self.deadline.clone() }
    }
}

pub struct LeaseGated<S> {
    inner: S,
    deadline: LeaseDeadline,
}

/// The error of a write refused by [`LeaseGateLayer`].
#[derive(Debug, thiserror::Error)]
#[error("the worker lease lapsed: write not sent")]
pub struct LeaseLapsed;

impl<S, B> Service<http::Request<B>> for LeaseGated<S>
where
    S: Service<http::Request<B>>,
    S::Error: Into<tower::BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.method() != http::Method::GET && self.deadline.passed() {
            return Box::pin(std::future::ready(Err(Box::new(LeaseLapsed) as tower::BoxError)));
        }
        let call = self.inner.call(req);
        Box::pin(async move { call.await.map_err(Into::into) })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig { path: String, source: kube::config::KubeconfigError },
    #[error("inferring the cluster config: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("the User-Agent {0:?} is not a valid header value")]
    UserAgent(String),
    #[error("building the client: {0}")]
    Build(#[from] kube::Error),
}

/// The User-Agent a worker sends on every request, naming the process as
/// kube-controller-manager names its clients: `fleet-worker/0.1.0 (w-1)`.
pub fn user_agent(worker_id: &str) -> String {
    format!("fleet-worker/{} ({worker_id})", env!("CARGO_PKG_VERSION"))
}

/// `config` with `user_agent` on every request.
pub fn with_user_agent(mut config: kube::Config, user_agent: &str) -> Result<kube::Config, ClientError> {
    let value = http::HeaderValue::from_str(user_agent)
        .map_err(|_| ClientError::UserAgent(user_agent.to_string()))?;
    config.headers.retain(|(name, _)| name != http::header::USER_AGENT);
    config.headers.push((http::header::USER_AGENT, value));
    Ok(config)
}

/// A client for `kubeconfig` (or the in-cluster/`$KUBECONFIG` config), with the limits, sending
/// `user_agent`.
pub async fn build(
    kubeconfig: Option<&Path>,
    limit: ClientLimits,
    user_agent: &str,
) -> Result<kube::Client, ClientError> {
    build_fenced(kubeconfig, limit, user_agent, None).await
}

/// [`build`], with writes refused once `deadline` passed ([`LeaseGateLayer`]).
pub async fn build_fenced(
    kubeconfig: Option<&Path>,
    limit: ClientLimits,
    user_agent: &str,
    deadline: Option<LeaseDeadline>,
) -> Result<kube::Client, ClientError> {
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
    fenced_from_config(with_user_agent(config, user_agent)?, limit, deadline)
}

/// A client for `config` with the limits: the rate limit first, then the cap on requests in
/// flight, so a request that waits for a token does not hold a place in flight.
pub fn from_config(config: kube::Config, limit: ClientLimits) -> Result<kube::Client, ClientError> {
    fenced_from_config(config, limit, None)
}

/// [`from_config`], with writes refused once `deadline` passed ([`LeaseGateLayer`]): a fleet
/// worker's client for its controllers (not the one that renews the lease).
pub fn fenced_from_config(
    config: kube::Config,
    limit: ClientLimits,
    deadline: Option<LeaseDeadline>,
) -> Result<kube::Client, ClientError> {
    use tower::util::option_layer;
    let in_flight =
        (limit.max_in_flight > 0).then(|| tower::limit::ConcurrencyLimitLayer::new(limit.max_in_flight));
    let rate = (limit.qps > 0.0).then(|| RateLimitLayer::new(limit));
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&option_layer(deadline.map(LeaseGateLayer::new)))
        .with_layer(&option_layer(in_flight))
        .with_layer(&option_layer(rate))
        .build())
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

    /// An HTTP server that holds each request until the test releases it, and counts how many
    /// it holds at once.
    struct HoldingServer {
        url: String,
        arrived: tokio::sync::watch::Receiver<usize>,
        held: Arc<std::sync::atomic::AtomicUsize>,
        most_held: Arc<std::sync::atomic::AtomicUsize>,
        release: Arc<tokio::sync::Semaphore>,
    }

    impl HoldingServer {
        async fn start() -> Self {
            use std::sync::atomic::Ordering;
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let (arrivals, arrived) = tokio::sync::watch::channel(0usize);
            let arrivals = Arc::new(arrivals);
            let held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let most_held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let release = Arc::new(tokio::sync::Semaphore::new(0));
            let (h, m, r) = (held.clone(), most_held.clone(), release.clone());
            tokio::spawn(async move {
                while let Ok((mut conn, _)) = listener.accept().await {
                    let (arrivals, held, most_held, release) =
                        (arrivals.clone(), h.clone(), m.clone(), r.clone());
                    tokio::spawn(async move {
                        let mut buf = Vec::new();
                        loop {
                            // One bodiless request per turn: read to the end of its headers.
                            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                                let mut chunk = [0u8; 1024];
                                match conn.read(&mut chunk).await {
                                    Ok(0) | Err(_) => return,
                                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                                }
                            }
                            let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                            buf.drain(..end);
                            let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                            most_held.fetch_max(now, Ordering::SeqCst);
                            arrivals.send_modify(|n| *n += 1);
                            release.acquire().await.unwrap().forget();
                            held.fetch_sub(1, Ordering::SeqCst);
                            let reply =
                                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok";
                            if conn.write_all(reply.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                    });
                }
            });
            Self { url, arrived, held, most_held, release }
        }
    }

    #[tokio::test]
    async fn requests_beyond_the_in_flight_cap_wait_until_one_finishes() {
        use std::sync::atomic::Ordering;
        let mut server = HoldingServer::start().await;
        let config = kube::Config::new(server.url.parse().unwrap());
        let client =
            from_config(config, ClientLimits { max_in_flight: 2, ..ClientLimits::UNLIMITED }).unwrap();
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..6 {
            let client = client.clone();
            calls.spawn(async move {
                client.request_text(http::Request::get(format!("/held/{i}")).body(Vec::new()).unwrap()).await
            });
        }
        for released in 0..6 {
            // The cap lets two through; each release lets the next one in.
            let expect = (released + 2).min(6);
            tokio::time::timeout(Duration::from_secs(10), server.arrived.wait_for(|n| *n >= expect))
                .await
                .expect("the next request should reach the server once one finishes")
                .unwrap();
            assert!(server.held.load(Ordering::SeqCst) <= 2);
            server.release.add_permits(1);
        }
        while let Some(call) = calls.join_next().await {
            assert_eq!(call.unwrap().unwrap(), "ok");
        }
        assert_eq!(server.most_held.load(Ordering::SeqCst), 2, "at most the cap, and the cap reached");
    }

    /// A write that waited for its turn (here, behind the cap on requests in flight) while the
    /// lease ran out is not sent; reads still are.
    #[tokio::test]
    async fn a_write_is_not_sent_once_the_lease_deadline_passed() {
        let mut server = HoldingServer::start().await;
        let deadline = LeaseDeadline::default();
        deadline.0.write().deadline = Some(std::time::Instant::now() + Duration::from_secs(60));
        let config = kube::Config::new(server.url.parse().unwrap());
        let limits = ClientLimits { max_in_flight: 1, ..ClientLimits::UNLIMITED };
        let client = fenced_from_config(config, limits, Some(deadline.clone())).unwrap();
        let first = tokio::spawn({
            let client = client.clone();
            async move { client.request_text(http::Request::get("/held").body(Vec::new()).unwrap()).await }
        });
        tokio::time::timeout(Duration::from_secs(10), server.arrived.wait_for(|n| *n >= 1))
            .await
            .unwrap()
            .unwrap();
        // Issued with the lease valid; it waits behind the first request while the lease runs out.
        let write = tokio::spawn({
            let client = client.clone();
            async move { client.request_text(http::Request::post("/write").body(Vec::new()).unwrap()).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        deadline.0.write().deadline = Some(std::time::Instant::now());
        server.release.add_permits(1);
        assert_eq!(first.await.unwrap().unwrap(), "ok");
        let refused = write.await.unwrap().expect_err("the write is refused");
        assert!(refused.to_string().contains("lease lapsed"), "{refused}");
        assert_eq!(*server.arrived.borrow(), 1, "the write never reached the server");
        server.release.add_permits(1);
        let read = client.request_text(http::Request::get("/read").body(Vec::new()).unwrap()).await;
        assert_eq!(read.unwrap(), "ok", "reads go on");
    }

    #[tokio::test]
    async fn every_request_names_the_worker_in_its_user_agent() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let mut chunk = [0u8; 1024];
                let n = conn.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the connection closed before the request's headers ended");
                head.extend_from_slice(&chunk[..n]);
            }
            let reply = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok";
            conn.write_all(reply.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&head).to_lowercase()
        });
        let config = with_user_agent(kube::Config::new(url.parse().unwrap()), &user_agent("w-1")).unwrap();
        let client = from_config(config, ClientLimits::UNLIMITED).unwrap();
        client.request_text(http::Request::get("/version").body(Vec::new()).unwrap()).await.unwrap();
        let head = server.await.unwrap();
        let agents: Vec<&str> = head.lines().filter(|l| l.starts_with("user-agent:")).collect();
        assert_eq!(agents, vec![format!("user-agent: fleet-worker/{} (w-1)", env!("CARGO_PKG_VERSION"))]);
        assert!(with_user_agent(kube::Config::new(url.parse().unwrap()), "bad\nagent").is_err());
    }

    #[tokio::test]
    async fn without_a_cap_every_request_goes_at_once() {
        use std::sync::atomic::Ordering;
        let mut server = HoldingServer::start().await;
        let client =
            from_config(kube::Config::new(server.url.parse().unwrap()), ClientLimits::UNLIMITED).unwrap();
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..6 {
            let client = client.clone();
            calls.spawn(async move {
                client.request_text(http::Request::get(format!("/held/{i}")).body(Vec::new()).unwrap()).await
            });
        }
        tokio::time::timeout(Duration::from_secs(10), server.arrived.wait_for(|n| *n >= 6))
            .await
            .expect("all six requests should reach the server together")
            .unwrap();
        assert_eq!(server.most_held.load(Ordering::SeqCst), 6);
        server.release.add_permits(6);
        while let Some(call) = calls.join_next().await {
            assert_eq!(call.unwrap().unwrap(), "ok");
        }
    }
}
