//! The finalizer safety net (worker/src/finalizers/) against the sim: a pod that holds
//! `batch.kubernetes.io/job-tracking` under a finished Job (k/k#109429's extra pod), which no
//! Job controller path removes, is released by the sweeper; while an admission webhook refuses
//! the patch, the pod keeps it, and the refusal is told once by Warning Events on the pod and
//! the Job that quote the webhook, and shown by the backlog gauge.

mod common;

use std::time::Duration;

use batchfleet_sim::faults::{ErrorRate, FaultConfig, FaultRule};
use batchfleet_worker::finalizers::SweepOptions;
use batchfleet_worker::finalizers::sweeper::REJECTED_REASON;
use batchfleet_worker::start::WorkerOptions;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
const TRACKING: &str = "batch.kubernetes.io/job-tracking";
const DENIED: &str = "admission webhook \"deny.example.com\" denied the request: no pod updates";

fn holds(pod: &Pod) -> bool {
    pod.metadata.finalizers.as_deref().unwrap_or(&[]).iter().any(|f| f == TRACKING)
}

fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
}

/// Job `name` run to Complete; its uid.
async fn completed_job(client: &kube::Client, name: &str) -> String {
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &common::job(name, json!({}), json!({"sim.batchfleet.io/run": "100ms"})),
    )
    .await
    .expect("create the Job");
    let job = common::wait_condition(&jobs, name, "Complete", WAIT).await;
    job.metadata.uid.clone().expect("uid")
}

/// A pod `<job>-stray` that holds the tracking finalizer under the finished Job (k/k#109429's
/// extra pod); the pods' API.
async fn create_stray_pod(client: &kube::Client, job: &str, uid: &str) -> Api<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let stray: Pod = serde_json::from_value(json!({"metadata": {
        "name": format!("{job}-stray"), "finalizers": [TRACKING],
        "annotations": {"sim.batchfleet.io/run": "100ms"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid, "controller": true}]},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}))
    .expect("a pod");
    pods.create(&PostParams::default(), &stray).await.expect("create the stray pod");
    pods
}

