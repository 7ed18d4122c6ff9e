//! `--grpc-max-message-size` on a real `fleet-coordinator`: a call larger than the limit is
//! refused with OUT_OF_RANGE, changes nothing, and shows in `grpc_server_handled_total`; calls
//! within it go on.

use std::process::Stdio;
use std::time::Duration;

use batchfleet_proto::v1 as pb;
use batchfleet_proto::v1::fleet_admin_client::FleetAdminClient;
use batchfleet_sim::testing::wait_until;
use batchfleet_sim::{SimCluster, SimConfig};
use tokio::process::Command;

mod common;
use common::{free_port, scrape};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_over_the_message_size_limit_is_refused_and_counted() {
    let sim = SimCluster::start(SimConfig { nodes: 1, ..SimConfig::default() }).await.expect("sim");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let listen = format!("127.0.0.1:{}", free_port());
    let metrics = format!("127.0.0.1:{}", free_port());
    let _coordinator = Command::new(env!("CARGO_BIN_EXE_fleet-coordinator"))
        .arg("--insecure")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--coordinator-id", "coordinator-0", "--listen", &listen, "--metrics-addr", &metrics])
        .args(["--shards", "4", "--grpc-max-message-size", "4096"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("fleet-coordinator starts");
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{listen}")).expect("url");
    let mut admin = wait_until("the coordinator leads", Duration::from_secs(60), || async {
        let mut admin = FleetAdminClient::new(endpoint.connect().await.ok()?);
        admin.status(pb::StatusRequest::default()).await.ok()?;
        Some(admin)
    })
    .await;

    let huge = pb::WorkerRequest { worker: "w".repeat(8192) };
    let refused = admin.drain(huge).await.expect_err("a message over 4096 bytes is refused");
    assert_eq!(refused.code(), tonic::Code::OutOfRange, "{refused:?}");
    let workers = admin.workers(pb::WorkersRequest::default()).await.expect("calls within the limit go on");
    assert!(workers.into_inner().workers.is_empty(), "the refused drain changed nothing");

    let counted = r#"grpc_server_handled_total{grpc_code="OutOfRange",grpc_method="Drain",grpc_service="batchfleet.v1.FleetAdmin"} 1"#;
    wait_until("the refusal is counted", Duration::from_secs(10), || async {
        scrape(&metrics).await?.lines().any(|l| l == counted).then_some(())
    })
    .await;
}
