//! printEvent, for core/v1 Events and for events.k8s.io/v1 Events seen through the apiserver's
//! conversion to the internal core type (regarding -> involvedObject, note -> message,
//! deprecated* -> the legacy fields).

use jiff::Timestamp;
use serde_json::json;

use super::{Col, NAME_DOC, Row, col, wide};
use crate::kubectl::Obj;
use crate::kubectl::duration::since;
use crate::resources::ResourceType;

pub(super) const COLUMNS: &[Col] = &[
    col("Last Seen", "string", "The time at which the most recent occurrence of this event was recorded."),
    col("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future"),
    col(
        "Reason",
        "string",
        "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
    ),
    col("Object", "string", "The object that this event is about."),
    wide(
        "Subobject",
        "string",
        "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.",
    ),
    wide(
        "Source",
        "string",
        "The component reporting this event. Should be a short machine understandable string.",
    ),
    col("Message", "string", "A human-readable description of the status of this operation."),
    wide(
        "First Seen",
        "string",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
    ),
    wide("Count", "string", "The number of times this event has occurred."),
    Col { name: "Name", kind: "string", format: "name", description: NAME_DOC, priority: 1 },
];

/// The internal `api.Event` fields printEvent reads, from either wire shape.
pub(super) struct Event<'a> {
    obj: Obj<'a>,
    involved: Obj<'a>,
    message: &'a str,
    source: Obj<'a>,
    first_timestamp: &'static str,
    last_timestamp: &'static str,
    count: &'static str,
    reporting_controller: &'static str,
}

impl<'a> Event<'a> {
    /// Reads either wire shape: by the object's own apiVersion or shape-defining fields, else by
    /// the resource it is served as.
    pub(super) fn of(obj: Obj<'a>, rt: &ResourceType) -> Self {
        let api_version = obj.str(&["apiVersion"]);
        let v1 = if api_version.starts_with("events.k8s.io/") || obj.has(&["regarding"]) || obj.has(&["note"])
        {
            true
        } else if api_version == "v1" || obj.has(&["involvedObject"]) || obj.has(&["message"]) {
            false
        } else {
            rt.group == "events.k8s.io"
        };
        if v1 { Self::events_v1(obj) } else { Self::core(obj) }
    }

    fn core(obj: Obj<'a>) -> Self {
        Self {
            obj,
            involved: obj.sub(&["involvedObject"]),
            message: obj.str(&["message"]),
            source: obj.sub(&["source"]),
            first_timestamp: "firstTimestamp",
            last_timestamp: "lastTimestamp",
            count: "count",
            reporting_controller: "reportingComponent",
        }
    }

    fn events_v1(obj: Obj<'a>) -> Self {
        Self {
            obj,
            involved: obj.sub(&["regarding"]),
            message: obj.str(&["note"]),
            source: obj.sub(&["deprecatedSource"]),
            first_timestamp: "deprecatedFirstTimestamp",
            last_timestamp: "deprecatedLastTimestamp",
            count: "deprecatedCount",
            reporting_controller: "reportingController",
        }
    }
}

fn first_non_empty<'s>(a: &'s str, b: &'s str) -> &'s str {
    if a.is_empty() { b } else { a }
}

