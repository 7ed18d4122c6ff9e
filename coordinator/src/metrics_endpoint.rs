//! The coordinator's HTTP endpoint: `/metrics` (Prometheus text format), `/readyz`, `/livez`
//! (also `/healthz`), and the leader gauges operators alert on.
//!
//! `/readyz` answers 200 while the process serves: a standby is ready, it must be able to take
//! over. `/livez` answers 503 when the leader election loop has stalled (no attempt finished
//! for longer than its timing allows), so the kubelet restarts the process.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use prometheus::{Encoder, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::leader::{LeaderState, Leadership};

/// What `/livez` checks; the election is watched once it runs. Cheap to clone.
#[derive(Clone, Default)]
pub struct Liveness(std::sync::Arc<std::sync::OnceLock<(Leadership, std::time::Duration)>>);

impl Liveness {
    /// Fails `/livez` once `leadership`'s loop made no attempt for `stall_after`.
    pub fn watch_election(&self, leadership: Leadership, stall_after: std::time::Duration) {
        let _ = self.0.set((leadership, stall_after));
    }

    /// `Ok` with the body of a 200, or `Err` with the reason for a 503.
    pub fn check(&self) -> Result<String, String> {
        let Some((leadership, stall_after)) = self.0.get() else { return Ok("ok: starting".into()) };
        let since = leadership.since_last_attempt();
        if since > *stall_after {
            return Err(format!("stalled: the leader election loop finished no attempt for {since:?}"));
        }
        Ok("ok".into())
    }
}

/// Binds `addr`; returns the bound address and the serving future.
pub async fn bind(
    addr: SocketAddr,
    registry: Registry,
    liveness: Liveness,
) -> std::io::Result<(SocketAddr, impl std::future::Future<Output = ()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    Ok((bound, serve(listener, registry, liveness)))
}

/// `fleet_coordinator_leader`, and client-go's `leader_election_master_status{name}` that
/// kube-controller-manager's dashboards read (`name` the lease's, `lease_name`): 1 while this
/// coordinator leads, else 0; kept current by a task.
pub fn register_leader_gauge(
    registry: &Registry,
    lease_name: &str,
    mut state: watch::Receiver<LeaderState>,
) -> prometheus::Result<()> {
    let gauge =
        IntGauge::new("fleet_coordinator_leader", "1 while this coordinator holds the leadership, else 0.")?;
    registry.register(Box::new(gauge.clone()))?;
    let master_status = IntGaugeVec::new(
        Opts::new(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
        ),
        &["name"],
    )?;
    registry.register(Box::new(master_status.clone()))?;
    let master_status = master_status.with_label_values(&[lease_name]);
    tokio::spawn(async move {
        loop {
            let leading = i64::from(state.borrow_and_update().is_leader);
            gauge.set(leading);
            master_status.set(leading);
            if state.changed().await.is_err() {
                gauge.set(0);
                master_status.set(0);
                return;
            }
        }
    });
    Ok(())
}

async fn serve(listener: TcpListener, registry: Registry, liveness: Liveness) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let (registry, liveness) = (registry.clone(), liveness.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let (registry, liveness) = (registry.clone(), liveness.clone());
                async move { Ok::<_, Infallible>(respond(&registry, &liveness, req.uri().path())) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
        });
    }
}

fn respond(registry: &Registry, liveness: &Liveness, path: &str) -> Response<Full<Bytes>> {
    let (status, body) = match path {
        "/metrics" => {
            let mut buf = Vec::new();
            match TextEncoder::new().encode(&registry.gather(), &mut buf) {
                Ok(()) => (StatusCode::OK, buf),
                Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string().into_bytes()),
            }
        }
        // A standby is ready: it must be able to take over.
        "/readyz" => (StatusCode::OK, b"ok\n".to_vec()),
        "/healthz" | "/livez" => match liveness.check() {
            Ok(body) => (StatusCode::OK, format!("{body}\n").into_bytes()),
            Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n").into_bytes()),
        },
        _ => (StatusCode::NOT_FOUND, b"not found".to_vec()),
    };
    let content_type = if path == "/metrics" { "text/plain; version=0.0.4" } else { "text/plain" };
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}
