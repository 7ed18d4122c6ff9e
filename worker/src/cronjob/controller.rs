//! The CronJob controller's shell: watches CronJobs and Jobs into caches, and drives the decision
//! core's sync state machine — one API call per step — with upstream's queue semantics.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use parking_lot::RwLock;
use prometheus::{Histogram, HistogramOpts, Registry};

use super::core::{self, ApiError, Effect, Next, Outcome, UpdateAction};
use super::creates_first::CreatesFirst;
use crate::api_errors;
use crate::clock::Clock;
use crate::events::{EventSink, PendingEvent};
use crate::informer::{RecentlyDeleted, is_newer};
use crate::job::cache::ObjectKey;
use crate::runtime::reconcile::{self, Verdict};
use crate::runtime::shard::{Epoch, ShardTable};
use crate::runtime::workqueue::WorkQueue;
use crate::runtime::write::{Fence, WriteError};

pub struct CronJobController {
    client: kube::Client,
    cronjobs: RwLock<HashMap<ObjectKey, Arc<CronJob>>>,
    /// Jobs per namespace, by name: the core matches them to CronJobs by controller reference.
    jobs: RwLock<HashMap<String, BTreeMap<String, Arc<Job>>>>,
    queue: WorkQueue<ObjectKey>,
    events: EventSink,
    skew: Histogram,
    local_zone: jiff::tz::TimeZone,
    clock: Arc<dyn Clock>,
    shards: ShardTable,
    /// (CronJobs listed, Jobs listed): workers start once both are.
    synced: tokio::sync::watch::Sender<(bool, bool)>,
    /// Jobs and CronJobs the watch reported deleted: write responses must not revive them.
    deleted: RecentlyDeleted,
    creates_first: CreatesFirst,
}

/// The longest a status write waits for other syncs' Job creations (see [`CreatesFirst`]).
const STATUS_WRITE_MAX_HOLD: Duration = Duration::from_secs(1);

/// What [`CronJobController::cache_cronjob`] did.
enum Cached {
    /// The cache already held this version or a later one.
    Stale,
    /// The CronJob went in, replacing this.
    Replaced(Option<Arc<CronJob>>),
}

fn api_error(e: kube::Error) -> ApiError {
    ApiError::new(api_errors::kind(&e), api_errors::message(&e))
}

fn write_error(e: WriteError) -> ApiError {
    ApiError::new(e.kind(), e.message())
}

impl CronJobController {
    pub fn new(
        client: kube::Client,
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
        let this = Arc::new(Self {
            client,
            cronjobs: RwLock::new(HashMap::new()),
            jobs: RwLock::new(HashMap::new()),
            queue,
            events,
            skew,
            local_zone,
            clock,
            shards,
            synced: tokio::sync::watch::channel((false, false)).0,
            deleted: RecentlyDeleted::default(),
            creates_first: CreatesFirst::default(),
        });
        // A shard that becomes Active here: sync its CronJobs, and no others.
        let weak = Arc::downgrade(&this);
        this.shards.on_activate(Arc::new(move |shard| {
            let Some(this) = weak.upgrade() else { return };
            let keys: Vec<ObjectKey> = this.cronjobs.read().keys().cloned().collect();
            for key in keys {
                if this.shards.shard_of(&key.namespace) == shard {
                    this.queue.add(key);
                }
            }
        }));
        let weak = Arc::downgrade(&this);
        this.shards.on_drop(Arc::new(move |shard| {
            let Some(this) = weak.upgrade() else { return };
            this.cronjobs.write().retain(|k, _| this.shards.shard_of(&k.namespace) != shard);
            this.jobs.write().retain(|ns, _| this.shards.shard_of(ns) != shard);
        }));
        Ok(this)
    }

