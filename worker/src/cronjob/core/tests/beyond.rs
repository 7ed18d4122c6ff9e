//! The decisions beyond upstream, each row citing the upstream issue it answers. The CronJob is
//! upstream's `0 * * * ?` fixture; an "outage" is a lastScheduleTime hours before `now`.

use super::*;
use crate::cronjob::core::beyond::{
    CATCH_UP_ANNOTATION, NEXT_SCHEDULE_TIME_ANNOTATION, TRIGGER_ANNOTATION, TRIGGER_HANDLED_ANNOTATION,
    TRIGGERED_BY_ANNOTATION,
};

fn annotate(cj: &mut CronJob, key: &str, value: &str) {
    cj.metadata.annotations.get_or_insert_with(Default::default).insert(key.into(), value.into());
}

fn annotation<'a>(cj: &'a CronJob, key: &str) -> Option<&'a str> {
    cj.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Last ran at 07:00, the fleet was down until `now` (10:01 by default): 08:00, 09:00 and 10:00
/// were missed.
fn after_outage(policy: &str, catch_up: Option<&str>) -> CronJob {
    let mut cj = md_cronjob(policy);
    cj.metadata.creation_timestamp = Some(Time(t("2016-05-19T06:59:00Z")));
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(t("2016-05-19T07:00:00Z"))),
        ..Default::default()
    });
    if let Some(n) = catch_up {
        annotate(&mut cj, CATCH_UP_ANNOTATION, n);
    }
    cj
}

/// What a sequence of syncs at `now` did: each sync sees the CronJob as the last one wrote it and
/// the Jobs created so far (the queue requeues at once while the outcome says zero).
struct Syncs {
    cj: CronJob,
    created: Vec<String>,
    deleted: Vec<String>,
    events: Vec<Event>,
    signals: Vec<Effect>,
    writes: usize,
    last_outcome: Outcome,
}

fn sync_until_settled(
    mut cj: CronJob,
    mut jobs: Vec<Job>,
    now: Timestamp,
    api: &Fake,
    options: SyncOptions,
) -> Syncs {
    let mut out = Syncs {
        cj: cj.clone(),
        created: vec![],
        deleted: vec![],
        events: vec![],
        signals: vec![],
        writes: 0,
        last_outcome: Outcome::Done,
    };
    for _ in 0..20 {
        let trace = drive(sync_with(&cj, jobs.iter(), &utc(now), options), api);
        for job in &trace.created {
            let mut job = job.clone();
            job.metadata.uid = Some(format!("uid-{}", job.metadata.name.as_deref().unwrap_or_default()));
            job.metadata.namespace = cj.metadata.namespace.clone();
            out.created.push(job.metadata.name.clone().unwrap_or_default());
            jobs.push(job);
        }
        for (name, _) in &trace.deleted {
            out.deleted.push(name.clone());
            jobs.retain(|j| j.metadata.name.as_deref() != Some(name));
        }
        if let Some(update) = trace.updates.last() {
            cj = update.clone();
            // The created Jobs got the fake's UID: give the listed ones the UIDs the cache shows.
            if let Some(active) = cj.status.as_mut().and_then(|s| s.active.as_mut()) {
                for r in active.iter_mut() {
                    if let Some(j) = jobs.iter().find(|j| j.metadata.name == r.name) {
                        r.uid = j.metadata.uid.clone();
                    }
                }
            }
        }
        out.writes += trace.updates.len();
        out.events.extend(trace.events.iter().cloned());
        out.signals.extend(trace.signals.iter().cloned());
        out.last_outcome = trace.outcome().clone();
        if trace.outcome() != &Outcome::RequeueAfter(SignedDuration::ZERO) {
            out.cj = cj;
            return out;
        }
    }
    panic!("the syncs did not settle");
}

fn settle(cj: CronJob, now: Timestamp) -> Syncs {
    sync_until_settled(cj, vec![], now, &Fake::default(), SyncOptions::default())
}

