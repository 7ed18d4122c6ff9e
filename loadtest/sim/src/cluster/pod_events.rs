//! The kubelet's pod events, as client-go's legacy `record.EventRecorder` writes them (core/v1,
//! `source` and `reportingComponent` kubelet, `reportingInstance` the node), with the event
//! correlator's dedupe: the same event again bumps `count` and `lastTimestamp`. As the
//! recorder's broadcaster, writes happen off the kubelet's path through a queue of 1000 that
//! drops events when full. Messages are upstream's (pkg/kubelet/images, kuberuntime).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::apiserver::{ApiError, ApiServer, Subresource, Target, WriteOptions, meta};

pub const NORMAL: &str = "Normal";
pub const WARNING: &str = "Warning";

/// One event: its type (`Normal`, `Warning`), reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletEvent {
    pub kind: &'static str,
    pub reason: &'static str,
    pub message: String,
}

fn event(kind: &'static str, reason: &'static str, message: String) -> KubeletEvent {
    KubeletEvent { kind, reason, message }
}

/// The pod an event is about.
#[derive(Debug, Clone)]
pub struct PodRef<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub node: &'a str,
}

/// `Pulling image "busybox"` (images.PullingImage).
pub fn pulling(image: &str) -> KubeletEvent {
    event(NORMAL, "Pulling", format!("Pulling image {}", crate::go_fmt::go_quote(image)))
}

/// The sim pulls instantly; the message keeps upstream's shape (images.PulledImage).
pub fn pulled(image: &str) -> KubeletEvent {
    let image = crate::go_fmt::go_quote(image);
    event(
        NORMAL,
        "Pulled",
        format!("Successfully pulled image {image} in 0s (0s including waiting). Image size: 0 bytes."),
    )
}

/// `Container image "busybox" already present on machine` (images.PulledImage).
pub fn already_present(image: &str) -> KubeletEvent {
    event(
        NORMAL,
        "Pulled",
        format!("Container image {} already present on machine", crate::go_fmt::go_quote(image)),
    )
}

/// `Created container: main` (events.CreatedContainer).
pub fn created(container: &str) -> KubeletEvent {
    event(NORMAL, "Created", format!("Created container: {container}"))
}

/// `Started container main` (events.StartedContainer).
pub fn started(container: &str) -> KubeletEvent {
    event(NORMAL, "Started", format!("Started container {container}"))
}

/// `Stopping container main` (events.KillingContainer, killContainer's default message).
pub fn killing(container: &str) -> KubeletEvent {
    event(NORMAL, "Killing", format!("Stopping container {container}"))
}

/// `Back-off restarting failed container main in pod p_ns(uid)` (events.BackOffStartContainer).
pub fn back_off(container: &str, pod: &PodRef) -> KubeletEvent {
    event(
        WARNING,
        "BackOff",
        format!("Back-off restarting failed container {container} in pod {}", format_pod(pod)),
    )
}

/// kubelet's `format.Pod`: `name_namespace(uid)`.
pub fn format_pod(pod: &PodRef) -> String {
    format!("{}_{}({})", pod.name, pod.namespace, pod.uid)
}

/// The broadcaster's queue length (`maxQueuedEvents`).
const QUEUE: usize = 1000;

enum Message {
    Record { pod: OwnedPodRef, container: Option<String>, event: KubeletEvent },
    Forget { uid: String },
}

struct OwnedPodRef {
    namespace: String,
    name: String,
    uid: String,
    node: String,
}

/// Where the kubelet records events: a queue to the writer task.
pub struct EventRecorder {
    tx: Option<mpsc::Sender<Message>>,
}

impl EventRecorder {
    /// A recorder with its writer task; a disabled one records nothing. Call inside a runtime.
    pub fn new(api: Arc<ApiServer>, enabled: bool) -> Self {
        if !enabled {
            return Self { tx: None };
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(EventWriter::new(api).run(rx));
        Self { tx: Some(tx) }
    }

    /// Records one event about `container` of `pod` (the pod itself when `None`); dropped when
    /// the queue is full, as the broadcaster drops.
    pub fn record(&self, pod: &PodRef, container: Option<&str>, event: KubeletEvent) {
        let Some(tx) = &self.tx else { return };
        let pod = OwnedPodRef {
            namespace: pod.namespace.into(),
            name: pod.name.into(),
            uid: pod.uid.into(),
            node: pod.node.into(),
        };
        if tx.try_send(Message::Record { pod, container: container.map(str::to_string), event }).is_err() {
            tracing::debug!("kubelet event queue full, event dropped");
        }
    }

    /// Forgets the events of a pod that is gone.
    pub fn forget_pod(&self, uid: &str) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(Message::Forget { uid: uid.into() });
        }
    }
}

