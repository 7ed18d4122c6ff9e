//! Protobuf against the sim: kubectl's typed commands (which send protobuf bodies and accept
//! protobuf answers), and protobuf responses, lists, Statuses and watch frames read back with
//! k8s-pb's prost types, an implementation independent of the sim's codec.

mod common;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use kube::api::{Api, PostParams};
use prost::Message;
use serde_json::json;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

#[tokio::test]
async fn kubectls_typed_create_commands_send_protobuf_and_create_what_they_say() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    // -v=8 logs the request headers: the body really is protobuf.
    let out = k.run(&["create", "namespace", "demo", "-v=8"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("Content-Type: application/vnd.kubernetes.protobuf"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "namespace/demo created");

    let created = [
        (vec!["create", "configmap", "settings", "--from-literal=mode=fast"], "configmap/settings created"),
        (
            vec!["create", "secret", "generic", "creds", "--from-literal=password=hunter2"],
            "secret/creds created",
        ),
        (vec!["create", "job", "once", "--image=busybox", "--", "echo", "hi"], "job.batch/once created"),
        (
            vec!["create", "cronjob", "nightly", "--image=busybox", "--schedule=*/5 * * * *", "--", "date"],
            "cronjob.batch/nightly created",
        ),
        (vec!["create", "job", "manual", "--from=cronjob/nightly"], "job.batch/manual created"),
        (vec!["create", "deployment", "web", "--image=nginx", "--replicas=2"], "deployment.apps/web created"),
    ];
    for (args, expected) in created {
        // The namespace goes first: after `--` it would be the container's command.
        let args: Vec<&str> = ["-n", "demo"].into_iter().chain(args).collect();
        assert_eq!(k.ok(&args).await.trim(), expected, "{args:?}");
    }

    let c = common::client(&sim);
    let ns = Api::<Namespace>::all(c.clone()).get("demo").await.expect("namespace");
    assert_eq!(ns.metadata.labels.unwrap_or_default()["kubernetes.io/metadata.name"], "demo");
    let cm = Api::<ConfigMap>::namespaced(c.clone(), "demo").get("settings").await.expect("configmap");
    assert_eq!(cm.data.unwrap_or_default()["mode"], "fast");
    let secret = Api::<Secret>::namespaced(c.clone(), "demo").get("creds").await.expect("secret");
    assert_eq!(secret.data.unwrap_or_default()["password"].0, b"hunter2");
    assert_eq!(secret.type_.as_deref(), Some("Opaque"));
    let jobs = Api::<Job>::namespaced(c.clone(), "demo");
    let once = jobs.get("once").await.expect("job");
    let container = &once.spec.expect("spec").template.spec.expect("pod spec").containers[0];
    assert_eq!(
        (container.image.as_deref(), container.command.clone()),
        (Some("busybox"), Some(vec!["echo".into(), "hi".into()]))
    );
    let cron = Api::<CronJob>::namespaced(c.clone(), "demo").get("nightly").await.expect("cronjob");
    assert_eq!(cron.spec.schedule, "*/5 * * * *");
    let manual = jobs.get("manual").await.expect("manual job");
    let annotations = manual.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("cronjob.kubernetes.io/instantiate").map(String::as_str), Some("manual"));
    let owner = &manual.metadata.owner_references.expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("CronJob", "nightly", cron.metadata.uid.as_deref().unwrap_or(""))
    );
    let web = Api::<Deployment>::namespaced(c.clone(), "demo").get("web").await.expect("deployment");
    assert_eq!(web.spec.replicas, Some(2));
    // Nothing kubectl did not set slipped in from the protobuf zero values.
    assert!(cm.metadata.generate_name.is_none() && cm.metadata.deletion_timestamp.is_none());
}

/// A request through kube-rs's client with an Accept header of our choosing.
async fn request(
    c: &kube::Client,
    method: &str,
    uri: &str,
    accept: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, String, Vec<u8>) {
    let mut req = http::Request::builder().method(method).uri(uri).header(http::header::ACCEPT, accept);
    if let Some(ct) = content_type {
        req = req.header(http::header::CONTENT_TYPE, ct);
    }
    let resp = c.send(req.body(kube::client::Body::from(body)).expect("request")).await.expect("response");
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = http_body_util::BodyExt::collect(resp.into_body()).await.expect("body").to_bytes();
    (status, ct, bytes.to_vec())
}

