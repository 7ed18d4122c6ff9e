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

/// The same Job with the worker speaking HTTP/2 (as it does to a TLS API server): its pods'
/// watch, their creates, finalizer patches and the status writes share two connections.
#[tokio::test]
async fn a_job_runs_to_completion_over_http2() {
    let env = common::start_with(batchfleet_worker::start::WorkerOptions {
        job_timing: common::fast_timing(),
        api_protocol: batchfleet_worker::client::ApiProtocol::Http2,
        ..Default::default()
    })
    .await;
    let jobs = create(
        &env,
        common::job(
            "h2",
            json!({"parallelism": 3, "completions": 6}),
            json!({"sim.batchfleet.io/run": "100ms"}),
        ),
    )
    .await;
    let job = common::wait_condition(&jobs, "h2", "Complete", WAIT).await;
    assert_eq!((status(&job).succeeded, status(&job).failed, status(&job).active), (Some(6), None, None));
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let list = pods.list(&ListParams::default().labels("job-name=h2")).await.unwrap();
    assert_eq!(list.items.len(), 6);
    assert!(list.items.iter().all(|p| p.metadata.finalizers.as_deref().unwrap_or(&[]).is_empty()));
}

fn status(job: &Job) -> k8s_openapi::api::batch::v1::JobStatus {
    job.status.clone().unwrap_or_default()
}

async fn create(env: &common::Env, job: Job) -> Api<Job> {
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    jobs.create(&PostParams::default(), &job).await.unwrap();
    jobs
}

/// e2e "should run a job to completion when tasks sometimes fail and are not locally restarted".
#[tokio::test]
async fn failed_pods_are_replaced_after_back_off() {
    let env = common::start().await;
    let ann = json!({"sim.batchfleet.io/run": "100ms", "sim.batchfleet.io/exit-code": "1", "sim.batchfleet.io/fail-attempts": "2"});
    let jobs = create(&env, common::job("flaky", json!({"completions": 1, "backoffLimit": 6}), ann)).await;
    let job = common::wait_condition(&jobs, "flaky", "Complete", WAIT).await;
    let st = status(&job);
    assert_eq!((st.succeeded, st.failed), (Some(1), Some(2)));
}

/// e2e "should run a job to completion when tasks sometimes fail and are locally restarted".
#[tokio::test]
async fn on_failure_restarts_in_place_and_completes() {
    let env = common::start().await;
    let ann = json!({"sim.batchfleet.io/run": "100ms", "sim.batchfleet.io/exit-code": "1", "sim.batchfleet.io/fail-attempts": "2"});
    let jobs =
        create(&env, common::job("restarts", json!({"restartPolicy": "OnFailure", "backoffLimit": 6}), ann))
            .await;
    let job = common::wait_condition(&jobs, "restarts", "Complete", WAIT).await;
    let st = status(&job);
    assert_eq!((st.succeeded, st.failed.unwrap_or(0)), (Some(1), 0));
}

