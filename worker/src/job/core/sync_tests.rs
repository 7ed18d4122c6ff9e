//! syncJob tests: ports of upstream's TestControllerSyncJob, TestSyncJobPastDeadline,
//! TestSyncJobWithJobPodFailurePolicy, TestSyncJobWithJobSuccessPolicy,
//! TestSyncJobWithJobBackoffLimitPerIndex, TestJobBackoffForOnFailure, TestJobBackoffOnRestartPolicyNever and
//! TestSyncJobWhenManagedBy, plus end-to-end and robustness checks.

#![allow(clippy::type_complexity)] // table rows are tuples, as upstream's are anonymous structs

use super::*;
use crate::job::core::config::Config;
use crate::job::core::plan::FinalizerRemoval;
use crate::job::core::testutil::*;
use k8s_openapi::api::batch::v1::{Job, PodFailurePolicy};
use k8s_openapi::api::core::v1::Pod;
use std::collections::HashSet;

/// One row of upstream's TestControllerSyncJob (same field names), evaluated with the 1.37 feature
/// gates: `terminating` is always reported and terminal conditions are preceded by
/// FailureTarget/SuccessCriteriaMet.
#[derive(Default)]
struct Row {
    name: &'static str,
    parallelism: i32,
    completions: i32,
    backoff_limit: i32,
    deleting: bool,
    pod_limit: usize,
    indexed: bool,
    was_suspended: bool,
    suspend: bool,
    prp: Option<&'static str>,
    pfp: Option<PodFailurePolicy>,
    initial: Option<(i32, i32, i32)>,
    initial_conditions: Vec<Cond>,
    backoff: Option<BackoffRecord>,
    controller_error: bool,
    pending: usize,
    active: usize,
    ready: usize,
    succeeded: usize,
    failed: usize,
    terminating: usize,
    indexes: Vec<(&'static str, &'static str)>,
    unsatisfied: bool,
    want_creations: usize,
    want_deletions: usize,
    want_active: i32,
    want_ready: i32,
    want_succeeded: i32,
    want_completed: &'static str,
    want_failed: i32,
    want_terminating: i32,
    want_conditions: Vec<Cond>,
    want_created_indexes: Vec<i64>,
    want_patches: usize,
}

fn setup(tc: &Row) -> (Job, Vec<Pod>) {
    let mut b = mk_job("foobar", tc.parallelism, tc.completions, tc.backoff_limit).suspend(tc.suspend);
    if tc.indexed {
        b = b.indexed();
    }
    if let Some(p) = tc.prp {
        b = b.replacement_policy(p);
    }
    if let Some(p) = tc.pfp.clone() {
        b = b.pod_failure_policy(p);
    }
    if let Some((a, s, f)) = tc.initial {
        b = b.start_time(now()).counts(a, s, f);
        for (t, st, r, m) in &tc.initial_conditions {
            b = b.condition_full(t, st, r, m);
        }
    }
    if tc.was_suspended {
        b = b.condition_full("Suspended", "True", "JobSuspended", "Job suspended");
    }
    if tc.deleting {
        b = b.deleting();
    }
    let mut pods =
        pods_with_statuses(tc.pending, tc.active, tc.succeeded, tc.failed, tc.terminating, tc.ready);
    pods.extend(pods_with_indexes(&tc.indexes));
    (b.build(), pods)
}

fn check(tc: &Row) {
    let (job, pods) = setup(tc);
    let fake = Fake {
        err: tc.controller_error.then(|| "fake error".to_string()),
        create_limit: tc.pod_limit,
        status_err: false,
    };
    let run = run_sync_with(
        &job,
        &pods,
        RunOpts {
            expectations_satisfied: !tc.unsatisfied,
            backoff: tc.backoff.clone(),
            fake,
            ..Default::default()
        },
    );
    let name = tc.name;
    let st = run.status(&job);
    assert_eq!(run.creates.len(), tc.want_creations, "{name}: creations");
    assert_eq!(run.deletes.len(), tc.want_deletions, "{name}: deletions");
    assert_eq!(st.active.unwrap_or(0), tc.want_active, "{name}: active");
    assert_eq!(st.ready, Some(tc.want_ready), "{name}: ready");
    assert_eq!(st.succeeded.unwrap_or(0), tc.want_succeeded, "{name}: succeeded");
    assert_eq!(st.completed_indexes.as_deref().unwrap_or(""), tc.want_completed, "{name}: completedIndexes");
    assert_eq!(st.failed.unwrap_or(0), tc.want_failed, "{name}: failed");
    assert_eq!(st.terminating, Some(tc.want_terminating), "{name}: terminating");
    assert_eq!(st.start_time.is_none(), tc.suspend, "{name}: startTime set iff not suspended");
    assert_eq!(conds(&st), want_conds(&tc.want_conditions), "{name}: conditions");
    assert_eq!(run.patches, tc.want_patches, "{name}: pod patches");
    if tc.indexed {
        assert_eq!(run.created_indexes(), tc.want_created_indexes, "{name}: created indexes");
        for p in &run.creates {
            let ix =
                &p.metadata.annotations.as_ref().unwrap()[crate::job::core::JOB_COMPLETION_INDEX_ANNOTATION];
            assert_eq!(p.metadata.generate_name.as_deref(), Some(format!("foobar-{ix}-").as_str()), "{name}");
            assert_eq!(
                p.spec.as_ref().unwrap().hostname.as_deref(),
                Some(format!("foobar-{ix}").as_str()),
                "{name}"
            );
        }
    } else {
        for p in &run.creates {
            assert_eq!(p.metadata.generate_name.as_deref(), Some("foobar-"), "{name}");
            assert!(p.spec.as_ref().unwrap().hostname.is_none(), "{name}");
        }
    }
    for p in &run.creates {
        let o = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (o.api_version.as_str(), o.kind.as_str(), o.name.as_str()),
            ("batch/v1", "Job", "foobar"),
            "{name}"
        );
        assert_eq!((o.controller, o.block_owner_deletion), (Some(true), Some(true)), "{name}");
    }
    let errored = tc.controller_error || (tc.pod_limit > 0 && run.creates.len() >= tc.pod_limit);
    assert_eq!(run.error.is_some(), errored, "{name}: sync error {:?}", run.error);
}

fn sm(reason: &'static str, msg: &'static str) -> Vec<Cond> {
    vec![("SuccessCriteriaMet", "True", reason, msg), ("Complete", "True", reason, msg)]
}