pub(super) fn row(e: &Event, now: Timestamp) -> Row {
    let o = e.obj;
    let mut first_seen = since(o.time(&[e.first_timestamp]), now);
    if o.time(&[e.first_timestamp]).is_none() {
        first_seen = since(o.time(&["eventTime"]), now);
    }
    let mut last_seen = since(o.time(&[e.last_timestamp]), now);
    if o.time(&[e.last_timestamp]).is_none() {
        last_seen = first_seen.clone();
    }
    let mut count = o.int(&[e.count]);
    if o.has(&["series"]) {
        last_seen = since(o.time(&["series", "lastObservedTime"]), now);
        count = o.int(&["series", "count"]);
    } else if count == 0 {
        // Singleton events don't have a count set in the new API.
        count = 1;
    }
    let kind = e.involved.str(&["kind"]).to_lowercase();
    let target = match e.involved.str(&["name"]) {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let component = first_non_empty(e.source.str(&["component"]), o.str(&[e.reporting_controller]));
    let instance = first_non_empty(e.source.str(&["host"]), o.str(&["reportingInstance"]));
    let source = if instance.is_empty() { component.to_string() } else { format!("{component}, {instance}") };
    Row::cells(vec![
        json!(last_seen),
        json!(o.str(&["type"])),
        json!(o.str(&["reason"])),
        json!(target),
        json!(e.involved.str(&["fieldPath"])),
        json!(source),
        json!(e.message.trim()),
        json!(first_seen),
        json!(count),
        json!(o.name()),
    ])
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::test_support::*;

    /// printers_test.go TestPrintEvent / TestPrintEventsResultSorted-style cases (wide cells:
    /// Last Seen, Type, Reason, Object, Subobject, Source, Message, First Seen, Count, Name).
    #[test]
    fn print_core_event() {
        let cases: Vec<(Value, Vec<Value>)> = vec![
            (
                json!({"metadata": {"name": "event1"}, "type": "Normal", "reason": "Event Reason",
                       "message": "Message Data", "source": {"component": "kubelet", "host": "Node1"},
                       "involvedObject": {"kind": "Deployment", "name": "Deployment Name", "fieldPath": "spec.containers{foo}"},
                       "firstTimestamp": at(-3 * 86400), "lastTimestamp": at(-2 * 86400), "count": 6}),
                vec![
                    json!("2d"),
                    json!("Normal"),
                    json!("Event Reason"),
                    json!("deployment/Deployment Name"),
                    json!("spec.containers{foo}"),
                    json!("kubelet, Node1"),
                    json!("Message Data"),
                    json!("3d"),
                    json!(6),
                    json!("event1"),
                ],
            ),
            // eventTime only (new API via core): first and last seen from eventTime, count 1,
            // source from reportingComponent/reportingInstance.
            (
                json!({"metadata": {"name": "event2"}, "type": "Warning", "reason": "BackOff", "message": "  spaced  ",
                       "reportingComponent": "kubelet", "reportingInstance": "node-a",
                       "involvedObject": {"kind": "Pod"}, "eventTime": "2026-03-01T11:59:30.123456Z"}),
                vec![
                    json!("29s"),
                    json!("Warning"),
                    json!("BackOff"),
                    json!("pod"),
                    json!(""),
                    json!("kubelet, node-a"),
                    json!("spaced"),
                    json!("29s"),
                    json!(1),
                    json!("event2"),
                ],
            ),
            // series: last seen and count from the series
            (
                json!({"metadata": {"name": "event3"}, "involvedObject": {"kind": "Job", "name": "j"},
                       "source": {"component": "job-controller"},
                       "firstTimestamp": at(-600), "lastTimestamp": at(-300), "count": 2,
                       "series": {"count": 7, "lastObservedTime": "2026-03-01T11:59:50.000000Z"}}),
                vec![
                    json!("10s"),
                    json!(""),
                    json!(""),
                    json!("job/j"),
                    json!(""),
                    json!("job-controller"),
                    json!(""),
                    json!("10m"),
                    json!(7),
                    json!("event3"),
                ],
            ),
            (
                json!({}),
                vec![
                    json!("<unknown>"),
                    json!(""),
                    json!(""),
                    json!(""),
                    json!(""),
                    json!(""),
                    json!(""),
                    json!("<unknown>"),
                    json!(1),
                    json!(""),
                ],
            ),
        ];
        for (ev, want) in cases {
            assert_eq!(cells("", "events", &ev), want, "{}", ev["metadata"]["name"]);
        }
    }

    /// events.k8s.io/v1 Events print like their core conversion.
    #[test]
    fn print_events_v1_event() {
        let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1.abc"},
                        "eventTime": "2026-03-01T11:58:00.000000Z", "reportingController": "batchfleet.io/worker",
                        "reportingInstance": "worker-0", "action": "Reconcile", "reason": "Started", "type": "Normal",
                        "regarding": {"kind": "Job", "namespace": "ns", "name": "build-1", "fieldPath": ""},
                        "note": "started build",
                        "series": {"count": 3, "lastObservedTime": "2026-03-01T11:59:55.000000Z"}});
        let want = vec![
            json!("5s"),
            json!("Normal"),
            json!("Started"),
            json!("job/build-1"),
            json!(""),
            json!("batchfleet.io/worker, worker-0"),
            json!("started build"),
            json!("2m"),
            json!(3),
            json!("e1.abc"),
        ];
        assert_eq!(cells("events.k8s.io", "events", &ev), want);

        let legacy = json!({"metadata": {"name": "e2"}, "regarding": {"kind": "Pod", "name": "p"},
                            "deprecatedSource": {"component": "kubelet"}, "deprecatedFirstTimestamp": at(-120),
                            "deprecatedLastTimestamp": at(-60), "deprecatedCount": 4});
        let got = cells("events.k8s.io", "events", &legacy);
        assert_eq!(
            (&got[0], &got[3], &got[5], &got[7], &got[8]),
            (&json!("60s"), &json!("pod/p"), &json!("kubelet"), &json!("2m"), &json!(4))
        );

        // Either shape prints the same whichever resource serves it.
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e3"},
                          "involvedObject": {"kind": "Pod", "name": "p"}, "message": "m", "count": 2});
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e3"},
                        "regarding": {"kind": "Pod", "name": "p"}, "note": "m", "deprecatedCount": 2});
        for obj in [&core, &v1] {
            for group in ["", "events.k8s.io"] {
                let got = cells(group, "events", obj);
                assert_eq!(
                    (&got[3], &got[6], &got[8]),
                    (&json!("pod/p"), &json!("m"), &json!(2)),
                    "{group} {obj}"
                );
            }
        }
    }
}
