//! upstream `ControllerV2.sync` → `cleanupFinishedJobs` → `syncCronJob` → `UpdateStatus`, as a
//! resumable state machine: it runs until it needs an API answer, hands the request out in a
//! [`Step`], and continues from the `answer` method of that request.
//!
//! Two quirks of upstream are kept on purpose, because users see their effects:
//!
//! - When the UnexpectedJob check finds the Job in the freshly read CronJob's `status.active`,
//!   syncCronJob carries on with that fresh object (`cronJob = cjCopy`), but `sync` still writes
//!   its own copy: the status update holds the changes made before the swap only.
//! - Deleting history Jobs removes them from `status.active`, but the same Job list (including
//!   the deleted Jobs) is then reconciled.

use std::collections::HashSet;

use jiff::{SignedDuration, Timestamp, Zoned};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;

use super::active::{
    active_refs, delete_from_active_list, fold_last_successful_time, in_active_list, in_active_list_by_name,
    job_ref, push_active, set_last_schedule_time,
};
use super::beyond;
use super::events;
use super::history;
use super::job_template::{job_from_template, job_name};
use super::jobs::{JobView, is_controlled_by, jobs_to_be_reconciled};
use super::plan::{
    ApiError, ApiErrorKind, CreateJob, DeleteJob, DeleteReason, Effect, Event, GetCronJob, GetJob,
    GetJobReason, MissedReason, Next, Outcome, Step, SyncError, TriggerResult, UpdateStatus,
};
use crate::cronjob::schedule::times::{CronJobTimes, next_schedule_time, next_schedule_time_duration};
use crate::cronjob::schedule::{Schedule, format_schedule};

const NANOS_PER_SECOND: i64 = 1_000_000_000;
/// Go's zero `time.Time` (0001-01-01T00:00:00Z): an unset `creationTimestamp`.
const GO_ZERO_SECONDS: i64 = -62_135_596_800;

/// The CronJob fields the schedule arithmetic reads (an unset `creationTimestamp` is Go's zero
/// time, as upstream reads it).
pub fn cronjob_times(cronjob: &CronJob) -> CronJobTimes {
    CronJobTimes {
        creation: cronjob
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .unwrap_or_else(|| Timestamp::from_second(GO_ZERO_SECONDS).unwrap_or(Timestamp::MIN)),
        last_schedule: cronjob.status.as_ref().and_then(|s| s.last_schedule_time.as_ref()).map(|t| t.0),
        starting_deadline_seconds: cronjob.spec.starting_deadline_seconds,
    }
}

/// Start a sync of `cronjob` (as the cache shows it) at `now` (in the controller's local zone).
///
/// `jobs` are the cached Jobs of the CronJob's namespace; only those whose controller reference
/// names the CronJob are used ([`super::jobs_to_be_reconciled`]), in the order given.
///
/// The steps come in upstream's order:
///
/// 1. history cleanup: [`Next::DeleteJob`] ([`DeleteReason::History`]) per Job over a limit;
/// 2. active-list reconcile: [`Next::GetCronJob`] per unfinished Job missing from `status.active`
///    (Warning `UnexpectedJob` unless the fresh object lists it), Normal `SawCompletedJob` for a
///    listed finished Job, `lastSuccessfulTime`; then [`Next::GetJob`] ([`GetJobReason::Missing`])
///    per listed Job the cache lacks (NotFound → Normal `MissingJob`);
/// 3. the gates: deleting, timeZone, suspend, schedule, missed deadline, already processed, Forbid;
/// 4. Replace: [`Next::GetJob`] then [`Next::DeleteJob`] per active Job;
/// 5. [`Next::CreateJob`] (AlreadyExists → [`Next::GetJob`] and adoption);
/// 6. [`Next::UpdateStatus`] if anything changed, then [`Next::Done`].
pub fn sync<'a>(cronjob: &CronJob, jobs: impl IntoIterator<Item = &'a Job>, now: &Zoned) -> Step {
    sync_with(cronjob, jobs, now, SyncOptions::default())
}