/// TestControllerSyncJob (job_controller_test.go), gates at their GA values. UPSTREAM.md §2 rows
/// 1–12 are "job start", "too few active pods", "too many active pods", "more active pods than
/// remaining completions", "job finish", "WQ job all finished despite one failure", "too many job
/// failures", "indexed job completed", "indexed job some running and completed pods", "indexed job
/// with indexes outside of range", "suspending a job with satisfied expectations" / "resuming a
/// suspended job", and "backoff limit exceeded; JobManagedBy enabled".
#[test]
fn controller_sync_job_table() {
    let rows = vec![
        Row {
            name: "job start",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            want_creations: 2,
            want_active: 2,
            ..Default::default()
        },
        Row {
            name: "WQ job start",
            parallelism: 2,
            completions: -1,
            backoff_limit: 6,
            want_creations: 2,
            want_active: 2,
            ..Default::default()
        },
        Row {
            name: "pending pods",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            pending: 2,
            want_active: 2,
            ..Default::default()
        },
        Row {
            name: "correct # of pods",
            parallelism: 3,
            completions: 5,
            backoff_limit: 6,
            active: 3,
            ready: 2,
            want_active: 3,
            want_ready: 2,
            ..Default::default()
        },
        Row {
            name: "WQ job: correct # of pods",
            parallelism: 2,
            completions: -1,
            backoff_limit: 6,
            active: 2,
            want_active: 2,
            ..Default::default()
        },
        Row {
            name: "too few active pods",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            active: 1,
            succeeded: 1,
            want_creations: 1,
            want_active: 2,
            want_succeeded: 1,
            want_patches: 1,
            ..Default::default()
        },
        Row {
            name: "WQ job: recreate pods when failed",
            parallelism: 1,
            completions: -1,
            backoff_limit: 6,
            active: 1,
            failed: 1,
            prp: Some("Failed"),
            terminating: 1,
            want_terminating: 1,
            want_patches: 1,
            want_failed: 1,
            want_active: 1,
            ..Default::default()
        },
        Row {
            name: "WQ job: turn on PodReplacementPolicy but not set PodReplacementPolicy",
            parallelism: 1,
            completions: 1,
            backoff_limit: 6,
            active: 1,
            failed: 1,
            terminating: 1,
            want_terminating: 1,
            want_active: 1,
            want_patches: 2,
            want_failed: 2,
            ..Default::default()
        },
        Row {
            name: "WQ job: recreate pods when terminating or failed",
            parallelism: 1,
            completions: -1,
            backoff_limit: 6,
            active: 1,
            failed: 1,
            prp: Some("TerminatingOrFailed"),
            terminating: 1,
            want_terminating: 1,
            want_active: 1,
            want_patches: 2,
            want_failed: 2,
            ..Default::default()
        },
        Row {
            name: "more terminating pods than parallelism",
            parallelism: 1,
            completions: 1,
            backoff_limit: 6,
            active: 2,
            terminating: 4,
            prp: Some("Failed"),
            want_terminating: 5,
            want_active: 1,
            want_deletions: 1,
            want_patches: 1,
            ..Default::default()
        },
        Row {
            name: "more terminating pods than parallelism; PodFailurePolicy used",
            parallelism: 1,
            completions: 1,
            backoff_limit: 6,
            active: 2,
            terminating: 4,
            pfp: Some(PodFailurePolicy::default()),
            want_terminating: 5,
            want_active: 1,
            want_deletions: 1,
            want_patches: 1,
            ..Default::default()
        },
        Row {
            name: "too few active pods and active back-off",
            parallelism: 1,
            completions: 1,
            backoff_limit: 6,
            backoff: Some(BackoffRecord { failures_after_last_success: 1, last_failure_time: Some(now()) }),
            initial: Some((0, 0, 0)),
            ..Default::default()
        },
        Row {
            name: "too few active pods and no back-offs",
            parallelism: 1,
            completions: 1,
            backoff_limit: 6,
            backoff: Some(BackoffRecord { failures_after_last_success: 0, last_failure_time: Some(now()) }),
            want_creations: 1,
            want_active: 1,
            ..Default::default()
        },
        Row {
            name: "too few active pods with a dynamic job",
            parallelism: 2,
            completions: -1,
            backoff_limit: 6,
            active: 1,
            want_creations: 1,
            want_active: 2,
            ..Default::default()
        },
        Row {
            name: "too few active pods, with controller error",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            controller_error: true,
            active: 1,
            succeeded: 1,
            want_creations: 1,
            want_active: 1,
            want_patches: 1,
            ..Default::default()
        },
        Row {
            name: "too many active pods",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            active: 3,
            want_deletions: 1,
            want_active: 2,
            want_patches: 1,
            want_terminating: 1,
            ..Default::default()
        },
        Row {
            name: "too many active pods, with controller error",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            controller_error: true,
            active: 3,
            want_patches: 1,
            want_active: 3,
            ..Default::default()
        },
        Row {
            name: "count ready pods when too many active pods",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            active: 3,
            ready: 3,
            want_deletions: 1,
            want_active: 2,
            want_patches: 1,
            want_ready: 2,
            want_terminating: 1,
            ..Default::default()
        },
        Row {
            name: "failed + succeed pods: reset backoff delay",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            active: 1,
            succeeded: 1,
            failed: 1,
            want_creations: 1,
            want_active: 2,
            want_succeeded: 1,
            want_failed: 1,
            want_patches: 2,
            ..Default::default()
        },
        Row {
            name: "new failed pod",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            active: 1,
            failed: 1,
            want_creations: 1,
            want_active: 2,
            want_failed: 1,
            want_patches: 1,
            ..Default::default()
        },
        Row {
            name: "no new pod; possible finalizer update of failed pod",
            parallelism: 1,
            completions: 1,
            backoff_limit: 6,
            initial: Some((1, 0, 1)),
            active: 1,
            want_active: 1,
            want_failed: 1,
            ..Default::default()
        },
        Row {
            name: "only new failed pod with controller error",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            controller_error: true,
            active: 1,
            failed: 1,
            want_creations: 1,
            want_active: 1,
            want_patches: 1,
            ..Default::default()
        },
        Row {
            name: "job finish",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            succeeded: 5,
            want_succeeded: 5,
            want_conditions: sm(CR, CR_MSG),
            want_patches: 5,
            ..Default::default()
        },
        Row {
            name: "WQ job finishing",
            parallelism: 2,
            completions: -1,
            backoff_limit: 6,
            active: 1,
            succeeded: 1,
            want_active: 1,
            want_succeeded: 1,
            want_patches: 1,
            ..Default::default()
        },
        Row {
            name: "WQ job all finished",
            parallelism: 2,
            completions: -1,
            backoff_limit: 6,
            succeeded: 2,
            want_succeeded: 2,
            want_conditions: sm(CR, CR_MSG),
            want_patches: 2,
            ..Default::default()
        },
        Row {
            name: "WQ job all finished despite one failure",
            parallelism: 2,
            completions: -1,
            backoff_limit: 6,
            succeeded: 1,
            failed: 1,
            want_succeeded: 1,
            want_failed: 1,
            want_conditions: sm(CR, CR_MSG),
            want_patches: 2,
            ..Default::default()
        },
        Row {
            name: "more active pods than parallelism",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            active: 10,
            want_deletions: 8,
            want_active: 2,
            want_patches: 8,
            want_terminating: 8,
            ..Default::default()
        },
        Row {
            name: "more active pods than remaining completions",
            parallelism: 3,
            completions: 4,
            backoff_limit: 6,
            active: 3,
            succeeded: 2,
            want_deletions: 1,
            want_active: 2,
            want_succeeded: 2,
            want_patches: 3,
            want_terminating: 1,
            ..Default::default()
        },
        Row {
            name: "status change",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            active: 2,
            succeeded: 2,
            want_active: 2,
            want_succeeded: 2,
            want_patches: 2,
            ..Default::default()
        },
        Row {
            name: "deleting job",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            deleting: true,
            pending: 1,
            active: 1,
            succeeded: 1,
            want_active: 2,
            want_succeeded: 1,
            want_patches: 3,
            ..Default::default()
        },
        Row {
            name: "limited pods",
            parallelism: 100,
            completions: 200,
            backoff_limit: 6,
            pod_limit: 10,
            want_creations: 10,
            want_active: 10,
            ..Default::default()
        },
        Row {
            name: "too many job failures",
            parallelism: 2,
            completions: 5,
            deleting: true,
            failed: 1,
            want_failed: 1,
            want_conditions: vec![("FailureTarget", "True", BLE, BLE_MSG), ("Failed", "True", BLE, BLE_MSG)],
            want_patches: 1,
            ..Default::default()
        },
        Row {
            name: "job failures, unsatisfied expectations",
            parallelism: 2,
            completions: 5,
            deleting: true,
            failed: 1,
            unsatisfied: true,
            want_failed: 1,
            want_patches: 1,
            ..Default::default()
        },
        Row {
            name: "indexed job start",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            indexed: true,
            want_creations: 2,
            want_active: 2,
            want_created_indexes: vec![0, 1],
            ..Default::default()
        },
        Row {
            name: "indexed job with some pods deleted, podReplacementPolicy Failed",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            indexed: true,
            prp: Some("Failed"),
            terminating: 1,
            want_creations: 1,
            want_active: 1,
            want_created_indexes: vec![0],
            want_terminating: 1,
            ..Default::default()
        },
        Row {
            name: "indexed job with some pods deleted, podReplacementPolicy TerminatingOrFailed",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            indexed: true,
            prp: Some("TerminatingOrFailed"),
            terminating: 1,
            want_creations: 2,
            want_active: 2,
            want_created_indexes: vec![0, 1],
            want_terminating: 1,
            want_patches: 1,
            ..Default::default()
        },
        Row {
            name: "indexed job completed",
            parallelism: 2,
            completions: 3,
            backoff_limit: 6,
            indexed: true,
            indexes: vec![("0", "Succeeded"), ("1", "Failed"), ("1", "Succeeded"), ("2", "Succeeded")],
            want_succeeded: 3,
            want_failed: 1,
            want_completed: "0-2",
            want_conditions: sm(CR, CR_MSG),
            want_patches: 4,
            ..Default::default()
        },
        Row {
            name: "count terminating pods when indexed job fails and PodReplacementPolicy enabled",
            parallelism: 2,
            completions: 3,
            backoff_limit: 0,
            indexed: true,
            indexes: vec![("0", "Succeeded"), ("1", "Failed"), ("2", "Running")],
            want_succeeded: 1,
            want_failed: 2,
            want_completed: "0",
            want_conditions: vec![("FailureTarget", "True", BLE, BLE_MSG)],
            want_patches: 3,
            want_deletions: 1,
            want_terminating: 1,
            ..Default::default()
        },
        Row {
            name: "count ready pods when job fails",
            parallelism: 2,
            completions: 3,
            backoff_limit: 0,
            active: 2,
            ready: 2,
            failed: 1,
            want_failed: 3,
            want_conditions: vec![("FailureTarget", "True", BLE, BLE_MSG)],
            want_patches: 3,
            want_deletions: 2,
            want_terminating: 2,
            ..Default::default()
        },
        Row {
            name: "indexed job repeated completed index",
            parallelism: 2,
            completions: 3,
            backoff_limit: 6,
            indexed: true,
            indexes: vec![("0", "Succeeded"), ("1", "Succeeded"), ("1", "Succeeded")],
            want_creations: 1,
            want_active: 1,
            want_succeeded: 2,
            want_completed: "0,1",
            want_created_indexes: vec![2],
            want_patches: 3,
            ..Default::default()
        },
        Row {
            name: "indexed job some running and completed pods",
            parallelism: 8,
            completions: 20,
            backoff_limit: 6,
            indexed: true,
            indexes: vec![
                ("0", "Running"),
                ("2", "Succeeded"),
                ("3", "Pending"),
                ("4", "Succeeded"),
                ("5", "Succeeded"),
                ("7", "Succeeded"),
                ("8", "Succeeded"),
                ("9", "Succeeded"),
            ],
            want_creations: 6,
            want_active: 8,
            want_succeeded: 6,
            want_completed: "2,4,5,7-9",
            want_created_indexes: vec![1, 6, 10, 11, 12, 13],
            want_patches: 6,
            ..Default::default()
        },
        Row {
            name: "indexed job some failed pods",
            parallelism: 3,
            completions: 4,
            backoff_limit: 6,
            indexed: true,
            indexes: vec![("0", "Failed"), ("1", "Pending"), ("2", "Failed")],
            want_creations: 2,
            want_active: 3,
            want_failed: 2,
            want_created_indexes: vec![0, 2],
            want_patches: 2,
            ..Default::default()
        },
        Row {
            name: "indexed job some pods without index",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            indexed: true,
            active: 1,
            succeeded: 1,
            failed: 1,
            indexes: vec![
                ("invalid", "Running"),
                ("invalid", "Succeeded"),
                ("invalid", "Failed"),
                ("invalid", "Pending"),
                ("0", "Succeeded"),
                ("1", "Running"),
                ("2", "Running"),
            ],
            want_deletions: 3,
            want_active: 2,
            want_succeeded: 1,
            want_completed: "0",
            want_patches: 8,
            want_terminating: 3,
            ..Default::default()
        },
        Row {
            name: "indexed job repeated indexes",
            parallelism: 5,
            completions: 5,
            backoff_limit: 6,
            indexed: true,
            succeeded: 1,
            failed: 1,
            indexes: vec![
                ("invalid", "Running"),
                ("0", "Succeeded"),
                ("1", "Running"),
                ("2", "Running"),
                ("2", "Pending"),
            ],
            want_deletions: 2,
            want_active: 2,
            want_succeeded: 1,
            want_completed: "0",
            want_patches: 5,
            want_terminating: 2,
            ..Default::default()
        },
        Row {
            name: "indexed job with indexes outside of range",
            parallelism: 2,
            completions: 5,
            backoff_limit: 6,
            indexed: true,
            indexes: vec![
                ("0", "Succeeded"),
                ("5", "Running"),
                ("6", "Succeeded"),
                ("7", "Pending"),
                ("8", "Failed"),
            ],
            want_succeeded: 1,
            want_deletions: 2,
            want_completed: "0",
            want_patches: 5,
            want_terminating: 2,
            ..Default::default()
        },
        Row {
            name: "suspending a job with satisfied expectations",
            suspend: true,
            parallelism: 2,
            active: 2,
            completions: 4,
            backoff_limit: 6,
            want_deletions: 2,
            want_conditions: vec![("Suspended", "True", "JobSuspended", "Job suspended")],
            want_patches: 2,
            want_terminating: 2,
            ..Default::default()
        },
        Row {
            name: "count ready pods when suspending a job with satisfied expectations",
            suspend: true,
            parallelism: 2,
            active: 2,
            ready: 2,
            completions: 4,
            backoff_limit: 6,
            want_deletions: 2,
            want_conditions: vec![("Suspended", "True", "JobSuspended", "Job suspended")],
            want_patches: 2,
            want_terminating: 2,
            ..Default::default()
        },
        Row {
            name: "suspending a job with unsatisfied expectations",
            suspend: true,
            parallelism: 2,
            active: 3,
            unsatisfied: true,
            completions: 4,
            backoff_limit: 6,
            want_active: 3,
            ..Default::default()
        },
        Row {
            name: "count ready pods when suspending a job with unsatisfied expectations",
            suspend: true,
            parallelism: 2,
            active: 3,
            ready: 3,
            unsatisfied: true,
            completions: 4,
            backoff_limit: 6,
            want_active: 3,
            want_ready: 3,
            ..Default::default()
        },
        Row {
            name: "resuming a suspended job",
            was_suspended: true,
            parallelism: 2,
            completions: 4,
            backoff_limit: 6,
            want_creations: 2,
            want_active: 2,
            want_conditions: vec![("Suspended", "False", "JobResumed", "Job resumed")],
            ..Default::default()
        },
        Row {
            name: "suspending a deleted job",
            suspend: true,
            deleting: true,
            parallelism: 2,
            active: 2,
            completions: 4,
            backoff_limit: 6,
            want_active: 2,
            want_patches: 2,
            ..Default::default()
        },
        Row {
            name: "FailureTarget=False condition added manually is ignored",
            parallelism: 1,
            completions: 1,
            active: 1,
            ready: 1,
            initial: Some((1, 0, 0)),
            initial_conditions: vec![("FailureTarget", "False", "ConditionAddedManually", "Testing")],
            want_active: 1,
            want_ready: 1,
            want_conditions: vec![("FailureTarget", "False", "ConditionAddedManually", "Testing")],
            ..Default::default()
        },
        Row {
            name: "SuccessCriteriaMet=False condition added manually is ignored",
            parallelism: 1,
            completions: 1,
            active: 1,
            ready: 1,
            initial: Some((1, 0, 0)),
            initial_conditions: vec![("SuccessCriteriaMet", "False", "ConditionAddedManually", "Testing")],
            want_active: 1,
            want_ready: 1,
            want_conditions: vec![("SuccessCriteriaMet", "False", "ConditionAddedManually", "Testing")],
            ..Default::default()
        },
        Row {
            name: "backoff limit exceeded; JobManagedBy enabled",
            parallelism: 2,
            completions: 3,
            backoff_limit: 0,
            indexed: true,
            indexes: vec![("0", "Succeeded"), ("1", "Failed"), ("2", "Running")],
            want_succeeded: 1,
            want_failed: 2,
            want_completed: "0",
            want_conditions: vec![("FailureTarget", "True", BLE, BLE_MSG)],
            want_patches: 3,
            want_deletions: 1,
            want_terminating: 1,
            ..Default::default()
        },
    ];
    assert!(rows.len() >= 50, "{} rows", rows.len());
    for row in &rows {
        check(row);
    }
}

