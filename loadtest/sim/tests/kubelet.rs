//! The simulated kubelet and the everyday commands around it, through the real kubectl 1.37 and
//! kube-rs: crash-loop back-off, pod events, `kubectl logs`, the clear refusal of exec, namespace
//! defaults, qosClass, and error bodies with details.

mod common;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

fn pod(name: &str, annotations: serde_json::Value, restart_policy: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"restartPolicy": restart_policy, "containers": [{"name": "main", "image": "busybox"}]}
    }))
    .expect("pod")
}

async fn running(api: &Api<Pod>, name: &str) -> Pod {
    common::wait_until(&format!("pod {name} Running"), Duration::from_secs(20), || async {
        let p = api.get(name).await.ok()?;
        (p.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(p)
    })
    .await
}

/// `kubectl debug` reads `details` of the 404 for the ephemeralcontainers subresource (it used
/// to dereference none and panic) and says ephemeral containers are unavailable.
#[tokio::test]
async fn kubectl_debug_reports_ephemeral_containers_unavailable() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    api.create(&PostParams::default(), &pod("target", json!({"sim.batchfleet.io/run": "forever"}), "Never"))
        .await
        .unwrap();
    running(&api, "target").await;
    let out = k.run(&["debug", "target", "--image=busybox"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!stderr.contains("panic"), "{stderr}");
    assert!(stderr.contains("ephemeral containers are disabled for this cluster"), "{stderr}");
    // A missing pod is a NotFound with details naming it.
    let out = k.run(&["debug", "nosuch", "--image=busybox"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(r#"pods "nosuch" not found"#), "{stderr}");
}