/// What a sync does beyond upstream for every CronJob (the per-CronJob opt-ins,
/// `batchfleet.io/catch-up` and `batchfleet.io/trigger`, need no option).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncOptions {
    /// Keep `batchfleet.io/next-schedule-time` current, merged into the status write when the
    /// sync makes one, else written alone (only when its value changes), and report it as
    /// [`Effect::NextScheduleTime`].
    pub next_schedule_time: bool,
}

/// [`sync`] with the options beyond upstream.
pub fn sync_with<'a>(
    cronjob: &CronJob,
    jobs: impl IntoIterator<Item = &'a Job>,
    now: &Zoned,
    options: SyncOptions,
) -> Step {
    let jobs: Vec<JobView> = jobs_to_be_reconciled(cronjob, jobs).into_iter().map(JobView::of).collect();
    let children = jobs.iter().map(|j| j.uid.clone()).collect();
    let pending = history::to_delete(cronjob, &jobs);
    let state = Box::new(SyncState {
        now: now.clone(),
        copy: cronjob.clone(),
        fresh: None,
        jobs,
        children,
        update_status: false,
        effects: Vec::new(),
        options,
    });
    state.run(Phase::History { pending, next: 0 })
}

/// Everything a sync carries between API calls.
#[derive(Debug)]
pub(crate) struct SyncState {
    now: Zoned,
    /// upstream `sync`'s `cronJobCopy`: cleanup and syncCronJob change it; it is what is written.
    copy: CronJob,
    /// The freshly read CronJob syncCronJob switched to, if it did.
    fresh: Option<CronJob>,
    jobs: Vec<JobView>,
    /// UIDs of the controlled Jobs (upstream `childrenJobs`).
    children: HashSet<String>,
    /// upstream `updateStatusAfterCleanup || updateStatusAfterSync`.
    update_status: bool,
    effects: Vec<Effect>,
    options: SyncOptions,
}

/// Where a sync resumes after a DELETE.
#[derive(Debug)]
pub(crate) enum DeleteResume {
    History { pending: Vec<usize>, next: usize },
    Replace { refs: Vec<ObjectReference>, next: usize, create: Box<CreateCtx>, job: JobId },
}

/// Where a sync resumes after a GET of the CronJob: the index of the unexpected Job.
#[derive(Debug)]
pub(crate) struct GetCronJobResume {
    next: usize,
}

/// Where a sync resumes after a GET of a Job.
#[derive(Debug)]
pub(crate) enum GetJobResume {
    Missing { refs: Vec<ObjectReference>, next: usize },
    Replace { refs: Vec<ObjectReference>, next: usize, create: Box<CreateCtx> },
    AlreadyExists(Box<CreateCtx>),
}

/// Where a sync resumes after the create.
#[derive(Debug)]
pub(crate) struct CreateResume(Box<CreateCtx>);

/// Where a sync resumes after the status update.
#[derive(Debug)]
pub(crate) struct UpdateResume {
    requeue: Option<SignedDuration>,
    error: Option<SyncError>,
}

#[derive(Debug)]
pub(crate) struct JobId {
    namespace: String,
    name: String,
    uid: String,
}

/// The Job to create: for a due schedule time, or for a trigger.
#[derive(Debug)]
pub(crate) struct CreateCtx {
    /// The scheduled time (a trigger's: `now`).
    scheduled: Zoned,
    kind: CreateKind,
}

#[derive(Debug)]
enum CreateKind {
    Scheduled {
        schedule: Schedule,
        /// Catch-up times still to run after this one (each at a sync of its own, at once).
        catch_up_after: usize,
        /// Catch-up chose this time, one upstream would not run (an older than the most recent).
        catching_up: bool,
    },
    Trigger {
        value: String,
        replaced: bool,
    },
}

impl CreateCtx {
    fn job_name(&self, cj: &CronJob) -> String {
        match &self.kind {
            CreateKind::Scheduled { .. } => job_name(cj, self.scheduled.timestamp()),
            CreateKind::Trigger { .. } => beyond::trigger_job_name(cj, self.scheduled.timestamp()),
        }
    }
}

