//! The metrics of the client-side limits. client-go's are global to a process; so are these
//! ([`ClientMetrics::global`]), registered in the registry each process serves.

use std::sync::OnceLock;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};

/// client-go's buckets for its request and rate limiter latencies (component-base's restclient
/// metrics).
const WAIT_BUCKETS: &[f64] = &[0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0];

#[derive(Clone)]
pub struct ClientMetrics {
    /// client-go's `rest_client_requests_total{code,method,host}`: every request, by its
    /// response's status code (`<error>` without a response).
    pub requests: IntCounterVec,
    /// client-go's `rest_client_request_duration_seconds{verb,host}`: each request's latency,
    /// its waits for the client-side limits included; watches not
    /// ([`crate::RequestMetricsLayer`]).
    pub request_duration: HistogramVec,
    /// client-go's `rest_client_rate_limiter_duration_seconds`: how long each request waited
    /// for a token.
    pub rate_limiter_duration: HistogramVec,
    /// How long each request waited for a place in flight.
    pub in_flight_wait: HistogramVec,
    /// Requests in flight now.
    pub in_flight: IntGaugeVec,
}

impl ClientMetrics {
    /// A fresh set, registered nowhere (tests).
    pub fn new() -> Self {
        let histogram = |name: &str, help: &str| {
            HistogramVec::new(
                HistogramOpts::new(name, help).buckets(WAIT_BUCKETS.to_vec()),
                &["verb", "host"],
            )
            .expect("static metric options are valid")
        };
        Self {
            requests: IntCounterVec::new(
                Opts::new(
                    "rest_client_requests_total",
                    "Number of HTTP requests, partitioned by status code, method, and host.",
                ),
                &["code", "method", "host"],
            )
            .expect("static metric options are valid"),
            request_duration: histogram(
                "rest_client_request_duration_seconds",
                "Request latency in seconds. Broken down by verb, and host.",
            ),
            rate_limiter_duration: histogram(
                "rest_client_rate_limiter_duration_seconds",
                "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            ),
            in_flight_wait: histogram(
                "batchfleet_rest_client_in_flight_wait_seconds",
                "Seconds a request waited for a place under the cap on requests in flight \
                 (--kube-api-max-in-flight). Broken down by verb, and host.",
            ),
            in_flight: IntGaugeVec::new(
                Opts::new("batchfleet_rest_client_requests_in_flight", "Requests in flight under the cap."),
                &["host"],
            )
            .expect("static metric options are valid"),
        }
    }

    /// The process's set, which every client of the process records into.
    pub fn global() -> &'static Self {
        static GLOBAL: OnceLock<ClientMetrics> = OnceLock::new();
        GLOBAL.get_or_init(Self::new)
    }

    /// Registers the set in `registry` (a process's, or several in one test process).
    pub fn register(&self, registry: &Registry) -> prometheus::Result<()> {
        registry.register(Box::new(self.requests.clone()))?;
        registry.register(Box::new(self.request_duration.clone()))?;
        registry.register(Box::new(self.rate_limiter_duration.clone()))?;
        registry.register(Box::new(self.in_flight_wait.clone()))?;
        registry.register(Box::new(self.in_flight.clone()))
    }
}

impl Default for ClientMetrics {
    fn default() -> Self {
        Self::new()
    }
}
