//! The sweeper's I/O shell: a level-triggered pass over the pods of this worker's Active,
//! synced shards, woken by its period and by pod and Job events, that patches the tracking
//! finalizer away from the pods [`decide`] releases: through the shard's fence, under a budget
//! of its own, with a per-pod back-off, and Warning Events (on the pod, and on its Job if it
//! still exists) when the API server refuses the patch.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use batchfleet_kube_client::{ClientLimits, TokenBucket};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::decide::{JobSeen, ReleaseReason, Rules, Verdict, decide};
use super::metrics::SweepMetrics;
use super::pacing;
use crate::clock::Clock;
use crate::events::{EventSink, EventType, PendingEvent};
use crate::informer::{Handler, JOBS_BY_UID, ObjectKey, PODS_BY_JOB_UID, Store, controlling_job_uid};
use crate::job::core::{has_tracking_finalizer, is_job_finished, remove_tracking_finalizer_patch};
use crate::runtime::shard::{Epoch, ShardPhase, ShardTable};
use crate::runtime::write::{Fence, WriteError};

/// The reason of the Warning Events about a refused removal.
pub const REJECTED_REASON: &str = "FinalizerRemovalRejected";
/// The component the sweeper's Events name.
pub const EVENT_COMPONENT: &str = "batchfleet-finalizer-sweeper";
/// However many events arrive, passes start at most this often.
const MIN_GAP: Duration = Duration::from_secs(1);

/// The sweeper's flags.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepOptions {
    /// `--finalizer-sweep`: on by default.
    pub enabled: bool,
    /// `--finalizer-sweep-period`: a pass at least this often.
    pub period: Duration,
    /// `--finalizer-sweep-qps`: the sweeper's own request budget (its burst is twice that, at
    /// least 1), inside the worker's `--kube-api-qps`.
    pub qps: f64,
    /// `--finalizer-sweep-grace`: how long the Job controller has to act first.
    pub grace: Duration,
}

impl Default for SweepOptions {
    fn default() -> Self {
        Self { enabled: true, period: Duration::from_secs(30), qps: 5.0, grace: Duration::from_secs(30) }
    }
}

/// What the sweeper remembers of a pod it found releasable.
struct Releasable {
    /// When a pass first found it so.
    since: Instant,
    failures: u32,
    /// Not tried again before this.
    retry_at: Option<Instant>,
}

/// The last rejection told of an object: its message and when.
type Told = HashMap<String, (String, Instant)>;

pub struct FinalizerSweeper {
    client: kube::Client,
    jobs: Arc<Store<Job>>,
    pods: Arc<Store<Pod>>,
    shards: ShardTable,
    events: EventSink,
    metrics: SweepMetrics,
    rules: Rules,
    period: Duration,
    budget: TokenBucket,
    clock: Arc<dyn Clock>,
    wake: Notify,
    /// Set by a pod event that asks for a pass whatever the Jobs below say.
    pass_asked: AtomicBool,
    /// The uids of the Jobs that finished or went since the last wake: it is worth a pass only
    /// if a pod of theirs still holds the finalizer once the wake's gap is over.
    woken_by_jobs: Mutex<Vec<String>>,
    /// By pod uid.
    releasable: Mutex<HashMap<String, Releasable>>,
    /// By pod uid and by Job uid.
    told: Mutex<Told>,
}

/// One pod a pass releases.
struct Candidate {
    pod: Arc<Pod>,
    reason: ReleaseReason,
    job: Option<Arc<Job>>,
}

impl FinalizerSweeper {
    #[allow(clippy::too_many_arguments)] // the shell's collaborators, each named at the one call
    pub fn new(
        client: kube::Client,
        informers: &crate::informer::Informers,
        shards: ShardTable,
        events: EventSink,
        metrics: SweepMetrics,
        options: SweepOptions,
        managed_by: String,
        clock: Arc<dyn Clock>,
    ) -> Arc<Self> {
        let qps = options.qps.max(0.01);
        let burst = (qps * 2.0).ceil().max(1.0) as u32;
        Arc::new(Self {
            client,
            jobs: informers.jobs.clone(),
            pods: informers.pods.clone(),
            shards,
            events,
            metrics,
            rules: Rules { grace: options.grace, managed_by },
            period: options.period.max(MIN_GAP),
            budget: TokenBucket::new(ClientLimits { qps, burst, ..ClientLimits::UNLIMITED }),
            clock,
            wake: Notify::new(),
            pass_asked: AtomicBool::new(false),
            woken_by_jobs: Mutex::new(Vec::new()),
            releasable: Mutex::new(HashMap::new()),
            told: Mutex::new(HashMap::new()),
        })
    }