/// The running phases (no API answer pending).
enum Phase {
    History { pending: Vec<usize>, next: usize },
    Reconcile { next: usize },
    Missing { refs: Vec<ObjectReference>, next: usize },
    Gates,
    Replace { refs: Vec<ObjectReference>, next: usize, create: Box<CreateCtx> },
    Create(Box<CreateCtx>),
    Finish { requeue: Option<SignedDuration>, error: Option<SyncError> },
}

impl Phase {
    fn stop(error: SyncError) -> Phase {
        Phase::Finish { requeue: None, error: Some(error) }
    }
    fn done() -> Phase {
        Phase::Finish { requeue: None, error: None }
    }
    fn requeue(after: SignedDuration) -> Phase {
        Phase::Finish { requeue: Some(after), error: None }
    }
}

impl SyncState {
    /// syncCronJob's `cronJob`: the fresh object after a swap, else the copy.
    fn cj(&self) -> &CronJob {
        self.fresh.as_ref().unwrap_or(&self.copy)
    }

    fn cj_mut(&mut self) -> &mut CronJob {
        match &mut self.fresh {
            Some(fresh) => fresh,
            None => &mut self.copy,
        }
    }

    fn event(&mut self, e: Event) {
        self.effects.push(Effect::Event(e));
    }

    fn namespace(&self) -> String {
        self.cj().metadata.namespace.clone().unwrap_or_default()
    }

    /// Hand out the effects so far and the next request.
    fn step(mut self: Box<Self>, next: impl FnOnce(Box<Self>) -> Next) -> Step {
        let effects = std::mem::take(&mut self.effects);
        Step { effects, next: next(self) }
    }

    fn requeue_after(&self, schedule: &Schedule) -> SignedDuration {
        next_schedule_time_duration(schedule, &cronjob_times(self.cj()), &self.now)
    }

