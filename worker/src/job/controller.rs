//! The Job controller's thin I/O shell: reads Jobs and pods from the worker's stores, keeps
//! expectations, and runs the decision core's plans against the API server — pod operations,
//! then the interim status write, then finalizer removals, then the final status — in upstream's
//! order, stopping at the first failure.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use parking_lot::Mutex;

use super::core::{
    self, BackoffRecord, Config, CountedPods, CreateOutcome, CreateRefusal, DeleteOutcome, FinalizerRemoval,
    JobPlan, PodOpResults, PodOps, PodRef, StallRecord, SyncInput, has_tracking_finalizer,
};
use super::metrics::JobMetrics;
use crate::client::lean_writes;
use crate::clock::Clock;
use crate::events::{EventSink, PendingEvent};
use crate::informer::{Handler, JOBS_BY_UID, ObjectKey, PODS_BY_JOB_UID, Store, controlling_job_uid};
use crate::runtime::expectations::{Expectations, UidExpectations};
use crate::runtime::reconcile::{self, Verdict};
use crate::runtime::shard::{Epoch, ShardTable};
use crate::runtime::workqueue::WorkQueue;
use crate::runtime::write::{Fence, WriteError};

/// The Job controller's two work queues: Job syncs, and orphan pods whose tracking finalizer
/// must go.
pub struct JobQueues {
    pub jobs: WorkQueue<ObjectKey>,
    pub orphans: WorkQueue<ObjectKey>,
}

pub struct JobController {
    client: kube::Client,
    /// The same client's writes ([`crate::client::ApiWrites`]).
    writes: crate::client::ApiWrites,
    /// The worker's Jobs and pods; workers wait for both to sync, as upstream waits for its
    /// informers, so no sync acts on a half-filled store.
    jobs: Arc<Store<Job>>,
    pods: Arc<Store<Pod>>,
    queue: WorkQueue<ObjectKey>,
    orphans: WorkQueue<ObjectKey>,
    creations: Expectations<ObjectKey>,
    deletions: UidExpectations<ObjectKey>,
    finalizers: UidExpectations<ObjectKey>,
    backoff: Mutex<HashMap<ObjectKey, BackoffRecord>>,
    /// What each Job's stall signals announced last (batchfleet's, not upstream's).
    stall: Mutex<HashMap<ObjectKey, StallRecord>>,
    /// `batchfleet.io/delete-counted-pods`: counted pods whose DELETE was sent and that the cache
    /// does not show deleting or gone yet, so the next sync does not send it again. Kept apart
    /// from `deletions`: these pods are neither active nor counted again, so `manageJob` need
    /// not wait for them.
    counted_deletions: UidExpectations<ObjectKey>,
    /// The bad `batchfleet.io/delete-counted-pods` value each Job was warned about.
    warned_annotation: Mutex<HashMap<ObjectKey, String>>,
    config: Config,
    metrics: JobMetrics,
    events: EventSink,
    shards: ShardTable,
    clock: Arc<dyn Clock>,
}

impl JobController {
    #[allow(clippy::too_many_arguments)] // the shell's collaborators, each named at the one call
    pub fn new(
        client: impl Into<crate::client::ApiClient>,
        informers: &crate::informer::Informers,
        config: Config,
        metrics: JobMetrics,
        events: EventSink,
        queues: JobQueues,
        shards: ShardTable,
        clock: Arc<dyn Clock>,
    ) -> Arc<Self> {
        let crate::client::ApiClient { kube: client, writes } = client.into();
        let this = Arc::new(Self {
            client,
            writes,
            jobs: informers.jobs.clone(),
            pods: informers.pods.clone(),
            queue: queues.jobs,
            orphans: queues.orphans,
            creations: Expectations::default(),
            deletions: UidExpectations::default(),
            finalizers: UidExpectations::default(),
            backoff: Mutex::new(HashMap::new()),
            stall: Mutex::new(HashMap::new()),
            counted_deletions: UidExpectations::default(),
            warned_annotation: Mutex::new(HashMap::new()),
            config,
            metrics,
            events,
            shards,
            clock,
        });
        // A shard that becomes Active here: queue its Jobs and orphan pods, and no others.
        let weak = Arc::downgrade(&this);
        this.shards.on_activate(Arc::new(move |shard| {
            if let Some(this) = weak.upgrade() {
                this.enqueue_shard(shard);
            }
        }));
        let weak = Arc::downgrade(&this);
        this.shards.on_drop(Arc::new(move |shard| {
            if let Some(this) = weak.upgrade() {
                this.forget_shard(shard);
            }
        }));
        this
    }

