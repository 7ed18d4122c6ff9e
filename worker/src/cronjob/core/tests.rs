//! Table tests ported from upstream `cronjob_controllerv2_test.go` and `utils_test.go`, driven
//! through a fake API that answers like upstream's `fakeJobControl`/`fakeCJControl`.

use std::collections::BTreeMap;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};
use k8s_openapi::api::batch::v1::{
    CronJob, CronJobSpec, CronJobStatus, Job, JobCondition, JobSpec, JobStatus, JobTemplateSpec,
};
use k8s_openapi::api::core::v1::{Container, ObjectReference, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::*;

// ---------------------------------------------------------------------------------------------
// Fixtures (cronjob_controllerv2_test.go)

fn t(s: &str) -> Timestamp {
    s.parse().expect("valid timestamp")
}
fn top_of_the_hour() -> Timestamp {
    t("2016-05-19T10:00:00Z")
}
fn just_a_second_before_the_hour() -> Timestamp {
    t("2016-05-19T09:59:59Z")
}
fn just_after_the_prior_hour() -> Timestamp {
    t("2016-05-19T09:01:00Z")
}
fn just_before_the_prior_hour() -> Timestamp {
    t("2016-05-19T08:59:00Z")
}
fn just_after_the_hour() -> Timestamp {
    t("2016-05-19T10:01:00Z")
}
fn just_before_the_hour() -> Timestamp {
    t("2016-05-19T09:59:00Z")
}
fn just_before_the_next_hour() -> Timestamp {
    t("2016-05-19T10:59:00Z")
}
fn week_after_the_hour() -> Timestamp {
    t("2016-05-26T10:00:00Z")
}
fn plus(ts: Timestamp, d: SignedDuration) -> Timestamp {
    ts.checked_add(d).expect("in range")
}
fn utc(ts: Timestamp) -> Zoned {
    ts.to_zoned(TimeZone::UTC)
}
fn mins(m: i64) -> SignedDuration {
    SignedDuration::from_mins(m)
}
fn secs(s: i64) -> SignedDuration {
    SignedDuration::from_secs(s)
}
fn hours(h: i64) -> SignedDuration {
    SignedDuration::from_hours(h)
}
fn millis(ms: i64) -> SignedDuration {
    SignedDuration::from_millis(ms)
}
/// upstream `nextScheduleDelta`.
fn delta() -> SignedDuration {
    millis(100)
}

const SHORT_DEAD: i64 = 10;
const MEDIUM_DEAD: i64 = 2 * 60 * 60;
const LONG_DEAD: i64 = 1_000_000;
const ERROR_SCHEDULE: &str = "obvious error schedule";
const ON_THE_HOUR: &str = "0 * * * ?";
const EVERY_HOUR: &str = "@every 1h";
const ERROR_TIME_ZONE: &str = "bad timezone";
const NEW_YORK: &str = "America/New_York";

fn labels(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

fn job_spec() -> JobSpec {
    JobSpec {
        parallelism: Some(1),
        completions: Some(1),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta { labels: labels(&[("foo", "bar")]), ..Default::default() }),
            spec: Some(PodSpec {
                containers: vec![Container { image: Some("foo/bar".into()), ..Default::default() }],
                ..Default::default()
            }),
        },
        ..Default::default()
    }
}

/// upstream `cronJob()`.
fn cron_job() -> CronJob {
    CronJob {
        metadata: ObjectMeta {
            name: Some("mycronjob".into()),
            namespace: Some("snazzycats".into()),
            uid: Some("1a2b3c".into()),
            creation_timestamp: Some(Time(just_before_the_hour())),
            ..Default::default()
        },
        spec: CronJobSpec {
            schedule: "* * * * ?".into(),
            concurrency_policy: Some("Allow".into()),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: labels(&[("a", "b")]),
                    annotations: labels(&[("x", "y")]),
                    ..Default::default()
                }),
                spec: Some(job_spec()),
            },
            ..Default::default()
        },
        status: None,
    }
}

fn complete(job: &mut Job, completion: Option<Timestamp>) {
    let status = job.status.get_or_insert_with(Default::default);
    status.completion_time = completion.map(Time);
    status.conditions.get_or_insert_with(Vec::new).push(JobCondition {
        type_: "Complete".into(),
        status: "True".into(),
        ..Default::default()
    });
}

fn fail(job: &mut Job) {
    job.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(JobCondition { type_: "Failed".into(), status: "True".into(), ..Default::default() });
}

/// A Job of `mycronjob` as getJobFromTemplate2 makes it for `at`, with UID and namespace.
fn template_job(cj: &CronJob, at: Timestamp, uid: &str) -> Job {
    let mut job = job_from_template(cj, &utc(at)).expect("job from template");
    job.metadata.uid = Some(uid.into());
    job.metadata.namespace = cj.metadata.namespace.clone();
    job
}

fn set_active(cj: &mut CronJob, refs: Vec<ObjectReference>) {
    cj.status.get_or_insert_with(Default::default).active = Some(refs);
}

fn last_schedule(cj: &CronJob) -> Option<Timestamp> {
    cj.status.as_ref().and_then(|s| s.last_schedule_time.as_ref()).map(|t| t.0)
}

fn last_successful(cj: &CronJob) -> Option<Timestamp> {
    cj.status.as_ref().and_then(|s| s.last_successful_time.as_ref()).map(|t| t.0)
}

// ---------------------------------------------------------------------------------------------
// The fake API and the driver (the shell's loop)

type GetJobFn = Box<dyn Fn(&str, &str) -> Result<Job, ApiError>>;
type DeleteFn = Box<dyn Fn(&str) -> Result<(), ApiError>>;

struct Fake {
    /// fakeCJControl.GetCronJob.
    get_cronjob: Result<CronJob, ApiError>,
    /// fakeJobControl.GetJob.
    get_job: GetJobFn,
    /// fakeJobControl.DeleteJob.
    delete: DeleteFn,
    /// fakeJobControl.CreateErr; otherwise the request comes back with UID `test-uid`.
    create_err: Option<ApiError>,
    /// Offset of the created Job's creationTimestamp from the request's (the scheduled time).
    created_after: SignedDuration,
    update_err: Option<ApiError>,
}

impl Default for Fake {
    fn default() -> Self {
        Fake {
            get_cronjob: Err(ApiError::not_found("cronjob not found")),
            get_job: Box::new(|_, name| Err(ApiError::not_found(format!("jobs.batch \"{name}\" not found")))),
            delete: Box::new(|_| Ok(())),
            create_err: None,
            created_after: SignedDuration::ZERO,
            update_err: None,
        }
    }
}

impl Fake {
    /// fakeJobControl{Job: job, Err: err}: GetJob and DeleteJob fail with `err`, else GetJob
    /// returns `job` whatever the name.
    fn job_control(job: Option<Job>, err: Option<ApiError>) -> Fake {
        let get_err = err.clone();
        Fake {
            get_job: Box::new(move |_, name| match (&get_err, &job) {
                (Some(e), _) => Err(e.clone()),
                (None, Some(j)) => Ok(j.clone()),
                (None, None) => Err(ApiError::not_found(format!("jobs.batch \"{name}\" not found"))),
            }),
            delete: Box::new(move |_| match &err {
                Some(e) => Err(e.clone()),
                None => Ok(()),
            }),
            ..Fake::default()
        }
    }
}

#[derive(Debug, Default)]
struct Trace {
    events: Vec<Event>,
    skews: Vec<f64>,
    created: Vec<Job>,
    deleted: Vec<(String, DeleteReason)>,
    got_jobs: Vec<(String, GetJobReason)>,
    got_cronjob: usize,
    updates: Vec<CronJob>,
    outcome: Option<Outcome>,
    /// The effects beyond upstream.
    signals: Vec<Effect>,
}

impl Trace {
    fn warnings(&self) -> usize {
        self.events.iter().filter(|e| e.type_ == EventType::Warning).count()
    }
    fn normals(&self) -> usize {
        self.events.iter().filter(|e| e.type_ == EventType::Normal).count()
    }
    fn reasons(&self) -> Vec<&'static str> {
        self.events.iter().map(|e| e.reason).collect()
    }
    fn outcome(&self) -> &Outcome {
        self.outcome.as_ref().expect("finished")
    }
    fn last_update(&self) -> &CronJob {
        self.updates.last().expect("a status update")
    }
}

fn drive(mut step: Step, api: &Fake) -> Trace {
    let mut trace = Trace::default();
    for _ in 0..10_000 {
        for effect in std::mem::take(&mut step.effects) {
            match effect {
                Effect::Event(e) => trace.events.push(e),
                Effect::CreationSkew { seconds } => trace.skews.push(seconds),
                other => trace.signals.push(other),
            }
        }
        step = match step.next {
            Next::DeleteJob(d) => {
                let r = (api.delete)(&d.name);
                if r.is_ok() {
                    trace.deleted.push((d.name.clone(), d.reason));
                }
                d.answer(r)
            }
            Next::GetCronJob(g) => {
                trace.got_cronjob += 1;
                let r = api.get_cronjob.clone();
                g.answer(r)
            }
            Next::GetJob(g) => {
                trace.got_jobs.push((g.name.clone(), g.reason));
                let r = (api.get_job)(&g.namespace, &g.name);
                g.answer(r)
            }
            Next::CreateJob(c) => {
                let r = match &api.create_err {
                    Some(e) => Err(e.clone()),
                    None => {
                        let mut job = (*c.job).clone();
                        trace.created.push(job.clone());
                        job.metadata.uid = Some("test-uid".into());
                        if let Some(ts) = job.metadata.creation_timestamp.as_mut() {
                            ts.0 = plus(ts.0, api.created_after);
                        }
                        Ok(job)
                    }
                };
                c.answer(r.as_ref().map_err(Clone::clone))
            }
            Next::UpdateStatus(u) => {
                trace.updates.push((*u.cronjob).clone());
                let r = api.update_err.clone().map_or(Ok(()), Err);
                u.answer(r)
            }
            Next::Done(outcome) => {
                trace.outcome = Some(outcome);
                return trace;
            }
        };
    }
    panic!("the sync did not finish");
}