    fn run(mut self: Box<Self>, mut phase: Phase) -> Step {
        loop {
            phase = match phase {
                Phase::History { pending, next } => {
                    let Some(job) = pending.get(next).and_then(|&i| self.jobs.get(i)) else {
                        phase = Phase::Reconcile { next: 0 };
                        continue;
                    };
                    let (namespace, name) = (job.namespace.clone(), job.name.clone());
                    return self.step(|state| {
                        Next::DeleteJob(DeleteJob {
                            namespace,
                            name,
                            reason: DeleteReason::History,
                            state,
                            resume: DeleteResume::History { pending, next },
                        })
                    });
                }
                Phase::Reconcile { next } => {
                    let Some(job) = self.jobs.get(next).cloned() else {
                        phase = Phase::Missing { refs: active_refs(self.cj()).to_vec(), next: 0 };
                        continue;
                    };
                    let found = in_active_list(self.cj(), &job.uid);
                    match job.finished {
                        None if !found => {
                            let (namespace, name) =
                                (self.namespace(), self.cj().metadata.name.clone().unwrap_or_default());
                            return self.step(|state| {
                                Next::GetCronJob(GetCronJob {
                                    namespace,
                                    name,
                                    state,
                                    resume: GetCronJobResume { next },
                                })
                            });
                        }
                        None => {}
                        Some(condition) => {
                            if found {
                                delete_from_active_list(self.cj_mut(), &job.uid);
                                self.event(events::saw_completed_job(&job.name, condition.as_str()));
                                self.update_status = true;
                            }
                            // A Job need not be listed: any succeeded Job counts.
                            if job.succeeded && fold_last_successful_time(self.cj_mut(), job.completion_time)
                            {
                                self.update_status = true;
                            }
                        }
                    }
                    Phase::Reconcile { next: next + 1 }
                }
                Phase::Missing { refs, next } => {
                    let Some(r) = refs.get(next) else {
                        phase = Phase::Gates;
                        continue;
                    };
                    if self.children.contains(r.uid.as_deref().unwrap_or_default()) {
                        Phase::Missing { refs, next: next + 1 }
                    } else {
                        // Ask the API server: the cache may be slow to show a new Job.
                        let namespace = r.namespace.clone().unwrap_or_default();
                        let name = r.name.clone().unwrap_or_default();
                        return self.step(|state| {
                            Next::GetJob(GetJob {
                                namespace,
                                name,
                                reason: GetJobReason::Missing,
                                state,
                                resume: GetJobResume::Missing { refs, next },
                            })
                        });
                    }
                }
                Phase::Gates => match self.trigger_gate() {
                    Some(phase) => phase,
                    None => {
                        let (effects, phase) = self.gates();
                        self.effects.extend(effects);
                        phase
                    }
                },
                Phase::Replace { refs, next, create } => {
                    let Some(r) = refs.get(next) else {
                        phase = Phase::Create(create);
                        continue;
                    };
                    let namespace = r.namespace.clone().unwrap_or_default();
                    let name = r.name.clone().unwrap_or_default();
                    return self.step(|state| {
                        Next::GetJob(GetJob {
                            namespace,
                            name,
                            reason: GetJobReason::Replace,
                            state,
                            resume: GetJobResume::Replace { refs, next, create },
                        })
                    });
                }
                Phase::Create(create) => match job_from_template(self.cj(), &create.scheduled) {
                    Err(e) => Phase::stop(SyncError::JobFromTemplate(e.reason)),
                    Ok(mut job) => {
                        if let CreateKind::Trigger { value, .. } = &create.kind {
                            job.metadata.name = Some(create.job_name(self.cj()));
                            job.metadata
                                .annotations
                                .get_or_insert_with(Default::default)
                                .insert(beyond::TRIGGERED_BY_ANNOTATION.to_string(), value.clone());
                        }
                        let namespace = self.namespace();
                        return self.step(|state| {
                            Next::CreateJob(CreateJob {
                                namespace,
                                job: Box::new(job),
                                state,
                                resume: CreateResume(create),
                            })
                        });
                    }
                },
                Phase::Finish { requeue, error } => {
                    self.keep_next_schedule_time();
                    if !self.update_status {
                        return self.step(|_| Next::Done(outcome(requeue, error)));
                    }
                    let cronjob = Box::new(std::mem::take(&mut self.copy));
                    return self.step(|state| {
                        Next::UpdateStatus(UpdateStatus {
                            cronjob,
                            state,
                            resume: UpdateResume { requeue, error },
                        })
                    });
                }
            };
        }
    }

    /// The part of syncCronJob between the active-list reconcile and Replace.
    /// The events come first, then the other effects.
    fn gates(&self) -> (Vec<Effect>, Phase) {
        let mut effects = Vec::new();
        let (events, phase) = self.schedule_gates(&mut effects);
        let mut all: Vec<Effect> = events.into_iter().map(Effect::Event).collect();
        all.extend(effects);
        (all, phase)
    }