    /// Forgets the expectations and back-offs of a dropped shard's Jobs (the stores, emptied
    /// after this hook, still hold them).
    fn forget_shard(&self, shard: u32) {
        for key in self.jobs.keys_in_shard(shard) {
            self.creations.forget(&key);
            self.deletions.forget(&key);
            self.finalizers.forget(&key);
            self.backoff.lock().remove(&key);
            self.stall.lock().remove(&key);
            self.counted_deletions.forget(&key);
            self.warned_annotation.lock().remove(&key);
        }
    }

    fn enqueue_shard(&self, shard: u32) {
        for key in self.jobs.keys_in_shard(shard) {
            self.queue.add(key);
        }
        for pod in self.pods.in_shard(shard) {
            if has_tracking_finalizer(&pod) && self.job_key_of(&pod).is_none() {
                self.orphans.add(ObjectKey::of(&pod.metadata));
            }
        }
    }

    /// Runs `workers` concurrent syncs until the task is dropped; Jobs and pods arrive through
    /// [`crate::informer`].
    pub async fn run(self: Arc<Self>, workers: usize) {
        let mut tasks = tokio::task::JoinSet::new();
        let this = self.clone();
        tasks.spawn(reconcile::run(
            "job",
            self.queue.clone(),
            self.shards.clone(),
            workers,
            self.clone().caches_synced_owned(),
            move |key: ObjectKey, epoch| {
                let this = this.clone();
                async move {
                    match this.sync(&key, epoch).await {
                        Ok(Some(after)) => Verdict::RequeueAfter(this.clock.real(after)),
                        Ok(None) => Verdict::Done,
                        Err(e) => Verdict::Retry(e.to_string()),
                    }
                }
            },
        ));
        let this = self.clone();
        tasks.spawn(reconcile::run(
            "job_orphan_pod",
            self.orphans.clone(),
            self.shards.clone(),
            1,
            self.clone().caches_synced_owned(),
            move |key: ObjectKey, epoch| {
                let this = this.clone();
                async move {
                    match this.sync_orphan(&key, epoch).await {
                        Ok(()) => Verdict::Done,
                        Err(e) => Verdict::Retry(e.to_string()),
                    }
                }
            },
        ));
        while let Some(r) = tasks.join_next().await {
            if let Err(e) = r
                && e.is_panic()
            {
                tracing::error!(error = %e, "a Job controller task panicked");
            }
        }
    }

    // ---- informers -------------------------------------------------------------------------

    fn on_job(&self, old: Option<&Arc<Job>>, job: &Arc<Job>) {
        // Spec changes are synced at once; status-only updates (our own writes) need no sync
        // unless the Job is new to this worker.
        let changed = old.is_none_or(|o| {
            o.spec != job.spec || o.metadata.deletion_timestamp != job.metadata.deletion_timestamp
        });
        if changed {
            self.queue.add(ObjectKey::of(&job.metadata));
        }
        // `updateJob`'s backup, `cleanupPodFinalizers`: a finished Job's pods that still hold
        // the tracking finalizer go to the orphan queue, which releases them.
        if old.is_some() && core::is_job_finished(job) {
            self.release_tracked_pods(job);
        }
    }

