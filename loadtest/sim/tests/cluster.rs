//! The simulated cluster: garbage collection and graceful deletion, the scheduler and kubelet
//! following pod annotations, and node faults from the admin endpoint.

mod common;

use std::time::Duration;

use batchfleet_sim::http::NodeAdmin;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use kube::{Resource, ResourceExt};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

fn pod(name: &str, annotations: serde_json::Value, restart: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"restartPolicy": restart, "containers": [{"name": "main", "image": "busybox"}]}
    }))
    .unwrap()
}

async fn phase(api: &Api<Pod>, name: &str, want: &str) -> Pod {
    common::wait_until(&format!("pod {name} to be {want}"), WAIT, || async {
        api.get_opt(name)
            .await
            .unwrap()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(want))
    })
    .await
}

#[tokio::test]
async fn pods_run_through_their_phases_as_annotated() {
    let sim = common::sim().await;
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    api.create(&PostParams::default(), &pod("ok", json!({"sim.batchfleet.io/run": "200ms"}), "Never"))
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &pod("bad", json!({"sim.batchfleet.io/run": "100ms", "sim.batchfleet.io/exit-code": "3"}), "Never"),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &pod(
            "slow-ready",
            json!({"sim.batchfleet.io/run": "forever", "sim.batchfleet.io/ready-after": "300ms"}),
            "Never",
        ),
    )
    .await
    .unwrap();

    let ok = phase(&api, "ok", "Succeeded").await;
    assert!(ok.spec.as_ref().unwrap().node_name.as_deref().is_some_and(|n| n.starts_with("sim-node-")));
    let terminated =
        ok.status.unwrap().container_statuses.unwrap()[0].state.clone().unwrap().terminated.unwrap();
    assert_eq!((terminated.exit_code, terminated.reason.as_deref()), (0, Some("Completed")));

    let bad = phase(&api, "bad", "Failed").await;
    let terminated =
        bad.status.unwrap().container_statuses.unwrap()[0].state.clone().unwrap().terminated.unwrap();
    assert_eq!(terminated.exit_code, 3);

    let running = phase(&api, "slow-ready", "Running").await;
    let ready = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    };
    assert!(!ready(&running), "not ready before ready-after");
    common::wait_until("Ready after 300ms", WAIT, || async {
        ready(&api.get("slow-ready").await.unwrap()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn on_failure_restarts_in_place_until_the_attempts_pass() {
    let sim = common::sim().await;
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    let annotations = json!({"sim.batchfleet.io/run": "50ms", "sim.batchfleet.io/exit-code": "1", "sim.batchfleet.io/fail-attempts": "2"});
    api.create(&PostParams::default(), &pod("flaky", annotations, "OnFailure")).await.unwrap();
    let done = phase(&api, "flaky", "Succeeded").await;
    let status = &done.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(status.restart_count, 2);
    let last = status.last_state.as_ref().and_then(|s| s.terminated.as_ref()).unwrap();
    assert_eq!(last.exit_code, 1);
}

#[tokio::test]
async fn fail_indexes_fails_every_other_index_with_the_exit_code() {
    let sim = common::sim().await;
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    for ix in 0..4 {
        let annotations = json!({
            "sim.batchfleet.io/run": "50ms", "sim.batchfleet.io/fail-indexes": "odd",
            "sim.batchfleet.io/exit-code": "7", "batch.kubernetes.io/job-completion-index": ix.to_string(),
        });
        let p = pod(&format!("ix-{ix}"), annotations, "Never");
        api.create(&PostParams::default(), &p).await.unwrap();
    }
    for ix in 0..4 {
        let (want, code) = if ix % 2 == 1 { ("Failed", 7) } else { ("Succeeded", 0) };
        let done = phase(&api, &format!("ix-{ix}"), want).await;
        let terminated =
            done.status.unwrap().container_statuses.unwrap()[0].state.clone().unwrap().terminated.unwrap();
        assert_eq!(terminated.exit_code, code, "index {ix}");
    }
    // The other indexes exit 0 whatever exit-code says; without one the failing indexes exit 1,
    // as with fail-attempts.
    let annotations = json!({
        "sim.batchfleet.io/run": "50ms", "sim.batchfleet.io/fail-indexes": "3/2",
        "batch.kubernetes.io/job-completion-index": "5",
    });
    api.create(&PostParams::default(), &pod("ix-5", annotations, "Never")).await.unwrap();
    let done = phase(&api, "ix-5", "Failed").await;
    let terminated =
        done.status.unwrap().container_statuses.unwrap()[0].state.clone().unwrap().terminated.unwrap();
    assert_eq!(terminated.exit_code, 1);
}

#[tokio::test]
async fn eviction_marks_the_pod_failed_with_a_disruption_target() {
    let sim = common::sim().await;
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    api.create(
        &PostParams::default(),
        &pod(
            "ev",
            json!({"sim.batchfleet.io/run": "forever", "sim.batchfleet.io/evict-after": "100ms"}),
            "Never",
        ),
    )
    .await
    .unwrap();
    let p = phase(&api, "ev", "Failed").await;
    let status = p.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("Evicted"));
    assert!(status.conditions.unwrap().iter().any(|c| c.type_ == "DisruptionTarget" && c.status == "True"));
}

#[tokio::test]
async fn graceful_pod_deletion_is_confirmed_by_the_kubelet() {
    let sim = common::sim().await;
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    api.create(&PostParams::default(), &pod("g", json!({"sim.batchfleet.io/run": "forever"}), "Never"))
        .await
        .unwrap();
    phase(&api, "g", "Running").await;
    // With the kubelet's confirmation off the pod stays Terminating with its grace period.
    sim.nodes().set_confirm_deletions(false);
    let pending = api.delete("g", &DeleteParams::default()).await.unwrap().left().expect("still there");
    assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(30));
    tokio::task::yield_now().await;
    assert!(api.get_opt("g").await.unwrap().is_some());
    // Confirmation back on: the kubelet stops it and deletes it with grace 0.
    sim.nodes().set_confirm_deletions(true);
    api.delete("g", &DeleteParams::default()).await.unwrap();
    common::wait_until("the pod to be gone", WAIT, || async {
        api.get_opt("g").await.unwrap().is_none().then_some(())
    })
    .await;

    // An unscheduled pod goes at once.
    let unscheduled: Pod = serde_json::from_value(json!({
        "metadata": {"name": "u"}, "spec": {"nodeName": "", "schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]}
    }))
    .unwrap();
    let sim2 = common::api_only().await;
    let api2: Api<Pod> = Api::namespaced(common::client(&sim2), "default");
    api2.create(&PostParams::default(), &unscheduled).await.unwrap();
    assert!(api2.delete("u", &DeleteParams::default()).await.unwrap().is_right());
}

fn owned_configmap(name: &str, owner: &ConfigMap, block: bool) -> ConfigMap {
    let mut r = owner.controller_owner_ref(&()).unwrap();
    r.block_owner_deletion = Some(block);
    serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [r]}})).unwrap()
}

