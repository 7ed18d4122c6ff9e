//! The real kubectl 1.37 against the sim's field handling: unknown fields with each
//! `--validate` mode, `diff` of an unchanged object, and server-side apply's field managers.

mod common;

use serde_json::Value;

const BOGUS_CM: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  x: \"1\"\nbogusField: 1\n";

#[tokio::test]
async fn apply_with_an_unknown_field_per_validate_mode() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    let f = k.write("cm.yaml", BOGUS_CM);

    // kubectl's default is --validate=strict: the server's 400, as kubectl prints it.
    let out = k.run(&["apply", "-f", &f]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "Error from server (BadRequest): error when creating \"",
        ) && stderr.contains(
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogusField\""
        ),
        "{stderr}"
    );

    // --validate=warn: created, the field dropped, kubectl prints the server's warning.
    let out = k.run(&["apply", "--validate=warn", "-f", &f]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("Warning: unknown field \"bogusField\""), "{stderr}");
    let got: Value = serde_json::from_str(&k.ok(&["get", "configmap", "conf", "-o", "json"]).await).unwrap();
    assert!(got.get("bogusField").is_none(), "{got}");
    assert_eq!(got["data"]["x"], "1");

    // An update (client-side apply sends a strategic merge patch): strict is the 422 on `patch`.
    let changed = BOGUS_CM.replace("x: \"1\"", "x: \"2\"");
    let f = k.write("cm.yaml", &changed);
    let out = k.run(&["apply", "--validate=strict", "-f", &f]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("strict decoding error: unknown field \"bogusField\""), "{stderr}");
    // --validate=false (Ignore): accepted silently.
    let out = k.run(&["apply", "--validate=false", "-f", &f]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !stderr.contains("Warning"), "{stderr}");
    let got: Value = serde_json::from_str(&k.ok(&["get", "configmap", "conf", "-o", "json"]).await).unwrap();
    assert_eq!(got["data"]["x"], "2");
}

const WITH_EMPTIES: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: quiet
  labels: {}
  annotations: {}
  finalizers: []
data: {}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: quiet
  labels:
    app: quiet
  annotations: {}
  finalizers: []
spec:
  template:
    metadata:
      labels: {}
    spec:
      restartPolicy: Never
      nodeSelector: {}
      tolerations: []
      containers:
      - name: main
        image: busybox
        env: []
        resources: {}
"#;

/// `kubectl diff` of objects just applied, unchanged, shows nothing and exits 0: empty maps and
/// lists are not stored (Go's omitempty), so the live objects and the dry run agree.
#[tokio::test]
async fn diff_of_an_unchanged_applied_object_is_empty() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    let f = k.write("objects.yaml", WITH_EMPTIES);
    k.ok(&["apply", "-f", &f]).await;
    let cm: Value = serde_json::from_str(&k.ok(&["get", "configmap", "quiet", "-o", "json"]).await).unwrap();
    for key in ["labels", "annotations", "finalizers"] {
        // Only kubectl's last-applied annotation is there.
        assert!(
            cm["metadata"]
                .get(key)
                .is_none_or(|v| v.get("kubectl.kubernetes.io/last-applied-configuration").is_some()),
            "{cm}"
        );
    }
    assert!(cm.get("data").is_none(), "{cm}");
    let job: Value = serde_json::from_str(&k.ok(&["get", "job", "quiet", "-o", "json"]).await).unwrap();
    assert!(job["spec"]["template"]["spec"].get("nodeSelector").is_none(), "{job}");
    assert_eq!(job["spec"]["template"]["spec"]["containers"][0]["resources"], serde_json::json!({}));

    let out = k.run(&["diff", "-f", &f]).await;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "diff: {stdout}\n{stderr}");
    assert!(stdout.is_empty(), "{stdout}");

    // A real change is a diff (exit 1).
    let f = k.write("objects.yaml", &WITH_EMPTIES.replacen("labels: {}", "labels:\n    a: b", 1));
    let out = k.run(&["diff", "-f", &f]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("+    a: b"), "{stdout}");
}

fn cm_yaml(data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: owned\ndata:\n{data}")
}

