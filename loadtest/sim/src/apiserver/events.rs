//! core/v1 Events and events.k8s.io/v1 Events are two views of one store (as in the real
//! apiserver): objects are stored in the core form and converted for the events.k8s.io view.

use serde_json::{Map, Value, json};

/// (core/v1 field, events.k8s.io/v1 field) pairs that only differ by name.
const RENAMED: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// Field names shared by both forms.
const SHARED: &[&str] =
    &["metadata", "reason", "type", "eventTime", "series", "related", "action", "reportingInstance"];

/// The events.k8s.io/v1 form of a stored core/v1 Event.
pub fn to_events_v1(core: &Value) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), json!("Event"));
    out.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    let Some(src) = core.as_object() else { return Value::Object(out) };
    for key in SHARED {
        if let Some(v) = src.get(*key) {
            out.insert((*key).into(), v.clone());
        }
    }
    for (core_name, v1_name) in RENAMED {
        if let Some(v) = src.get(*core_name) {
            if *core_name == "count" && v.as_i64() == Some(0) {
                continue;
            }
            if *core_name == "source" && v.as_object().is_some_and(Map::is_empty) {
                continue;
            }
            out.insert((*v1_name).into(), v.clone());
        }
    }
    if let Some(series) = src.get("series")
        && let Some(obj) = series.as_object()
    {
        let mut s = Map::new();
        if let Some(c) = obj.get("count") {
            s.insert("count".into(), c.clone());
        }
        if let Some(t) = obj.get("lastObservedTime") {
            s.insert("lastObservedTime".into(), t.clone());
        }
        out.insert("series".into(), Value::Object(s));
    }
    Value::Object(out)
}

/// The core/v1 form of an events.k8s.io/v1 Event, for storing.
pub fn from_events_v1(v1: &Value) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), json!("Event"));
    out.insert("apiVersion".into(), json!("v1"));
    let Some(src) = v1.as_object() else { return Value::Object(out) };
    for key in SHARED {
        if let Some(v) = src.get(*key) {
            out.insert((*key).into(), v.clone());
        }
    }
    for (core_name, v1_name) in RENAMED {
        if let Some(v) = src.get(*v1_name) {
            out.insert((*core_name).into(), v.clone());
        }
    }
    // The core form always carries a source; upstream fills it from the reporting controller.
    if !out.contains_key("source") {
        let mut source = Map::new();
        if let Some(c) = src.get("reportingController").and_then(Value::as_str) {
            source.insert("component".into(), json!(c));
        }
        if let Some(h) = src.get("reportingInstance").and_then(Value::as_str) {
            source.insert("host".into(), json!(h));
        }
        out.insert("source".into(), Value::Object(source));
    }
    Value::Object(out)
}

/// A field selector on the events.k8s.io view, in the stored core form's names.
pub fn field_to_core(field: &str) -> String {
    if let Some(rest) = field.strip_prefix("regarding.") {
        return format!("involvedObject.{rest}");
    }
    match field {
        "reportingController" => "reportingComponent".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kube_rs_recorder_event_round_trips_through_the_core_form() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "job.1", "namespace": "ns"},
            "eventTime": "2026-11-22T10:00:00.000000Z",
            "action": "Create", "reason": "SuccessfulCreate", "type": "Normal",
            "note": "Created pod: job-abc",
            "regarding": {"kind": "Job", "name": "job", "namespace": "ns", "apiVersion": "batch/v1"},
            "reportingController": "job-controller", "reportingInstance": "worker-0",
            "series": {"count": 2, "lastObservedTime": "2026-11-22T10:00:01.000000Z"}
        });
        let core = from_events_v1(&v1);
        assert_eq!(core["message"], "Created pod: job-abc");
        assert_eq!(core["involvedObject"]["kind"], "Job");
        assert_eq!(core["source"]["component"], "job-controller");
        let back = to_events_v1(&core);
        for key in [
            "note",
            "regarding",
            "reportingController",
            "reportingInstance",
            "reason",
            "type",
            "action",
            "series",
        ] {
            assert_eq!(back[key], v1[key], "{key}");
        }
    }

    #[test]
    fn field_selectors_on_regarding_map_to_involved_object() {
        assert_eq!(field_to_core("regarding.name"), "involvedObject.name");
        assert_eq!(field_to_core("reason"), "reason");
    }
}
