//! Bad objects from the API (issue 15): what kube-apiserver's validation rejects, the sim rejects
//! with the same field error; what still reaches the controllers (a schedule that never fires, an
//! object stored before validation tightened or by an API server with other tzdata, an int32's
//! worth of completions, a pod nobody owns holding the tracking finalizer) gets upstream's event or
//! condition, and the worker keeps serving the namespace: a healthy Job beside it completes.

mod common;

use std::time::Duration;

use batchfleet_sim::SimCluster;
use batchfleet_sim::resources::ResourceKey;
use batchfleet_sim::store::{Expect, Prepared, RV_PLACEHOLDER};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const TRACKING: &str = "batch.kubernetes.io/job-tracking";

fn cronjob(name: &str, schedule: &str) -> CronJob {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}}}}
    }))
    .expect("cronjob")
}

/// A Job that succeeds in 100ms, created beside the bad object: the worker must still run it.
async fn healthy_job_completes(env: &common::Env) {
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let job = common::job("healthy", json!({"completions": 2}), json!({"sim.batchfleet.io/run": "100ms"}));
    jobs.create(&PostParams::default(), &job).await.expect("the healthy Job is created");
    common::wait_condition(&jobs, "healthy", "Complete", WAIT).await;
}

/// The Warning events about `kind` `name`, as (reason, message).
async fn warnings(client: &kube::Client, kind: &str, name: &str) -> Vec<(String, String)> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let lp = ListParams::default().fields(&format!("involvedObject.name={name},involvedObject.kind={kind}"));
    api.list(&lp)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

async fn wait_warning(client: &kube::Client, kind: &str, name: &str, reason: &str) -> String {
    common::wait_until(&format!("Warning {reason} about {kind} {name}"), WAIT, || async {
        warnings(client, kind, name).await.into_iter().find(|(r, _)| r == reason).map(|(_, m)| m)
    })
    .await
}

/// Writes `edit`ed copies of a stored object straight into the sim's store, past the API
/// server's validation: how objects that an older or differently configured kube-apiserver
/// accepted reach the controllers. With `copy_as`, the copy is a new object of that name (the
/// controllers see it added); without, it replaces the original (they see it modified).
fn store_bypassing_validation(
    sim: &SimCluster,
    (group, plural): (&str, &str),
    name: &str,
    copy_as: Option<&str>,
    edit: impl FnOnce(&mut Value),
) {
    let store = sim.api().store();
    let resource = store.resource_id(&ResourceKey { group: group.into(), plural: plural.into() });
    let stored = store.get(resource, "default", name).expect("the object is stored");
    let mut value = stored.value();
    let (name, uid) = match copy_as {
        Some(copy) => (copy.to_string(), format!("{}-copy", stored.uid)),
        None => (stored.name.to_string(), stored.uid.to_string()),
    };
    value["metadata"]["name"] = Value::from(name.as_str());
    value["metadata"]["uid"] = Value::from(uid.as_str());
    edit(&mut value);
    value["metadata"]["resourceVersion"] = Value::from(RV_PLACEHOLDER);
    let json = serde_json::to_vec(&value).expect("json");
    let labels = stored.labels.clone();
    let (fields, owners) = (stored.fields.to_vec(), stored.owner_uids.to_vec());
    let prepared = Prepared::new("default", &name, &uid, labels, fields, owners, json).expect("prepared");
    match copy_as {
        Some(_) => store.create(resource, prepared).map(drop),
        None => store.update(resource, prepared, Expect::Version(stored.rv)).map(drop),
    }
    .expect("stored");
}

const CRONJOBS: (&str, &str) = ("batch", "cronjobs");
const JOBS: (&str, &str) = ("batch", "jobs");

/// The 422 message of a create the sim must reject.
async fn rejected<K>(api: &Api<K>, object: &K) -> String
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert_eq!(status.reason, "Invalid", "{status:?}");
            status.message
        }
        other => panic!("expected 422 Invalid, got {other:?}"),
    }
}

/// `0 0 30 2 *` parses (validation accepts it) but never fires: upstream's mostRecentScheduleTime
/// finds Next() = the zero time twice, and syncCronJob records Warning `InvalidSchedule` and does
/// not requeue (TestMostRecentScheduleTime "rogue cronjob", cronjob_controllerv2.go).
#[tokio::test]
async fn a_schedule_that_never_fires_gets_invalid_schedule_and_creates_nothing() {
    let env = common::start().await;
    let cjs: Api<CronJob> = Api::namespaced(env.client.clone(), "default");
    cjs.create(&PostParams::default(), &cronjob("feb30", "0 0 30 2 *")).await.expect("validation accepts it");
    let message = wait_warning(&env.client, "CronJob", "feb30", "InvalidSchedule").await;
    assert_eq!(
        message,
        "invalid schedule: 0 0 30 2 * : time difference between two schedules is less than 1 second"
    );
    healthy_job_completes(&env).await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let names: Vec<_> = jobs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|j| j.metadata.name)
        .collect();
    assert_eq!(names, ["healthy"], "the CronJob created no Job");
    let status = cjs.get("feb30").await.unwrap().status.unwrap_or_default();
    assert!(status.last_schedule_time.is_none() && status.active.is_none(), "{status:?}");
}

