//! Write answers and refusals read from their protobuf form, as kube-controller-manager's client
//! reads them (`--kube-api-content-type` is protobuf for every request it sends, not only its
//! watches). A pod's create or patch answers with the whole pod, `managedFields` and all, of
//! which the Job controller reads two strings: in JSON that still means scanning every byte for
//! the ends of its strings and brackets, in protobuf stepping over each field by its length.
//!
//! Each decode gives what the JSON decode of the same answer gives (the tests hold them to it):
//! gogo-protobuf writes a Go string or number even when it is empty or zero, where JSON's
//! `omitempty` leaves it out, so an empty string, a zero count and an empty `Time` read as
//! absent. Malformed input is an error, never a panic.

use batchfleet_kube_wire::ProtobufError;
use batchfleet_kube_wire::envelope;
use batchfleet_kube_wire::wire::{FieldReader, WireValue};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::core::Status;
use kube::core::response::{StatusCause, StatusDetails, StatusSummary};

use super::lean_protobuf::time;
use super::lean_writes::{Written, WrittenEvent, WrittenMeta};

/// What a request asks for when its answer has a protobuf decode: client-go's order for a
/// protobuf client, protobuf first, JSON accepted.
pub const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf, application/json";

/// Whether an answer came in protobuf, by its `Content-Type`: anything else is read as JSON.
pub fn is_protobuf(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/vnd.kubernetes.protobuf"))
}

/// What [`Written`] reads of an answer in its envelope: its kind, and the name and
/// resourceVersion of the object written (a `Status`'s list metadata has no name).
pub fn written(body: &[u8]) -> Result<Written, ProtobufError> {
    let unknown = envelope::decode(body)?;
    let is_status = unknown.kind == "Status";
    let mut metadata = WrittenMeta::default();
    let mut fields = FieldReader::new(unknown.raw);
    while let Some((number, value)) = fields.next_field()? {
        if number == 1 {
            metadata = if is_status {
                WrittenMeta { name: None, resource_version: list_meta(value)?.resource_version }
            } else {
                written_meta(value)?
            };
        }
    }
    Ok(Written { kind: non_empty(unknown.kind), metadata })
}

/// What [`WrittenEvent`] reads of a `v1.Event` in its envelope: metadata 1, firstTimestamp 6,
/// count 8 (k8s.io/api/core/v1/generated.proto).
pub fn written_event(body: &[u8]) -> Result<WrittenEvent, ProtobufError> {
    let unknown = envelope::decode(body)?;
    let mut event = WrittenEvent::default();
    let mut fields = FieldReader::new(unknown.raw);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => event.metadata = written_meta(value)?,
            6 => {
                event.first_timestamp = time(value.as_bytes("Event.firstTimestamp")?, "Event.firstTimestamp")?
            }
            8 => event.count = Some(value.as_varint("Event.count")? as i32).filter(|c| *c != 0),
            _ => {}
        }
    }
    Ok(event)
}

/// A `metav1.Status` in its envelope, whole, as kube reads a refusal's JSON: metadata 1, status 2,
/// message 3, reason 4, details 5, code 6 (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto).
pub fn status(body: &[u8]) -> Result<Status, ProtobufError> {
    let unknown = envelope::decode(body)?;
    let mut status = Status::default();
    let mut fields = FieldReader::new(unknown.raw);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => status.metadata = Some(list_meta(value)?),
            2 => {
                status.status = match value.as_str("Status.status")? {
                    "Success" => Some(StatusSummary::Success),
                    "Failure" => Some(StatusSummary::Failure),
                    _ => None,
                }
            }
            3 => status.message = value.as_string("Status.message")?,
            4 => status.reason = value.as_string("Status.reason")?,
            5 => status.details = Some(status_details(value.as_bytes("Status.details")?)?),
            6 => status.code = u16::try_from(value.as_varint("Status.code")? as i32).unwrap_or(0),
            _ => {}
        }
    }
    Ok(status)
}

fn status_details(message: &[u8]) -> Result<StatusDetails, ProtobufError> {
    let mut details = StatusDetails {
        name: String::new(),
        group: String::new(),
        kind: String::new(),
        uid: String::new(),
        causes: Vec::new(),
        retry_after_seconds: 0,
    };
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => details.name = value.as_string("StatusDetails.name")?,
            2 => details.group = value.as_string("StatusDetails.group")?,
            3 => details.kind = value.as_string("StatusDetails.kind")?,
            4 => details.causes.push(status_cause(value.as_bytes("StatusDetails.causes")?)?),
            5 => {
                let seconds = value.as_varint("StatusDetails.retryAfterSeconds")? as i32;
                details.retry_after_seconds = u32::try_from(seconds).unwrap_or(0);
            }
            6 => details.uid = value.as_string("StatusDetails.uid")?,
            _ => {}
        }
    }
    Ok(details)
}

