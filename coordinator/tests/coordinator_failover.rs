//! Two real `fleet-coordinator` processes against the sim cluster: one leads and runs PodGC, the
//! other stands by; the leader is killed with SIGKILL in the middle of a pass, the standby takes
//! over within the lease plus 2 s and finishes the work, and the sim's audit log shows that no two
//! coordinators wrote pods in overlapping tenures.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use batchfleet_coordinator::kube_client;
use batchfleet_sim::audit::{AuditEvent, read_log};
use batchfleet_sim::faults::{FaultConfig, FaultRule};
use batchfleet_sim::testing::wait_until;
use batchfleet_sim::{SimCluster, SimConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::process::{Child, Command};

mod common;
use common::{free_port, scrape};

const LEASE: Duration = Duration::from_secs(2);

struct Coordinator {
    child: Child,
    metrics: String,
}

fn spawn_coordinator(kubeconfig: &Path, id: &str) -> Coordinator {
    let metrics = format!("127.0.0.1:{}", free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_fleet-coordinator"))
        .arg("--insecure")
        .args(["--kubeconfig"])
        .arg(kubeconfig)
        .args(["--coordinator-id", id, "--metrics-addr", &metrics, "--listen", "127.0.0.1:0"])
        .args(["--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms"])
        .args(["--leader-elect-retry-period", "200ms"])
        .args([
            "--terminated-pod-gc-threshold",
            "0",
            "--podgc-period",
            "200ms",
            "--podgc-quarantine",
            "500ms",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("fleet-coordinator starts");
    Coordinator { child, metrics }
}

/// The leader gauge from the coordinator's /metrics; `None` while it is not serving.
async fn leads(c: &Coordinator) -> Option<bool> {
    scrape(&c.metrics)
        .await?
        .lines()
        .find_map(|l| l.strip_prefix("fleet_coordinator_leader "))
        .map(|v| v.trim() == "1")
}

fn pod_writes_by<'a>(events: &'a [AuditEvent], id: &str) -> Vec<&'a AuditEvent> {
    let agent = kube_client::user_agent(id);
    events
        .iter()
        .filter(|e| e.user_agent == agent && e.is_write())
        .filter(|e| e.object_ref.as_ref().is_some_and(|o| o.resource == "pods"))
        .collect()
}

fn received(e: &AuditEvent) -> jiff::Timestamp {
    e.request_received_timestamp.parse().expect("timestamp")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_within_the_lease_and_tenures_never_overlap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.log");
    let sim = SimCluster::start(SimConfig {
        nodes: 1,
        kubelet: false,
        audit_log: Some(audit.clone()),
        ..SimConfig::default()
    })
    .await
    .expect("sim");
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");

    let mut a = spawn_coordinator(&kubeconfig, "coordinator-a");
    wait_until("coordinator-a to lead", Duration::from_secs(20), || async { leads(&a).await.filter(|l| *l) })
        .await;
    let b = spawn_coordinator(&kubeconfig, "coordinator-b");
    wait_until("coordinator-b to stand by", Duration::from_secs(20), || async {
        leads(&b).await.filter(|l| !*l)
    })
    .await;

    // Orphans, and slow deletions, so that a pass is still running when the leader dies.
    sim.faults().configure(FaultConfig {
        rules: vec![FaultRule {
            verb: "delete".into(),
            resource: "pods".into(),
            latency_ms: 400,
            ..FaultRule::default()
        }],
        ..FaultConfig::default()
    });
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse().expect("url"))).expect("client");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    for i in 0..120 {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("orphan-{i}")},
            "spec": {"nodeName": "ghost-node", "containers": [{"name": "c", "image": "busybox"}]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &pod).await.expect("create");
        let running = json!({"status": {"phase": "Running"}});
        pods.patch_status(&format!("orphan-{i}"), &PatchParams::default(), &Patch::Merge(&running))
            .await
            .expect("status");
    }

    // Kill the leader once it has started deleting.
    wait_until("coordinator-a to start collecting", Duration::from_secs(20), || async {
        let events = read_log(&audit).ok()?;
        pod_writes_by(&events, "coordinator-a").iter().any(|e| e.verb == "delete").then_some(())
    })
    .await;
    a.child.start_kill().expect("kill -9");
    let killed = Instant::now();
    a.child.wait().await.expect("reaped");

    wait_until("coordinator-b to lead", LEASE * 3 + Duration::from_secs(2), || async {
        leads(&b).await.filter(|l| *l)
    })
    .await;
    let took_over = killed.elapsed();
    assert!(took_over <= LEASE + Duration::from_secs(2), "took over after {took_over:?}");
    wait_until("every orphan to be collected", Duration::from_secs(60), || async {
        pods.list(&Default::default()).await.ok().filter(|l| l.items.is_empty()).map(|_| ())
    })
    .await;

    let events = read_log(&audit).expect("audit log");
    let (by_a, by_b) = (pod_writes_by(&events, "coordinator-a"), pod_writes_by(&events, "coordinator-b"));
    assert!(
        !by_a.is_empty() && !by_b.is_empty(),
        "both coordinators collected: a {} b {}",
        by_a.len(),
        by_b.len()
    );
    let a_last = by_a.iter().map(|e| received(e)).max().expect("a wrote");
    let b_first = by_b.iter().map(|e| received(e)).min().expect("b wrote");
    assert!(a_last < b_first, "tenures overlap: a wrote at {a_last}, b already at {b_first}");
}
