//! Bad input gets the proper Status; injected faults look like upstream's; shardSelector lists
//! partition the objects; discovery and version answer as kubectl expects.

mod common;

use std::collections::BTreeSet;

use batchfleet_sim::faults::{ErrorRate, FaultConfig, FaultRule};
use batchfleet_sim::selector::fnv1a64;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

async fn status_of(
    client: &kube::Client,
    method: &str,
    uri: &str,
    ct: Option<&str>,
    body: &[u8],
) -> (u16, Value) {
    let (code, _, text) = common::raw(client, method, uri, ct, body.to_vec()).await;
    (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[tokio::test]
async fn bad_input_gets_the_proper_status() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    let cms = "/api/v1/namespaces/default/configmaps";

    let (code, s) = status_of(&c, "POST", cms, Some("application/json"), b"{not json").await;
    assert_eq!((code, s["reason"].as_str()), (400, Some("BadRequest")), "{s}");

    let (code, s) = status_of(&c, "POST", cms, Some("application/yaml"), b"a: [unclosed").await;
    assert_eq!(code, 400, "{s}");

    let (code, s) = status_of(&c, "GET", "/apis/example.com/v1/namespaces/default/widgets", None, b"").await;
    assert_eq!((code, s["reason"].as_str()), (404, Some("NotFound")), "{s}");

    let big = vec![b' '; 4 * 1024 * 1024];
    let (code, _) = status_of(&c, "POST", cms, Some("application/json"), &big).await;
    assert_eq!(code, 413);

    let (code, s) =
        status_of(&c, "POST", cms, Some("application/vnd.kubernetes.protobuf"), b"\x6b\x38\x73").await;
    assert_eq!((code, s["reason"].as_str()), (400, Some("BadRequest")), "{s}");
    assert_eq!(
        s["message"],
        "the object provided is unrecognized (must be of type ConfigMap): provided data does not appear to be a \
         protobuf message, expected prefix [107 56 115 0] (6b3873)"
    );

    let (code, s) = status_of(&c, "GET", &format!("{cms}?labelSelector=a%20in%20(b"), None, b"").await;
    assert_eq!(code, 400, "{s}");

    let (code, s) = status_of(&c, "GET", &format!("{cms}?shardSelector=shardRange(nope)"), None, b"").await;
    assert_eq!(code, 400, "{s}");

    let ok = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p"}}"#;
    assert_eq!(status_of(&c, "POST", cms, Some("application/json"), ok).await.0, 201);
    let (code, s) = status_of(
        &c,
        "PATCH",
        &format!("{cms}/p"),
        Some("application/json-patch+json"),
        b"[{\"op\":\"bogus\"}]",
    )
    .await;
    assert!(code == 400 || code == 422, "{code} {s}");
    let (code, s) = status_of(&c, "PATCH", &format!("{cms}/p"), Some("text/plain"), b"x").await;
    assert_eq!(code, 415, "{s}");

    // The wrong kind for the endpoint, and an invalid Job.
    let (code, s) = status_of(
        &c,
        "POST",
        cms,
        Some("application/json"),
        br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}"#,
    )
    .await;
    assert_eq!(code, 400, "{s}");
    let job = br#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"parallelism":-1,"template":{"spec":{"restartPolicy":"Always","containers":[{"name":"c","image":"x"}]}}}}"#;
    let (code, s) =
        status_of(&c, "POST", "/apis/batch/v1/namespaces/default/jobs", Some("application/json"), job).await;
    assert_eq!((code, s["reason"].as_str()), (422, Some("Invalid")), "{s}");
    assert!(!s["details"]["causes"].as_array().unwrap().is_empty(), "{s}");

    // A resourceVersion from the future.
    let (code, s) =
        status_of(&c, "GET", &format!("{cms}?resourceVersion=99999999999999999"), None, b"").await;
    assert_eq!(code, 504, "{s}");
}