    /// Puts the Job's pods that hold the tracking finalizer on the orphan queue.
    fn release_tracked_pods(&self, job: &Job) {
        for pod in self.pods_of(job.metadata.uid.as_deref().unwrap_or_default()) {
            if has_tracking_finalizer(&pod) {
                self.orphans.add(ObjectKey::of(&pod.metadata));
            }
        }
    }

    fn on_job_deleted(&self, job: &Job) {
        let key = &ObjectKey::of(&job.metadata);
        self.creations.forget(key);
        self.deletions.forget(key);
        self.finalizers.forget(key);
        self.backoff.lock().remove(key);
        self.stall.lock().remove(key);
        self.counted_deletions.forget(key);
        self.warned_annotation.lock().remove(key);
        // Its pods may now be orphans holding the tracking finalizer.
        self.release_tracked_pods(job);
    }

    fn job_by_uid(&self, uid: &str) -> Option<Arc<Job>> {
        self.jobs.first_by_index(JOBS_BY_UID.name, uid)
    }

    /// The pods whose controller is the Job with `uid`.
    fn pods_of(&self, job_uid: &str) -> Vec<Arc<Pod>> {
        self.pods.by_index(PODS_BY_JOB_UID.name, job_uid)
    }

    fn job_key_of(&self, pod: &Pod) -> Option<ObjectKey> {
        let uid = controlling_job_uid(pod)?;
        self.job_by_uid(uid).map(|j| ObjectKey::of(&j.metadata))
    }

    fn on_pod(&self, old: Option<&Arc<Pod>>, pod: &Arc<Pod>) {
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let tracked = has_tracking_finalizer(pod);
        match self.job_key_of(pod) {
            Some(jk) => {
                if old.is_none() {
                    self.creations.creation_observed(&jk);
                }
                if deleting {
                    self.deletions.observed(&jk, uid);
                    self.counted_deletions.observed(&jk, uid);
                }
                if !tracked {
                    self.finalizers.observed(&jk, uid);
                }
                self.queue.add_after(jk, self.config.sync_job_batch_period);
            }
            None if tracked => self.orphans.add(ObjectKey::of(&pod.metadata)),
            None => {}
        }
    }

    fn on_pod_deleted(&self, pod: &Pod) {
        if let Some(jk) = self.job_key_of(pod) {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            self.deletions.observed(&jk, &uid);
            self.finalizers.observed(&jk, &uid);
            self.counted_deletions.observed(&jk, &uid);
            self.queue.add_after(jk, self.config.sync_job_batch_period);
        }
    }

    // ---- workers ---------------------------------------------------------------------------

    async fn caches_synced(&self) {
        self.jobs.wait_synced().await;
        self.pods.wait_synced().await;
    }

    async fn caches_synced_owned(self: Arc<Self>) {
        self.caches_synced().await;
    }

