//! client-go's token bucket with a fair queue in front: the same `--kube-api-qps` and
//! `--kube-api-burst`, but when requests wait for tokens they get them in [`FairQueue`] order
//! (namespaces, then classes, then Jobs) instead of first come, first served.
//!
//! A request that finds a token and nobody waiting goes at once, as with client-go. Otherwise it
//! queues, and one dispatcher task per budget hands tokens out at `qps` in the queue's order. The
//! layer takes requests as soon as they come (its `poll_ready` is always ready) and waits in the
//! returned future, in the caller's task: below kube's `Buffer`, a layer waiting in `poll_ready`
//! would hold every later request behind the first, which is client-go's order again.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

use crate::fair_queue::{FairQueue, RequestClass, Ticket};
use crate::{ClientLimits, ClientMetrics, request_class};

const WAIT_BUCKETS: &[f64] =
    &[0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0, 300.0];

/// The fair queue's metrics, by budget (the controller a client serves, or "shared") and class.
#[derive(Clone)]
pub struct FairBudgetMetrics {
    pub wait: HistogramVec,
    pub requests: IntCounterVec,
    pub waiting: IntGaugeVec,
}

impl FairBudgetMetrics {
    pub fn new() -> Self {
        Self {
            wait: HistogramVec::new(
                HistogramOpts::new(
                    "batchfleet_api_budget_wait_seconds",
                    "Seconds a request waited for its token in the fair queue, by budget and class.",
                )
                .buckets(WAIT_BUCKETS.to_vec()),
                &["budget", "class"],
            )
            .expect("static metric options are valid"),
            requests: IntCounterVec::new(
                Opts::new(
                    "batchfleet_api_budget_requests_total",
                    "Requests given a token, by budget and class.",
                ),
                &["budget", "class"],
            )
            .expect("static metric options are valid"),
            waiting: IntGaugeVec::new(
                Opts::new(
                    "batchfleet_api_budget_waiting_requests",
                    "Requests waiting for a token, by budget and class.",
                ),
                &["budget", "class"],
            )
            .expect("static metric options are valid"),
        }
    }

    /// The process's set.
    pub fn global() -> &'static Self {
        static GLOBAL: std::sync::OnceLock<FairBudgetMetrics> = std::sync::OnceLock::new();
        GLOBAL.get_or_init(Self::new)
    }

    pub fn register(&self, registry: &Registry) -> prometheus::Result<()> {
        registry.register(Box::new(self.wait.clone()))?;
        registry.register(Box::new(self.requests.clone()))?;
        registry.register(Box::new(self.waiting.clone()))
    }
}

impl Default for FairBudgetMetrics {
    fn default() -> Self {
        Self::new()
    }
}

struct Tokens {
    qps: f64,
    burst: f64,
    available: f64,
    at: Instant,
}

impl Tokens {
    fn refill(&mut self, now: Instant) {
        self.available =
            (self.available + now.duration_since(self.at).as_secs_f64() * self.qps).min(self.burst);
        self.at = now;
    }

    /// How long until a whole token is there.
    fn wait(&self) -> Duration {
        if self.available >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.available) / self.qps)
        }
    }
}

struct State {
    tokens: Tokens,
    queue: FairQueue,
    waiters: HashMap<u64, (oneshot::Sender<()>, RequestClass)>,
    next_id: u64,
    dispatching: bool,
}

/// One client's budget: `qps` and `burst`, handed out fairly.
pub struct FairBudget {
    name: String,
    state: Mutex<State>,
    metrics: FairBudgetMetrics,
}

impl FairBudget {
    pub fn new(name: &str, limit: ClientLimits, metrics: FairBudgetMetrics) -> Arc<Self> {
        let burst = f64::from(limit.burst.max(1));
        Arc::new(Self {
            name: name.to_string(),
            state: Mutex::new(State {
                tokens: Tokens { qps: limit.qps, burst, available: burst, at: Instant::now() },
                queue: FairQueue::new(),
                waiters: HashMap::new(),
                next_id: 0,
                dispatching: false,
            }),
            metrics,
        })
    }

