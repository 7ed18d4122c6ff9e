//! Scheduling rules and node lifecycle as users drive them with kubectl 1.37 and kube-rs:
//! cordon, taints (NoSchedule, NoExecute with tolerationSeconds), nodeSelector and affinity,
//! resource requests, NotReady nodes, and the scheduler's events.

mod common;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod, PodCondition};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

fn pod(name: &str, spec: Value) -> Pod {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "main", "image": "busybox"}]);
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"sim.batchfleet.io/run": "forever"}},
        "spec": spec,
    }))
    .unwrap()
}

fn condition(p: &Pod, kind: &str) -> Option<PodCondition> {
    p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == kind).cloned()
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref()?.node_name.clone().filter(|n| !n.is_empty())
}

/// Waits until the pod is reported unschedulable and returns the condition's message.
async fn unschedulable(api: &Api<Pod>, name: &str) -> String {
    let c = common::wait_until(&format!("pod {name} to be Unschedulable"), WAIT, || async {
        let p = api.get(name).await.unwrap();
        condition(&p, "PodScheduled")
            .filter(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
    })
    .await;
    let p = api.get(name).await.unwrap();
    assert_eq!(node_of(&p), None, "an unschedulable pod stays unbound");
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Pending"));
    c.message.unwrap_or_default()
}

async fn bound(api: &Api<Pod>, name: &str) -> String {
    common::wait_until(&format!("pod {name} to be bound"), WAIT, || async {
        node_of(&api.get(name).await.unwrap())
    })
    .await
}

async fn running(api: &Api<Pod>, name: &str) -> Pod {
    common::wait_until(&format!("pod {name} to run"), WAIT, || async {
        api.get(name).await.unwrap().status.filter(|s| s.phase.as_deref() == Some("Running")).map(|_| ())
    })
    .await;
    api.get(name).await.unwrap()
}

async fn events_for(sim: &batchfleet_sim::SimCluster, pod: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(common::client(sim), "default");
    let lp = ListParams::default().fields(&format!("involvedObject.name={pod}"));
    events.list(&lp).await.unwrap().items
}

#[tokio::test]
async fn cordon_keeps_pods_pending_and_uncordon_schedules_them() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let pods: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    let nodes: Api<Node> = Api::all(common::client(&sim));
    for n in ["sim-node-0", "sim-node-1"] {
        assert!(k.ok(&["cordon", n]).await.contains(&format!("node/{n} cordoned")));
    }
    // The node lifecycle controller taints cordoned nodes.
    common::wait_until("the unschedulable taint", WAIT, || async {
        let n = nodes.get("sim-node-0").await.unwrap();
        let taints = n.spec?.taints?;
        taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unschedulable" && t.effect == "NoSchedule")
            .then_some(())
    })
    .await;
    assert!(k.ok(&["get", "nodes"]).await.contains("Ready,SchedulingDisabled"));

    pods.create(&PostParams::default(), &pod("waits", json!({}))).await.unwrap();
    let message = unschedulable(&pods, "waits").await;
    assert_eq!(
        message,
        "0/2 nodes are available: 2 node(s) were unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );

    assert!(k.ok(&["uncordon", "sim-node-1"]).await.contains("node/sim-node-1 uncordoned"));
    assert_eq!(bound(&pods, "waits").await, "sim-node-1");
    let p = running(&pods, "waits").await;
    assert_eq!(condition(&p, "PodScheduled").unwrap().status, "True");
    common::wait_until("the taint to go", WAIT, || async {
        let n = nodes.get("sim-node-1").await.unwrap();
        n.spec?.taints.is_none_or(|t| t.is_empty()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn unmatched_node_selector_shows_failed_scheduling_in_events_and_describe() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let pods: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    pods.create(&PostParams::default(), &pod("picky", json!({"nodeSelector": {"disk": "ssd"}})))
        .await
        .unwrap();
    let message = unschedulable(&pods, "picky").await;
    assert_eq!(
        message,
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    let events = common::wait_until("a FailedScheduling event", WAIT, || async {
        let out = k.ok(&["events", "--for", "pod/picky"]).await;
        out.contains("FailedScheduling").then_some(out)
    })
    .await;
    assert!(
        events.contains("Warning") && events.contains("didn't match Pod's node affinity/selector"),
        "{events}"
    );
    let describe = k.ok(&["describe", "pod", "picky"]).await;
    assert!(describe.contains("FailedScheduling") && describe.contains("default-scheduler"), "{describe}");

    // A node change that does not help is retried after the backoff, and the repeat joins
    // the event's series rather than making a new event.
    k.ok(&["label", "node", "sim-node-1", "unrelated=1"]).await;
    let series = common::wait_until("the FailedScheduling series to count 2", WAIT, || async {
        let ev = events_for(&sim, "picky").await;
        let failed: Vec<Event> =
            ev.into_iter().filter(|e| e.reason.as_deref() == Some("FailedScheduling")).collect();
        let count = failed.first()?.series.as_ref()?.count?;
        (failed.len() == 1 && count >= 2).then_some(count)
    })
    .await;
    assert_eq!(series, 2);

    // A label on one node makes it fit; the scheduler retries on the node change.
    k.ok(&["label", "node", "sim-node-0", "disk=ssd"]).await;
    assert_eq!(bound(&pods, "picky").await, "sim-node-0");
    let scheduled = common::wait_until("a Scheduled event", WAIT, || async {
        let ev = events_for(&sim, "picky").await;
        ev.into_iter().find(|e| e.reason.as_deref() == Some("Scheduled"))
    })
    .await;
    assert_eq!(scheduled.message.as_deref(), Some("Successfully assigned default/picky to sim-node-0"));
    assert_eq!(scheduled.reporting_component.as_deref(), Some("default-scheduler"));
    let failed = events_for(&sim, "picky").await;
    let failed = failed.iter().find(|e| e.reason.as_deref() == Some("FailedScheduling")).unwrap();
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
}

#[tokio::test]
async fn required_node_affinity_and_resource_requests_pick_the_node() {
    let sim = common::sim().await;
    let pods: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    let by_name = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["sim-node-1"]}]}]}}}});
    pods.create(&PostParams::default(), &pod("pinned", by_name)).await.unwrap();
    assert_eq!(bound(&pods, "pinned").await, "sim-node-1");

    let not_there = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn",
                                                      "values": ["sim-node-0", "sim-node-1"]}]}]}}}});
    pods.create(&PostParams::default(), &pod("nowhere", not_there)).await.unwrap();
    assert!(
        unschedulable(&pods, "nowhere").await.contains("2 node(s) didn't match Pod's node affinity/selector")
    );

    // Each node has 32 CPUs: a 20-CPU pod fits once per node, a third does not.
    let big = |name: &str| {
        let mut p = pod(name, json!({}));
        let c = &mut p.spec.as_mut().unwrap().containers[0];
        c.resources = Some(serde_json::from_value(json!({"requests": {"cpu": "20"}})).unwrap());
        p
    };
    for name in ["big-0", "big-1"] {
        pods.create(&PostParams::default(), &big(name)).await.unwrap();
        bound(&pods, name).await;
    }
    assert_ne!(bound(&pods, "big-0").await, bound(&pods, "big-1").await);
    pods.create(&PostParams::default(), &big("big-2")).await.unwrap();
    assert_eq!(
        unschedulable(&pods, "big-2").await,
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    );
    // Deleting one frees its node.
    let freed = bound(&pods, "big-0").await;
    pods.delete("big-0", &Default::default()).await.unwrap();
    assert_eq!(bound(&pods, "big-2").await, freed);
}

