//! The fleet worker's client for its controllers, built as kube-client builds its default client
//! (kube 5's `make_generic_builder`), but with the writes on connections of their own whose socket
//! writes are checked against the lease.
//!
//! Invariant 1 (no write for a shard after it moved) needs the check as close to the socket as the
//! client can put it. A check when the request is sent leaves a window up to its bytes: hyper's
//! connection checkout, the hand-off to the connection's task, and kube-client's retry of a 429 or
//! 503, which sleeps (up to the server's Retry-After) below every layer the worker adds. A process
//! paused (SIGSTOP, a frozen VM) in that window wrote after its lease ran out. Checking in
//! `poll_write` of the TCP stream, under TLS, leaves only the instructions between that check and
//! the `write` system call; only a fence on the server's side could close that too, and
//! kube-apiserver has none.
//!
//! Reads (GET, which includes list and watch) use connections of their own, unfenced: a lapsed
//! worker warms shards again, before its writes are released, by reading.
//!
//! What this adds to kube-client's stack: HTTP/2, offered in the TLS handshake as client-go
//! offers it (kube-client offers HTTP/1.1 only), or spoken with prior knowledge when asked
//! ([`ApiProtocol`]). Every client of the worker is built here, fenced or not (without a lease,
//! the writes' connections are always open). kube-client's retry of 429, 503 and 504 is kept,
//! its policy's copy of each request made in one step ([`ServerRetry`]).
//!
//! What this leaves out of kube-client's stack: its tracing layer (which logs every 5xx at ERROR;
//! the controllers log their own failures) and gzip (not enabled in this workspace); and the
//! expiry of exec-plugin client certificates, which kube-client reads from a private API: a
//! fenced client is not rebuilt when such a certificate expires.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response, Uri};
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::{Connect, Connected, Connection, HttpConnector};
use hyper_util::rt::TokioExecutor;
use kube::client::{Body, ConfigExt, DynBody};
use tower::retry::RetryLayer;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

use super::retry_policy::ServerRetry;
use super::{ApiProtocol, LeaseDeadline, LeaseLapsed};

/// client-go's `ReadIdleTimeout` and `PingTimeout` of its HTTP/2 connections.
const HTTP2_READ_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
const HTTP2_PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// kube-client's boxed service, as its own builder makes it, but cloneable: the worker's writes
/// call their own clone of it rather than queueing for kube's `Buffer` ([`super::ApiWrites`]).
pub(super) type ApiService = BoxCloneSyncService<Request<Body>, Response<Box<DynBody>>, BoxError>;

/// The service for `config` whose writes go out only while `deadline` allows (always, with the
/// default deadline), speaking `protocol`.
pub(super) fn service(
    config: &kube::Config,
    deadline: LeaseDeadline,
    protocol: ApiProtocol,
) -> Result<ApiService, kube::Error> {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    // As Go sets it on every TCP connection (client-go's too): an HTTP/2 connection carries
    // many requests at once, and Nagle's algorithm would hold a small frame back until the
    // server acknowledged the one before.
    tcp.set_nodelay(true);
    let reads = hyper_client(config, tcp.clone(), protocol)?;
    let writes = hyper_client(config, GatedConnector { inner: tcp, deadline }, protocol)?;
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.default_retry.then(|| RetryLayer::new(ServerRetry::new())))
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(ReadsAndWrites { reads, writes })
        .map_response(|response: Response<hyper::body::Incoming>| {
            response
                .map(|body| Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>)
        });
    Ok(BoxCloneSyncService::new(service))
}

/// A hyper client over `tcp` with `config`'s TLS and timeouts, as kube-client makes it, but
/// offering HTTP/2 in the TLS handshake unless `protocol` is [`ApiProtocol::Http1`].
fn hyper_client<C>(
    config: &kube::Config,
    tcp: C,
    protocol: ApiProtocol,
) -> Result<HyperClient<impl Connect + Clone + Send + Sync + 'static, Body>, kube::Error>
where
    C: Service<Uri> + Clone + Send + Sync + 'static,
    C::Response: Connection + Read + Write + Send + Unpin + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = rustls_pki_types::ServerName::try_from(name.clone())
            .map_err(|e| kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e)))?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let https = match protocol {
        ApiProtocol::Http1 => https.enable_http1().wrap_connector(tcp),
        ApiProtocol::Auto | ApiProtocol::Http2 => https.enable_all_versions().wrap_connector(tcp),
    };
    let mut connector = TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let mut client = HyperClient::builder(TokioExecutor::new());
    // client-go's HTTP/2 health check: a connection that answers no PING is dropped, not waited on.
    client
        .timer(hyper_util::rt::TokioTimer::new())
        .http2_keep_alive_interval(HTTP2_READ_IDLE_TIMEOUT)
        .http2_keep_alive_timeout(HTTP2_PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .http2_only(protocol == ApiProtocol::Http2);
    Ok(client.build(connector))
}