/// Waits until the stray pod `name` has run to Succeeded.
async fn stray_pod_finished(pods: &Api<Pod>, name: &str) {
    common::wait_until("the stray pod finished", WAIT, || async {
        let p = pods.get(name).await.ok()?;
        (p.status.as_ref()?.phase.as_deref() == Some("Succeeded")).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_stray_pod_of_a_finished_job_loses_the_finalizer_once_the_webhook_lets_it() {
    let sweep = SweepOptions {
        period: Duration::from_secs(1),
        grace: Duration::from_secs(1),
        qps: 50.0,
        ..SweepOptions::default()
    };
    let env = common::start_with(WorkerOptions {
        job_timing: common::fast_timing(),
        finalizer_sweep: sweep,
        ..WorkerOptions::default()
    })
    .await;
    let uid = completed_job(&env.client, "done").await;
    env.sim.faults().configure(FaultConfig {
        rules: vec![FaultRule {
            verb: "patch".into(),
            resource: "pods".into(),
            error_rates: vec![ErrorRate { code: 400, rate: 1.0 }],
            message: Some(DENIED.into()),
            ..FaultRule::default()
        }],
        ..FaultConfig::default()
    });
    let pods = create_stray_pod(&env.client, "done", &uid).await;

    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let told = common::wait_until("the refusal told on the pod and the Job", WAIT, || async {
        let told: Vec<Event> = events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(REJECTED_REASON))
            .collect();
        let on = |kind: &str| told.iter().any(|e| e.involved_object.kind.as_deref() == Some(kind));
        (on("Pod") && on("Job")).then_some(told)
    })
    .await;
    for e in &told {
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert!(e.message.as_deref().unwrap_or_default().contains(DENIED), "{:?}", e.message);
    }
    assert!(holds(&pods.get("done-stray").await.expect("the pod")), "refused, so still held");
    let held = common::wait_until("the backlog gauge shows the pod", WAIT, || async {
        let m = common::metrics(&env).await;
        (gauge(&m, "batchfleet_worker_finalizer_sweep_held_pods") == Some(1.0)
            && gauge(&m, "batchfleet_worker_finalizer_sweep_rejections_total").is_some_and(|r| r >= 2.0))
        .then_some(m)
    })
    .await;
    assert!(held.contains("batchfleet_worker_finalizer_sweep_held_oldest_age_seconds"));
    // Several refused attempts by now; still one Event per object.
    let counts: Vec<i32> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some(REJECTED_REASON))
        .map(|e| e.count.unwrap_or(1))
        .collect();
    assert_eq!(counts, [1, 1], "once per object, not per attempt");

    env.sim.faults().configure(FaultConfig::default());
    common::wait_until("the stray pod released", WAIT, || async {
        (!holds(&pods.get("done-stray").await.ok()?)).then_some(())
    })
    .await;
    common::wait_until("the sweeper counts the release and the backlog clears", WAIT, || async {
        let m = common::metrics(&env).await;
        (m.contains("batchfleet_worker_finalizer_sweep_releases_total{reason=\"job_finished\"} 1")
            && gauge(&m, "batchfleet_worker_finalizer_sweep_held_pods") == Some(0.0))
        .then_some(())
    })
    .await;
}

#[tokio::test]
async fn with_the_sweep_off_the_stray_pod_keeps_the_finalizer() {
    let env = common::start_with(WorkerOptions {
        job_timing: common::fast_timing(),
        // The fast sweep of the other test, turned off: were the flag ignored, it would release
        // the pod within two seconds of its creation.
        finalizer_sweep: SweepOptions {
            enabled: false,
            period: Duration::from_secs(1),
            grace: Duration::from_secs(1),
            ..SweepOptions::default()
        },
        ..WorkerOptions::default()
    })
    .await;
    let uid = completed_job(&env.client, "done").await;
    let pods = create_stray_pod(&env.client, "done", &uid).await;
    // Upstream's behaviour, the leak the sweeper exists for: the pod finishes and stays held.
    stray_pod_finished(&pods, "done-stray").await;
    // A negative holds only over a span: three of the fast sweep's periods past its grace.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(holds(&pods.get("done-stray").await.expect("the pod")), "nothing but the sweeper removes it");
    assert!(
        !common::metrics(&env).await.contains("batchfleet_worker_finalizer_sweep_"),
        "no sweeper, no metrics"
    );
}

/// Upstream's own backup without the sweeper (`updateJob` → `cleanupPodFinalizers`): any update
/// of a finished Job sends its pods that still hold the tracking finalizer to the orphan queue,
/// which releases them.
#[tokio::test]
async fn an_update_of_a_finished_job_releases_its_stray_pod_as_upstream_does() {
    let env = common::start_with(WorkerOptions {
        job_timing: common::fast_timing(),
        finalizer_sweep: SweepOptions { enabled: false, ..SweepOptions::default() },
        ..WorkerOptions::default()
    })
    .await;
    let uid = completed_job(&env.client, "touched").await;
    let pods = create_stray_pod(&env.client, "touched", &uid).await;
    stray_pod_finished(&pods, "touched-stray").await;
    assert!(holds(&pods.get("touched-stray").await.expect("the pod")), "held until the Job changes");
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let touch = json!({"metadata": {"annotations": {"example.com/touched": "yes"}}});
    jobs.patch("touched", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&touch))
        .await
        .expect("touch the Job");
    common::wait_until("the stray pod released", WAIT, || async {
        let p = pods.get("touched-stray").await.ok()?;
        (!holds(&p)).then_some(())
    })
    .await;
}

/// The sweeper's passes counted so far.
async fn passes(env: &common::Env) -> f64 {
    gauge(&common::metrics(env).await, "batchfleet_worker_finalizer_sweep_passes_total").unwrap_or(0.0)
}

/// A Job's finish or deletion wakes the sweeper only when a pod of the Job in the cache still
/// holds the tracking finalizer: on a busy worker, a pass for each would walk every cached pod
/// about once a second, for nothing, since the Job controller releases a Job's pods first.
#[tokio::test]
async fn only_a_job_that_leaves_a_held_pod_behind_wakes_the_sweeper() {
    let env = common::start_with(WorkerOptions {
        job_timing: common::fast_timing(),
        // A period far past the test's span: a pass inside it comes from a wake.
        finalizer_sweep: SweepOptions { period: Duration::from_secs(600), ..SweepOptions::default() },
        ..WorkerOptions::default()
    })
    .await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let background = kube::api::DeleteParams::background();

    completed_job(&env.client, "clean").await;
    common::wait_until("the first pass", WAIT, || async { (passes(&env).await >= 1.0).then_some(()) }).await;
    // A wake of the finish, were there one, has passed by now (passes are a second apart).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = passes(&env).await;
    jobs.delete("clean", &background).await.expect("delete the Job");
    // A negative holds only over a span: a wake's pass would follow within a second.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(passes(&env).await, before, "a Job whose pods were all released wakes nothing");

    // The same deletion with a stray pod still held under the Job does wake it.
    let uid = completed_job(&env.client, "leaky").await;
    let pods = create_stray_pod(&env.client, "leaky", &uid).await;
    stray_pod_finished(&pods, "leaky-stray").await;
    let before = passes(&env).await;
    jobs.delete("leaky", &background).await.expect("delete the Job");
    common::wait_until("a pass woken by the deletion", Duration::from_secs(20), || async {
        (passes(&env).await > before).then_some(())
    })
    .await;
}
