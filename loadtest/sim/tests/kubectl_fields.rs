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
