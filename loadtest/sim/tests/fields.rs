//! Unknown and duplicate fields over HTTP, per `fieldValidation`, as kube-apiserver answers them
//! (test/integration/apiserver/field_validation_test.go pins the messages reproduced here).

mod common;

use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";

struct Answer {
    code: u16,
    body: Value,
    warnings: Vec<String>,
}

/// The texts of the `Warning: 299 - "…"` headers, unquoted as client-go reads them.
fn warnings(headers: &http::HeaderMap) -> Vec<String> {
    headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.strip_prefix("299 - \"").and_then(|v| v.strip_suffix('"')))
        .map(|v| v.replace("\\\"", "\"").replace("\\\\", "\\"))
        .collect()
}

async fn send(c: &kube::Client, method: &str, uri: &str, ct: &str, body: &str) -> Answer {
    let (code, headers, text) = common::raw(c, method, uri, Some(ct), body.as_bytes().to_vec()).await;
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer { code, body, warnings: warnings(&headers) }
}

const BOGUS_CM: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","bogusMeta":1},"data":{"a":"b"},"bogusField":1}"#;

#[tokio::test]
async fn create_drops_unknown_fields_and_warns_by_default() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    let a = send(&c, "POST", CMS, "application/json", BOGUS_CM).await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(a.warnings, ["unknown field \"metadata.bogusMeta\"", "unknown field \"bogusField\""]);
    assert!(a.body.get("bogusField").is_none(), "{}", a.body);
    let got = send(&c, "GET", &format!("{CMS}/c"), "application/json", "").await;
    assert!(
        got.body.get("bogusField").is_none() && got.body["metadata"].get("bogusMeta").is_none(),
        "{}",
        got.body
    );
    assert_eq!(got.body["data"], json!({"a": "b"}));

    // Ignore drops them silently.
    let body = BOGUS_CM.replace("\"c\"", "\"d\"");
    let a = send(&c, "POST", &format!("{CMS}?fieldValidation=Ignore"), "application/json", &body).await;
    assert_eq!((a.code, a.warnings.len()), (201, 0), "{:?}", a.warnings);
    assert!(a.body.get("bogusField").is_none());

    // YAML bodies report in sorted key order.
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\nzzz: 1\ndata:\n  a: b\naaa: 2\n";
    let a = send(&c, "POST", CMS, "application/yaml", yaml).await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(a.warnings, ["unknown field \"aaa\"", "unknown field \"zzz\""]);
}