fn status_cause(message: &[u8]) -> Result<StatusCause, ProtobufError> {
    let mut cause = StatusCause { reason: String::new(), message: String::new(), field: String::new() };
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => cause.reason = value.as_string("StatusCause.reason")?,
            2 => cause.message = value.as_string("StatusCause.message")?,
            3 => cause.field = value.as_string("StatusCause.field")?,
            _ => {}
        }
    }
    Ok(cause)
}

/// An `ObjectMeta`'s name 1 and resourceVersion 6; every other field stepped over.
fn written_meta(value: WireValue<'_>) -> Result<WrittenMeta, ProtobufError> {
    let mut meta = WrittenMeta::default();
    let mut fields = FieldReader::new(value.as_bytes("ObjectMeta")?);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => meta.name = non_empty(value.as_string("ObjectMeta.name")?),
            6 => meta.resource_version = non_empty(value.as_string("ObjectMeta.resourceVersion")?),
            _ => {}
        }
    }
    Ok(meta)
}

/// A `ListMeta`: selfLink 1, resourceVersion 2, continue 3, remainingItemCount 4.
fn list_meta(value: WireValue<'_>) -> Result<ListMeta, ProtobufError> {
    let mut meta = ListMeta::default();
    let mut fields = FieldReader::new(value.as_bytes("ListMeta")?);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => meta.self_link = non_empty(value.as_string("ListMeta.selfLink")?),
            2 => meta.resource_version = non_empty(value.as_string("ListMeta.resourceVersion")?),
            3 => meta.continue_ = non_empty(value.as_string("ListMeta.continue")?),
            4 => meta.remaining_item_count = Some(value.as_varint("ListMeta.remainingItemCount")? as i64),
            _ => {}
        }
    }
    Ok(meta)
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

#[cfg(test)]
mod tests {
    use batchfleet_kube_wire::wire::Writer;
    use batchfleet_sim::protobuf::codec::encode_enveloped;
    use batchfleet_sim::protobuf::schema::schema;
    use serde_json::{Value, json};

    use super::*;

    /// `json` in its protobuf envelope, as the sim (checked against k8s-pb) encodes it.
    fn enveloped(json: &Value) -> Vec<u8> {
        encode_enveloped(schema(), json).expect("a kind with a protobuf form")
    }

