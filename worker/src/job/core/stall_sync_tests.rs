//! The stall signals through whole syncs: which events and which `batchfleet.io/PodCreationBlocked`
//! condition each sync produces from the create results the shell reports, and that the record
//! the shell keeps makes them once per back-off step (or per change), not once per attempt.

use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use std::collections::HashSet;

use super::*;
use crate::job::core::config::Config;
use crate::job::core::plan::EventType;
use crate::job::core::stall::{CreateRefusal, POD_CREATION_BLOCKED};
use crate::job::core::testutil::*;

const QUOTA_MSG: &str =
    r#"pods "q-x" is forbidden: exceeded quota: q, requested: pods=1, used: pods=3, limited: pods=3"#;

struct Synced {
    events: Vec<Event>,
    /// The last status written in the sync, if any.
    status: Option<JobStatus>,
    record: StallRecord,
}

fn arcs(pods: &[Pod]) -> Vec<std::sync::Arc<Pod>> {
    pods.iter().cloned().map(std::sync::Arc::new).collect()
}

/// One sync at `at`; every create gets `create(k)`.
fn sync_at(
    job: &Job,
    pods: &[Pod],
    at: Timestamp,
    record: Option<&StallRecord>,
    cfg: &Config,
    create: &dyn Fn(usize) -> CreateOutcome,
) -> Synced {
    let rm = HashSet::new();
    let pods = arcs(pods);
    let input = SyncInput {
        job,
        pods: &pods,
        now: at,
        expectations_satisfied: true,
        expected_removed_finalizers: &rm,
        backoff: None,
        stall: record,
        config: cfg,
    };
    let JobPlan::Sync(plan) = sync_job(&input) else { panic!("skipped") };
    let results = match &plan.pod_ops {
        PodOps::Create(c) => PodOpResults::Creates((0..c.pods.len()).map(create).collect()),
        PodOps::None => PodOpResults::None,
        other => panic!("unexpected pod ops {other:?}"),
    };
    let status_plan = plan.after_pod_ops(&results);
    let final_plan = status_plan.after_finalizer_removals(&[]);
    let mut events = status_plan.events.clone();
    events.extend(final_plan.events.clone());
    Synced {
        events,
        status: final_plan.status.clone().or(status_plan.interim_status.clone()),
        record: status_plan.stall_record.clone(),
    }
}

fn refused(code: u16, msg: &str) -> CreateOutcome {
    CreateOutcome::Refused(msg.to_string(), CreateRefusal { code, message: msg.to_string() })
}

fn reasons(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.reason.as_str()).collect()
}

fn blocked_condition(status: &JobStatus) -> Option<(String, String, String)> {
    status.conditions.as_deref().unwrap_or(&[]).iter().find(|c| c.type_ == POD_CREATION_BLOCKED).map(|c| {
        (c.status.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default())
    })
}

fn at_millis(ms: i64) -> Timestamp {
    now() + jiff::SignedDuration::from_millis(ms)
}

/// A quota that refuses every create, retried every 500 ms for 8 s, then raised.
#[test]
fn quota_refusals_signal_once_per_backoff_step_and_clear_on_the_first_create() {
    let cfg = Config::default();
    let mut job = mk_job("q", 2, 4, 6).start_time(now()).build();
    let mut record: Option<StallRecord> = None;
    let (mut blocked_events, mut failed_creates, mut status_writes) = (0, 0, 0);
    for k in 0..16 {
        let s = sync_at(&job, &[], at_millis(500 * k), record.as_ref(), &cfg, &|_| refused(403, QUOTA_MSG));
        blocked_events += reasons(&s.events).iter().filter(|r| **r == "PodCreationBlocked").count();
        failed_creates += reasons(&s.events).iter().filter(|r| **r == "FailedCreate").count();
        if k == 0 {
            let e =
                s.events.iter().find(|e| e.reason == "PodCreationBlocked").expect("first refusal signals");
            assert_eq!(e.type_, EventType::Warning);
            assert!(e.message.ends_with(QUOTA_MSG), "{}", e.message);
            assert!(e.message.contains("QuotaExceeded"), "{}", e.message);
            let st = s.status.as_ref().expect("the condition is written");
            assert_eq!(
                blocked_condition(st),
                Some(("True".into(), "QuotaExceeded".into(), QUOTA_MSG.into()))
            );
        }
        if let Some(st) = s.status {
            status_writes += 1;
            job.status = Some(st);
        }
        record = Some(s.record);
    }
    // Steps begin at 0, 1, 3 and 7 s; upstream's FailedCreate stays one per refused create (the
    // fake refuses both pods of each of the 16 attempts).
    assert_eq!(blocked_events, 4);
    assert_eq!(failed_creates, 32);
    assert!(status_writes <= 4, "the condition is rewritten once per step at most: {status_writes}");

    let s = sync_at(&job, &[], at_millis(8_500), record.as_ref(), &cfg, &|k| {
        CreateOutcome::Created(format!("q-{k}"))
    });
    let st = s.status.expect("clearing the condition is written");
    assert_eq!(
        blocked_condition(&st),
        Some(("False".into(), "PodsCreated".into(), stall::MSG_PODS_CREATED.into()))
    );
    assert_eq!(s.record.blocked, None);
    assert!(!reasons(&s.events).contains(&"PodCreationBlocked"));
}