/// Sends GETs on `reads` and every other method on `writes`.
#[derive(Clone)]
struct ReadsAndWrites<R, W> {
    reads: R,
    writes: W,
}

impl<R, W> Service<Request<Body>> for ReadsAndWrites<R, W>
where
    R: Service<Request<Body>>,
    W: Service<Request<Body>, Response = R::Response, Error = R::Error, Future = R::Future>,
{
    type Response = R::Response;
    type Error = R::Error;
    type Future = R::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // hyper's client is always ready; both are polled so neither is called unready.
        match self.reads.poll_ready(cx) {
            Poll::Ready(Ok(())) => self.writes.poll_ready(cx),
            other => other,
        }
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if request.method() == http::Method::GET {
            self.reads.call(request)
        } else {
            self.writes.call(request)
        }
    }
}

/// A TCP connector whose streams refuse to write once the lease deadline passed.
#[derive(Clone)]
struct GatedConnector {
    inner: HttpConnector,
    deadline: LeaseDeadline,
}

type Connecting<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl Service<Uri> for GatedConnector {
    type Response = GatedStream<<HttpConnector as Service<Uri>>::Response>;
    type Error = <HttpConnector as Service<Uri>>::Error;
    type Future = Connecting<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let deadline = self.deadline.clone();
        Box::pin(async move { Ok(GatedStream { inner: connecting.await?, deadline }) })
    }
}

/// A stream that checks the lease before every write to the socket. A refused write fails the
/// connection; a request cut short there is never complete, so the API server never acts on it.
struct GatedStream<T> {
    inner: T,
    deadline: LeaseDeadline,
}

impl<T> GatedStream<T> {
    fn refused(&self) -> Option<io::Error> {
        (!self.deadline.writable()).then(|| io::Error::new(io::ErrorKind::PermissionDenied, LeaseLapsed))
    }
}

impl<T: Read + Unpin> Read for GatedStream<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for GatedStream<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if let Some(refused) = self.refused() {
            return Poll::Ready(Err(refused));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(refused) = self.refused() {
            return Poll::Ready(Err(refused));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for GatedStream<T> {
    fn connected(&self) -> Connected {
        self.inner.connected()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::client::test_server::ScriptedServer;
    use crate::client::{ClientLimits, fenced_from_config};

    const THROTTLED: &str = "HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\ncontent-type: application/json\r\n\
         content-length: 2\r\n\r\n{}";
    const OK: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok";

    fn lapse_reason(error: &(dyn std::error::Error + 'static)) -> bool {
        let mut link = Some(error);
        while let Some(e) = link {
            if e.to_string().contains("lease lapsed") {
                return true;
            }
            link = e.source();
        }
        false
    }

    /// kube-client retries a throttled request below every layer the worker adds, after the
    /// server's Retry-After. A write throttled while the lease was valid, whose lease ran out
    /// during that wait, is not sent again; reads go on.
    #[tokio::test]
    async fn a_write_retried_after_the_lease_ran_out_never_reaches_the_server() {
        let mut server = ScriptedServer::start(vec![THROTTLED, OK]).await;
        let deadline = LeaseDeadline::default();
        deadline.0.write().deadline = Some(Instant::now() + Duration::from_secs(60));
        let config = kube::Config::new(server.url.parse().unwrap());
        let client = fenced_from_config(config, ClientLimits::UNLIMITED, Some(deadline.clone())).unwrap();
        let write = tokio::spawn({
            let client = client.clone();
            async move { client.request_text(http::Request::post("/write").body(Vec::new()).unwrap()).await }
        });
        tokio::time::timeout(Duration::from_secs(10), server.requests.wait_for(|r| !r.is_empty()))
            .await
            .expect("the write should reach the server once")
            .unwrap();
        let refused = crate::client::test_server::lapse_and_await_refusal(&deadline, write).await;
        assert!(lapse_reason(&refused), "{refused:?}");
        assert_eq!(*server.requests.borrow(), vec!["POST /write HTTP/1.1".to_string()]);
        let read = client.request_text(http::Request::get("/read").body(Vec::new()).unwrap()).await;
        assert_eq!(read.unwrap(), "ok", "reads go on");
    }

    /// Without a lapse, the throttled write is retried and succeeds: the gate is on the lease,
    /// not on retries.
    #[tokio::test]
    async fn a_throttled_write_is_retried_while_the_lease_is_valid() {
        let server = ScriptedServer::start(vec![THROTTLED, OK]).await;
        let deadline = LeaseDeadline::default();
        deadline.0.write().deadline = Some(Instant::now() + Duration::from_secs(60));
        let config = kube::Config::new(server.url.parse().unwrap());
        let client = fenced_from_config(config, ClientLimits::UNLIMITED, Some(deadline)).unwrap();
        let written = client.request_text(http::Request::post("/write").body(Vec::new()).unwrap()).await;
        assert_eq!(written.unwrap(), "ok");
        assert_eq!(server.requests.borrow().len(), 2);
    }
}
