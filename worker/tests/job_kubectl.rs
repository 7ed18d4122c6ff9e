//! The worker side by side with users' tools: `kubectl wait --for=condition=Complete` on a Job it
//! runs, and the managedBy hand-over mode that lets it run beside kube-controller-manager.

mod common;

use std::time::Duration;

use batchfleet_worker::start::WorkerOptions;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn kubectl_wait_for_complete_sees_the_workers_job_finish() {
    let env = common::start().await;
    let kubectl = common::Kubectl::for_sim(&env.sim);
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let job = common::job(
        "waited",
        json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3}),
        json!({"sim.batchfleet.io/run": "300ms"}),
    );
    jobs.create(&PostParams::default(), &job).await.unwrap();
    assert_eq!(
        kubectl.run(&["wait", "--for=condition=Complete", "job/waited", "--timeout=60s"]).await,
        "job.batch/waited condition met"
    );
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
    let kubectl = common::Kubectl::for_sim(&env.sim);
    kubectl.run(&["create", "quota", "tight", "--hard=pods=1"]).await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    // The admitted pod runs 10 s: while it runs the other stays refused, so the condition read
    // after `kubectl wait` is still the block's, however slow the machine (with a short pod the
    // quota frees itself and the condition may already say PodsCreated).
    let job = common::job(
        "wide",
        json!({"completions": 2, "parallelism": 2}),
        json!({"sim.batchfleet.io/run": "10s"}),
    );
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let blocked = "--for=condition=batchfleet.io/PodCreationBlocked";
    assert_eq!(
        kubectl.run(&["wait", blocked, "job/wide", "--timeout=60s"]).await,
        "job.batch/wide condition met"
    );
    let message = kubectl.run(&[
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
        let out = kubectl
            .run(&[
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
    kubectl
        .run(&["patch", "quota", "tight", "--type=merge", "-p", r#"{"spec":{"hard":{"pods":"5"}}}"#])
        .await;
    assert_eq!(
        kubectl.run(&["wait", &format!("{blocked}=false"), "job/wide", "--timeout=90s"]).await,
        "job.batch/wide condition met"
    );
    assert_eq!(
        kubectl.run(&["wait", "--for=condition=Complete", "job/wide", "--timeout=60s"]).await,
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
    let kubectl = common::Kubectl::for_sim(&env.sim);
    let manifest = |name: &str, value: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  annotations:\n    batchfleet.io/delete-counted-pods: \"{value}\"\n\
             spec:\n  completionMode: Indexed\n  completions: 4\n  parallelism: 2\n  template:\n    metadata:\n      \
             annotations:\n        sim.batchfleet.io/run: 200ms\n    spec:\n      restartPolicy: Never\n      \
             containers:\n      - name: main\n        image: busybox\n"
        )
    };
    let file = kubectl.dir().join("jobs.yaml");
    std::fs::write(&file, format!("{}---\n{}", manifest("counted", "true"), manifest("kept", "yes")))
        .unwrap();
    kubectl.run(&["apply", "-f", file.to_str().unwrap()]).await;
    for job in ["job/counted", "job/kept"] {
        assert_eq!(
            kubectl.run(&["wait", "--for=condition=Complete", job, "--timeout=90s"]).await,
            format!("{}.batch/{} condition met", "job", &job[4..])
        );
    }
    common::wait_until("the counted pods deleted", Duration::from_secs(30), || async {
        kubectl.run(&["get", "pods", "-l", "job-name=counted", "-o", "name"]).await.is_empty().then_some(())
    })
    .await;
    assert_eq!(
        kubectl.run(&["get", "job", "counted", "-o", "jsonpath={.status.completedIndexes}"]).await,
        "0-3"
    );
    assert_eq!(kubectl.run(&["get", "job", "counted", "-o", "jsonpath={.status.succeeded}"]).await, "4");
    let kept = kubectl.run(&["get", "pods", "-l", "job-name=kept", "-o", "name"]).await;
    assert_eq!(kept.lines().count(), 4, "a bad value keeps the pods: {kept}");
    let counts = kubectl
        .run(&[
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