/// `mycronjob-<minutes>` of an hour on 2016-05-19.
fn at(hour: &str) -> String {
    job_name(&md_cronjob("Allow"), t(&format!("2016-05-19T{hour}:00:00Z")))
}

#[test]
fn without_catch_up_only_the_most_recent_missed_time_runs_as_upstream() {
    // upstream TestControllerV2SyncCronJob "prev ran but done, long overdue, not past deadline":
    // only the most recent unmet time runs (the behaviour k/k#42649 asks to extend).
    for annotation in [None, Some("0"), Some("not a number"), Some("-3")] {
        let s = settle(after_outage("Allow", annotation), just_after_the_hour());
        assert_eq!(s.created, vec![at("10")], "catch-up {annotation:?}");
        assert!(!s.signals.contains(&Effect::CaughtUp));
    }
}

#[test]
fn catch_up_runs_the_most_recent_n_missed_times_oldest_first_and_never_more() {
    // k/k#42649, #83642: after an outage, run up to N missed times, oldest first.
    let rows: [(&str, Vec<String>); 4] = [
        ("1", vec![at("10")]),
        ("2", vec![at("09"), at("10")]),
        ("3", vec![at("08"), at("09"), at("10")]),
        ("50", vec![at("08"), at("09"), at("10")]),
    ];
    for (n, want) in rows {
        let s = settle(after_outage("Allow", Some(n)), just_after_the_hour());
        assert_eq!(s.created, want, "catch-up {n}");
        assert_eq!(
            last_schedule(&s.cj),
            Some(top_of_the_hour()),
            "catch-up {n}: the last run is the latest time"
        );
        assert_eq!(active_refs(&s.cj).len(), want.len());
        assert_eq!(
            s.last_outcome,
            Outcome::RequeueAfter(mins(59) + delta()),
            "catch-up {n}: then the next hour"
        );
        // Counted: the runs upstream would not have made (all but the most recent).
        let missed: usize = s
            .signals
            .iter()
            .map(|e| match e {
                Effect::Missed { count, .. } => *count,
                _ => 0,
            })
            .sum();
        assert_eq!(missed, 3 - want.len(), "catch-up {n}: the missed times not run");
        let caught_up = s.signals.iter().filter(|e| **e == Effect::CaughtUp).count();
        assert_eq!(caught_up, want.len() - 1, "catch-up {n}");
    }
}

#[test]
fn catch_up_event_says_which_missed_time_ran_and_how_many_remain() {
    let s = settle(after_outage("Allow", Some("3")), just_after_the_hour());
    let catch_up: Vec<&str> =
        s.events.iter().filter(|e| e.reason == "CatchUp").map(|e| e.message.as_str()).collect();
    assert_eq!(
        catch_up,
        vec![
            "Created job mycronjob-24394080 for the missed time Thu, 19 May 2016 08:00:00 +0000 (batchfleet.io/catch-up), 2 more to run",
            "Created job mycronjob-24394140 for the missed time Thu, 19 May 2016 09:00:00 +0000 (batchfleet.io/catch-up), 1 more to run",
        ],
        "the most recent time is the run upstream makes: no CatchUp event for it"
    );
}

