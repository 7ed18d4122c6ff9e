//! TTL after finished for bare pods, the shell: reads pods from the worker's store (which keeps
//! the annotation of bare pods only, `informer/trim.rs`), queues the finished, annotated ones, and
//! deletes each once expired (and, with smoothing on, once its slot comes), with its uid and
//! resourceVersion as preconditions, through the shard fence of the pod's namespace. The
//! decisions are [`super::pod_core`]'s.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Preconditions};
use prometheus::{Histogram, HistogramOpts, Registry};

use super::core::{DELETION_DURATION_BUCKETS, deletion_duration_seconds};
use super::pod_core::{self, BAD_TTL_REASON, PodTtlDecision};
use super::smoothing::{Kind, Smoothing};
use crate::clock::Clock;
use crate::events::{EventSink, EventType, PendingEvent};
use crate::informer::{Handler, ObjectKey, Store};
use crate::runtime::reconcile::{self, Verdict};
use crate::runtime::shard::{Epoch, ShardTable};
use crate::runtime::workqueue::WorkQueue;
use crate::runtime::write::{Fence, WriteError};

/// The queue's name, in its metrics and `/livez`.
pub const QUEUE: &str = "ttl_pods_to_delete";

pub struct PodTtlController {
    client: kube::Client,
    pods: Arc<Store<Pod>>,
    queue: WorkQueue<ObjectKey>,
    deletion_duration: Histogram,
    events: EventSink,
    shards: ShardTable,
    clock: Arc<dyn Clock>,
    smoothing: Option<Arc<Smoothing>>,
}

/// What the controller needs besides the pods' store.
pub struct PodTtlParts {
    pub queue: WorkQueue<ObjectKey>,
    pub events: EventSink,
    pub shards: ShardTable,
    pub clock: Arc<dyn Clock>,
    pub smoothing: Option<Arc<Smoothing>>,
}

impl PodTtlController {
    pub fn new(
        client: kube::Client,
        pods: Arc<Store<Pod>>,
        registry: &Registry,
        parts: PodTtlParts,
    ) -> prometheus::Result<Arc<Self>> {
        let PodTtlParts { queue, events, shards, clock, smoothing } = parts;
        let deletion_duration = Histogram::with_opts(
            HistogramOpts::new(
                "pod_deletion_duration_seconds",
                "The time it took to delete a bare pod with batchfleet.io/ttl-seconds-after-finished since it became eligible for deletion",
            )
            .subsystem("ttl_after_finished_controller")
            .buckets(DELETION_DURATION_BUCKETS.to_vec()),
        )?;
        registry.register(Box::new(deletion_duration.clone()))?;
        let this =
            Arc::new(Self { client, pods, queue, deletion_duration, events, shards, clock, smoothing });
        let weak = Arc::downgrade(&this);
        this.shards.on_activate(Arc::new(move |shard| {
            let Some(this) = weak.upgrade() else { return };
            for pod in this.pods.in_shard(shard) {
                if pod_core::needs_cleanup(&pod) {
                    this.queue.add(ObjectKey::of(&pod.metadata));
                }
            }
        }));
        Ok(this)
    }

    /// Runs `workers` concurrent cleanups; pods arrive through [`crate::informer`].
    pub async fn run(self: Arc<Self>, workers: usize) {
        let pods = self.pods.clone();
        let this = self.clone();
        reconcile::run(
            QUEUE,
            self.queue.clone(),
            self.shards.clone(),
            workers,
            async move { pods.wait_synced().await },
            move |key: ObjectKey, epoch| {
                let this = this.clone();
                async move {
                    let result = this.process(&key, epoch).await;
                    if let (Some(smoothing), Ok(None)) = (&this.smoothing, &result) {
                        smoothing.forget(Kind::Pod, &key);
                    }
                    match result {
                        Ok(Some(after)) => Verdict::RequeueAfter(this.clock.real(after)),
                        Ok(None) => Verdict::Done,
                        Err(e) => Verdict::Retry(e.to_string()),
                    }
                }
            },
        )
        .await;
    }

    async fn process(&self, key: &ObjectKey, epoch: Epoch) -> Result<Option<Duration>, WriteError> {
        let Some(pod) = self.pods.get(key) else { return Ok(None) };
        let now = self.clock.now();
        let delete = match pod_core::decide(&pod, now) {
            PodTtlDecision::Nothing => return Ok(None),
            PodTtlDecision::BadValue(bad) => {
                tracing::warn!(pod = %key, "{bad}");
                self.events.publish(
                    epoch,
                    PendingEvent::for_object(&*pod, EventType::Warning, BAD_TTL_REASON, &bad.to_string()),
                );
                return Ok(None);
            }
            PodTtlDecision::Requeue { after, finished_in_future } => {
                if finished_in_future {
                    tracing::warn!(pod = %key, "Found a pod finished in the future. This is likely due to time skew in the cluster. Its cleanup will be deferred.");
                }
                return Ok(Some(after));
            }
            PodTtlDecision::DeleteNow(d) => d,
        };
        if let Some(wait) =
            self.smoothing.as_ref().and_then(|s| s.wait(Kind::Pod, key, delete.expired_at, now))
        {
            return Ok(Some(wait));
        }
        tracing::info!(pod = %key, finished_at = %delete.finished_at, "cleaning up the pod: its TTL after finished expired");
        // A finished pod has no process to stop: no grace period, as PodGC deletes terminated pods.
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(delete.precondition_uid),
                resource_version: Some(delete.precondition_resource_version),
            }),
            ..DeleteParams::default()
        };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        let fence = Fence::new(self.shards.clone(), &key.namespace, epoch);
        match fence.send_delete(api.delete(&key.name, &dp)).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Ok(None),
            // A Conflict (the pod changed since it was cached) too: the retry decides on the newer
            // version.
            Err(e) => return Err(e),
        }
        self.deletion_duration.observe(deletion_duration_seconds(delete.expired_at, self.clock.now()));
        Ok(None)
    }
}

impl Handler<Pod> for PodTtlController {
    fn applied(&self, _old: Option<&Arc<Pod>>, pod: &Arc<Pod>) {
        if pod_core::needs_cleanup(pod) {
            self.queue.add(ObjectKey::of(&pod.metadata));
        }
    }

    fn deleted(&self, pod: &Arc<Pod>) {
        if let Some(smoothing) = &self.smoothing {
            smoothing.forget(Kind::Pod, &ObjectKey::of(&pod.metadata));
        }
    }
}
