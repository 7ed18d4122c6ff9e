//! Events, recorded the way upstream's event broadcaster does: off the sync path, through a
//! bounded buffer that drops (with a log line) rather than slow a controller down. Identical
//! events become a series on one Event object (kube-runtime's Recorder).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

/// Upstream's broadcaster queue length.
const BUFFER: usize = 1000;

/// One event to record.
#[derive(Debug, Clone)]
pub struct PendingEvent {
    pub regarding: ObjectReference,
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

impl PendingEvent {
    pub fn for_job(job: &k8s_openapi::api::batch::v1::Job, type_: &str, reason: &str, message: &str) -> Self {
        Self {
            regarding: job.object_ref(&()),
            warning: type_ == "Warning",
            reason: reason.into(),
            message: message.into(),
        }
    }

    pub fn for_object<K: Resource<DynamicType = ()>>(
        obj: &K,
        warning: bool,
        reason: &str,
        message: &str,
    ) -> Self {
        Self { regarding: obj.object_ref(&()), warning, reason: reason.into(), message: message.into() }
    }
}

/// The sending side; cheap to clone.
#[derive(Clone)]
pub struct EventSink {
    tx: mpsc::Sender<PendingEvent>,
    dropped: std::sync::Arc<DropLog>,
}

/// Counts dropped events and logs them at most every ten seconds, so an overloaded sink does
/// not flood the log.
#[derive(Default)]
struct DropLog {
    dropped: std::sync::atomic::AtomicU64,
    last_log: parking_lot::Mutex<Option<std::time::Instant>>,
}

impl DropLog {
    fn record(&self, reason: &str) {
        let n = self.dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut last = self.last_log.lock();
        if last.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(10)) {
            *last = Some(std::time::Instant::now());
            tracing::warn!(dropped_total = n, last_reason = reason, "event buffer full; dropping events");
        }
    }
}

impl EventSink {
    /// A sink recording as `component` (e.g. `job-controller`), and the task that records.
    pub fn new(
        client: kube::Client,
        component: &str,
        instance: Option<String>,
    ) -> (Self, impl std::future::Future<Output = ()>) {
        let (tx, mut rx) = mpsc::channel::<PendingEvent>(BUFFER);
        let recorder = Recorder::new(client, Reporter { controller: component.to_string(), instance });
        let task = async move {
            while let Some(e) = rx.recv().await {
                let event = Event {
                    type_: if e.warning { EventType::Warning } else { EventType::Normal },
                    reason: e.reason.clone(),
                    note: Some(e.message),
                    action: e.reason,
                    secondary: None,
                };
                if let Err(err) = recorder.publish(&event, &e.regarding).await {
                    tracing::warn!(error = %err, reason = %event.reason, "recording an event failed");
                }
            }
        };
        (Self { tx, dropped: Default::default() }, task)
    }

    /// A sink whose events are only returned to the caller, for tests.
    pub fn channel() -> (Self, mpsc::Receiver<PendingEvent>) {
        let (tx, rx) = mpsc::channel(BUFFER);
        (Self { tx, dropped: Default::default() }, rx)
    }

    pub fn publish(&self, event: PendingEvent) {
        if let Err(mpsc::error::TrySendError::Full(e)) = self.tx.try_send(event) {
            self.dropped.record(&e.reason);
        }
    }
}
