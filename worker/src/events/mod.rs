//! Events, recorded the way kube-controller-manager's controllers record them (client-go
//! `tools/record`): core/v1 Events with a source component, written off the sync path through a
//! bounded buffer that drops (with a log line) rather than slow a controller down, and passed
//! through upstream's correlator first, so repeats become a count on one Event, floods of
//! similar events are combined, and each object gets a burst of 25 then one every 5 minutes.
//! Every Event write is fenced like any other write: an event of a shard this worker no longer
//! holds at the epoch of the reconcile that raised it, or whose REVOKE has answered, is dropped
//! and counted ([`ShardTable::stale_events`]), never sent.

mod correlator;
mod own_reasons;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;
use kube::api::{Patch, PatchParams, PostParams};
use tokio::sync::mpsc;

use correlator::{Correlated, EventCorrelator};

use crate::api_errors;
use crate::client::lean_writes::{self, WrittenEvent};
use crate::client::{ApiClient, ApiWrites};
use crate::clock::Clock;
use crate::runtime::shard::{Epoch, ShardTable, WriteKind};

/// Upstream's broadcaster queue length.
const BUFFER: usize = 1000;
/// Upstream's `maxTriesPerEvent` and `sleepDuration`: a write that fails in transport is retried.
const MAX_TRIES: u32 = 12;
const RETRY_SLEEP: Duration = Duration::from_secs(10);

/// An event's type, as the API spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An event a controller wants recorded.
#[derive(Debug, Clone)]
pub struct PendingEvent {
    pub regarding: ObjectReference,
    pub type_: EventType,
    pub reason: String,
    pub message: String,
    /// When the controller recorded it: client-go stamps an event in `Eventf`, not when its
    /// broadcaster gets round to writing it. [`EventSink::publish`] stamps it with the sink's
    /// clock.
    pub at: jiff::Timestamp,
}

impl PendingEvent {
    pub fn for_object<K: Resource<DynamicType = ()>>(
        obj: &K,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Self {
        Self {
            regarding: obj.object_ref(&()),
            type_,
            reason: reason.into(),
            message: message.into(),
            at: jiff::Timestamp::UNIX_EPOCH,
        }
    }
}

/// client-go's `recorder.makeEvent`: named after the object and the time in hex nanoseconds.
pub fn make_event(source: &EventSource, pending: PendingEvent) -> Event {
    let namespace = event_namespace(&pending.regarding).to_string();
    let now = pending.at;
    let name = correlator::event_name(pending.regarding.name.as_deref().unwrap_or(""), now);
    Event {
        metadata: ObjectMeta { name: Some(name), namespace: Some(namespace), ..ObjectMeta::default() },
        involved_object: pending.regarding,
        reason: Some(pending.reason),
        message: Some(pending.message),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        type_: Some(pending.type_.as_str().to_string()),
        source: Some(source.clone()),
        reporting_component: source.component.clone(),
        reporting_instance: source.host.clone(),
        ..Event::default()
    }
}

/// An event waiting to be written, with the epoch its write is fenced on.
struct Queued {
    event: PendingEvent,
    epoch: Epoch,
}

/// The namespace an event about `regarding` is written in.
fn event_namespace(regarding: &ObjectReference) -> &str {
    match regarding.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => ns,
        _ => "default",
    }
}

/// Where controllers put their events. Cheap to clone.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<Queued>,
    dropped: Arc<DropLog>,
    shards: ShardTable,
    clock: Arc<dyn Clock>,
}

#[derive(Default)]
struct DropLog {
    dropped: AtomicU64,
    last_log: parking_lot::Mutex<Option<Instant>>,
}

impl DropLog {
    fn record(&self, reason: &str) {
        let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self.last_log.lock();
        if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            *last = Some(Instant::now());
            tracing::warn!(dropped_total = n, last_reason = reason, "event buffer full; dropping events");
        }
    }
}

impl EventSink {
    /// A sink for `component` (upstream's `EventSource.Component`, e.g. "job-controller") and the
    /// task that writes its events, fenced by `shards`, timed by `clock`.
    pub fn new(
        client: impl Into<ApiClient>,
        component: &str,
        shards: ShardTable,
        clock: Arc<dyn Clock>,
    ) -> (Self, impl std::future::Future<Output = ()>) {
        let (tx, mut rx) = mpsc::channel::<Queued>(BUFFER);
        let source = EventSource { component: Some(component.to_string()), host: None };
        let (fence, now) = (shards.clone(), clock.clone());
        let client = client.into().writes;
        let task = async move {
            let mut correlator = EventCorrelator::new();
            while let Some(Queued { event, epoch }) = rx.recv().await {
                let _writing = crate::executor::NoIdleWait::hold();
                let event = make_event(&source, event);
                record(&client, &fence, epoch, &mut correlator, event, now.now()).await;
            }
        };
        (Self { tx, dropped: Default::default(), shards, clock }, task)
    }

