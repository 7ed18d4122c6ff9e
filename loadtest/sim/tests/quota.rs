//! ResourceQuota as kube-apiserver enforces it: `kubectl create quota`, `get` and `describe`,
//! pod and Job creates refused with upstream's 403 message (via kube-rs and kubectl), usage
//! released by terminal and deleted pods, raising the quota, and no two concurrent creates both
//! taking the last slot.

mod common;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    }))
    .expect("pod")
}

fn job(name: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}]}}}
    }))
    .expect("job")
}

/// The 403's message, failing the test on anything else.
fn forbidden_message<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(e)) => {
            assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"), "{e:?}");
            e.message
        }
        other => panic!("expected 403 Forbidden, got {other:?}"),
    }
}

/// The (used, hard) columns of `resource` in `kubectl describe quota`'s table.
fn described(describe: &str, resource: &str) -> Option<(String, String)> {
    describe.lines().find_map(|line| {
        let cells: Vec<&str> = line.split_whitespace().collect();
        match cells.as_slice() {
            [name, used, hard] if *name == resource => Some((used.to_string(), hard.to_string())),
            _ => None,
        }
    })
}

async fn status_used(quotas: &Api<ResourceQuota>, resource: &str) -> Option<String> {
    let q = quotas.get("q").await.ok()?;
    q.status?.used?.get(resource).map(|v| v.0.clone())
}

#[tokio::test]
async fn quota_refuses_pods_and_jobs_over_hard_until_raised() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    let client = common::client(&sim);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let quotas: Api<ResourceQuota> = Api::namespaced(client, "default");

    let out = k.ok(&["create", "quota", "q", "--hard=pods=3,count/jobs.batch=2"]).await;
    assert!(out.contains("resourcequota/q created"), "{out}");
    let describe = k.ok(&["describe", "quota", "q"]).await;
    assert_eq!(described(&describe, "pods"), Some(("0".into(), "3".into())), "{describe}");
    assert_eq!(described(&describe, "count/jobs.batch"), Some(("0".into(), "2".into())), "{describe}");

    for i in 0..3 {
        pods.create(&PostParams::default(), &pod(&format!("p{i}"))).await.expect("pod within quota");
    }
    let refused = forbidden_message(pods.create(&PostParams::default(), &pod("p3")).await);
    assert_eq!(
        refused,
        "pods \"p3\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=3, limited: pods=3"
    );
    let run = k.run(&["run", "p4", "--image=busybox", "--restart=Never"]).await;
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains(
            "Error from server (Forbidden): pods \"p4\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=3, limited: pods=3"
        ),
        "{stderr}"
    );

    let describe = k.ok(&["describe", "quota", "q"]).await;
    assert_eq!(described(&describe, "pods"), Some(("3".into(), "3".into())), "{describe}");
    let table = k.ok(&["get", "quota"]).await;
    assert!(table.lines().next().is_some_and(|h| h.contains("REQUEST") && h.contains("LIMIT")), "{table}");
    assert!(table.contains("count/jobs.batch: 0/2, pods: 3/3"), "{table}");

    for name in ["j0", "j1"] {
        jobs.create(&PostParams::default(), &job(name)).await.expect("job within quota");
    }
    let refused = forbidden_message(jobs.create(&PostParams::default(), &job("j2")).await);
    assert_eq!(
        refused,
        "jobs.batch \"j2\" is forbidden: exceeded quota: q, requested: count/jobs.batch=1, used: count/jobs.batch=2, limited: count/jobs.batch=2"
    );

    // Raising spec.hard admits at once.
    k.ok(&["patch", "quota", "q", "-p", r#"{"spec":{"hard":{"pods":"4"}}}"#]).await;
    pods.create(&PostParams::default(), &pod("p3")).await.expect("pod admitted after the raise");
    assert_eq!(status_used(&quotas, "pods").await.as_deref(), Some("4"));
    let q = quotas.get("q").await.expect("quota");
    let hard = q.status.and_then(|s| s.hard).unwrap_or_default();
    assert_eq!(hard.get("pods").map(|v| v.0.as_str()), Some("4"));

    // And through kubectl apply -f.
    let raised = "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: q\nspec:\n  hard:\n    pods: \"4\"\n    count/jobs.batch: \"3\"\n";
    let f = k.write("quota.yaml", raised);
    assert!(k.ok(&["apply", "-f", &f]).await.contains("resourcequota/q configured"));
    jobs.create(&PostParams::default(), &job("j2")).await.expect("job admitted after the apply");
    let describe = k.ok(&["describe", "quota", "q"]).await;
    assert_eq!(described(&describe, "count/jobs.batch"), Some(("3".into(), "3".into())), "{describe}");
}

#[tokio::test]
async fn terminal_and_deleted_pods_stop_being_charged() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    let client = common::client(&sim);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let quotas: Api<ResourceQuota> = Api::namespaced(client, "default");
    k.ok(&["create", "quota", "q", "--hard=pods=2"]).await;
    for name in ["a", "b"] {
        pods.create(&PostParams::default(), &pod(name)).await.expect("pod within quota");
    }
    forbidden_message(pods.create(&PostParams::default(), &pod("c")).await);

    let done = json!({"status": {"phase": "Succeeded"}});
    pods.patch_status("a", &PatchParams::default(), &Patch::Merge(&done)).await.expect("pod a succeeds");
    assert_eq!(status_used(&quotas, "pods").await.as_deref(), Some("1"));
    pods.create(&PostParams::default(), &pod("c")).await.expect("a terminal pod frees its slot");
    forbidden_message(pods.create(&PostParams::default(), &pod("d")).await);

    pods.delete("b", &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() })
        .await
        .expect("delete b");
    common::wait_until("b to be gone", Duration::from_secs(10), || async {
        pods.get_opt("b").await.ok().flatten().is_none().then_some(())
    })
    .await;
    assert_eq!(status_used(&quotas, "pods").await.as_deref(), Some("1"));
    pods.create(&PostParams::default(), &pod("d")).await.expect("a deleted pod frees its slot");
}

