//! The coordinator's Kubernetes client: every request names the process in its User-Agent
//! (`fleet-coordinator/VERSION (ID)`), as kube-controller-manager names its clients, so the API
//! server's audit log shows who wrote what.

pub use batchfleet_kube_client::{
    ClientError, ClientLimits, ClientMetrics, RequestMetricsLayer, load_config,
};

/// `fleet-coordinator/0.1.0 (coordinator-a)`.
pub fn user_agent(coordinator_id: &str) -> String {
    batchfleet_kube_client::user_agent("fleet-coordinator", coordinator_id)
}

/// A client for `config` whose every request carries `user_agent`, within `limit` (the rate
/// limit and the cap on requests in flight), each request recorded in the process's
/// [`ClientMetrics`] (client-go's `rest_client_*`, the limits' waits included).
pub fn from_config(
    config: kube::Config,
    user_agent: &str,
    limit: ClientLimits,
) -> Result<kube::Client, ClientError> {
    let config = batchfleet_kube_client::with_user_agent(config, user_agent)?;
    let host = config.cluster_url.authority().map(|a| a.to_string()).unwrap_or_default();
    let in_flight = limit.in_flight(&host, ClientMetrics::global());
    let rate = limit.rate_limit(&host, ClientMetrics::global());
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&tower::util::option_layer(in_flight))
        .with_layer(&tower::util::option_layer(rate))
        .with_layer(&RequestMetricsLayer::new(&host, ClientMetrics::global().clone()))
        .build())
}
