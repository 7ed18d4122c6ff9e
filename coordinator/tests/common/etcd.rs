//! A real etcd 3.5 process (`BATCHFLEET_ETCD`, else `.tools/bin/etcd` from `scripts/setup`) on
//! free ports with a data directory of its own, killed when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Etcd {
    child: Child,
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub async fn start_etcd() -> Etcd {
    let binary = std::env::var_os("BATCHFLEET_ETCD")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/etcd"));
    assert!(binary.exists(), "etcd not found at {}: run scripts/setup", binary.display());
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, peer) = (super::free_port(), super::free_port());
    let endpoint = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let child = Command::new(binary)
        .args(["--name", "test", "--data-dir"])
        .arg(dir.path())
        .args(["--listen-client-urls", &endpoint, "--advertise-client-urls", &endpoint])
        .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("test={peer_url}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("etcd starts");
    let etcd = Etcd { child, endpoint, _dir: dir };
    batchfleet_sim::testing::wait_until("etcd to serve", Duration::from_secs(20), || async {
        let mut client = etcd_client::Client::connect([etcd.endpoint.as_str()], None).await.ok()?;
        client.get("probe", None).await.ok().map(|_| ())
    })
    .await;
    etcd
}
