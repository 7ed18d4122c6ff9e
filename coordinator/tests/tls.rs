//! The fleet's gRPC over TLS with client certificates, as operators meet it: `fleet-coordinator`
//! with `--tls-*` and `--admin-policy`, `fleetctl` and `fleet-worker` with their certificates.
//! Plaintext, a certificate from another CA and no certificate at all are refused; admin calls
//! are allowed by the policy's identities (PERMISSION_DENIED otherwise); a worker registers only
//! as the id its certificate names; a rotated certificate and CA are served to new connections
//! without a restart.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use batchfleet_proto::v1 as pb;
use batchfleet_proto::v1::fleet_admin_client::FleetAdminClient;
use batchfleet_proto::v1::fleet_session_client::FleetSessionClient;
use batchfleet_sim::testing::{wait_until, workspace_binary};
use batchfleet_sim::{SimCluster, SimConfig};
use batchfleet_tls::TlsFiles;
use batchfleet_tls::client::ClientTransport;
use batchfleet_tls::generate::ThrowawayCa;
use common::free_port;
use tokio::process::{Child, Command};
use tonic::Code;

const POLICY: &str = "admin:\n  - identity: alice\n    access: write\n  - identity: bob\n    access: read\n";

struct Fleet {
    _sim: SimCluster,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    ca: ThrowawayCa,
    /// The coordinator's files, which the reload test replaces.
    server: TlsFiles,
    admin: String,
    coordinator: Child,
}

impl Fleet {
    /// A sim and a TLS coordinator with its certificate from `ca`, leading.
    async fn start() -> Fleet {
        let dir = tempfile::tempdir().expect("tempdir");
        let sim = SimCluster::start(SimConfig { nodes: 1, kubelet: false, ..SimConfig::default() })
            .await
            .expect("sim");
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let ca = ThrowawayCa::new("fleet CA A").expect("CA");
        let server = ca
            .write(
                &ca.server("fleet-coordinator", &["127.0.0.1", "localhost"]).expect("cert"),
                &dir.path().join("coordinator"),
            )
            .expect("write");
        let policy = dir.path().join("admin-policy.yaml");
        std::fs::write(&policy, POLICY).expect("policy");
        let listen = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(dir.path().join("coordinator.log")).expect("log");
        let coordinator = Command::new(env!("CARGO_BIN_EXE_fleet-coordinator"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--coordinator-id", "coordinator-0", "--listen", &listen, "--metrics-addr", "127.0.0.1:0"])
            .args([
                "--shards",
                "16",
                "--leader-elect-lease-duration",
                "10s",
                "--leader-elect-renew-deadline",
                "7s",
            ])
            .args(tls_flags(&server))
            .arg("--admin-policy")
            .arg(&policy)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .expect("fleet-coordinator starts");
        let fleet =
            Fleet { _sim: sim, kubeconfig, ca, server, admin: format!("https://{listen}"), coordinator, dir };
        let alice = fleet.client("alice");
        wait_until("the TLS coordinator answers alice", Duration::from_secs(60), || async {
            fleet.fleetctl(&alice, &["status"]).await.0.then_some(())
        })
        .await;
        fleet
    }

    /// `name`'s client certificate from the fleet's CA.
    fn client(&self, name: &str) -> TlsFiles {
        self.ca.write(&self.ca.client(name).expect("cert"), &self.dir.path().join(name)).expect("write")
    }

    async fn fleetctl(&self, files: &TlsFiles, args: &[&str]) -> (bool, String) {
        fleetctl(&tls_flags(files), &self.admin, args).await
    }

    /// The coordinator's log, its colours removed.
    fn log(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("coordinator.log")).unwrap_or_default();
        let mut plain = String::with_capacity(log.len());
        let mut chars = log.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                chars.by_ref().find(|c| c.is_ascii_alphabetic());
            } else {
                plain.push(c);
            }
        }
        plain
    }

    async fn admin_client(&self, files: &TlsFiles) -> FleetAdminClient<tonic::transport::Channel> {
        FleetAdminClient::new(self.channel(files).await)
    }

    async fn channel(&self, files: &TlsFiles) -> tonic::transport::Channel {
        let transport = ClientTransport::tls(files.clone(), None).expect("client TLS");
        let endpoint = tonic::transport::Endpoint::from_shared(self.admin.clone()).expect("url");
        transport.connect(endpoint).await.expect("connects")
    }
}