#[test]
fn catch_up_takes_only_times_still_within_starting_deadline_seconds() {
    // k/k#42649: missed times later than startingDeadlineSeconds are not run.
    let mut cj = after_outage("Allow", Some("5"));
    cj.spec.starting_deadline_seconds = Some(90 * 60); // 10:01 − 1h30 = 08:31: 09:00 and 10:00
    assert_eq!(settle(cj, just_after_the_hour()).created, vec![at("09"), at("10")]);
    // A time exactly at the deadline still runs (upstream's `Before`): 10:01 − 2h01 = 08:00.
    let mut cj = after_outage("Allow", Some("5"));
    cj.spec.starting_deadline_seconds = Some(121 * 60);
    assert_eq!(settle(cj, just_after_the_hour()).created, vec![at("08"), at("09"), at("10")]);
    // Every time too late: nothing runs, and upstream says nothing (UPSTREAM.md controller case
    // 3: no event) ...
    let mut cj = after_outage("Allow", Some("5"));
    cj.spec.starting_deadline_seconds = Some(10);
    let s = settle(cj.clone(), t("2016-05-19T10:12:00Z"));
    assert!(s.created.is_empty() && s.events.is_empty() && s.signals.is_empty());
    // ... so the missed times are counted once, when the next run moves lastScheduleTime past
    // them (k/k#58748: why didn't it run).
    let s = settle(cj, t("2016-05-19T11:00:05Z"));
    assert_eq!(s.created, vec![at("11")]);
    assert_eq!(s.signals, vec![Effect::Missed { reason: MissedReason::StartingDeadline, count: 3 }]);
}

#[test]
fn missed_times_are_counted_once_by_reason() {
    // k/k#58748. Without catch-up upstream runs 10:00 only: 08:00 and 09:00 are not run.
    let s = settle(after_outage("Allow", None), just_after_the_hour());
    assert_eq!(s.signals, vec![Effect::Missed { reason: MissedReason::NotRun, count: 2 }]);
    // Catch-up 2 runs 09:00 and 10:00: 08:00 alone is not run.
    let s = settle(after_outage("Allow", Some("2")), just_after_the_hour());
    let missed: Vec<&Effect> = s.signals.iter().filter(|e| matches!(e, Effect::Missed { .. })).collect();
    assert_eq!(missed, vec![&Effect::Missed { reason: MissedReason::NotRun, count: 1 }]);
    // With a deadline, the late ones and the startable ones apart: SDS 1h30 at 10:01 leaves
    // 09:00 startable (not run without catch-up) and 08:00 late.
    let mut cj = after_outage("Allow", None);
    cj.spec.starting_deadline_seconds = Some(90 * 60);
    let s = settle(cj, just_after_the_hour());
    assert_eq!(
        s.signals,
        vec![
            Effect::Missed { reason: MissedReason::StartingDeadline, count: 1 },
            Effect::Missed { reason: MissedReason::NotRun, count: 1 },
        ]
    );
    // A resync after the run counts nothing again.
    let again = settle(s.cj, plus(just_after_the_hour(), secs(30)));
    assert!(again.signals.is_empty());
}

#[test]
fn catch_up_respects_concurrency_policy() {
    // k/k#42649 with Forbid: the oldest runs, the rest wait behind it like any Forbid run.
    let s = settle(after_outage("Forbid", Some("3")), just_after_the_hour());
    assert_eq!(s.created, vec![at("08")]);
    assert!(s.signals.contains(&Effect::ForbidBlocked { job: at("08"), skipped: 2 }));
    // Replace: each catch-up run replaces the one before it.
    let api = Fake {
        get_job: Box::new(|ns, name| {
            let mut job = template_job(&md_cronjob("Replace"), t("2016-05-19T08:00:00Z"), "any");
            job.metadata.name = Some(name.into());
            job.metadata.uid = Some(format!("uid-{name}"));
            job.metadata.namespace = Some(ns.into());
            Ok(job)
        }),
        ..Fake::default()
    };
    let s = sync_until_settled(
        after_outage("Replace", Some("3")),
        vec![],
        just_after_the_hour(),
        &api,
        SyncOptions::default(),
    );
    assert_eq!(s.created, vec![at("08"), at("09"), at("10")]);
    assert_eq!(s.deleted, vec![at("08"), at("09")]);
    assert_eq!(active_refs(&s.cj).len(), 1);
}

