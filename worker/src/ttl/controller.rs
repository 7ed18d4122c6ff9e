//! The TTL-after-finished controller's shell: reads Jobs from the worker's store, queues the finished ones with a TTL,
//! and deletes them once expired — after a fresh GET and a re-check — with Foreground
//! propagation and a uid precondition, as upstream's `processJob` does. With smoothing on
//! (`--ttl-max-deletions-per-second`), an expired Job first waits for its slot ([`super::pace`]).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::Resource;
use kube::api::{DeleteParams, GetParams, Preconditions, PropagationPolicy};
use prometheus::{Histogram, HistogramOpts, Registry};

use super::core::{self, DELETION_DURATION_BUCKETS, TtlDecision};
use super::smoothing::{Kind, Smoothing};
use crate::api_errors;
use crate::client::lean_decode::Lean;
use crate::client::{ApiClient, ApiWrites, lean_writes};
use crate::clock::Clock;
use crate::informer::{Handler, ObjectKey, Store};
use crate::runtime::reconcile::{self, Verdict};
use crate::runtime::shard::{Epoch, ShardTable};
use crate::runtime::workqueue::WorkQueue;
use crate::runtime::write::{Fence, WriteError};

pub struct TtlController {
    client: kube::Client,
    /// The same client's writes ([`crate::client::ApiWrites`]).
    writes: ApiWrites,
    jobs: Arc<Store<Job>>,
    queue: WorkQueue<ObjectKey>,
    deletion_duration: Histogram,
    shards: ShardTable,
    clock: Arc<dyn Clock>,
    smoothing: Option<Arc<Smoothing>>,
}

impl TtlController {
    pub fn new(
        client: impl Into<ApiClient>,
        jobs: Arc<Store<Job>>,
        registry: &Registry,
        queue: WorkQueue<ObjectKey>,
        shards: ShardTable,
        clock: Arc<dyn Clock>,
        smoothing: Option<Arc<Smoothing>>,
    ) -> prometheus::Result<Arc<Self>> {
        let deletion_duration = Histogram::with_opts(
            HistogramOpts::new(
                "job_deletion_duration_seconds",
                "The time it took to delete the job since it became eligible for deletion",
            )
            .subsystem("ttl_after_finished_controller")
            .buckets(DELETION_DURATION_BUCKETS.to_vec()),
        )?;
        registry.register(Box::new(deletion_duration.clone()))?;
        let ApiClient { kube: client, writes } = client.into();
        let this =
            Arc::new(Self { client, writes, jobs, queue, deletion_duration, shards, clock, smoothing });
        // A shard that becomes Active here: look again at its finished Jobs, and no others.
        let weak = Arc::downgrade(&this);
        this.shards.on_activate(Arc::new(move |shard| {
            let Some(this) = weak.upgrade() else { return };
            for job in this.jobs.in_shard(shard) {
                if core::needs_cleanup(&job) {
                    this.queue.add(ObjectKey::of(&job.metadata));
                }
            }
        }));
        Ok(this)
    }

    /// Runs `workers` concurrent cleanups; Jobs arrive through [`crate::informer`].
    pub async fn run(self: Arc<Self>, workers: usize) {
        let jobs = self.jobs.clone();
        let this = self.clone();
        reconcile::run(
            "ttl_jobs_to_delete",
            self.queue.clone(),
            self.shards.clone(),
            workers,
            async move { jobs.wait_synced().await },
            move |key: ObjectKey, epoch| {
                let this = this.clone();
                async move {
                    match this.process(&key, epoch).await {
                        Ok(Some(after)) => Verdict::RequeueAfter(this.clock.real(after)),
                        Ok(None) => Verdict::Done,
                        Err(e) => Verdict::Retry(e.to_string()),
                    }
                }
            },
        )
        .await;
    }

    /// [`Self::process_job`], and the Job's smoothing slot given up once it needs none.
    async fn process(&self, key: &ObjectKey, epoch: Epoch) -> Result<Option<Duration>, ProcessError> {
        let result = self.process_job(key, epoch).await;
        if let (Some(smoothing), Ok(None)) = (&self.smoothing, &result) {
            smoothing.forget(Kind::Job, key);
        }
        result
    }

    /// Upstream's `processJob`: returns when to look again, if ever.
    async fn process_job(&self, key: &ObjectKey, epoch: Epoch) -> Result<Option<Duration>, ProcessError> {
        let Some(cached) = self.jobs.get(key) else { return Ok(None) };
        let now = self.clock.now();
        match core::decide(&cached, now)? {
            TtlDecision::Nothing => return Ok(None),
            TtlDecision::Requeue { after, finished_in_future } => {
                if finished_in_future {
                    tracing::warn!(job = %key, "Found Job finished in the future. This is likely due to time skew in the cluster. Job cleanup will be deferred.");
                }
                return Ok(Some(after));
            }
            TtlDecision::DeleteNow(d) => {
                // Before the GET: a Job waiting for its slot costs no request.
                if let Some(wait) =
                    self.smoothing.as_ref().and_then(|s| s.wait(Kind::Job, key, d.expired_at, now))
                {
                    return Ok(Some(wait));
                }
            }
        }
        // The cache may be stale: re-check against the API server before deleting.
        let fresh = match get_fresh(&self.client, key).await {
            Ok(j) => j,
            Err(e) if api_errors::is_not_found(&e) => return Ok(None),
            Err(e) => return Err(ProcessError::Api(e)),
        };
        let delete = match core::decide(&fresh, self.clock.now())? {
            TtlDecision::Nothing => return Ok(None),
            TtlDecision::Requeue { after, .. } => return Ok(Some(after)),
            TtlDecision::DeleteNow(d) => d,
        };
        // Upstream logs this at V(4): a line per Job would be the busiest INFO line of a large cluster.
        tracing::debug!(job = %key, "cleaning up the Job: its TTL after finished expired");
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: Some(delete.precondition_uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let fence = Fence::new(self.shards.clone(), &key.namespace, epoch);
        let deleted = fence
            .send_written(lean_writes::delete::<Job>(&self.writes, &key.namespace, &key.name, &dp))
            .await;
        match deleted {
            Ok(_) => {}
            // Someone else deleted it first: the cleanup is done.
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(ProcessError::Write(e)),
        }
        self.deletion_duration.observe(core::deletion_duration_seconds(delete.expired_at, self.clock.now()));
        Ok(None)
    }
}

/// `Api::get`, the Job decoded without its `managedFields`, which the decision does not read.
async fn get_fresh(client: &kube::Client, key: &ObjectKey) -> kube::Result<Job> {
    let mut request = kube::core::Request::new(Job::url_path(&(), Some(&key.namespace)))
        .get(&key.name, &GetParams::default())
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("get");
    client.request::<Lean<Job>>(request).await.map(|Lean(job)| job)
}

#[derive(Debug, thiserror::Error)]
enum ProcessError {
    #[error(transparent)]
    Ttl(#[from] core::TtlError),
    #[error(transparent)]
    Api(kube::Error),
    #[error(transparent)]
    Write(WriteError),
}

impl Handler<Job> for TtlController {
    fn applied(&self, _old: Option<&Arc<Job>>, job: &Arc<Job>) {
        if core::needs_cleanup(job) {
            self.queue.add(ObjectKey::of(&job.metadata));
        }
    }

    fn deleted(&self, job: &Arc<Job>) {
        if let Some(smoothing) = &self.smoothing {
            smoothing.forget(Kind::Job, &ObjectKey::of(&job.metadata));
        }
    }
}
