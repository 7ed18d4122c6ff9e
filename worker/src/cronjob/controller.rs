//! The CronJob controller's shell: reads CronJobs and Jobs from the worker's stores, and drives
//! the decision core's sync state machine — one API call per step — with upstream's queue semantics.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use prometheus::{Histogram, HistogramOpts, Registry};

use super::core::{self, ApiError, Effect, Next, Outcome, UpdateAction};
use super::creates_first::CreatesFirst;
use super::signals::CronJobSignals;
use crate::api_errors;
use crate::client::lean_writes;
use crate::clock::Clock;
use crate::events::{EventSink, PendingEvent};
use crate::informer::{Handler, Informers, JOBS_BY_CONTROLLER_NAME, ObjectKey, Store, is_newer};
use crate::runtime::reconcile::{self, Verdict};
use crate::runtime::shard::{Epoch, ShardTable};
use crate::runtime::workqueue::WorkQueue;
use crate::runtime::write::{Fence, WriteError};

pub struct CronJobController {
    client: kube::Client,
    /// The same client's writes ([`crate::client::ApiWrites`]).
    writes: crate::client::ApiWrites,
    cronjobs: Arc<Store<CronJob>>,
    /// Read by the name of their controller reference, which the core matches CronJobs by.
    jobs: Arc<Store<Job>>,
    queue: WorkQueue<ObjectKey>,
    events: EventSink,
    skew: Histogram,
    local_zone: jiff::tz::TimeZone,
    clock: Arc<dyn Clock>,
    shards: ShardTable,
    creates_first: CreatesFirst,
    signals: CronJobSignals,
}

/// The longest a status write waits for other syncs' Job creations (see [`CreatesFirst`]).
const STATUS_WRITE_MAX_HOLD: Duration = Duration::from_secs(1);

fn api_error(e: kube::Error) -> ApiError {
    ApiError::new(api_errors::kind(&e), api_errors::message(&e))
}

fn write_error(e: WriteError) -> ApiError {
    ApiError::new(e.kind(), e.message())
}

impl CronJobController {
    #[allow(clippy::too_many_arguments)] // the shell's collaborators, each named at the one call
    pub fn new(
        client: impl Into<crate::client::ApiClient>,
        informers: &Informers,
        registry: &Registry,
        queue: WorkQueue<ObjectKey>,
        events: EventSink,
        local_zone: jiff::tz::TimeZone,
        clock: Arc<dyn Clock>,
        shards: ShardTable,
    ) -> prometheus::Result<Arc<Self>> {
        let skew = Histogram::with_opts(
            HistogramOpts::new(
                "cronjob_job_creation_skew_duration_seconds",
                "Time between when a cronjob is scheduled to be run, and when the corresponding job is created",
            )
            .subsystem("cronjob_controller")
            .buckets(core::CREATION_SKEW_BUCKETS.to_vec()),
        )?;
        registry.register(Box::new(skew.clone()))?;
        let signals = CronJobSignals::register(registry)?;
        let crate::client::ApiClient { kube: client, writes } = client.into();
        let this = Arc::new(Self {
            client,
            writes,
            cronjobs: informers.cronjobs.clone(),
            jobs: informers.jobs.clone(),
            queue,
            events,
            skew,
            local_zone,
            clock,
            shards,
            creates_first: CreatesFirst::default(),
            signals,
        });
        // A shard that becomes Active here: sync its CronJobs, and no others.
        let weak = Arc::downgrade(&this);
        this.shards.on_activate(Arc::new(move |shard| {
            let Some(this) = weak.upgrade() else { return };
            for key in this.cronjobs.keys_in_shard(shard) {
                this.queue.add(key);
            }
        }));
        // A shard that leaves: its CronJobs' series and Forbid counts go with it (the store, emptied
        // after this hook, still lists them), so the worker that takes it over is the one reporting.
        let weak = Arc::downgrade(&this);
        this.shards.on_drop(Arc::new(move |shard| {
            let Some(this) = weak.upgrade() else { return };
            for key in this.cronjobs.keys_in_shard(shard) {
                this.signals.forget(&key);
            }
        }));
        Ok(this)
    }