    /// Runs passes until the task is dropped: after the caches' first sync, then at least once
    /// a period, sooner when an event or a grace's end asks for one.
    pub async fn run(self: Arc<Self>) {
        self.jobs.wait_synced().await;
        self.pods.wait_synced().await;
        loop {
            let next = self.pass().await;
            let wait = next.map_or(self.period, |w| w.min(self.period)).max(MIN_GAP);
            tokio::select! {
                _ = tokio::time::sleep(self.clock.real(wait)) => {}
                _ = self.woken_for_a_pass() => {}
            }
        }
    }

    /// Returns at the first wake still worth a pass a gap after it came. A Job's finish or
    /// deletion is worth one only if a pod of the Job in the cache still holds the finalizer by
    /// then: the Job controller releases a Job's pods before it writes the finish, but the pods'
    /// watch events can arrive after the written Job. A pass for every finish would walk every
    /// cached pod about once a second on a busy worker, to find nothing.
    async fn woken_for_a_pass(&self) {
        loop {
            self.wake.notified().await;
            tokio::time::sleep(MIN_GAP).await;
            let jobs = std::mem::take(&mut *self.woken_by_jobs.lock());
            if self.pass_asked.swap(false, Ordering::Relaxed)
                || jobs.iter().any(|uid| self.holds_pods_of(uid))
            {
                return;
            }
        }
    }

    /// Whether a pod of the Job of `job_uid` in the cache still holds the tracking finalizer.
    fn holds_pods_of(&self, job_uid: &str) -> bool {
        self.pods.by_index(PODS_BY_JOB_UID.name, job_uid).iter().any(|pod| has_tracking_finalizer(pod))
    }

    /// Wakes the sweeper for `job`; [`Self::woken_for_a_pass`] decides whether it passes.
    fn wake_for(&self, job: &Job) {
        if let Some(uid) = job.metadata.uid.as_deref() {
            self.woken_by_jobs.lock().push(uid.to_string());
            self.wake.notify_one();
        }
    }

    fn job_seen(&self, pod: &Pod) -> (Option<Arc<Job>>, Option<std::time::Duration>) {
        match controlling_job_uid(pod) {
            Some(uid) => {
                let job = self.jobs.first_by_index(JOBS_BY_UID.name, uid);
                let deleted_ago = if job.is_none() { self.jobs.deleted_ago(uid) } else { None };
                (job, deleted_ago)
            }
            None => (None, None),
        }
    }

