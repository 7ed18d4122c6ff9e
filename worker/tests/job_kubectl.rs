//! The worker side by side with users' tools: `kubectl wait --for=condition=Complete` on a Job it
//! runs, and the managedBy hand-over mode that lets it run beside kube-controller-manager.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use batchfleet_worker::start::WorkerOptions;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn kubectl_wait_for_complete_sees_the_workers_job_finish() {
    let env = common::start().await;
    let kubectl = std::env::var_os("BATCHFLEET_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/kubectl"));
    assert!(kubectl.exists(), "kubectl not found at {}: run scripts/setup", kubectl.display());
    let dir = tempfile::tempdir().unwrap();
    env.sim.write_kubeconfig(&dir.path().join("kubeconfig")).unwrap();
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let job = common::job(
        "waited",
        json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3}),
        json!({"sim.batchfleet.io/run": "300ms"}),
    );
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let out = tokio::process::Command::new(&kubectl)
        .args(["wait", "--for=condition=Complete", "job/waited", "--timeout=60s"])
        .env("KUBECONFIG", dir.path().join("kubeconfig"))
        .env("KUBECACHEDIR", dir.path().join("cache"))
        .env("HOME", dir.path())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "job.batch/waited condition met");
}

#[tokio::test]
async fn with_a_managed_by_value_the_worker_takes_only_those_jobs() {
    let opts =
        WorkerOptions { job_managed_by: "batchfleet.io/job-controller".into(), ..WorkerOptions::default() };
    let env = common::start_with(opts).await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let ann = json!({"sim.batchfleet.io/run": "50ms"});
    jobs.create(
        &PostParams::default(),
        &common::job("moved", json!({"managedBy": "batchfleet.io/job-controller"}), ann.clone()),
    )
    .await
    .unwrap();
    // No managedBy: the built-in controller's Job.
    jobs.create(&PostParams::default(), &common::job("builtin", json!({}), ann)).await.unwrap();
    common::wait_condition(&jobs, "moved", "Complete", Duration::from_secs(60)).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    assert!(pods.list(&ListParams::default().labels("job-name=builtin")).await.unwrap().items.is_empty());
}