/// "too few active pods and active back-off": the pod waits 10s·2^0 and the Job is requeued then.
#[test]
fn back_off_requeues_at_remaining_delay() {
    let job = mk_job("foobar", 1, 1, 6).start_time(now()).build();
    let rec = BackoffRecord { failures_after_last_success: 1, last_failure_time: Some(secs_ago(3)) };
    let run = run_sync_with(&job, &[], RunOpts { backoff: Some(rec), ..Default::default() });
    assert_eq!(run.creates.len(), 0);
    assert_eq!(run.action, Some(SyncAction::PodsCreated));
    assert_eq!(run.requeue, Some(Duration::from_secs(7)));
    // A running, ready pod keeps counting as active while the replacement waits (k/k#139428).
    let pods = pods_with_statuses(0, 1, 0, 0, 0, 1);
    let job = mk_job("foobar", 2, 2, 6).start_time(now()).build();
    let rec = BackoffRecord { failures_after_last_success: 2, last_failure_time: Some(now()) };
    let run = run_sync_with(&job, &pods, RunOpts { backoff: Some(rec), ..Default::default() });
    let st = run.status(&job);
    assert_eq!((st.active, st.ready), (Some(1), Some(1)));
    assert_eq!(run.requeue, Some(Duration::from_secs(20)));
}

/// TestSyncJobPastDeadline, gates on (the "JobManagedBy enabled" expectations), and UPSTREAM.md §2
/// row 13.
#[test]
fn sync_job_past_deadline_table() {
    let cases: Vec<(&str, i32, i32, i64, i64, i32, bool, usize, usize, usize, usize, i32, i32, Vec<Cond>)> = vec![
        (
            "activeDeadlineSeconds less than single pod execution",
            1,
            1,
            10,
            15,
            6,
            false,
            1,
            0,
            0,
            1,
            0,
            1,
            vec![("FailureTarget", "True", DE, DE_MSG)],
        ),
        (
            "activeDeadlineSeconds bigger than single pod execution",
            1,
            2,
            10,
            15,
            6,
            false,
            1,
            1,
            0,
            1,
            1,
            1,
            vec![("FailureTarget", "True", DE, DE_MSG)],
        ),
        (
            "activeDeadlineSeconds times-out before any pod starts",
            1,
            1,
            10,
            10,
            6,
            false,
            0,
            0,
            0,
            0,
            0,
            0,
            vec![("FailureTarget", "True", DE, DE_MSG), ("Failed", "True", DE, DE_MSG)],
        ),
        (
            "activeDeadlineSeconds with backofflimit reach",
            1,
            1,
            1,
            10,
            0,
            false,
            0,
            0,
            1,
            0,
            0,
            1,
            vec![("FailureTarget", "True", BLE, BLE_MSG), ("Failed", "True", BLE, BLE_MSG)],
        ),
        (
            "activeDeadlineSeconds is not triggered when Job is suspended",
            1,
            2,
            10,
            15,
            6,
            true,
            0,
            0,
            0,
            0,
            0,
            0,
            vec![("Suspended", "True", "JobSuspended", "Job suspended")],
        ),
    ];
    for (
        name,
        p,
        c,
        ads,
        start,
        bl,
        suspend,
        active,
        succeeded,
        failed,
        want_del,
        want_succ,
        want_failed,
        want,
    ) in cases
    {
        let job = mk_job("foobar", p, c, bl)
            .active_deadline(ads)
            .suspend(suspend)
            .start_time(secs_ago(start))
            .build();
        let pods = pods_with_statuses(0, active, succeeded, failed, 0, 0);
        let run = run_sync(&job, &pods);
        let st = run.status(&job);
        assert_eq!(run.creates.len(), 0, "{name}");
        assert_eq!(run.deletes.len(), want_del, "{name}: deletions");
        assert_eq!(st.active.unwrap_or(0), 0, "{name}: active");
        assert_eq!(st.succeeded.unwrap_or(0), want_succ, "{name}: succeeded");
        assert_eq!(st.failed.unwrap_or(0), want_failed, "{name}: failed");
        assert!(st.start_time.is_some(), "{name}: startTime");
        assert_eq!(conds(&st), want_conds(&want), "{name}: conditions");
    }
    // Not yet past the deadline: requeue when it expires.
    let job = mk_job("foobar", 1, 1, 6).active_deadline(10).start_time(secs_ago(4)).build();
    let run = run_sync(&job, &pods_with_statuses(0, 1, 0, 0, 0, 0));
    assert_eq!(run.requeue, Some(Duration::from_secs(6)));
}

/// TestSyncJobWhenManagedBy (feature enabled rows) plus batchfleet's configurable managedBy.
#[test]
fn sync_job_when_managed_by() {
    let base = || mk_job("foobar", 2, 2, 6).counts(1, 0, 0).ready(1).start_time(secs_ago(5));
    let run = run_sync(&base().managed_by("custom-managed-by").build(), &[]);
    assert_eq!(run.skip.unwrap().reason, SkipReason::ManagedByOther("custom-managed-by".into()));
    for job in [base().managed_by("kubernetes.io/job-controller").build(), base().build()] {
        let run = run_sync(&job, &[]);
        let st = run.status(&job);
        let want = k8s_openapi::api::batch::v1::JobStatus {
            active: Some(2),
            ready: Some(0),
            terminating: Some(0),
            start_time: Some(secs_ago(5).into()),
            uncounted_terminated_pods: Some(Default::default()),
            ..Default::default()
        };
        assert_eq!(st, want);
    }
    let fleet = Config { managed_by: "batchfleet.io/job-controller".into(), ..Config::default() };
    let run = run_sync_with(&base().build(), &[], RunOpts { config: fleet.clone(), ..Default::default() });
    assert_eq!(run.skip.unwrap().reason, SkipReason::ManagedByOther("kubernetes.io/job-controller".into()));
    let run = run_sync_with(
        &base().managed_by("batchfleet.io/job-controller").build(),
        &[],
        RunOpts { config: fleet, ..Default::default() },
    );
    assert_eq!(run.creates.len(), 2);
}