    /// syncCronJob's gates, with the catch-up choice and the missed-run and Forbid signals added
    /// to `effects`.
    fn schedule_gates(&self, effects: &mut Vec<Effect>) -> (Vec<Event>, Phase) {
        let cj = self.cj();
        let mut events = Vec::new();
        if cj.metadata.deletion_timestamp.is_some() {
            // Being deleted: nothing but the status update.
            return (events, Phase::done());
        }
        let spec = &cj.spec;
        if let Some(tz) = spec.time_zone.as_deref()
            && let Err(e) = format_schedule(&spec.schedule, Some(tz))
        {
            events.push(events::unknown_time_zone(e.to_string()));
            return (events, Phase::done());
        }
        if spec.suspend == Some(true) {
            return (events, Phase::done());
        }
        let (formatted, unsupported) = format_schedule(&spec.schedule, spec.time_zone.as_deref())
            .unwrap_or_else(|_| (spec.schedule.clone(), spec.schedule.contains("TZ")));
        if unsupported {
            events.push(events::unsupported_schedule(&spec.schedule));
        }
        let schedule = match Schedule::parse_standard(&formatted) {
            Ok(s) => s,
            Err(e) => {
                events.push(events::unparseable_schedule(&spec.schedule, e.message()));
                return (events, Phase::done());
            }
        };
        let due = match next_schedule_time(&schedule, &cronjob_times(cj), &self.now) {
            Err(e) => {
                events.push(events::invalid_schedule(&spec.schedule, &e.to_string()));
                return (events, Phase::done());
            }
            Ok(None) => return (events, Phase::requeue(self.requeue_after(&schedule))),
            Ok(Some(due)) => due,
        };
        if due.too_many_missed {
            events.push(events::too_many_missed_times());
            effects.push(Effect::Missed { reason: MissedReason::TooMany, count: 1 });
        }
        let times = cronjob_times(cj);
        let catch_up = beyond::catch_up_limit(cj).and_then(|n| {
            let since = times.last_schedule.unwrap_or(times.creation);
            beyond::catch_up(&schedule, since, spec.starting_deadline_seconds, &self.now, n)
        });
        let (scheduled, catch_up_after, catching_up) = match catch_up {
            Some(c) => {
                let catching_up = c.run.timestamp() != due.scheduled.timestamp();
                (c.run, c.after, catching_up)
            }
            None => (due.scheduled, 0, false),
        };
        if let Some(sds) = spec.starting_deadline_seconds
            && too_late(scheduled.timestamp(), sds, self.now.timestamp())
        {
            events.push(events::miss_schedule(scheduled.timestamp()));
            return (events, Phase::requeue(self.requeue_after(&schedule)));
        }
        let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
        let last_schedule = cj.status.as_ref().and_then(|s| s.last_schedule_time.as_ref()).map(|t| t.0);
        if in_active_list_by_name(cj, namespace, &job_name(cj, scheduled.timestamp()))
            || last_schedule == Some(scheduled.timestamp())
        {
            // This scheduled time is already processed.
            return (events, Phase::requeue(self.requeue_after(&schedule)));
        }
        let policy = spec.concurrency_policy.as_deref().unwrap_or_default();
        let active = active_refs(cj);
        if policy == "Forbid" && !active.is_empty() {
            events.push(events::job_already_active());
            effects.push(Effect::ForbidBlocked {
                job: active[0].name.clone().unwrap_or_default(),
                skipped: beyond::forbid_skipped_runs(&schedule, last_schedule, &self.now),
            });
            return (events, Phase::requeue(self.requeue_after(&schedule)));
        }
        let create = Box::new(CreateCtx {
            scheduled,
            kind: CreateKind::Scheduled { schedule, catch_up_after, catching_up },
        });
        if policy == "Replace" {
            return (events, Phase::Replace { refs: active.to_vec(), next: 0, create });
        }
        (events, Phase::Create(create))
    }

    /// Add the created (or adopted) Job to `status.active`, set `lastScheduleTime` (a schedule's
    /// run) or mark the trigger handled (a trigger's), and requeue for the next time (at once
    /// while catch-up times or the schedule's due time remain).
    fn record_job(&mut self, job: &Job, create: &CreateCtx) -> Phase {
        push_active(self.cj_mut(), job_ref(job));
        self.update_status = true;
        match &create.kind {
            CreateKind::Scheduled { schedule, catch_up_after, .. } => {
                self.count_missed(schedule, create.scheduled.timestamp());
                set_last_schedule_time(self.cj_mut(), create.scheduled.timestamp());
                if *catch_up_after > 0 {
                    return Phase::requeue(SignedDuration::ZERO);
                }
                Phase::requeue(self.requeue_after(schedule))
            }
            CreateKind::Trigger { value, .. } => {
                beyond::mark_trigger_handled(&mut self.copy, value);
                Phase::requeue(SignedDuration::ZERO)
            }
        }
    }