    /// Runs the CronJob watch and `workers` concurrent syncs; Jobs arrive through
    /// [`crate::informer`].
    pub async fn run(self: Arc<Self>, workers: usize) {
        let mut tasks = tokio::task::JoinSet::new();
        let mut synced = self.synced.subscribe();
        let this = self.clone();
        tasks.spawn(reconcile::run(
            "cronjob",
            self.queue.clone(),
            self.shards.clone(),
            workers,
            async move {
                let _ = synced.wait_for(|(a, b)| *a && *b).await;
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
        let Some(cj) = self.cronjobs.read().get(key).cloned() else { return Outcome::Done };
        let jobs: Vec<Arc<Job>> =
            self.jobs.read().get(&key.namespace).map(|m| m.values().cloned().collect()).unwrap_or_default();
        let fence = Fence::new(self.shards.clone(), &key.namespace, epoch);
        let mut before_create = Some(self.creates_first.sync_started());
        let mut step = core::sync(&cj, jobs.iter().map(|j| &**j), &self.now());
        loop {
            for effect in std::mem::take(&mut step.effects) {
                match effect {
                    Effect::Event(e) => self.publish(epoch, &cj, &e),
                    Effect::CreationSkew { seconds } => self.skew.observe(seconds),
                }
            }
            step = match step.next {
                Next::Done(outcome) => return outcome,
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
                    let api: Api<Job> = Api::namespaced(self.client.clone(), &c.namespace);
                    let r = fence
                        .send_object(api.create(&PostParams::default(), &c.job))
                        .await
                        .map(Arc::new)
                        .map_err(write_error);
                    drop(before_create.take());
                    if let Ok(created) = &r
                        && !self.deleted.contains(created.metadata.uid.as_deref())
                    {
                        self.cache_job(created.clone());
                    }
                    c.answer(r.as_deref().map_err(Clone::clone))
                }
                Next::UpdateStatus(u) => {
                    drop(before_create.take());
                    self.creates_first.wait_for_creates(STATUS_WRITE_MAX_HOLD).await;
                    let ns = u.cronjob.metadata.namespace.clone().unwrap_or_default();
                    let name = u.cronjob.metadata.name.clone().unwrap_or_default();
                    let api: Api<CronJob> = Api::namespaced(self.client.clone(), &ns);
                    let r = fence
                        .send_object(api.replace_status(&name, &PostParams::default(), &u.cronjob))
                        .await;
                    if let Ok(written) = &r
                        && !self.deleted.contains(written.metadata.uid.as_deref())
                    {
                        self.cache_cronjob(Arc::new(crate::informer::trimmed(written.clone())));
                    }
                    u.answer(r.map(|_| ()).map_err(write_error))
                }
            };
        }
    }
}

impl CronJobController {
    /// Puts a Job the controller wrote or watched into its cache, unless the cache already holds
    /// this version or a later one. Returns whether the cache learnt something.
    fn cache_job(&self, job: Arc<Job>) -> bool {
        let key = ObjectKey::of(&job.metadata);
        let mut jobs = self.jobs.write();
        let namespace = jobs.entry(key.namespace).or_default();
        match namespace.get(&key.name) {
            Some(cached) if !is_newer(&cached.metadata, &job.metadata) => false,
            _ => {
                namespace.insert(key.name, job);
                true
            }
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

    /// Puts a CronJob the controller wrote or watched into its cache, unless the cache already
    /// holds this version or a later one.
    fn cache_cronjob(&self, cj: Arc<CronJob>) -> Cached {
        let key = ObjectKey::of(&cj.metadata);
        let mut cronjobs = self.cronjobs.write();
        if cronjobs.get(&key).is_some_and(|c| !is_newer(&c.metadata, &cj.metadata)) {
            return Cached::Stale;
        }
        Cached::Replaced(cronjobs.insert(key, cj))
    }
}

impl crate::informer::Handler<Job> for CronJobController {
    fn applied(&self, old: Option<&Arc<Job>>, job: &Arc<Job>) {
        let key = ObjectKey::of(&job.metadata);
        if !self.shards.caches(&key.namespace) {
            return;
        }
        // The echo of a Job this controller created: the sync that created it already saw it.
        if !self.cache_job(job.clone()) {
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
        self.deleted.record(job.metadata.uid.as_deref());
        let key = ObjectKey::of(&job.metadata);
        if let Some(ns) = self.jobs.write().get_mut(&key.namespace) {
            ns.remove(&key.name);
        }
        if let Some(o) = core::cronjob_for_job_event(job) {
            self.queue.add(ObjectKey::new(o.namespace, o.name));
        }
    }

    fn synced(&self) {
        self.synced.send_modify(|s| s.1 = true);
    }
}

impl crate::informer::Handler<CronJob> for CronJobController {
    fn applied(&self, _old: Option<&Arc<CronJob>>, cj: &Arc<CronJob>) {
        let key = ObjectKey::of(&cj.metadata);
        if !self.shards.caches(&key.namespace) {
            return;
        }
        // The cache, not the informer, holds the previous version: our own status writes land
        // in it first, and their echo changes nothing the last sync did not see.
        let Cached::Replaced(old) = self.cache_cronjob(cj.clone()) else { return };
        match old {
            None => self.queue.add(key),
            Some(old) => match core::on_cronjob_update(&old, cj, &self.now()) {
                UpdateAction::Enqueue => self.queue.add(key),
                UpdateAction::EnqueueAfter(d) => self.queue.add_after(key, self.real(d)),
                UpdateAction::Unparseable(e) => self
                    .events
                    .publish_if_active(PendingEvent::for_object(&**cj, e.type_, e.reason, &e.message)),
            },
        }
    }

    fn deleted(&self, cj: &Arc<CronJob>) {
        self.deleted.record(cj.metadata.uid.as_deref());
        self.cronjobs.write().remove(&ObjectKey::of(&cj.metadata));
    }

    fn synced(&self) {
        self.synced.send_modify(|s| s.0 = true);
    }
}