fn run(cj: &CronJob, jobs: &[Job], now: Timestamp, api: &Fake) -> Trace {
    drive(sync(cj, jobs.iter(), &utc(now)), api)
}

// ---------------------------------------------------------------------------------------------
// TestControllerV2SyncCronJob

#[derive(Clone)]
struct Row {
    name: &'static str,
    policy: &'static str,
    suspend: bool,
    schedule: &'static str,
    time_zone: Option<&'static str>,
    deadline: Option<i64>,
    ran_previously: bool,
    still_active: bool,
    cronjob_creation_time: Option<Timestamp>,
    job_creation_time: Timestamp,
    last_schedule_time: Option<Timestamp>,
    now: Timestamp,
    job_create_error: Option<ApiError>,
    job_get_err: Option<ApiError>,
    expect_create: bool,
    expect_delete: bool,
    /// Active Jobs in the status written, when one is written (upstream's `expectActive`, which its
    /// harness never compares since syncCronJob writes nothing itself; corrected where noted).
    expect_active: usize,
    expected_warnings: usize,
    expect_err: bool,
    expected_requeue: Option<SignedDuration>,
    expect_update_status: bool,
    job_still_not_found_in_lister: bool,
    job_present_in_cj_active_status: bool,
}

fn row(name: &'static str) -> Row {
    Row {
        name,
        policy: "Allow",
        suspend: false,
        schedule: ON_THE_HOUR,
        time_zone: None,
        deadline: None,
        ran_previously: false,
        still_active: false,
        cronjob_creation_time: None,
        job_creation_time: just_after_the_prior_hour(),
        last_schedule_time: None,
        now: just_before_the_hour(),
        job_create_error: None,
        job_get_err: None,
        expect_create: false,
        expect_delete: false,
        expect_active: 0,
        expected_warnings: 0,
        expect_err: false,
        expected_requeue: None,
        expect_update_status: false,
        job_still_not_found_in_lister: false,
        job_present_in_cj_active_status: true,
    }
}

fn already_exists() -> Option<ApiError> {
    Some(ApiError::already_exists("jobs.batch \"\" already exists"))
}