#[test]
fn catch_up_never_runs_a_time_twice() {
    // The Jobs' names are upstream's: a time already run (here: by another worker whose status
    // write was lost) is AlreadyExists, adopted, not created again.
    let cj = after_outage("Allow", Some("3"));
    let existing = template_job(&cj, t("2016-05-19T08:00:00Z"), "earlier-uid");
    let api = Fake {
        create_err: None,
        get_job: Box::new({
            let existing = existing.clone();
            move |_, name| {
                if Some(name) == existing.metadata.name.as_deref() {
                    Ok(existing.clone())
                } else {
                    Err(ApiError::not_found("not found"))
                }
            }
        }),
        ..Fake::default()
    };
    // The fake creates every name; emulate the API server's AlreadyExists for the existing one.
    let trace = drive(
        sync(&cj, [].iter(), &utc(just_after_the_hour())),
        &Fake { create_err: already_exists(), ..api },
    );
    assert_eq!(trace.got_jobs, vec![(at("08"), GetJobReason::AlreadyExists)]);
    assert_eq!(active_refs(trace.last_update())[0].uid.as_deref(), Some("earlier-uid"));
    assert_eq!(last_schedule(trace.last_update()), Some(t("2016-05-19T08:00:00Z")));
    assert_eq!(trace.outcome(), &Outcome::RequeueAfter(SignedDuration::ZERO), "09:00 and 10:00 remain");
}

#[test]
fn trigger_runs_once_now_without_touching_last_schedule_time() {
    // k/k#47538: run a CronJob now, once per new value.
    let mut cj = md_cronjob("Allow");
    cj.status =
        Some(CronJobStatus { last_schedule_time: Some(Time(top_of_the_hour())), ..Default::default() });
    annotate(&mut cj, TRIGGER_ANNOTATION, "deploy-42");
    let now = t("2016-05-19T10:30:00Z");
    let s = settle(cj, now);
    assert_eq!(s.created, vec![format!("mycronjob-t{}", now.as_second() / 60)]);
    assert_eq!(last_schedule(&s.cj), Some(top_of_the_hour()), "a trigger is not a schedule's run");
    assert_eq!(annotation(&s.cj, TRIGGER_HANDLED_ANNOTATION), Some("deploy-42"));
    assert_eq!(active_refs(&s.cj).len(), 1);
    assert!(s.events.iter().any(|e| e.reason == "Triggered"
        && e.message
            == format!(
                "Created job mycronjob-t{} for batchfleet.io/trigger \"deploy-42\"",
                now.as_second() / 60
            )));
    assert_eq!(s.signals, vec![Effect::Trigger(TriggerResult::Ran)]);
    assert_eq!(s.last_outcome, Outcome::RequeueAfter(mins(30) + delta()));
    // The handled value does not run again.
    let again = settle(s.cj.clone(), plus(now, mins(5)));
    assert!(again.created.is_empty());
    // A new value does.
    let mut cj = s.cj;
    annotate(&mut cj, TRIGGER_ANNOTATION, "deploy-43");
    assert_eq!(settle(cj, plus(now, mins(5))).created.len(), 1);
}

#[test]
fn triggered_job_carries_its_value() {
    let mut cj = md_cronjob("Allow");
    annotate(&mut cj, TRIGGER_ANNOTATION, "v1");
    let trace = run(&cj, &[], t("2016-05-19T09:59:30Z"), &Fake::default());
    let job = &trace.created[0];
    assert_eq!(annotation_of(job, TRIGGERED_BY_ANNOTATION), Some("v1"));
    assert_eq!(annotation_of(job, CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION), Some("2016-05-19T09:59:30Z"));
}

fn annotation_of<'a>(job: &'a Job, key: &str) -> Option<&'a str> {
    job.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