/// An unknown `timeZone` is a 422 on create (validateTimeZone: `time.LoadLocation`'s error). One
/// stored anyway (an API server with other tzdata) gets Warning `UnknownTimeZone` and no Job
/// (syncCronJob checks the zone before the schedule and does not requeue).
#[tokio::test]
async fn an_unknown_time_zone_is_rejected_and_one_stored_anyway_gets_unknown_time_zone() {
    // The edit requeues the CronJob for its next minute (updateCronJob parses the schedule without
    // the zone); the fast clock makes that a second.
    let env = common::start_fast_clock().await;
    let cjs: Api<CronJob> = Api::namespaced(env.client.clone(), "default");
    let mut bad = cronjob("mars", "* * * * *");
    bad.spec.time_zone = Some("Mars/Olympus".into());
    let message = rejected(&cjs, &bad).await;
    assert!(
        message.contains(r#"spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus"#),
        "{message}"
    );

    let mut good = cronjob("mars", "@hourly");
    good.spec.time_zone = Some("UTC".into());
    cjs.create(&PostParams::default(), &good).await.expect("created");
    store_bypassing_validation(&env.sim, CRONJOBS, "mars", None, |cj| {
        cj["spec"]["timeZone"] = json!("Mars/Olympus");
        cj["spec"]["schedule"] = json!("* * * * *");
        cj["metadata"]["generation"] = json!(2);
    });
    let message = wait_warning(&env.client, "CronJob", "mars", "UnknownTimeZone").await;
    assert_eq!(message, r#"invalid timeZone: "Mars/Olympus": unknown time zone Mars/Olympus"#);
    healthy_job_completes(&env).await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    assert_eq!(jobs.list(&ListParams::default()).await.unwrap().items.len(), 1, "only the healthy Job");
}

/// A schedule robfig rejects is a 422 on create. One stored anyway gets Warning
/// `UnparseableSchedule` ("unparseable schedule: %q : %s") from the sync, or, when an edit
/// brought it, `UnParseableCronJobSchedule` from updateCronJob; no Job either way.
#[tokio::test]
async fn an_unparseable_schedule_is_rejected_and_one_stored_anyway_gets_unparseable_schedule() {
    let env = common::start().await;
    let cjs: Api<CronJob> = Api::namespaced(env.client.clone(), "default");
    let message = rejected(&cjs, &cronjob("six", "* * * * * *")).await;
    assert!(message.contains(r#"spec.schedule: Invalid value: "* * * * * *": expected exactly 5 fields, found 6: [* * * * * *]"#), "{message}");
    cjs.create(&PostParams::default(), &cronjob("six", "@hourly")).await.expect("created");
    // Added as it is: the sync records UnparseableSchedule.
    store_bypassing_validation(&env.sim, CRONJOBS, "six", Some("six-added"), |cj| {
        cj["spec"]["schedule"] = json!("* * * * * *");
    });
    let message = wait_warning(&env.client, "CronJob", "six-added", "UnparseableSchedule").await;
    assert_eq!(
        message,
        r#"unparseable schedule: "* * * * * *" : expected exactly 5 fields, found 6: [* * * * * *]"#
    );
    // Edited to it: updateCronJob records UnParseableCronJobSchedule and does not queue a sync.
    store_bypassing_validation(&env.sim, CRONJOBS, "six", None, |cj| {
        cj["spec"]["schedule"] = json!("* * * * * *");
        cj["metadata"]["generation"] = json!(2);
    });
    let message = wait_warning(&env.client, "CronJob", "six", "UnParseableCronJobSchedule").await;
    assert_eq!(message, "unparseable schedule for cronjob: * * * * * *");
    healthy_job_completes(&env).await;
}

/// podFailurePolicy and selector errors are 422s with kube-apiserver's field errors
/// (pkg/apis/batch/validation: validatePodFailurePolicyRuleOnExitCodes, the FailIndex check,
/// ValidateJobSpec's selector/labels match).
#[tokio::test]
async fn invalid_pod_failure_policies_and_selectors_are_rejected_like_kube_apiserver() {
    let env = common::start().await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let ann = json!({"sim.batchfleet.io/run": "100ms"});
    let exit_zero = common::job(
        "pfp-zero",
        json!({"podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0]}}]}}),
        ann.clone(),
    );
    let message = rejected(&jobs, &exit_zero).await;
    assert!(message.contains("spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator"), "{message}");

    let fail_index = common::job(
        "pfp-index",
        json!({"completionMode": "Indexed", "completions": 2,
               "podFailurePolicy": {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}]}}),
        ann.clone(),
    );
    let message = rejected(&jobs, &fail_index).await;
    assert!(message.contains(r#"spec.podFailurePolicy.rules[0].action: Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set"#), "{message}");

    let mut mismatched = common::job(
        "manual",
        json!({"manualSelector": true, "selector": {"matchLabels": {"app": "a"}}}),
        ann.clone(),
    );
    mismatched.spec.as_mut().unwrap().template.metadata.get_or_insert_default().labels =
        Some([("app".to_string(), "b".to_string())].into());
    let message = rejected(&jobs, &mismatched).await;
    assert!(message.contains("`selector` does not match template `labels`"), "{message}");

    let bad_operator = common::job(
        "operator",
        json!({"manualSelector": true, "selector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["a"]}]}}),
        ann,
    );
    let message = rejected(&jobs, &bad_operator).await;
    assert!(message.contains(r#"spec.selector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator"#), "{message}");
    healthy_job_completes(&env).await;
}

/// A podFailurePolicy rule with an action this version does not know (stored by a newer API
/// server) is skipped, as upstream's switch falls through to the next rule: here the next rule
/// fails the Job with reason `PodFailurePolicy`, naming rule index 1.
#[tokio::test]
async fn a_stored_rule_with_an_unknown_action_is_skipped_and_the_next_rule_applies() {
    let env = common::start().await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let ann = json!({"sim.batchfleet.io/run": "100ms", "sim.batchfleet.io/exit-code": "7"});
    let spec = json!({"suspend": true, "backoffLimit": 6, "podFailurePolicy": {"rules": [
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [7]}},
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [7]}}]}});
    jobs.create(&PostParams::default(), &common::job("future", spec, ann)).await.expect("created");
    store_bypassing_validation(&env.sim, JOBS, "future", None, |job| {
        job["spec"]["podFailurePolicy"]["rules"][0]["action"] = json!("RestartPod");
        job["spec"]["suspend"] = json!(false);
        job["metadata"]["generation"] = json!(2);
    });
    let job = common::wait_condition(&jobs, "future", "Failed", WAIT).await;
    let failed = common::condition(&job, "Failed").unwrap();
    assert_eq!(failed.reason.as_deref(), Some("PodFailurePolicy"));
    let message = failed.message.clone().unwrap_or_default();
    assert!(message.ends_with("failed with exit code 7 matching FailJob rule at index 1"), "{message}");
    healthy_job_completes(&env).await;
}

/// `completions` at int32's maximum (validation allows it for NonIndexed Jobs, and for Indexed
/// ones with parallelism ≤ 10^4): the worker creates `parallelism` pods, counts, and writes
/// `completedIndexes` without ever walking the whole index range.
#[tokio::test]
async fn jobs_with_huge_completions_run_parallelism_pods_at_a_time() {
    let env = common::start().await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let ann = json!({"sim.batchfleet.io/run": "100ms"});
    let huge = i64::from(i32::MAX);
    for (name, spec) in [
        ("huge", json!({"completions": huge, "parallelism": 2})),
        ("huge-indexed", json!({"completionMode": "Indexed", "completions": huge, "parallelism": 2})),
    ] {
        jobs.create(&PostParams::default(), &common::job(name, spec, ann.clone())).await.expect("created");
    }
    for name in ["huge", "huge-indexed"] {
        let job = common::wait_until(&format!("Job {name} to count 4 successes"), WAIT, || async {
            let job = jobs.get(name).await.ok()?;
            (job.status.as_ref()?.succeeded? >= 4).then_some(job)
        })
        .await;
        let status = job.status.unwrap_or_default();
        assert!(status.active.unwrap_or(0) <= 2, "{name}: {status:?}");
        assert!(status.conditions.unwrap_or_default().is_empty(), "{name} is not finished");
    }
    let indexed = jobs.get("huge-indexed").await.unwrap().status.unwrap_or_default();
    let completed = indexed.completed_indexes.unwrap_or_default();
    assert!(completed.starts_with("0-") || completed.starts_with("0,1"), "{completed}");
    healthy_job_completes(&env).await;
    for name in ["huge", "huge-indexed"] {
        jobs.delete(name, &Default::default()).await.expect("deleted");
    }
}

/// A pod without any owner that carries `batch.kubernetes.io/job-tracking` (addPod → orphan
/// queue → syncOrphanPod): the finalizer is removed, so the pod can be deleted.
#[tokio::test]
async fn an_ownerless_pod_with_the_tracking_finalizer_loses_it() {
    let env = common::start().await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "stray", "finalizers": [TRACKING, "example.com/keep"],
                     "annotations": {"sim.batchfleet.io/run": "forever"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod).await.expect("created");
    let finalizers = common::wait_until("the tracking finalizer to go", WAIT, || async {
        let finalizers = pods.get("stray").await.ok()?.metadata.finalizers.unwrap_or_default();
        (!finalizers.iter().any(|f| f == TRACKING)).then_some(finalizers)
    })
    .await;
    assert_eq!(finalizers, ["example.com/keep"], "only the tracking finalizer is removed");
    healthy_job_completes(&env).await;
}
