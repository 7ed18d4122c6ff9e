//! Who is at the other end of a connection: the Common Name of the certificate it presented.
//!
//! The CN is what kube-apiserver takes as a client certificate's user name, so it is what an
//! operator issuing certificates for a Kubernetes fleet expects to write (cert-manager's
//! `commonName`).

use std::net::SocketAddr;

use rustls_pki_types::CertificateDer;

/// What the server knows of an accepted connection; tonic puts it into every request's
/// extensions (`Request::extensions().get::<PeerInfo>()`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerInfo {
    pub remote_addr: Option<SocketAddr>,
    /// The verified client certificate's subject Common Name; `None` when it has none.
    pub common_name: Option<String>,
}

/// The subject Common Name of a DER certificate, `None` if it has none or does not parse.
pub fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let cn = parsed.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_string).filter(|cn| !cn.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_the_subject_common_name() {
        let mut params = rcgen::CertificateParams::new(vec!["ignored.example".to_string()]).unwrap();
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "batchfleet");
        params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(common_name(cert.der()), Some("alice".to_string()));
    }

    #[test]
    fn no_common_name_and_garbage_are_no_identity() {
        let params = rcgen::CertificateParams::new(vec!["only-a-san.example".to_string()]).unwrap();
        let mut params = params;
        params.distinguished_name = rcgen::DistinguishedName::new();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(common_name(cert.der()), None);
        assert_eq!(common_name(&CertificateDer::from(vec![0x30, 0x03, 0x01, 0x02])), None);
    }
}