/// TestSyncJobComplete ("a finished Job is a no-op") and the UnknownCompletionMode warning.
#[test]
fn finished_and_unknown_mode_jobs_are_skipped() {
    let done = mk_job("foobar", 1, 1, 6).condition("Complete", "True").build();
    let run = run_sync(&done, &pods_with_statuses(0, 1, 0, 0, 0, 0));
    let skip = run.skip.unwrap();
    assert_eq!((skip.reason, skip.forget_backoff_record), (SkipReason::Finished, true));
    let odd = mk_job("foobar", 1, 1, 6).completion_mode("Sideways").build();
    let run = run_sync(&odd, &[]);
    assert_eq!(run.skip.unwrap().reason, SkipReason::UnknownCompletionMode("Sideways".into()));
    assert_eq!(
        run.events,
        vec![Event::warning("UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")]
    );
}

/// TestSingleJobFailedCondition: a Failed=False condition is flipped to True (deadline exceeded;
/// with the gates on it goes through FailureTarget).
#[test]
fn single_job_failed_condition() {
    let job = mk_job("foobar", 1, 1, 6)
        .active_deadline(10)
        .start_time(secs_ago(15))
        .condition_full("Failed", "False", DE, DE_MSG)
        .build();
    let run = run_sync(&job, &[]);
    let st = run.status(&job);
    assert_eq!(
        conds(&st),
        want_conds(&[("Failed", "True", DE, DE_MSG), ("FailureTarget", "True", DE, DE_MSG)]),
        "the existing Failed condition is updated in place"
    );
    assert_eq!(run.deletes.len(), 0);
}

/// TestSyncJobExpectations: unsatisfied expectations never create or delete.
#[test]
fn sync_job_expectations() {
    let job = mk_job("foobar", 2, 2, 6).build();
    let pods = pods_with_statuses(1, 0, 0, 0, 0, 0);
    let run = run_sync_with(&job, &pods, RunOpts { expectations_satisfied: false, ..Default::default() });
    assert_eq!((run.creates.len(), run.deletes.len()), (0, 0));
    assert_eq!(run.action, Some(SyncAction::Reconciling));
}

/// TestJobBackoffForOnFailure (gates on: FailureTarget first while pods are terminating).
#[test]
fn job_backoff_for_on_failure_table() {
    let ft = vec![("FailureTarget", "True", BLE, BLE_MSG)];
    let cases: Vec<(&str, i32, i32, i32, bool, Vec<i32>, &str, i32, i32, i32, Vec<Cond>)> = vec![
        ("backoffLimit 0 should have 1 pod active", 1, 1, 0, false, vec![0], "Running", 1, 0, 0, vec![]),
        (
            "backoffLimit 1 with restartCount 0 should have 1 pod active",
            1,
            1,
            1,
            false,
            vec![0],
            "Running",
            1,
            0,
            0,
            vec![],
        ),
        (
            "backoffLimit 1 with restartCount 1 and podRunning should have 0 pod active",
            1,
            1,
            1,
            false,
            vec![1],
            "Running",
            0,
            0,
            1,
            ft.clone(),
        ),
        (
            "backoffLimit 1 with restartCount 1 and podPending should have 0 pod active",
            1,
            1,
            1,
            false,
            vec![1],
            "Pending",
            0,
            0,
            1,
            ft.clone(),
        ),
        (
            "too many job failures with podRunning - single pod",
            1,
            5,
            2,
            false,
            vec![2],
            "Running",
            0,
            0,
            1,
            ft.clone(),
        ),
        (
            "too many job failures with podPending - single pod",
            1,
            5,
            2,
            false,
            vec![2],
            "Pending",
            0,
            0,
            1,
            ft.clone(),
        ),
        (
            "too many job failures with podRunning - multiple pods",
            2,
            5,
            2,
            false,
            vec![1, 1],
            "Running",
            0,
            0,
            2,
            ft.clone(),
        ),
        (
            "too many job failures with podPending - multiple pods",
            2,
            5,
            2,
            false,
            vec![1, 1],
            "Pending",
            0,
            0,
            2,
            ft.clone(),
        ),
        ("not enough failures", 2, 5, 3, false, vec![1, 1], "Running", 2, 0, 0, vec![]),
        (
            "suspending a job",
            2,
            4,
            6,
            true,
            vec![1, 1],
            "Running",
            0,
            0,
            0,
            vec![("Suspended", "True", "JobSuspended", "Job suspended")],
        ),
        ("finished job", 2, 4, 6, true, vec![1, 1, 2, 0], "Succeeded", 0, 4, 0, sm(CR, CR_MSG)),
    ];
    for (name, p, c, bl, suspend, restarts, phase, want_active, want_succ, want_failed, want) in cases {
        let mut b = mk_job("foobar", p, c, bl).restart_policy("OnFailure").suspend(suspend);
        if phase == "Succeeded" {
            // The pods ran before the Job was suspended, so it has a startTime; upstream's fake
            // omits it, which a real apiserver rejects for a finished Job.
            b = b.start_time(secs_ago(30));
        }
        let job = b.build();
        let pods: Vec<Pod> = restarts
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                let mut pod = mk_pod(&format!("p{i}")).phase(phase).finalizer().build();
                pod.status.as_mut().unwrap().container_statuses =
                    Some(vec![k8s_openapi::api::core::v1::ContainerStatus {
                        restart_count: r,
                        ..Default::default()
                    }]);
                pod
            })
            .collect();
        let run = run_sync(&job, &pods);
        let st = run.status(&job);
        assert_eq!(st.active.unwrap_or(0), want_active, "{name}: active");
        assert_eq!(st.succeeded.unwrap_or(0), want_succ, "{name}: succeeded");
        assert_eq!(st.failed.unwrap_or(0), want_failed, "{name}: failed");
        assert_eq!(conds(&st), want_conds(&want), "{name}: conditions");
    }
}

/// TestJobBackoffOnRestartPolicyNever.
#[test]
fn job_backoff_on_restart_policy_never_table() {
    let fail = vec![("FailureTarget", "True", BLE, BLE_MSG), ("Failed", "True", BLE, BLE_MSG)];
    let cases: Vec<(&str, i32, i32, i32, usize, usize, i32, i32, Vec<Cond>)> = vec![
        ("not enough failures with backoffLimit 0 - single pod", 1, 1, 0, 1, 0, 1, 0, vec![]),
        ("not enough failures with backoffLimit 1 - single pod", 1, 1, 1, 0, 1, 1, 1, vec![]),
        ("too many failures with backoffLimit 1 - single pod", 1, 1, 1, 0, 2, 0, 2, fail.clone()),
        ("not enough failures with backoffLimit 6 - multiple pods", 2, 2, 6, 1, 6, 2, 6, vec![]),
        ("too many failures with backoffLimit 6 - multiple pods", 2, 2, 6, 0, 7, 0, 7, fail),
    ];
    for (name, p, c, bl, active, failed, want_active, want_failed, want) in cases {
        let job = mk_job("foobar", p, c, bl).restart_policy("Never").build();
        let pods = pods_with_statuses(0, active, 0, failed, 0, 0);
        let st = run_sync(&job, &pods).status(&job);
        assert_eq!(st.active.unwrap_or(0), want_active, "{name}: active");
        assert_eq!(st.failed.unwrap_or(0), want_failed, "{name}: failed");
        assert_eq!(conds(&st), want_conds(&want), "{name}: conditions");
    }
}

/// UPSTREAM.md §2 row 11: suspend deletes, then resume creates and resets startTime; events.
#[test]
fn suspend_then_resume_events_and_start_time() {
    let job = mk_job("foobar", 2, 5, 6).suspend(true).start_time(secs_ago(100)).build();
    let run = run_sync(&job, &pods_with_statuses(0, 2, 0, 0, 0, 0));
    assert_eq!(run.deletes.len(), 2);
    assert!(run.events.contains(&Event::normal("Suspended", "Job suspended")));
    assert_eq!(run.events.iter().filter(|e| e.reason == "SuccessfulDelete").count(), 2);
    let st = run.status(&job);
    assert_eq!(st.start_time, Some(secs_ago(100).into()), "suspending keeps startTime");
    let mut resumed = job.clone();
    resumed.spec.as_mut().unwrap().suspend = Some(false);
    resumed.status = Some(st);
    let run = run_sync(&resumed, &[]);
    assert_eq!(run.creates.len(), 2);
    assert!(run.events.contains(&Event::normal("Resumed", "Job resumed")));
    let st = run.status(&resumed);
    assert_eq!(st.start_time, Some(now().into()), "resuming resets startTime");
    assert_eq!(conds(&st), want_conds(&[("Suspended", "False", "JobResumed", "Job resumed")]));
}

/// Events and metrics of a full success (recordJobFinished, recordJobPodFinished) and the
/// TooManySucceededPods warning.
#[test]
fn completion_events_and_metrics() {
    let job = mk_job("foobar", 2, 2, 6).build();
    let run = run_sync(&job, &pods_with_statuses(0, 0, 3, 0, 0, 0));
    assert_eq!(
        run.events,
        vec![
            Event::warning(
                "TooManySucceededPods",
                "Too many succeeded pods running after completion count reached"
            ),
            Event::normal("Completed", "Job completed"),
        ]
    );
    assert!(run.metrics.contains(&Metric::JobsFinished {
        completion_mode: "NonIndexed",
        result: "succeeded",
        reason: "CompletionsReached".into()
    }));
    assert_eq!(run.pods_finished_metric("succeeded"), 3);
    let st = run.status(&job);
    assert!(st.completion_time.is_some());
    // The failure event carries the condition's reason and message.
    let job = mk_job("foobar", 1, 1, 0).build();
    let run = run_sync(&job, &pods_with_statuses(0, 0, 0, 1, 0, 0));
    assert_eq!(run.events, vec![Event::warning(BLE, BLE_MSG)]);
    assert!(run.metrics.contains(&Metric::JobsFinished {
        completion_mode: "NonIndexed",
        result: "failed",
        reason: BLE.into()
    }));
}

