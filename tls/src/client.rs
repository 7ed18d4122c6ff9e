//! The client's end: it verifies the coordinator against the fleet's CA and presents its own
//! certificate, through a connector tonic dials with (`Endpoint::connect_with_connector`), so the
//! files are read again when they change.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint};

use crate::reload::Reloading;
use crate::{TlsError, TlsFiles};

/// How a client reaches the coordinator.
#[derive(Clone)]
pub enum ClientTransport {
    /// Plaintext HTTP/2, only with `--insecure`.
    Insecure,
    Tls(TlsConnector),
}

impl ClientTransport {
    /// TLS with `files`; the coordinator's certificate must name `server_name` when given,
    /// else the host of the address dialled.
    pub fn tls(files: TlsFiles, server_name: Option<&str>) -> Result<Self, TlsError> {
        let server_name = server_name
            .map(|n| ServerName::try_from(n.to_string()).map_err(|_| TlsError::ServerName(n.to_string())))
            .transpose()?;
        let config = Reloading::new("client TLS", files.paths(), move || config(&files))?;
        Ok(Self::Tls(TlsConnector { config: Arc::new(config), server_name }))
    }

    /// A channel to `endpoint` over this transport.
    pub async fn connect(&self, endpoint: Endpoint) -> Result<Channel, tonic::transport::Error> {
        match self {
            Self::Insecure => endpoint.connect().await,
            Self::Tls(connector) => endpoint.connect_with_connector(connector.clone()).await,
        }
    }

    /// The URL scheme addresses given without one get.
    pub fn scheme(&self) -> &'static str {
        match self {
            Self::Insecure => "http",
            Self::Tls(_) => "https",
        }
    }
}

impl std::fmt::Debug for ClientTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Insecure => f.write_str("Insecure"),
            Self::Tls(c) => write!(f, "Tls(server_name: {:?})", c.server_name),
        }
    }
}

fn config(files: &TlsFiles) -> Result<ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(files.roots()?)
        .with_client_auth_cert(files.chain()?, files.private_key()?)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// Dials TCP and shakes hands with the client configuration as it is at that moment.
#[derive(Clone)]
pub struct TlsConnector {
    config: Arc<Reloading<ClientConfig>>,
    server_name: Option<ServerName<'static>>,
}

impl tower::Service<Uri> for TlsConnector {
    type Response = TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, io::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let config = self.config.current();
        let server_name = self.server_name.clone();
        Box::pin(async move {
            let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{uri}: {what}"));
            // An IPv6 host comes bracketed in a URI; neither the resolver nor a server name has them.
            let host =
                uri.host().ok_or_else(|| invalid("no host"))?.trim_start_matches('[').trim_end_matches(']');
            let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("http") { 80 } else { 443 });
            let name = match server_name {
                Some(name) => name,
                None => {
                    ServerName::try_from(host.to_string()).map_err(|_| invalid("not a TLS server name"))?
                }
            };
            let tcp = TcpStream::connect((host, port)).await?;
            let _ = tcp.set_nodelay(true);
            let tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await?;
            Ok(TokioIo::new(tls))
        })
    }
}