    /// The schedule times strictly between lastScheduleTime (else creation) and `scheduled`, the
    /// new lastScheduleTime: none of them ran.
    fn count_missed(&mut self, schedule: &Schedule, scheduled: Timestamp) {
        let times = cronjob_times(self.cj());
        let zone = self.now.time_zone().clone();
        let since = times.last_schedule.unwrap_or(times.creation).to_zoned(zone.clone());
        let before = (scheduled - SignedDuration::from_nanos(1)).to_zoned(zone);
        let (_, all) = beyond::times_between(schedule, &since, &before, 0);
        let late = match times.starting_deadline_seconds {
            Some(sds) => {
                let deadline = self
                    .now
                    .timestamp()
                    .checked_sub(SignedDuration::from_secs(sds))
                    .unwrap_or(Timestamp::MIN);
                // Times at or after the deadline were still startable.
                let before_deadline = (deadline.min(scheduled) - SignedDuration::from_nanos(1))
                    .to_zoned(self.now.time_zone().clone());
                beyond::times_between(schedule, &since, &before_deadline, 0).1
            }
            None => 0,
        };
        for (reason, count) in
            [(MissedReason::StartingDeadline, late), (MissedReason::NotRun, all - late.min(all))]
        {
            if count > 0 {
                self.effects.push(Effect::Missed { reason, count });
            }
        }
    }

    /// `batchfleet.io/trigger`: a new value runs the CronJob once now under its
    /// concurrencyPolicy, before the schedule's gates (a suspended CronJob runs too, as
    /// `kubectl create job --from` would). `None`: go on to the gates.
    fn trigger_gate(&mut self) -> Option<Phase> {
        let cj = self.cj();
        if cj.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let value = beyond::pending_trigger(cj)?;
        if let Some(tz) = cj.spec.time_zone.as_deref()
            && format_schedule(&cj.spec.schedule, Some(tz)).is_err()
        {
            return None; // the gates record UnknownTimeZone; the trigger waits for a zone that loads
        }
        let policy = cj.spec.concurrency_policy.as_deref().unwrap_or_default();
        let active = active_refs(cj).to_vec();
        if policy == "Forbid" && !active.is_empty() {
            let job = active[0].name.clone().unwrap_or_default();
            self.event(events::trigger_skipped(&value, &job));
            self.effects.push(Effect::Trigger(TriggerResult::SkippedByForbid));
            beyond::mark_trigger_handled(&mut self.copy, &value);
            self.update_status = true;
            return None;
        }
        let replaced = policy == "Replace" && !active.is_empty();
        let create = Box::new(CreateCtx {
            scheduled: self.now.clone(),
            kind: CreateKind::Trigger { value, replaced },
        });
        Some(if replaced { Phase::Replace { refs: active, next: 0, create } } else { Phase::Create(create) })
    }

    /// `batchfleet.io/next-schedule-time`: set on the object the sync writes, which makes a write
    /// due only when the value changed.
    fn keep_next_schedule_time(&mut self) {
        if !self.options.next_schedule_time || self.cj().metadata.deletion_timestamp.is_some() {
            return;
        }
        let value = beyond::next_schedule_time_value(self.cj(), &self.now);
        let at = value.as_deref().and_then(|v| v.parse().ok());
        if beyond::set_next_schedule_time(&mut self.copy, value) {
            self.update_status = true;
        }
        self.effects.push(Effect::NextScheduleTime(at));
    }

    pub(super) fn after_delete(
        mut self: Box<Self>,
        resume: DeleteResume,
        result: Result<(), ApiError>,
    ) -> Step {
        let phase = match resume {
            DeleteResume::History { pending, next } => {
                if let Some(job) = pending.get(next).and_then(|&i| self.jobs.get(i)).cloned() {
                    match result {
                        Ok(()) => {
                            delete_from_active_list(self.cj_mut(), &job.uid);
                            self.event(events::successful_delete(&job.name));
                            self.update_status = true;
                        }
                        Err(e) => self.event(events::failed_delete(&e)),
                    }
                }
                Phase::History { pending, next: next + 1 }
            }
            DeleteResume::Replace { refs, next, create, job } => match result {
                Ok(()) => {
                    delete_from_active_list(self.cj_mut(), &job.uid);
                    self.event(events::successful_delete(&job.name));
                    self.update_status = true;
                    Phase::Replace { refs, next: next + 1, create }
                }
                Err(e) => {
                    self.event(events::failed_delete(&e));
                    Phase::stop(SyncError::CouldNotReplace { namespace: job.namespace, name: job.name })
                }
            },
        };
        self.run(phase)
    }

