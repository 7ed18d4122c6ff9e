//! PodGC's shell: watches pods and nodes into the compact caches, and every period — while this
//! coordinator leads and both caches are synced — runs upstream's four passes through the core,
//! force-deleting with bounded concurrency. Leadership is checked before every write, so a
//! coordinator that lost it stops deleting at once.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::watcher;
use parking_lot::Mutex;
use prometheus::{IntCounterVec, Opts, Registry};
use serde_json::json;
use tokio::sync::watch;

use super::cache::{NodeCache, PodCache};
use super::core::{
    self, DEFAULT_TERMINATED_POD_THRESHOLD, Deletion, GC_CHECK_PERIOD, ORPHAN_CONDITION_MESSAGE,
    ORPHAN_CONDITION_REASON, QUARANTINE_TIME, Quarantine,
};
use super::pod_facts::PodFacts;
use crate::leader::Leadership;

/// PodGC's settings, with kube-controller-manager's defaults.
#[derive(Debug, Clone)]
pub struct PodGcConfig {
    /// `--terminated-pod-gc-threshold`; 0 turns the terminated pass off.
    pub terminated_pod_threshold: usize,
    /// `--podgc-period`.
    pub period: Duration,
    /// `--podgc-quarantine`.
    pub quarantine: Duration,
    /// Deletions in flight at once.
    pub concurrency: usize,
}

impl Default for PodGcConfig {
    fn default() -> Self {
        Self {
            terminated_pod_threshold: DEFAULT_TERMINATED_POD_THRESHOLD,
            period: GC_CHECK_PERIOD,
            quarantine: QUARANTINE_TIME,
            concurrency: 50,
        }
    }
}

/// upstream's `pod_gc_collector_force_delete_pods_total` and `…_pod_errors_total`.
#[derive(Clone)]
pub struct PodGcMetrics {
    deleted: IntCounterVec,
    errors: IntCounterVec,
}

impl PodGcMetrics {
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let counter = |name: &str, help: &str| -> prometheus::Result<IntCounterVec> {
            let c = IntCounterVec::new(
                Opts::new(name, help).subsystem("pod_gc_collector"),
                &["namespace", "reason"],
            )?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        Ok(Self {
            deleted: counter(
                "force_delete_pods_total",
                "Number of pods that are being forcefully deleted since the Pod GC Controller started.",
            )?,
            errors: counter(
                "force_delete_pod_errors_total",
                "Number of errors encountered when forcefully deleting the pods since the Pod GC Controller started.",
            )?,
        })
    }
}

#[derive(Default)]
struct Caches {
    pods: PodCache,
    nodes: NodeCache,
    pods_synced: bool,
    nodes_synced: bool,
}

/// Runs PodGC until `shutdown` fires.
pub async fn run(
    client: kube::Client,
    config: PodGcConfig,
    metrics: PodGcMetrics,
    leadership: Leadership,
    mut shutdown: watch::Receiver<bool>,
) {
    let caches = Arc::new(Mutex::new(Caches::default()));
    let pods_task = tokio::spawn(watch_pods(Api::all(client.clone()), caches.clone()));
    let nodes_task = tokio::spawn(watch_nodes(Api::all(client.clone()), caches.clone()));
    let gc = Gc { pods: Api::all(client.clone()), nodes: Api::all(client), config, metrics, leadership };
    let mut quarantine = Quarantine::default();
    let mut tick = tokio::time::interval(gc.config.period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => break,
        }
        if !gc.leadership.is_leader() {
            // A new tenure starts afresh, as a new kube-controller-manager leader does.
            quarantine = Quarantine::default();
            continue;
        }
        gc.pass(&caches, &mut quarantine).await;
    }
    pods_task.abort();
    nodes_task.abort();
}

struct Gc {
    pods: Api<Pod>,
    nodes: Api<Node>,
    config: PodGcConfig,
    metrics: PodGcMetrics,
    leadership: Leadership,
}

impl Gc {
    /// One period's work, in upstream's order; each pass finishes before the next starts.
    async fn pass(&self, caches: &Mutex<Caches>, quarantine: &mut Quarantine) {
        let (terminated, terminating) = {
            let c = caches.lock();
            if !(c.pods_synced && c.nodes_synced) {
                return;
            }
            let views = c.pods.views();
            (
                core::gc_terminated(&views, self.config.terminated_pod_threshold),
                core::gc_terminating(&views, c.nodes.nodes()),
            )
        };
        self.delete_all(terminated).await;
        self.delete_all(terminating).await;

        let to_check = {
            let c = caches.lock();
            quarantine.nodes_to_check(
                &c.pods.views(),
                c.nodes.nodes(),
                std::time::Instant::now(),
                self.config.quarantine,
            )
        };
        let mut deleted_nodes = BTreeSet::new();
        for name in to_check {
            match self.nodes.get_opt(&name).await {
                Ok(None) => {
                    deleted_nodes.insert(name);
                }
                Ok(Some(_)) => {}
                // Looked up again after another quarantine if still missing.
                Err(e) => tracing::warn!(node = %name, error = %e, "podgc: getting a node failed"),
            }
        }
        let orphaned = {
            let c = caches.lock();
            core::gc_orphaned(&c.pods.views(), &deleted_nodes)
        };
        self.delete_all(orphaned).await;

        let unscheduled = {
            let c = caches.lock();
            core::gc_unscheduled_terminating(&c.pods.views())
        };
        self.delete_all(unscheduled).await;
    }