// Worker threads so the sim serves the creates in parallel (a current-thread runtime would
// serialize them and the test could not fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_never_both_take_the_last_slot() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    let client = common::client(&sim);
    k.ok(&["create", "quota", "q", "--hard=count/pods=20"]).await;
    let creates = (0..200).map(|i| {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        async move { pods.create(&PostParams::default(), &pod(&format!("c{i}"))).await }
    });
    let results = futures::future::join_all(creates).await;
    let admitted = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(admitted, 20, "{} creates admitted", admitted);
    for refused in results.into_iter().filter(Result::is_err) {
        let message = forbidden_message(refused);
        assert!(
            message.ends_with(
                "exceeded quota: q, requested: count/pods=1, used: count/pods=20, limited: count/pods=20"
            ),
            "{message}"
        );
    }
    let quotas: Api<ResourceQuota> = Api::namespaced(client, "default");
    let used: Value = serde_json::to_value(quotas.get("q").await.expect("quota").status).expect("status");
    assert_eq!(used["used"]["count/pods"], "20");
}

fn pod_requesting(name: &str, cpu: &str, memory: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    }))
    .expect("pod")
}

#[tokio::test]
async fn compute_requests_are_charged_and_must_be_specified() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    let pods: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    k.ok(&["create", "quota", "q", "--hard=requests.cpu=1,requests.memory=1Gi"]).await;

    pods.create(&PostParams::default(), &pod_requesting("a", "600m", "512Mi")).await.expect("within quota");
    let refused =
        forbidden_message(pods.create(&PostParams::default(), &pod_requesting("b", "600m", "512Mi")).await);
    assert_eq!(
        refused,
        "pods \"b\" is forbidden: exceeded quota: q, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1"
    );
    let unspecified = forbidden_message(pods.create(&PostParams::default(), &pod("c")).await);
    assert_eq!(
        unspecified,
        "pods \"c\" is forbidden: failed quota: q: must specify requests.cpu for: main; requests.memory for: main"
    );
    pods.create(&PostParams::default(), &pod_requesting("d", "400m", "512Mi")).await.expect("fits exactly");

    let describe = k.ok(&["describe", "quota", "q"]).await;
    assert_eq!(described(&describe, "requests.cpu"), Some(("1".into(), "1".into())), "{describe}");
    assert_eq!(described(&describe, "requests.memory"), Some(("1Gi".into(), "1Gi".into())), "{describe}");
}
