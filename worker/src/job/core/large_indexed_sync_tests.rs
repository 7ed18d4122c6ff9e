//! Very large Indexed Jobs through whole syncs: `batchfleet.io/delete-counted-pods` deletes a
//! succeeded pod only in a sync that starts from a status already counting it, never in the sync
//! that counts it; and the size guard's condition and Event come with the status write.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::job::core::JOB_TRACKING_FINALIZER;
use crate::job::core::config::Config;
use crate::job::core::counted_pods::DELETE_COUNTED_PODS_ANNOTATION;
use crate::job::core::plan::{FinalizerRemoval, StatusPlan};
use crate::job::core::status_size::{EVENT_NEAR_LIMIT, STATUS_SIZE_NEAR_LIMIT};
use crate::job::core::testutil::*;

struct Synced {
    counted: Vec<String>,
    status_plan: StatusPlan,
    /// The last status written, if any.
    status: Option<JobStatus>,
    events: Vec<Event>,
}

fn sync(job: &Job, pods: &[Pod], cfg: &Config) -> Synced {
    let rm = HashSet::new();
    let pods: Vec<Arc<Pod>> = pods.iter().cloned().map(Arc::new).collect();
    let input = SyncInput {
        job,
        pods: &pods,
        now: now(),
        expectations_satisfied: true,
        expected_removed_finalizers: &rm,
        backoff: None,
        stall: None,
        config: cfg,
    };
    let JobPlan::Sync(plan) = sync_job(&input) else { panic!("skipped") };
    let results = match &plan.pod_ops {
        PodOps::Create(c) => PodOpResults::Creates(
            (0..c.pods.len()).map(|k| CreateOutcome::Created(format!("new-{k}"))).collect(),
        ),
        PodOps::None => PodOpResults::None,
        other => panic!("unexpected pod ops {other:?}"),
    };
    let counted = plan.counted_pods.delete.iter().map(|d| d.pod.name.clone()).collect();
    let status_plan = plan.after_pod_ops(&results);
    let removals = vec![FinalizerRemoval::Removed; status_plan.remove_finalizers.len()];
    let final_plan = status_plan.after_finalizer_removals(&removals);
    let mut events = status_plan.events.clone();
    events.extend(final_plan.events.clone());
    let status = final_plan.status.clone().or(status_plan.interim_status.clone());
    Synced { counted, status_plan, status, events }
}

fn annotated(mut job: Job) -> Job {
    job.metadata.annotations =
        Some([(DELETE_COUNTED_PODS_ANNOTATION.to_string(), "true".to_string())].into());
    job
}

fn without_finalizer(mut pod: Pod) -> Pod {
    pod.metadata.finalizers.get_or_insert_with(Vec::new).retain(|f| f != JOB_TRACKING_FINALIZER);
    pod
}

/// The pod that succeeds is counted by this sync's status write and loses its finalizer after
/// it; only the next sync, starting from that status and that pod, may delete it.
#[test]
fn a_succeeded_pod_is_deleted_only_after_the_write_that_counts_it_landed() {
    let cfg = Config::default();
    let mut job = annotated(mk_job("big", 2, 2, 6).indexed().start_time(now()).build());
    let p0 = mk_pod("p0").index("0").phase("Succeeded").finalizer().build();
    let p1 = mk_pod("p1").index("1").phase("Running").finalizer().build();

    let first = sync(&job, &[p0.clone(), p1.clone()], &cfg);
    assert!(first.counted.is_empty(), "the sync that counts the pod does not delete it: {:?}", first.counted);
    let written = first.status.expect("the count is written");
    assert_eq!(written.completed_indexes.as_deref(), Some("0"));
    assert_eq!(
        first.status_plan.remove_finalizers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        vec!["p0"]
    );

    // The finalizer is gone but the status write did not land: still not deleted.
    let lost = sync(&job, &[without_finalizer(p0.clone()), p1.clone()], &cfg);
    assert!(lost.counted.is_empty(), "not counted in the status as read: {:?}", lost.counted);

    // The write landed but the cache still shows the finalizer: not deleted.
    job.status = Some(written);
    let early = sync(&job, &[p0.clone(), p1.clone()], &cfg);
    assert!(early.counted.is_empty(), "finalizer still on: {:?}", early.counted);

    // Both landed: deleted, and the running pod and index 0's count are untouched.
    let second = sync(&job, &[without_finalizer(p0.clone()), p1.clone()], &cfg);
    assert_eq!(second.counted, vec!["p0"]);
    let status = second.status.as_ref().or(job.status.as_ref()).expect("status");
    assert_eq!(status.completed_indexes.as_deref(), Some("0"));

    // With the pod gone, index 0 stays completed and no pod is made for it again.
    job.status = second.status.or(job.status);
    let third = sync(&job, std::slice::from_ref(&p1), &cfg);
    let status = third.status.as_ref().or(job.status.as_ref()).expect("status");
    assert_eq!(status.completed_indexes.as_deref(), Some("0"));
    assert!(third.events.iter().all(|e| e.reason != "SuccessfulCreate"), "{:?}", third.events);
}