fn tls_flags(files: &TlsFiles) -> Vec<String> {
    [("--tls-cert", &files.cert), ("--tls-key", &files.key), ("--tls-ca", &files.ca)]
        .into_iter()
        .flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()])
        .collect()
}

/// `fleetctl FLAGS --admin ADMIN ARGS`: whether it succeeded, and what it printed.
async fn fleetctl(flags: &[String], admin: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(workspace_binary("batchfleet-fleetctl", "fleetctl"))
        .args(flags)
        .args(["--admin", admin])
        .args(args)
        .output()
        .await
        .expect("fleetctl runs");
    let printed = [out.stdout, out.stderr].concat();
    (out.status.success(), String::from_utf8_lossy(&printed).into_owned())
}

async fn exit_code(binary: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(binary).args(args).output().await.expect("runs");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test]
async fn without_tls_flags_or_insecure_every_binary_refuses_to_start() {
    let coordinator = PathBuf::from(env!("CARGO_BIN_EXE_fleet-coordinator"));
    let (code, err) = exit_code(&coordinator, &["--listen", "127.0.0.1:0"]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--tls-cert, --tls-key and --tls-ca") && err.contains("--insecure"), "{err}");
    let (code, err) = exit_code(&coordinator, &["--tls-cert", "c.pem", "--tls-ca", "ca.pem"]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--tls-key missing"), "{err}");
    let (code, err) = exit_code(&coordinator, &["--insecure", "--tls-cert", "c.pem"]).await;
    assert_eq!(code, Some(2), "{err}");

    let worker = workspace_binary("batchfleet-worker", "fleet-worker");
    let (code, err) = exit_code(&worker, &["--coordinator", "http://127.0.0.1:1"]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--insecure"), "{err}");

    let fleetctl = workspace_binary("batchfleet-fleetctl", "fleetctl");
    let (code, err) = exit_code(&fleetctl, &["status"]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--insecure"), "{err}");
    // What does not speak to the coordinator needs neither.
    let (code, err) = exit_code(&fleetctl, &["schedule", "@hourly", "--count", "1"]).await;
    assert_eq!(code, Some(0), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_coordinator_refuses_plaintext_other_cas_and_no_certificate() {
    let fleet = Fleet::start().await;
    let alice = fleet.client("alice");

    let (ok, printed) =
        fleetctl(&["--insecure".to_string()], &fleet.admin.replace("https", "http"), &["status"]).await;
    assert!(!ok, "a plaintext client is refused: {printed}");

    let other = ThrowawayCa::new("another CA").expect("CA");
    let mallory =
        other.write(&other.client("alice").expect("cert"), &fleet.dir.path().join("mallory")).expect("write");
    // Mallory trusts the fleet's CA, so only her certificate is at fault.
    let mallory = TlsFiles { ca: alice.ca.clone(), ..mallory };
    let (ok, printed) = fleet.fleetctl(&mallory, &["status"]).await;
    assert!(!ok, "a certificate from another CA is refused, whatever its name: {printed}");

    assert!(no_certificate_is_refused(&fleet, &alice.ca).await, "a client without a certificate is refused");
    // And the coordinator still serves its own.
    let (ok, printed) = fleet.fleetctl(&alice, &["status"]).await;
    assert!(ok, "{printed}");
    assert!(fleet.log().contains("TLS handshake refused"), "{}", fleet.log());
}

/// Shakes hands presenting no certificate, then sends the HTTP/2 preface: the coordinator must
/// close the connection without an answer (TLS 1.3 lets the client finish its side first).
async fn no_certificate_is_refused(fleet: &Fleet, ca: &Path) -> bool {
    use rustls_pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(ca).expect("ca") {
        roots.add(cert.expect("cert")).expect("root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let address = fleet.admin.trim_start_matches("https://").to_string();
    let tcp = tokio::net::TcpStream::connect(&address).await.expect("tcp");
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let Ok(mut tls) = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await else {
        return true;
    };
    let _ = tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await;
    let mut buf = [0u8; 64];
    match tokio::time::timeout(Duration::from_secs(10), tls.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(_)) => false,
        Err(_) => panic!("the coordinator neither answered nor closed the connection"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_calls_are_authorized_by_the_certificates_identity() {
    let fleet = Fleet::start().await;
    let (alice, bob, eve) = (fleet.client("alice"), fleet.client("bob"), fleet.client("eve"));

    // bob may read, and a dry run is a read.
    for read in [&["status"][..], &["shards"], &["workers"], &["rebalance", "--dry-run"]] {
        let (ok, printed) = fleet.fleetctl(&bob, read).await;
        assert!(ok, "bob may {read:?}: {printed}");
    }
    let (ok, printed) = fleet.fleetctl(&bob, &["unpin", "3"]).await;
    assert!(
        !ok && printed.contains("\"bob\" may not call unpin") && printed.contains("read access"),
        "{printed}"
    );
    let denied =
        fleet.admin_client(&bob).await.unpin(pb::ShardRequest { shard: 3 }).await.expect_err("denied");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let denied = fleet.admin_client(&bob).await.rebalance(pb::RebalanceRequest { dry_run: false }).await;
    assert_eq!(denied.expect_err("denied").code(), Code::PermissionDenied);

    // eve is not in the policy at all.
    let denied = fleet.admin_client(&eve).await.status(pb::StatusRequest {}).await.expect_err("denied");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert!(denied.message().contains("does not list"), "{denied:?}");

    // alice may change the fleet, and the change is logged with her name.
    let (ok, printed) = fleet.fleetctl(&alice, &["unpin", "3"]).await;
    assert!(ok, "{printed}");
    let log = fleet.log();
    assert!(log.lines().any(|l| l.contains("admin call: unpin") && l.contains("caller=alice")), "{log}");
    assert!(!log.lines().any(|l| l.contains("admin call") && l.contains("caller=bob")), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_admin_policy_applies_to_the_next_call_without_a_restart() {
    let mut fleet = Fleet::start().await;
    let bob = fleet.client("bob");
    let (ok, printed) = fleet.fleetctl(&bob, &["unpin", "3"]).await;
    assert!(!ok, "bob may only read: {printed}");

    // Replaced whole, as the kubelet updates a mounted ConfigMap.
    let policy = fleet.dir.path().join("admin-policy.yaml");
    let staged = fleet.dir.path().join("admin-policy.staged");
    std::fs::write(&staged, "admin:\n  - identity: bob\n    access: write\n").expect("policy");
    std::fs::rename(&staged, &policy).expect("replace");
    let (ok, printed) = fleet.fleetctl(&bob, &["unpin", "3"]).await;
    assert!(ok, "bob may write now: {printed}");
    let alice = fleet.client("alice");
    let (ok, printed) = fleet.fleetctl(&alice, &["status"]).await;
    assert!(!ok && printed.contains("does not list"), "alice is no longer listed: {printed}");

    // A broken edit keeps the last good policy.
    std::fs::write(&staged, "admin:\n  - identity: bob\n    access: superuser\n").expect("policy");
    std::fs::rename(&staged, &policy).expect("replace");
    let (ok, printed) = fleet.fleetctl(&bob, &["unpin", "3"]).await;
    assert!(ok, "the last good policy stays in force: {printed}");
    assert!(fleet.log().contains("reload failed"), "{}", fleet.log());
    assert!(fleet.coordinator.try_wait().expect("status").is_none(), "the coordinator was not restarted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_registers_only_as_the_id_its_certificate_names() {
    let fleet = Fleet::start().await;
    let alice = fleet.client("alice");
    let w1 = fleet.client("w-1");
    let register =
        |id: &str| pb::RegisterRequest { worker_id: id.to_string(), ..pb::RegisterRequest::default() };
    let mut session = FleetSessionClient::new(fleet.channel(&w1).await);
    let denied = session.register(register("w-2")).await.expect_err("w-1 is not w-2");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    // An operator's certificate is no worker's either.
    let mut session = FleetSessionClient::new(fleet.channel(&alice).await);
    let denied = session.register(register("alice-worker")).await.expect_err("not a worker");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");

    // The real worker with its own certificate joins and gets shards.
    let worker_log = std::fs::File::create(fleet.dir.path().join("w-1.log")).expect("log");
    let _worker = Command::new(workspace_binary("batchfleet-worker", "fleet-worker"))
        .arg("--kubeconfig")
        .arg(&fleet.kubeconfig)
        .args(["--coordinator", &fleet.admin, "--worker-id", "w-1", "--metrics-addr", "127.0.0.1:0"])
        .args(["--shards", "16", "--lease-duration", "5s"])
        .args(tls_flags(&w1))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::from(worker_log))
        .kill_on_drop(true)
        .spawn()
        .expect("fleet-worker starts");
    wait_until("w-1 owns shards", Duration::from_secs(120), || async {
        let (ok, printed) = fleet.fleetctl(&alice, &["workers", "-o", "json"]).await;
        let workers: serde_json::Value = serde_json::from_str(&printed).ok().filter(|_| ok)?;
        workers.as_array()?.iter().any(|w| w["name"] == "w-1" && w["shards"].as_u64() > Some(0)).then_some(())
    })
    .await;

    // A worker may end its own drain (a drained process does as it exits), and nobody else's.
    let mut admin = fleet.admin_client(&w1).await;
    admin.undrain(pb::WorkerRequest { worker: "w-1".into() }).await.expect("w-1 may end its own drain");
    let denied = admin.undrain(pb::WorkerRequest { worker: "w-2".into() }).await.expect_err("w-1 is not w-2");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_and_ca_serve_new_connections_without_a_restart() {
    let mut fleet = Fleet::start().await;
    let alice_a = fleet.client("alice");

    // Cert B from a new CA B, written over A's files as a Secret volume update would, each file
    // replaced whole.
    let ca_b = ThrowawayCa::new("fleet CA B").expect("CA");
    let staged = fleet.dir.path().join("staged");
    let server_b =
        ca_b.write(&ca_b.server("fleet-coordinator", &["127.0.0.1"]).expect("cert"), &staged).expect("write");
    for (from, to) in [
        (&server_b.cert, &fleet.server.cert),
        (&server_b.key, &fleet.server.key),
        (&server_b.ca, &fleet.server.ca),
    ] {
        std::fs::rename(from, to).expect("replace");
    }
    let alice_b =
        ca_b.write(&ca_b.client("alice").expect("cert"), &fleet.dir.path().join("alice-b")).expect("write");

    let (ok, printed) = fleet.fleetctl(&alice_b, &["status"]).await;
    assert!(ok, "a client of CA B is served at once: {printed}");
    let (ok, printed) = fleet.fleetctl(&alice_a, &["status"]).await;
    assert!(!ok, "CA A's client no longer is (the coordinator presents B, and trusts B only): {printed}");
    assert!(fleet.coordinator.try_wait().expect("status").is_none(), "the coordinator was not restarted");
    assert!(fleet.log().contains("reloaded"), "{}", fleet.log());
}
