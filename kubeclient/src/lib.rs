//! The fleet's Kubernetes client, shared by the coordinator and the worker: its config and
//! User-Agent ([`load_config`], [`user_agent`]), the client-side limits on one process's API load
//! as kube-controller-manager has them (client-go's token bucket, `--kube-api-qps`,
//! `--kube-api-burst`, and a cap on requests in flight), each with the metric that shows when it
//! bites, and client-go's request metrics (`rest_client_requests_total`,
//! `rest_client_request_duration_seconds`).

mod config;
mod fair_budget;
mod fair_queue;
mod in_flight;
mod metrics;
mod rate_limit;
mod request_class;
mod request_metrics;

pub use config::{ClientError, load_config, user_agent, with_user_agent};
pub use fair_budget::{FairBudget, FairBudgetMetrics, FairRateLimitLayer, FairRateLimited};
pub use fair_queue::{FairQueue, RequestClass, Ticket};
pub use in_flight::{InFlight, InFlightLayer};
pub use metrics::ClientMetrics;
pub use rate_limit::{RateLimitLayer, RateLimited, TokenBucket};
pub use request_class::ticket;
pub use request_metrics::{NO_RESPONSE_CODE, RequestMetrics, RequestMetricsLayer, TimedBody};

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

    /// The rate limit, when there is one (`qps` positive and finite).
    pub fn rate_limit(&self, host: &str, metrics: &ClientMetrics) -> Option<RateLimitLayer> {
        (self.qps > 0.0 && self.qps.is_finite()).then(|| RateLimitLayer::new(*self, host, metrics.clone()))
    }

    /// The rate limit with its tokens handed out fairly ([`FairBudget`]), when there is one;
    /// `budget` names it in the metrics.
    pub fn fair_rate_limit(
        &self,
        budget: &str,
        host: &str,
        metrics: &ClientMetrics,
    ) -> Option<FairRateLimitLayer> {
        (self.qps > 0.0 && self.qps.is_finite()).then(|| {
            let budget = FairBudget::new(budget, *self, FairBudgetMetrics::global().clone());
            FairRateLimitLayer::new(budget, host, metrics.clone())
        })
    }

    /// The cap on requests in flight, when there is one.
    pub fn in_flight(&self, host: &str, metrics: &ClientMetrics) -> Option<InFlightLayer> {
        (self.max_in_flight > 0).then(|| InFlightLayer::new(self.max_in_flight, host, metrics.clone()))
    }
}
