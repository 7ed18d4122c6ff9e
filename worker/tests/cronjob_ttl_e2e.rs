//! The CronJob and TTL-after-finished controllers end to end against the sim cluster. The
//! CronJob controller's clock runs 60 times faster than real time, so `@every 1m` fires every
//! second of the test.

mod common;

use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn cronjob(name: &str, spec: Value, annotations: Value) -> CronJob {
    let mut spec = spec;
    spec["jobTemplate"] = json!({"spec": {"backoffLimit": 0, "template": {
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    }}});
    serde_json::from_value(
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name}, "spec": spec}),
    )
    .expect("cronjob")
}

async fn jobs_of(api: &Api<Job>, cronjob: &str) -> Vec<Job> {
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|j| {
                    j.metadata
                        .owner_references
                        .as_deref()
                        .unwrap_or(&[])
                        .iter()
                        .any(|o| o.kind == "CronJob" && o.name == cronjob)
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn cronjob_event_reasons(client: &kube::Client, name: &str) -> Vec<String> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let lp = ListParams::default().fields(&format!("involvedObject.name={name},involvedObject.kind=CronJob"));
    api.list(&lp).await.map(|l| l.items.into_iter().filter_map(|e| e.reason).collect()).unwrap_or_default()
}

#[tokio::test]
async fn allow_runs_jobs_side_by_side() {
    let env = common::start_fast_clock().await;
    let cjs: Api<CronJob> = Api::namespaced(env.client.clone(), "default");
    cjs.create(
        &PostParams::default(),
        &cronjob(
            "allow",
            json!({"schedule": "@every 1m", "concurrencyPolicy": "Allow"}),
            json!({"sim.batchfleet.io/run": "forever"}),
        ),
    )
    .await
    .unwrap();
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let created = common::wait_until("three concurrent Jobs", WAIT, || async {
        let js = jobs_of(&jobs, "allow").await;
        (js.len() >= 3).then_some(js)
    })
    .await;
    // Names are <cronjob>-<scheduled unix minutes>, with the scheduled-timestamp annotation.
    for j in &created {
        let name = j.metadata.name.clone().unwrap();
        let minutes: i64 = name.strip_prefix("allow-").unwrap().parse().unwrap();
        let stamp =
            j.metadata.annotations.as_ref().unwrap()["batch.kubernetes.io/cronjob-scheduled-timestamp"]
                .clone();
        let scheduled: jiff::Timestamp = stamp.parse().unwrap();
        assert_eq!(scheduled.as_second() / 60, minutes, "{name} {stamp}");
    }
    let cj = common::wait_until("three active Jobs in status", WAIT, || async {
        let cj = cjs.get("allow").await.ok()?;
        (cj.status.as_ref()?.active.as_ref()?.len() >= 3).then_some(cj)
    })
    .await;
    assert!(cj.status.unwrap().last_schedule_time.is_some());
    assert!(cronjob_event_reasons(&env.client, "allow").await.contains(&"SuccessfulCreate".to_string()));
}

#[tokio::test]
async fn forbid_skips_runs_while_one_is_active() {
    let env = common::start_fast_clock().await;
    let cjs: Api<CronJob> = Api::namespaced(env.client.clone(), "default");
    cjs.create(
        &PostParams::default(),
        &cronjob(
            "forbid",
            json!({"schedule": "@every 1m", "concurrencyPolicy": "Forbid"}),
            json!({"sim.batchfleet.io/run": "forever"}),
        ),
    )
    .await
    .unwrap();
    common::wait_until("the JobAlreadyActive event", WAIT, || async {
        cronjob_event_reasons(&env.client, "forbid")
            .await
            .contains(&"JobAlreadyActive".to_string())
            .then_some(())
    })
    .await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    assert_eq!(jobs_of(&jobs, "forbid").await.len(), 1);
}

#[tokio::test]
async fn replace_deletes_the_running_job_for_the_new_one() {
    let env = common::start_fast_clock().await;
    let cjs: Api<CronJob> = Api::namespaced(env.client.clone(), "default");
    cjs.create(
        &PostParams::default(),
        &cronjob(
            "replace",
            json!({"schedule": "@every 1m", "concurrencyPolicy": "Replace"}),
            json!({"sim.batchfleet.io/run": "forever"}),
        ),
    )
    .await
    .unwrap();
    common::wait_until("a replacement", WAIT, || async {
        cronjob_event_reasons(&env.client, "replace")
            .await
            .contains(&"SuccessfulDelete".to_string())
            .then_some(())
    })
    .await;
    let cj = common::wait_until("one active Job", WAIT, || async {
        let cj = cjs.get("replace").await.ok()?;
        (cj.status.as_ref()?.active.as_ref()?.len() == 1).then_some(cj)
    })
    .await;
    let active = cj.status.unwrap().active.unwrap()[0].name.clone().unwrap();
    assert_ne!(active, "", "{active}");
}

#[tokio::test]
async fn a_suspended_cronjob_creates_nothing() {
    let env = common::start_fast_clock().await;
    let cjs: Api<CronJob> = Api::namespaced(env.client.clone(), "default");
    cjs.create(
        &PostParams::default(),
        &cronjob("paused", json!({"schedule": "@every 1m", "suspend": true}), json!({})),
    )
    .await
    .unwrap();
    // A second CronJob shows the controller is working meanwhile.
    cjs.create(
        &PostParams::default(),
        &cronjob("witness", json!({"schedule": "@every 1m"}), json!({"sim.batchfleet.io/run": "forever"})),
    )
    .await
    .unwrap();
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    common::wait_until("the witness to run twice", WAIT, || async {
        (jobs_of(&jobs, "witness").await.len() >= 2).then_some(())
    })
    .await;
    assert!(jobs_of(&jobs, "paused").await.is_empty());
    assert!(cjs.get("paused").await.unwrap().status.and_then(|s| s.last_schedule_time).is_none());
}

#[tokio::test]
async fn history_limits_keep_the_newest_finished_jobs() {
    let env = common::start_fast_clock().await;
    let cjs: Api<CronJob> = Api::namespaced(env.client.clone(), "default");
    let ok = cronjob(
        "keep2",
        json!({"schedule": "@every 1m", "successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 1}),
        json!({"sim.batchfleet.io/run": "10ms"}),
    );
    let bad = cronjob(
        "keep1",
        json!({"schedule": "@every 1m", "successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 1}),
        json!({"sim.batchfleet.io/run": "10ms", "sim.batchfleet.io/exit-code": "1"}),
    );
    cjs.create(&PostParams::default(), &ok).await.unwrap();
    cjs.create(&PostParams::default(), &bad).await.unwrap();
    common::wait_until("old finished Jobs to be cleaned up", WAIT, || async {
        let a = cronjob_event_reasons(&env.client, "keep2").await;
        let b = cronjob_event_reasons(&env.client, "keep1").await;
        (a.contains(&"SuccessfulDelete".to_string()) && b.contains(&"SuccessfulDelete".to_string()))
            .then_some(())
    })
    .await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let finished = |js: Vec<Job>, kind: &str| {
        js.iter()
            .filter(|j| {
                common::condition(j, kind).is_some_and(|c| c.status == "True")
                    && j.metadata.deletion_timestamp.is_none()
            })
            .count()
    };
    // Checked repeatedly: the limits hold while new Jobs keep finishing.
    for _ in 0..5 {
        // The limit, plus the Jobs that finished since the last sync (one a second here; two
        // leaves room for a slow machine). Without cleanup there would be one more every second.
        assert!(finished(jobs_of(&jobs, "keep2").await, "Complete") <= 2 + 2);
        assert!(finished(jobs_of(&jobs, "keep1").await, "Failed") <= 1 + 2);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn finished_jobs_are_deleted_with_their_pods_after_their_ttl() {
    let env = common::start().await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let ann = json!({"sim.batchfleet.io/run": "100ms"});
    jobs.create(
        &PostParams::default(),
        &common::job("ttl0", json!({"ttlSecondsAfterFinished": 0, "completions": 2}), ann.clone()),
    )
    .await
    .unwrap();
    jobs.create(&PostParams::default(), &common::job("ttl5", json!({"ttlSecondsAfterFinished": 5}), ann))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    common::wait_until("ttl0 and its pods deleted", WAIT, || async {
        let gone = jobs.get_opt("ttl0").await.ok()?.is_none();
        let no_pods = pods.list(&ListParams::default().labels("job-name=ttl0")).await.ok()?.items.is_empty();
        (gone && no_pods).then_some(())
    })
    .await;
    let finished = common::wait_condition(&jobs, "ttl5", "Complete", WAIT).await;
    let done_at: jiff::Timestamp =
        common::condition(&finished, "Complete").unwrap().last_transition_time.as_ref().unwrap().0;
    common::wait_until("ttl5 deleted", WAIT, || async {
        jobs.get_opt("ttl5").await.ok()?.is_none().then_some(())
    })
    .await;
    let lived = jiff::Timestamp::now().duration_since(done_at);
    assert!(
        lived >= jiff::SignedDuration::from_secs(4),
        "deleted {lived:?} after finishing, before its TTL of 5s"
    );
    common::wait_until("ttl5's pods deleted", WAIT, || async {
        pods.list(&ListParams::default().labels("job-name=ttl5")).await.ok()?.items.is_empty().then_some(())
    })
    .await;
}