/// Writes events, folding repeats into one event per (object, reason, message).
struct EventWriter {
    api: Arc<ApiServer>,
    events: Target,
    /// Pod uid → (dedupe key, event name).
    recorded: HashMap<Box<str>, Vec<(String, String)>>,
    last_nanos: i128,
}

impl EventWriter {
    fn new(api: Arc<ApiServer>) -> Self {
        let events = api.builtin("", "v1", "events");
        Self { api, events, recorded: HashMap::new(), last_nanos: 0 }
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Message>) {
        while let Some(message) = rx.recv().await {
            match message {
                Message::Record { pod, container, event } => {
                    let pod =
                        PodRef { namespace: &pod.namespace, name: &pod.name, uid: &pod.uid, node: &pod.node };
                    self.record(&pod, container.as_deref(), event);
                }
                Message::Forget { uid } => {
                    self.recorded.remove(uid.as_str());
                }
            }
        }
    }

    fn record(&mut self, pod: &PodRef, container: Option<&str>, event: KubeletEvent) {
        let KubeletEvent { kind, reason, message } = event;
        let field_path = container.map(|c| format!("spec.containers{{{c}}}"));
        let key = format!("{}\u{0}{reason}\u{0}{kind}\u{0}{message}", field_path.as_deref().unwrap_or(""));
        let known = self
            .recorded
            .get(pod.uid)
            .and_then(|v| v.iter().find(|(k, _)| *k == key))
            .map(|(_, n)| n.clone());
        let result = match known {
            Some(name) => self.bump(pod.namespace, &name),
            None => self.create(pod, field_path, kind, reason, &message).map(|name| {
                self.recorded.entry(pod.uid.into()).or_default().push((key, name));
            }),
        };
        if let Err(e) = result
            && e.code != 403
            && e.code != 404
        {
            tracing::debug!(pod = pod.name, reason, error = %e, "kubelet event not recorded");
        }
    }

    /// `<pod>.<hex unix nanos>`, as the recorder names events; strictly increasing so two
    /// events in the same nanosecond do not collide.
    fn event_name(&mut self, pod: &str) -> String {
        let now = jiff::Timestamp::now().as_nanosecond();
        self.last_nanos = now.max(self.last_nanos + 1);
        format!("{pod}.{:x}", self.last_nanos)
    }

    fn create(
        &mut self,
        pod: &PodRef,
        field_path: Option<String>,
        kind: &str,
        reason: &str,
        message: &str,
    ) -> Result<String, ApiError> {
        let name = self.event_name(pod.name);
        let now = meta::now_seconds();
        let mut involved = json!({
            "kind": "Pod", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "apiVersion": "v1",
        });
        if let Some(path) = field_path {
            involved["fieldPath"] = json!(path);
        }
        let event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": pod.namespace},
            "involvedObject": involved,
            "reason": reason, "message": message, "type": kind,
            "source": {"component": "kubelet", "host": pod.node},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            "eventTime": null, "reportingComponent": "kubelet", "reportingInstance": pod.node,
        });
        self.api.create(&self.events, pod.namespace, event, &WriteOptions::default())?;
        Ok(name)
    }

    fn bump(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let now = meta::now_seconds();
        self.api.update_with(&self.events, namespace, name, Subresource::Main, |e| {
            let count = e.get("count").and_then(Value::as_i64).unwrap_or(1);
            e["count"] = json!(count + 1);
            e["lastTimestamp"] = json!(now);
            Ok(true)
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The strings of pkg/kubelet/images/image_manager.go and kuberuntime_container.go.
    #[test]
    fn messages_match_the_kubelet() {
        let pod = PodRef { namespace: "ns", name: "p", uid: "u-1", node: "n" };
        let cases = [
            (pulling("busybox"), "Normal", "Pulling", r#"Pulling image "busybox""#),
            (
                pulled("busybox:1.36"),
                "Normal",
                "Pulled",
                r#"Successfully pulled image "busybox:1.36" in 0s (0s including waiting). Image size: 0 bytes."#,
            ),
            (
                already_present("busybox"),
                "Normal",
                "Pulled",
                r#"Container image "busybox" already present on machine"#,
            ),
            (created("main"), "Normal", "Created", "Created container: main"),
            (started("main"), "Normal", "Started", "Started container main"),
            (killing("main"), "Normal", "Killing", "Stopping container main"),
            (
                back_off("main", &pod),
                "Warning",
                "BackOff",
                "Back-off restarting failed container main in pod p_ns(u-1)",
            ),
        ];
        for (e, want_kind, want_reason, want_message) in cases {
            assert_eq!((e.kind, e.reason, e.message.as_str()), (want_kind, want_reason, want_message));
        }
    }
}
