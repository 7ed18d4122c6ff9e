//! The three PEM files of one end of a connection, as cert-manager writes them into a Secret
//! (`tls.crt`, `tls.key`, `ca.crt`).

use std::path::{Path, PathBuf};

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::TlsError;

/// Where one end's certificate chain, its private key and the CA bundle it trusts are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

impl TlsFiles {
    pub fn paths(&self) -> Vec<PathBuf> {
        vec![self.cert.clone(), self.key.clone(), self.ca.clone()]
    }

    pub(crate) fn chain(&self) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        certificates(&self.cert)
    }

    pub(crate) fn private_key(&self) -> Result<PrivateKeyDer<'static>, TlsError> {
        let pem = read(&self.key)?;
        PrivateKeyDer::from_pem_slice(&pem)
            .map_err(|e| TlsError::Pem { path: self.key.clone(), reason: e.to_string() })
    }

    pub(crate) fn roots(&self) -> Result<RootCertStore, TlsError> {
        let mut roots = RootCertStore::empty();
        for cert in certificates(&self.ca)? {
            roots
                .add(cert)
                .map_err(|e| TlsError::CaBundle { path: self.ca.clone(), reason: e.to_string() })?;
        }
        Ok(roots)
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_path_buf(), source })
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem { path: path.to_path_buf(), reason: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_path_buf() });
    }
    Ok(certs)
}