    pub(super) fn after_get_cronjob(
        mut self: Box<Self>,
        resume: GetCronJobResume,
        result: Result<CronJob, ApiError>,
    ) -> Step {
        let next = resume.next;
        let phase = match result {
            Err(e) => Phase::stop(SyncError::GetCronJob(e)),
            Ok(fresh) => {
                let (uid, name) =
                    self.jobs.get(next).map(|j| (j.uid.clone(), j.name.clone())).unwrap_or_default();
                if in_active_list(&fresh, &uid) {
                    // The cache was behind; carry on with the fresh object (upstream's swap).
                    self.fresh = Some(fresh);
                } else {
                    // Crashed between create and status update, a stale cache, or someone
                    // created a Job for us to adopt: upstream only warns.
                    self.event(events::unexpected_job(&name));
                }
                Phase::Reconcile { next: next + 1 }
            }
        };
        self.run(phase)
    }

    pub(super) fn after_get_job(
        mut self: Box<Self>,
        resume: GetJobResume,
        result: Result<Job, ApiError>,
    ) -> Step {
        let phase = match resume {
            GetJobResume::Missing { refs, next } => match result {
                Err(e) if e.is_not_found() => {
                    if let Some(r) = refs.get(next) {
                        self.event(events::missing_job(r.name.as_deref().unwrap_or_default()));
                        let uid = r.uid.clone().unwrap_or_default();
                        delete_from_active_list(self.cj_mut(), &uid);
                        self.update_status = true;
                    }
                    Phase::Missing { refs, next: next + 1 }
                }
                Err(e) => Phase::stop(SyncError::GetJob(e)),
                // Missing from the cache but not from the API server: keep it.
                Ok(_) => Phase::Missing { refs, next: next + 1 },
            },
            GetJobResume::Replace { refs, next, create } => match result {
                Err(e) => {
                    self.event(events::failed_get(&e));
                    Phase::stop(SyncError::GetJob(e))
                }
                Ok(job) => {
                    let job = JobId {
                        namespace: job.metadata.namespace.unwrap_or_default(),
                        name: job.metadata.name.unwrap_or_default(),
                        uid: job.metadata.uid.unwrap_or_default(),
                    };
                    let (namespace, name) = (job.namespace.clone(), job.name.clone());
                    return self.step(|state| {
                        Next::DeleteJob(DeleteJob {
                            namespace,
                            name,
                            reason: DeleteReason::Replace,
                            state,
                            resume: DeleteResume::Replace { refs, next, create, job },
                        })
                    });
                }
            },
            GetJobResume::AlreadyExists(create) => match result {
                Err(e) => Phase::stop(SyncError::GetJob(e)),
                // A second trigger within the minute: its Job exists already, the value is done.
                Ok(job)
                    if matches!(create.kind, CreateKind::Trigger { .. })
                        && (!is_controlled_by(&job, self.cj())
                            || in_active_list(
                                self.cj(),
                                job.metadata.uid.as_deref().unwrap_or_default(),
                            )) =>
                {
                    if let CreateKind::Trigger { value, .. } = &create.kind {
                        beyond::mark_trigger_handled(&mut self.copy, value);
                    }
                    self.update_status = true;
                    Phase::done()
                }
                // Created by someone else: assume they update the status.
                Ok(job) if !is_controlled_by(&job, self.cj()) => Phase::done(),
                Ok(job) if in_active_list(self.cj(), job.metadata.uid.as_deref().unwrap_or_default()) => {
                    Phase::done()
                }
                // Ours but not listed: an earlier status update failed. Adopt it.
                Ok(job) => self.record_job(&job, &create),
            },
        };
        self.run(phase)
    }