fn sync_cronjob_rows() -> Vec<Row> {
    let d = delta();
    let h59 = hours(1) - mins(1) + d;
    let m1 = mins(1) + d;
    let created = |r: Row, active: usize| Row {
        expect_create: true,
        expect_active: active,
        expect_update_status: true,
        ..r
    };
    vec![
        Row { schedule: ERROR_SCHEDULE, expected_warnings: 1, ..row("never ran, not valid schedule, A") },
        Row {
            policy: "Forbid",
            schedule: ERROR_SCHEDULE,
            expected_warnings: 1,
            ..row("never ran, not valid schedule, F")
        },
        // (upstream's "R" row uses Forbid too)
        Row {
            policy: "Forbid",
            schedule: ERROR_SCHEDULE,
            expected_warnings: 1,
            ..row("never ran, not valid schedule, R")
        },
        Row {
            time_zone: Some(ERROR_TIME_ZONE),
            expected_warnings: 1,
            ..row("never ran, not valid time zone")
        },
        Row { expected_requeue: Some(m1), ..row("never ran, not time, A") },
        Row { policy: "Forbid", expected_requeue: Some(m1), ..row("never ran, not time, F") },
        Row { policy: "Replace", expected_requeue: Some(m1), ..row("never ran, not time, R") },
        Row { time_zone: Some(NEW_YORK), expected_requeue: Some(m1), ..row("never ran, not time in zone") },
        created(
            Row { now: just_after_the_hour(), expected_requeue: Some(h59), ..row("never ran, is time, A") },
            1,
        ),
        created(
            Row {
                policy: "Forbid",
                now: just_after_the_hour(),
                expected_requeue: Some(h59),
                ..row("never ran, is time, F")
            },
            1,
        ),
        created(
            Row {
                policy: "Replace",
                now: just_after_the_hour(),
                expected_requeue: Some(h59),
                ..row("never ran, is time, R")
            },
            1,
        ),
        created(
            Row {
                time_zone: Some(NEW_YORK),
                now: just_after_the_hour(),
                expected_requeue: Some(h59),
                ..row("never ran, is time in zone, but time zone disabled")
            },
            1,
        ),
        created(
            Row {
                time_zone: Some(NEW_YORK),
                now: just_after_the_hour(),
                expected_requeue: Some(h59),
                ..row("never ran, is time in zone")
            },
            1,
        ),
        // upstream's expectActive 0 is never compared; the Job is created and listed.
        created(
            Row {
                schedule: "TZ=UTC 0 * * * ?",
                time_zone: Some(NEW_YORK),
                now: just_after_the_hour(),
                expected_warnings: 1,
                expected_requeue: Some(h59),
                ..row("never ran, is time in zone, but TZ is also set in schedule")
            },
            1,
        ),
        Row { suspend: true, now: just_after_the_hour(), ..row("never ran, is time, suspended") },
        Row {
            deadline: Some(SHORT_DEAD),
            now: plus(just_after_the_hour(), mins(SHORT_DEAD + 1)),
            expected_requeue: Some(hours(1) - mins(1) - mins(SHORT_DEAD + 1) + d),
            ..row("never ran, is time, past deadline")
        },
        created(
            Row {
                deadline: Some(LONG_DEAD),
                now: just_after_the_hour(),
                expected_requeue: Some(h59),
                ..row("never ran, is time, not past deadline")
            },
            1,
        ),
        Row {
            ran_previously: true,
            expected_requeue: Some(m1),
            expect_update_status: true,
            ..row("prev ran but done, not time, A")
        },
        Row {
            policy: "Forbid",
            ran_previously: true,
            expected_requeue: Some(m1),
            expect_update_status: true,
            ..row("prev ran but done, not time, F")
        },
        Row {
            policy: "Replace",
            ran_previously: true,
            expected_requeue: Some(m1),
            expect_update_status: true,
            ..row("prev ran but done, not time, R")
        },
        created(
            Row {
                ran_previously: true,
                now: just_after_the_hour(),
                expected_requeue: Some(h59),
                ..row("prev ran but done, is time, A")
            },
            1,
        ),
        // AlreadyExists: the (fake) GET returns the finished Job, which is ours and not listed, so it
        // is adopted (upstream's expectActive 0 is never compared).
        Row {
            ran_previously: true,
            now: just_after_the_hour(),
            job_create_error: already_exists(),
            expect_update_status: true,
            expect_active: 1,
            expected_requeue: Some(h59),
            ..row("prev ran but done, is time, create job failed, A")
        },
        Row {
            ran_previously: true,
            now: just_after_the_hour(),
            job_create_error: already_exists(),
            expect_update_status: true,
            expect_active: 1,
            expected_requeue: Some(h59),
            job_present_in_cj_active_status: false,
            ..row("prev ran but done, is time, job not present in CJ active status, create job failed, A")
        },
        created(
            Row {
                policy: "Forbid",
                ran_previously: true,
                now: just_after_the_hour(),
                expected_requeue: Some(h59),
                ..row("prev ran but done, is time, F")
            },
            1,
        ),
        created(
            Row {
                policy: "Replace",
                ran_previously: true,
                now: just_after_the_hour(),
                expected_requeue: Some(h59),
                ..row("prev ran but done, is time, R")
            },
            1,
        ),
        Row {
            suspend: true,
            ran_previously: true,
            now: just_after_the_hour(),
            expect_update_status: true,
            ..row("prev ran but done, is time, suspended")
        },
        Row {
            deadline: Some(SHORT_DEAD),
            ran_previously: true,
            now: just_after_the_hour(),
            expected_requeue: Some(h59),
            expect_update_status: true,
            ..row("prev ran but done, is time, past deadline")
        },
        created(
            Row {
                deadline: Some(LONG_DEAD),
                ran_previously: true,
                now: just_after_the_hour(),
                expected_requeue: Some(h59),
                ..row("prev ran but done, is time, not past deadline")
            },
            1,
        ),
        Row {
            ran_previously: true,
            still_active: true,
            expect_active: 1,
            expected_requeue: Some(m1),
            ..row("still active, not time, A")
        },
        Row {
            policy: "Forbid",
            ran_previously: true,
            still_active: true,
            expect_active: 1,
            expected_requeue: Some(m1),
            ..row("still active, not time, F")
        },
        Row {
            policy: "Replace",
            ran_previously: true,
            still_active: true,
            expect_active: 1,
            expected_requeue: Some(m1),
            ..row("still active, not time, R")
        },
        created(
            Row {
                ran_previously: true,
                still_active: true,
                now: just_after_the_hour(),
                expected_requeue: Some(h59),
                ..row("still active, is time, A")
            },
            2,
        ),
        Row {
            policy: "Forbid",
            ran_previously: true,
            still_active: true,
            now: just_after_the_hour(),
            expect_active: 1,
            expected_requeue: Some(h59),
            ..row("still active, is time, F")
        },
        created(
            Row {
                policy: "Replace",
                ran_previously: true,
                still_active: true,
                now: just_after_the_hour(),
                expect_delete: true,
                expected_requeue: Some(h59),
                ..row("still active, is time, R")
            },
            1,
        ),
        Row {
            policy: "Replace",
            ran_previously: true,
            still_active: true,
            now: just_after_the_hour(),
            job_get_err: Some(ApiError::other("request is invalid")),
            expect_active: 1,
            expected_warnings: 1,
            expect_err: true,
            ..row("still active, is time, get job failed, R")
        },
        Row {
            suspend: true,
            ran_previously: true,
            still_active: true,
            now: just_after_the_hour(),
            expect_active: 1,
            ..row("still active, is time, suspended")
        },
        Row {
            deadline: Some(SHORT_DEAD),
            ran_previously: true,
            still_active: true,
            now: just_after_the_hour(),
            expect_active: 1,
            expected_requeue: Some(h59),
            ..row("still active, is time, past deadline")
        },
        created(
            Row {
                deadline: Some(LONG_DEAD),
                ran_previously: true,
                still_active: true,
                now: just_after_the_hour(),
                expected_requeue: Some(h59),
                ..row("still active, is time, not past deadline")
            },
            2,
        ),
        // Too many missed starting times: the Job is created anyway, with one warning.
        created(
            Row {
                deadline: Some(LONG_DEAD),
                ran_previously: true,
                now: week_after_the_hour(),
                expected_warnings: 1,
                expected_requeue: Some(hours(1) + d),
                ..row("prev ran but done, long overdue, not past deadline, A")
            },
            1,
        ),
        created(
            Row {
                policy: "Replace",
                deadline: Some(LONG_DEAD),
                ran_previously: true,
                now: week_after_the_hour(),
                expected_warnings: 1,
                expected_requeue: Some(hours(1) + d),
                ..row("prev ran but done, long overdue, not past deadline, R")
            },
            1,
        ),
        created(
            Row {
                policy: "Forbid",
                deadline: Some(LONG_DEAD),
                ran_previously: true,
                now: week_after_the_hour(),
                expected_warnings: 1,
                expected_requeue: Some(hours(1) + d),
                ..row("prev ran but done, long overdue, not past deadline, F")
            },
            1,
        ),
        created(
            Row {
                ran_previously: true,
                now: week_after_the_hour(),
                expected_warnings: 1,
                expected_requeue: Some(hours(1) + d),
                ..row("prev ran but done, long overdue, no deadline, A")
            },
            1,
        ),
        created(
            Row {
                policy: "Replace",
                ran_previously: true,
                now: week_after_the_hour(),
                expected_warnings: 1,
                expected_requeue: Some(hours(1) + d),
                ..row("prev ran but done, long overdue, no deadline, R")
            },
            1,
        ),
        created(
            Row {
                policy: "Forbid",
                ran_previously: true,
                now: week_after_the_hour(),
                expected_warnings: 1,
                expected_requeue: Some(hours(1) + d),
                ..row("prev ran but done, long overdue, no deadline, F")
            },
            1,
        ),
        created(
            Row {
                deadline: Some(MEDIUM_DEAD),
                ran_previously: true,
                now: week_after_the_hour(),
                expected_requeue: Some(hours(1) + d),
                ..row("prev ran but done, long overdue, past medium deadline, A")
            },
            1,
        ),
        created(
            Row {
                deadline: Some(SHORT_DEAD),
                ran_previously: true,
                now: week_after_the_hour(),
                expected_requeue: Some(hours(1) + d),
                ..row("prev ran but done, long overdue, past short deadline, A")
            },
            1,
        ),
        created(
            Row {
                policy: "Replace",
                deadline: Some(MEDIUM_DEAD),
                ran_previously: true,
                now: week_after_the_hour(),
                expected_requeue: Some(hours(1) + d),
                ..row("prev ran but done, long overdue, past medium deadline, R")
            },
            1,
        ),
        created(
            Row {
                policy: "Replace",
                deadline: Some(SHORT_DEAD),
                ran_previously: true,
                now: week_after_the_hour(),
                expected_requeue: Some(hours(1) + d),
                ..row("prev ran but done, long overdue, past short deadline, R")
            },
            1,
        ),
        created(
            Row {
                policy: "Forbid",
                deadline: Some(MEDIUM_DEAD),
                ran_previously: true,
                now: week_after_the_hour(),
                expected_requeue: Some(hours(1) + d),
                ..row("prev ran but done, long overdue, past medium deadline, F")
            },
            1,
        ),
        created(
            Row {
                policy: "Forbid",
                deadline: Some(SHORT_DEAD),
                ran_previously: true,
                now: week_after_the_hour(),
                expected_requeue: Some(hours(1) + d),
                ..row("prev ran but done, long overdue, past short deadline, F")
            },
            1,
        ),
        // Time skew: the controller sees the Job created, takes no action.
        Row {
            policy: "Forbid",
            ran_previously: true,
            job_creation_time: just_after_the_hour(),
            job_create_error: already_exists(),
            expected_requeue: Some(m1),
            expect_update_status: true,
            job_present_in_cj_active_status: false,
            ..row("this ran but done, time drifted back, F")
        },
        // Slow Job lister: the API server still has the Job.
        Row {
            deadline: Some(LONG_DEAD),
            ran_previously: true,
            still_active: true,
            job_creation_time: plus(top_of_the_hour(), millis(100)),
            now: plus(just_after_the_hour(), millis(100)),
            expect_active: 1,
            expected_requeue: Some(h59 - millis(100)),
            job_still_not_found_in_lister: true,
            ..row("this started but went missing, not past deadline, A")
        },
        Row {
            policy: "Forbid",
            deadline: Some(LONG_DEAD),
            ran_previously: true,
            still_active: true,
            job_creation_time: plus(top_of_the_hour(), millis(100)),
            now: plus(just_after_the_hour(), millis(100)),
            expect_active: 1,
            expected_requeue: Some(h59 - millis(100)),
            job_still_not_found_in_lister: true,
            ..row("this started but went missing, not past deadline, f")
        },
        Row {
            policy: "Replace",
            deadline: Some(LONG_DEAD),
            ran_previously: true,
            still_active: true,
            job_creation_time: plus(top_of_the_hour(), millis(100)),
            now: plus(just_after_the_hour(), millis(100)),
            expect_active: 1,
            expected_requeue: Some(h59 - millis(100)),
            job_still_not_found_in_lister: true,
            ..row("this started but went missing, not past deadline, R")
        },
        // Slow CronJob lister: the fresh CronJob lists the Job.
        Row {
            deadline: Some(LONG_DEAD),
            ran_previously: true,
            still_active: true,
            job_creation_time: plus(top_of_the_hour(), millis(100)),
            now: plus(just_after_the_hour(), millis(100)),
            expect_active: 1,
            expected_requeue: Some(h59 - millis(100)),
            job_present_in_cj_active_status: false,
            ..row("this started but is not present in cronjob active list, not past deadline, A")
        },
        Row {
            policy: "Forbid",
            deadline: Some(LONG_DEAD),
            ran_previously: true,
            still_active: true,
            job_creation_time: plus(top_of_the_hour(), millis(100)),
            now: plus(just_after_the_hour(), millis(100)),
            expect_active: 1,
            expected_requeue: Some(h59 - millis(100)),
            job_present_in_cj_active_status: false,
            ..row("this started but is not present in cronjob active list, not past deadline, f")
        },
        Row {
            policy: "Replace",
            deadline: Some(LONG_DEAD),
            ran_previously: true,
            still_active: true,
            job_creation_time: plus(top_of_the_hour(), millis(100)),
            now: plus(just_after_the_hour(), millis(100)),
            expect_active: 1,
            expected_requeue: Some(h59 - millis(100)),
            job_present_in_cj_active_status: false,
            ..row("this started but is not present in cronjob active list, not past deadline, R")
        },
        // @every schedules.
        Row {
            schedule: EVERY_HOUR,
            cronjob_creation_time: Some(just_before_the_hour()),
            job_creation_time: just_before_the_hour(),
            now: top_of_the_hour(),
            expected_requeue: Some(h59),
            ..row("with @every schedule, never ran, not time")
        },
        created(
            Row {
                schedule: EVERY_HOUR,
                cronjob_creation_time: Some(just_before_the_prior_hour()),
                job_creation_time: just_before_the_prior_hour(),
                now: just_before_the_hour(),
                expected_requeue: Some(hours(1) + d),
                ..row("with @every schedule, never ran, is time")
            },
            1,
        ),
        Row {
            schedule: EVERY_HOUR,
            deadline: Some(SHORT_DEAD),
            cronjob_creation_time: Some(just_before_the_prior_hour()),
            job_creation_time: just_before_the_prior_hour(),
            now: plus(just_before_the_hour(), secs(SHORT_DEAD + 1)),
            expected_requeue: Some(hours(1) - secs(SHORT_DEAD + 1) + d),
            ..row("with @every schedule, never ran, is time, past deadline")
        },
        created(
            Row {
                schedule: EVERY_HOUR,
                deadline: Some(LONG_DEAD),
                cronjob_creation_time: Some(just_before_the_prior_hour()),
                job_creation_time: just_before_the_prior_hour(),
                now: plus(just_before_the_hour(), secs(SHORT_DEAD - 1)),
                expected_requeue: Some(hours(1) - secs(SHORT_DEAD - 1) + d),
                ..row("with @every schedule, never ran, is time, not past deadline")
            },
            1,
        ),
        Row {
            schedule: EVERY_HOUR,
            ran_previously: true,
            cronjob_creation_time: Some(just_before_the_prior_hour()),
            job_creation_time: just_before_the_prior_hour(),
            last_schedule_time: Some(just_before_the_hour()),
            now: top_of_the_hour(),
            expected_requeue: Some(h59),
            expect_update_status: true,
            ..row("with @every schedule, prev ran but done, not time")
        },
        created(
            Row {
                schedule: EVERY_HOUR,
                ran_previously: true,
                cronjob_creation_time: Some(just_before_the_prior_hour()),
                job_creation_time: just_before_the_prior_hour(),
                last_schedule_time: Some(just_before_the_hour()),
                now: plus(top_of_the_hour(), hours(1)),
                expected_requeue: Some(h59),
                ..row("with @every schedule, prev ran but done, is time")
            },
            1,
        ),
        Row {
            schedule: EVERY_HOUR,
            deadline: Some(SHORT_DEAD),
            ran_previously: true,
            cronjob_creation_time: Some(just_before_the_prior_hour()),
            job_creation_time: just_before_the_prior_hour(),
            last_schedule_time: Some(just_before_the_hour()),
            now: plus(just_before_the_next_hour(), secs(SHORT_DEAD + 1)),
            expected_requeue: Some(hours(1) - secs(SHORT_DEAD + 1) + d),
            expect_update_status: true,
            ..row("with @every schedule, prev ran but done, is time, past deadline")
        },
        Row {
            schedule: EVERY_HOUR,
            ran_previously: true,
            still_active: true,
            cronjob_creation_time: Some(just_before_the_prior_hour()),
            job_creation_time: just_before_the_hour(),
            last_schedule_time: Some(just_before_the_hour()),
            now: top_of_the_hour(),
            expect_active: 1,
            expected_requeue: Some(h59),
            ..row("with @every schedule, still active, not time")
        },
        created(
            Row {
                schedule: EVERY_HOUR,
                ran_previously: true,
                still_active: true,
                cronjob_creation_time: Some(just_before_the_prior_hour()),
                job_creation_time: just_before_the_prior_hour(),
                last_schedule_time: Some(just_before_the_prior_hour()),
                now: just_after_the_hour(),
                expected_requeue: Some(hours(1) - mins(2) + d),
                ..row("with @every schedule, still active, is time")
            },
            2,
        ),
        Row {
            schedule: EVERY_HOUR,
            deadline: Some(SHORT_DEAD),
            ran_previously: true,
            still_active: true,
            cronjob_creation_time: Some(just_before_the_prior_hour()),
            job_creation_time: just_before_the_hour(),
            last_schedule_time: Some(just_before_the_hour()),
            now: plus(just_before_the_next_hour(), secs(SHORT_DEAD + 1)),
            expect_active: 1,
            expected_requeue: Some(hours(1) - secs(SHORT_DEAD + 1) + d),
            ..row("with @every schedule, still active, is time, past deadline")
        },
        created(
            Row {
                schedule: EVERY_HOUR,
                deadline: Some(LONG_DEAD),
                ran_previously: true,
                still_active: true,
                cronjob_creation_time: Some(just_before_the_prior_hour()),
                job_creation_time: just_before_the_hour(),
                last_schedule_time: Some(just_before_the_hour()),
                now: plus(just_before_the_next_hour(), secs(SHORT_DEAD - 1)),
                expected_requeue: Some(hours(1) - secs(SHORT_DEAD - 1) + d),
                ..row("with @every schedule, still active, is time, not past deadline")
            },
            2,
        ),
        created(
            Row {
                schedule: EVERY_HOUR,
                ran_previously: true,
                cronjob_creation_time: Some(just_after_the_prior_hour()),
                last_schedule_time: Some(just_after_the_hour()),
                job_creation_time: just_after_the_prior_hour(),
                now: week_after_the_hour(),
                expected_warnings: 1,
                expected_requeue: Some(mins(1) + d),
                ..row("with @every schedule, prev ran but done, long overdue, no deadline")
            },
            1,
        ),
        // upstream's expectActive 1 is never compared: nothing is created here.
        Row {
            schedule: EVERY_HOUR,
            deadline: Some(SHORT_DEAD),
            ran_previously: true,
            cronjob_creation_time: Some(just_after_the_prior_hour()),
            last_schedule_time: Some(just_after_the_hour()),
            job_creation_time: just_after_the_prior_hour(),
            now: plus(plus(week_after_the_hour(), mins(1)), secs(SHORT_DEAD + 1)),
            expect_active: 0,
            expected_requeue: Some(hours(1) - secs(SHORT_DEAD + 1) + d),
            expect_update_status: true,
            ..row("with @every schedule, prev ran but done, long overdue, past deadline")
        },
        Row {
            job_create_error: Some(ApiError::new(
                ApiErrorKind::NamespaceTerminating,
                "namespace default is being terminated",
            )),
            ran_previously: true,
            still_active: true,
            now: just_after_the_hour(),
            expect_err: true,
            job_present_in_cj_active_status: false,
            ..row("do nothing if the namespace is terminating")
        },
    ]
}

