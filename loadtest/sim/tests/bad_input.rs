//! Bad bodies never panic the sim: each gets a `Status` with kube-apiserver's code and reason,
//! never a dropped connection. Named regressions for every crash found, then property tests that
//! send random and mutated bodies through every decoder (JSON, YAML, the four patch types).

mod common;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";

async fn send(c: &kube::Client, method: &str, uri: &str, ct: &str, body: &[u8]) -> (u16, Value) {
    let (code, _, text) = common::raw(c, method, uri, Some(ct), body.to_vec()).await;
    (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

async fn create_configmap(c: &kube::Client, name: &str) {
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}});
    let (code, s) = send(c, "POST", CMS, "application/json", &serde_json::to_vec(&body).unwrap()).await;
    assert_eq!(code, 201, "{s}");
}

/// Regression (issue 9 §6): a merge patch `[1]` replaced the document with an array and the
/// sim indexed it as an object (task panic, dropped connection). Upstream decodes the patched
/// JSON into the typed object and answers 422 on the field `patch` (handlers/patch.go
/// `applyPatchToCurrentObject`).
#[tokio::test]
async fn merge_patch_with_an_array_is_a_422_not_a_panic() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    create_configmap(&c, "x").await;
    let (code, s) = send(&c, "PATCH", &format!("{CMS}/x"), "application/merge-patch+json", b"[1]").await;
    assert_eq!((code, s["reason"].as_str()), (422, Some("Invalid")), "{s}");
    assert_eq!(
        s["message"],
        " \"\" is invalid: patch: Invalid value: \"[1]\": couldn't get version/kind; json parse error: json: \
         cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; \
         Kind string \"json:\\\"kind,omitempty\\\"\" }"
    );
    assert_eq!(s["details"]["causes"][0]["field"], "patch", "{s}");
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueInvalid", "{s}");
    // The object is untouched and the server still answers.
    let (code, cm) = send(&c, "GET", &format!("{CMS}/x"), "application/json", b"").await;
    assert_eq!((code, &cm["data"]), (200, &json!({"a": "b"})));
}

/// Regression (issue 9 §6): a JSON patch that replaces the root with an array, a string or null.
#[tokio::test]
async fn json_patch_replacing_the_root_is_answered_not_a_panic() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    create_configmap(&c, "x").await;
    let uri = format!("{CMS}/x");
    for (value, kind) in [("[1]", "array"), ("\"s\"", "string"), ("5", "number"), ("true", "bool")] {
        let body = format!(r#"[{{"op":"replace","path":"","value":{value}}}]"#);
        let (code, s) = send(&c, "PATCH", &uri, "application/json-patch+json", body.as_bytes()).await;
        assert_eq!((code, s["reason"].as_str()), (422, Some("Invalid")), "{value}: {s}");
        let message = s["message"].as_str().unwrap_or("");
        assert!(
            message.contains(&format!("json: cannot unmarshal {kind} into Go value of type struct")),
            "{s}"
        );
    }
    let body = br#"[{"op":"replace","path":"","value":null}]"#;
    let (code, s) = send(&c, "PATCH", &uri, "application/json-patch+json", body).await;
    assert_eq!((code, s["reason"].as_str()), (400, Some("BadRequest")), "{s}");
    assert_eq!(
        s["message"],
        "the name of the object (x based on URL) was undeterminable: name must be provided"
    );
}

/// An apply patch that is not a map is upstream's 400 `error decoding YAML`.
#[tokio::test]
async fn apply_patch_with_a_list_is_a_400() {
    let sim = common::api_only().await;
    let c = common::client(&sim);
    let uri = format!("{CMS}/x?fieldManager=m");
    let (code, s) = send(&c, "PATCH", &uri, "application/apply-patch+yaml", b"- 1\n- 2\n").await;
    assert_eq!((code, s["reason"].as_str()), (400, Some("BadRequest")), "{s}");
}

