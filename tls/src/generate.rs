//! A throwaway CA and the certificates a fleet needs, for `loadtest up --tls` and tests; real
//! fleets issue theirs with cert-manager or their own CA (docs/security.md).

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use crate::TlsFiles;

/// A CA that lives as long as the value.
pub struct ThrowawayCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, as PEM.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

impl ThrowawayCa {
    pub fn new(common_name: &str) -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.distinguished_name.push(DnType::CommonName, common_name);
        Ok(Self { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate()?)? })
    }

    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    /// A coordinator's certificate: `names` are its DNS names and IP addresses.
    pub fn server(&self, common_name: &str, names: &[&str]) -> Result<Issued, rcgen::Error> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        self.issue(common_name, names, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A worker's or an operator's certificate; `common_name` is its identity.
    pub fn client(&self, common_name: &str) -> Result<Issued, rcgen::Error> {
        self.issue(common_name, Vec::new(), ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn issue(
        &self,
        common_name: &str,
        names: Vec<String>,
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<Issued, rcgen::Error> {
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }

    /// Writes `issued` and this CA into `dir` as a cert-manager Secret lays them out: `tls.crt`,
    /// `tls.key`, `ca.crt`.
    pub fn write(&self, issued: &Issued, dir: &Path) -> std::io::Result<TlsFiles> {
        std::fs::create_dir_all(dir)?;
        let files = TlsFiles { cert: dir.join("tls.crt"), key: dir.join("tls.key"), ca: dir.join("ca.crt") };
        std::fs::write(&files.cert, &issued.cert_pem)?;
        std::fs::write(&files.key, &issued.key_pem)?;
        std::fs::write(&files.ca, self.cert_pem())?;
        #[cfg(unix)]
        std::fs::set_permissions(&files.key, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        Ok(files)
    }
}
