//! The coordinator's Kubernetes client: every request names the process in its User-Agent
//! (`fleet-coordinator/VERSION (ID)`), as kube-controller-manager names its clients, so the API
//! server's audit log shows who wrote what.

use std::path::Path;

pub use batchfleet_api_limits::{ClientLimits, ClientMetrics, RequestMetricsLayer};

use http::HeaderValue;
use http::header::USER_AGENT;

/// `fleet-coordinator/0.1.0 (coordinator-a)`.
pub fn user_agent(coordinator_id: &str) -> String {
    format!("fleet-coordinator/{} ({coordinator_id})", env!("CARGO_PKG_VERSION"))
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig { path: String, source: kube::config::KubeconfigError },
    #[error("inferring the cluster config: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("building the client: {0}")]
    Build(#[from] kube::Error),
    #[error("the user agent {0:?} is not a valid header value")]
    UserAgent(String),
}

/// The config from `kubeconfig`, else in-cluster or `$KUBECONFIG`.
pub async fn load_config(kubeconfig: Option<&Path>) -> Result<kube::Config, ClientError> {
    match kubeconfig {
        Some(path) => {
            let err = |source| ClientError::Kubeconfig { path: path.display().to_string(), source };
            let kc = kube::config::Kubeconfig::read_from(path).map_err(err)?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(err)
        }
        None => Ok(kube::Config::infer().await?),
    }
}

/// A client for `config` whose every request carries `user_agent`, within `limit` (the rate
/// limit and the cap on requests in flight), each request recorded in the process's
/// [`ClientMetrics`] (client-go's `rest_client_*`, the limits' waits included).
pub fn from_config(
    config: kube::Config,
    user_agent: &str,
    limit: ClientLimits,
) -> Result<kube::Client, ClientError> {
    let value =
        HeaderValue::from_str(user_agent).map_err(|_| ClientError::UserAgent(user_agent.to_string()))?;
    let name = tower::util::MapRequestLayer::new(move |mut req: http::Request<kube::client::Body>| {
        req.headers_mut().insert(USER_AGENT, value.clone());
        req
    });
    let host = config.cluster_url.authority().map(|a| a.to_string()).unwrap_or_default();
    let in_flight = limit.in_flight(&host, ClientMetrics::global());
    let rate = limit.rate_limit(&host, ClientMetrics::global());
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&tower::util::option_layer(in_flight))
        .with_layer(&tower::util::option_layer(rate))
        .with_layer(&RequestMetricsLayer::new(&host, ClientMetrics::global().clone()))
        .with_layer(&name)
        .build())
}