/// What every answer to a bad body must be: a Status (or the object, when the body happened to
/// be acceptable), and the connection still served.
fn check_answer(code: u16, body: &Value) -> Result<(), TestCaseError> {
    if (200..300).contains(&code) {
        prop_assert!(body.get("kind").is_some(), "{code} without an object: {body}");
        return Ok(());
    }
    prop_assert!((400..600).contains(&code), "unexpected code {code}: {body}");
    prop_assert_eq!(body.get("kind").and_then(Value::as_str), Some("Status"), "{} {}", code, body);
    prop_assert_eq!(body.get("code").and_then(Value::as_u64), Some(u64::from(code)), "{}", body);
    // An unexplained 500 is a bug unless it is one upstream answers too (strategic merge errors).
    if code == 500 {
        prop_assert!(body.get("reason").and_then(Value::as_str) != Some("InternalError"), "{}", body);
    }
    Ok(())
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        proptest::sample::select(
            &["", "x", "/", "/metadata", "/data/a", "v1", "ConfigMap", "Job", "add", "replace"][..]
        )
        .prop_map(Value::from),
    ];
    let keys = proptest::sample::select(
        &[
            "apiVersion",
            "kind",
            "metadata",
            "name",
            "namespace",
            "labels",
            "data",
            "spec",
            "template",
            "containers",
            "op",
            "path",
            "value",
            "from",
            "$patch",
            "finalizers",
            "resourceVersion",
        ][..],
    );
    leaf.prop_recursive(4, 32, 5, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((keys.clone().prop_map(str::to_string), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

const INSERTS: &[&[u8]] = &[b"[", b"{", b"null", b"\"", b",", b"]", b"}", b":", b"\n- ", b"\x00", b"\xff"];

fn mutated(base: &'static [u8]) -> impl Strategy<Value = Vec<u8>> {
    let len = base.len();
    prop_oneof![
        (0..len, any::<u8>()).prop_map(move |(i, b)| {
            let mut v = base.to_vec();
            v[i] = b;
            v
        }),
        (0..len).prop_map(move |n| base[..n].to_vec()),
        (0..len, proptest::sample::select(INSERTS)).prop_map(move |(i, ins)| {
            let mut v = base.to_vec();
            v.splice(i..i, ins.iter().copied());
            v
        }),
    ]
}

const CM_JSON: &[u8] = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fuzz","labels":{"a":"b"}},"data":{"k":"v"}}"#;
const CM_YAML: &[u8] =
    b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fuzz\n  labels:\n    a: b\ndata:\n  k: v\n";
const JOB_JSON: &[u8] = br#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"fuzz"},"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i","env":[{"name":"A","value":"1"}]}]}}}}"#;
const OPS: &[u8] = br#"[{"op":"replace","path":"/data/k","value":"x"},{"op":"add","path":"/metadata/labels/b","value":"2"},{"op":"remove","path":"/data"},{"op":"test","path":"/metadata/name","value":"fuzz"}]"#;

/// A ConfigMap and a Job in protobuf, enveloped, as client-go sends them.
fn protobuf_of(json: &[u8]) -> &'static [u8] {
    let value: Value = serde_json::from_slice(json).expect("static JSON");
    let body =
        batchfleet_sim::protobuf::codec::encode_enveloped(batchfleet_sim::protobuf::schema::schema(), &value)
            .expect("a built-in kind");
    Box::leak(body.into_boxed_slice())
}

fn bodies() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        mutated(protobuf_of(CM_JSON)),
        mutated(protobuf_of(JOB_JSON)),
        arb_json().prop_map(|v| serde_json::to_vec(&v).unwrap_or_default()),
        proptest::collection::vec(any::<u8>(), 0..48),
        mutated(CM_JSON),
        mutated(CM_YAML),
        mutated(JOB_JSON),
        mutated(OPS),
    ]
}

#[derive(Debug, Clone, Copy)]
enum Request {
    CreateJson,
    CreateYaml,
    CreateProtobuf,
    UpdateJson,
    UpdateProtobuf,
    Patch(&'static str),
}

fn requests() -> impl Strategy<Value = Request> {
    proptest::sample::select(vec![
        Request::CreateJson,
        Request::CreateYaml,
        Request::CreateProtobuf,
        Request::UpdateJson,
        Request::UpdateProtobuf,
        Request::Patch("application/json-patch+json"),
        Request::Patch("application/merge-patch+json"),
        Request::Patch("application/strategic-merge-patch+json"),
        Request::Patch("application/apply-patch+yaml"),
    ])
}

/// Random and mutated bodies, every decoder, on a built-in kind (ConfigMap, Job) and a custom
/// resource: always a Status or an object, never a dropped connection.
#[test]
fn random_bodies_always_get_a_status() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let sim = rt.block_on(common::api_only());
    let c = {
        let _guard = rt.enter();
        common::client(&sim)
    };
    rt.block_on(async {
        create_configmap(&c, "fuzz").await;
        let job = JOB_JSON;
        let (code, s) = send(&c, "POST", JOBS, "application/json", job).await;
        assert_eq!(code, 201, "{s}");
    });
    let mut runner = TestRunner::new(Config { cases: 400, failure_persistence: None, ..Config::default() });
    let collections = proptest::sample::select(vec![CMS, JOBS]);
    let outcome = runner.run(&(requests(), bodies(), collections), |(request, body, collection)| {
        let (method, uri, ct) = match request {
            Request::CreateJson => ("POST", collection.to_string(), "application/json"),
            Request::CreateYaml => ("POST", collection.to_string(), "application/yaml"),
            Request::CreateProtobuf => {
                ("POST", collection.to_string(), "application/vnd.kubernetes.protobuf")
            }
            Request::UpdateJson => ("PUT", format!("{collection}/fuzz"), "application/json"),
            Request::UpdateProtobuf => {
                ("PUT", format!("{collection}/fuzz"), "application/vnd.kubernetes.protobuf")
            }
            Request::Patch(ct) => ("PATCH", format!("{collection}/fuzz?fieldManager=fuzz"), ct),
        };
        let (code, answer) = rt.block_on(send(&c, method, &uri, ct, &body));
        check_answer(code, &answer)
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
