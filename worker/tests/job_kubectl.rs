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

/// A quota the Job does not fit in, as a user sees it with kubectl: `kubectl wait` for the
/// `batchfleet.io/PodCreationBlocked` condition, the Warning Event quoting the API's 403, then,
/// once the quota is raised with `kubectl patch`, the condition False and the Job Complete.
#[tokio::test]
async fn kubectl_sees_a_quota_block_the_job_and_clear_when_raised() {
    let env = common::start().await;
    let kubectl = std::env::var_os("BATCHFLEET_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/kubectl"));
    assert!(kubectl.exists(), "kubectl not found at {}: run scripts/setup", kubectl.display());
    let dir = tempfile::tempdir().unwrap();
    env.sim.write_kubeconfig(&dir.path().join("kubeconfig")).unwrap();
    let kubeconfig_dir = dir.path().to_path_buf();
    let run = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let (kubectl, dir) = (kubectl.clone(), kubeconfig_dir.clone());
        async move { kubectl_out(&kubectl, &dir, &args).await }
    };
    run(&["create", "quota", "tight", "--hard=pods=1"]).await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let job = common::job(
        "wide",
        json!({"completions": 2, "parallelism": 2}),
        json!({"sim.batchfleet.io/run": "300ms"}),
    );
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let blocked = "--for=condition=batchfleet.io/PodCreationBlocked";
    assert_eq!(run(&["wait", blocked, "job/wide", "--timeout=60s"]).await, "job.batch/wide condition met");
    let message = run(&[
        "get",
        "job",
        "wide",
        "-o",
        r#"jsonpath={.status.conditions[?(@.type=="batchfleet.io/PodCreationBlocked")].reason}: {.status.conditions[?(@.type=="batchfleet.io/PodCreationBlocked")].message}"#,
    ])
    .await;
    assert!(
        message.starts_with("QuotaExceeded: ")
            && message.contains("exceeded quota: tight, requested: pods=1, used: pods=1, limited: pods=1"),
        "{message}"
    );
    let events = common::wait_until("the PodCreationBlocked Event", Duration::from_secs(30), || async {
        let out = run(&[
            "get",
            "events",
            "--field-selector",
            "reason=PodCreationBlocked",
            "-o",
            "jsonpath={.items[*].message}",
        ])
        .await;
        (!out.is_empty()).then_some(out)
    })
    .await;
    assert!(events.contains("exceeded quota: tight"), "{events}");
    run(&["patch", "quota", "tight", "--type=merge", "-p", r#"{"spec":{"hard":{"pods":"5"}}}"#]).await;
    assert_eq!(
        run(&["wait", &format!("{blocked}=false"), "job/wide", "--timeout=90s"]).await,
        "job.batch/wide condition met"
    );
    assert_eq!(
        run(&["wait", "--for=condition=Complete", "job/wide", "--timeout=60s"]).await,
        "job.batch/wide condition met"
    );
}

/// `batchfleet.io/delete-counted-pods` as a user sees it: `kubectl apply` an annotated Indexed
/// Job, `kubectl wait` for Complete, and `kubectl get pods` shows its succeeded pods gone while
/// `completedIndexes` still counts every index; a Job with a bad value keeps its pods and gets
/// one Warning Event (count 1: not one per sync).
#[tokio::test]
async fn kubectl_sees_the_counted_pods_of_an_annotated_job_deleted() {
    let env = common::start().await;
    let kubectl = std::env::var_os("BATCHFLEET_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/kubectl"));
    assert!(kubectl.exists(), "kubectl not found at {}: run scripts/setup", kubectl.display());
    let dir = tempfile::tempdir().unwrap();
    env.sim.write_kubeconfig(&dir.path().join("kubeconfig")).unwrap();
    let kubeconfig_dir = dir.path().to_path_buf();
    let run = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let (kubectl, dir) = (kubectl.clone(), kubeconfig_dir.clone());
        async move { kubectl_out(&kubectl, &dir, &args).await }
    };
    let manifest = |name: &str, value: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  annotations:\n    batchfleet.io/delete-counted-pods: \"{value}\"\n\
             spec:\n  completionMode: Indexed\n  completions: 4\n  parallelism: 2\n  template:\n    metadata:\n      \
             annotations:\n        sim.batchfleet.io/run: 200ms\n    spec:\n      restartPolicy: Never\n      \
             containers:\n      - name: main\n        image: busybox\n"
        )
    };
    let file = dir.path().join("jobs.yaml");
    std::fs::write(&file, format!("{}---\n{}", manifest("counted", "true"), manifest("kept", "yes")))
        .unwrap();
    run(&["apply", "-f", file.to_str().unwrap()]).await;
    for job in ["job/counted", "job/kept"] {
        assert_eq!(
            run(&["wait", "--for=condition=Complete", job, "--timeout=90s"]).await,
            format!("{}.batch/{} condition met", "job", &job[4..])
        );
    }
    common::wait_until("the counted pods deleted", Duration::from_secs(30), || async {
        run(&["get", "pods", "-l", "job-name=counted", "-o", "name"]).await.is_empty().then_some(())
    })
    .await;
    assert_eq!(run(&["get", "job", "counted", "-o", "jsonpath={.status.completedIndexes}"]).await, "0-3");
    assert_eq!(run(&["get", "job", "counted", "-o", "jsonpath={.status.succeeded}"]).await, "4");
    let kept = run(&["get", "pods", "-l", "job-name=kept", "-o", "name"]).await;
    assert_eq!(kept.lines().count(), 4, "a bad value keeps the pods: {kept}");
    let counts = run(&[
        "get",
        "events",
        "--field-selector",
        "reason=InvalidDeleteCountedPods",
        "-o",
        "jsonpath={.items[*].involvedObject.name}={.items[*].count}",
    ])
    .await;
    assert_eq!(counts, "kept=1", "one Event for the bad value");
}

async fn kubectl_out(kubectl: &std::path::Path, dir: &std::path::Path, args: &[String]) -> String {
    let out = tokio::process::Command::new(kubectl)
        .args(args)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env("KUBECACHEDIR", dir.join("cache"))
        .env("HOME", dir)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