/// Pod events and job_pods_creation_total, slow start (TestControllerSyncJob "limited pods").
#[test]
fn pod_events_and_slow_start() {
    assert!(slow_start_batches(0).is_empty());
    assert_eq!(slow_start_batches(10), vec![0..1, 1..3, 3..7, 7..10]);
    let job = mk_job("foobar", 100, 200, 6).build();
    let run = run_sync_with(
        &job,
        &[],
        RunOpts { fake: Fake { create_limit: 10, ..Default::default() }, ..Default::default() },
    );
    assert_eq!(run.events.iter().filter(|e| e.reason == "SuccessfulCreate").count(), 10);
    assert_eq!(run.events.iter().filter(|e| e.reason == "FailedCreate").count(), 5);
    assert!(run.metrics.contains(&Metric::JobPodsCreation { reason: "new", status: "failed", delta: 5 }));
    assert!(run.metrics.contains(&Metric::JobPodsCreation { reason: "new", status: "succeeded", delta: 15 }));
    assert!(matches!(run.error, Some(SyncError::CreatePods(_))));
    // MaxPodCreateDeletePerSync caps one sync's creations.
    let run = run_sync(&mk_job("foobar", 1000, 1000, 6).build(), &[]);
    assert_eq!(run.creates.len(), 500);
}

/// Harness of TestSyncJobWithJobPodFailurePolicy / TestSyncJobWithJobSuccessPolicy /
/// TestSyncJobWithJobBackoffLimitPerIndex: pods named `mypod-<i>`.
fn named(pods: Vec<crate::job::core::testutil::PodBuilder>) -> Vec<Pod> {
    pods.into_iter()
        .enumerate()
        .map(|(i, b)| {
            let mut p = b.build();
            p.metadata.name = Some(format!("mypod-{i}"));
            p
        })
        .collect()
}

fn pfp_msg(exit: i32, container: &str, index: usize) -> String {
    format!(
        "Container {container} for pod default/mypod-0 failed with exit code {exit} matching FailJob rule at index {index}"
    )
}

/// TestSyncJobWithJobPodFailurePolicy, every row, gates on (podReplacementPolicy Failed).
#[test]
fn sync_job_with_pod_failure_policy_table() {
    let on_exit = || pfp_exit_codes(&[("Ignore", "In", &[1, 2, 3]), ("FailJob", "In", &[5, 6, 7])]);
    let failed_exit =
        |name: &str, code: i32| mk_pod("p").phase("Failed").container_exit(name, code).finalizer();
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let pfp = "PodFailurePolicy";
    let fail_both =
        |msg: &'static str| vec![("FailureTarget", "True", pfp, msg), ("Failed", "True", pfp, msg)];
    let m5 = leak(pfp_msg(5, "main-container", 1));
    struct Case {
        name: &'static str,
        job: Job,
        pods: Vec<Pod>,
        conditions: Vec<Cond>,
        active: i32,
        failed: i32,
        terminating: i32,
    }
    let job = |p: i32, c: i32, bl: i32, policy: PodFailurePolicy| {
        mk_job("foobar", p, c, bl).pod_failure_policy(policy).replacement_policy("Failed")
    };
    let mut name_restricted = on_exit();
    for r in &mut name_restricted.rules {
        r.on_exit_codes.as_mut().unwrap().container_name = Some("main-container".into());
    }
    let cases = vec![
        Case {
            name: "default handling for pod failure if the container matching the exit codes does not match the containerName restriction",
            job: job(1, 1, 6, name_restricted).build(),
            pods: named(vec![mk_pod("p")
                .phase("Failed")
                .container_exit("monitoring-container", 5)
                .container_exit("main-container", 42)
                .finalizer()]),
            conditions: vec![],
            active: 1,
            failed: 1,
            terminating: 0,
        },
        Case {
            name: "running pod should not result in job fail based on OnExitCodes",
            job: job(1, 1, 6, on_exit()).build(),
            pods: named(vec![mk_pod("p").phase("Running").container_exit("main-container", 5).finalizer()]),
            conditions: vec![],
            active: 1,
            failed: 0,
            terminating: 0,
        },
        Case {
            name: "fail job based on OnExitCodes",
            job: job(1, 1, 6, on_exit()).build(),
            pods: named(vec![failed_exit("main-container", 5)]),
            conditions: fail_both(m5),
            active: 0,
            failed: 1,
            terminating: 0,
        },
        Case {
            name: "job marked already as failure target with failed pod",
            job: job(1, 1, 6, on_exit()).condition_full("FailureTarget", "True", pfp, m5).build(),
            pods: named(vec![failed_exit("main-container", 5)]),
            conditions: fail_both(m5),
            active: 0,
            failed: 1,
            terminating: 0,
        },
        Case {
            name: "job marked already as failure target with failed pod, message based on already deleted pod",
            job: job(1, 1, 6, on_exit())
                .condition_full(
                    "FailureTarget",
                    "True",
                    pfp,
                    "Container main-container for pod default/already-deleted-pod failed with exit code 5 matching FailJob rule at index 1",
                )
                .build(),
            pods: named(vec![failed_exit("main-container", 5)]),
            conditions: fail_both(
                "Container main-container for pod default/already-deleted-pod failed with exit code 5 matching FailJob rule at index 1",
            ),
            active: 0,
            failed: 1,
            terminating: 0,
        },
        Case {
            name: "fail job with multiple pods",
            job: job(2, 2, 6, on_exit()).build(),
            pods: named(vec![mk_pod("p").phase("Running").finalizer(), failed_exit("main-container", 5)]),
            conditions: vec![(
                "FailureTarget",
                "True",
                pfp,
                "Container main-container for pod default/mypod-1 failed with exit code 5 matching FailJob rule at index 1",
            )],
            active: 0,
            failed: 2,
            terminating: 1,
        },
        Case {
            name: "fail indexed job based on OnExitCodes",
            job: job(1, 1, 6, on_exit()).indexed().build(),
            pods: named(vec![failed_exit("main-container", 5).index("0")]),
            conditions: fail_both(m5),
            active: 0,
            failed: 1,
            terminating: 0,
        },
        Case {
            name: "fail job based on OnExitCodes with NotIn operator",
            job: job(1, 1, 6, pfp_exit_codes(&[("FailJob", "NotIn", &[5, 6, 7])])).build(),
            pods: named(vec![failed_exit("main-container", 42)]),
            conditions: fail_both(leak(pfp_msg(42, "main-container", 0))),
            active: 0,
            failed: 1,
            terminating: 0,
        },
        Case {
            name: "default handling job based on OnExitCodes with NotIn operator",
            job: job(1, 1, 6, pfp_exit_codes(&[("FailJob", "NotIn", &[5, 6, 7])])).build(),
            pods: named(vec![failed_exit("main-container", 5)]),
            conditions: vec![],
            active: 1,
            failed: 1,
            terminating: 0,
        },
        Case {
            name: "fail job based on OnExitCodes for InitContainer",
            job: job(1, 1, 6, on_exit()).build(),
            pods: named(vec![mk_pod("p")
                .phase("Failed")
                .init_container_exit("init-container", 5)
                .container_exit("main-container", 143)
                .finalizer()]),
            conditions: fail_both(leak(pfp_msg(5, "init-container", 1))),
            active: 0,
            failed: 1,
            terminating: 0,
        },
        Case {
            name: "ignore pod failure; both rules are matching, the first is executed only",
            job: job(1, 1, 0, on_exit()).build(),
            pods: named(vec![mk_pod("p")
                .phase("Failed")
                .container_exit("container1", 2)
                .container_exit("container2", 6)
                .finalizer()]),
            conditions: vec![],
            active: 1,
            failed: 0,
            terminating: 0,
        },
        Case {
            name: "ignore pod failure based on OnExitCodes",
            job: job(1, 1, 0, on_exit()).build(),
            pods: named(vec![failed_exit("", 1)]),
            conditions: vec![],
            active: 1,
            failed: 0,
            terminating: 0,
        },
        Case {
            name: "default job based on OnExitCodes",
            job: job(1, 1, 0, on_exit()).build(),
            pods: named(vec![failed_exit("", 10)]),
            conditions: vec![("FailureTarget", "True", BLE, BLE_MSG), ("Failed", "True", BLE, BLE_MSG)],
            active: 0,
            failed: 1,
            terminating: 0,
        },
        Case {
            name: "count pod failure based on OnExitCodes; both rules are matching, the first is executed only",
            job: job(1, 1, 6, pfp_exit_codes(&[("Count", "In", &[1, 2]), ("Ignore", "In", &[2, 3])])).build(),
            pods: named(vec![failed_exit("", 2)]),
            conditions: vec![],
            active: 1,
            failed: 1,
            terminating: 0,
        },
        Case {
            name: "count pod failure based on OnPodConditions; both rules are matching, the first is executed only",
            job: job(
                1,
                1,
                6,
                pfp_pod_conditions(&[("Count", "ResourceLimitExceeded", "True"), ("Ignore", "DisruptionTarget", "True")]),
            )
            .build(),
            pods: named(vec![mk_pod("p")
                .phase("Failed")
                .condition("ResourceLimitExceeded", "True")
                .condition("DisruptionTarget", "True")
                .finalizer()]),
            conditions: vec![],
            active: 1,
            failed: 1,
            terminating: 0,
        },
        Case {
            name: "ignore pod failure based on OnPodConditions",
            job: job(1, 1, 0, pfp_pod_conditions(&[("Ignore", "DisruptionTarget", "True")])).build(),
            pods: named(vec![mk_pod("p").phase("Failed").condition("DisruptionTarget", "True").finalizer()]),
            conditions: vec![],
            active: 1,
            failed: 0,
            terminating: 0,
        },
        Case {
            name: "ignore pod failure based on OnPodConditions, ignored failures delays pod recreation",
            job: job(1, 1, 0, pfp_pod_conditions(&[("Ignore", "DisruptionTarget", "True")])).build(),
            pods: named(vec![mk_pod("p")
                .phase("Failed")
                .condition("DisruptionTarget", "True")
                .deleted_at(now(), None)
                .finalizer()]),
            conditions: vec![],
            active: 0,
            failed: 0,
            terminating: 0,
        },
        Case {
            name: "fail job based on OnPodConditions",
            job: job(1, 1, 6, pfp_pod_conditions(&[("FailJob", "DisruptionTarget", "True")])).build(),
            pods: named(vec![mk_pod("p").phase("Failed").condition("DisruptionTarget", "True").finalizer()]),
            conditions: fail_both("Pod default/mypod-0 has condition DisruptionTarget matching FailJob rule at index 0"),
            active: 0,
            failed: 1,
            terminating: 0,
        },
        Case {
            name: "terminating Pod not considered failed when JobPodFailurePolicy is enabled and used",
            job: job(1, -1, 0, pfp_pod_conditions(&[("Count", "DisruptionTarget", "True")])).build(),
            pods: named(vec![mk_pod("p").phase("").deleted_at(now(), None).finalizer()]),
            conditions: vec![],
            active: 0,
            failed: 0,
            terminating: 1,
        },
    ];
    for c in cases {
        let name = c.name;
        let st = run_sync(&c.job, &c.pods).status(&c.job);
        assert_eq!(conds(&st), want_conds(&c.conditions), "{name}: conditions");
        assert_eq!(st.active.unwrap_or(0), c.active, "{name}: active");
        assert_eq!(st.succeeded.unwrap_or(0), 0, "{name}: succeeded");
        assert_eq!(st.failed.unwrap_or(0), c.failed, "{name}: failed");
        assert_eq!(st.terminating.unwrap_or(0), c.terminating, "{name}: terminating");
    }
}