    /// Runs `workers` concurrent syncs; CronJobs and Jobs arrive through [`crate::informer`].
    pub async fn run(self: Arc<Self>, workers: usize) {
        let mut tasks = tokio::task::JoinSet::new();
        let (cronjobs, jobs) = (self.cronjobs.clone(), self.jobs.clone());
        let this = self.clone();
        tasks.spawn(reconcile::run(
            "cronjob",
            self.queue.clone(),
            self.shards.clone(),
            workers,
            async move {
                cronjobs.wait_synced().await;
                jobs.wait_synced().await;
            },
            move |key: ObjectKey, epoch| {
                let this = this.clone();
                async move {
                    let started = tokio::time::Instant::now();
                    match this.sync(&key, epoch).await {
                        // The core measured the delay to the next schedule time from the sync's
                        // start (its `now`): the time the sync took is spent already. Upstream
                        // adds it again, harmless at its speed; a slow sync (a starved process,
                        // creations held for a burst) would push every later run back by it.
                        Outcome::RequeueAfter(d) => {
                            Verdict::RequeueAfter(this.real(d).saturating_sub(started.elapsed()))
                        }
                        Outcome::Retry(e) => Verdict::Retry(e.to_string()),
                        Outcome::Done => Verdict::Done,
                    }
                }
            },
        ));
        while tasks.join_next().await.is_some() {}
    }

    /// Real time to wait for a delay the core computed on the controller's clock.
    fn real(&self, d: jiff::SignedDuration) -> Duration {
        self.clock.real(Duration::try_from(d).unwrap_or(Duration::ZERO))
    }

    fn now(&self) -> jiff::Zoned {
        self.clock.now().to_zoned(self.local_zone.clone())
    }

    /// Drives one sync through the core's steps.
    async fn sync(&self, key: &ObjectKey, epoch: Epoch) -> Outcome {
        let Some(cj) = self.cronjobs.get(key) else { return Outcome::Done };
        let controlled = crate::informer::controller_name_value(&key.namespace, &key.name);
        let jobs = self.jobs.by_index(JOBS_BY_CONTROLLER_NAME.name, &controlled);
        let fence = Fence::new(self.shards.clone(), &key.namespace, epoch);
        let mut before_create = Some(self.creates_first.sync_started());
        let options = core::SyncOptions { next_schedule_time: true };
        let mut step = core::sync_with(&cj, jobs.iter().map(|j| &**j), &self.now(), options);
        let mut blocked = false;
        loop {
            for effect in std::mem::take(&mut step.effects) {
                match effect {
                    Effect::Event(e) => self.publish(epoch, &cj, &e),
                    Effect::CreationSkew { seconds } => self.skew.observe(seconds),
                    Effect::Missed { reason, count } => self.signals.missed(reason, count),
                    Effect::ForbidBlocked { job, skipped } => {
                        blocked = true;
                        if self.signals.forbid_blocked(key, skipped) {
                            self.publish(epoch, &cj, &core::events::forbid_blocked(&job, skipped));
                        }
                    }
                    Effect::CaughtUp => self.signals.caught_up(),
                    Effect::Trigger(result) => self.signals.trigger(result),
                    Effect::NextScheduleTime(at) => self.signals.next_schedule_time(key, at),
                }
            }
            step = match step.next {
                Next::Done(outcome) => {
                    if !blocked {
                        self.signals.not_blocked(key);
                    }
                    return outcome;
                }
                Next::DeleteJob(d) => {
                    let api: Api<Job> = Api::namespaced(self.client.clone(), &d.namespace);
                    let dp = DeleteParams {
                        propagation_policy: Some(PropagationPolicy::Background),
                        ..Default::default()
                    };
                    let r =
                        fence.send_delete(api.delete(&d.name, &dp)).await.map(|_| ()).map_err(write_error);
                    d.answer(r)
                }
                Next::GetCronJob(g) => {
                    let api: Api<CronJob> = Api::namespaced(self.client.clone(), &g.namespace);
                    let r = api.get(&g.name).await.map_err(api_error);
                    g.answer(r)
                }
                Next::GetJob(g) => {
                    let api: Api<Job> = Api::namespaced(self.client.clone(), &g.namespace);
                    let r = api.get(&g.name).await.map_err(api_error);
                    g.answer(r)
                }
                Next::CreateJob(c) => {
                    let pp = PostParams::default();
                    let r = fence
                        .send_object(lean_writes::create_whole(&self.writes, &c.namespace, &pp, &*c.job))
                        .await
                        .map_err(write_error);
                    drop(before_create.take());
                    // The core reads the answer first, so the store can take the Job uncloned:
                    // in a burst, one copy of each new Job fewer.
                    let next = c.answer(r.as_ref().map_err(Clone::clone));
                    if let Ok(created) = r {
                        self.jobs.wrote(created, self);
                    }
                    next
                }
                Next::UpdateStatus(u) => {
                    drop(before_create.take());
                    self.creates_first.wait_for_creates(STATUS_WRITE_MAX_HOLD).await;
                    let ns = u.cronjob.metadata.namespace.clone().unwrap_or_default();
                    let name = u.cronjob.metadata.name.clone().unwrap_or_default();
                    let pp = PostParams::default();
                    let r = fence
                        .send_object(lean_writes::replace_status_whole(
                            &self.writes,
                            &ns,
                            &name,
                            &pp,
                            &*u.cronjob,
                        ))
                        .await;
                    match r {
                        Ok(written) => {
                            self.cronjobs.wrote(written, self);
                            u.answer(Ok(()))
                        }
                        Err(e) => u.answer(Err(write_error(e))),
                    }
                }
            };
        }
    }
}

