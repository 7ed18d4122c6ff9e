//! The Job controller end to end against the sim cluster: the cases upstream's e2e suite
//! (test/e2e/apps/job.go) covers, with pods moved by the simulated kubelet.

mod common;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_job_runs_to_completion() {
    let env = common::start().await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &common::job(
            "done",
            json!({"parallelism": 2, "completions": 4}),
            json!({"sim.batchfleet.io/run": "200ms"}),
        ),
    )
    .await
    .unwrap();
    let job = common::wait_condition(&jobs, "done", "Complete", WAIT).await;
    let status = job.status.clone().unwrap();
    assert_eq!((status.succeeded, status.failed, status.active), (Some(4), None, None));
    assert!(status.completion_time.is_some() && status.start_time.is_some());
    let complete = common::condition(&job, "Complete").unwrap();
    assert_eq!(complete.reason.as_deref(), Some("CompletionsReached"));
    assert_eq!(complete.message.as_deref(), Some("Reached expected number of succeeded pods"));
    assert!(common::condition(&job, "SuccessCriteriaMet").is_some());
    // Every pod was counted and lost its tracking finalizer.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let list = pods.list(&ListParams::default().labels("job-name=done")).await.unwrap();
    assert_eq!(list.items.len(), 4);
    assert!(list.items.iter().all(|p| p.metadata.finalizers.as_deref().unwrap_or(&[]).is_empty()));
    let reasons = common::wait_until("the Completed event", WAIT, || async {
        let r = common::event_reasons(&env.client, "default", "done").await;
        r.contains(&"Completed".to_string()).then_some(r)
    })
    .await;
    assert!(reasons.contains(&"SuccessfulCreate".to_string()), "{reasons:?}");
    let metrics = common::metrics(&env).await;
    assert!(metrics.contains("job_controller_jobs_finished_total{completion_mode=\"NonIndexed\",reason=\"CompletionsReached\",result=\"succeeded\"} 1"), "{metrics}");
    assert!(metrics.contains("workqueue_adds_total{name=\"job\"}"), "{metrics}");
}
