use std::path::PathBuf;

/// Why a TLS configuration could not be built from its files.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: not PEM: {reason}")]
    Pem { path: PathBuf, reason: String },
    #[error("{path}: no certificate in the file")]
    NoCertificate { path: PathBuf },
    #[error("the CA bundle {path}: {reason}")]
    CaBundle { path: PathBuf, reason: String },
    #[error("{0:?} is not a TLS server name")]
    ServerName(String),
    #[error("{0}")]
    Rustls(#[from] rustls::Error),
    #[error("client certificate verification: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}