/// Without the annotation a sync plans exactly what it planned before: no deletes, and the same
/// status writes and finalizer removals as with it.
#[test]
fn the_annotation_changes_nothing_but_the_deletes() {
    let cfg = Config::default();
    let plain = mk_job("big", 2, 3, 6).indexed().start_time(now()).completed_indexes("0").build();
    let pods = [
        mk_pod("p0").index("0").phase("Succeeded").build(),
        mk_pod("p1").index("1").phase("Succeeded").finalizer().build(),
        mk_pod("p2").index("2").phase("Failed").finalizer().build(),
    ];
    let off = sync(&plain, &pods, &cfg);
    let on = sync(&annotated(plain.clone()), &pods, &cfg);
    assert!(off.counted.is_empty());
    assert_eq!(on.counted, vec!["p0"]);
    assert_eq!(off.status, on.status);
    assert_eq!(off.status_plan.interim_status, on.status_plan.interim_status);
    assert_eq!(off.status_plan.remove_finalizers, on.status_plan.remove_finalizers);
    assert_eq!(off.events, on.events);
}

/// A finished Job is not synced, but its counted pods (released by the orphan path) still go.
#[test]
fn a_finished_jobs_counted_pods_are_deleted_from_the_skip() {
    let rm = HashSet::new();
    let job = annotated(
        mk_job("done", 2, 2, 6).indexed().completed_indexes("0,1").condition("Complete", "True").build(),
    );
    let pods: Vec<Arc<Pod>> = vec![
        Arc::new(mk_pod("p0").index("0").phase("Succeeded").build()),
        Arc::new(mk_pod("p1").index("1").phase("Succeeded").finalizer().build()),
    ];
    let cfg = Config::default();
    let input = SyncInput {
        job: &job,
        pods: &pods,
        now: now(),
        expectations_satisfied: true,
        expected_removed_finalizers: &rm,
        backoff: None,
        stall: None,
        config: &cfg,
    };
    let JobPlan::Skip(skip) = sync_job(&input) else { panic!("a finished Job is skipped") };
    assert_eq!(skip.reason, SkipReason::Finished);
    assert_eq!(skip.counted_pods.delete.iter().map(|d| d.pod.name.as_str()).collect::<Vec<_>>(), vec!["p0"]);
}

/// Every other index failing with backoffLimitPerIndex 0, and a limit small enough that the
/// strings reach 80 % of it: the condition and the Warning Event come with the status write;
/// with the default limit, nothing.
#[test]
fn the_size_guard_fires_in_the_sync_whose_indexes_near_the_limit() {
    let n = 200;
    let job = mk_job("big", 0, n, 6).indexed().backoff_limit_per_index(0).start_time(now()).build();
    let pods: Vec<Pod> = (0..n)
        .map(|i| {
            let phase = if i % 2 == 0 { "Succeeded" } else { "Failed" };
            mk_pod(&format!("p{i}")).index(&i.to_string()).phase(phase).finalizer().build()
        })
        .collect();
    let plain = sync(&job, &pods, &Config::default());
    let st = plain.status.expect("status");
    assert!(st.conditions.as_deref().unwrap_or(&[]).iter().all(|c| c.type_ != STATUS_SIZE_NEAR_LIMIT));
    assert!(plain.events.iter().all(|e| e.reason != EVENT_NEAR_LIMIT));

    let completed = st.completed_indexes.clone().unwrap_or_default();
    let failed = st.failed_indexes.clone().unwrap_or_default();
    assert!(completed.starts_with("0,2,4,") && failed.starts_with("1,3,5,"), "{completed} / {failed}");
    let job_bytes = serde_json::to_vec(&job).unwrap().len() as u64;
    let whole = job_bytes + completed.len() as u64 + failed.len() as u64;
    // The limit at which this size is 90 %.
    let cfg = Config { status_size_limit_bytes: whole * 10 / 9, ..Config::default() };
    let guarded = sync(&job, &pods, &cfg);
    let st = guarded.status_plan.interim_status.clone().expect("the interim write carries the condition");
    let cond = st
        .conditions
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .find(|c| c.type_ == STATUS_SIZE_NEAR_LIMIT)
        .cloned()
        .expect("the condition");
    assert_eq!(cond.status, "True");
    let msg = cond.message.unwrap_or_default();
    assert!(
        msg.contains(&format!(
            "completedIndexes is {} bytes and failedIndexes {} bytes",
            completed.len(),
            failed.len()
        )),
        "{msg}"
    );
    let warnings: Vec<_> = guarded.events.iter().filter(|e| e.reason == EVENT_NEAR_LIMIT).collect();
    assert_eq!(warnings.len(), 1, "{:?}", guarded.events);
    // Upstream's part of the status is what it is without the guard.
    assert_eq!(st.completed_indexes.as_deref(), Some(completed.as_str()));
}