    /// Removes the tracking finalizer from a pod whose Job is gone or finished.
    async fn sync_orphan(&self, key: &ObjectKey, epoch: Epoch) -> Result<(), SyncFailure> {
        let Some(pod) = self.pods.get(key) else { return Ok(()) };
        let mut owner = controlling_job_uid(&pod).and_then(|uid| self.job_by_uid(uid));
        if owner.is_none()
            && let Some(r) = pod
                .metadata
                .owner_references
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .find(|r| r.controller == Some(true))
            && r.kind == "Job"
        {
            // The cache may lag: ask the API server before declaring the pod an orphan.
            let jobs: Api<Job> = Api::namespaced(self.client.clone(), &key.namespace);
            owner = jobs
                .get_opt(&r.name)
                .await
                .map_err(|e| SyncFailure::Write(e.into()))?
                .filter(|j| j.metadata.uid.as_deref() == Some(r.uid.as_str()))
                .map(Arc::new);
        }
        if !core::orphan_needs_finalizer_removal(&pod, owner.as_deref(), &self.config) {
            return Ok(());
        }
        let fence = self.fence(&key.namespace, epoch);
        let patch = Patch::Strategic(core::remove_tracking_finalizer_patch());
        let params = PatchParams::default();
        let write = lean_writes::patch::<Pod, _>(&self.writes, &key.namespace, &key.name, &params, &patch);
        match fence.send_written(write).await {
            Ok(_) => {
                // No event upstream either; the log says where a stray pod's finalizer went.
                tracing::info!(pod = %key, "removed the tracking finalizer of a pod no unfinished Job controls");
                Ok(())
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(SyncFailure::Write(e)),
        }
    }

    /// One sync of one Job; returns when to sync it again.
    async fn sync(&self, key: &ObjectKey, epoch: Epoch) -> Result<Option<Duration>, SyncFailure> {
        let started = self.clock.monotonic();
        let Some(job) = self.jobs.get(key) else {
            self.creations.forget(key);
            return Ok(None);
        };
        let uid = job.metadata.uid.clone().unwrap_or_default();
        // Read before the pods are listed, as upstream reads its expectations: a pod whose
        // deletion the cache shows after this read is not in the list either, so a delete the
        // cache catches up with during the sync is not sent again at its end.
        let pending_counted = self.counted_deletions.pending(key);
        let pods = self.pods_of(&uid);
        let satisfied = self.creations.satisfied(key) && self.deletions.satisfied(key);
        let pending_finalizers = self.finalizers.pending(key);
        let backoff = self.backoff.lock().get(key).cloned();
        let stall = self.stall.lock().get(key).cloned();
        let input = SyncInput {
            job: &job,
            pods: &pods,
            now: self.clock.now(),
            expectations_satisfied: satisfied,
            expected_removed_finalizers: &pending_finalizers,
            backoff: backoff.as_ref(),
            stall: stall.as_ref(),
            config: &self.config,
        };
        let plan = match core::sync_job(&input) {
            JobPlan::Skip(skip) => {
                self.publish(epoch, &job, skip.events);
                if skip.forget_backoff_record {
                    self.backoff.lock().remove(key);
                    self.stall.lock().remove(key);
                }
                let more =
                    self.delete_counted_pods(key, epoch, &job, &skip.counted_pods, &pending_counted).await;
                return Ok(more.then_some(self.config.sync_job_batch_period));
            }
            JobPlan::Sync(plan) => plan,
        };
        let fence = self.fence(&key.namespace, epoch);
        let results = self.run_pod_ops(key, &fence, &plan.pod_ops).await;
        let status_plan = plan.after_pod_ops(&results);
        // Kept even if a write below fails: its events are published now, and the condition is
        // set again by the next refused sync.
        if status_plan.stall_record == StallRecord::default() {
            self.stall.lock().remove(key);
        } else {
            self.stall.lock().insert(key.clone(), status_plan.stall_record.clone());
        }
        self.publish(epoch, &job, status_plan.events.clone());
        status_plan.metrics.iter().for_each(|m| self.metrics.record(m));
        let mut latest: Arc<Job> = job.clone();
        let outcome = async {
            if let Some(status) = &status_plan.interim_status {
                latest = Arc::new(self.write_status(&fence, &latest, status.clone()).await?);
            }
            if let Some(record) = &status_plan.backoff_record {
                self.backoff.lock().insert(key.clone(), record.clone());
            }
            status_plan.metrics_after_interim.iter().for_each(|m| self.metrics.record(m));
            let removals = self.remove_finalizers(key, &fence, &status_plan.remove_finalizers).await;
            let final_plan = status_plan.after_finalizer_removals(&removals);
            if let Some(status) = &final_plan.status {
                latest = Arc::new(self.write_status(&fence, &latest, status.clone()).await?);
            }
            self.publish(epoch, &job, final_plan.events.clone());
            final_plan.metrics.iter().for_each(|m| self.metrics.record(m));
            match &final_plan.error {
                Some(e) => Err(SyncFailure::Plan(e.to_string())),
                None => Ok(()),
            }
        }
        .await;
        // After the status writes: they are what the Job's progress waits on; these deletes only
        // free the API server's storage.
        let more_counted =
            self.delete_counted_pods(key, epoch, &job, &plan.counted_pods, &pending_counted).await;
        let result = if outcome.is_ok() { "success" } else { "error" };
        self.metrics.observe_sync(
            plan.completion_mode,
            result,
            plan.action.as_str(),
            started.elapsed().as_secs_f64(),
        );
        let requeue = match (plan.requeue_after, more_counted) {
            (r, false) => r,
            (None, true) => Some(self.config.sync_job_batch_period),
            (Some(r), true) => Some(r.min(self.config.sync_job_batch_period)),
        };
        outcome.map(|()| requeue)
    }

    /// `batchfleet.io/delete-counted-pods`: warns once about a bad value, then DELETEs the counted
    /// pods the core named that are not already on their way out (`pending`: the deletes sent
    /// and not yet seen, read before the sync listed the pods), at most
    /// `max_pod_create_delete_per_sync` of them. Returns whether some were left for a later sync.
    /// A failed delete is logged and left to a later sync (the pod is still counted; nothing
    /// waits on it).
    async fn delete_counted_pods(
        &self,
        key: &ObjectKey,
        epoch: Epoch,
        job: &Job,
        counted: &CountedPods,
        pending: &std::collections::HashSet<String>,
    ) -> bool {
        match &counted.invalid_value {
            Some(value) => {
                let previous = self.warned_annotation.lock().insert(key.clone(), value.clone());
                if previous.as_ref() != Some(value) {
                    self.publish(epoch, job, vec![core::counted_pods::invalid_annotation_event(value)]);
                }
            }
            // Fixed (or never bad): a bad value set again later is warned about again.
            None => {
                self.warned_annotation.lock().remove(key);
            }
        }
        if counted.delete.is_empty() {
            return false;
        }
        let todo: Vec<_> = counted.delete.iter().filter(|d| !pending.contains(&d.pod.uid)).collect();
        let cap = self.config.max_pod_create_delete_per_sync;
        let more = todo.len() > cap;
        let todo = &todo[..todo.len().min(cap)];
        if todo.is_empty() {
            return false;
        }
        self.counted_deletions.expect_uids(key, todo.iter().map(|d| d.pod.uid.clone()));
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        let fence = self.fence(&key.namespace, epoch);
        let results = futures::future::join_all(todo.iter().map(|d| {
            let api = api.clone();
            let fence = &fence;
            async move {
                // A finished pod has no process to stop: no grace period, as PodGC deletes
                // terminated pods. The preconditions delete exactly the version seen counted.
                let dp = DeleteParams {
                    grace_period_seconds: Some(0),
                    preconditions: Some(Preconditions {
                        uid: Some(d.pod.uid.clone()),
                        resource_version: (!d.resource_version.is_empty())
                            .then(|| d.resource_version.clone()),
                    }),
                    ..DeleteParams::default()
                };
                (d, fence.send_delete(api.delete(&d.pod.name, &dp)).await)
            }
        }))
        .await;
        let mut deleted = 0u64;
        for (d, r) in results {
            match r {
                Ok(_) => deleted += 1,
                Err(e) if e.is_not_found() => self.counted_deletions.observed(key, &d.pod.uid),
                Err(e) => {
                    // A Conflict (the pod changed since it was cached) too: a later sync decides
                    // on the newer version.
                    self.counted_deletions.failed(key, &d.pod.uid);
                    tracing::debug!(job = %key, pod = %d.pod.name, error = %e, "could not delete a counted pod");
                }
            }
        }
        self.metrics.counted_pods_deleted(deleted);
        more
    }

    fn fence(&self, namespace: &str, epoch: Epoch) -> Fence {
        Fence::new(self.shards.clone(), namespace, epoch)
    }

    async fn write_status(
        &self,
        fence: &Fence,
        job: &Job,
        status: k8s_openapi::api::batch::v1::JobStatus,
    ) -> Result<Job, SyncFailure> {
        let mut updated = job.clone();
        updated.status = Some(status);
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        let written = fence
            .send_object(lean_writes::replace_status_whole(
                &self.writes,
                &ns,
                &name,
                &PostParams::default(),
                &updated,
            ))
            .await
            .map_err(SyncFailure::Write)?;
        // Our own write: keep the store ahead of the watch so the next sync builds on it (the
        // store refuses a late answer that would roll it back).
        self.jobs.wrote(written.clone(), self);
        Ok(written)
    }

    async fn run_pod_ops(&self, key: &ObjectKey, fence: &Fence, ops: &PodOps) -> PodOpResults {
        match ops {
            PodOps::None => PodOpResults::None,
            PodOps::DeleteActive(refs) => {
                self.deletions.expect_uids(key, refs.iter().map(|r| r.uid.clone()));
                let outcomes =
                    futures::future::join_all(refs.iter().map(|r| self.delete_pod(key, fence, r, false)))
                        .await;
                PodOpResults::Deletes(outcomes)
            }
            PodOps::RemoveFinalizerAndDelete(refs) => {
                self.deletions.expect_uids(key, refs.iter().map(|r| r.uid.clone()));
                let outcomes =
                    futures::future::join_all(refs.iter().map(|r| self.delete_pod(key, fence, r, true)))
                        .await;
                PodOpResults::Deletes(outcomes)
            }
            PodOps::Create(plan) => {
                self.creations.expect(key, plan.pods.len() as i64, 0);
                let mut outcomes = vec![CreateOutcome::Skipped; plan.pods.len()];
                let pp = PostParams::default();
                let mut built = None;
                for batch in &plan.batches {
                    let bodies: Vec<_> =
                        plan.pods[batch.clone()].iter().map(|p| pod_body(&mut built, p)).collect();
                    let results = futures::future::join_all(bodies.into_iter().map(|body| {
                        fence.send_written(async {
                            lean_writes::create_built::<Pod, lean_writes::Written>(
                                &self.writes,
                                &key.namespace,
                                &pp,
                                body?,
                            )
                            .await
                        })
                    }))
                    .await;
                    let mut failed = false;
                    for (i, r) in batch.clone().zip(results) {
                        outcomes[i] = match r {
                            Ok(created) => CreateOutcome::Created(created.metadata.name.unwrap_or_default()),
                            Err(e) if e.is_namespace_terminating() => {
                                self.creations.creation_observed(key);
                                CreateOutcome::NamespaceTerminating
                            }
                            Err(e) => {
                                failed = true;
                                self.creations.creation_observed(key);
                                create_failure(e)
                            }
                        };
                    }
                    if failed {
                        break;
                    }
                }
                let skipped = outcomes.iter().filter(|o| matches!(o, CreateOutcome::Skipped)).count();
                self.creations.lower(key, skipped as i64, 0);
                PodOpResults::Creates(outcomes)
            }
        }
    }

    async fn delete_pod(
        &self,
        key: &ObjectKey,
        fence: &Fence,
        r: &PodRef,
        remove_finalizer_first: bool,
    ) -> DeleteOutcome {
        if remove_finalizer_first {
            let patch = Patch::Strategic(core::remove_tracking_finalizer_patch());
            let params = PatchParams::default();
            let write = lean_writes::patch::<Pod, _>(&self.writes, &key.namespace, &r.name, &params, &patch);
            match fence.send_written(write).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {
                    self.deletions.observed(key, &r.uid);
                    return DeleteOutcome::PatchNotFound;
                }
                Err(e) => {
                    self.deletions.failed(key, &r.uid);
                    return DeleteOutcome::PatchFailed(e.to_string());
                }
            }
        }
        let dp = DeleteParams::default();
        let delete = lean_writes::delete::<Pod>(&self.writes, &key.namespace, &r.name, &dp);
        match fence.send_written(delete).await {
            Ok(_) => DeleteOutcome::Deleted,
            Err(e) if e.is_not_found() => {
                self.deletions.observed(key, &r.uid);
                DeleteOutcome::DeleteNotFound
            }
            Err(e) => {
                self.deletions.failed(key, &r.uid);
                DeleteOutcome::DeleteFailed(e.to_string())
            }
        }
    }