#[tokio::test]
async fn kubectl_taint_no_schedule_then_no_execute_evicts_with_a_disruption_target() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let pods: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    let pinned = |name: &str, node: &str, extra: Value| {
        let mut spec = json!({"nodeSelector": {"kubernetes.io/hostname": node}});
        if let Some(t) = extra.get("tolerations") {
            spec["tolerations"] = t.clone();
        }
        pod(name, spec)
    };
    pods.create(&PostParams::default(), &pinned("victim", "sim-node-0", json!({}))).await.unwrap();
    let tolerating = json!({"tolerations": [{"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1}]});
    pods.create(&PostParams::default(), &pinned("patient", "sim-node-0", tolerating)).await.unwrap();
    let forever = json!({"tolerations": [{"key": "maint", "operator": "Exists"}]});
    pods.create(&PostParams::default(), &pinned("stays", "sim-node-0", forever)).await.unwrap();
    for name in ["victim", "patient", "stays"] {
        running(&pods, name).await;
    }

    assert!(
        k.ok(&["taint", "nodes", "sim-node-1", "maint=now:NoSchedule"])
            .await
            .contains("node/sim-node-1 tainted")
    );
    pods.create(&PostParams::default(), &pinned("late", "sim-node-1", json!({}))).await.unwrap();
    assert!(unschedulable(&pods, "late").await.contains("1 node(s) had untolerated taint(s)"));

    // Pods stay Terminating, so the condition the controller set can be read back.
    let client = common::client(&sim);
    let body = br#"{"enabled":false}"#.to_vec();
    common::raw(&client, "PUT", "/_sim/kubelet/confirm-deletions", Some("application/json"), body).await;
    k.ok(&["taint", "nodes", "sim-node-0", "maint=now:NoExecute"]).await;
    let evicted = common::wait_until("the victim to be evicted", WAIT, || async {
        let p = pods.get_opt("victim").await.unwrap()?;
        p.metadata.deletion_timestamp.is_some().then_some(p)
    })
    .await;
    let target = condition(&evicted, "DisruptionTarget").expect("DisruptionTarget");
    assert_eq!(
        (target.status.as_str(), target.reason.as_deref(), target.message.as_deref()),
        ("True", Some("DeletionByTaintManager"), Some("Taint manager: deleting due to NoExecute taint"))
    );
    // tolerationSeconds: 1 runs out a second later.
    common::wait_until("the patient pod to be evicted", WAIT, || async {
        let p = pods.get_opt("patient").await.unwrap();
        p.is_none_or(|p| p.metadata.deletion_timestamp.is_some()).then_some(())
    })
    .await;
    let events = events_for(&sim, "victim").await;
    let eviction =
        events.iter().find(|e| e.reason.as_deref() == Some("TaintManagerEviction")).expect("event");
    assert_eq!(eviction.message.as_deref(), Some("Marking for deletion Pod default/victim"));
    assert_eq!(
        eviction.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("taint-eviction-controller")
    );

    let stays = pods.get("stays").await.unwrap();
    assert!(stays.metadata.deletion_timestamp.is_none(), "a pod tolerating the taint forever stays");
    assert!(k.ok(&["taint", "nodes", "sim-node-1", "maint:NoSchedule-"]).await.contains("untainted"));
    assert_eq!(bound(&pods, "late").await, "sim-node-1");
}

#[tokio::test]
async fn a_not_ready_node_is_tainted_and_its_pods_are_not_ready() {
    let sim = common::sim().await;
    let client = common::client(&sim);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let nodes: Api<Node> = Api::all(client.clone());
    // The DefaultTolerationSeconds admission adds 300s tolerations; a shorter one wins.
    let short = json!({"nodeSelector": {"kubernetes.io/hostname": "sim-node-1"},
                       "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                        "effect": "NoExecute", "tolerationSeconds": 1}]});
    pods.create(&PostParams::default(), &pod("short", short)).await.unwrap();
    let long = json!({"nodeSelector": {"kubernetes.io/hostname": "sim-node-1"}});
    pods.create(&PostParams::default(), &pod("long", long)).await.unwrap();
    let p = running(&pods, "long").await;
    let tolerations = p.spec.unwrap().tolerations.unwrap();
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        assert!(
            tolerations.iter().any(|t| t.key.as_deref() == Some(key) && t.toleration_seconds == Some(300)),
            "{tolerations:?}"
        );
    }
    running(&pods, "short").await;
    common::wait_until("long to be Ready", WAIT, || async {
        condition(&pods.get("long").await.unwrap(), "Ready").filter(|c| c.status == "True")
    })
    .await;

    let (status, _, body) =
        common::raw(&client, "POST", "/_sim/nodes/sim-node-1/not-ready", None, vec![]).await;
    assert_eq!(status, 200, "{body}");
    common::wait_until("the not-ready taints", WAIT, || async {
        let taints = nodes.get("sim-node-1").await.unwrap().spec?.taints?;
        let has = |e: &str| taints.iter().any(|t| t.key == "node.kubernetes.io/not-ready" && t.effect == e);
        (has("NoSchedule") && has("NoExecute")).then_some(())
    })
    .await;
    common::wait_until("long to be not Ready", WAIT, || async {
        condition(&pods.get("long").await.unwrap(), "Ready").filter(|c| c.status == "False")
    })
    .await;
    common::wait_until("short to be evicted after 1s", WAIT, || async {
        let p = pods.get_opt("short").await.unwrap();
        p.is_none_or(|p| p.metadata.deletion_timestamp.is_some()).then_some(())
    })
    .await;
    let long = pods.get("long").await.unwrap();
    assert!(long.metadata.deletion_timestamp.is_none(), "300s have not passed");
    // New pods avoid the NotReady node.
    pods.create(&PostParams::default(), &pod("new", json!({}))).await.unwrap();
    assert_eq!(bound(&pods, "new").await, "sim-node-0");

    common::raw(&client, "POST", "/_sim/nodes/sim-node-1/ready", None, vec![]).await;
    common::wait_until("long to be Ready again", WAIT, || async {
        condition(&pods.get("long").await.unwrap(), "Ready").filter(|c| c.status == "True")
    })
    .await;
    common::wait_until("the taints to go", WAIT, || async {
        nodes.get("sim-node-1").await.unwrap().spec?.taints.is_none_or(|t| t.is_empty()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn nodes_have_distinct_internal_ips_that_pods_report_as_host_ip() {
    let sim = common::sim().await;
    let client = common::client(&sim);
    let nodes: Api<Node> = Api::all(client.clone());
    let mut ips = Vec::new();
    for n in nodes.list(&ListParams::default()).await.unwrap().items {
        let addresses = n.status.unwrap().addresses.unwrap();
        let ip = addresses.iter().find(|a| a.type_ == "InternalIP").unwrap().address.clone();
        assert!(
            addresses.iter().any(|a| a.type_ == "Hostname" && Some(&a.address) == n.metadata.name.as_ref())
        );
        ips.push((n.metadata.name.unwrap(), ip));
    }
    assert_eq!(ips.len(), 2);
    assert_ne!(ips[0].1, ips[1].1, "{ips:?}");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(
        &PostParams::default(),
        &pod("where", json!({"nodeSelector": {"kubernetes.io/hostname": "sim-node-1"}})),
    )
    .await
    .unwrap();
    let p = running(&pods, "where").await;
    let want = &ips.iter().find(|(n, _)| n == "sim-node-1").unwrap().1;
    assert_eq!(p.status.unwrap().host_ip.as_ref(), Some(want));
}
