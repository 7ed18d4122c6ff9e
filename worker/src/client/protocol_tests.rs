//! `--kube-api-protocol`: which HTTP version reaches the API server, over TLS and without.

use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::pem::PemObject;
use tokio::sync::mpsc;

use super::{ApiProtocol, ClientLimits, LeaseDeadline, TokenOrder, ordered_from_config};

/// A server that answers every request `ok` and reports the HTTP version it came in, over TLS
/// (offering `h2` and `http/1.1`, as kube-apiserver does) or plain TCP; both versions are served.
async fn version_server(
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> (String, mpsc::UnboundedReceiver<http::Version>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}", listener.local_addr().unwrap());
    let (seen, versions) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (seen, tls) = (seen.clone(), tls.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let _ = seen.send(req.version());
                    async { Ok::<_, std::convert::Infallible>(http::Response::new("ok".to_string())) }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = match tls {
                    Some(tls) => match tls.accept(tcp).await {
                        Ok(stream) => builder.serve_connection(TokioIo::new(stream), service).await,
                        Err(_) => return,
                    },
                    None => builder.serve_connection(TokioIo::new(tcp), service).await,
                };
            });
        }
    });
    (url, versions)
}

/// What a GET and a POST (the reads' and the writes' connections) arrive as.
async fn versions_seen(
    config: kube::Config,
    protocol: ApiProtocol,
    versions: &mut mpsc::UnboundedReceiver<http::Version>,
) -> Vec<http::Version> {
    let client = ordered_from_config(
        config,
        ClientLimits::UNLIMITED,
        Some(LeaseDeadline::default()),
        &TokenOrder::Arrival,
        protocol,
    )
    .unwrap();
    client.request_text(http::Request::get("/version").body(Vec::new()).unwrap()).await.unwrap();
    client
        .request_text(http::Request::post("/api/v1/namespaces/a/pods").body(b"{}".to_vec()).unwrap())
        .await
        .unwrap();
    vec![versions.recv().await.unwrap(), versions.recv().await.unwrap()]
}

#[tokio::test]
async fn over_plain_http_http2_is_spoken_only_when_asked_for() {
    let (url, mut versions) = version_server(None).await;
    let config = || kube::Config::new(url.parse().unwrap());
    assert_eq!(versions_seen(config(), ApiProtocol::Auto, &mut versions).await, [http::Version::HTTP_11; 2]);
    assert_eq!(versions_seen(config(), ApiProtocol::Http1, &mut versions).await, [http::Version::HTTP_11; 2]);
    assert_eq!(versions_seen(config(), ApiProtocol::Http2, &mut versions).await, [http::Version::HTTP_2; 2]);
}

#[tokio::test]
async fn over_tls_http2_is_agreed_in_the_handshake_unless_http1_is_asked_for() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = batchfleet_tls::generate::ThrowawayCa::new("test CA").unwrap();
    let issued = ca.server("api", &["127.0.0.1"]).unwrap();
    let certs = rustls_pki_types::CertificateDer::pem_slice_iter(issued.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes()).unwrap();
    let mut server =
        rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(certs, key).unwrap();
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let (url, mut versions) = version_server(Some(tokio_rustls::TlsAcceptor::from(Arc::new(server)))).await;
    let ca_der = rustls_pki_types::CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap();
    let config = || {
        let mut config = kube::Config::new(url.parse().unwrap());
        config.root_cert = Some(vec![ca_der.to_vec()]);
        config
    };
    assert_eq!(versions_seen(config(), ApiProtocol::Auto, &mut versions).await, [http::Version::HTTP_2; 2]);
    assert_eq!(versions_seen(config(), ApiProtocol::Http1, &mut versions).await, [http::Version::HTTP_11; 2]);
    assert_eq!(versions_seen(config(), ApiProtocol::Http2, &mut versions).await, [http::Version::HTTP_2; 2]);
}

/// Invariant 1 over HTTP/2, where a connection carries many writes: a write throttled while the
/// lease was valid, whose lease ran out during kube-client's retry wait, is not sent again; the
/// reads' connection goes on.
#[tokio::test]
async fn over_http2_a_write_retried_after_the_lease_ran_out_never_reaches_the_server() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let posts = Arc::new(AtomicUsize::new(0));
    let (arrived, mut first_post) = mpsc::unbounded_channel();
    tokio::spawn({
        let posts = posts.clone();
        async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let (posts, arrived) = (posts.clone(), arrived.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        assert_eq!(req.version(), http::Version::HTTP_2);
                        let throttled =
                            req.method() == http::Method::POST && posts.fetch_add(1, Ordering::SeqCst) == 0;
                        let _ = arrived.send(());
                        let response = if throttled {
                            http::Response::builder()
                                .status(429)
                                .header("retry-after", "1")
                                .body("{}".to_string())
                        } else {
                            http::Response::builder().body("ok".to_string())
                        };
                        async move { Ok::<_, std::convert::Infallible>(response.unwrap()) }
                    });
                    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
                });
            }
        }
    });
    let deadline = LeaseDeadline::default();
    deadline.0.write().deadline = Some(Instant::now() + Duration::from_secs(60));
    let client = ordered_from_config(
        kube::Config::new(url.parse().unwrap()),
        ClientLimits::UNLIMITED,
        Some(deadline.clone()),
        &TokenOrder::Arrival,
        ApiProtocol::Http2,
    )
    .unwrap();
    let write = tokio::spawn({
        let client = client.clone();
        async move { client.request_text(http::Request::post("/write").body(Vec::new()).unwrap()).await }
    });
    tokio::time::timeout(Duration::from_secs(10), first_post.recv())
        .await
        .expect("the write should reach the server once");
    let refused = super::test_server::lapse_and_await_refusal(&deadline, write).await;
    // The refused socket write fails the whole HTTP/2 connection: the request sees the
    // connection's end, not the lease's error, which HTTP/1.1 hands it.
    assert!(format!("{refused:?}").contains("SendRequest"), "{refused:?}");
    assert_eq!(posts.load(Ordering::SeqCst), 1, "the write reached the server once");
    let read = client.request_text(http::Request::get("/read").body(Vec::new()).unwrap()).await;
    assert_eq!(read.unwrap(), "ok", "reads go on");
}

/// The shard watches keep to HTTP/1.1, a connection each, whatever `--kube-api-protocol` says:
/// a worker opens three for each shard it gains, and on one HTTP/2 connection, whose server
/// allows 250 streams, those of about 84 shards would leave every further LIST and WATCH
/// waiting for a watch to end (hyper-util's pool dials no second connection, as Go's does).
#[tokio::test]
async fn the_watches_client_speaks_http1_even_when_http2_is_asked_for() {
    let (url, mut versions) = version_server(None).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, batchfleet_sim::kubeconfig_yaml_for(&url)).unwrap();
    let opts = crate::start::WorkerOptions {
        kubeconfig: Some(kubeconfig),
        api_protocol: ApiProtocol::Http2,
        ..crate::start::WorkerOptions::default()
    };
    let watches = crate::start::Clients::informers(&opts).await.unwrap();
    watches
        .request_text(http::Request::get("/api/v1/pods?watch=true").body(Vec::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(versions.recv().await.unwrap(), http::Version::HTTP_11);
}