    pub(super) fn after_create(
        mut self: Box<Self>,
        resume: CreateResume,
        result: Result<&Job, ApiError>,
    ) -> Step {
        let create = resume.0;
        let phase = match result {
            Ok(job) => {
                let created = job.metadata.creation_timestamp.as_ref().map_or(self.now.timestamp(), |t| t.0);
                self.effects.push(Effect::CreationSkew {
                    seconds: go_seconds(go_sub(created, create.scheduled.timestamp())),
                });
                let name = job.metadata.name.as_deref().unwrap_or_default();
                self.event(events::successful_create(name));
                match &create.kind {
                    CreateKind::Scheduled { catching_up: true, catch_up_after, .. } => {
                        self.event(events::catch_up(name, create.scheduled.timestamp(), *catch_up_after));
                        self.effects.push(Effect::CaughtUp);
                    }
                    CreateKind::Scheduled { .. } => {}
                    CreateKind::Trigger { value, replaced } => {
                        self.event(events::triggered(name, value, *replaced));
                        let result = if *replaced { TriggerResult::Replaced } else { TriggerResult::Ran };
                        self.effects.push(Effect::Trigger(result));
                    }
                }
                self.record_job(job, &create)
            }
            Err(e) => match e.kind {
                // Every create fails in a terminating namespace: no event.
                ApiErrorKind::NamespaceTerminating => Phase::stop(SyncError::CreateJob(e)),
                ApiErrorKind::AlreadyExists => {
                    // Upstream (k/k#136920) reads it from the CronJob's namespace.
                    let namespace = self.namespace();
                    let name = create.job_name(self.cj());
                    return self.step(|state| {
                        Next::GetJob(GetJob {
                            namespace,
                            name,
                            reason: GetJobReason::AlreadyExists,
                            state,
                            resume: GetJobResume::AlreadyExists(create),
                        })
                    });
                }
                ApiErrorKind::NotFound | ApiErrorKind::Other => {
                    self.event(events::failed_create(&e));
                    Phase::stop(SyncError::CreateJob(e))
                }
            },
        };
        self.run(phase)
    }

    pub(super) fn after_update_status(
        self: Box<Self>,
        resume: UpdateResume,
        result: Result<(), ApiError>,
    ) -> Step {
        let outcome = match result {
            Err(e) => Outcome::Retry(SyncError::UpdateStatus(e)),
            Ok(()) => outcome(resume.requeue, resume.error),
        };
        self.step(|_| Next::Done(outcome))
    }
}

/// upstream `sync`'s return: a requeue delay wins, else the error.
fn outcome(requeue: Option<SignedDuration>, error: Option<SyncError>) -> Outcome {
    match (requeue, error) {
        (Some(after), _) => Outcome::RequeueAfter(after),
        (None, Some(e)) => Outcome::Retry(e),
        (None, None) => Outcome::Done,
    }
}

/// `scheduledTime.Add(time.Second * time.Duration(sds)).Before(now)` (Go's Duration product wraps).
fn too_late(scheduled: Timestamp, starting_deadline_seconds: i64, now: Timestamp) -> bool {
    let deadline =
        scheduled.as_nanosecond() + i128::from(NANOS_PER_SECOND.wrapping_mul(starting_deadline_seconds));
    deadline < now.as_nanosecond()
}

/// Go's `a.Sub(b)`: nanoseconds, saturating.
fn go_sub(a: Timestamp, b: Timestamp) -> i64 {
    let d = a.as_nanosecond() - b.as_nanosecond();
    i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
}

/// Go's `Duration.Seconds()`.
fn go_seconds(d: i64) -> f64 {
    (d / NANOS_PER_SECOND) as f64 + (d % NANOS_PER_SECOND) as f64 / 1e9
}