    fn created_pod() -> Value {
        json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "work-1-x7k2p", "generateName": "work-1-", "namespace": "lt-3",
                "uid": "5d3a", "resourceVersion": "1042", "creationTimestamp": "2026-12-01T05:00:00Z",
                "labels": {"batch.kubernetes.io/job-name": "work-1"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "work-1", "uid": "9c1e",
                    "controller": true, "blockOwnerDeletion": true}],
                "finalizers": ["batch.kubernetes.io/job-tracking"],
                "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                    "apiVersion": "v1", "time": "2026-12-01T05:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:finalizers": {".": {}}}}}]},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {}}],
                "restartPolicy": "Never"},
            "status": {"phase": "Pending"}})
    }

    fn statuses() -> Vec<Value> {
        vec![
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "pods \"p\" not found", "reason": "NotFound",
                "details": {"name": "p", "kind": "pods"}, "code": 404}),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "pods \"p\" already exists", "reason": "AlreadyExists",
                "details": {"name": "p", "kind": "pods"}, "code": 409}),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Pod \"Bad_Name\" is invalid", "reason": "Invalid",
                "details": {"name": "Bad_Name", "kind": "Pod", "causes": [
                    {"reason": "FieldValueInvalid", "message": "Invalid value: \"Bad_Name\"", "field": "metadata.name"},
                    {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers"}]},
                "code": 422}),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "too many requests", "reason": "TooManyRequests",
                "details": {"retryAfterSeconds": 3}, "code": 429}),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {"resourceVersion": "77"}, "status": "Success",
                "details": {"name": "p", "kind": "pods", "uid": "5d3a"}}),
        ]
    }

    fn event(count: Option<i32>) -> Value {
        let mut event = json!({"kind": "Event", "apiVersion": "v1",
            "metadata": {"name": "work-1.187c9a", "namespace": "lt-3", "uid": "e1", "resourceVersion": "1043",
                "managedFields": [{"manager": "fleet-worker", "operation": "Update", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:count": {}}}]},
            "involvedObject": {"kind": "Job", "namespace": "lt-3", "name": "work-1", "uid": "9c1e",
                "apiVersion": "batch/v1", "resourceVersion": "1040"},
            "reason": "SuccessfulCreate", "message": "Created pod: work-1-x7k2p",
            "source": {"component": "job-controller"}, "firstTimestamp": "2026-12-01T05:00:00Z",
            "lastTimestamp": "2026-12-01T05:00:02Z", "type": "Normal", "reportingComponent": "job-controller",
            "reportingInstance": ""});
        if let Some(count) = count {
            event["count"] = count.into();
        }
        event
    }

    fn debug<T: std::fmt::Debug>(t: T) -> String {
        format!("{t:?}")
    }

    #[test]
    fn a_written_object_or_status_reads_as_its_json_does() {
        let mut answers = vec![created_pod()];
        answers.extend(statuses());
        for json in answers {
            let from_json: Written = serde_json::from_value(json.clone()).unwrap();
            assert_eq!(debug(written(&enveloped(&json)).unwrap()), debug(&from_json), "{json}");
        }
        let pod = written(&enveloped(&created_pod())).unwrap();
        assert_eq!(
            (pod.metadata.name.as_deref(), pod.resource_version()),
            (Some("work-1-x7k2p"), Some("1042"))
        );
        let gone = written(&enveloped(&statuses()[4])).unwrap();
        assert!(gone.is_status() && gone.resource_version().is_none());
    }

    #[test]
    fn a_written_event_reads_as_its_json_does() {
        for json in [event(Some(3)), event(Some(1)), event(None)] {
            let from_json: WrittenEvent = serde_json::from_value(json.clone()).unwrap();
            assert_eq!(debug(written_event(&enveloped(&json)).unwrap()), debug(&from_json), "{json}");
        }
        let read = written_event(&enveloped(&event(Some(3)))).unwrap();
        assert_eq!((read.count, read.metadata.resource_version.as_deref()), (Some(3), Some("1043")));
    }

    #[test]
    fn a_refusal_reads_as_kube_reads_its_json() {
        for json in statuses() {
            let from_json: Status = serde_json::from_value(json.clone()).unwrap();
            assert_eq!(status(&enveloped(&json)).unwrap(), from_json, "{json}");
        }
    }

    /// kube-apiserver's gogo encoding writes a zero count, an empty string and a zero `Time`
    /// (an empty message) where its JSON leaves them out: each reads as absent, as in JSON.
    #[test]
    fn zero_values_gogo_writes_read_as_absent() {
        let mut meta = Writer::default();
        meta.bytes(1, b"");
        meta.bytes(6, b"");
        let mut event = Writer::default();
        event.bytes(1, &meta.into_bytes());
        event.bytes(6, b"");
        event.varint_field(8, 0);
        let mut type_meta = Writer::default();
        type_meta.bytes(1, b"v1");
        type_meta.bytes(2, b"Event");
        let mut unknown = Writer::default();
        unknown.bytes(1, &type_meta.into_bytes());
        unknown.bytes(2, &event.into_bytes());
        let body = [envelope::MAGIC.as_slice(), &unknown.into_bytes()].concat();
        let read = written_event(&body).unwrap();
        assert_eq!(debug(&read), debug(WrittenEvent::default()));
        let read = written(&body).unwrap();
        assert_eq!((read.metadata.name.as_deref(), read.resource_version()), (None, None));
    }

    /// Cut short anywhere or corrupted at any byte, an answer is an error or some answer: never
    /// a panic.
    #[test]
    fn a_cut_or_corrupted_answer_is_an_error_not_a_panic() {
        let bodies = [enveloped(&created_pod()), enveloped(&statuses()[2]), enveloped(&event(Some(2)))];
        for body in bodies {
            for cut in 0..body.len() {
                let (_, _, _) = (written(&body[..cut]), written_event(&body[..cut]), status(&body[..cut]));
            }
            assert!(written(&body[..body.len() - 1]).is_err(), "a cut inside the last field");
            for at in 0..body.len() {
                let mut corrupted = body.clone();
                corrupted[at] ^= 0xff;
                let (_, _, _) = (written(&corrupted), written_event(&corrupted), status(&corrupted));
            }
        }
    }
}
