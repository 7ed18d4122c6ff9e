//! PodGC's shell: watches pods and nodes into the compact caches, and every period — while this
//! coordinator leads and both caches are synced — runs upstream's four passes through the core,
//! force-deleting with bounded concurrency. Leadership is checked before every write, so a
//! coordinator that lost it stops deleting at once.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Event, EventSource, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::watcher;
use parking_lot::Mutex;
use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry};
use serde_json::json;
use tokio::sync::watch;

use super::cache::{NodeCache, PodCache};
use super::core::{
    self, DEFAULT_TERMINATED_POD_THRESHOLD, Deletion, GC_CHECK_PERIOD, ORPHAN_CONDITION_MESSAGE,
    ORPHAN_CONDITION_REASON, QUARANTINE_TIME, Quarantine,
};
use super::pod_facts::PodFacts;
use super::policy::{self, BadCap, NamespaceCaps, Order, TerminatedPolicy};
use crate::leader::Leadership;

/// The component PodGC's Events name.
const EVENT_COMPONENT: &str = "pod-garbage-collector";

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
    /// `--podgc-max-age`.
    pub max_age: Option<Duration>,
    /// `--podgc-namespace-threshold`; 0: no cap.
    pub namespace_threshold: usize,
    /// `--podgc-namespace-caps`: the ConfigMap of per-namespace caps, read every pass.
    pub namespace_caps: Option<ConfigMapRef>,
    /// `--podgc-order`.
    pub order: Order,
    /// `--podgc-skip-finalizer-held`.
    pub skip_finalizer_held: bool,
}

impl Default for PodGcConfig {
    fn default() -> Self {
        Self {
            terminated_pod_threshold: DEFAULT_TERMINATED_POD_THRESHOLD,
            period: GC_CHECK_PERIOD,
            quarantine: QUARANTINE_TIME,
            concurrency: 50,
            max_age: None,
            namespace_threshold: 0,
            namespace_caps: None,
            order: Order::Upstream,
            skip_finalizer_held: false,
        }
    }
}

impl PodGcConfig {
    fn terminated_policy(&self) -> TerminatedPolicy {
        TerminatedPolicy {
            threshold: self.terminated_pod_threshold,
            max_age: self.max_age,
            namespace_threshold: self.namespace_threshold,
            order: self.order,
        }
    }
}

/// A ConfigMap by namespace and name (`NAMESPACE/NAME` on the command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapRef {
    pub namespace: String,
    pub name: String,
}

impl std::str::FromStr for ConfigMapRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('/') {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(Self { namespace: namespace.into(), name: name.into() })
            }
            _ => Err(format!("{s:?} is not NAMESPACE/NAME")),
        }
    }
}

