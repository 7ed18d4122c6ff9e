//! Events the sim's controllers record about objects, as client-go's two recorders write them:
//! the events.k8s.io/v1 recorder (kube-scheduler) with isomorphic repeats folded into a series,
//! and the legacy core/v1 recorder (kube-controller-manager's controllers).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::apiserver::meta;
use crate::apiserver::{ApiError, ApiServer, WriteOptions};
use crate::store::StoredObject;

/// The object an event is about.
#[derive(Debug, Clone)]
pub struct Regarding {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
}

impl Regarding {
    pub fn pod(stored: &StoredObject) -> Self {
        Self {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: stored.namespace.to_string(),
            name: stored.name.to_string(),
            uid: stored.uid.to_string(),
            resource_version: stored.rv.to_string(),
        }
    }

    fn json(&self) -> Value {
        let mut v = json!({"apiVersion": self.api_version, "kind": self.kind, "name": self.name});
        if !self.namespace.is_empty() {
            v["namespace"] = json!(self.namespace);
        }
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        if !self.resource_version.is_empty() {
            v["resourceVersion"] = json!(self.resource_version);
        }
        v
    }

    /// Events about cluster-scoped objects go to `default`, as client-go records them.
    fn event_namespace(&self) -> &str {
        if self.namespace.is_empty() { "default" } else { &self.namespace }
    }
}

/// What an event says.
#[derive(Debug, Clone, Copy)]
pub struct Note<'a> {
    pub kind: &'a str,
    pub reason: &'a str,
    pub action: &'a str,
    pub message: &'a str,
}

/// An event already written, so a repeat can join its series.
#[derive(Debug, Clone)]
pub struct Recorded {
    namespace: String,
    name: String,
    message: String,
    count: i64,
}

fn event_name(name: &str) -> String {
    let nanos = jiff::Timestamp::now().as_nanosecond();
    format!("{name}.{nanos:x}")
}

/// Writes an events.k8s.io/v1 event, or, when `previous` is the same note about the same
/// object, bumps its series (count and lastObservedTime) as the events broadcaster does.
pub fn record_v1(
    api: &Arc<ApiServer>,
    regarding: &Regarding,
    note: Note<'_>,
    controller: &str,
    instance: &str,
    previous: Option<&Recorded>,
) -> Result<Recorded, ApiError> {
    let events = api.builtin("events.k8s.io", "v1", "events");
    if let Some(prev) = previous.filter(|p| p.message == note.message) {
        let count = prev.count + 1;
        let now = meta::now_micros();
        // The stored form is core/v1; its `series` carries the same two fields.
        let core = api.builtin("", "v1", "events");
        let updated =
            api.update_with(&core, &prev.namespace, &prev.name, crate::apiserver::Subresource::Main, |e| {
                e["series"] = json!({"count": count, "lastObservedTime": now});
                Ok(true)
            });
        match updated {
            Ok(_) => return Ok(Recorded { count, ..prev.clone() }),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let namespace = regarding.event_namespace().to_string();
    let name = event_name(&regarding.name);
    let event = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "eventTime": meta::now_micros(),
        "reportingController": controller,
        "reportingInstance": instance,
        "action": note.action,
        "reason": note.reason,
        "type": note.kind,
        "note": note.message,
        "regarding": regarding.json(),
    });
    api.create(&events, &namespace, event, &WriteOptions::default())?;
    Ok(Recorded { namespace, name, message: note.message.to_string(), count: 1 })
}

/// Writes a core/v1 event as client-go's `record.EventRecorder` does for controllers of
/// kube-controller-manager: first/last timestamps, count 1, `source.component`.
pub fn record_core(
    api: &Arc<ApiServer>,
    regarding: &Regarding,
    note: Note<'_>,
    component: &str,
) -> Result<(), ApiError> {
    let events = api.builtin("", "v1", "events");
    let namespace = regarding.event_namespace().to_string();
    let now = meta::now_seconds();
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": event_name(&regarding.name), "namespace": namespace},
        "involvedObject": regarding.json(),
        "reason": note.reason,
        "message": note.message,
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "type": note.kind,
        "eventTime": null,
        "reportingComponent": component,
        "reportingInstance": "",
    });
    api.create(&events, &namespace, event, &WriteOptions::default())?;
    Ok(())
}