#[tokio::test]
async fn injected_faults_look_like_upstream() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    sim.faults().configure(FaultConfig {
        seed: 1,
        rules: vec![FaultRule {
            verb: "list".into(),
            resource: "configmaps".into(),
            error_rates: vec![ErrorRate { code: 429, rate: 1.0 }],
            retry_after_seconds: 2,
            ..Default::default()
        }],
        ..Default::default()
    });
    let (code, headers, body) =
        common::raw(&c, "GET", "/api/v1/namespaces/default/configmaps", None, vec![]).await;
    assert_eq!(code, 429);
    assert_eq!(headers.get("retry-after").unwrap(), "2");
    assert!(headers.get("content-type").unwrap().to_str().unwrap().starts_with("text/plain"));
    assert!(body.contains("Too many requests"), "{body}");
    // Other verbs are untouched.
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    assert!(api.get_opt("x").await.unwrap().is_none());

    // Configured over the admin endpoint: 503 on every create.
    let rule = json!({"seed": 3, "rules": [{"verb": "create", "errorRates": [{"code": 503, "rate": 1.0}], "retryAfterSeconds": 1}]});
    let (code, _, _) =
        common::raw(&c, "PUT", "/_sim/faults", Some("application/json"), rule.to_string().into_bytes()).await;
    assert_eq!(code, 200);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    let err = api.create(&PostParams::default(), &cm).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 503), "{err:?}");
    let (_, _, counters) = common::raw(&c, "GET", "/_sim/counters", None, vec![]).await;
    let counters: Value = serde_json::from_str(&counters).unwrap();
    assert!(
        counters["requests"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["verb"] == "create" && r["resource"] == "configmaps")
    );
}

#[tokio::test]
async fn shard_selector_ranges_partition_the_list() {
    let sim = common::api_only().await;
    let client = common::client(&sim);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut all = BTreeSet::new();
    for i in 0..24 {
        let ns = format!("team-{i}");
        let obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        namespaces.create(&PostParams::default(), &obj).await.unwrap();
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        for j in 0..3 {
            let cm: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": format!("c{j}")}})).unwrap();
            cms.create(&PostParams::default(), &cm).await.unwrap();
            all.insert(format!("{ns}/c{j}"));
        }
    }
    // Four shards, the last two requested together with `||`.
    let bound = |i: u128| -> String {
        if i == 4 { "0x10000000000000000".into() } else { format!("0x{:016x}", (i << 62) as u64) }
    };
    let selectors = [
        format!("shardRange(object.metadata.namespace, '{}', '{}')", bound(0), bound(1)),
        format!("shardRange(object.metadata.namespace, '{}', '{}')", bound(1), bound(2)),
        format!(
            "shardRange(object.metadata.namespace, '{}', '{}') || shardRange(object.metadata.namespace, '{}', '{}')",
            bound(2),
            bound(3),
            bound(3),
            bound(4)
        ),
    ];
    let mut union = BTreeSet::new();
    let mut total = 0;
    for (i, sel) in selectors.iter().enumerate() {
        let uri = format!(
            "/api/v1/configmaps?shardSelector={}",
            percent_encoding::utf8_percent_encode(sel, percent_encoding::NON_ALPHANUMERIC)
        );
        let (code, _, body) = common::raw(&client, "GET", &uri, None, vec![]).await;
        assert_eq!(code, 200, "{body}");
        let list: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(list["metadata"]["shardInfo"]["selector"], sel.as_str(), "echo of shard {i}");
        for item in list["items"].as_array().unwrap() {
            let ns = item["metadata"]["namespace"].as_str().unwrap();
            let hash = fnv1a64(ns.as_bytes());
            let shard = (hash >> 62) as usize;
            assert_eq!(shard.min(2), i.min(2), "{ns} hashes to shard {shard}");
            let key = format!("{ns}/{}", item["metadata"]["name"].as_str().unwrap());
            // Every namespace also holds the root-ca-cert-publisher's ConfigMap.
            if ns.starts_with("team-") && item["metadata"]["name"] != "kube-root-ca.crt" {
                total += 1;
                assert!(union.insert(key), "ranges are disjoint");
            }
        }
    }
    assert_eq!(total, all.len());
    assert_eq!(union, all);

    // The same selector works on watches; kube-rs lists normally without one.
    let plain = Api::<ConfigMap>::all(client).list(&ListParams::default()).await.unwrap();
    assert!(plain.items.len() >= all.len());
}

