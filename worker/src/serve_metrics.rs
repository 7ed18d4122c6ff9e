//! The worker's HTTP endpoint: `/metrics` in the Prometheus text format; `/readyz`, and `/livez`
//! (also `/healthz`), which answer 200 or 503 as [`Health`] judges, with the reason in the body.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::net::TcpListener;

use crate::health::Health;

/// Binds `addr`; returns the bound address and the serving future.
pub async fn bind(
    addr: SocketAddr,
    registry: Registry,
    health: Health,
) -> std::io::Result<(SocketAddr, impl std::future::Future<Output = ()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    Ok((bound, serve(listener, registry, health)))
}

async fn serve(listener: TcpListener, registry: Registry, health: Health) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let (registry, health) = (registry.clone(), health.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let (registry, health) = (registry.clone(), health.clone());
                async move { Ok::<_, Infallible>(respond(&registry, &health, req.uri().path())) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
        });
    }
}

fn respond(registry: &Registry, health: &Health, path: &str) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/metrics" => {
            let mut buf = Vec::new();
            match TextEncoder::new().encode(&registry.gather(), &mut buf) {
                Ok(()) => (StatusCode::OK, "text/plain; version=0.0.4", buf),
                Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, "text/plain", e.to_string().into_bytes()),
            }
        }
        "/healthz" | "/livez" | "/readyz" => {
            let verdict = if path == "/readyz" { health.ready() } else { health.live() };
            let status = if verdict.ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
            (status, "text/plain", format!("{}\n", verdict.reason).into_bytes())
        }
        _ => (StatusCode::NOT_FOUND, "text/plain", b"not found".to_vec()),
    };
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}