    async fn delete_all(&self, deletions: Vec<Deletion>) {
        if deletions.is_empty() {
            return;
        }
        tracing::info!(
            count = deletions.len(),
            reason = deletions[0].reason.label(),
            "podgc: force deleting pods"
        );
        futures::stream::iter(deletions)
            .for_each_concurrent(self.config.concurrency.max(1), |d| async move {
                // Fenced: a coordinator that lost leadership writes nothing more.
                if !self.leadership.is_leader() {
                    return;
                }
                self.metrics.deleted.with_label_values(&[d.namespace.as_str(), d.reason.label()]).inc();
                if let Err(e) = self.mark_failed_and_delete(&d).await {
                    tracing::warn!(pod = %format!("{}/{}", d.namespace, d.name), error = %e, "podgc: force deletion failed");
                    self.metrics.errors.with_label_values(&[d.namespace.as_str(), d.reason.label()]).inc();
                }
            })
            .await;
    }

    /// upstream `markFailedAndDeletePodWithCondition`.
    async fn mark_failed_and_delete(&self, d: &Deletion) -> Result<(), kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.pods.clone().into_client(), &d.namespace);
        if d.mark_failed {
            let mut status = json!({"phase": "Failed"});
            if d.disruption_condition {
                status["conditions"] = json!([{
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": ORPHAN_CONDITION_REASON,
                    "message": ORPHAN_CONDITION_MESSAGE,
                    "lastTransitionTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                }]);
            }
            // The uid in the patch is the precondition: a pod recreated under the same name is
            // left alone.
            let patch = json!({"metadata": {"uid": d.uid}, "status": status});
            match api.patch_status(&d.name, &PatchParams::default(), &Patch::Strategic(&patch)).await {
                Ok(_) => {}
                Err(e) if is_gone_or_changed(&e) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: Some(d.uid.clone()), resource_version: None }),
            ..DeleteParams::default()
        };
        match api.delete(&d.name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if is_gone_or_changed(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// NotFound and Conflict: the pod is gone or is another pod now; neither is an error.
fn is_gone_or_changed(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409)
}

/// A cache fed by one watch.
trait WatchedCache: Default + Send + 'static {
    type Object: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static;
    fn apply(&mut self, object: &Self::Object);
    fn delete(&mut self, object: &Self::Object);
}

impl WatchedCache for PodCache {
    type Object = PodFacts;
    fn apply(&mut self, pod: &PodFacts) {
        PodCache::apply(self, pod);
    }
    fn delete(&mut self, pod: &PodFacts) {
        PodCache::delete(self, pod);
    }
}

impl WatchedCache for NodeCache {
    type Object = Node;
    fn apply(&mut self, node: &Node) {
        NodeCache::apply(self, node);
    }
    fn delete(&mut self, node: &Node) {
        NodeCache::delete(self, node);
    }
}

async fn watch_pods(api: Api<PodFacts>, caches: Arc<Mutex<Caches>>) {
    // A streaming list: no whole LIST body is ever held.
    let config = watcher::Config::default().streaming_lists();
    watch_into(api, config, caches, |c| (&mut c.pods, &mut c.pods_synced)).await;
}

async fn watch_nodes(api: Api<Node>, caches: Arc<Mutex<Caches>>) {
    watch_into(api, watcher::Config::default(), caches, |c| (&mut c.nodes, &mut c.nodes_synced)).await;
}

/// Feeds one cache from a watch; a relist builds a fresh cache and swaps it in when complete.
async fn watch_into<C: WatchedCache>(
    api: Api<C::Object>,
    config: watcher::Config,
    caches: Arc<Mutex<Caches>>,
    slot: fn(&mut Caches) -> (&mut C, &mut bool),
) {
    let mut relist: Option<C> = None;
    let mut stream = std::pin::pin!(watcher(api, config));
    loop {
        match stream.try_next().await {
            Ok(Some(event)) => {
                let mut guard = caches.lock();
                let (cache, synced) = slot(&mut guard);
                match event {
                    watcher::Event::Init => relist = Some(C::default()),
                    watcher::Event::InitApply(o) => relist.get_or_insert_with(C::default).apply(&o),
                    watcher::Event::InitDone => {
                        *cache = relist.take().unwrap_or_default();
                        *synced = true;
                    }
                    watcher::Event::Apply(o) => cache.apply(&o),
                    watcher::Event::Delete(o) => cache.delete(&o),
                }
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, kind = std::any::type_name::<C::Object>(), "podgc: watch failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