/// TestSyncJobWithJobSuccessPolicy, gates on (the rows with JobPodReplacementPolicy enabled;
/// failedIndexes is "" whenever backoffLimitPerIndex is set, as JobBackoffLimitPerIndex is GA).
#[test]
fn sync_job_with_success_policy_table() {
    let sp = "SuccessPolicy";
    let m0 = "Matched rules at index 0";
    let scm = vec![("SuccessCriteriaMet", "True", sp, m0)];
    let done = vec![("SuccessCriteriaMet", "True", sp, m0), ("Complete", "True", sp, m0)];
    let rule01 = || success_policy(&[(Some("0,1"), Some(1))]);
    let disrupt = || pfp_pod_conditions(&[("FailJob", "DisruptionTarget", "True")]);
    let p = |uid: &str, ix: &str, phase: &str| mk_pod(uid).uid(uid).index(ix).phase(phase).finalizer();
    let j = |n: i32| mk_job("foobar", n, n, i32::MAX).indexed();
    let cases: Vec<(&str, Job, Vec<Pod>, i32, i32, i32, &str, Option<&str>, Vec<Cond>)> = vec![
        (
            "job has SuccessCriteriaMet condition if job meets to successPolicy and some indexes fail",
            j(3).success_policy(rule01()).build(),
            named(vec![
                p("a1", "0", "Failed"),
                p("a2", "0", "Running"),
                p("b", "1", "Succeeded"),
                p("c", "2", "Running"),
            ]),
            1,
            1,
            2,
            "1",
            None,
            scm.clone(),
        ),
        (
            "job with podFailurePolicy and successPolicy; SuccessCriteriaMet if job doesn't meet to podFailurePolicy",
            j(2).success_policy(rule01()).pod_failure_policy(disrupt()).build(),
            named(vec![p("a1", "0", "Failed"), p("a2", "0", "Running"), p("b", "1", "Succeeded")]),
            1,
            1,
            1,
            "1",
            None,
            scm.clone(),
        ),
        (
            "job with backoffLimitPerIndex and successPolicy; SuccessCriteriaMet if job doesn't meet backoffLimitPerIndex",
            j(2).backoff_limit_per_index(2).success_policy(rule01()).build(),
            named(vec![p("a1", "0", "Failed"), p("a2", "0", "Running"), p("b", "1", "Succeeded")]),
            1,
            1,
            1,
            "1",
            Some(""),
            scm.clone(),
        ),
        (
            "job has both Complete and SuccessCriteriaMet condition when job meets to successPolicy and all pods have been already removed",
            j(2).backoff_limit_per_index(2)
                .success_policy(rule01())
                .condition_full("SuccessCriteriaMet", "True", sp, m0)
                .build(),
            named(vec![p("a", "0", "Failed"), p("b", "1", "Succeeded")]),
            1,
            1,
            0,
            "1",
            Some(""),
            done.clone(),
        ),
        (
            "job has SuccessCriteriaMet condition when job meets to successPolicy and some pods still are running",
            j(3).backoff_limit_per_index(3)
                .success_policy(rule01())
                .condition_full("SuccessCriteriaMet", "True", sp, m0)
                .build(),
            named(vec![
                p("a1", "0", "Failed"),
                p("a2", "1", "Running"),
                p("b", "1", "Succeeded"),
                p("c", "2", "Running"),
            ]),
            1,
            1,
            2,
            "1",
            Some(""),
            scm.clone(),
        ),
        (
            "job has a failed condition when job meets to both successPolicy and podFailurePolicy",
            j(2).success_policy(rule01()).pod_failure_policy(disrupt()).build(),
            named(vec![
                p("a1", "0", "Failed").condition("DisruptionTarget", "True"),
                p("a2", "0", "Running"),
                p("b", "1", "Succeeded"),
            ]),
            2,
            1,
            1,
            "1",
            None,
            vec![(
                "FailureTarget",
                "True",
                "PodFailurePolicy",
                "Pod default/mypod-0 has condition DisruptionTarget matching FailJob rule at index 0",
            )],
        ),
        (
            "job has a failed condition when job meets to both successPolicy and backoffLimitPerIndex",
            j(2).backoff_limit_per_index(1).success_policy(rule01()).build(),
            named(vec![p("a", "0", "Failed").failure_count("1"), p("b", "1", "Succeeded")]),
            1,
            1,
            0,
            "1",
            Some("0"),
            vec![
                ("FailureTarget", "True", "FailedIndexes", "Job has failed indexes"),
                ("Failed", "True", "FailedIndexes", "Job has failed indexes"),
            ],
        ),
        (
            "job has a failed condition when job meets to both successPolicy and backoffLimit",
            mk_job("foobar", 2, 2, 1).indexed().success_policy(rule01()).build(),
            named(vec![p("a1", "0", "Failed"), p("a2", "0", "Failed"), p("b", "1", "Succeeded")]),
            2,
            1,
            0,
            "1",
            None,
            vec![("FailureTarget", "True", BLE, BLE_MSG), ("Failed", "True", BLE, BLE_MSG)],
        ),
        (
            "job with SuccessCriteriaMet has never been transitioned to FailureTarget and Failed even if job meets podFailurePolicy",
            j(2).success_policy(success_policy(&[(None, Some(1))]))
                .pod_failure_policy(disrupt())
                .counts(0, 1, 0)
                .completed_indexes("1")
                .condition_full("SuccessCriteriaMet", "True", sp, m0)
                .build(),
            named(vec![
                p("a", "0", "Failed").condition("DisruptionTarget", "True"),
                p("b", "1", "Succeeded"),
            ]),
            1,
            1,
            0,
            "1",
            None,
            done.clone(),
        ),
        (
            "job with SuccessCriteriaMet has never been transitioned to FailureTarget and Failed even if job meet backoffLimitPerIndex",
            j(2).backoff_limit_per_index(1)
                .success_policy(success_policy(&[(Some("1"), None)]))
                .counts(0, 1, 0)
                .completed_indexes("1")
                .condition_full("SuccessCriteriaMet", "True", sp, m0)
                .build(),
            named(vec![p("a", "0", "Failed").failure_count("1"), p("b", "1", "Succeeded")]),
            1,
            1,
            0,
            "1",
            Some("0"),
            done.clone(),
        ),
        (
            "job with SuccessCriteriaMet has never been transitioned to FailureTarget and Failed even if job meets backoffLimit",
            mk_job("foobar", 2, 2, 1)
                .indexed()
                .success_policy(rule01())
                .counts(0, 1, 0)
                .completed_indexes("1")
                .condition_full("SuccessCriteriaMet", "True", sp, m0)
                .build(),
            named(vec![p("a", "0", "Failed"), p("b", "1", "Succeeded")]),
            1,
            1,
            0,
            "1",
            None,
            done.clone(),
        ),
        (
            "job with FailureTarget has never been transitioned to SuccessCriteriaMet even if job meets successPolicy",
            j(2).success_policy(rule01())
                .pod_failure_policy(disrupt())
                .counts(0, 0, 1)
                .completed_indexes("1")
                .condition_full(
                    "FailureTarget",
                    "True",
                    "PodFailurePolicy",
                    "Pod default/mypod-0 has condition DisruptionTarget matching FailJob rule at index 0",
                )
                .build(),
            named(vec![
                mk_pod("a").uid("a").index("0").phase("Failed").condition("DisruptionTarget", "True"),
                p("b", "1", "Succeeded"),
            ]),
            1,
            1,
            0,
            "1",
            None,
            vec![
                (
                    "FailureTarget",
                    "True",
                    "PodFailurePolicy",
                    "Pod default/mypod-0 has condition DisruptionTarget matching FailJob rule at index 0",
                ),
                (
                    "Failed",
                    "True",
                    "PodFailurePolicy",
                    "Pod default/mypod-0 has condition DisruptionTarget matching FailJob rule at index 0",
                ),
            ],
        ),
    ];
    for (name, job, pods, failed, succeeded, terminating, completed, failed_indexes, want) in cases {
        let st = run_sync(&job, &pods).status(&job);
        assert_eq!(st.failed.unwrap_or(0), failed, "{name}: failed");
        assert_eq!(st.succeeded.unwrap_or(0), succeeded, "{name}: succeeded");
        assert_eq!(st.terminating, Some(terminating), "{name}: terminating");
        assert_eq!(st.active.unwrap_or(0), 0, "{name}: active");
        assert_eq!(st.completed_indexes.as_deref().unwrap_or(""), completed, "{name}: completedIndexes");
        assert_eq!(st.failed_indexes.as_deref(), failed_indexes, "{name}: failedIndexes");
        assert_eq!(st.uncounted_terminated_pods, Some(Default::default()), "{name}: uncounted");
        assert_eq!(conds(&st), want_conds(&want), "{name}: conditions");
    }
}