    /// One pass; answers how soon a pod that waits on a grace will be due.
    async fn pass(&self) -> Option<Duration> {
        self.metrics.passes.inc();
        let now = self.clock.now();
        let mut soonest: Option<Duration> = None;
        let mut by_namespace: BTreeMap<String, Vec<Candidate>> = BTreeMap::new();
        for shard in self.shards.held() {
            // Only shards acted on here: a Preparing one is still its old owner's to sweep, and
            // its pods would be counted twice in the fleet's backlog.
            let active = self.shards.status(shard).is_some_and(|s| s.phase == ShardPhase::Active);
            if !(active && self.jobs.has_synced(shard) && self.pods.has_synced(shard)) {
                continue;
            }
            for pod in self.pods.in_shard(shard) {
                if !has_tracking_finalizer(&pod) {
                    continue;
                }
                let (job, deleted_ago) = self.job_seen(&pod);
                let seen = match &job {
                    Some(j) => JobSeen::Cached(j),
                    None => JobSeen::Missing { deleted_ago },
                };
                match decide(&pod, seen, &self.rules, now) {
                    Verdict::Leave => {}
                    Verdict::Wait(w) => soonest = Some(soonest.map_or(w, |s| s.min(w))),
                    Verdict::Release(reason) => {
                        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
                        by_namespace.entry(namespace).or_default().push(Candidate { pod, reason, job });
                    }
                }
            }
        }
        // Forget the pods no longer releasable (released, gone, or no longer ours).
        let found: std::collections::HashSet<String> =
            by_namespace.values().flatten().filter_map(|c| c.pod.metadata.uid.clone()).collect();
        {
            let started = Instant::now();
            let mut releasable = self.releasable.lock();
            releasable.retain(|uid, _| found.contains(uid));
            for uid in &found {
                releasable.entry(uid.clone()).or_insert(Releasable {
                    since: started,
                    failures: 0,
                    retry_at: None,
                });
            }
        }
        self.told.lock().retain(|_, (_, at)| at.elapsed() < pacing::EVENT_REPEAT);
        // The backlog as found, before the patches (a pass under refusals takes a while), and
        // again as left after them.
        self.publish_backlog();
        for (namespace, candidates) in by_namespace {
            // Holds the shard in flight, so a REVOKE waits for these patches.
            let Some((epoch, _in_flight)) = self.shards.begin(&namespace) else { continue };
            let fence = Fence::new(self.shards.clone(), &namespace, epoch);
            let mut owners_checked: HashMap<String, bool> = HashMap::new();
            for c in candidates {
                if self.release(&fence, epoch, &c, &mut owners_checked).await.is_err() {
                    // The shard left this worker: its next owner sweeps it.
                    break;
                }
            }
        }
        self.publish_backlog();
        soonest
    }

    fn publish_backlog(&self) {
        let releasable = self.releasable.lock();
        self.metrics.held_pods.set(releasable.len() as i64);
        let oldest = releasable.values().map(|r| r.since.elapsed()).max().unwrap_or_default();
        self.metrics.held_oldest_age_seconds.set(oldest.as_secs_f64());
    }

    /// Whether the API server still has the Job the pod's controller reference names (the cache
    /// may lag a Job created just now, or a watch restarted): one GET per Job name per pass.
    async fn job_exists(&self, pod: &Pod, checked: &mut HashMap<String, bool>) -> Result<bool, kube::Error> {
        let Some(r) = pod
            .metadata
            .owner_references
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .find(|r| r.controller == Some(true))
        else {
            return Ok(false);
        };
        if let Some(exists) = checked.get(&r.name) {
            return Ok(*exists);
        }
        tokio::time::sleep(self.budget.reserve()).await;
        let api: Api<Job> =
            Api::namespaced(self.client.clone(), pod.metadata.namespace.as_deref().unwrap_or_default());
        let exists =
            api.get_opt(&r.name).await?.is_some_and(|j| j.metadata.uid.as_deref() == Some(r.uid.as_str()));
        checked.insert(r.name.clone(), exists);
        Ok(exists)
    }

