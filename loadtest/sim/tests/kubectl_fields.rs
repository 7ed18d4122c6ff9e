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
