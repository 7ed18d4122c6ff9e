//! The worker's Kubernetes clients: kubeconfig or in-cluster config, the User-Agent, and the
//! limits on the API load (client-go's rate limit and a cap on requests in flight). A fleet
//! worker's client for its controllers is also fenced by its lease ([`LeaseDeadline`]).

mod api_writes;
mod fenced_connections;
pub mod lean_decode;
pub mod lean_identity;
pub mod lean_protobuf;
pub mod lean_writes;
mod lease_gate;
pub mod protobuf_answers;
#[cfg(test)]
mod protocol_tests;
mod retry_policy;
#[cfg(test)]
mod test_server;

use std::path::Path;

pub use api_writes::ApiWrites;
pub use batchfleet_kube_client::{
    ClientError, ClientLimits, ClientMetrics, RequestMetricsLayer, load_config, with_user_agent,
};
pub use lease_gate::{LeaseDeadline, LeaseGateLayer, LeaseGated, LeaseLapsed, LeaseWindow};

/// The User-Agent a worker sends on every request: `fleet-worker/0.1.0 (w-1)`.
pub fn user_agent(worker_id: &str) -> String {
    batchfleet_kube_client::user_agent("fleet-worker", worker_id)
}

/// A controller's client: kube's, for its reads and kube's typed API, and [`ApiWrites`] on the
/// same stack (the same connections, limits, lease gate and metrics) for its writes.
#[derive(Clone)]
pub struct ApiClient {
    pub kube: kube::Client,
    pub writes: ApiWrites,
}

impl ApiClient {
    /// The same client, its writes asking for protobuf answers or not
    /// ([`ApiWrites::with_protobuf_answers`]).
    pub fn with_protobuf_answers(self, protobuf_answers: bool) -> Self {
        Self { writes: self.writes.with_protobuf_answers(protobuf_answers), ..self }
    }
}

impl From<kube::Client> for ApiClient {
    /// Writes through `kube` ([`ApiWrites::through`]).
    fn from(kube: kube::Client) -> Self {
        Self { writes: ApiWrites::through(kube.clone()), kube }
    }
}

/// The order in which a client's requests get their tokens once they have to wait for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenOrder {
    /// client-go's: first come, first served.
    Arrival,
    /// Fair across classes, namespaces and Jobs ([`batchfleet_kube_client::FairBudget`]), with
    /// its metrics under this budget's name.
    Fair(String),
}

/// The HTTP version a client speaks to the API server (`--kube-api-protocol`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ApiProtocol {
    /// HTTP/2 where the TLS handshake agrees on it, HTTP/1.1 otherwise: client-go's default.
    #[default]
    Auto,
    /// HTTP/1.1 only, as client-go with `DISABLE_HTTP2`.
    Http1,
    /// HTTP/2 also over plain TCP (prior knowledge, `h2c`), for a server that speaks it there.
    Http2,
}

/// A client for `kubeconfig` (or the in-cluster/`$KUBECONFIG` config), with the limits, sending
/// `user_agent`.
pub async fn build(
    kubeconfig: Option<&Path>,
    limit: ClientLimits,
    user_agent: &str,
    protocol: ApiProtocol,
) -> Result<kube::Client, ClientError> {
    Ok(build_fenced(kubeconfig, limit, user_agent, None, &TokenOrder::Arrival, protocol).await?.kube)
}

/// [`build`], with writes refused once `deadline` passed ([`LeaseGateLayer`]), and tokens
/// handed out in `order`.
pub async fn build_fenced(
    kubeconfig: Option<&Path>,
    limit: ClientLimits,
    user_agent: &str,
    deadline: Option<LeaseDeadline>,
    order: &TokenOrder,
    protocol: ApiProtocol,
) -> Result<ApiClient, ClientError> {
    let config = load_config(kubeconfig).await?;
    ordered_clients(with_user_agent(config, user_agent)?, limit, deadline, order, protocol)
}

/// A client for `config` with the limits: the rate limit first, then the cap on requests in
/// flight, so a request that waits for a token does not hold a place in flight. Both record into
/// the process's [`ClientMetrics`], and so does client-go's request metrics' layer around them
/// (`rest_client_requests_total`, `rest_client_request_duration_seconds`, the waits included).
pub fn from_config(config: kube::Config, limit: ClientLimits) -> Result<kube::Client, ClientError> {
    fenced_from_config(config, limit, None)
}

/// [`from_config`], with writes refused once `deadline` passed: when they are sent
/// ([`LeaseGateLayer`]), and when their bytes reach the socket, on connections that carry
/// nothing but writes ([`fenced_connections`]). A fleet worker's client for its controllers (not
/// the one that renews the lease).
pub fn fenced_from_config(
    config: kube::Config,
    limit: ClientLimits,
    deadline: Option<LeaseDeadline>,
) -> Result<kube::Client, ClientError> {
    ordered_from_config(config, limit, deadline, &TokenOrder::Arrival, ApiProtocol::Auto)
}

/// [`fenced_from_config`], with tokens handed out in `order`, speaking `protocol`.
pub fn ordered_from_config(
    config: kube::Config,
    limit: ClientLimits,
    deadline: Option<LeaseDeadline>,
    order: &TokenOrder,
    protocol: ApiProtocol,
) -> Result<kube::Client, ClientError> {
    Ok(ordered_clients(config, limit, deadline, order, protocol)?.kube)
}

/// [`ordered_from_config`], with its writes' handle on the same stack.
pub fn ordered_clients(
    config: kube::Config,
    limit: ClientLimits,
    deadline: Option<LeaseDeadline>,
    order: &TokenOrder,
    protocol: ApiProtocol,
) -> Result<ApiClient, ClientError> {
    use tower::ServiceExt;
    use tower::util::Either;
    let host = config.cluster_url.authority().map(|a| a.to_string()).unwrap_or_default();
    let in_flight = limit.in_flight(&host, ClientMetrics::global());
    let rate = match order {
        TokenOrder::Arrival => limit.rate_limit(&host, ClientMetrics::global()).map(Either::Left),
        TokenOrder::Fair(budget) => {
            limit.fair_rate_limit(budget, &host, ClientMetrics::global()).map(Either::Right)
        }
    };
    // Without a deadline the writes' connections are always open.
    let below = fenced_connections::service(&config, deadline.clone().unwrap_or_default(), protocol)?;
    // The outermost layer first: the metrics around the limits, so a request's duration includes
    // its waits; the lease checked after them, when the request is let go.
    let service = tower::ServiceBuilder::new()
        .layer(RequestMetricsLayer::new(&host, ClientMetrics::global().clone()))
        .option_layer(rate)
        .option_layer(in_flight)
        .option_layer(deadline.map(LeaseGateLayer::new))
        .service(below)
        .map_err(tower::BoxError::from)
        .map_response(|response| response.map(|body| Box::new(body) as Box<kube::client::DynBody>));
    let service = tower::util::BoxCloneSyncService::new(service);
    let kube = kube::Client::new(service.clone(), config.default_namespace.clone());
    Ok(ApiClient { kube, writes: ApiWrites::new(service) })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use test_server::HoldingServer;

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