    async fn remove_finalizers(
        &self,
        key: &ObjectKey,
        fence: &Fence,
        pods: &[PodRef],
    ) -> Vec<FinalizerRemoval> {
        if pods.is_empty() {
            return Vec::new();
        }
        self.finalizers.expect_uids(key, pods.iter().map(|p| p.uid.clone()));
        let patch = Patch::Strategic(core::remove_tracking_finalizer_patch());
        let params = PatchParams::default();
        futures::future::join_all(pods.iter().map(|p| {
            let (patch, params) = (&patch, &params);
            async move {
                let write =
                    lean_writes::patch::<Pod, _>(&self.writes, &key.namespace, &p.name, params, patch);
                match fence.send_written(write).await {
                    Ok(_) => FinalizerRemoval::Removed,
                    Err(e) if e.is_not_found() => {
                        self.finalizers.observed(key, &p.uid);
                        FinalizerRemoval::NotFound
                    }
                    Err(e) => {
                        self.finalizers.failed(key, &p.uid);
                        FinalizerRemoval::Failed(e.to_string())
                    }
                }
            }
        }))
        .await
    }

    fn publish(&self, epoch: Epoch, job: &Job, events: Vec<core::Event>) {
        for e in events {
            self.events.publish(epoch, PendingEvent::for_object(job, e.type_, &e.reason, &e.message));
        }
    }
}