#[tokio::test]
async fn strict_rejects_with_upstreams_message() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    let a = send(&c, "POST", &format!("{CMS}?fieldValidation=Strict"), "application/json", BOGUS_CM).await;
    assert_eq!((a.code, a.body["reason"].as_str()), (400, Some("BadRequest")), "{}", a.body);
    assert_eq!(
        a.body["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: \
         unknown field \"metadata.bogusMeta\", unknown field \"bogusField\""
    );
    let a = send(&c, "GET", &format!("{CMS}/c"), "application/json", "").await;
    assert_eq!(a.code, 404, "nothing was stored");

    // testFieldValidationPost "post-strict-validation": unknown and duplicate fields in order.
    let deploy = r#"{
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "dupename", "name": "d", "labels": {"app": "nginx"}, "unknownMeta": "metaVal"},
        "spec": {
            "unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2",
            "paused": true, "paused": false,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [{
                "name": "nginx", "image": "nginx:latest", "unknownNested": "val1",
                "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}"#;
    let a = send(&c, "POST", &format!("{DEPLOYS}?fieldValidation=Strict"), "application/json", deploy).await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: \
         duplicate field \"metadata.name\", unknown field \"metadata.unknownMeta\", unknown field \"spec.unknown1\", \
         unknown field \"spec.unknownDupe\", duplicate field \"spec.paused\", \
         unknown field \"spec.template.spec.containers[0].unknownNested\", \
         duplicate field \"spec.template.spec.containers[0].imagePullPolicy\""
    );
    // "post-warn-validation": the same list as warnings, and the last duplicate wins.
    let a = send(&c, "POST", DEPLOYS, "application/json", deploy).await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(a.warnings.len(), 7, "{:?}", a.warnings);
    assert_eq!(a.warnings[0], "duplicate field \"metadata.name\"");
    assert_eq!(a.body["spec"]["paused"], false);
    assert_eq!(a.body["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "Never");

    let a = send(&c, "POST", &format!("{CMS}?fieldValidation=strict"), "application/json", BOGUS_CM).await;
    assert_eq!((a.code, a.body["reason"].as_str()), (422, Some("Invalid")), "{}", a.body);
    assert_eq!(
        a.body["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"strict\": \
         supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
    );
}

#[tokio::test]
async fn updates_and_patches_check_the_result() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"b"}}"#;
    assert_eq!(send(&c, "POST", CMS, "application/json", cm).await.code, 201);
    let uri = format!("{CMS}/c");

    let put = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"c"},"bogus":1}"#;
    let a = send(&c, "PUT", &uri, "application/json", put).await;
    assert_eq!(
        (a.code, a.warnings.clone()),
        (200, vec!["unknown field \"bogus\"".to_string()]),
        "{}",
        a.body
    );
    assert_eq!(a.body["data"]["a"], "c");
    assert!(a.body.get("bogus").is_none());

    // Merge patch: the patch's duplicate keys first, then the result's unknown fields, sorted.
    let merge = r#"{"zeta":1,"data":{"a":"d","a":"e"},"alpha":{"x":1}}"#;
    let a = send(&c, "PATCH", &uri, "application/merge-patch+json", merge).await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(
        a.warnings,
        ["duplicate field \"data.a\"", "unknown field \"alpha\"", "unknown field \"zeta\""]
    );
    assert_eq!(a.body["data"]["a"], "e");
    assert!(a.body.get("zeta").is_none() && a.body.get("alpha").is_none(), "{}", a.body);

    // Strict: 422 on the field `patch`, whose value is the patched document.
    let a = send(
        &c,
        "PATCH",
        &format!("{uri}?fieldValidation=Strict"),
        "application/merge-patch+json",
        r#"{"bogus":1}"#,
    )
    .await;
    assert_eq!((a.code, a.body["reason"].as_str()), (422, Some("Invalid")), "{}", a.body);
    let message = a.body["message"].as_str().unwrap_or("");
    assert!(message.starts_with(" \"\" is invalid: patch: Invalid value: \"{"), "{message}");
    assert!(message.ends_with("\": strict decoding error: unknown field \"bogus\""), "{message}");

    // JSON patch: unknown keys of the operations are reported too.
    let ops = r#"[{"op":"add","path":"/bogus","value":1,"foo":"bar"}]"#;
    let a = send(&c, "PATCH", &uri, "application/json-patch+json", ops).await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(a.warnings, ["json patch unknown field \"[0].foo\"", "unknown field \"bogus\""]);

    // Strategic merge patch, Strict: the value is Go's %+v of the patch.
    let smp = r#"{"data":{"a":"f"},"bogus":1}"#;
    let a = send(
        &c,
        "PATCH",
        &format!("{uri}?fieldValidation=Strict"),
        "application/strategic-merge-patch+json",
        smp,
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["message"],
        " \"\" is invalid: patch: Invalid value: \"map[bogus:1 data:map[a:f]]\": strict decoding error: unknown field \"bogus\""
    );
    let got = send(&c, "GET", &uri, "application/json", "").await;
    assert_eq!(got.body["data"]["a"], "e", "a rejected patch changes nothing");
}

#[tokio::test]
async fn server_side_apply_refuses_unknown_fields() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    let applied = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: default\ndata:\n  a: b\nbogus: 1\n";
    let a =
        send(&c, "PATCH", &format!("{CMS}/c?fieldManager=m"), "application/apply-patch+yaml", applied).await;
    assert_eq!(a.code, 500, "{}", a.body);
    assert_eq!(a.body["reason"], "", "a plain error, no reason");
    assert_eq!(
        a.body["message"],
        "failed to create typed patch object (default/c; /v1, Kind=ConfigMap): .bogus: field not declared in schema"
    );
}