impl CronJobController {
    /// Records an event a sync under `epoch` decided on, about `cj`.
    fn publish(&self, epoch: Epoch, cj: &CronJob, e: &core::Event) {
        // These leave the CronJob unscheduled until its spec changes: upstream logs them beside
        // the event, and an operator reading only the logs should see why nothing runs.
        if matches!(e.reason, "UnknownTimeZone" | "UnparseableSchedule" | "InvalidSchedule") {
            let key = ObjectKey::of(&cj.metadata);
            tracing::warn!(cronjob = %key, reason = e.reason, message = %e.message, "not scheduling the CronJob");
        }
        self.events.publish(epoch, PendingEvent::for_object(cj, e.type_, e.reason, &e.message));
    }
}

/// Whether a handler's `obj` tells nothing `old` did not: the store held this version or a later
/// one already (the echo of this controller's own write, or a relist).
fn nothing_new<K: kube::Resource>(old: Option<&Arc<K>>, obj: &K) -> bool {
    old.is_some_and(|o| !is_newer(o.meta(), obj.meta()))
}

impl Handler<Job> for CronJobController {
    fn applied(&self, old: Option<&Arc<Job>>, job: &Arc<Job>) {
        // The echo of a Job this controller created: the sync that created it already saw it.
        if nothing_new(old, job) {
            return;
        }
        let owners = match old {
            None => core::cronjob_for_job_event(job).into_iter().collect(),
            Some(old) => core::cronjobs_for_job_update(old, job),
        };
        for o in owners {
            self.queue.add(ObjectKey::new(o.namespace, o.name));
        }
    }

    fn deleted(&self, job: &Arc<Job>) {
        if let Some(o) = core::cronjob_for_job_event(job) {
            self.queue.add(ObjectKey::new(o.namespace, o.name));
        }
    }
}

impl Handler<CronJob> for CronJobController {
    fn applied(&self, old: Option<&Arc<CronJob>>, cj: &Arc<CronJob>) {
        // Our own status writes land in the store first, and their echo changes nothing the
        // last sync did not see.
        if nothing_new(old, cj) {
            return;
        }
        let key = ObjectKey::of(&cj.metadata);
        match old {
            None => self.queue.add(key),
            Some(old) => match core::on_cronjob_update(old, cj, &self.now()) {
                UpdateAction::Enqueue => self.queue.add(key),
                UpdateAction::EnqueueAfter(d) => self.queue.add_after(key, self.real(d)),
                UpdateAction::Unparseable(e) => self
                    .events
                    .publish_if_active(PendingEvent::for_object(&**cj, e.type_, e.reason, &e.message)),
            },
        }
    }

    fn deleted(&self, cj: &Arc<CronJob>) {
        self.signals.forget(&ObjectKey::of(&cj.metadata));
    }
}
