//! PodGC's shell against the sim cluster: the passes delete what upstream deletes, orphans are
//! marked Failed before deletion, and nothing is deleted while another coordinator leads. Checked
//! from the cluster's objects and the sim's audit log.

use std::sync::Arc;
use std::time::Duration;

use batchfleet_coordinator::kube_client;
use batchfleet_coordinator::leader::{self, ElectionTiming};
use batchfleet_coordinator::podgc::controller::{self, PodGcConfig, PodGcMetrics};
use batchfleet_coordinator::store::CoordinationStore;
use batchfleet_coordinator::store::kubernetes::KubernetesStore;
use batchfleet_sim::audit::read_log;
use batchfleet_sim::testing::wait_until;
use batchfleet_sim::{SimCluster, SimConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;

struct Fixture {
    sim: SimCluster,
    audit: std::path::PathBuf,
    _dir: tempfile::TempDir,
    client: kube::Client,
}

async fn fixture() -> Fixture {
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
    let config = kube::Config::new(sim.url().parse().expect("url"));
    let client = kube::Client::try_from(config).expect("client");
    Fixture { sim, audit, _dir: dir, client }
}

/// The coordinator's own client, named in every request as the binary names it.
fn coordinator_client(f: &Fixture, id: &str) -> kube::Client {
    let config = kube::Config::new(f.sim.url().parse().expect("url"));
    kube_client::from_config(config, &kube_client::user_agent(id), kube_client::ClientLimits::UNLIMITED)
        .expect("client")
}

const TIMING: ElectionTiming = ElectionTiming {
    lease_duration: Duration::from_secs(3),
    renew_deadline: Duration::from_secs(2),
    retry_period: Duration::from_millis(200),
};

fn fast_gc(threshold: usize) -> PodGcConfig {
    PodGcConfig {
        terminated_pod_threshold: threshold,
        period: Duration::from_millis(200),
        quarantine: Duration::from_secs(1),
        concurrency: 4,
        ..PodGcConfig::default()
    }
}

/// Starts an election for `id` and PodGC under it; returns the metrics' registry and the stop.
fn start_podgc(f: &Fixture, id: &str, config: PodGcConfig) -> (prometheus::Registry, watch::Sender<bool>) {
    let (stop_tx, stop) = watch::channel(false);
    let client = coordinator_client(f, id);
    let store = Arc::new(KubernetesStore::new(client.clone(), "kube-system"));
    let (leadership, _election) = leader::start(store, id.into(), TIMING, stop.clone());
    let registry = prometheus::Registry::new();
    let metrics = PodGcMetrics::register(&registry).expect("metrics");
    tokio::spawn(controller::run(client, config, metrics, leadership, stop));
    (registry, stop_tx)
}

async fn create_pod(f: &Fixture, name: &str, node: &str, phase: &str) {
    let pods: Api<Pod> = Api::namespaced(f.client.clone(), "default");
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
    if !node.is_empty() {
        spec["nodeName"] = json!(node);
    }
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("pod");
    pods.create(&PostParams::default(), &pod).await.expect("create pod");
    if phase != "Pending" {
        let patch = json!({"status": {"phase": phase}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("status");
    }
}

async fn pod_names(f: &Fixture) -> Vec<String> {
    names_in(f, "default").await
}

fn counter(registry: &prometheus::Registry, name: &str, reason: &str) -> u64 {
    registry
        .gather()
        .iter()
        .filter(|m| m.name() == name)
        .flat_map(|m| m.get_metric().iter())
        .filter(|m| m.get_label().iter().any(|l| l.name() == "reason" && l.value() == reason))
        .map(|m| m.get_counter().value() as u64)
        .sum()
}

/// upstream TestGCTerminated's first case, through the API: threshold 1 keeps the newest
/// terminated pod (ties broken by name) and never touches a running one.
#[tokio::test]
async fn terminated_pods_over_the_threshold_are_deleted_oldest_first() {
    let f = fixture().await;
    create_pod(&f, "a", "sim-node-0", "Failed").await;
    create_pod(&f, "b", "sim-node-0", "Succeeded").await;
    create_pod(&f, "c", "sim-node-0", "Failed").await;
    create_pod(&f, "d", "sim-node-0", "Running").await;
    let (registry, _stop) = start_podgc(&f, "coordinator-a", fast_gc(1));
    wait_until("a and b to be collected", Duration::from_secs(20), || async {
        (pod_names(&f).await == ["c", "d"]).then_some(())
    })
    .await;
    assert_eq!(counter(&registry, "pod_gc_collector_force_delete_pods_total", "terminated"), 2);
    assert_eq!(counter(&registry, "pod_gc_collector_force_delete_pod_errors_total", "terminated"), 0);
    let ours =
        |e: &&batchfleet_sim::audit::AuditEvent| e.user_agent == kube_client::user_agent("coordinator-a");
    let pod_ref =
        |e: &batchfleet_sim::audit::AuditEvent| e.object_ref.clone().filter(|o| o.resource == "pods");
    let deletes = |events: &[batchfleet_sim::audit::AuditEvent]| -> Vec<String> {
        events
            .iter()
            .filter(ours)
            .filter(|e| e.verb == "delete")
            .filter_map(|e| pod_ref(e).map(|o| o.name))
            .collect()
    };
    // The sim's audit log is written by a thread of its own, after the response: on a loaded
    // machine the pods are gone before their DELETEs are on disk (CI read none, 2026-11-28).
    let events = wait_until("the DELETEs in the audit log", Duration::from_secs(20), || async {
        read_log(&f.audit).ok().filter(|events| deletes(events).len() >= 2)
    })
    .await;
    let deleted = deletes(&events);
    assert_eq!(deleted.len(), 2, "one DELETE per collected pod: {deleted:?}");
    assert!(
        !events.iter().filter(ours).any(|e| e.verb == "patch" && pod_ref(e).is_some()),
        "terminal pods are deleted without a status patch"
    );
    drop(f.sim);
}

/// upstream TestGCOrphaned: pods bound to a node that does not exist are marked Failed with
/// DisruptionTarget (only those not already terminal), then deleted — after the quarantine.
#[tokio::test]
async fn orphans_are_marked_failed_then_deleted_after_the_quarantine() {
    let f = fixture().await;
    create_pod(&f, "running-orphan", "ghost-node", "Running").await;
    // upstream TestGCInspectingPatchedPodBeforeDeletion: the patch keeps the pod's other conditions.
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    Api::<Pod>::namespaced(f.client.clone(), "default")
        .patch_status("running-orphan", &PatchParams::default(), &Patch::Strategic(&ready))
        .await
        .expect("ready");
    create_pod(&f, "done-orphan", "ghost-node", "Succeeded").await;
    create_pod(&f, "healthy", "sim-node-0", "Running").await;
    let pods: Api<Pod> = Api::namespaced(f.client.clone(), "default");
    let mut seen = Box::pin(pods.watch(&Default::default(), "0").await.expect("watch"));
    let started = jiff::Timestamp::now();
    let (registry, _stop) =
        start_podgc(&f, "coordinator-a", PodGcConfig { terminated_pod_threshold: 0, ..fast_gc(0) });

    // The orphan is patched to Failed with the condition before it goes.
    let mut marked = None;
    while let Ok(Some(event)) =
        tokio::time::timeout(Duration::from_secs(20), futures::TryStreamExt::try_next(&mut seen))
            .await
            .expect("in time")
    {
        if let kube::core::WatchEvent::Modified(p) = event
            && p.metadata.name.as_deref() == Some("running-orphan")
        {
            marked = Some(p);
            break;
        }
    }
    let marked = marked.expect("the orphan was patched");
    let status = marked.status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    let conditions = status.conditions.unwrap_or_default();
    assert!(conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"), "{conditions:?}");
    let condition = conditions.into_iter().find(|c| c.type_ == "DisruptionTarget").expect("condition");
    assert_eq!((condition.status.as_str(), condition.reason.as_deref()), ("True", Some("DeletionByPodGC")));
    assert_eq!(condition.message.as_deref(), Some("PodGC: node no longer exists"));

    wait_until("both orphans to go", Duration::from_secs(20), || async {
        (pod_names(&f).await == ["healthy"]).then_some(())
    })
    .await;
    assert_eq!(counter(&registry, "pod_gc_collector_force_delete_pods_total", "orphaned"), 2);
    // The audit log's own thread may not have written the DELETEs yet (see above).
    let events = wait_until("the orphans' DELETEs in the audit log", Duration::from_secs(20), || async {
        let events = read_log(&f.audit).ok()?;
        let ours = |e: &&batchfleet_sim::audit::AuditEvent| {
            e.user_agent == kube_client::user_agent("coordinator-a") && e.verb == "delete"
        };
        (events.iter().filter(ours).count() >= 2).then_some(events)
    })
    .await;
    let ours: Vec<_> =
        events.iter().filter(|e| e.user_agent == kube_client::user_agent("coordinator-a")).collect();
    let patched: Vec<&str> = ours
        .iter()
        .filter(|e| e.verb == "patch")
        .filter_map(|e| e.object_ref.as_ref().filter(|o| o.subresource == "status").map(|o| o.name.as_str()))
        .collect();
    assert_eq!(patched, ["running-orphan"], "only the pod that was not terminal is marked Failed");
    let first_delete = ours.iter().find(|e| e.verb == "delete").expect("deletes");
    let deleted_at: jiff::Timestamp = first_delete.request_received_timestamp.parse().expect("time");
    assert!(
        deleted_at.duration_since(started) >= jiff::SignedDuration::from_secs(1),
        "not before the quarantine"
    );
    let node_gets = events
        .into_iter()
        .filter(|e| {
            e.verb == "get"
                && e.object_ref.as_ref().is_some_and(|o| o.resource == "nodes" && o.name == "ghost-node")
        })
        .count();
    assert!(node_gets >= 1, "the missing node is looked up before its pods go");
}

/// Only the leader collects: while another coordinator holds the lease nothing is deleted, and
/// once it resigns this one takes over and finishes the work.
#[tokio::test]
async fn nothing_is_deleted_until_this_coordinator_leads() {
    let f = fixture().await;
    let other = KubernetesStore::new(f.client.clone(), "kube-system");
    assert!(
        other
            .campaign(&"coordinator-other".into(), Duration::from_secs(60))
            .await
            .expect("campaign")
            .is_leader
    );
    create_pod(&f, "a", "sim-node-0", "Failed").await;
    create_pod(&f, "b", "sim-node-0", "Failed").await;
    let (_registry, _stop) = start_podgc(&f, "coordinator-a", fast_gc(1));

    // Several periods pass with the other coordinator leading: the pods stay.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while tokio::time::Instant::now() < deadline {
        assert_eq!(pod_names(&f).await, ["a", "b"], "a standby deleted pods");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    other.resign("coordinator-other").await.expect("resign");
    wait_until("the new leader to collect", Duration::from_secs(20), || async {
        (pod_names(&f).await == ["b"]).then_some(())
    })
    .await;
}

/// upstream TestGCUnscheduledTerminating: a pod deleted before it was ever bound is marked Failed
/// and force-deleted; a finalizer keeps it (upstream keeps retrying such pods; k/k#141190 is open).
#[tokio::test]
async fn unscheduled_terminating_pods_are_marked_failed_and_force_deleted() {
    let f = fixture().await;
    let pods: Api<Pod> = Api::namespaced(f.client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "never-bound", "finalizers": ["example.com/hold"]},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod).await.expect("create");
    pods.delete("never-bound", &Default::default()).await.expect("delete");
    let (registry, _stop) = start_podgc(&f, "coordinator-a", fast_gc(0));
    wait_until("the pod to be marked Failed", Duration::from_secs(20), || async {
        let p = pods.get_opt("never-bound").await.ok()??;
        (p.status?.phase.as_deref() == Some("Failed")).then_some(())
    })
    .await;
    wait_until("a force deletion", Duration::from_secs(20), || async {
        let events = read_log(&f.audit).ok()?;
        events
            .iter()
            .any(|e| {
                e.user_agent == kube_client::user_agent("coordinator-a")
                    && e.verb == "delete"
                    && e.object_ref.as_ref().is_some_and(|o| o.name == "never-bound")
            })
            .then_some(())
    })
    .await;
    assert!(counter(&registry, "pod_gc_collector_force_delete_pods_total", "unscheduled") >= 1);
    assert!(pods.get_opt("never-bound").await.expect("get").is_some(), "the finalizer still holds it");
}

async fn create_pod_in(f: &Fixture, namespace: &str, name: &str, phase: &str, finalizers: &[&str]) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(f.client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": namespace}})).expect("namespace");
    let _ = namespaces.create(&PostParams::default(), &ns).await;
    let pods: Api<Pod> = Api::namespaced(f.client.clone(), namespace);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "finalizers": finalizers},
        "spec": {"nodeName": "sim-node-0", "containers": [{"name": "c", "image": "busybox"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod).await.expect("create pod");
    let patch = json!({"status": {"phase": phase}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("status");
}

async fn names_in(f: &Fixture, namespace: &str) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(f.client.clone(), namespace);
    let mut names: Vec<String> = pods
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

fn gauge(registry: &prometheus::Registry, name: &str) -> i64 {
    registry
        .gather()
        .iter()
        .filter(|m| m.name() == name)
        .flat_map(|m| m.get_metric().iter())
        .map(|m| m.get_gauge().value() as i64)
        .sum()
}

fn passes(registry: &prometheus::Registry) -> u64 {
    registry
        .gather()
        .iter()
        .filter(|m| m.name() == "pod_gc_collector_pass_duration_seconds")
        .flat_map(|m| m.get_metric().iter())
        .map(|m| m.get_histogram().get_sample_count())
        .sum()
}

/// Waits until `more` further passes have run.
async fn wait_passes(registry: &prometheus::Registry, more: u64) {
    let until = passes(registry) + more;
    wait_until("more PodGC passes", Duration::from_secs(20), || async {
        (passes(registry) >= until).then_some(())
    })
    .await;
}

fn deletes_of(f: &Fixture, id: &str, name: &str) -> usize {
    read_log(&f.audit)
        .expect("audit log")
        .iter()
        .filter(|e| e.user_agent == kube_client::user_agent(id) && e.verb == "delete")
        .filter(|e| e.object_ref.as_ref().is_some_and(|o| o.resource == "pods" && o.name == name))
        .count()
}

/// k/k#141190: terminated pods already force-deleted (grace 0) and held by a finalizer. Upstream
/// deletes the oldest again every pass and counts both, so a newer pod goes in their place; with
/// the skip they are neither deleted again nor counted, and the backlog gauge shows them.
#[tokio::test]
async fn finalizer_held_pods_are_not_deleted_again_nor_counted_with_the_skip() {
    for skip in [false, true] {
        let f = fixture().await;
        let pods: Api<Pod> = Api::namespaced(f.client.clone(), "default");
        let force = kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
        create_pod_in(&f, "default", "a-held", "Succeeded", &["example.com/hold"]).await;
        pods.delete("a-held", &force).await.expect("force delete");
        create_pod_in(&f, "default", "b", "Succeeded", &[]).await;
        create_pod_in(&f, "default", "c", "Succeeded", &[]).await;
        create_pod_in(&f, "default", "z-held", "Failed", &["example.com/hold"]).await;
        pods.delete("z-held", &force).await.expect("force delete");
        let config = PodGcConfig { skip_finalizer_held: skip, ..fast_gc(2) };
        let (registry, _stop) = start_podgc(&f, "coordinator-a", config);
        wait_until("the held pods in the backlog", Duration::from_secs(20), || async {
            (gauge(&registry, "pod_gc_collector_finalizer_held_pods") == 2).then_some(())
        })
        .await;
        wait_passes(&registry, 5).await;
        let repeated = deletes_of(&f, "coordinator-a", "a-held");
        if skip {
            assert_eq!(repeated, 0, "left to its finalizer");
            assert_eq!(names_in(&f, "default").await, ["a-held", "b", "c", "z-held"], "not counted");
        } else {
            assert!(repeated >= 3, "upstream deletes it again every pass: {repeated}");
            assert_eq!(names_in(&f, "default").await, ["a-held", "c", "z-held"], "and counts them: b went");
        }
    }
}

/// Per-namespace caps from the flag and the ConfigMap: each namespace keeps its newest; a bad
/// value is ignored (the flag's cap applies) and reported once by a Warning Event on the ConfigMap.
#[tokio::test]
async fn namespace_caps_keep_each_namespaces_newest_and_a_bad_cap_is_reported_once() {
    let f = fixture().await;
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(f.client.clone(), "kube-system");
    let caps = serde_json::from_value(json!({
        "metadata": {"name": "podgc-caps"},
        "data": {"team-a": "1", "team-b": "lots"}
    }))
    .expect("configmap");
    config_maps.create(&PostParams::default(), &caps).await.expect("configmap");
    for ns in ["team-a", "team-b", "team-c"] {
        for name in ["p1", "p2", "p3"] {
            create_pod_in(&f, ns, name, "Failed", &[]).await;
        }
    }
    let config = PodGcConfig {
        namespace_threshold: 2,
        namespace_caps: Some("kube-system/podgc-caps".parse().expect("ref")),
        ..fast_gc(0)
    };
    let (registry, _stop) = start_podgc(&f, "coordinator-a", config);
    wait_until("each namespace down to its cap", Duration::from_secs(20), || async {
        (names_in(&f, "team-a").await == ["p3"]
            && names_in(&f, "team-b").await == ["p2", "p3"]
            && names_in(&f, "team-c").await == ["p2", "p3"])
        .then_some(())
    })
    .await;
    wait_passes(&registry, 5).await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(f.client.clone(), "kube-system");
    let warnings: Vec<_> = events
        .list(&Default::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(controller::INVALID_CAP_REASON))
        .collect();
    assert_eq!(warnings.len(), 1, "one Event, not one per pass: {warnings:?}");
    assert_eq!(warnings[0].involved_object.name.as_deref(), Some("podgc-caps"));
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
    assert!(warnings[0].message.as_deref().unwrap_or("").contains("\"lots\""), "{:?}", warnings[0].message);
}