/// TestSyncJobWithJobBackoffLimitPerIndex, gates on.
#[test]
fn sync_job_with_backoff_limit_per_index_table() {
    let p = |uid: &str, ix: &str, phase: &str, count: &str| {
        mk_pod(uid).uid(uid).index(ix).phase(phase).failure_count(count).finalizer()
    };
    let j = |n: i32, bl: i32| mk_job("foobar", n, n, bl).indexed().backoff_limit_per_index(1);
    let fail =
        |r: &'static str, m: &'static str| vec![("FailureTarget", "True", r, m), ("Failed", "True", r, m)];
    let exit3 = |action: &str| pfp_exit_codes(&[(action, "In", &[3])]);
    let x3 = || {
        mk_pod("a").uid("a").index("0").failure_count("0").phase("Failed").container_exit("x", 3).finalizer()
    };
    let cases: Vec<(&str, Job, Vec<Pod>, i32, i32, i32, i32, &str, &str, Vec<Cond>)> = vec![
        (
            "successful job after a single failure within index",
            j(2, i32::MAX).build(),
            named(vec![
                p("a1", "0", "Failed", "0"),
                p("a2", "0", "Succeeded", "1"),
                p("b", "1", "Succeeded", "0"),
            ]),
            0,
            1,
            2,
            0,
            "0,1",
            "",
            sm(CR, CR_MSG),
        ),
        (
            "single failed pod, not counted as the replacement pod creation is delayed",
            j(2, i32::MAX).build(),
            named(vec![p("a", "0", "Failed", "0")]),
            2,
            0,
            0,
            0,
            "",
            "",
            vec![],
        ),
        (
            "single failed pod replaced already",
            j(2, i32::MAX).build(),
            named(vec![p("a", "0", "Failed", "0"), p("b", "0", "Pending", "1")]),
            2,
            1,
            0,
            0,
            "",
            "",
            vec![],
        ),
        (
            "single failed index due to exceeding the backoff limit per index, the job continues",
            j(2, i32::MAX).build(),
            named(vec![p("a", "0", "Failed", "1")]),
            1,
            1,
            0,
            0,
            "",
            "0",
            vec![],
        ),
        (
            "single failed index due to FailIndex action, the job continues",
            j(2, i32::MAX).pod_failure_policy(exit3("FailIndex")).build(),
            named(vec![x3()]),
            1,
            1,
            0,
            0,
            "",
            "0",
            vec![],
        ),
        (
            "job failed index due to FailJob action",
            j(2, 6).pod_failure_policy(exit3("FailJob")).build(),
            named(vec![x3()]),
            0,
            1,
            0,
            0,
            "",
            "",
            fail(
                "PodFailurePolicy",
                "Container x for pod default/mypod-0 failed with exit code 3 matching FailJob rule at index 0",
            ),
        ),
        (
            "job pod failure ignored due to matching Ignore action",
            j(2, 6).pod_failure_policy(exit3("Ignore")).build(),
            named(vec![x3()]),
            2,
            0,
            0,
            0,
            "",
            "",
            vec![],
        ),
        (
            "job failed due to exceeding backoffLimit before backoffLimitPerIndex",
            j(2, 1).build(),
            named(vec![p("a", "0", "Failed", "0"), p("b", "1", "Failed", "0")]),
            0,
            2,
            0,
            0,
            "",
            "",
            fail(BLE, BLE_MSG),
        ),
        (
            "job failed due to failed indexes",
            j(2, i32::MAX).build(),
            named(vec![p("a", "0", "Failed", "1"), p("b", "1", "Succeeded", "0")]),
            0,
            1,
            1,
            0,
            "1",
            "0",
            fail("FailedIndexes", "Job has failed indexes"),
        ),
        (
            "job failed due to exceeding max failed indexes",
            j(4, i32::MAX).max_failed_indexes(1).build(),
            named(vec![
                p("a", "0", "Failed", "1"),
                p("b", "1", "Succeeded", "0"),
                p("c", "2", "Failed", "1"),
                p("d", "3", "Running", "0"),
            ]),
            0,
            3,
            1,
            1,
            "1",
            "0,2",
            vec![(
                "FailureTarget",
                "True",
                "MaxFailedIndexesExceeded",
                "Job has exceeded the specified maximal number of failed indexes",
            )],
        ),
    ];
    for (name, job, pods, active, failed, succeeded, terminating, completed, failed_ix, want) in cases {
        let run = run_sync(&job, &pods);
        let st = run.status(&job);
        assert_eq!(st.active.unwrap_or(0), active, "{name}: active");
        assert_eq!(st.failed.unwrap_or(0), failed, "{name}: failed");
        assert_eq!(st.succeeded.unwrap_or(0), succeeded, "{name}: succeeded");
        assert_eq!(st.terminating, Some(terminating), "{name}: terminating");
        assert_eq!(st.completed_indexes.as_deref().unwrap_or(""), completed, "{name}: completedIndexes");
        assert_eq!(st.failed_indexes.as_deref(), Some(failed_ix), "{name}: failedIndexes");
        assert_eq!(conds(&st), want_conds(&want), "{name}: conditions");
    }
}

/// UPSTREAM.md §1 Job 10: the replacement pod carries the counts of the failed pod it replaces,
/// and its creation waits the per-index back-off (TestGetPodCreationInfoForIndependentIndexes).
#[test]
fn per_index_replacement_carries_counts_and_waits() {
    let job = mk_job("foobar", 2, 2, i32::MAX).indexed().backoff_limit_per_index(3).build();
    let failed = |t| {
        mk_pod("a").uid("a").index("0").failure_count("1").phase("Failed").deleted_at(t, None).finalizer()
    };
    // Failed just now with one earlier failure: index 0 waits 10s·2^(2-1) = 20s, index 1 starts now.
    let run = run_sync(&job, &named(vec![failed(now())]));
    assert_eq!(run.created_indexes(), vec![1]);
    // Long ago: index 0 is recreated with failure count 2 and the failed pod is then counted.
    let run = run_sync(&job, &named(vec![failed(secs_ago(3600))]));
    assert_eq!(run.created_indexes(), vec![0, 1]);
    let ann = |ix: usize| run.creates[ix].metadata.annotations.clone().unwrap();
    assert_eq!(ann(0)["batch.kubernetes.io/job-index-failure-count"], "2");
    assert_eq!(ann(1)["batch.kubernetes.io/job-index-failure-count"], "0");
    // Only index 0 pending, and it must wait: requeue at the remaining per-index back-off.
    let job = mk_job("foobar", 1, 1, i32::MAX).indexed().backoff_limit_per_index(3).build();
    let run = run_sync(&job, &named(vec![failed(secs_ago(5))]));
    assert_eq!(run.creates.len(), 0);
    assert_eq!(run.requeue, Some(Duration::from_secs(15)));
}

/// The pods manageJob creates (TestControllerSyncJob's "job start" rows: NonIndexed and Indexed,
/// 2 of 2 to create): a NonIndexed Job's are all the same object, shared so the shell builds its
/// request body once; an Indexed Job's differ by index, each its own.
#[test]
fn a_nonindexed_jobs_pods_are_one_shared_object() {
    let plan_pods = |job: &Job| {
        let (no_removals, cfg) = (HashSet::new(), Config::default());
        let input = SyncInput {
            job,
            pods: &[],
            now: now(),
            expectations_satisfied: true,
            expected_removed_finalizers: &no_removals,
            backoff: None,
            stall: None,
            config: &cfg,
        };
        let JobPlan::Sync(plan) = sync_job(&input) else { panic!("skipped") };
        let PodOps::Create(create) = plan.pod_ops else { panic!("expected creations") };
        create.pods
    };
    let pods = plan_pods(&mk_job("foobar", 2, 2, 6).build());
    assert_eq!(pods.len(), 2);
    assert!(std::sync::Arc::ptr_eq(&pods[0], &pods[1]), "one object for both creates");
    let pods = plan_pods(&mk_job("foobar", 2, 2, 6).indexed().build());
    assert_eq!(pods.len(), 2);
    assert_ne!(pods[0], pods[1], "each index its own pod");
}