#[test]
fn trigger_respects_concurrency_policy() {
    // k/k#47538 (unlike `kubectl create job --from`): Forbid skips, Replace replaces.
    let (mut cj, job) = md_still_active("Forbid");
    annotate(&mut cj, TRIGGER_ANNOTATION, "now");
    let s = sync_until_settled(
        cj,
        vec![job.clone()],
        t("2016-05-19T09:30:00Z"),
        &Fake::default(),
        SyncOptions::default(),
    );
    assert!(s.created.is_empty());
    assert_eq!(annotation(&s.cj, TRIGGER_HANDLED_ANNOTATION), Some("now"), "a skipped value is handled too");
    let skipped = s.events.iter().find(|e| e.reason == "TriggerSkipped").expect("TriggerSkipped");
    assert_eq!(
        skipped.message,
        "Not running batchfleet.io/trigger \"now\": job mycronjob-24394140 is active and concurrency policy is Forbid"
    );
    assert_eq!(s.signals, vec![Effect::Trigger(TriggerResult::SkippedByForbid)]);

    let (mut cj, job) = md_still_active("Replace");
    annotate(&mut cj, TRIGGER_ANNOTATION, "now");
    let api = Fake::job_control(Some(job.clone()), None);
    let s = sync_until_settled(cj, vec![job], t("2016-05-19T09:30:00Z"), &api, SyncOptions::default());
    assert_eq!(s.deleted, vec![at("09")]);
    assert_eq!(s.created.len(), 1);
    assert!(s.events.iter().any(|e| e.reason == "Triggered"
        && e.message.ends_with("replacing the active jobs (concurrencyPolicy Replace)")));
    assert_eq!(s.signals, vec![Effect::Trigger(TriggerResult::Replaced)]);
}

fn with_next() -> SyncOptions {
    SyncOptions { next_schedule_time: true }
}

#[test]
fn next_schedule_time_is_written_only_when_it_changes() {
    // k/k#41568, #78564, #58748: show when a CronJob runs next.
    let cj = md_cronjob("Allow");
    let first = sync_until_settled(cj, vec![], just_before_the_hour(), &Fake::default(), with_next());
    assert_eq!(first.writes, 1, "the first sync writes the annotation");
    assert_eq!(annotation(&first.cj, NEXT_SCHEDULE_TIME_ANNOTATION), Some("2016-05-19T10:00:00Z"));
    assert_eq!(first.signals, vec![Effect::NextScheduleTime(Some(top_of_the_hour()))]);
    // A resync before the tick writes nothing.
    let resync = sync_until_settled(
        first.cj.clone(),
        vec![],
        plus(just_before_the_hour(), secs(20)),
        &Fake::default(),
        with_next(),
    );
    assert_eq!(resync.writes, 0);
    // The tick's status write carries the new value: still one write.
    let tick = sync_until_settled(first.cj, vec![], just_after_the_hour(), &Fake::default(), with_next());
    assert_eq!(tick.writes, 1);
    assert_eq!(last_schedule(&tick.cj), Some(top_of_the_hour()));
    assert_eq!(annotation(&tick.cj, NEXT_SCHEDULE_TIME_ANNOTATION), Some("2016-05-19T11:00:00Z"));
}

#[test]
fn next_schedule_time_follows_the_schedule_and_suspend() {
    let mut cj = md_cronjob("Allow");
    annotate(&mut cj, NEXT_SCHEDULE_TIME_ANNOTATION, "2016-05-19T10:00:00Z");
    // A schedule change moves it (one write).
    cj.spec.schedule = "30 * * * *".into();
    let s = sync_until_settled(cj.clone(), vec![], just_before_the_hour(), &Fake::default(), with_next());
    assert_eq!(
        (s.writes, annotation(&s.cj, NEXT_SCHEDULE_TIME_ANNOTATION)),
        (1, Some("2016-05-19T10:30:00Z"))
    );
    // Suspended: it will not run, so there is no next time.
    cj.spec.suspend = Some(true);
    let s = sync_until_settled(cj.clone(), vec![], just_before_the_hour(), &Fake::default(), with_next());
    assert_eq!((s.writes, annotation(&s.cj, NEXT_SCHEDULE_TIME_ANNOTATION)), (1, None));
    assert_eq!(s.signals, vec![Effect::NextScheduleTime(None)]);
    // In the schedule's zone, written in UTC.
    let mut cj = md_cronjob("Allow");
    cj.spec.schedule = "0 9 * * *".into();
    cj.spec.time_zone = Some(NEW_YORK.into());
    let s = sync_until_settled(cj, vec![], just_before_the_hour(), &Fake::default(), with_next());
    assert_eq!(annotation(&s.cj, NEXT_SCHEDULE_TIME_ANNOTATION), Some("2016-05-19T13:00:00Z"));
    // Without the option (the upstream-parity tables), nothing is written.
    let s = settle(md_cronjob("Allow"), just_before_the_hour());
    assert_eq!(s.writes, 0);
}

