//! Patches whose result is not an object: every patch type answers with kube-apiserver's Status,
//! never a panic or a dropped connection (issue 9 §6's reported crashes, as regression tests).

mod common;

use serde_json::Value;

async fn configmap(client: &kube::Client) {
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"k":"v"}}"#.to_vec();
    let (code, _, text) =
        common::raw(client, "POST", "/api/v1/namespaces/default/configmaps", Some("application/json"), body)
            .await;
    assert_eq!(code, 201, "{text}");
}

#[tokio::test]
async fn patches_that_replace_the_root_with_a_non_object_get_upstreams_422() {
    let sim = common::api_only().await;
    let client = common::client(&sim);
    configmap(&client).await;
    let uri = "/api/v1/namespaces/default/configmaps/x";
    let cases: &[(&str, &str, &str)] = &[
        ("application/merge-patch+json", "[1]", "cannot unmarshal array into Go value of type struct"),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"","value":[1,2]}]"#,
            "cannot unmarshal array",
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"","value":"text"}]"#,
            "cannot unmarshal string",
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"","value":7}]"#,
            "cannot unmarshal number",
        ),
    ];
    for (content_type, body, why) in cases {
        let (code, _, text) =
            common::raw(&client, "PATCH", uri, Some(content_type), body.as_bytes().to_vec()).await;
        assert_eq!(code, 422, "{content_type} {body}: {text}");
        let status: Value = serde_json::from_str(&text).expect("a Status body");
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "Invalid");
        let message = status["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(r#" "" is invalid: patch: Invalid value: "#), "{message}");
        assert!(message.contains(why), "{message}");
        assert_eq!(status["details"]["causes"][0]["field"], "patch");
    }
    // The object is untouched and the server still answers.
    let (code, _, text) = common::raw(&client, "GET", uri, None, Vec::new()).await;
    assert_eq!(code, 200);
    assert!(text.contains(r#""k":"v""#), "{text}");
}

#[tokio::test]
async fn strategic_and_apply_patches_with_non_object_bodies_get_a_status() {
    let sim = common::api_only().await;
    let client = common::client(&sim);
    configmap(&client).await;
    let uri = "/api/v1/namespaces/default/configmaps/x";
    for (content_type, body) in [
        ("application/strategic-merge-patch+json", "[1]"),
        ("application/strategic-merge-patch+json", "\"x\""),
        ("application/apply-patch+yaml", "[1]"),
        ("application/apply-patch+yaml", "- a\n- b\n"),
    ] {
        let uri = if content_type.starts_with("application/apply") {
            format!("{uri}?fieldManager=t")
        } else {
            uri.to_string()
        };
        let (code, _, text) =
            common::raw(&client, "PATCH", &uri, Some(content_type), body.as_bytes().to_vec()).await;
        assert!((400..500).contains(&code), "{content_type} {body:?}: {code} {text}");
        let status: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{content_type} {body:?}: not a Status ({e}): {text}"));
        assert_eq!(status["kind"], "Status", "{text}");
    }
    let (code, _, _) = common::raw(&client, "GET", uri, None, Vec::new()).await;
    assert_eq!(code, 200, "the server still answers");
}
