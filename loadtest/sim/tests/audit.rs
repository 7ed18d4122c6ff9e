//! The audit log as its readers use it: who wrote what, and when, from the server's side.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use batchfleet_sim::SimConfig;
use batchfleet_sim::audit::{AuditEvent, Stage, read_log};
use common::wait_until;

async fn audited_sim(dir: &Path) -> (batchfleet_sim::SimCluster, PathBuf) {
    let path = dir.join("logs/audit.log");
    let sim = common::start(SimConfig {
        nodes: 0,
        kubelet: false,
        bookmark_interval: Duration::from_secs(1),
        audit_log: Some(path.clone()),
        ..SimConfig::default()
    })
    .await;
    (sim, path)
}

/// Sends one request with a User-Agent of its own; returns the status code.
async fn send(
    client: &kube::Client,
    agent: &str,
    method: &str,
    uri: &str,
    body: Option<serde_json::Value>,
) -> u16 {
    let mut req = http::Request::builder().method(method).uri(uri).header(http::header::USER_AGENT, agent);
    let mut bytes = Vec::new();
    if let Some(body) = body {
        let content_type =
            if method == "PATCH" { "application/merge-patch+json" } else { "application/json" };
        req = req.header(http::header::CONTENT_TYPE, content_type);
        bytes = serde_json::to_vec(&body).expect("body");
    }
    let resp =
        client.send(req.body(kube::client::Body::from(bytes)).expect("request")).await.expect("response");
    let status = resp.status().as_u16();
    let _ = http_body_util::BodyExt::collect(resp.into_body()).await;
    status
}

async fn events_matching(
    path: &Path,
    what: &str,
    want: usize,
    keep: impl Fn(&AuditEvent) -> bool,
) -> Vec<AuditEvent> {
    wait_until(what, Duration::from_secs(10), || {
        let events: Vec<AuditEvent> = read_log(path).unwrap_or_default().into_iter().filter(&keep).collect();
        async move { (events.len() >= want).then_some(events) }
    })
    .await
}

#[tokio::test]
async fn every_request_is_one_event_with_who_what_and_when() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sim, path) = audited_sim(dir.path()).await;
    let client = common::client(&sim);
    let agent = "fleet-worker/0.1.0 (w-audit)";
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "audit-a"}});
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
    let cms = "/api/v1/namespaces/audit-a/configmaps";
    let steps = [
        ("POST", "/api/v1/namespaces".to_string(), Some(ns), 201),
        ("POST", cms.to_string(), Some(cm), 201),
        ("PATCH", format!("{cms}/c"), Some(serde_json::json!({"data": {"k": "w"}})), 200),
        ("GET", format!("{cms}/c"), None, 200),
        ("GET", format!("{cms}?labelSelector=a%3Db"), None, 200),
        ("GET", format!("{cms}/missing"), None, 404),
        ("DELETE", format!("{cms}/c"), None, 200),
        ("GET", "/version".to_string(), None, 200),
    ];
    for (method, uri, body, code) in &steps {
        assert_eq!(send(&client, agent, method, uri, body.clone()).await, *code, "{method} {uri}");
    }

    let events =
        events_matching(&path, "the eight requests in the log", steps.len(), |e| e.user_agent == agent).await;
    assert_eq!(events.len(), steps.len(), "one event per request: {events:#?}");
    let verbs: Vec<&str> = events.iter().map(|e| e.verb.as_str()).collect();
    assert_eq!(verbs, ["create", "create", "patch", "get", "list", "get", "delete", "get"]);
    let codes: Vec<u16> = events.iter().map(|e| e.response_status.as_ref().expect("status").code).collect();
    assert_eq!(codes, steps.iter().map(|s| s.3).collect::<Vec<_>>());
    for (event, (_, uri, _, _)) in events.iter().zip(&steps) {
        assert_eq!(event.kind, "Event");
        assert_eq!(event.api_version, "audit.k8s.io/v1");
        assert_eq!(event.level, "Metadata");
        assert_eq!(event.stage, Stage::ResponseComplete);
        assert_eq!(&event.request_uri, uri);
        assert_eq!(event.source_ips, ["127.0.0.1"]);
        let received: jiff::Timestamp = event.request_received_timestamp.parse().expect("received time");
        let done: jiff::Timestamp = event.stage_timestamp.parse().expect("stage time");
        assert!(done >= received, "{event:?}");
        assert_eq!(
            event.stage_timestamp.len(),
            "2026-11-24T15:34:27.123456Z".len(),
            "microseconds: {event:?}"
        );
    }
    let ids: std::collections::BTreeSet<&str> = events.iter().map(|e| e.audit_id.as_str()).collect();
    assert_eq!(ids.len(), events.len(), "audit IDs are unique");

    let patch = events[2].object_ref.as_ref().expect("objectRef");
    assert_eq!(
        (patch.resource.as_str(), patch.namespace.as_str(), patch.name.as_str()),
        ("configmaps", "audit-a", "c")
    );
    assert_eq!((patch.api_group.as_str(), patch.api_version.as_str()), ("", "v1"));
    assert!(events[1].is_write() && events[1].succeeded());
    assert!(!events[3].is_write());
    assert!(events[7].object_ref.is_none(), "/version is a non-resource request");
}

#[tokio::test]
async fn a_watch_logs_when_it_started_and_when_it_ended() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sim, path) = audited_sim(dir.path()).await;
    let client = common::client(&sim);
    let agent = "watcher/1";
    let code = send(
        &client,
        agent,
        "GET",
        "/apis/batch/v1/namespaces/default/jobs?watch=true&timeoutSeconds=1",
        None,
    )
    .await;
    assert_eq!(code, 200);
    let events = events_matching(&path, "both stages of the watch", 2, |e| e.user_agent == agent).await;
    assert_eq!(
        events.iter().map(|e| e.stage).collect::<Vec<_>>(),
        [Stage::ResponseStarted, Stage::ResponseComplete]
    );
    assert_eq!(events[0].audit_id, events[1].audit_id, "one request, two stages");
    assert!(events.iter().all(|e| e.verb == "watch"));
    let started: jiff::Timestamp = events[0].stage_timestamp.parse().expect("time");
    let ended: jiff::Timestamp = events[1].stage_timestamp.parse().expect("time");
    assert!(ended.duration_since(started) >= jiff::SignedDuration::from_millis(900), "the stream ran ~1s");
    let object = events[0].object_ref.as_ref().expect("objectRef");
    assert_eq!(
        (object.api_group.as_str(), object.resource.as_str(), object.namespace.as_str()),
        ("batch", "jobs", "default")
    );
}

#[tokio::test]
async fn kubectl_requests_are_logged_under_its_user_agent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sim, path) = audited_sim(dir.path()).await;
    let kubectl = common::Kubectl::for_sim(&sim);
    kubectl.ok(&["create", "-f", &kubectl.write("cm.json", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"from-kubectl","namespace":"default"}}"#)]).await;
    let events = events_matching(&path, "kubectl's create", 1, |e| {
        e.user_agent.starts_with("kubectl/") && e.verb == "create"
    })
    .await;
    let object = events[0].object_ref.as_ref().expect("objectRef");
    assert_eq!((object.resource.as_str(), object.namespace.as_str()), ("configmaps", "default"));
    assert_eq!(events[0].response_status.as_ref().map(|s| s.code), Some(201));
}