/// The envelope's (apiVersion, kind) and raw message, read with k8s-pb's `runtime.Unknown`.
fn unwrap_envelope(body: &[u8]) -> (String, String, Vec<u8>) {
    let message = body.strip_prefix(b"k8s\0").expect("the k8s\\0 prefix");
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(message).expect("runtime.Unknown");
    let type_meta = unknown.type_meta.unwrap_or_default();
    (
        type_meta.api_version.unwrap_or_default(),
        type_meta.kind.unwrap_or_default(),
        unknown.raw.unwrap_or_default(),
    )
}

#[tokio::test]
async fn responses_lists_statuses_and_watch_frames_come_in_protobuf_when_preferred() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "one", "labels": {"a": "b"}}, "data": {"k": "v"}}),
    )
    .expect("cm");
    cms.create(&PostParams::default(), &cm).await.expect("create");
    let accept = format!("{PROTOBUF}, application/json");
    let base = "/api/v1/namespaces/default/configmaps";

    let (code, ct, body) = request(&c, "GET", &format!("{base}/one"), &accept, None, vec![]).await;
    assert_eq!((code, ct.as_str()), (200, PROTOBUF));
    let (api_version, kind, raw) = unwrap_envelope(&body);
    assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "ConfigMap"));
    let typed = k8s_pb::api::core::v1::ConfigMap::decode(raw.as_slice()).expect("ConfigMap");
    let metadata = typed.metadata.expect("metadata");
    assert_eq!(metadata.name.as_deref(), Some("one"));
    assert_eq!(metadata.labels.get("a").map(String::as_str), Some("b"));
    assert!(metadata.creation_timestamp.and_then(|t| t.seconds).unwrap_or_default() > 1_700_000_000);
    assert_eq!(typed.data.get("k").map(String::as_str), Some("v"));

    let (code, ct, body) = request(&c, "GET", base, &accept, None, vec![]).await;
    assert_eq!((code, ct.as_str()), (200, PROTOBUF));
    let (_, kind, raw) = unwrap_envelope(&body);
    assert_eq!(kind, "ConfigMapList");
    let list = k8s_pb::api::core::v1::ConfigMapList::decode(raw.as_slice()).expect("ConfigMapList");
    let names: Vec<_> = list.items.iter().filter_map(|i| i.metadata.as_ref()?.name.clone()).collect();
    assert!(names.contains(&"one".to_string()), "{names:?}");
    assert!(list.metadata.and_then(|m| m.resource_version).is_some_and(|rv| !rv.is_empty()));

    let (code, ct, body) = request(&c, "GET", &format!("{base}/missing"), &accept, None, vec![]).await;
    assert_eq!((code, ct.as_str()), (404, PROTOBUF));
    let (_, kind, raw) = unwrap_envelope(&body);
    assert_eq!(kind, "Status");
    let status = meta::Status::decode(raw.as_slice()).expect("Status");
    assert_eq!((status.reason.as_deref(), status.code), (Some("NotFound"), Some(404)));
    assert_eq!(status.message.as_deref(), Some("configmaps \"missing\" not found"));

    // JSON stays the answer for clients that prefer it.
    let (_, ct, _) = request(&c, "GET", &format!("{base}/one"), "application/json, */*", None, vec![]).await;
    assert_eq!(ct, "application/json");

    // A watch: frames of a 4-byte big-endian length and a WatchEvent.
    let rv = list_rv(&c, base).await;
    let req = http::Request::builder()
        .uri(format!("{base}?watch=1&resourceVersion={rv}"))
        .header(http::header::ACCEPT, accept.as_str())
        .body(kube::client::Body::empty())
        .expect("request");
    let resp = c.send(req).await.expect("watch");
    assert_eq!(
        resp.headers()[http::header::CONTENT_TYPE],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let mut body = resp.into_body();
    let second: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "two"}})).expect("cm");
    cms.create(&PostParams::default(), &second).await.expect("create two");
    let mut buffer = Vec::new();
    let event = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if buffer.len() >= 4 {
                let len = u32::from_be_bytes(buffer[..4].try_into().expect("4 bytes")) as usize;
                if buffer.len() >= 4 + len {
                    return meta::WatchEvent::decode(&buffer[4..4 + len]).expect("WatchEvent");
                }
            }
            let frame = http_body_util::BodyExt::frame(&mut body).await.expect("stream open").expect("frame");
            if let Ok(data) = frame.into_data() {
                buffer.extend_from_slice(&data);
            }
        }
    })
    .await
    .expect("a watch event within 10s");
    assert_eq!(event.r#type.as_deref(), Some("ADDED"));
    let raw = event.object.and_then(|o| o.raw).expect("object");
    let (_, kind, raw) = unwrap_envelope(&raw);
    assert_eq!(kind, "ConfigMap");
    let typed = k8s_pb::api::core::v1::ConfigMap::decode(raw.as_slice()).expect("ConfigMap");
    assert_eq!(typed.metadata.and_then(|m| m.name).as_deref(), Some("two"));
}

