//! The Eviction subresource and PodDisruptionBudgets through kube-rs and kubectl 1.37: a budget
//! lets one eviction through and answers the next with 429, its status follows the pods, and
//! `kubectl drain` evicts a node's pods.

mod common;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, PostParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

fn web_pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}, "annotations": {"sim.batchfleet.io/run": "forever"}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                 "containers": [{"name": "main", "image": "nginx"}]}
    }))
    .unwrap()
}

async fn ready(api: &Api<Pod>, name: &str) {
    common::wait_until(&format!("pod {name} to be Ready"), WAIT, || async {
        let p = api.get(name).await.unwrap();
        let conditions = p.status?.conditions?;
        conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True").then_some(())
    })
    .await;
}

async fn pdb_status(api: &Api<PodDisruptionBudget>, want: (i32, i32, i32, i32)) -> Value {
    common::wait_until(&format!("PDB status {want:?}"), WAIT, || async {
        let pdb = api.get("web").await.unwrap();
        let s = pdb.status.clone()?;
        let n = |v: Option<i32>| v.unwrap_or(0);
        let got = (n(s.current_healthy), n(s.desired_healthy), n(s.expected_pods), n(s.disruptions_allowed));
        (got == want && s.observed_generation == pdb.metadata.generation)
            .then(|| serde_json::to_value(&pdb).unwrap())
    })
    .await
}

#[tokio::test]
async fn a_budget_allows_one_eviction_then_answers_429() {
    let sim = common::sim().await;
    let client = common::client(&sim);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    // Evicted pods stay Terminating, so their condition can be read back.
    common::raw(
        &client,
        "PUT",
        "/_sim/kubelet/confirm-deletions",
        Some("application/json"),
        br#"{"enabled":false}"#.to_vec(),
    )
    .await;
    for (name, node) in [("web-a", "sim-node-0"), ("web-b", "sim-node-1")] {
        pods.create(&PostParams::default(), &web_pod(name, node)).await.unwrap();
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    for name in ["web-a", "web-b"] {
        ready(&pods, name).await;
    }
    let status = pdb_status(&pdbs, (2, 1, 2, 1)).await;
    let condition = &status["status"]["conditions"][0];
    assert_eq!(
        (condition["type"].as_str(), condition["reason"].as_str()),
        (Some("DisruptionAllowed"), Some("SufficientPods"))
    );

    let ok = pods.evict("web-a", &EvictParams::default()).await.unwrap();
    assert_eq!(ok.status, Some(kube::core::response::StatusSummary::Success));
    let evicted = pods.get("web-a").await.unwrap();
    assert!(evicted.metadata.deletion_timestamp.is_some());
    let target = evicted
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap();
    assert_eq!(
        (target.status.as_str(), target.reason.as_deref(), target.message.as_deref()),
        ("True", Some("EvictionByEvictionAPI"), Some("Eviction API: evicting"))
    );

    // The evicted pod no longer counts: the budget has nothing left to give.
    pdb_status(&pdbs, (1, 1, 2, 0)).await;
    let body = serde_json::to_vec(&json!({"apiVersion": "policy/v1", "kind": "Eviction",
                                          "metadata": {"name": "web-b", "namespace": "default"}}))
    .unwrap();
    let (code, headers, text) = common::raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/pods/web-b/eviction",
        Some("application/json"),
        body,
    )
    .await;
    assert_eq!(code, 429, "{text}");
    assert!(headers.get("retry-after").is_none(), "a spent budget gives no Retry-After");
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Cannot evict pod as it would violate the pod's disruption budget.",
               "reason": "TooManyRequests", "code": 429,
               "details": {"causes": [{"reason": "DisruptionBudget",
                                       "message": "The disruption budget web needs 1 healthy pods and has 1 currently"}]}})
    );
    let err = pods.evict("web-b", &EvictParams::default()).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 429), "{err:?}");
    assert!(pods.get("web-b").await.unwrap().metadata.deletion_timestamp.is_none());

    // A pod in no budget, and one not found.
    let mut loner = web_pod("loner", "sim-node-0");
    loner.metadata.labels = None;
    pods.create(&PostParams::default(), &loner).await.unwrap();
    ready(&pods, "loner").await;
    pods.evict("loner", &EvictParams::default()).await.unwrap();
    let err = pods.evict("ghost", &EvictParams::default()).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 404), "{err:?}");
}

#[tokio::test]
async fn kubectl_drain_cordons_and_evicts_the_nodes_pods() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let pods: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    for name in ["d-1", "d-2"] {
        pods.create(&PostParams::default(), &web_pod(name, "sim-node-0")).await.unwrap();
    }
    pods.create(&PostParams::default(), &web_pod("elsewhere", "sim-node-1")).await.unwrap();
    for name in ["d-1", "d-2", "elsewhere"] {
        ready(&pods, name).await;
    }
    let out = k.run(&["drain", "sim-node-0", "--force", "--ignore-daemonsets", "--timeout=30s"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("evicting pod default/d-1") && stdout.contains("evicting pod default/d-2"),
        "{stdout}"
    );
    assert!(stdout.contains("node/sim-node-0 drained"), "{stdout}");
    for name in ["d-1", "d-2"] {
        assert!(pods.get_opt(name).await.unwrap().is_none(), "{name} is gone");
    }
    assert!(pods.get_opt("elsewhere").await.unwrap().is_some());
    // Through the Eviction subresource, not plain deletes.
    let counters = sim.counters().snapshot();
    let evictions = counters["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["verb"] == "create" && r["resource"] == "pods/eviction")
        .and_then(|r| r["count"].as_u64());
    assert_eq!(evictions, Some(2), "{counters}");
    let nodes: Api<Node> = Api::all(common::client(&sim));
    assert_eq!(nodes.get("sim-node-0").await.unwrap().spec.unwrap().unschedulable, Some(true));
}

#[tokio::test]
async fn kubectl_drain_is_held_back_by_a_budget_and_says_why() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let pods: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    pods.create(&PostParams::default(), &web_pod("only", "sim-node-0")).await.unwrap();
    ready(&pods, "only").await;
    let pdb = k.write(
        "pdb.yaml",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\nspec:\n  minAvailable: 1\n  selector:\n    matchLabels:\n      app: web\n",
    );
    k.ok(&["apply", "-f", &pdb]).await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(common::client(&sim), "default");
    pdb_status(&pdbs, (1, 1, 1, 0)).await;
    let out = k.run(&["drain", "sim-node-0", "--force", "--timeout=2s"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."), "{stderr}");
    let pod = pods.get("only").await.unwrap();
    assert!(pod.metadata.deletion_timestamp.is_none(), "the budget kept the pod");
    let get = k.ok(&["get", "pdb", "web"]).await;
    let header: Vec<&str> =
        get.lines().next().unwrap_or("").split("  ").filter(|c| !c.is_empty()).map(str::trim).collect();
    assert_eq!(header, ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"], "{get}");
    let row: Vec<&str> = get.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert_eq!(&row[..4], ["web", "1", "N/A", "0"], "{get}");
}