#[tokio::test]
async fn garbage_collection_background_foreground_and_orphan() {
    let sim = common::api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    let owner =
        |name: &str| serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": name}})).unwrap();

    // Background: the owner goes at once, the dependent after it.
    let bg = api.create(&PostParams::default(), &owner("bg")).await.unwrap();
    api.create(&PostParams::default(), &owned_configmap("bg-dep", &bg, false)).await.unwrap();
    assert!(api.delete("bg", &DeleteParams::background()).await.unwrap().is_right());
    common::wait_until("bg-dep collected", WAIT, || async {
        api.get_opt("bg-dep").await.unwrap().is_none().then_some(())
    })
    .await;

    // Foreground: the owner waits, with the foregroundDeletion finalizer, for its blocking
    // dependent; a finalizer on the dependent holds both.
    let fg = api.create(&PostParams::default(), &owner("fg")).await.unwrap();
    let mut dep = owned_configmap("fg-dep", &fg, true);
    dep.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &dep).await.unwrap();
    let pending = api.delete("fg", &DeleteParams::foreground()).await.unwrap().left().expect("owner stays");
    assert!(pending.finalizers().contains(&"foregroundDeletion".to_string()));
    common::wait_until("fg-dep marked for deletion", WAIT, || async {
        api.get("fg-dep").await.unwrap().metadata.deletion_timestamp.map(|_| ())
    })
    .await;
    assert!(api.get_opt("fg").await.unwrap().is_some(), "the owner waits for its blocking dependent");
    let clear = json!({"metadata": {"finalizers": null}});
    api.patch("fg-dep", &Default::default(), &kube::api::Patch::Merge(&clear)).await.unwrap();
    common::wait_until("fg gone after its dependent", WAIT, || async {
        api.get_opt("fg").await.unwrap().is_none().then_some(())
    })
    .await;

    // Orphan: the dependent stays and loses its owner reference.
    let or = api.create(&PostParams::default(), &owner("or")).await.unwrap();
    api.create(&PostParams::default(), &owned_configmap("or-dep", &or, true)).await.unwrap();
    api.delete("or", &DeleteParams::orphan()).await.unwrap();
    common::wait_until("or gone", WAIT, || async {
        api.get_opt("or").await.unwrap().is_none().then_some(())
    })
    .await;
    let orphan = api.get("or-dep").await.unwrap();
    assert!(orphan.owner_references().is_empty());

    // A dependent with a second, live owner only loses the dead reference.
    let a = api.create(&PostParams::default(), &owner("a")).await.unwrap();
    let b = api.create(&PostParams::default(), &owner("b")).await.unwrap();
    let mut two = owned_configmap("two-owners", &a, false);
    let mut rb = b.controller_owner_ref(&()).unwrap();
    rb.controller = Some(false);
    two.metadata.owner_references.as_mut().unwrap().push(rb);
    api.create(&PostParams::default(), &two).await.unwrap();
    api.delete("a", &DeleteParams::background()).await.unwrap();
    common::wait_until("the dead owner reference dropped", WAIT, || async {
        let o = api.get("two-owners").await.unwrap();
        (o.owner_references().len() == 1 && o.owner_references()[0].name == "b").then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_job_deleted_without_a_policy_orphans_its_pods_with_a_warning() {
    let sim = common::api_only().await;
    let client = common::client(&sim);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}
    }))
    .unwrap();
    let job = jobs.create(&PostParams::default(), &job).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut p = pod("j-pod", json!({}), "Never");
    p.metadata.owner_references = Some(vec![job.controller_owner_ref(&()).unwrap()]);
    pods.create(&PostParams::default(), &p).await.unwrap();

    let (status, headers, _) =
        common::raw(&client, "DELETE", "/apis/batch/v1/namespaces/default/jobs/j", None, vec![]).await;
    assert_eq!(status, 200);
    let warning = headers.get("warning").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    assert!(warning.contains("child pods are preserved by default"), "{warning:?}");
    common::wait_until("the job gone", WAIT, || async {
        jobs.get_opt("j").await.unwrap().is_none().then_some(())
    })
    .await;
    let orphan = pods.get("j-pod").await.unwrap();
    assert!(orphan.owner_references().is_empty());
}