#[test]
fn forbid_block_counts_the_runs_skipped_since_the_active_job_started() {
    // k/k#58748: say why a CronJob did not run. The 09:00 Job still runs.
    for (now, skipped) in [("10:01", 1), ("11:01", 2), ("13:30", 4)] {
        let (cj, job) = md_still_active("Forbid");
        let s = sync_until_settled(
            cj,
            vec![job],
            t(&format!("2016-05-19T{now}:00Z")),
            &Fake::default(),
            SyncOptions::default(),
        );
        assert_eq!(s.signals, vec![Effect::ForbidBlocked { job: at("09"), skipped }], "at {now}");
        assert_eq!(
            s.events.iter().map(|e| e.reason).collect::<Vec<_>>(),
            vec!["JobAlreadyActive"],
            "upstream's event stays"
        );
    }
    assert_eq!(
        events::forbid_blocked("mycronjob-24394140", 2).message,
        "blocked by Forbid: Job mycronjob-24394140 still running, 2 runs skipped"
    );
}

#[test]
fn too_many_missed_is_one_event_and_one_count_as_upstream() {
    // upstream utils_test "many missed" (> 100): one TooManyMissedTimes, the latest still runs.
    let mut cj = md_cronjob("Allow");
    cj.spec.schedule = "* * * * ?".into();
    cj.metadata.creation_timestamp = Some(Time(t("2016-05-19T05:00:00Z")));
    let s = settle(cj, just_after_the_hour());
    assert_eq!(s.events.iter().filter(|e| e.reason == "TooManyMissedTimes").count(), 1);
    assert_eq!(s.signals[0], Effect::Missed { reason: MissedReason::TooMany, count: 1 });
    // Now is 10:01, which runs: 05:01 … 10:00 were not run (the count of times, not of events).
    assert_eq!(s.signals[1], Effect::Missed { reason: MissedReason::NotRun, count: 300 });
    assert_eq!(s.created.len(), 1);
}

#[test]
fn catch_up_after_more_missed_times_than_it_walks_falls_back_to_upstream() {
    // Every minute, last run 30 days ago (43,200 missed), no deadline: more than the bounded walk
    // sees, so only the most recent runs (upstream), never a stream of month-old times.
    let mut cj = after_outage("Allow", Some("3"));
    cj.spec.schedule = "* * * * ?".into();
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(t("2016-04-19T10:00:00Z"))),
        ..Default::default()
    });
    let s = settle(cj.clone(), just_after_the_hour());
    assert_eq!(s.created, vec![job_name(&cj, t("2016-05-19T10:01:00Z"))]);
    // With a deadline that bounds the walk, catch-up works again: the 3 most recent.
    cj.spec.starting_deadline_seconds = Some(600);
    let s = settle(cj.clone(), just_after_the_hour());
    let want: Vec<String> = ["09:59", "10:00", "10:01"]
        .iter()
        .map(|hm| job_name(&cj, t(&format!("2016-05-19T{hm}:00Z"))))
        .collect();
    assert_eq!(s.created, want);
}