/// Builds the CronJob, the cached Jobs and the fake exactly as upstream's test loop does.
fn setup(r: &Row) -> (CronJob, Vec<Job>, Fake) {
    let mut cj = cron_job();
    cj.spec.concurrency_policy = Some(r.policy.into());
    cj.spec.suspend = Some(r.suspend);
    cj.spec.schedule = r.schedule.into();
    cj.spec.time_zone = r.time_zone.map(str::to_string);
    cj.spec.starting_deadline_seconds = r.deadline;
    let mut real_cj = cj.clone();
    let mut jobs = Vec::new();
    let mut job = None;
    if r.ran_previously {
        cj.metadata.creation_timestamp =
            Some(Time(r.cronjob_creation_time.unwrap_or(just_before_the_prior_hour())));
        cj.status = Some(CronJobStatus {
            last_schedule_time: Some(Time(r.last_schedule_time.unwrap_or(just_after_the_prior_hour()))),
            ..Default::default()
        });
        let mut j = template_job(&cj, r.job_creation_time, "1234");
        if r.still_active {
            let reference = job_ref(&j);
            if r.job_present_in_cj_active_status {
                set_active(&mut cj, vec![reference.clone()]);
            }
            set_active(&mut real_cj, vec![reference]);
        } else {
            complete(&mut j, Some(plus(r.job_creation_time, secs(10))));
        }
        if !r.job_still_not_found_in_lister {
            jobs.push(j.clone());
        }
        job = Some(j);
    } else {
        cj.metadata.creation_timestamp =
            Some(Time(r.cronjob_creation_time.unwrap_or(just_before_the_hour())));
        assert!(!r.still_active, "{}: test setup error: this case makes no sense", r.name);
    }
    let mut api = Fake::job_control(job, r.job_get_err.clone());
    api.get_cronjob = Ok(real_cj);
    api.create_err = r.job_create_error.clone();
    (cj, jobs, api)
}

#[test]
fn upstream_controller_v2_sync_cronjob() {
    let rows = sync_cronjob_rows();
    assert!(rows.len() >= 70, "{} rows", rows.len());
    for r in rows {
        let (cj, jobs, api) = setup(&r);
        let trace = run(&cj, &jobs, r.now, &api);
        let name = r.name;

        assert_eq!(trace.created.len(), usize::from(r.expect_create), "{name}: creates");
        for job in &trace.created {
            let owner = controller_of(&job.metadata).expect("controller reference");
            assert_eq!(
                (owner.api_version.as_str(), owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
                ("batch/v1", "CronJob", "mycronjob", "1a2b3c"),
                "{name}"
            );
            assert_eq!(owner.block_owner_deletion, Some(true), "{name}");
        }
        assert_eq!(trace.deleted.len(), usize::from(r.expect_delete), "{name}: deletes");
        assert_eq!(!trace.updates.is_empty(), r.expect_update_status, "{name}: status update");
        assert!(trace.updates.len() <= 1, "{name}: one status update at most");

        // upstream: events = creates + deletes + warnings (+ JobAlreadyActive for Forbid).
        let already_active = usize::from(name == "still active, is time, F");
        assert_eq!(
            trace.normals(),
            usize::from(r.expect_create) + usize::from(r.expect_delete) + already_active,
            "{name}: normal events {:?}",
            trace.events
        );
        assert_eq!(trace.warnings(), r.expected_warnings, "{name}: warnings {:?}", trace.events);

        if r.expect_err {
            assert!(matches!(trace.outcome(), Outcome::Retry(_)), "{name}: {:?}", trace.outcome());
        }
        if let Some(d) = r.expected_requeue {
            assert_eq!(trace.outcome(), &Outcome::RequeueAfter(d), "{name}");
        }
        if let Some(update) = trace.updates.last() {
            assert_eq!(active_refs(update).len(), r.expect_active, "{name}: active");
            if r.ran_previously && !r.still_active {
                assert_eq!(last_successful(update), Some(plus(r.job_creation_time, secs(10))), "{name}");
            }
            if r.expect_create {
                let created = &trace.created[0];
                assert_eq!(
                    last_schedule(update),
                    created.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    "{name}: lastScheduleTime is the scheduled time"
                );
                assert_eq!(trace.skews, vec![0.0], "{name}: skew");
            }
        }
    }
}

/// The outcomes upstream's table does not pin.
#[test]
fn upstream_sync_cronjob_outcomes() {
    let rows = sync_cronjob_rows();
    let outcome_of = |name: &str| {
        let r = rows.iter().find(|r| r.name == name).expect(name);
        let (cj, jobs, api) = setup(r);
        run(&cj, &jobs, r.now, &api).outcome.expect("finished")
    };
    for name in [
        "never ran, not valid schedule, A",
        "never ran, not valid time zone",
        "never ran, is time, suspended",
        "still active, is time, suspended",
    ] {
        assert_eq!(outcome_of(name), Outcome::Done, "{name}: no requeue");
    }
    assert_eq!(
        outcome_of("still active, is time, get job failed, R"),
        Outcome::Retry(SyncError::GetJob(ApiError::other("request is invalid")))
    );
}

// ---------------------------------------------------------------------------------------------
// UPSTREAM.md §2, controller cases (CronJob created 09:59, schedule `0 * * * ?`)

fn md_cronjob(policy: &str) -> CronJob {
    let mut cj = cron_job();
    cj.spec.schedule = ON_THE_HOUR.into();
    cj.spec.concurrency_policy = Some(policy.into());
    cj
}

#[test]
fn upstream_md_controller_case_1_not_time_yet() {
    let trace = run(&md_cronjob("Allow"), &[], just_before_the_hour(), &Fake::default());
    assert_eq!(trace.outcome(), &Outcome::RequeueAfter(mins(1) + delta()));
    assert!(trace.created.is_empty() && trace.events.is_empty() && trace.updates.is_empty());
}

#[test]
fn upstream_md_controller_case_2_creates_at_1001() {
    let trace = run(&md_cronjob("Allow"), &[], just_after_the_hour(), &Fake::default());
    assert_eq!(trace.created.len(), 1);
    let job = &trace.created[0];
    assert_eq!(job.metadata.name.as_deref(), Some("mycronjob-24394200"));
    assert_eq!(trace.events, vec![events::successful_create("mycronjob-24394200")]);
    assert_eq!(trace.events[0].message, "Created job mycronjob-24394200");
    let update = trace.last_update();
    assert_eq!(active_refs(update).len(), 1);
    assert_eq!(active_refs(update)[0].uid.as_deref(), Some("test-uid"));
    assert_eq!(last_schedule(update), Some(top_of_the_hour()));
    assert_eq!(trace.outcome(), &Outcome::RequeueAfter(mins(59) + delta()));
}

#[test]
fn upstream_md_controller_case_3_starting_deadline_passed() {
    let mut cj = md_cronjob("Allow");
    cj.spec.starting_deadline_seconds = Some(10);
    let trace = run(&cj, &[], t("2016-05-19T10:12:00Z"), &Fake::default());
    assert!(trace.created.is_empty() && trace.events.is_empty());
    assert_eq!(trace.outcome(), &Outcome::RequeueAfter(mins(48) + delta()));
}

/// A Job for 09:00 still running at 10:01.
fn md_still_active(policy: &str) -> (CronJob, Job) {
    let mut cj = md_cronjob(policy);
    cj.metadata.creation_timestamp = Some(Time(just_before_the_prior_hour()));
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(t("2016-05-19T09:00:00Z"))),
        ..Default::default()
    });
    let job = template_job(&cj, t("2016-05-19T09:00:00Z"), "old-uid");
    set_active(&mut cj, vec![job_ref(&job)]);
    (cj, job)
}

