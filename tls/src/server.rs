//! The server's end: a rustls configuration that requires a client certificate from the fleet's
//! CA, and the stream of verified connections tonic serves (`serve_with_incoming`).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

use crate::identity::{PeerInfo, common_name};
use crate::reload::Reloading;
use crate::{TlsError, TlsFiles};

/// A handshake that has not finished by then is dropped, so a client that connects and says
/// nothing holds a socket, not the server.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub type ReloadingServerConfig = Reloading<ServerConfig>;

/// The server configuration of `files`, rebuilt when they change.
pub fn reloading_config(files: TlsFiles) -> Result<ReloadingServerConfig, TlsError> {
    Reloading::new("server TLS", files.paths(), move || config(&files))
}

fn config(files: &TlsFiles) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(files.roots()?), provider.clone()).build()?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(files.chain()?, files.private_key()?)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// The connections accepted on `listener` that completed a handshake with the configuration as it
/// is at their accept. Handshakes run concurrently, so a slow client does not hold up the others;
/// a failed one (no certificate, another CA, plaintext) is logged and dropped.
pub fn incoming(
    listener: TcpListener,
    config: Arc<Reloading<ServerConfig>>,
) -> ReceiverStream<Result<TlsConnection, io::Error>> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = tx.closed() => return,
                accepted = listener.accept() => accepted,
            };
            let (tcp, remote) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: a pause instead of a busy loop.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = tokio_rustls::TlsAcceptor::from(config.current());
            let tx = tx.clone();
            tokio::spawn(async move {
                let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(e)) => {
                        tracing::info!(%remote, error = %e, "TLS handshake refused");
                        return;
                    }
                    Err(_) => {
                        tracing::info!(%remote, "TLS handshake timed out");
                        return;
                    }
                };
                let common_name = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .and_then(common_name);
                let info = PeerInfo { remote_addr: Some(remote), common_name };
                let _ = tx.send(Ok(TlsConnection { stream, info })).await;
            });
        }
    });
    ReceiverStream::new(rx)
}

/// A verified TLS connection and who is at its other end.
pub struct TlsConnection {
    stream: tokio_rustls::server::TlsStream<TcpStream>,
    info: PeerInfo,
}

impl Connected for TlsConnection {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        self.info.clone()
    }
}

impl AsyncRead for TlsConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