impl std::fmt::Display for ConfigMapRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// upstream's `pod_gc_collector_force_delete_pods_total` and `…_pod_errors_total`.
/// And batchfleet's own: the finalizer-held backlog and the pass time.
#[derive(Clone)]
pub struct PodGcMetrics {
    deleted: IntCounterVec,
    errors: IntCounterVec,
    finalizer_held: IntGauge,
    finalizer_held_oldest: IntGauge,
    pass_duration: Histogram,
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
        let gauge = |name: &str, help: &str| -> prometheus::Result<IntGauge> {
            let g = IntGauge::with_opts(Opts::new(name, help).subsystem("pod_gc_collector"))?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let pass_duration = Histogram::with_opts(
            HistogramOpts::new(
                "pass_duration_seconds",
                "Time a PodGC pass spends deciding (the cache read and the four passes' decisions, without the API calls).",
            )
            .subsystem("pod_gc_collector")
            .buckets(prometheus::exponential_buckets(0.001, 2.0, 14)?),
        )?;
        registry.register(Box::new(pass_duration.clone()))?;
        Ok(Self {
            finalizer_held: gauge(
                "finalizer_held_pods",
                "Pods deleted with grace period 0 that only finalizers keep, at the last pass.",
            )?,
            finalizer_held_oldest: gauge(
                "finalizer_held_oldest_age_seconds",
                "Seconds since the oldest finalizer-held pod was deleted, at the last pass (0 when none).",
            )?,
            pass_duration,
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
    let gc = Gc {
        pods: Api::all(client.clone()),
        nodes: Api::all(client.clone()),
        client,
        config,
        metrics,
        leadership,
        reported_caps: Mutex::new(BTreeSet::new()),
    };
    let mut quarantine = Quarantine::default();
    // As upstream's `wait.UntilWithContext`: a full period after each pass ends, so that the
    // watch has delivered the pass's own deletions before the next one counts (a pass longer
    // than the period would otherwise count, and delete again, pods it has just deleted).
    let mut wait = Duration::ZERO;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.wait_for(|stop| *stop) => break,
        }
        wait = gc.config.period;
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
    client: kube::Client,
    config: PodGcConfig,
    metrics: PodGcMetrics,
    leadership: Leadership,
    /// Bad caps already logged and reported by an Event, so a pass does not repeat them.
    reported_caps: Mutex<BTreeSet<BadCap>>,
}

impl Gc {
    /// One period's work, in upstream's order; each pass finishes before the next starts.
    async fn pass(&self, caches: &Mutex<Caches>, quarantine: &mut Quarantine) {
        if !{
            let c = caches.lock();
            c.pods_synced && c.nodes_synced
        } {
            return;
        }
        let caps = self.namespace_caps().await;
        let skip = self.config.skip_finalizer_held;
        let mut deciding = Duration::ZERO;
        let started = Instant::now();
        let (terminated, terminating) = {
            let c = caches.lock();
            let now = jiff::Timestamp::now().as_second();
            let views = c.pods.views();
            let backlog = policy::finalizer_backlog(&views, now);
            self.metrics.finalizer_held.set(i64::try_from(backlog.pods).unwrap_or(i64::MAX));
            self.metrics.finalizer_held_oldest.set(backlog.oldest_age_seconds);
            let views = policy::eligible(views, skip);
            (
                policy::gc_terminated(&views, &self.config.terminated_policy(), &caps, now),
                core::gc_terminating(&views, c.nodes.nodes()),
            )
        };
        deciding += started.elapsed();
        self.delete_all(terminated).await;
        self.delete_all(terminating).await;

        let started = Instant::now();
        let to_check = {
            let c = caches.lock();
            quarantine.nodes_to_check(
                &policy::eligible(c.pods.views(), skip),
                c.nodes.nodes(),
                Instant::now(),
                self.config.quarantine,
            )
        };
        deciding += started.elapsed();
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
        let started = Instant::now();
        let orphaned = {
            let c = caches.lock();
            core::gc_orphaned(&policy::eligible(c.pods.views(), skip), &deleted_nodes)
        };
        deciding += started.elapsed();
        self.delete_all(orphaned).await;

        let started = Instant::now();
        let unscheduled = {
            let c = caches.lock();
            core::gc_unscheduled_terminating(&policy::eligible(c.pods.views(), skip))
        };
        deciding += started.elapsed();
        self.metrics.pass_duration.observe(deciding.as_secs_f64());
        self.delete_all(unscheduled).await;
    }

    /// The caps of `--podgc-namespace-caps`, read afresh: none when it is not set, the
    /// ConfigMap does not exist, or it cannot be read (logged). A bad value is logged and
    /// reported by a Warning Event on the ConfigMap, once per value.
    async fn namespace_caps(&self) -> NamespaceCaps {
        let Some(source) = &self.config.namespace_caps else { return NamespaceCaps::default() };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &source.namespace);
        let config_map = match api.get_opt(&source.name).await {
            Ok(Some(cm)) => cm,
            Ok(None) => return NamespaceCaps::default(),
            Err(e) => {
                tracing::warn!(configmap = %source, error = %e, "podgc: reading the namespace caps failed; no caps this pass");
                return NamespaceCaps::default();
            }
        };
        let (caps, bad) = NamespaceCaps::parse(&config_map.data.clone().unwrap_or_default());
        let new: Vec<BadCap> = {
            let mut reported = self.reported_caps.lock();
            // A value fixed and broken again is reported again.
            reported.retain(|b| bad.contains(b));
            bad.into_iter().filter(|b| reported.insert(b.clone())).collect()
        };
        for b in new {
            tracing::warn!(configmap = %source, namespace = %b.namespace, value = %b.value, "podgc: {b}");
            if self.leadership.is_leader()
                && let Err(e) = self.warn_on(&config_map, &b.to_string()).await
            {
                tracing::warn!(configmap = %source, error = %e, "podgc: recording an event failed");
            }
        }
        caps
    }

    async fn warn_on(&self, config_map: &ConfigMap, message: &str) -> Result<(), kube::Error> {
        let m = &config_map.metadata;
        let namespace = m.namespace.clone().unwrap_or_default();
        let now = jiff::Timestamp::now();
        let event = Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}.", m.name.as_deref().unwrap_or("podgc"))),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("ConfigMap".into()),
                namespace: Some(namespace.clone()),
                name: m.name.clone(),
                uid: m.uid.clone(),
                resource_version: m.resource_version.clone(),
                ..ObjectReference::default()
            },
            reason: Some(INVALID_CAP_REASON.into()),
            message: Some(message.into()),
            type_: Some("Warning".into()),
            source: Some(EventSource { component: Some(EVENT_COMPONENT.into()), host: None }),
            reporting_component: Some(EVENT_COMPONENT.into()),
            reporting_instance: Some(EVENT_COMPONENT.into()),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            action: Some("ReadCaps".into()),
            count: Some(1),
            ..Event::default()
        };
        Api::<Event>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await?;
        Ok(())
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

/// The reason of the Warning Event on a caps ConfigMap with a value that is not a cap.
pub const INVALID_CAP_REASON: &str = "InvalidPodGCCap";

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
