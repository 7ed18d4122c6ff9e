//! The transport flags every binary that speaks the fleet's gRPC shares: `--tls-cert`,
//! `--tls-key`, `--tls-ca`, or `--insecure`. Neither is a configuration error (exit code 2):
//! plaintext is never what a process falls back to.

use std::path::PathBuf;

use crate::TlsFiles;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// PEM certificate (chain) this process presents, signed by the fleet's CA; re-read when the
    /// file changes.
    #[arg(long, global = true, env = "FLEET_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert; re-read when the file changes.
    #[arg(long, global = true, env = "FLEET_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA bundle the other end's certificate must chain to (the fleet's CA); re-read when
    /// the file changes.
    #[arg(long, global = true, env = "FLEET_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Plaintext gRPC with no authentication: for tests and local quickstarts only.
    #[arg(long, global = true, env = "FLEET_INSECURE", conflicts_with_all = ["tls_cert", "tls_key", "tls_ca"])]
    pub insecure: bool,
}

/// A client's flags: [`TlsArgs`] and the name the coordinator's certificate must carry.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClientTlsArgs {
    #[command(flatten)]
    pub tls: TlsArgs,
    /// The name the coordinator's certificate must carry (a DNS SAN, or an IP SAN), instead of
    /// the host of the address dialled: one name for every coordinator behind a Service, and for
    /// the pod address a standby names as the leader's.
    #[arg(long, global = true, env = "FLEET_TLS_SERVER_NAME", value_name = "NAME")]
    pub tls_server_name: Option<String>,
}

impl ClientTlsArgs {
    /// The transport, with its files read once now, or the message a process exits 2 with.
    pub fn client_transport(&self) -> Result<crate::client::ClientTransport, String> {
        match self.tls.transport()? {
            Transport::Insecure if self.tls_server_name.is_some() => {
                Err("--tls-server-name needs TLS, not --insecure".to_string())
            }
            Transport::Insecure => Ok(crate::client::ClientTransport::Insecure),
            Transport::Tls(files) => {
                crate::client::ClientTransport::tls(files, self.tls_server_name.as_deref())
                    .map_err(|e| format!("TLS: {e}"))
            }
        }
    }
}

/// What the flags ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Insecure,
    Tls(TlsFiles),
}

impl TlsArgs {
    /// The transport, or the message a process exits 2 with.
    pub fn transport(&self) -> Result<Transport, String> {
        if self.insecure {
            return Ok(Transport::Insecure);
        }
        match (&self.tls_cert, &self.tls_key, &self.tls_ca) {
            (Some(cert), Some(key), Some(ca)) => {
                Ok(Transport::Tls(TlsFiles { cert: cert.clone(), key: key.clone(), ca: ca.clone() }))
            }
            (None, None, None) => {
                Err("gRPC needs TLS: give --tls-cert, --tls-key and --tls-ca (the fleet's CA), \
                 or --insecure for plaintext with no authentication"
                    .to_string())
            }
            _ => {
                let missing: Vec<&str> = [
                    ("--tls-cert", self.tls_cert.is_none()),
                    ("--tls-key", self.tls_key.is_none()),
                    ("--tls-ca", self.tls_ca.is_none()),
                ]
                .into_iter()
                .filter_map(|(flag, missing)| missing.then_some(flag))
                .collect();
                Err(format!(
                    "--tls-cert, --tls-key and --tls-ca go together: {} missing",
                    missing.join(" and ")
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_flags_is_an_error_not_plaintext() {
        assert!(TlsArgs::default().transport().unwrap_err().contains("--insecure"));
        assert_eq!(TlsArgs { insecure: true, ..TlsArgs::default() }.transport(), Ok(Transport::Insecure));
    }

    #[test]
    fn the_three_files_go_together() {
        let partial = TlsArgs { tls_cert: Some("c".into()), ..TlsArgs::default() };
        assert_eq!(
            partial.transport().unwrap_err(),
            "--tls-cert, --tls-key and --tls-ca go together: --tls-key and --tls-ca missing"
        );
        let all = TlsArgs {
            tls_cert: Some("c".into()),
            tls_key: Some("k".into()),
            tls_ca: Some("a".into()),
            insecure: false,
        };
        assert_eq!(
            all.transport(),
            Ok(Transport::Tls(TlsFiles { cert: "c".into(), key: "k".into(), ca: "a".into() }))
        );
    }
}