#[tokio::test]
async fn discovery_version_and_openapi() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    let (code, v) = status_of(&c, "GET", "/version", None, b"").await;
    assert_eq!(code, 200);
    assert_eq!((v["major"].as_str(), v["minor"].as_str()), (Some("1"), Some("37")));
    let (_, groups) = status_of(&c, "GET", "/apis", None, b"").await;
    assert_eq!(groups["kind"], "APIGroupList");
    let (_, batch) = status_of(&c, "GET", "/apis/batch/v1", None, b"").await;
    let names: Vec<&str> =
        batch["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    for n in ["jobs", "jobs/status", "cronjobs", "cronjobs/status"] {
        assert!(names.contains(&n), "{names:?}");
    }
    let (code, root) = status_of(&c, "GET", "/openapi/v3", None, b"").await;
    assert_eq!(code, 200);
    let url = root["paths"]["apis/batch/v1"]["serverRelativeURL"].as_str().unwrap().to_string();
    let (code, doc) = status_of(&c, "GET", &url, None, b"").await;
    assert_eq!(code, 200, "{doc}");
}

#[tokio::test]
async fn shard_selector_filters_watches_too() {
    let sim = common::api_only().await;
    let client = common::client(&sim);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    // Two namespaces in opposite halves of the hash space.
    let names: Vec<String> = (0..64).map(|i| format!("w-{i}")).collect();
    let low = names.iter().find(|n| fnv1a64(n.as_bytes()) < 1 << 63).unwrap().clone();
    let high = names.iter().find(|n| fnv1a64(n.as_bytes()) >= 1 << 63).unwrap().clone();
    for ns in [&low, &high] {
        let obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        namespaces.create(&PostParams::default(), &obj).await.unwrap();
    }
    let rv = Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let sel = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')";
    let uri = format!(
        "/api/v1/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=2&shardSelector={}",
        percent_encoding::utf8_percent_encode(sel, percent_encoding::NON_ALPHANUMERIC)
    );
    let watch = tokio::spawn({
        let client = client.clone();
        async move { common::raw(&client, "GET", &uri, None, vec![]).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    for ns in [&low, &high] {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let (code, _, body) = watch.await.unwrap();
    assert_eq!(code, 200);
    let seen: Vec<String> = body
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "ADDED")
        .map(|e| e["object"]["metadata"]["namespace"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(seen, vec![low]);
}

/// A protobuf DeleteOptions in the `k8s\0` envelope, as kubectl drain and client-go send it.
fn protobuf_delete_options(dry_run: bool, precondition_uid: &str) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, number: u8, bytes: &[u8]) {
        out.push((number << 3) | 2);
        out.push(u8::try_from(bytes.len()).unwrap());
        out.extend_from_slice(bytes);
    }
    let mut preconditions = Vec::new();
    field(&mut preconditions, 1, precondition_uid.as_bytes());
    let mut options = Vec::new();
    field(&mut options, 2, &preconditions);
    field(&mut options, 4, b"Background");
    if dry_run {
        field(&mut options, 5, b"All");
    }
    let mut type_meta = Vec::new();
    field(&mut type_meta, 1, b"v1");
    field(&mut type_meta, 2, b"DeleteOptions");
    let mut body = b"k8s\0".to_vec();
    field(&mut body, 1, &type_meta);
    field(&mut body, 2, &options);
    body
}

#[tokio::test]
async fn protobuf_delete_options_are_honoured() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    let cms = "/api/v1/namespaces/default/configmaps";
    let pb = Some("application/vnd.kubernetes.protobuf");
    let cm = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"}}"#;
    let (code, created) = status_of(&c, "POST", cms, Some("application/json"), cm).await;
    assert_eq!(code, 201, "{created}");
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let one = format!("{cms}/d");

    let (code, s) = status_of(&c, "DELETE", &one, pb, &protobuf_delete_options(false, "other-uid")).await;
    assert_eq!((code, s["reason"].as_str()), (409, Some("Conflict")), "{s}");
    let (code, s) = status_of(&c, "DELETE", &one, pb, &protobuf_delete_options(true, &uid)).await;
    assert_eq!(code, 200, "{s}");
    assert_eq!(status_of(&c, "GET", &one, None, b"").await.0, 200, "dryRun deleted the object");
    let (code, s) = status_of(&c, "DELETE", &one, pb, &protobuf_delete_options(false, &uid)).await;
    assert_eq!(code, 200, "{s}");
    assert_eq!(status_of(&c, "GET", &one, None, b"").await.0, 404);

    let (code, s) = status_of(&c, "DELETE", &one, pb, b"k8s\0\x12\x7f").await;
    assert_eq!((code, s["reason"].as_str()), (400, Some("BadRequest")), "{s}");
}