#[tokio::test]
async fn a_job_deleted_in_the_foreground_waits_for_its_pods() {
    let sim = common::sim().await;
    let client = common::client(&sim);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "fg"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}
    }))
    .unwrap();
    let job = jobs.create(&PostParams::default(), &job).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut p = pod("fg-pod", json!({"sim.batchfleet.io/run": "forever"}), "Never");
    p.metadata.owner_references = Some(vec![job.controller_owner_ref(&()).unwrap()]);
    pods.create(&PostParams::default(), &p).await.unwrap();
    phase(&pods, "fg-pod", "Running").await;
    let dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Foreground), ..Default::default() };
    jobs.delete("fg", &dp).await.unwrap();
    common::wait_until("job and pod gone", WAIT, || async {
        (jobs.get_opt("fg").await.unwrap().is_none() && pods.get_opt("fg-pod").await.unwrap().is_none())
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn nodes_heartbeat_and_take_admin_faults() {
    let sim = common::start(batchfleet_sim::SimConfig {
        nodes: 2,
        node_heartbeat: Duration::from_millis(100),
        ..Default::default()
    })
    .await;
    let client = common::client(&sim);
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let first = leases.get("sim-node-0").await.unwrap().spec.unwrap().renew_time.unwrap();
    common::wait_until("a lease renewal", WAIT, || async {
        let now = leases.get("sim-node-0").await.unwrap().spec.unwrap().renew_time.unwrap();
        (now.0 > first.0).then_some(())
    })
    .await;

    let nodes: Api<Node> = Api::all(client.clone());
    let (status, _, body) =
        common::raw(&client, "POST", "/_sim/nodes/sim-node-1/not-ready", None, vec![]).await;
    assert_eq!(status, 200, "{body}");
    let n = nodes.get("sim-node-1").await.unwrap();
    let ready = n.status.unwrap().conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.status, "False");

    let (status, _, _) =
        common::raw(&client, "POST", "/_sim/nodes/sim-node-1/out-of-service", None, vec![]).await;
    assert_eq!(status, 200);
    let taints = nodes.get("sim-node-1").await.unwrap().spec.unwrap().taints.unwrap();
    assert!(taints.iter().any(|t| t.key == "node.kubernetes.io/out-of-service"), "{taints:?}");

    // New pods land only on the Ready node.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for i in 0..4 {
        pods.create(
            &PostParams::default(),
            &pod(&format!("n{i}"), json!({"sim.batchfleet.io/run": "forever"}), "Never"),
        )
        .await
        .unwrap();
    }
    for i in 0..4 {
        let p = phase(&pods, &format!("n{i}"), "Running").await;
        assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("sim-node-0"));
    }

    let (status, _, _) = common::raw(&client, "DELETE", "/_sim/nodes/sim-node-1", None, vec![]).await;
    assert_eq!(status, 200);
    assert!(nodes.get_opt("sim-node-1").await.unwrap().is_none());
    let (status, _, _) = common::raw(
        &client,
        "POST",
        "/_sim/nodes",
        Some("application/json"),
        br#"{"name":"sim-node-9"}"#.to_vec(),
    )
    .await;
    assert_eq!(status, 200);
    assert!(nodes.get_opt("sim-node-9").await.unwrap().is_some());
}

