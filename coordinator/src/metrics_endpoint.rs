//! The coordinator's HTTP endpoint: `/metrics` (Prometheus text format), `/healthz`, `/readyz`,
//! and the leader gauge operators alert on.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use prometheus::{Encoder, IntGauge, Registry, TextEncoder};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::leader::LeaderState;

/// Binds `addr`; returns the bound address and the serving future.
pub async fn bind(
    addr: SocketAddr,
    registry: Registry,
) -> std::io::Result<(SocketAddr, impl std::future::Future<Output = ()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    Ok((bound, serve(listener, registry)))
}

/// `fleet_coordinator_leader`: 1 while this coordinator leads, else 0; kept current by a task.
pub fn register_leader_gauge(
    registry: &Registry,
    mut state: watch::Receiver<LeaderState>,
) -> prometheus::Result<()> {
    let gauge =
        IntGauge::new("fleet_coordinator_leader", "1 while this coordinator holds the leadership, else 0.")?;
    registry.register(Box::new(gauge.clone()))?;
    tokio::spawn(async move {
        loop {
            gauge.set(i64::from(state.borrow_and_update().is_leader));
            if state.changed().await.is_err() {
                gauge.set(0);
                return;
            }
        }
    });
    Ok(())
}

async fn serve(listener: TcpListener, registry: Registry) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let registry = registry.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let registry = registry.clone();
                async move { Ok::<_, Infallible>(respond(&registry, req.uri().path())) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
        });
    }
}

fn respond(registry: &Registry, path: &str) -> Response<Full<Bytes>> {
    let (status, body) = match path {
        "/metrics" => {
            let mut buf = Vec::new();
            match TextEncoder::new().encode(&registry.gather(), &mut buf) {
                Ok(()) => (StatusCode::OK, buf),
                Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string().into_bytes()),
            }
        }
        // A standby is healthy and ready: it must be able to take over.
        "/healthz" | "/readyz" | "/livez" => (StatusCode::OK, b"ok".to_vec()),
        _ => (StatusCode::NOT_FOUND, b"not found".to_vec()),
    };
    let content_type = if path == "/metrics" { "text/plain; version=0.0.4" } else { "text/plain" };
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}
