//! `batchfleet.io/trigger` and `batchfleet.io/next-schedule-time` as users meet them: kubectl
//! annotates a CronJob whose schedule will not fire during the test, the worker runs it once
//! per new value under concurrencyPolicy Forbid, and kubectl reads the annotations back.

mod common;

use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

async fn event_reasons(client: &kube::Client) -> Vec<String> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let lp = ListParams::default().fields("involvedObject.name=nightly,involvedObject.kind=CronJob");
    api.list(&lp).await.map(|l| l.items.into_iter().filter_map(|e| e.reason).collect()).unwrap_or_default()
}

#[tokio::test]
async fn kubectl_annotate_trigger_runs_once_per_value_under_forbid() {
    let env = common::start_fast_clock().await;
    let kubectl = common::Kubectl::for_sim(&env.sim);
    let cjs: Api<CronJob> = Api::namespaced(env.client.clone(), "default");
    // Once a year, on 1 January at midnight: even on the 60× clock it does not fire in the test.
    let cronjob: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 0 1 1 *", "concurrencyPolicy": "Forbid", "jobTemplate": {"spec": {"template": {
            "metadata": {"annotations": {"sim.batchfleet.io/run": "forever"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}}}}
    }))
    .unwrap();
    cjs.create(&PostParams::default(), &cronjob).await.unwrap();

    // The controller writes the next time; kubectl reads it.
    let next = common::wait_until("the next-schedule-time annotation", WAIT, || async {
        let cj = cjs.get("nightly").await.ok()?;
        cj.metadata.annotations?.get("batchfleet.io/next-schedule-time").cloned()
    })
    .await;
    assert!(next.ends_with("-01-01T00:00:00Z"), "{next}");
    let shown = kubectl
        .run(&[
            "get",
            "cronjob",
            "nightly",
            "-o",
            r"jsonpath={.metadata.annotations.batchfleet\.io/next-schedule-time}",
        ])
        .await;
    assert_eq!(shown, next);

    kubectl.run(&["annotate", "cronjob", "nightly", "batchfleet.io/trigger=first"]).await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let job = common::wait_until("the triggered Job", WAIT, || async {
        jobs.list(&ListParams::default()).await.ok()?.items.into_iter().next()
    })
    .await;
    let name = job.metadata.name.clone().unwrap();
    assert!(name.starts_with("nightly-t"), "{name}");
    assert_eq!(job.metadata.annotations.as_ref().unwrap()["batchfleet.io/triggered-by"], "first");
    common::wait_until("trigger-handled", WAIT, || async {
        let cj = cjs.get("nightly").await.ok()?;
        (cj.metadata.annotations?.get("batchfleet.io/trigger-handled")? == "first").then_some(())
    })
    .await;
    let cj = cjs.get("nightly").await.unwrap();
    assert!(
        cj.status.as_ref().and_then(|s| s.last_schedule_time.as_ref()).is_none(),
        "a trigger is not a schedule's run"
    );
    assert_eq!(cj.status.as_ref().and_then(|s| s.active.as_ref()).map(Vec::len), Some(1));

    // A new value while that Job runs: Forbid skips it, and says so.
    kubectl.run(&["annotate", "cronjob", "nightly", "--overwrite", "batchfleet.io/trigger=second"]).await;
    common::wait_until("TriggerSkipped", WAIT, || async {
        event_reasons(&env.client).await.iter().any(|r| r == "TriggerSkipped").then_some(())
    })
    .await;
    let handled = kubectl
        .run(&[
            "get",
            "cronjob",
            "nightly",
            "-o",
            r"jsonpath={.metadata.annotations.batchfleet\.io/trigger-handled}",
        ])
        .await;
    assert_eq!(handled, "second");
    assert_eq!(jobs.list(&ListParams::default()).await.unwrap().items.len(), 1, "Forbid: no second Job");
    assert!(event_reasons(&env.client).await.iter().any(|r| r == "Triggered"));
}