#[test]
fn upstream_md_controller_case_4_forbid_replace_allow_with_an_active_job() {
    // Forbid: no create, Normal JobAlreadyActive.
    let (cj, job) = md_still_active("Forbid");
    let trace = run(&cj, std::slice::from_ref(&job), just_after_the_hour(), &Fake::default());
    assert!(trace.created.is_empty());
    assert_eq!(trace.events, vec![events::job_already_active()]);
    assert_eq!(
        trace.events[0].message,
        "Not starting job because prior execution is running and concurrency policy is Forbid"
    );
    assert!(trace.updates.is_empty());
    assert_eq!(trace.outcome(), &Outcome::RequeueAfter(mins(59) + delta()));

    // Replace: GET, DELETE (Background) the old Job, then create: one active.
    let (cj, job) = md_still_active("Replace");
    let api = Fake::job_control(Some(job.clone()), None);
    let trace = run(&cj, std::slice::from_ref(&job), just_after_the_hour(), &api);
    assert_eq!(trace.got_jobs, vec![("mycronjob-24394140".to_string(), GetJobReason::Replace)]);
    assert_eq!(trace.deleted, vec![("mycronjob-24394140".to_string(), DeleteReason::Replace)]);
    assert_eq!(DeleteJob::PROPAGATION_POLICY, "Background");
    assert_eq!(trace.reasons(), vec!["SuccessfulDelete", "SuccessfulCreate"]);
    assert_eq!(trace.events[0].message, "Deleted job mycronjob-24394140");
    let active = active_refs(trace.last_update());
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].name.as_deref(), Some("mycronjob-24394200"));

    // Allow: a second active Job.
    let (cj, job) = md_still_active("Allow");
    let trace = run(&cj, std::slice::from_ref(&job), just_after_the_hour(), &Fake::default());
    assert_eq!(trace.created.len(), 1);
    assert_eq!(active_refs(trace.last_update()).len(), 2);
}

#[test]
fn upstream_md_controller_case_5_week_old_last_run() {
    let mut cj = md_cronjob("Allow");
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(t("2016-05-19T10:00:00Z"))),
        ..Default::default()
    });
    let trace = run(&cj, &[], week_after_the_hour(), &Fake::default());
    assert_eq!(trace.created.len(), 1);
    assert_eq!(trace.reasons(), vec!["TooManyMissedTimes", "SuccessfulCreate"]);
    assert_eq!(
        trace.events[0].message,
        "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
    );
    assert_eq!(last_schedule(trace.last_update()), Some(week_after_the_hour()));
    assert_eq!(trace.outcome(), &Outcome::RequeueAfter(hours(1) + delta()));
}

#[test]
fn upstream_md_controller_case_6_tz_in_schedule_and_time_zone() {
    let mut cj = md_cronjob("Allow");
    cj.spec.schedule = "TZ=UTC 0 * * * ?".into();
    cj.spec.time_zone = Some(NEW_YORK.into());
    let trace = run(&cj, &[], just_after_the_hour(), &Fake::default());
    assert_eq!(trace.created.len(), 1);
    assert_eq!(trace.reasons(), vec!["UnsupportedSchedule", "SuccessfulCreate"]);
    assert_eq!(
        trace.events[0].message,
        "CRON_TZ or TZ used in schedule \"TZ=UTC 0 * * * ?\" is not officially supported, see \
         https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"
    );
    // The annotation is in spec.timeZone, not in the schedule's TZ.
    let annotations = trace.created[0].metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get(CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION).map(String::as_str),
        Some("2016-05-19T06:00:00-04:00")
    );
}

#[test]
fn upstream_md_controller_case_7_bad_schedule_or_time_zone() {
    let mut cj = md_cronjob("Allow");
    cj.spec.schedule = ERROR_SCHEDULE.into();
    let trace = run(&cj, &[], just_after_the_hour(), &Fake::default());
    assert_eq!(trace.outcome(), &Outcome::Done);
    assert_eq!(trace.reasons(), vec!["UnparseableSchedule"]);
    assert_eq!(
        trace.events[0].message,
        "unparseable schedule: \"obvious error schedule\" : expected exactly 5 fields, found 3: [obvious error schedule]"
    );

    let mut cj = md_cronjob("Allow");
    cj.spec.time_zone = Some(ERROR_TIME_ZONE.into());
    let trace = run(&cj, &[], just_after_the_hour(), &Fake::default());
    assert_eq!(trace.outcome(), &Outcome::Done);
    assert_eq!(trace.reasons(), vec!["UnknownTimeZone"]);
    assert_eq!(trace.events[0].message, "invalid timeZone: \"bad timezone\": unknown time zone bad timezone");

    // A schedule that parses but has no two times a second apart: InvalidSchedule.
    let mut cj = md_cronjob("Allow");
    cj.spec.schedule = "59 23 31 2 *".into();
    let trace = run(&cj, &[], just_after_the_hour(), &Fake::default());
    assert_eq!(trace.outcome(), &Outcome::Done);
    assert_eq!(trace.reasons(), vec!["InvalidSchedule"]);
    assert_eq!(
        trace.events[0].message,
        "invalid schedule: 59 23 31 2 * : time difference between two schedules is less than 1 second"
    );
}

// ---------------------------------------------------------------------------------------------
// TestControllerV2CleanupFinishedJobs and history

