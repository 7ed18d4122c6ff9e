//! The sim as an API server without KEP-5866: `shardSelector` is ignored (every object, no
//! `shardInfo` echo), switched at start or at run time through the admin endpoint.

mod common;

use std::time::Duration;

use batchfleet_sim::SimConfig;
use batchfleet_sim::selector::fnv1a64;
use serde_json::Value;

async fn create_configmaps(client: &kube::Client, namespaces: &[String]) {
    for ns in namespaces {
        let body = format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{ns}"}}}}"#);
        let (code, _, text) =
            common::raw(client, "POST", "/api/v1/namespaces", Some("application/json"), body.into_bytes())
                .await;
        assert_eq!(code, 201, "{text}");
        let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#.as_bytes().to_vec();
        let uri = format!("/api/v1/namespaces/{ns}/configmaps");
        let (code, _, text) = common::raw(client, "POST", &uri, Some("application/json"), body).await;
        assert_eq!(code, 201, "{text}");
    }
}

/// Lists configmaps with a selector for the lower half of the hash space; returns the namespaces
/// listed and the echo.
async fn list_lower_half(client: &kube::Client) -> (Vec<String>, Value) {
    let sel = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')";
    let uri = format!(
        "/api/v1/configmaps?shardSelector={}",
        percent_encoding::utf8_percent_encode(sel, percent_encoding::NON_ALPHANUMERIC)
    );
    let (code, _, text) = common::raw(client, "GET", &uri, None, Vec::new()).await;
    assert_eq!(code, 200, "{text}");
    let list: Value = serde_json::from_str(&text).expect("list");
    let mut namespaces: Vec<String> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        // Every namespace also holds the root CA ConfigMap the sim publishes.
        .filter(|i| i["metadata"]["name"] != "kube-root-ca.crt")
        .filter_map(|i| i["metadata"]["namespace"].as_str().map(str::to_string))
        .filter(|ns| ns.starts_with("team-"))
        .collect();
    namespaces.sort();
    (namespaces, list["metadata"]["shardInfo"].clone())
}

#[tokio::test]
async fn without_the_feature_a_shard_selector_is_ignored_and_not_echoed() {
    let sim = common::start(SimConfig {
        nodes: 0,
        kubelet: false,
        bookmark_interval: Duration::from_secs(1),
        shard_selector: false,
        ..SimConfig::default()
    })
    .await;
    let client = common::client(&sim);
    let mut all: Vec<String> = (0..16).map(|i| format!("team-{i}")).collect();
    all.sort();
    create_configmaps(&client, &all).await;
    let lower: Vec<String> = all.iter().filter(|ns| fnv1a64(ns.as_bytes()) < 1 << 63).cloned().collect();
    assert!(!lower.is_empty() && lower.len() < all.len(), "the split is not trivial: {lower:?}");

    let (listed, echo) = list_lower_half(&client).await;
    assert_eq!(listed, all, "without the feature every namespace is listed");
    assert!(echo.is_null(), "no shardInfo echo without the feature: {echo}");

    // Switched on at run time: the same request is filtered and echoed.
    let (code, _, text) = common::raw(
        &client,
        "PUT",
        "/_sim/features",
        Some("application/json"),
        br#"{"shardSelector":true}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 200, "{text}");
    let (listed, echo) = list_lower_half(&client).await;
    assert_eq!(listed, lower);
    assert!(echo["selector"].as_str().is_some_and(|s| s.starts_with("shardRange(")), "{echo}");
}
