//! `loadtest up --tls`: a throwaway CA and the certificates of the fleet the harness starts,
//! written next to the kubeconfig in the layout a cert-manager Secret has (`tls.crt`, `tls.key`,
//! `ca.crt`): the coordinator's (SANs 127.0.0.1 and localhost), one per worker (its Common Name
//! is its worker id) and one for fleetctl (`loadtest-admin`, allowed to write by the admin
//! policy written beside them).

use std::path::{Path, PathBuf};

use anyhow::Context;
use batchfleet_tls::TlsFiles;
use batchfleet_tls::client::ClientTransport;
use batchfleet_tls::generate::ThrowawayCa;

/// The identity of the operator certificate `loadtest up --tls` writes.
pub const ADMIN_IDENTITY: &str = "loadtest-admin";

pub struct FleetPki {
    ca: ThrowawayCa,
    dir: PathBuf,
    pub coordinator: TlsFiles,
    pub admin: TlsFiles,
    pub policy: PathBuf,
}

impl FleetPki {
    /// A new CA and the coordinator's and fleetctl's certificates, in `dir`.
    pub fn generate(dir: &Path) -> anyhow::Result<Self> {
        let ca = ThrowawayCa::new("batchfleet loadtest CA").context("generating the CA")?;
        let coordinator = ca.server("fleet-coordinator", &["127.0.0.1", "localhost"])?;
        let coordinator = ca.write(&coordinator, &dir.join("coordinator"))?;
        let admin = ca.write(&ca.client(ADMIN_IDENTITY)?, &dir.join("admin"))?;
        let policy = dir.join("admin-policy.yaml");
        std::fs::write(
            &policy,
            format!(
                "# Written by loadtest up --tls.\nadmin:\n  - identity: {ADMIN_IDENTITY}\n    access: write\n"
            ),
        )?;
        Ok(Self { ca, dir: dir.to_path_buf(), coordinator, admin, policy })
    }

    pub fn coordinator_flags(&self) -> Vec<String> {
        let mut flags = file_flags(&self.coordinator);
        flags.extend(["--admin-policy".to_string(), self.policy.display().to_string()]);
        flags
    }

    /// Worker `id`'s flags, its certificate issued on first use.
    pub fn worker_flags(&self, id: &str) -> anyhow::Result<Vec<String>> {
        let dir = self.dir.join(format!("worker-{id}"));
        let files = TlsFiles { cert: dir.join("tls.crt"), key: dir.join("tls.key"), ca: dir.join("ca.crt") };
        if !files.cert.exists() {
            self.ca.write(&self.ca.client(id)?, &dir)?;
        }
        Ok(file_flags(&files))
    }

    /// fleetctl's TLS flags.
    pub fn fleetctl_flags(&self) -> Vec<String> {
        file_flags(&self.admin)
    }

    /// The harness's own admin client's transport, as fleetctl's.
    pub fn admin_transport(&self) -> anyhow::Result<ClientTransport> {
        Ok(ClientTransport::tls(self.admin.clone(), None)?)
    }
}

fn file_flags(files: &TlsFiles) -> Vec<String> {
    [("--tls-cert", &files.cert), ("--tls-key", &files.key), ("--tls-ca", &files.ca)]
        .into_iter()
        .flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()])
        .collect()
}