/// A failed create as the core takes it: API refusals with their status, for the stall signals
/// (the core decides which ones block); anything else as upstream's plain error.
fn create_failure(e: WriteError) -> CreateOutcome {
    let text = e.to_string();
    match &e {
        WriteError::Api(api) => match crate::api_errors::status(api) {
            Some(status) => CreateOutcome::Refused(
                text,
                CreateRefusal { code: status.code, message: status.message.clone() },
            ),
            None => CreateOutcome::Failed(text),
        },
        WriteError::Fenced(_) => CreateOutcome::Failed(text),
    }
}

/// The request body of `pod`, built once for a run of pods that share one object (a NonIndexed
/// Job's) rather than once per pod.
fn pod_body<'a>(built: &mut Option<(&'a Arc<Pod>, Vec<u8>)>, pod: &'a Arc<Pod>) -> kube::Result<Vec<u8>> {
    if let Some((shared, body)) = built
        && Arc::ptr_eq(shared, pod)
    {
        return Ok(body.clone());
    }
    let body = lean_writes::body(&**pod)?;
    *built = Some((pod, body.clone()));
    Ok(body)
}

#[derive(Debug, thiserror::Error)]
enum SyncFailure {
    #[error(transparent)]
    Write(WriteError),
    #[error("{0}")]
    Plan(String),
}

impl Handler<Job> for JobController {
    fn applied(&self, old: Option<&Arc<Job>>, job: &Arc<Job>) {
        self.on_job(old, job);
    }

    fn deleted(&self, job: &Arc<Job>) {
        self.on_job_deleted(job);
    }
}

impl Handler<Pod> for JobController {
    fn applied(&self, old: Option<&Arc<Pod>>, pod: &Arc<Pod>) {
        self.on_pod(old, pod);
    }

    fn deleted(&self, pod: &Arc<Pod>) {
        self.on_pod_deleted(pod);
    }
}