    /// Tries one pod; `Err` only when the fence refused (the shard is no longer ours).
    async fn release(
        &self,
        fence: &Fence,
        epoch: Epoch,
        c: &Candidate,
        owners_checked: &mut HashMap<String, bool>,
    ) -> Result<(), ()> {
        let uid = c.pod.metadata.uid.clone().unwrap_or_default();
        let key = ObjectKey::of(&c.pod.metadata);
        if self.releasable.lock().get(&uid).and_then(|r| r.retry_at).is_some_and(|at| Instant::now() < at) {
            return Ok(());
        }
        if c.reason == ReleaseReason::JobGone {
            match self.job_exists(&c.pod, owners_checked).await {
                Ok(false) => {}
                Ok(true) => {
                    self.releasable.lock().remove(&uid);
                    return Ok(());
                }
                Err(e) => {
                    tracing::info!(pod = %key, error = %e, "could not confirm that the pod's Job is gone; next pass");
                    return Ok(());
                }
            }
        }
        tokio::time::sleep(self.budget.reserve()).await;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        let patch = Patch::Strategic(remove_tracking_finalizer_patch());
        match fence.send_object(api.patch(&key.name, &PatchParams::default(), &patch)).await {
            Ok(_) => {
                self.metrics.releases.with_label_values(&[c.reason.as_str()]).inc();
                self.releasable.lock().remove(&uid);
                tracing::info!(pod = %key, reason = c.reason.as_str(), "removed a tracking finalizer nothing else would");
                Ok(())
            }
            Err(e) if e.is_not_found() => {
                self.releasable.lock().remove(&uid);
                Ok(())
            }
            Err(WriteError::Fenced(_)) => Err(()),
            Err(WriteError::Api(e)) => {
                let failures = {
                    let mut releasable = self.releasable.lock();
                    let Some(r) = releasable.get_mut(&uid) else { return Ok(()) };
                    r.failures += 1;
                    r.retry_at = Some(Instant::now() + pacing::retry_after(r.failures, self.period));
                    r.failures
                };
                let code = crate::api_errors::status(&e).map(|s| s.code);
                let message = crate::api_errors::message(&e);
                if code.is_some_and(is_rejection) {
                    self.metrics.rejections.inc();
                    tracing::warn!(pod = %key, failures, %message, "the API server refused to remove the tracking finalizer");
                    self.tell(epoch, c, &uid, &message);
                } else {
                    tracing::info!(pod = %key, failures, %message, "removing the tracking finalizer failed; retrying with back-off");
                }
                Ok(())
            }
        }
    }

    /// Warning Events for a refused removal, on the pod and on its Job, each paced apart.
    fn tell(&self, epoch: Epoch, c: &Candidate, pod_uid: &str, message: &str) {
        let pod_name = c.pod.metadata.name.as_deref().unwrap_or_default();
        let text = format!(
            "Removing the finalizer {} from pod {pod_name} was rejected: {message}",
            crate::job::core::JOB_TRACKING_FINALIZER
        );
        let mut told = self.told.lock();
        let mut due = |uid: &str| {
            let last = told.get(uid).map(|(m, at)| (m.as_str(), at.elapsed()));
            let due = pacing::tell(message, last);
            if due {
                told.insert(uid.to_string(), (message.to_string(), Instant::now()));
            }
            due
        };
        if due(pod_uid) {
            self.events.publish(
                epoch,
                PendingEvent::for_object(&*c.pod, EventType::Warning, REJECTED_REASON, &text),
            );
        }
        if let Some(job) = &c.job
            && let Some(job_uid) = job.metadata.uid.as_deref()
            && due(job_uid)
        {
            self.events
                .publish(epoch, PendingEvent::for_object(&**job, EventType::Warning, REJECTED_REASON, &text));
        }
    }
}

/// A refusal by policy (admission webhooks answer 400, 403 or 422 with their message), as
/// opposed to a conflict, throttling, a pod already gone, or a server error.
fn is_rejection(code: u16) -> bool {
    (400..500).contains(&code) && !matches!(code, 404 | 409 | 429)
}

impl Handler<Pod> for FinalizerSweeper {
    fn applied(&self, _old: Option<&Arc<Pod>>, pod: &Arc<Pod>) {
        // A pod that holds the finalizer and whose Job this cache does not have: due soon.
        if has_tracking_finalizer(pod) && self.job_seen(pod).0.is_none() {
            self.pass_asked.store(true, Ordering::Relaxed);
            self.wake.notify_one();
        }
    }

    fn deleted(&self, _pod: &Arc<Pod>) {}
}

impl Handler<Job> for FinalizerSweeper {
    fn applied(&self, old: Option<&Arc<Job>>, job: &Arc<Job>) {
        if is_job_finished(job) && !old.is_some_and(|o| is_job_finished(o)) {
            self.wake_for(job);
        }
    }

    fn deleted(&self, job: &Arc<Job>) {
        self.wake_for(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_refusals_are_rejections_and_transient_failures_are_not() {
        for code in [400, 403, 422] {
            assert!(is_rejection(code), "{code}");
        }
        for code in [404, 409, 429, 500, 503] {
            assert!(!is_rejection(code), "{code}");
        }
    }
}
