//! Who a write is tracked under in `managedFields` when it names no `fieldManager`: the prefix of
//! its User-Agent, and a write with no User-Agent at all is tracked too, under no name (handlers
//! `managerOrUserAgent`; `BuildManagerIdentifier` leaves the empty manager out). Raw HTTP, because
//! every client library sends a User-Agent of its own.

mod common;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 request with exactly the headers given; the answer's status and JSON body.
async fn send(url: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    conn.write_all(head.as_bytes()).await.expect("write head");
    conn.write_all(body.as_bytes()).await.expect("write body");
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await.expect("read");
    let answer = String::from_utf8_lossy(&answer).to_string();
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status code");
    // The sim closes the connection after the answer, so the body is what remains, unless chunked.
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    (code, serde_json::from_str(&body).unwrap_or(Value::String(body)))
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

fn entries(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_write_without_a_user_agent_is_tracked_under_no_name() {
    let sim = common::api_only().await;
    let url = sim.url();
    let cms = "/api/v1/namespaces/default/configmaps";
    let json_body = [("Content-Type", "application/json")];
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "anonymous"}, "data": {"k": "v"}});
    let (code, created) = send(&url, "POST", cms, &json_body, &cm.to_string()).await;
    assert_eq!(code, 201, "{created}");
    let tracked = entries(&created);
    assert_eq!(tracked.len(), 1, "one Update entry for the create: {created:#}");
    assert!(tracked[0].get("manager").is_none(), "no manager name: {:#}", tracked[0]);
    assert_eq!(tracked[0]["operation"], "Update");
    assert_eq!(tracked[0]["apiVersion"], "v1");
    // The map the create brought is the creator's too (`"."`), as `Compare` adds it.
    assert_eq!(tracked[0]["fieldsV1"]["f:data"], json!({".": {}, "f:k": {}}), "{:#}", tracked[0]);

    // A second writer, named by its User-Agent, takes the field it changes from the unnamed one.
    let patch = [("Content-Type", "application/merge-patch+json"), ("User-Agent", "probe/1.0 (test)")];
    let (code, patched) =
        send(&url, "PATCH", &format!("{cms}/anonymous"), &patch, r#"{"data":{"k":"w","k2":"x"}}"#).await;
    assert_eq!(code, 200, "{patched}");
    let tracked = entries(&patched);
    let named: Vec<&Value> = tracked.iter().filter(|e| e["manager"] == "probe").collect();
    assert_eq!(named.len(), 1, "{patched:#}");
    assert_eq!(named[0]["fieldsV1"]["f:data"], json!({"f:k": {}, "f:k2": {}}), "{:#}", named[0]);
    let unnamed: Vec<&Value> = tracked.iter().filter(|e| e.get("manager").is_none()).collect();
    assert!(
        unnamed.iter().all(|e| e["fieldsV1"]["f:data"].get("f:k").is_none()),
        "the unnamed writer lost f:k: {patched:#}"
    );
}

/// The member names of a FieldsV1 node.
fn members(node: &Value) -> Vec<&str> {
    node.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default()
}

/// kube-apiserver records the creator's fields after decoding (defaults included) and before
/// admission and the strategy (create.go: `UpdateNoErrors`, then `Admit`, then `BeforeCreate`).
/// What the ServiceAccount, Priority and DefaultTolerationSeconds plugins add to a Pod, and the
/// selector and template labels the Job strategy generates, are in the object and nobody's, as
/// `kubectl get -o yaml --show-managed-fields` shows on a real cluster.
#[tokio::test]
async fn a_creator_owns_the_defaults_but_not_what_admission_and_the_strategy_add() {
    let sim = common::api_only().await;
    let url = sim.url();
    let headers =
        [("Content-Type", "application/json"), ("User-Agent", "kubectl-create/v1.37.1 (linux/amd64)")];
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "1"]}]}});
    let (code, created) =
        send(&url, "POST", "/api/v1/namespaces/default/pods", &headers, &pod.to_string()).await;
    assert_eq!(code, 201, "{created}");
    let tracked = entries(&created);
    assert_eq!(tracked.len(), 1, "{created:#}");
    assert_eq!(tracked[0]["manager"], "kubectl-create");
    // As a real cluster shows a `kubectl create`d pod's entry: the labels map and the container
    // item brought by the create are members themselves (`"."`); spec and its containers list
    // are in the zero value, so they are not. `resources` is the empty struct Go's encoder
    // writes in every container.
    assert_eq!(
        tracked[0]["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:containers": {"k:{\"name\":\"main\"}": {
                    ".": {}, "f:command": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                    "f:resources": {}, "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}
                }},
                "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {},
                "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}
            }
        }),
        "{:#}",
        tracked[0]
    );
    for added in ["serviceAccountName", "serviceAccount", "priority", "preemptionPolicy", "tolerations"] {
        assert!(created["spec"].get(added).is_some(), "admission set {added}: {created:#}");
    }

    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "pi", "image": "perl", "command": ["perl"]}]}}}});
    let (code, created) =
        send(&url, "POST", "/apis/batch/v1/namespaces/default/jobs", &headers, &job.to_string()).await;
    assert_eq!(code, 201, "{created}");
    let tracked = entries(&created);
    assert_eq!(tracked.len(), 1, "{created:#}");
    let spec = &tracked[0]["fieldsV1"]["f:spec"];
    for defaulted in ["f:backoffLimit", "f:completionMode", "f:completions", "f:parallelism", "f:suspend"] {
        assert!(spec.get(defaulted).is_some(), "{defaulted} is the creator's: {spec:#}");
    }
    assert!(spec.get("f:selector").is_none(), "the generated selector is nobody's: {spec:#}");
    assert_eq!(
        members(&spec["f:template"]),
        ["f:spec"],
        "the generated template labels are nobody's: {spec:#}"
    );
    // template, its spec and the containers list are in a Job's zero value: no `"."` for them.
    let containers = &spec["f:template"]["f:spec"]["f:containers"];
    assert_eq!(members(containers), ["k:{\"name\":\"pi\"}"], "{spec:#}");
    assert_eq!(members(&containers["k:{\"name\":\"pi\"}"])[0], ".", "{spec:#}");
    assert_eq!(created["spec"]["template"]["spec"]["containers"][0]["resources"], json!({}));
    assert!(created["spec"]["selector"]["matchLabels"].get("batch.kubernetes.io/controller-uid").is_some());
    assert!(created["spec"]["template"]["metadata"]["labels"].get("job-name").is_some());

    // A CronJob's templates carry no labels: their metadata is the empty struct Go writes, `{}`,
    // in the object and, equal to the zero value's, nowhere in the entry.
    let cronjob = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick"},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}});
    let (code, created) =
        send(&url, "POST", "/apis/batch/v1/namespaces/default/cronjobs", &headers, &cronjob.to_string())
            .await;
    assert_eq!(code, 201, "{created}");
    let job_template = &created["spec"]["jobTemplate"];
    assert_eq!(job_template["metadata"], json!({}), "{created:#}");
    assert_eq!(job_template["spec"]["template"]["metadata"], json!({}), "{created:#}");
    let tracked = entries(&created);
    let fields = &tracked[0]["fieldsV1"]["f:spec"]["f:jobTemplate"];
    assert_eq!(members(fields), ["f:spec"], "{:#}", tracked[0]);
    assert_eq!(members(&fields["f:spec"]["f:template"]), ["f:spec"], "{:#}", tracked[0]);
}
