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

/// `fleet-coordinator` on the sim of `kubeconfig`, serving nothing outside 127.0.0.1, with `flags`.
fn coordinator(kubeconfig: &std::path::Path, metrics_addr: &str, flags: &[&str]) -> tokio::process::Child {
    Command::new(env!("CARGO_BIN_EXE_fleet-coordinator"))
        .arg("--insecure")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--coordinator-id",
            "coordinator-a",
            "--metrics-addr",
            metrics_addr,
            "--listen",
            "127.0.0.1:0",
        ])
        .args(flags)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("fleet-coordinator starts")
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
    let _coordinator = coordinator(
        &kubeconfig,
        &metrics_addr,
        &[
            "--leader-elect-lease-duration",
            "2s",
            "--leader-elect-renew-deadline",
            "1500ms",
            "--leader-elect-retry-period",
            "200ms",
            "--terminated-pod-gc-threshold",
            "2",
            "--podgc-period",
            "200ms",
            "--podgc-quarantine",
            "500ms",
        ],
    );

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

/// kube-controller-manager gives leader election a client of its own: a PodGC pass of many
/// deletes, held back by PodGC's rate limit, must not hold back the leader's renewals. Checked
/// from the sim's audit log: while PodGC deletes at 2 QPS for about 15 s, the leader Lease is
/// renewed at least once per lease duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_podgc_pass_does_not_starve_the_leaders_renewals() {
    use batchfleet_sim::audit::{Stage, read_log};
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.log");
    let sim =
        SimCluster::start(SimConfig { nodes: 1, audit_log: Some(audit.clone()), ..SimConfig::default() })
            .await
            .expect("sim");
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client = kube::Client::try_from(kube::Config::new(sim.url().parse().expect("url"))).expect("client");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    const FINISHED: usize = 31;
    for i in 0..FINISHED {
        create(&pods, &format!("done-{i}"), "sim-node-0", "10ms").await;
    }
    wait_until("the pods to finish", Duration::from_secs(60), || async {
        let list = pods.list(&Default::default()).await.ok()?;
        let succeeded = |p: &&Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
        let done = list.items.iter().filter(succeeded).count();
        (done == FINISHED).then_some(())
    })
    .await;

    let lease = Duration::from_secs(3);
    let _coordinator = coordinator(
        &kubeconfig,
        "127.0.0.1:0",
        &[
            "--leader-elect-lease-duration",
            "3s",
            "--leader-elect-renew-deadline",
            "2s",
            "--leader-elect-retry-period",
            "300ms",
            "--kube-api-qps",
            "2",
            "--kube-api-burst",
            "1",
            "--terminated-pod-gc-threshold",
            "1",
            "--podgc-period",
            "200ms",
        ],
    );
    wait_until("PodGC to delete all but one finished pod", Duration::from_secs(90), || async {
        (pods.list(&Default::default()).await.ok()?.items.len() == 1).then_some(())
    })
    .await;

    let events = read_log(&audit).expect("audit log");
    let completed = |resource: &str, verb: &str| {
        let events = &events;
        let resource = resource.to_string();
        let verb = verb.to_string();
        events.iter().filter(move |e| {
            e.stage == Stage::ResponseComplete
                && e.succeeded()
                && e.verb == verb
                && e.object_ref.as_ref().is_some_and(|o| o.resource == resource)
                && e.user_agent.starts_with("fleet-coordinator/")
        })
    };
    let at = |e: &batchfleet_sim::audit::AuditEvent| {
        e.request_received_timestamp.parse::<jiff::Timestamp>().expect("audit time")
    };
    let deletes: Vec<jiff::Timestamp> = completed("pods", "delete").map(at).collect();
    assert_eq!(deletes.len(), FINISHED - 1, "PodGC deleted every pod over the threshold");
    let (first, last) = (deletes.iter().min().expect("a delete"), deletes.iter().max().expect("a delete"));
    assert!(
        last.duration_since(*first).as_secs_f64() > 2.0 * lease.as_secs_f64(),
        "the deletes were rate limited over several lease durations ({first} to {last})"
    );
    let mut renewals: Vec<jiff::Timestamp> = completed("leases", "update")
        .chain(completed("leases", "patch"))
        .chain(completed("leases", "create"))
        .filter(|e| e.object_ref.as_ref().is_some_and(|o| o.name == "batchfleet-coordinator"))
        .map(at)
        .filter(|t| t >= first && t <= last)
        .collect();
    renewals.sort();
    // The gaps between the first delete, each renewal and the last delete.
    let marks: Vec<jiff::Timestamp> =
        std::iter::once(*first).chain(renewals.iter().copied()).chain([*last]).collect();
    let widest = marks.windows(2).map(|w| w[1].duration_since(w[0]).as_secs_f64()).fold(0.0, f64::max);
    assert!(
        widest < lease.as_secs_f64(),
        "the leader Lease went {widest:.1} s without a renewal during PodGC's deletes ({} renewals)",
        renewals.len()
    );
}