/// The benchmark shape of issue 3 ("decides a 10k-pod Indexed Job"): 5,000 succeeded indexes with
/// finalizers, 4,000 running, 1,000 missing. Checks the decision, not the time (pods are indexed once;
/// nothing is quadratic).
#[test]
fn ten_thousand_pod_indexed_job() {
    let job = mk_job("big", 10_000, 10_000, 6).indexed().start_time(secs_ago(60)).build();
    let pods: Vec<Pod> = (0..9_000)
        .map(|i| {
            let phase = if i < 5_000 { "Succeeded" } else { "Running" };
            mk_pod(&format!("big-{i}")).index(&i.to_string()).phase(phase).finalizer().build()
        })
        .collect();
    let started = std::time::Instant::now();
    let input_rm = HashSet::new();
    let cfg = Config::default();
    let input = SyncInput {
        job: &job,
        pods: &arcs(&pods),
        now: now(),
        expectations_satisfied: true,
        expected_removed_finalizers: &input_rm,
        backoff: None,
        stall: None,
        config: &cfg,
    };
    let JobPlan::Sync(plan) = sync_job(&input) else { panic!("skipped") };
    let PodOps::Create(create) = &plan.pod_ops else { panic!("expected creations") };
    let results: Vec<CreateOutcome> =
        create.pods.iter().map(|_| CreateOutcome::Created("x".into())).collect();
    let status_plan = plan.after_pod_ops(&PodOpResults::Creates(results));
    let elapsed = started.elapsed();
    eprintln!("10k-pod Indexed Job decided in {elapsed:?} (debug build)");
    let ix: Vec<i64> = create
        .pods
        .iter()
        .map(|p| {
            p.metadata.annotations.as_ref().unwrap()[crate::job::core::JOB_COMPLETION_INDEX_ANNOTATION]
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(ix, (9_000..9_500).collect::<Vec<i64>>(), "the 500 lowest pending indexes");
    assert_eq!(create.batches.len(), 9, "1+2+…+256 = 511 >= 500");
    let interim = status_plan.interim_status.as_ref().expect("interim write");
    assert_eq!(interim.completed_indexes.as_deref(), Some("0-4999"));
    assert_eq!(interim.succeeded, Some(5_000));
    assert_eq!((interim.active, interim.ready, interim.terminating), (Some(4_500), Some(0), Some(0)));
    assert_eq!(status_plan.remove_finalizers.len(), 500, "MaxUncountedPods caps finalizer removals");
    assert_eq!(status_plan.remove_finalizers[0].name, "big-0");
    let removed = vec![FinalizerRemoval::Removed; 500];
    let last = status_plan.after_finalizer_removals(&removed);
    assert!(last.status.is_none(), "nothing more to write");
    assert!(last.error.is_none());
}

/// Deterministic garbage: missing fields, bad annotations and status strings, odd phases and
/// counters. The core must never panic and every write must pass the apiserver's rules.
#[test]
fn garbage_input_never_panics() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let phases = ["", "Pending", "Running", "Succeeded", "Failed", "Unknown", "Bogus"];
    let indexes = ["0", "1", "2", "7", "-1", "x", "", "+1", "99999999999999999999", "3"];
    let strings = ["", "0-2", "5-3,x,-,", "1,1,1", "0-999999", "a-b", "2,4-", ",,", "0-1,1-2"];
    let counts = ["0", "1", "-4", "junk", "2147483648", "3"];
    for round in 0..400 {
        let mut b = mk_job("j", next(4) as i32 - 1, next(6) as i32 - 1, next(4) as i32);
        if next(2) == 0 {
            b = b.indexed();
        }
        if next(3) == 0 {
            b = b.backoff_limit_per_index(next(3) as i32);
        }
        if next(4) == 0 {
            b = b.max_failed_indexes(next(2) as i32);
        }
        if next(4) == 0 {
            b = b.pod_failure_policy(pfp_exit_codes(&[
                ("FailIndex", "In", &[1]),
                ("Ignore", "NotIn", &[2]),
                ("Weird", "In", &[3]),
            ]));
        }
        if next(4) == 0 {
            b = b.success_policy(success_policy(&[
                (Some(strings[next(9) as usize]), None),
                (None, Some(next(3) as i32)),
            ]));
        }
        if next(5) == 0 {
            b = b.suspend(true);
        }
        if next(5) == 0 {
            b = b.replacement_policy("Failed");
        }
        if next(6) == 0 {
            b = b.active_deadline(next(100) as i64 - 10).start_time(secs_ago(next(200) as i64 - 50));
        }
        if next(6) == 0 {
            b = b.restart_policy("OnFailure");
        }
        if next(3) == 0 {
            b = b.completed_indexes(strings[next(9) as usize]).failed_indexes(strings[next(9) as usize]);
        }
        if next(3) == 0 {
            b = b.uncounted(&["p0", "p0", "gone"], &["p1", "zz"]);
        }
        if next(5) == 0 {
            b = b.counts(next(5) as i32 - 1, next(5) as i32 - 1, next(3) as i32);
        }
        let mut job = b.build();
        if next(8) == 0 {
            job.spec = None;
        }
        if next(8) == 0 {
            job.status = Some(Default::default());
        }
        let pods: Vec<Pod> = (0..next(9))
            .map(|i| {
                let mut pb = mk_pod(&format!("p{i}")).phase(phases[next(7) as usize]);
                if next(4) != 0 {
                    pb = pb.index(indexes[next(10) as usize]);
                }
                if next(3) != 0 {
                    pb = pb.finalizer();
                }
                if next(5) == 0 {
                    pb = pb.deleted_at(secs_ago(next(100) as i64), Some(next(40) as i64 - 10));
                }
                if next(3) == 0 {
                    pb = pb.container_exit("c", next(4) as i32);
                }
                if next(4) == 0 {
                    pb = pb.failure_count(counts[next(6) as usize]);
                }
                if next(4) == 0 {
                    pb = pb.ready();
                }
                if next(6) == 0 {
                    pb = pb.restarts(next(3) as i32);
                }
                let mut p = pb.build();
                if next(10) == 0 {
                    p.status = None;
                    p.metadata.uid = None;
                }
                p
            })
            .collect();
        let fake = Fake {
            err: (next(6) == 0).then(|| "boom".into()),
            create_limit: next(3) as usize,
            status_err: false,
        };
        let opts = RunOpts {
            expectations_satisfied: next(5) != 0,
            backoff: (next(3) == 0).then(|| BackoffRecord {
                failures_after_last_success: next(12) as i32,
                last_failure_time: Some(secs_ago(next(30) as i64)),
            }),
            fake,
            // Garbage statuses are inconsistent to begin with (e.g. `succeeded` not matching
            // `completedIndexes`); upstream rewrites them and so do we.
            validate: false,
            ..Default::default()
        };
        let _ = run_sync_with(&job, &pods, opts);
        let _ = round;
    }
}

/// A Job driven to completion by repeated syncs against a toy cluster that executes the plans
/// (creates → Pending pods, deletes → deletionTimestamp, finalizer patches, status writes) while a
/// toy kubelet runs pods to Succeeded, or fails index/pod 1 once. Every write passes the
/// apiserver's rules and the end state is what a real cluster shows.
#[test]
fn jobs_converge_through_repeated_syncs() {
    for (indexed, want_failed) in [(false, 1), (true, 1)] {
        let mut b = mk_job("conv", 2, 5, 6);
        if indexed {
            b = b.indexed();
        }
        let mut job = b.build();
        let mut pods: Vec<Pod> = Vec::new();
        let mut backoff: Option<BackoffRecord> = None;
        let mut serial = 0;
        let mut failed_once = false;
        for round in 0..40 {
            let t = now().checked_add(jiff::SignedDuration::from_secs(round * 60)).unwrap();
            let rm = HashSet::new();
            let cfg = Config::default();
            let input = SyncInput {
                job: &job,
                pods: &arcs(&pods),
                now: t,
                expectations_satisfied: true,
                expected_removed_finalizers: &rm,
                backoff: backoff.as_ref(),
                stall: None,
                config: &cfg,
            };
            let plan = match sync_job(&input) {
                JobPlan::Skip(s) => {
                    assert_eq!(s.reason, SkipReason::Finished);
                    break;
                }
                JobPlan::Sync(p) => p,
            };
            let results = match &plan.pod_ops {
                PodOps::None => PodOpResults::None,
                PodOps::Create(c) => {
                    let mut out = Vec::new();
                    for p in &c.pods {
                        let mut p = Pod::clone(p);
                        serial += 1;
                        let name = format!("{}{serial}", p.metadata.generate_name.clone().unwrap());
                        p.metadata.name = Some(name.clone());
                        p.metadata.uid = Some(name.clone());
                        p.status = Some(Default::default());
                        pods.push(p);
                        out.push(CreateOutcome::Created(name));
                    }
                    PodOpResults::Creates(out)
                }
                PodOps::DeleteActive(list) | PodOps::RemoveFinalizerAndDelete(list) => {
                    let strip = matches!(plan.pod_ops, PodOps::RemoveFinalizerAndDelete(_));
                    for r in list {
                        if let Some(p) = pods.iter_mut().find(|p| p.metadata.uid.as_deref() == Some(&r.uid)) {
                            if strip {
                                p.metadata.finalizers = None;
                            }
                            p.metadata.deletion_timestamp = Some(t.into());
                        }
                    }
                    PodOpResults::Deletes(vec![DeleteOutcome::Deleted; list.len()])
                }
            };
            let sp = plan.after_pod_ops(&results);
            let mut current = job.status.clone().unwrap_or_default();
            if let Some(s) = &sp.interim_status {
                validate_status_update(&current, s, false).unwrap();
                current = s.clone();
                backoff = sp.backoff_record.clone();
            }
            for r in &sp.remove_finalizers {
                if let Some(p) = pods.iter_mut().find(|p| p.metadata.uid.as_deref() == Some(&r.uid)) {
                    p.metadata.finalizers = None;
                }
            }
            let fp =
                sp.after_finalizer_removals(&vec![FinalizerRemoval::Removed; sp.remove_finalizers.len()]);
            if let Some(s) = &fp.status {
                validate_status_update(&current, s, false).unwrap();
                current = s.clone();
            }
            job.status = Some(current);
            // Deleted pods without finalizers disappear; the kubelet advances the others.
            pods.retain(|p| p.metadata.deletion_timestamp.is_none() || p.metadata.finalizers.is_some());
            for p in pods.iter_mut() {
                let st = p.status.get_or_insert_with(Default::default);
                match st.phase.as_deref() {
                    None => st.phase = Some("Running".into()),
                    Some("Running") if p.metadata.deletion_timestamp.is_some() => {
                        st.phase = Some("Failed".into())
                    }
                    Some("Running") => {
                        let first_index_one = p
                            .metadata
                            .annotations
                            .as_ref()
                            .and_then(|a| a.get(crate::job::core::JOB_COMPLETION_INDEX_ANNOTATION))
                            .is_none_or(|ix| ix == "1");
                        if !failed_once && first_index_one {
                            failed_once = true;
                            st.phase = Some("Failed".into());
                        } else {
                            st.phase = Some("Succeeded".into());
                        }
                    }
                    _ => {}
                }
            }
        }
        let st = job.status.clone().unwrap();
        let want =
            want_conds(&[("SuccessCriteriaMet", "True", CR, CR_MSG), ("Complete", "True", CR, CR_MSG)]);
        assert_eq!(conds(&st), want, "indexed={indexed}");
        assert_eq!(
            (st.succeeded, st.failed, st.active),
            (Some(5), Some(want_failed), None),
            "indexed={indexed}"
        );
        assert_eq!(st.completed_indexes.as_deref(), indexed.then_some("0-4"));
        assert!(pods.iter().all(|p| p.metadata.finalizers.is_none()), "every finalizer removed");
    }
}