#[tokio::test]
async fn a_node_whose_lease_goes_stale_becomes_unknown() {
    let sim = common::start(batchfleet_sim::SimConfig {
        nodes: 2,
        node_heartbeat: Duration::from_millis(100),
        node_monitor_grace: Duration::from_millis(600),
        ..Default::default()
    })
    .await;
    let client = common::client(&sim);
    let (status, _, body) =
        common::raw(&client, "POST", "/_sim/nodes/sim-node-0/stop-heartbeat", None, vec![]).await;
    assert_eq!(status, 200, "{body}");
    let nodes: Api<Node> = Api::all(client);
    let ready = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone())
    };
    common::wait_until("sim-node-0 Unknown", WAIT, || async {
        let n = nodes.get("sim-node-0").await.unwrap();
        (ready(&n).as_deref() == Some("Unknown")).then_some(n)
    })
    .await;
    let n = nodes.get("sim-node-0").await.unwrap();
    assert!(n.spec.unwrap().taints.unwrap().iter().any(|t| t.key == "node.kubernetes.io/unreachable"));
    // The other node keeps heartbeating and stays Ready.
    assert_eq!(ready(&nodes.get("sim-node-1").await.unwrap()).as_deref(), Some("True"));
}

/// kube-apiserver's `--event-ttl`: an Event is deleted a TTL after its last write, never
/// sooner, and a write renews it; watchers see the deletion, and no request made it.
#[tokio::test]
async fn events_are_deleted_a_ttl_after_their_last_write() {
    use futures::{StreamExt, TryStreamExt};
    use k8s_openapi::api::core::v1::Event;
    use kube::api::{Patch, PatchParams, WatchEvent, WatchParams};

    const TTL: Duration = Duration::from_secs(1);
    let sim = common::start(batchfleet_sim::SimConfig {
        nodes: 0,
        kubelet: false,
        event_ttl: TTL,
        ..Default::default()
    })
    .await;
    let events: Api<Event> = Api::namespaced(common::client(&sim), "default");
    let event = |name: &str| -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Tested", "message": "m", "type": "Normal", "count": 1
        }))
        .unwrap()
    };
    let rv = events.list(&Default::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut watch = events.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    let created = tokio::time::Instant::now();
    events.create(&PostParams::default(), &event("once")).await.unwrap();
    events.create(&PostParams::default(), &event("renewed")).await.unwrap();
    tokio::time::sleep(TTL / 2).await;
    let renewed = tokio::time::Instant::now();
    events.patch("renewed", &PatchParams::default(), &Patch::Merge(json!({"count": 2}))).await.unwrap();

    let mut deleted = Vec::new();
    let deadline = created + TTL * 20;
    while deleted.len() < 2 {
        let next = tokio::time::timeout_at(deadline, watch.try_next()).await;
        match next.expect("both Events deleted within 20 TTLs").unwrap().expect("watch open") {
            WatchEvent::Deleted(e) => deleted.push((e.name_any(), tokio::time::Instant::now())),
            _ => continue,
        }
    }
    assert_eq!(deleted[0].0, "once");
    assert!(deleted[0].1 >= created + TTL, "deleted before its TTL");
    assert_eq!(deleted[1].0, "renewed");
    assert!(deleted[1].1 >= renewed + TTL, "the second write did not renew its lease");
    assert!(events.list(&Default::default()).await.unwrap().items.is_empty());
}