    /// Queues an event raised by a reconcile running under `epoch`.
    pub fn publish(&self, epoch: Epoch, mut event: PendingEvent) {
        event.at = self.clock.now();
        if let Err(mpsc::error::TrySendError::Full(q)) = self.tx.try_send(Queued { event, epoch }) {
            self.dropped.record(&q.event.reason);
        }
    }

    /// Queues an event raised outside a reconcile (a watch handler), under the epoch its shard
    /// is Active at now; with the shard not Active here, the event is dropped and counted.
    pub fn publish_if_active(&self, event: PendingEvent) {
        match self.shards.acts_in(event_namespace(&event.regarding)) {
            Some(epoch) => self.publish(epoch, event),
            None => self.shards.count_stale_event(),
        }
    }
}

/// client-go `recordToSink`: correlate, then patch the existing Event or create a new one;
/// transport failures are retried, rejections are not.
async fn record(
    client: &ApiWrites,
    shards: &ShardTable,
    epoch: Epoch,
    correlator: &mut EventCorrelator,
    event: Event,
    now: jiff::Timestamp,
) {
    let (event, patch) = match correlator.correlate(event, now) {
        Correlated::Skip => return,
        Correlated::Create(event) => (event, None),
        Correlated::Patch { event, patch } => (event, Some(patch)),
    };
    let namespace = event.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    for attempt in 1..=MAX_TRIES {
        // Checked before every attempt: a retry must not outlive the tenure either.
        let held = match shards.hold(&namespace, epoch, WriteKind::Event) {
            Ok(held) => held,
            Err(fenced) => {
                tracing::debug!(reason = ?event.reason, %fenced, "event dropped: its shard is no longer written for");
                return;
            }
        };
        let written = write(client, &namespace, &event, patch.as_ref()).await;
        drop(held);
        match written {
            Ok(written) => {
                correlator.update_state(&as_written(event, written));
                return;
            }
            Err(e) if api_errors::status(&e).is_some() => {
                let error = api_errors::message(&e);
                if api_errors::is_already_exists(&e) || api_errors::is_namespace_terminating(&e) {
                    tracing::debug!(reason = ?event.reason, %error, "server rejected event; not retrying");
                } else {
                    tracing::warn!(reason = ?event.reason, %error, "server rejected event; not retrying");
                }
                return;
            }
            Err(e) if attempt < MAX_TRIES => {
                tracing::warn!(reason = ?event.reason, error = %e, attempt, "writing an event failed; retrying");
                // Upstream randomises the first wait, so recorders that lost the API server
                // together do not come back in step.
                let wait =
                    if attempt == 1 { RETRY_SLEEP.mul_f64(crate::jitter::fraction()) } else { RETRY_SLEEP };
                tokio::time::sleep(wait).await;
            }
            Err(e) => {
                tracing::warn!(reason = ?event.reason, error = %e, "writing an event failed; giving up")
            }
        }
    }
}

/// Patches when the correlator asks for it; creates when it does not, or when the Event to patch
/// is gone.
async fn write(
    client: &ApiWrites,
    namespace: &str,
    event: &Event,
    patch: Option<&serde_json::Value>,
) -> Result<WrittenEvent, kube::Error> {
    let name = event.metadata.name.as_deref().unwrap_or("");
    if let Some(patch) = patch {
        let patch = Patch::Strategic(patch);
        match lean_writes::patch_answered::<Event, _, _>(
            client,
            namespace,
            name,
            &PatchParams::default(),
            &patch,
        )
        .await
        {
            Err(e) if api_errors::is_not_found(&e) => {}
            other => return other,
        }
    }
    let post = PostParams::default();
    if event.metadata.resource_version.is_none() {
        return lean_writes::create_answered(client, namespace, &post, event).await;
    }
    let mut fresh = event.clone();
    fresh.metadata.resource_version = None;
    lean_writes::create_answered(client, namespace, &post, &fresh).await
}

/// The Event as the server wrote it, for the correlator (client-go's `updateState` of the
/// answer): what the answer says of what the correlator keeps, the rest as sent, which the API
/// server stores as it is.
fn as_written(mut sent: Event, answer: WrittenEvent) -> Event {
    sent.metadata.name = answer.metadata.name;
    sent.metadata.resource_version = answer.metadata.resource_version;
    sent.count = answer.count;
    sent.first_timestamp = answer.first_timestamp;
    sent
}