    /// Waits for this request's token; returns how long it waited.
    pub async fn acquire(self: &Arc<Self>, ticket: Ticket) -> Duration {
        let started = Instant::now();
        let granted = {
            let mut s = self.state.lock();
            s.tokens.refill(started);
            if s.queue.is_empty() && s.tokens.available >= 1.0 {
                s.tokens.available -= 1.0;
                None
            } else {
                let (tx, rx) = oneshot::channel();
                let id = s.next_id;
                s.next_id += 1;
                s.queue.push(&ticket, id);
                s.waiters.insert(id, (tx, ticket.class));
                self.metrics.waiting.with_label_values(&[&self.name, ticket.class.as_str()]).inc();
                if !s.dispatching {
                    s.dispatching = true;
                    tokio::spawn(self.clone().dispatch());
                }
                Some(rx)
            }
        };
        if let Some(rx) = granted {
            // The dispatcher never drops a waiter's sender without sending.
            let _ = rx.await;
        }
        let waited = started.elapsed();
        let class = ticket.class.as_str();
        self.metrics.wait.with_label_values(&[&self.name, class]).observe(waited.as_secs_f64());
        self.metrics.requests.with_label_values(&[&self.name, class]).inc();
        waited
    }

    /// Hands out tokens in the queue's order until nobody waits.
    async fn dispatch(self: Arc<Self>) {
        loop {
            let wait = {
                let mut s = self.state.lock();
                s.tokens.refill(Instant::now());
                let wait = s.tokens.wait();
                if wait.is_zero() {
                    match s.queue.pop() {
                        None => {
                            s.dispatching = false;
                            return;
                        }
                        Some(id) => {
                            if let Some((tx, class)) = s.waiters.remove(&id) {
                                self.metrics.waiting.with_label_values(&[&self.name, class.as_str()]).dec();
                                // A waiter that gave up leaves its token for the next.
                                if tx.send(()).is_ok() {
                                    s.tokens.available -= 1.0;
                                }
                            }
                            continue;
                        }
                    }
                }
                wait
            };
            tokio::time::sleep(wait).await;
        }
    }
}

/// Tower layer putting a [`FairBudget`] before each request of a kube client.
#[derive(Clone)]
pub struct FairRateLimitLayer {
    budget: Arc<FairBudget>,
    host: String,
    metrics: ClientMetrics,
}

impl FairRateLimitLayer {
    pub fn new(budget: Arc<FairBudget>, host: &str, metrics: ClientMetrics) -> Self {
        Self { budget, host: host.to_string(), metrics }
    }
}

/// Requests wait for their turn in the layer's future, so the service below is shared through
/// a buffer of this many requests (as kube's own client is).
const BELOW_CAPACITY: usize = 1024;

