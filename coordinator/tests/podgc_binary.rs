//! PodGC through the real `fleet-coordinator` binary, against a sim cluster with a scheduler, a
//! kubelet and its node operations: terminated pods over the threshold, a terminating pod on a
//! NotReady node tainted out-of-service, and a pod on a deleted node are collected; a running pod
//! on a healthy node is not. Checked from the cluster's objects and the coordinator's /metrics.

use std::process::Stdio;
use std::time::Duration;

use batchfleet_sim::http::NodeAdmin;
use batchfleet_sim::testing::wait_until;
use batchfleet_sim::{SimCluster, SimConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use tokio::process::Command;

mod common;
use common::{free_port, scrape};

fn deleted_by_reason(text: &str, reason: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with("pod_gc_collector_force_delete_pods_total{"))
        .filter(|l| l.contains(&format!("reason=\"{reason}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn create(pods: &Api<Pod>, name: &str, node: &str, run: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"sim.batchfleet.io/run": run}},
        "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod).await.expect("create");
}

async fn phase(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get_opt(name).await.ok().flatten().and_then(|p| p.status).and_then(|s| s.phase)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_binary_runs_upstreams_passes_against_the_sims_node_operations() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = SimCluster::start(SimConfig { nodes: 3, ..SimConfig::default() }).await.expect("sim");
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse().expect("url"))).expect("client");
    let pods: Api<Pod> = Api::namespaced(client, "default");

    // Four pods that finish, on a healthy node; two are over the threshold.
    for name in ["done-a", "done-b", "done-c", "done-d"] {
        create(&pods, name, "sim-node-0", "50ms").await;
    }
    create(&pods, "keep", "sim-node-0", "forever").await;
    create(&pods, "stuck", "sim-node-1", "forever").await;
    create(&pods, "orphan", "sim-node-2", "forever").await;
    wait_until("the pods to run or finish", Duration::from_secs(30), || async {
        let mut ok = true;
        for name in ["done-a", "done-b", "done-c", "done-d"] {
            ok &= phase(&pods, name).await.as_deref() == Some("Succeeded");
        }
        for name in ["keep", "stuck", "orphan"] {
            ok &= phase(&pods, name).await.as_deref() == Some("Running");
        }
        ok.then_some(())
    })
    .await;

    // sim-node-1 goes NotReady and out of service with a pod stuck terminating on it; sim-node-2
    // is deleted under its running pod.
    let nodes = sim.nodes();
    nodes.set_ready("sim-node-1", false).expect("not ready");
    nodes.taint_out_of_service("sim-node-1").expect("taint");
    pods.delete("stuck", &DeleteParams::default()).await.expect("delete stuck");
    nodes.delete_node("sim-node-2").expect("delete node");
    assert!(
        pods.get_opt("stuck").await.expect("get").is_some_and(|p| p.metadata.deletion_timestamp.is_some())
    );

    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let _coordinator = Command::new(env!("CARGO_BIN_EXE_fleet-coordinator"))
        .arg("--insecure")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "--coordinator-id",
            "coordinator-a",
            "--metrics-addr",
            &metrics_addr,
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms"])
        .args(["--leader-elect-retry-period", "200ms"])
        .args([
            "--terminated-pod-gc-threshold",
            "2",
            "--podgc-period",
            "200ms",
            "--podgc-quarantine",
            "500ms",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("fleet-coordinator starts");

    wait_until("PodGC to collect", Duration::from_secs(30), || async {
        let mut names: Vec<String> = pods
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        names.sort();
        (names == ["done-c", "done-d", "keep"]).then_some(())
    })
    .await;
    let text = scrape(&metrics_addr).await.expect("metrics");
    assert_eq!(deleted_by_reason(&text, "terminated"), 2, "{text}");
    assert_eq!(deleted_by_reason(&text, "out-of-service"), 1, "{text}");
    assert_eq!(deleted_by_reason(&text, "orphaned"), 1, "{text}");
    assert!(text.contains("fleet_coordinator_leader 1"), "{text}");
}