async fn list_rv(c: &kube::Client, base: &str) -> String {
    let (_, _, body) = request(c, "GET", base, "application/json", None, vec![]).await;
    let list: serde_json::Value = serde_json::from_slice(&body).expect("list");
    list["metadata"]["resourceVersion"].as_str().expect("rv").to_string()
}

#[tokio::test]
async fn a_protobuf_create_is_the_same_create_as_json_and_bad_bodies_get_statuses() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    let base = "/api/v1/namespaces/default/configmaps";
    let typed = k8s_pb::api::core::v1::ConfigMap {
        metadata: Some(meta::ObjectMeta {
            name: Some("from-protobuf".into()),
            labels: [("team".to_string(), "a".to_string())].into(),
            ..Default::default()
        }),
        data: [("k".to_string(), "v".to_string())].into(),
        ..Default::default()
    };
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
        }),
        raw: Some(typed.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.encode_to_vec());
    let (code, ct, reply) = request(&c, "POST", base, "application/json", Some(PROTOBUF), body.clone()).await;
    assert_eq!((code, ct.as_str()), (201, "application/json"), "{}", String::from_utf8_lossy(&reply));
    let created: ConfigMap = serde_json::from_slice(&reply).expect("created");
    assert_eq!(created.data.unwrap_or_default()["k"], "v");
    assert_eq!(created.metadata.labels.unwrap_or_default()["team"], "a");

    // The same body again: the same AlreadyExists as a JSON create gets.
    let (code, _, reply) = request(&c, "POST", base, "application/json", Some(PROTOBUF), body.clone()).await;
    let status: serde_json::Value = serde_json::from_slice(&reply).expect("status");
    assert_eq!((code, status["reason"].as_str()), (409, Some("AlreadyExists")), "{status}");

    // A truncated message inside a valid envelope.
    let mut truncated = b"k8s\0".to_vec();
    let mut cut = unknown.clone();
    cut.raw = Some(typed.encode_to_vec()[..10].to_vec());
    truncated.extend(cut.encode_to_vec());
    let (code, _, reply) = request(&c, "POST", base, "application/json", Some(PROTOBUF), truncated).await;
    let status: serde_json::Value = serde_json::from_slice(&reply).expect("status");
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: unexpected EOF"
    );

    // Custom resources have no protobuf form: 415 for a protobuf body, 406 for protobuf-only Accept.
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let (code, _, _) = request(
        &c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        Some("application/json"),
        serde_json::to_vec(&crd).expect("json"),
    )
    .await;
    assert_eq!(code, 201);
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    common::wait_until("widgets served", Duration::from_secs(10), || async {
        (request(&c, "GET", widgets, "application/json", None, vec![]).await.0 == 200).then_some(())
    })
    .await;
    let (code, ct, _) = request(&c, "GET", widgets, PROTOBUF, None, vec![]).await;
    assert_eq!((code, ct.as_str()), (406, "application/json"));
    let (code, ct, _) =
        request(&c, "GET", widgets, &format!("{PROTOBUF}, application/json"), None, vec![]).await;
    assert_eq!((code, ct.as_str()), (200, "application/json"));
    let mut widget_body = b"k8s\0".to_vec();
    let mut widget = unknown.clone();
    widget.type_meta = Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
        api_version: Some("example.com/v1".into()),
        kind: Some("Widget".into()),
    });
    widget_body.extend(widget.encode_to_vec());
    let (code, _, _) = request(&c, "POST", widgets, "application/json", Some(PROTOBUF), widget_body).await;
    assert_eq!(code, 415);
}