/// e2e "should fail a job when the backoff limit is exceeded" (restarts count under OnFailure).
#[tokio::test]
async fn backoff_limit_exceeded() {
    let env = common::start().await;
    let ann = json!({"sim.batchfleet.io/run": "50ms", "sim.batchfleet.io/exit-code": "1"});
    let jobs = create(&env, common::job("hopeless", json!({"backoffLimit": 1}), ann)).await;
    let job = common::wait_condition(&jobs, "hopeless", "Failed", WAIT).await;
    let failed = common::condition(&job, "Failed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(failed.message.as_deref(), Some("Job has reached the specified backoff limit"));
    assert!(common::condition(&job, "FailureTarget").is_some());
    assert_eq!(status(&job).failed, Some(2));
    let reasons = common::wait_until("the BackoffLimitExceeded event", WAIT, || async {
        let r = common::event_reasons(&env.client, "default", "hopeless").await;
        r.contains(&"BackoffLimitExceeded".to_string()).then_some(r)
    })
    .await;
    assert!(reasons.contains(&"SuccessfulCreate".to_string()));
}

/// e2e "should fail a job when active deadline is exceeded": running pods are deleted.
#[tokio::test]
async fn active_deadline_fails_the_job_and_deletes_its_pods() {
    let env = common::start().await;
    let ann = json!({"sim.batchfleet.io/run": "forever"});
    let jobs = create(
        &env,
        common::job("deadline", json!({"parallelism": 2, "completions": 2, "activeDeadlineSeconds": 1}), ann),
    )
    .await;
    let job = common::wait_condition(&jobs, "deadline", "Failed", WAIT).await;
    let failed = common::condition(&job, "Failed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(failed.message.as_deref(), Some("Job was active longer than specified deadline"));
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    common::wait_until("the pods to be gone", WAIT, || async {
        pods.list(&ListParams::default().labels("job-name=deadline"))
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
}

/// e2e "should not create pods when created in suspend state" and "should delete pods when
/// suspended", then resume.
#[tokio::test]
async fn suspend_and_resume() {
    let env = common::start().await;
    let ann = json!({"sim.batchfleet.io/run": "300ms"});
    let jobs = create(
        &env,
        common::job("sleepy", json!({"suspend": true, "parallelism": 2, "completions": 2}), ann),
    )
    .await;
    let job = common::wait_condition(&jobs, "sleepy", "Suspended", WAIT).await;
    assert_eq!(common::condition(&job, "Suspended").unwrap().reason.as_deref(), Some("JobSuspended"));
    assert!(status(&job).start_time.is_none(), "no startTime while created suspended");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    assert!(pods.list(&ListParams::default().labels("job-name=sleepy")).await.unwrap().items.is_empty());
    let resume = json!({"spec": {"suspend": false}});
    jobs.patch("sleepy", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&resume))
        .await
        .unwrap();
    let job = common::wait_condition(&jobs, "sleepy", "Complete", WAIT).await;
    let suspended = common::condition(&job, "Suspended").unwrap();
    assert_eq!((suspended.status.as_str(), suspended.reason.as_deref()), ("False", Some("JobResumed")));
    assert!(status(&job).start_time.is_some());
    let reasons = common::event_reasons(&env.client, "default", "sleepy").await;
    for r in ["Suspended", "Resumed"] {
        assert!(reasons.contains(&r.to_string()), "{reasons:?}");
    }
}

/// e2e "should create pods for an Indexed job with completion indexes and specified hostname".
#[tokio::test]
async fn indexed_job_tracks_completed_indexes() {
    let env = common::start().await;
    let ann = json!({"sim.batchfleet.io/run": "100ms"});
    let jobs = create(
        &env,
        common::job("indexed", json!({"completionMode": "Indexed", "completions": 4, "parallelism": 2}), ann),
    )
    .await;
    let job = common::wait_condition(&jobs, "indexed", "Complete", WAIT).await;
    assert_eq!(status(&job).completed_indexes.as_deref(), Some("0-3"));
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let mut indexes: Vec<String> = pods
        .list(&ListParams::default().labels("job-name=indexed"))
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| {
            let index =
                p.metadata.annotations.as_ref().unwrap()["batch.kubernetes.io/job-completion-index"].clone();
            assert_eq!(
                p.spec.as_ref().unwrap().hostname.as_deref(),
                Some(format!("indexed-{index}").as_str())
            );
            assert!(p.metadata.name.as_ref().unwrap().starts_with(&format!("indexed-{index}-")));
            index
        })
        .collect();
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2", "3"]);
}

/// e2e "should allow to use the pod failure policy on exit code to fail the job early".
#[tokio::test]
async fn pod_failure_policy_fail_job_on_exit_code() {
    let env = common::start().await;
    let ann = json!({"sim.batchfleet.io/run": "50ms", "sim.batchfleet.io/exit-code": "42"});
    let spec = json!({"backoffLimit": 6, "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}});
    let jobs = create(&env, common::job("pfp", spec, ann)).await;
    let job = common::wait_condition(&jobs, "pfp", "Failed", WAIT).await;
    let failed = common::condition(&job, "Failed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("PodFailurePolicy"));
    let message = failed.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("Container main for pod default/pfp-")
            && message.ends_with("failed with exit code 42 matching FailJob rule at index 0"),
        "{message}"
    );
    assert_eq!(status(&job).failed, Some(1), "failed early, without retries");
}

/// e2e "should allow to use the pod failure policy to not count the failure towards the backoffLimit".
#[tokio::test]
async fn pod_failure_policy_ignore_does_not_count() {
    let env = common::start().await;
    let ann = json!({"sim.batchfleet.io/run": "50ms", "sim.batchfleet.io/exit-code": "3", "sim.batchfleet.io/fail-attempts": "2"});
    let spec = json!({"backoffLimit": 0, "podFailurePolicy": {"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}}]}});
    let jobs = create(&env, common::job("ignore", spec, ann)).await;
    let job = common::wait_condition(&jobs, "ignore", "Complete", WAIT).await;
    let st = status(&job);
    assert_eq!((st.succeeded, st.failed.unwrap_or(0)), (Some(1), 0));
}

/// e2e "should execute all indexes despite some failing when using backoffLimitPerIndex".
#[tokio::test]
async fn backoff_limit_per_index_fails_only_that_index() {
    let env = common::start().await;
    let ann = json!({"sim.batchfleet.io/run": "50ms", "sim.batchfleet.io/exit-code-by-index": "1=7"});
    let spec =
        json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 1});
    let jobs = create(&env, common::job("per-index", spec, ann)).await;
    let job = common::wait_condition(&jobs, "per-index", "Failed", WAIT).await;
    let st = status(&job);
    assert_eq!(st.failed_indexes.as_deref(), Some("1"));
    assert_eq!(st.completed_indexes.as_deref(), Some("0,2"));
    assert_eq!(st.failed, Some(2), "index 1 ran twice");
    assert_eq!(common::condition(&job, "Failed").unwrap().reason.as_deref(), Some("FailedIndexes"));
}

/// e2e "with successPolicy succeededIndexes rule should succeed even when some indexes remain pending".
#[tokio::test]
async fn success_policy_completes_early_and_deletes_the_rest() {
    let env = common::start().await;
    let ann = json!({"sim.batchfleet.io/run": "forever", "sim.batchfleet.io/run-by-index": "0=100ms"});
    let spec = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3,
                      "successPolicy": {"rules": [{"succeededIndexes": "0"}]}});
    let jobs = create(&env, common::job("early", spec, ann)).await;
    let job = common::wait_condition(&jobs, "early", "Complete", WAIT).await;
    let met = common::condition(&job, "SuccessCriteriaMet").unwrap();
    assert_eq!(met.reason.as_deref(), Some("SuccessPolicy"));
    assert_eq!(common::condition(&job, "Complete").unwrap().reason.as_deref(), Some("SuccessPolicy"));
    assert_eq!(status(&job).completed_indexes.as_deref(), Some("0"));
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    common::wait_until("the remaining pods to be deleted", WAIT, || async {
        let running = pods.list(&ListParams::default().labels("job-name=early")).await.ok()?.items;
        running
            .iter()
            .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running"))
            .then_some(())
    })
    .await;
}

/// The worker removes the tracking finalizer of pods orphaned by their Job's deletion.
#[tokio::test]
async fn orphaned_pods_lose_the_tracking_finalizer() {
    let env = common::start().await;
    let ann = json!({"sim.batchfleet.io/run": "forever"});
    let jobs = create(&env, common::job("orphaner", json!({"parallelism": 2, "completions": 2}), ann)).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    common::wait_until("two running pods", WAIT, || async {
        let items = pods.list(&ListParams::default().labels("job-name=orphaner")).await.ok()?.items;
        (items.len() == 2
            && items.iter().all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")))
        .then_some(())
    })
    .await;
    jobs.delete("orphaner", &kube::api::DeleteParams::orphan()).await.unwrap();
    common::wait_until("orphans without the tracking finalizer", WAIT, || async {
        let items = pods.list(&ListParams::default().labels("job-name=orphaner")).await.ok()?.items;
        (items.len() == 2
            && items.iter().all(|p| {
                p.metadata.owner_references.as_deref().unwrap_or(&[]).is_empty()
                    && !p
                        .metadata
                        .finalizers
                        .as_deref()
                        .unwrap_or(&[])
                        .iter()
                        .any(|f| f == "batch.kubernetes.io/job-tracking")
            }))
        .then_some(())
    })
    .await;
}

/// A Job managed by another controller is left alone (spec.managedBy).
#[tokio::test]
async fn jobs_managed_by_another_controller_are_skipped() {
    let env = common::start().await;
    let ann = json!({"sim.batchfleet.io/run": "50ms"});
    let jobs =
        create(&env, common::job("theirs", json!({"managedBy": "example.com/other"}), ann.clone())).await;
    create(&env, common::job("ours", json!({}), ann)).await;
    common::wait_condition(&jobs, "ours", "Complete", WAIT).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    assert!(pods.list(&ListParams::default().labels("job-name=theirs")).await.unwrap().items.is_empty());
    assert!(jobs.get("theirs").await.unwrap().status.unwrap_or_default().conditions.is_none());
}

/// Expectations: while the worker's watches lag its own writes by 1.5s, it must not create pods
/// it already created (upstream's ControllerExpectations).
#[tokio::test]
async fn a_lagging_cache_never_makes_the_worker_over_create() {
    let env = common::start().await;
    env.sim.faults().configure(batchfleet_sim::faults::FaultConfig {
        watch: batchfleet_sim::faults::WatchFaults { delay_ms: Some(1500), ..Default::default() },
        ..Default::default()
    });
    let jobs = create(
        &env,
        common::job(
            "steady",
            json!({"parallelism": 3, "completions": 3}),
            json!({"sim.batchfleet.io/run": "forever"}),
        ),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let mut most = 0;
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(6) {
        let n = pods.list(&ListParams::default().labels("job-name=steady")).await.unwrap().items.len();
        most = most.max(n);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(most, 3, "never more pods than parallelism");
    let job = jobs.get("steady").await.unwrap();
    assert_eq!(status(&job).active, Some(3));
}