type Request = http::Request<kube::client::Body>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S> Layer<S> for FairRateLimitLayer
where
    S: Service<Request> + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send + Sync,
    S::Response: Send + 'static,
{
    type Service = FairRateLimited<S>;
    fn layer(&self, inner: S) -> Self::Service {
        FairRateLimited {
            below: tower::buffer::Buffer::new(inner, BELOW_CAPACITY),
            budget: self.budget.clone(),
            host: self.host.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

pub struct FairRateLimited<S: Service<Request>> {
    below: tower::buffer::Buffer<Request, S::Future>,
    budget: Arc<FairBudget>,
    host: String,
    metrics: ClientMetrics,
}

impl<S> Clone for FairRateLimited<S>
where
    S: Service<Request>,
    S::Future: Send + 'static,
{
    /// A clone shares the budget and the buffer below it.
    fn clone(&self) -> Self {
        Self {
            below: self.below.clone(),
            budget: self.budget.clone(),
            host: self.host.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

impl<S> Service<Request> for FairRateLimited<S>
where
    S: Service<Request> + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send + Sync,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let below = self.below.clone();
        let budget = self.budget.clone();
        let host = self.host.clone();
        let metrics = self.metrics.clone();
        Box::pin(async move {
            let is_pod_create = req.method() == http::Method::POST && req.uri().path().ends_with("/pods");
            let body = match req.body().try_clone() {
                Some(body) if is_pod_create => body.collect_bytes().await.ok(),
                _ => None,
            };
            let ticket = request_class::ticket(req.method(), req.uri().path(), body.as_deref());
            let waited = budget.acquire(ticket).await;
            metrics
                .rate_limiter_duration
                .with_label_values(&[req.method().as_str(), &host])
                .observe(waited.as_secs_f64());
            below.oneshot(req).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(class: RequestClass, namespace: &str) -> Ticket {
        Ticket { class, namespace: namespace.into(), flow: String::new() }
    }

    /// Past the burst, a quiet namespace's request is served next, not after the noisy
    /// namespace's backlog (which client-go's first come, first served would do).
    #[tokio::test(start_paused = true)]
    async fn a_quiet_namespace_is_served_between_a_noisy_ones_requests() {
        let metrics = FairBudgetMetrics::new();
        let budget =
            FairBudget::new("test", ClientLimits { qps: 10.0, burst: 1, max_in_flight: 0 }, metrics.clone());
        let served = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..6 {
            let (budget, served) = (budget.clone(), served.clone());
            tasks.spawn(async move {
                budget.acquire(ticket(RequestClass::Create, "noisy")).await;
                served.lock().push(format!("noisy-{i}"));
            });
            tokio::task::yield_now().await;
        }
        let (b, s) = (budget.clone(), served.clone());
        tasks.spawn(async move {
            b.acquire(ticket(RequestClass::Create, "quiet")).await;
            s.lock().push("quiet".into());
        });
        let started = Instant::now();
        while tasks.join_next().await.is_some() {}
        let order = served.lock().clone();
        let quiet_at = order.iter().position(|s| s == "quiet").unwrap();
        assert!(quiet_at <= 2, "the quiet namespace waits for at most one noisy turn: {order:?}");
        // One from the burst, then six more at 10/s.
        assert_eq!(started.elapsed(), Duration::from_millis(600));
        assert_eq!(metrics.requests.with_label_values(&["test", "create"]).get(), 7);
        assert_eq!(metrics.waiting.with_label_values(&["test", "create"]).get(), 0);
    }

    /// A finishing write queued behind creates gets the next token.
    #[tokio::test(start_paused = true)]
    async fn a_finishing_write_takes_the_next_token() {
        let budget = FairBudget::new(
            "test",
            ClientLimits { qps: 10.0, burst: 1, max_in_flight: 0 },
            FairBudgetMetrics::new(),
        );
        let served = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = tokio::task::JoinSet::new();
        for (i, class) in
            [RequestClass::Create, RequestClass::Create, RequestClass::Create, RequestClass::Finish]
                .into_iter()
                .enumerate()
        {
            let (budget, served) = (budget.clone(), served.clone());
            tasks.spawn(async move {
                budget.acquire(ticket(class, "ns")).await;
                served.lock().push(i);
            });
            tokio::task::yield_now().await;
        }
        while tasks.join_next().await.is_some() {}
        assert_eq!(served.lock().clone(), vec![0, 3, 1, 2]);
    }

    /// A waiter that gives up does not take a token with it.
    #[tokio::test(start_paused = true)]
    async fn an_abandoned_wait_leaves_its_token() {
        let budget = FairBudget::new(
            "test",
            ClientLimits { qps: 10.0, burst: 1, max_in_flight: 0 },
            FairBudgetMetrics::new(),
        );
        budget.acquire(ticket(RequestClass::Other, "a")).await;
        let abandoned =
            tokio::time::timeout(Duration::from_millis(10), budget.acquire(ticket(RequestClass::Other, "a")))
                .await;
        assert!(abandoned.is_err(), "no token for 100 ms");
        let started = Instant::now();
        budget.acquire(ticket(RequestClass::Other, "b")).await;
        assert_eq!(started.elapsed(), Duration::from_millis(90), "the token the abandoned wait left");
    }
}