fn finished_job(name: &str, start: Option<Timestamp>, failed: bool) -> Job {
    let mut job = Job {
        metadata: ObjectMeta {
            namespace: Some("foo-ns".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            owner_references: Some(vec![OwnerReference {
                name: "fooer".into(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: None,
        status: Some(JobStatus { start_time: start.map(Time), ..Default::default() }),
    };
    if failed {
        fail(&mut job)
    } else {
        complete(&mut job, None)
    }
    job
}

fn fooer(successful_limit: Option<i32>, failed_limit: Option<i32>) -> CronJob {
    CronJob {
        metadata: ObjectMeta {
            namespace: Some("foo-ns".into()),
            name: Some("fooer".into()),
            ..Default::default()
        },
        spec: CronJobSpec {
            schedule: ON_THE_HOUR.into(),
            successful_jobs_history_limit: successful_limit,
            failed_jobs_history_limit: failed_limit,
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta { labels: labels(&[("key", "value")]), ..Default::default() }),
                spec: None,
            },
            ..Default::default()
        },
        status: Some(CronJobStatus {
            last_schedule_time: Some(Time(just_after_the_prior_hour())),
            ..Default::default()
        }),
    }
}

#[test]
fn upstream_cleanup_finished_jobs_despite_a_failing_create() {
    // "jobs are still deleted when a cronjob can't create jobs due to jobs quota being reached
    // (avoiding a deadlock)"
    let cj = fooer(Some(1), None);
    let jobs = [
        finished_job("finished-job-started-hour-ago", Some(just_before_the_prior_hour()), false),
        finished_job("finished-job-started-minute-ago", Some(just_before_the_hour()), false),
    ];
    let api = Fake {
        create_err: Some(ApiError::other("Internal error occurred: quota for # of jobs reached")),
        ..Fake::default()
    };
    let trace = run(&cj, &jobs, just_after_the_hour(), &api);
    assert_eq!(trace.deleted, vec![("finished-job-started-hour-ago".to_string(), DeleteReason::History)]);
    assert_eq!(trace.reasons(), vec!["SuccessfulDelete", "FailedCreate"]);
    assert_eq!(
        trace.events[1].message,
        "Error creating job: Internal error occurred: quota for # of jobs reached"
    );
    assert!(matches!(trace.outcome(), Outcome::Retry(SyncError::CreateJob(_))));
    // The status is written before the error is returned.
    assert_eq!(trace.updates.len(), 1);
}

#[test]
fn upstream_cleanup_jobs_not_deleted_under_the_limit() {
    // "jobs are not deleted if history limit not reached"
    let cj = fooer(Some(2), None);
    let jobs = [finished_job("finished-job-started-hour-ago", Some(just_before_the_prior_hour()), false)];
    let trace = run(&cj, &jobs, just_before_the_hour(), &Fake::default());
    assert!(trace.deleted.is_empty());
}

#[test]
fn history_cleanup_order_and_failures() {
    let cj = fooer(Some(1), Some(0));
    let early = Some(t("2016-05-19T08:00:00Z"));
    let late = Some(t("2016-05-19T09:00:00Z"));
    let jobs = [
        finished_job("s-late", late, false),
        finished_job("s-nil", None, false),
        finished_job("s-early-b", early, false),
        finished_job("s-early-a", early, false),
        finished_job("f-x", None, true),
        finished_job("f-a", late, true),
    ];
    // Successful: early-a, early-b, late, nil → keep the newest 1 (nil sorts last).
    // Failed: keep 0 → a (has a start time), then x.
    let refs: Vec<&Job> = jobs.iter().collect();
    let names =
        |v: Vec<&Job>| v.iter().map(|j| j.metadata.name.clone().unwrap_or_default()).collect::<Vec<_>>();
    assert_eq!(
        names(finished_jobs_to_delete(&cj, &refs)),
        vec!["s-early-a", "s-early-b", "s-late", "f-a", "f-x"]
    );
    // A failed delete records FailedDelete and the cleanup carries on.
    let mut cj_listed = cj.clone();
    set_active(&mut cj_listed, vec![job_ref(&jobs[2]), job_ref(&jobs[3])]);
    let api = Fake {
        delete: Box::new(|name| if name == "s-early-b" { Err(ApiError::other("boom")) } else { Ok(()) }),
        ..Fake::default()
    };
    let trace = run(&cj_listed, &jobs, just_before_the_hour(), &api);
    assert_eq!(
        trace.deleted.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        vec!["s-early-a", "s-late", "f-a", "f-x"]
    );
    assert_eq!(trace.events[1], events::failed_delete(&ApiError::other("boom")));
    assert_eq!(trace.events[1].message, "Deleted job: boom");
    assert_eq!(trace.events[1].type_, EventType::Warning);
    // The deleted listed Job leaves status.active; the one whose delete failed is a finished Job
    // still listed, so the reconcile then reports it (SawCompletedJob) and drops it too.
    let reasons = trace.reasons();
    assert_eq!(reasons.iter().filter(|r| **r == "SuccessfulDelete").count(), 4);
    assert_eq!(reasons.iter().filter(|r| **r == "SawCompletedJob").count(), 1);
    assert!(active_refs(trace.last_update()).is_empty());

    // Negative limits (rejected by validation) delete everything of the kind, without panicking.
    let cj = fooer(Some(-3), None);
    assert_eq!(finished_jobs_to_delete(&cj, &refs).len(), 4);
    // No limits at all: nothing.
    assert!(finished_jobs_to_delete(&fooer(None, None), &refs).is_empty());
}

// TestByJobStartTime, every row.
#[test]
fn upstream_by_job_start_time() {
    let now = t("2018-01-01T02:03:04.000000005Z");
    let later = t("2019-01-01T02:03:04.000000005Z");
    let job = |name: &str, start: Option<Timestamp>| Job {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        status: Some(JobStatus { start_time: start.map(Time), ..Default::default() }),
        spec: None,
    };
    let (a_nil, b_nil) = (job("a", None), job("b", None));
    let (a_set, b_set, a_set_later) = (job("a", Some(now)), job("b", Some(now)), job("a", Some(later)));
    let cases: [(&str, Vec<&Job>, Vec<&Job>); 5] = [
        ("both have nil start times", vec![&b_nil, &a_nil], vec![&a_nil, &b_nil]),
        ("only the first has a nil start time", vec![&a_nil, &b_set], vec![&b_set, &a_nil]),
        ("only the second has a nil start time", vec![&a_set, &b_nil], vec![&a_set, &b_nil]),
        ("both have non-nil, equal start time", vec![&b_set, &a_set], vec![&a_set, &b_set]),
        ("both have non-nil, different start time", vec![&a_set_later, &b_set], vec![&b_set, &a_set_later]),
    ];
    for (name, mut input, expected) in cases {
        sort_by_job_start_time(&mut input);
        assert_eq!(input, expected, "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// TestGetJobFromTemplate2, getJobName

#[test]
fn upstream_get_job_from_template2() {
    let scheduled = top_of_the_hour();
    let mut cj = CronJob {
        metadata: ObjectMeta {
            name: Some("mycronjob".into()),
            namespace: Some("snazzycats".into()),
            uid: Some("1a2b3c".into()),
            ..Default::default()
        },
        spec: CronJobSpec {
            schedule: "* * * * ?".into(),
            concurrency_policy: Some("Allow".into()),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    creation_timestamp: Some(Time(scheduled)),
                    labels: labels(&[("a", "b")]),
                    ..Default::default()
                }),
                spec: Some(JobSpec {
                    active_deadline_seconds: Some(1),
                    manual_selector: Some(false),
                    template: job_spec().template,
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        status: None,
    };
    // (name, timeZone, template annotations, expected scheduled-timestamp annotation, annotations)
    type Case<'a> = (&'a str, Option<&'a str>, &'a [(&'a str, &'a str)], &'a str, usize);
    let cases: [Case; 3] = [
        ("UTC timezone and one annotation", Some("UTC"), &[("x", "y")], "2016-05-19T10:00:00Z", 2),
        ("nil timezone and one annotation", None, &[("x", "y")], "2016-05-19T10:00:00Z", 2),
        (
            "correct timezone and multiple annotation",
            Some("Europe/Rome"),
            &[("x", "y"), ("z", "x")],
            "2016-05-19T12:00:00+02:00",
            3,
        ),
    ];
    for (name, tz, annotations, stamp, count) in cases {
        cj.spec.time_zone = tz.map(str::to_string);
        if let Some(meta) = cj.spec.job_template.metadata.as_mut() {
            meta.annotations = labels(annotations);
        }
        let job = job_from_template(&cj, &utc(scheduled)).expect(name);
        let meta = &job.metadata;
        assert!(meta.name.as_deref().unwrap_or_default().starts_with("mycronjob-"), "{name}");
        assert_eq!(meta.name.as_deref(), Some("mycronjob-24394200"), "{name}");
        assert_eq!(meta.labels.as_ref().map(BTreeMap::len), Some(1), "{name}");
        let got = meta.annotations.clone().unwrap_or_default();
        assert_eq!(got.len(), count, "{name}");
        assert_eq!(
            got.get(CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION).map(String::as_str),
            Some(stamp),
            "{name}"
        );
        assert_eq!(meta.creation_timestamp, Some(Time(scheduled)), "{name}");
        assert_eq!(meta.namespace, None, "{name}: the create request names the namespace");
        let spec = job.spec.as_ref().expect("spec");
        assert_eq!((spec.active_deadline_seconds, spec.manual_selector), (Some(1), Some(false)), "{name}");
        let owner = controller_of(meta).expect("controller");
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("CronJob", "1a2b3c"), "{name}");
    }
}

#[test]
fn job_names_and_timestamps() {
    let cj = cron_job();
    assert_eq!(job_name(&cj, top_of_the_hour()), "mycronjob-24394200");
    // Seconds are dropped: every time in a minute gives the same name.
    assert_eq!(job_name(&cj, plus(top_of_the_hour(), secs(59))), "mycronjob-24394200");
    // Before 1970, Unix() rounds down and the division truncates, as in Go.
    assert_eq!(job_name(&cj, t("1969-12-31T23:59:59.5Z")), "mycronjob-0");
    assert_eq!(job_name(&cj, t("1969-12-31T23:58:00Z")), "mycronjob--2");
    assert_eq!(format_rfc3339(&t("2016-05-19T10:00:00.9Z").to_zoned(TimeZone::UTC)), "2016-05-19T10:00:00Z");
    let kolkata = TimeZone::get("Asia/Kolkata").expect("tz");
    assert_eq!(format_rfc3339(&top_of_the_hour().to_zoned(kolkata)), "2016-05-19T15:30:00+05:30");
    // timeZone: Local is the controller's zone.
    let mut cj = cron_job();
    cj.spec.time_zone = Some("Local".into());
    let tokyo = TimeZone::get("Asia/Tokyo").expect("tz");
    let job = job_from_template(&cj, &top_of_the_hour().to_zoned(tokyo)).expect("job");
    let annotations = job.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get(CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION).map(String::as_str),
        Some("2016-05-19T19:00:00+09:00")
    );
    cj.spec.time_zone = Some("Mars/Olympus".into());
    assert!(job_from_template(&cj, &utc(top_of_the_hour())).is_err());
}

// ---------------------------------------------------------------------------------------------
// TestControllerV2GetJobsToBeReconciled

#[test]
fn upstream_get_jobs_to_be_reconciled() {
    let cj = CronJob {
        metadata: ObjectMeta {
            namespace: Some("foo-ns".into()),
            name: Some("fooer".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let job = |ns: &str, name: &str, owner: Option<&str>| Job {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            owner_references: owner.map(|o| {
                vec![OwnerReference { name: o.into(), controller: Some(true), ..Default::default() }]
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let names = |jobs: &[Job]| -> Vec<String> {
        jobs_to_be_reconciled(&cj, jobs).iter().map(|j| j.metadata.name.clone().unwrap_or_default()).collect()
    };
    // "test getting jobs in namespace without controller reference"
    assert!(
        names(&[job("foo-ns", "foo", None), job("foo-ns", "foo1", None), job("foo-ns", "foo2", None)])
            .is_empty()
    );
    // "test getting jobs in namespace with a controller reference"
    assert_eq!(
        names(&[
            job("foo-ns", "foo", None),
            job("foo-ns", "foo1", Some("fooer")),
            job("foo-ns", "foo2", None)
        ]),
        vec!["foo1"]
    );
    // "test getting jobs in other namespaces"
    assert!(names(&[job("bar-ns", "foo", None), job("bar-ns", "foo1", Some("fooer"))]).is_empty());
    // "test getting jobs whose labels do not match job template"
    assert_eq!(
        names(&[
            job("foo-ns", "foo-fooer-owner-ref", Some("fooer")),
            job("foo-ns", "foo-other-owner-ref", Some("another-cronjob"))
        ]),
        vec!["foo-fooer-owner-ref"]
    );
    // A non-controller owner reference does not count.
    let mut j = job("foo-ns", "not-controller", Some("fooer"));
    if let Some(refs) = j.metadata.owner_references.as_mut() {
        refs[0].controller = Some(false);
    }
    assert!(names(&[j]).is_empty());
}

// ---------------------------------------------------------------------------------------------
// TestControllerV2UpdateCronJob

#[test]
fn upstream_update_cronjob() {
    let now = utc(just_a_second_before_the_hour());
    let with = |schedule: &str, tz: Option<&str>, labels_value: &str, last: Option<Timestamp>| CronJob {
        spec: CronJobSpec {
            schedule: schedule.into(),
            time_zone: tz.map(str::to_string),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: labels(&[("a", labels_value)]),
                    annotations: labels(&[("x", "y")]),
                    ..Default::default()
                }),
                spec: Some(job_spec()),
            },
            ..Default::default()
        },
        status: last.map(|l| CronJobStatus { last_schedule_time: Some(Time(l)), ..Default::default() }),
        ..Default::default()
    };
    let last = Some(just_before_the_hour());
    let cases: [(&str, CronJob, CronJob, UpdateAction); 6] = [
        (
            "spec.template changed",
            with("", None, "b", None),
            with("", None, "foo", None),
            UpdateAction::Enqueue,
        ),
        (
            "spec.schedule changed",
            with("30 * * * *", None, "b", last),
            with("*/1 * * * *", None, "foo", last),
            UpdateAction::EnqueueAfter(secs(1) + delta()),
        ),
        (
            "spec.schedule with @every changed - cadence decrease",
            with("@every 1m", None, "b", last),
            with("@every 3m", None, "foo", last),
            UpdateAction::EnqueueAfter(mins(2) + secs(1) + delta()),
        ),
        (
            "spec.schedule with @every changed - cadence increase",
            with("@every 3m", None, "b", last),
            with("@every 1m", None, "foo", last),
            UpdateAction::EnqueueAfter(secs(1) + delta()),
        ),
        (
            "spec.timeZone not changed",
            with("", Some(NEW_YORK), "b", None),
            with("", Some(NEW_YORK), "foo", None),
            UpdateAction::Enqueue,
        ),
        // The empty schedule does not parse: no enqueue (upstream's delay stays 0).
        (
            "spec.timeZone changed",
            with("", Some(NEW_YORK), "b", None),
            with("", None, "foo", None),
            UpdateAction::Unparseable(events::unparseable_cronjob_schedule("")),
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(on_cronjob_update(&old, &new, &now), want, "{name}");
    }
    let bad = on_cronjob_update(&with("0 * * * *", None, "b", last), &with("0 * *", None, "b", last), &now);
    let UpdateAction::Unparseable(event) = bad else { panic!("{bad:?}") };
    assert_eq!(
        (event.reason, event.message.as_str()),
        ("UnParseableCronJobSchedule", "unparseable schedule for cronjob: 0 * *")
    );
    // A timeZone that does not load is ignored here (the sync warns): the plain schedule is used.
    let got = on_cronjob_update(
        &with("0 * * * *", None, "b", last),
        &with("0 * * * *", Some("Nowhere/Else"), "b", last),
        &now,
    );
    assert_eq!(got, UpdateAction::EnqueueAfter(secs(1) + delta()));
}

// ---------------------------------------------------------------------------------------------
// TestControllerV2JobAlreadyExists…

fn already_exists_setup(owned: bool) -> (CronJob, Fake) {
    let mut cj = cron_job();
    cj.spec.concurrency_policy = Some("Forbid".into());
    cj.spec.schedule = EVERY_HOUR.into();
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(just_before_the_prior_hour())),
        active: Some(vec![]),
        ..Default::default()
    });
    let mut job = template_job(&cj, just_after_the_prior_hour(), "1234");
    if !owned {
        job.metadata.owner_references = Some(vec![]);
    }
    let mut api = Fake::job_control(Some(job), None);
    api.create_err = already_exists();
    (cj, api)
}

#[test]
fn upstream_job_already_exists_but_not_in_active_status() {
    let (cj, api) = already_exists_setup(true);
    let trace = run(&cj, &[], just_before_the_hour(), &api);
    assert_eq!(trace.got_jobs, vec![("mycronjob-24394199".to_string(), GetJobReason::AlreadyExists)]);
    assert_eq!(trace.updates.len(), 1);
    let active = active_refs(trace.last_update());
    assert_eq!(active.len(), 1);
    let expected = job_ref(&template_job(&cj, just_after_the_prior_hour(), "1234"));
    assert_eq!(active[0], expected);
    // Adopted, not created: no event, no skew observation.
    assert!(trace.events.is_empty() && trace.skews.is_empty());
    assert_eq!(last_schedule(trace.last_update()), Some(just_before_the_hour()));
}

#[test]
fn upstream_job_already_exists_but_different_owner() {
    let (cj, api) = already_exists_setup(false);
    let trace = run(&cj, &[], just_before_the_hour(), &api);
    assert!(trace.updates.is_empty());
    assert_eq!(trace.outcome(), &Outcome::Done);
}

#[test]
fn already_exists_and_already_listed_is_left_alone() {
    let (mut cj, api) = already_exists_setup(true);
    let job = template_job(&cj, just_after_the_prior_hour(), "1234");
    set_active(&mut cj, vec![job_ref(&job)]);
    cj.spec.concurrency_policy = Some("Allow".into());
    let trace = run(&cj, std::slice::from_ref(&job), just_before_the_hour(), &api);
    assert!(trace.updates.is_empty());
    assert_eq!(trace.outcome(), &Outcome::Done);
}

// ---------------------------------------------------------------------------------------------
// The active-list reconcile

fn running_job(cj: &CronJob, at: Timestamp, uid: &str) -> Job {
    template_job(cj, at, uid)
}

#[test]
fn saw_completed_job_and_last_successful_time() {
    let mut cj = md_cronjob("Allow");
    let done = {
        let mut j = running_job(&cj, t("2016-05-19T09:00:00Z"), "done");
        complete(&mut j, Some(t("2016-05-19T09:30:00Z")));
        j
    };
    let failed = {
        let mut j = running_job(&cj, t("2016-05-19T08:00:00Z"), "failed");
        fail(&mut j);
        j
    };
    // Not listed, succeeded later: still folds into lastSuccessfulTime.
    let unlisted = {
        let mut j = running_job(&cj, t("2016-05-19T07:00:00Z"), "unlisted");
        complete(&mut j, Some(t("2016-05-19T09:45:00Z")));
        j
    };
    // Listed, succeeded earlier: does not lower it.
    let older = {
        let mut j = running_job(&cj, t("2016-05-19T06:00:00Z"), "older");
        complete(&mut j, Some(t("2016-05-19T06:30:00Z")));
        j
    };
    set_active(&mut cj, vec![job_ref(&done), job_ref(&failed), job_ref(&older)]);
    let trace = run(&cj, &[done, failed, unlisted, older], just_before_the_hour(), &Fake::default());
    assert_eq!(
        trace.events.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(),
        vec![
            "Saw completed job: mycronjob-24394140, condition: Complete",
            "Saw completed job: mycronjob-24394080, condition: Failed",
            "Saw completed job: mycronjob-24393960, condition: Complete",
        ]
    );
    assert!(trace.events.iter().all(|e| e.type_ == EventType::Normal && e.reason == "SawCompletedJob"));
    let update = trace.last_update();
    assert!(active_refs(update).is_empty());
    assert_eq!(last_successful(update), Some(t("2016-05-19T09:45:00Z")));
    assert_eq!(trace.outcome(), &Outcome::RequeueAfter(mins(1) + delta()));
}

#[test]
fn missing_job_is_dropped_only_on_not_found() {
    let mut cj = md_cronjob("Forbid");
    let gone = running_job(&cj, t("2016-05-19T09:00:00Z"), "gone");
    let slow = running_job(&cj, t("2016-05-19T08:00:00Z"), "slow");
    set_active(&mut cj, vec![job_ref(&gone), job_ref(&slow)]);
    let slow_for_api = slow.clone();
    let api = Fake {
        get_job: Box::new(move |_, name| {
            if name == "mycronjob-24394080" {
                Ok(slow_for_api.clone())
            } else {
                Err(ApiError::not_found("not found"))
            }
        }),
        ..Fake::default()
    };
    let trace = run(&cj, &[], just_after_the_hour(), &api);
    assert_eq!(
        trace.got_jobs,
        vec![
            ("mycronjob-24394140".to_string(), GetJobReason::Missing),
            ("mycronjob-24394080".to_string(), GetJobReason::Missing)
        ]
    );
    assert_eq!(trace.reasons(), vec!["MissingJob", "JobAlreadyActive"]);
    assert_eq!(trace.events[0].message, "Active job went missing: mycronjob-24394140");
    let active = active_refs(trace.last_update());
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].uid.as_deref(), Some("slow"));

    // Any other GET error ends the sync (after writing what changed so far).
    let api = Fake { get_job: Box::new(|_, _| Err(ApiError::other("etcd timeout"))), ..Fake::default() };
    let trace = run(&cj, &[], just_after_the_hour(), &api);
    assert_eq!(trace.outcome(), &Outcome::Retry(SyncError::GetJob(ApiError::other("etcd timeout"))));
    assert!(trace.updates.is_empty() && trace.created.is_empty());
}

#[test]
fn unexpected_job_warns_and_get_cronjob_errors_retry() {
    let cj = md_cronjob("Allow");
    let stray = running_job(&cj, t("2016-05-19T09:00:00Z"), "stray");
    let api = Fake { get_cronjob: Ok(cj.clone()), ..Fake::default() };
    let trace = run(&cj, std::slice::from_ref(&stray), just_before_the_hour(), &api);
    assert_eq!(trace.got_cronjob, 1);
    assert_eq!(trace.events, vec![events::unexpected_job("mycronjob-24394140")]);
    assert_eq!(
        trace.events[0].message,
        "Saw a job that the controller did not create or forgot: mycronjob-24394140"
    );
    assert!(trace.updates.is_empty());

    let api = Fake { get_cronjob: Err(ApiError::other("connection refused")), ..Fake::default() };
    let trace = run(&cj, std::slice::from_ref(&stray), just_after_the_hour(), &api);
    assert_eq!(
        trace.outcome(),
        &Outcome::Retry(SyncError::GetCronJob(ApiError::other("connection refused")))
    );
    assert!(trace.created.is_empty());
}

/// upstream swaps syncCronJob's `cronJob` to the fresh object but writes `sync`'s copy: the Job
/// created after the swap is missing from the status written (the next sync adopts it after
/// AlreadyExists).
#[test]
fn fresh_cronjob_swap_keeps_upstreams_written_copy() {
    let mut cj = md_cronjob("Allow");
    cj.metadata.resource_version = Some("cached".into());
    let running = running_job(&cj, t("2016-05-19T09:00:00Z"), "running");
    let finished = {
        let mut j = running_job(&cj, t("2016-05-19T08:00:00Z"), "finished");
        complete(&mut j, Some(t("2016-05-19T08:10:00Z")));
        j
    };
    let mut fresh = cj.clone();
    fresh.metadata.resource_version = Some("fresh".into());
    set_active(&mut fresh, vec![job_ref(&running)]);
    let api = Fake { get_cronjob: Ok(fresh), ..Fake::default() };
    // The finished Job comes first: its lastSuccessfulTime lands in the copy before the swap.
    let trace = run(&cj, &[finished, running], just_after_the_hour(), &api);
    assert_eq!(trace.created.len(), 1);
    let written = trace.last_update();
    assert_eq!(written.metadata.resource_version.as_deref(), Some("cached"));
    assert_eq!(last_successful(written), Some(t("2016-05-19T08:10:00Z")));
    assert!(active_refs(written).is_empty());
    assert_eq!(last_schedule(written), None);
}

#[test]
fn deleting_cronjob_only_updates_status() {
    let mut cj = md_cronjob("Allow");
    cj.metadata.deletion_timestamp = Some(Time(just_before_the_hour()));
    let mut done = running_job(&cj, t("2016-05-19T09:00:00Z"), "done");
    complete(&mut done, Some(t("2016-05-19T09:10:00Z")));
    set_active(&mut cj, vec![job_ref(&done)]);
    let trace = run(&cj, &[done], just_after_the_hour(), &Fake::default());
    assert!(trace.created.is_empty());
    assert_eq!(trace.reasons(), vec!["SawCompletedJob"]);
    assert_eq!(trace.updates.len(), 1);
    assert_eq!(trace.outcome(), &Outcome::Done);
}

#[test]
fn replace_failures() {
    let (cj, job) = md_still_active("Replace");
    let api = Fake::job_control(Some(job.clone()), None);
    let api = Fake { delete: Box::new(|_| Err(ApiError::other("forbidden"))), ..api };
    let trace = run(&cj, std::slice::from_ref(&job), just_after_the_hour(), &api);
    assert_eq!(trace.reasons(), vec!["FailedDelete"]);
    assert_eq!(
        trace.outcome(),
        &Outcome::Retry(SyncError::CouldNotReplace {
            namespace: "snazzycats".into(),
            name: "mycronjob-24394140".into()
        })
    );
    if let Outcome::Retry(e) = trace.outcome() {
        assert_eq!(e.to_string(), "could not replace job snazzycats/mycronjob-24394140");
    }
    assert!(trace.created.is_empty());

    let api = Fake::job_control(Some(job.clone()), Some(ApiError::not_found("jobs.batch \"x\" not found")));
    let trace = run(&cj, std::slice::from_ref(&job), just_after_the_hour(), &api);
    assert_eq!(trace.events, vec![events::failed_get(&ApiError::not_found("jobs.batch \"x\" not found"))]);
    assert_eq!(trace.events[0].message, "Get job: jobs.batch \"x\" not found");
}

#[test]
fn creation_skew_is_the_created_jobs_age_at_creation() {
    let api = Fake { created_after: millis(1500), ..Fake::default() };
    let trace = run(&md_cronjob("Allow"), &[], just_after_the_hour(), &api);
    assert_eq!(trace.skews, vec![1.5]);
    assert_eq!(CREATION_SKEW_METRIC, "cronjob_controller_cronjob_job_creation_skew_duration_seconds");
}

#[test]
fn failed_status_update_retries() {
    let api = Fake { update_err: Some(ApiError::other("conflict")), ..Fake::default() };
    let trace = run(&md_cronjob("Allow"), &[], just_after_the_hour(), &api);
    assert_eq!(trace.created.len(), 1);
    assert_eq!(trace.outcome(), &Outcome::Retry(SyncError::UpdateStatus(ApiError::other("conflict"))));
}

#[test]
fn event_texts() {
    assert_eq!(
        events::miss_schedule(top_of_the_hour()).message,
        "Missed scheduled time to start a job: Thu, 19 May 2016 10:00:00 +0000"
    );
    assert_eq!(events::miss_schedule(top_of_the_hour()).type_, EventType::Warning);
    assert_eq!(events::go_quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
    assert_eq!(events::failed_create(&ApiError::other("x")).message, "Error creating job: x");
    assert_eq!(events::successful_delete("j").message, "Deleted job j");
    assert_eq!(events::unsupported_schedule("TZ=UTC * * * * *").reason, "UnsupportedSchedule");
}

#[test]
fn job_event_handlers_wake_the_controller() {
    let cj = cron_job();
    let mut job = template_job(&cj, top_of_the_hour(), "j");
    job.metadata.resource_version = Some("1".into());
    let key =
        ControllerKey { namespace: "snazzycats".into(), name: "mycronjob".into(), uid: "1a2b3c".into() };
    assert_eq!(cronjob_for_job_event(&job), Some(key.clone()));
    assert!(cronjobs_for_job_update(&job, &job).is_empty(), "resync");
    let mut moved = job.clone();
    moved.metadata.resource_version = Some("2".into());
    if let Some(refs) = moved.metadata.owner_references.as_mut() {
        refs[0].name = "other".into();
        refs[0].uid = "o".into();
    }
    let other = ControllerKey { name: "other".into(), uid: "o".into(), ..key.clone() };
    assert_eq!(cronjobs_for_job_update(&job, &moved), vec![key, other]);
    let mut not_ours = job.clone();
    if let Some(refs) = not_ours.metadata.owner_references.as_mut() {
        refs[0].kind = "Deployment".into();
    }
    assert_eq!(cronjob_for_job_event(&not_ours), None);
}

/// Garbage from the API never panics and always ends.
#[test]
fn garbage_input_does_not_panic() {
    let empty_ref = ObjectReference::default();
    let schedules =
        ["", "* * * * *", "@every 1s", "TZ=Nowhere * * * * *", "59 23 31 2 *", "@every -1s", "@yearly"];
    let mut cronjobs = vec![CronJob::default()];
    for (i, s) in schedules.iter().enumerate() {
        let mut cj = CronJob::default();
        cj.spec.schedule = s.to_string();
        cj.spec.starting_deadline_seconds =
            [None, Some(-5), Some(i64::MAX), Some(i64::MIN), Some(9_300_000_000)][i % 5];
        cj.spec.successful_jobs_history_limit = Some(i32::MIN);
        cj.spec.failed_jobs_history_limit = Some(-1);
        cj.spec.concurrency_policy = Some(["Replace", "Forbid", "", "allow"][i % 4].into());
        cj.spec.time_zone = [None, Some("Local".into()), Some("".into())][i % 3].clone();
        cj.metadata.creation_timestamp =
            [None, Some(Time(Timestamp::MIN)), Some(Time(Timestamp::MAX))][i % 3].clone();
        cj.status = Some(CronJobStatus {
            active: Some(vec![empty_ref.clone(), empty_ref.clone()]),
            // (Far-off times make the schedule module's scan slow, not wrong: kept moderate here.)
            last_schedule_time: [None, Some(Time(Timestamp::UNIX_EPOCH))][i % 2].clone(),
            last_successful_time: Some(Time(Timestamp::MIN)),
        });
        cronjobs.push(cj);
    }
    let mut weird = Job::default();
    weird.metadata.owner_references =
        Some(vec![OwnerReference { controller: Some(true), ..Default::default() }]);
    let mut finished = weird.clone();
    complete(&mut finished, Some(Timestamp::MAX));
    fail(&mut finished);
    let jobs = [Job::default(), weird, finished];
    // (Spans of thousands of years make the schedule module's missed-times scan take seconds; the
    // core's own arithmetic is covered by the extremes that remain.)
    let nows = [Timestamp::MIN, Timestamp::UNIX_EPOCH, top_of_the_hour()];
    let apis = [
        Fake::default(),
        Fake::job_control(Some(Job::default()), None),
        Fake {
            get_cronjob: Ok(CronJob::default()),
            create_err: already_exists(),
            ..Fake::job_control(Some(Job::default()), None)
        },
        Fake { create_err: Some(ApiError::new(ApiErrorKind::NotFound, "ns gone")), ..Fake::default() },
    ];
    for cj in &cronjobs {
        for now in nows {
            for api in &apis {
                let trace = run(cj, &jobs, now, api);
                assert!(trace.outcome.is_some());
                let _ = on_cronjob_update(cj, &CronJob::default(), &utc(now));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Beyond upstream (issue 30): catch-up, trigger-now, next-schedule-time, missed/Forbid signals

mod beyond;