/// `kubectl apply --server-side` by two field managers: a conflicting value is a 409 that names
/// the other manager and the field; `--force-conflicts` takes the field over; a field a manager
/// stops applying is removed; `get --show-managed-fields` shows the entries.
#[tokio::test]
async fn server_side_apply_conflicts_force_and_pruning() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    let f = k.write("one.yaml", &cm_yaml("  x: \"1\"\n  k: \"1\"\n"));
    k.ok(&["apply", "--server-side", "--field-manager=one", "-f", &f]).await;

    let f2 = k.write("two.yaml", &cm_yaml("  x: \"2\"\n"));
    let out = k.run(&["apply", "--server-side", "--field-manager=two", "-f", &f2]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("Apply failed with 1 conflict: conflict with \"one\": .data.x"), "{stderr}");

    let out = k.run(&["apply", "--server-side", "--field-manager=two", "--force-conflicts", "-f", &f2]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let yaml = k.ok(&["get", "configmap", "owned", "-o", "yaml", "--show-managed-fields"]).await;
    assert!(yaml.contains("manager: one") && yaml.contains("manager: two"), "{yaml}");
    assert!(yaml.contains("operation: Apply") && yaml.contains("fieldsV1:"), "{yaml}");
    let got: Value = serde_json::from_str(
        &k.ok(&["get", "configmap", "owned", "-o", "json", "--show-managed-fields"]).await,
    )
    .unwrap();
    assert_eq!(got["data"], serde_json::json!({"x": "2", "k": "1"}));
    let one = got["metadata"]["managedFields"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["manager"] == "one"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(one["fieldsV1"], serde_json::json!({"f:data": {"f:k": {}}}), "x changed hands: {got}");

    // Manager one stops applying k: it is removed (nobody else owns it).
    let f = k.write("one.yaml", &cm_yaml("  z: \"1\"\n"));
    k.ok(&["apply", "--server-side", "--field-manager=one", "-f", &f]).await;
    let got: Value = serde_json::from_str(
        &k.ok(&["get", "configmap", "owned", "-o", "json", "--show-managed-fields"]).await,
    )
    .unwrap();
    assert_eq!(got["data"], serde_json::json!({"x": "2", "z": "1"}));
}

/// A client-side apply records an `Update` entry for `kubectl-client-side-apply`; a server-side
/// apply by another manager that changes its fields conflicts with it, named with its version.
#[tokio::test]
async fn server_side_apply_after_client_side_apply() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    let f = k.write("cm.yaml", &cm_yaml("  x: \"1\"\n"));
    k.ok(&["apply", "-f", &f]).await;
    let got: Value = serde_json::from_str(
        &k.ok(&["get", "configmap", "owned", "-o", "json", "--show-managed-fields"]).await,
    )
    .unwrap();
    let managers: Vec<(&str, &str)> = got["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| (e["manager"].as_str().unwrap_or(""), e["operation"].as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(managers, [("kubectl-client-side-apply", "Update")], "{got}");

    let f2 = k.write("cm2.yaml", &cm_yaml("  x: \"2\"\n"));
    let out = k.run(&["apply", "--server-side", "--field-manager=other", "-f", &f2]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .data.x"
        ),
        "{stderr}"
    );
    // kubectl's own manager upgrades from client-side apply without a conflict.
    k.ok(&["apply", "--server-side", "-f", &f2]).await;
    let got: Value = serde_json::from_str(
        &k.ok(&["get", "configmap", "owned", "-o", "json", "--show-managed-fields"]).await,
    )
    .unwrap();
    assert_eq!(got["data"]["x"], "2");

    // kubectl patch and edit-like writes are Update entries of their own manager.
    k.ok(&["patch", "configmap", "owned", "-p", r#"{"data":{"p":"1"}}"#]).await;
    let got: Value = serde_json::from_str(
        &k.ok(&["get", "configmap", "owned", "-o", "json", "--show-managed-fields"]).await,
    )
    .unwrap();
    let patcher = got["metadata"]["managedFields"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["manager"] == "kubectl-patch"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(patcher["operation"], "Update", "{got}");
    assert_eq!(patcher["fieldsV1"], serde_json::json!({"f:data": {"f:p": {}}}));
}