#[test]
fn transient_failures_and_disabled_signals_leave_no_trace() {
    let job = mk_job("t", 2, 4, 6).start_time(now()).build();
    let cfg = Config::default();
    let transient: Vec<CreateOutcome> = vec![
        CreateOutcome::Failed("connection reset".into()),
        refused(503, "the server is currently unable to handle the request"),
        refused(429, "too many requests"),
    ];
    for outcome in transient {
        let s = sync_at(&job, &[], now(), None, &cfg, &|_| outcome.clone());
        assert!(!reasons(&s.events).contains(&"PodCreationBlocked"), "{outcome:?}");
        assert!(s.status.as_ref().and_then(blocked_condition).is_none(), "{outcome:?}");
        assert_eq!(s.record, StallRecord::default(), "{outcome:?}");
    }
    let off = Config { stall_signals: false, ..Config::default() };
    let s = sync_at(&job, &[], now(), None, &off, &|_| refused(403, QUOTA_MSG));
    assert_eq!(reasons(&s.events), vec!["FailedCreate", "FailedCreate"], "upstream's events only");
    assert!(s.status.as_ref().and_then(blocked_condition).is_none());
}

#[test]
fn a_webhook_denial_is_admission_rejected() {
    let job = mk_job("w", 1, 1, 6).start_time(now()).build();
    let msg = r#"admission webhook "deny.example.com" denied the request: images must be signed"#;
    let s = sync_at(&job, &[], now(), None, &Config::default(), &|_| refused(400, msg));
    let st = s.status.expect("condition written");
    assert_eq!(blocked_condition(&st), Some(("True".into(), "AdmissionRejected".into(), msg.into())));
}

/// #23375: the wait on the pod-failure back-off is announced with its deadline, once.
#[test]
fn pod_failure_backoff_is_announced_once_per_deadline() {
    let job = mk_job("b", 1, 1, 6).start_time(secs_ago(30)).build();
    let failed = mk_pod("b-1").uid("u1").phase("Failed").finalizer().finished_at(secs_ago(2)).build();
    let cfg = Config::default();
    let s = sync_at(&job, std::slice::from_ref(&failed), now(), None, &cfg, &|_| panic!("no create"));
    let e = s.events.iter().find(|e| e.reason == "PodFailureBackoff").expect("announced");
    assert_eq!(e.type_, EventType::Normal);
    // Failed 2 s ago, first failure: 10 s of back-off from the failure.
    assert!(e.message.contains("until 2024-06-01T12:00:08Z"), "{}", e.message);
    let again = sync_at(&job, &[failed], at_millis(1_000), Some(&s.record), &cfg, &|_| panic!("no create"));
    assert!(!reasons(&again.events).contains(&"PodFailureBackoff"), "{:?}", again.events);
}

fn on_node(mut pod: Pod, node: &str) -> Pod {
    pod.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
    pod
}

/// #54870: pods Terminating long past their deadline hold a Job that replaces only failed pods.
#[test]
fn pods_stuck_terminating_name_their_nodes_once_per_node_set() {
    let job = mk_job("n", 2, 2, 6).start_time(secs_ago(600)).replacement_policy("Failed").build();
    let stuck = |name: &str, node: &str, ago: i64| {
        on_node(
            mk_pod(name).uid(name).phase("Running").finalizer().deleted_at(secs_ago(ago), Some(30)).build(),
            node,
        )
    };
    let pods = vec![stuck("n-1", "node-b", 300), stuck("n-2", "node-a", 120)];
    let cfg = Config::default();
    let s = sync_at(&job, &pods, now(), None, &cfg, &|_| panic!("no create"));
    let e = s.events.iter().find(|e| e.reason == "PodsTerminatingOnLostNode").expect("signalled");
    assert_eq!(e.type_, EventType::Warning);
    assert!(e.message.contains("node-a, node-b"), "{}", e.message);
    assert!(e.message.starts_with("2 pod(s)"), "{}", e.message);
    let again = sync_at(&job, &pods, at_millis(5_000), Some(&s.record), &cfg, &|_| panic!("no create"));
    assert!(!reasons(&again.events).contains(&"PodsTerminatingOnLostNode"));
    // A pod still within a minute of its deadline is not stuck yet; the default policy replaces
    // Terminating pods at once, so nothing waits on them.
    let fresh = vec![stuck("n-3", "node-c", 30)];
    let rm = HashSet::new();
    let fresh_arcs = arcs(&fresh);
    let input = SyncInput {
        job: &job,
        pods: &fresh_arcs,
        now: now(),
        expectations_satisfied: true,
        expected_removed_finalizers: &rm,
        backoff: None,
        stall: None,
        config: &cfg,
    };
    let JobPlan::Sync(plan) = sync_job(&input) else { panic!("skipped") };
    // Its deadline passed 30 s ago: stuck 30 s from now, when nothing else would sync the Job.
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(30)));
    let s = sync_at(&job, &fresh, now(), None, &cfg, &|k| CreateOutcome::Created(format!("n-{k}")));
    assert!(!reasons(&s.events).contains(&"PodsTerminatingOnLostNode"));
    let default_policy = mk_job("d", 1, 1, 6).start_time(secs_ago(600)).build();
    let s = sync_at(&default_policy, &pods[..1], now(), None, &cfg, &|k| {
        CreateOutcome::Created(format!("d-{k}"))
    });
    assert!(!reasons(&s.events).contains(&"PodsTerminatingOnLostNode"));
}
