//! Pods decoded from their protobuf form (`application/vnd.kubernetes.protobuf`), reading only
//! what the pod store keeps ([`crate::informer::trim`]'s table), every other field stepped over
//! by its length without being looked at.
//!
//! kube-controller-manager reads pods in protobuf (its `--kube-api-content-type` defaults to it,
//! and pods, the most numerous objects, are where it pays). In JSON, stepping over a field still
//! means scanning every byte of it for the end of its strings and brackets; in protobuf a field
//! announces its length, so a pod's spec, its labels and most of its status cost a few varint
//! reads. Field numbers are those of `k8s.io/api/core/v1/generated.proto` and
//! `k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto`.
//!
//! Malformed input is an error ([`ProtobufError`]), never a panic: the watch lists again.

use std::collections::BTreeMap;

use batchfleet_kube_wire::ProtobufError;
use batchfleet_kube_wire::wire::{FieldReader, WireValue};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
    Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use crate::informer::trim::keeps_pod_annotation;

/// A `v1.Pod` message (the `raw` of its envelope), as far as the pod store keeps it.
pub fn pod(message: &[u8]) -> Result<Pod, ProtobufError> {
    let mut pod = Pod::default();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => pod.metadata = object_meta(value.as_bytes("Pod.metadata")?)?,
            2 => pod.spec = Some(pod_spec(value.as_bytes("Pod.spec")?)?),
            3 => pod.status = Some(pod_status(value.as_bytes("Pod.status")?)?),
            _ => {}
        }
    }
    Ok(pod)
}

fn string(value: WireValue<'_>, field: &str) -> Result<String, ProtobufError> {
    value.as_string(field)
}

fn int64(value: WireValue<'_>, field: &str) -> Result<i64, ProtobufError> {
    // int64 is a two's-complement varint: the cast restores a negative value.
    value.as_varint(field).map(|v| v as i64)
}

fn int32(value: WireValue<'_>, field: &str) -> Result<i32, ProtobufError> {
    // int32 is sign-extended to 64 bits on the wire; the truncation restores it.
    value.as_varint(field).map(|v| v as i32)
}

fn boolean(value: WireValue<'_>, field: &str) -> Result<bool, ProtobufError> {
    value.as_varint(field).map(|v| v != 0)
}

/// A `metav1.Time`: seconds and nanoseconds since the epoch. gogo writes a Go struct's `Time`
/// even when it is zero, as an empty message (`Time.Marshal`), which apimachinery reads back as
/// the zero time and JSON writes as `null`: absent.
pub(super) fn time(message: &[u8], field: &str) -> Result<Option<Time>, ProtobufError> {
    if message.is_empty() {
        return Ok(None);
    }
    let (mut seconds, mut nanos) = (0i64, 0i32);
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => seconds = int64(value, field)?,
            2 => nanos = int32(value, field)?,
            _ => {}
        }
    }
    jiff::Timestamp::new(seconds, nanos)
        .map(|t| Some(Time(t)))
        .map_err(|_| ProtobufError::OutOfRange(field.to_string()))
}

fn object_meta(message: &[u8]) -> Result<ObjectMeta, ProtobufError> {
    let mut meta = ObjectMeta::default();
    let mut annotations = BTreeMap::new();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => meta.name = Some(string(value, "ObjectMeta.name")?),
            3 => meta.namespace = Some(string(value, "ObjectMeta.namespace")?),
            5 => meta.uid = Some(string(value, "ObjectMeta.uid")?),
            6 => meta.resource_version = Some(string(value, "ObjectMeta.resourceVersion")?),
            8 => {
                meta.creation_timestamp =
                    time(value.as_bytes("ObjectMeta.creationTimestamp")?, "ObjectMeta.creationTimestamp")?
            }
            9 => {
                meta.deletion_timestamp =
                    time(value.as_bytes("ObjectMeta.deletionTimestamp")?, "ObjectMeta.deletionTimestamp")?
            }
            10 => {
                meta.deletion_grace_period_seconds =
                    Some(int64(value, "ObjectMeta.deletionGracePeriodSeconds")?)
            }
            12 => {
                let (key, value) = map_entry(value.as_bytes("ObjectMeta.annotations")?)?;
                // Most of a pod's annotations are not kept: only those are copied out.
                if keeps_pod_annotation(key) {
                    annotations.insert(key.to_owned(), value.to_owned());
                }
            }
            13 => meta
                .owner_references
                .get_or_insert_with(one_or_more)
                .push(owner_reference(value.as_bytes("ObjectMeta.ownerReferences")?)?),
            14 => {
                meta.finalizers.get_or_insert_with(one_or_more).push(string(value, "ObjectMeta.finalizers")?)
            }
            _ => {}
        }
    }
    if !annotations.is_empty() {
        meta.annotations = Some(annotations);
    }
    Ok(meta)
}

/// A `map<string, string>` entry: key 1, value 2, borrowed from the message.
fn map_entry(message: &[u8]) -> Result<(&str, &str), ProtobufError> {
    let (mut key, mut value) = ("", "");
    let mut fields = FieldReader::new(message);
    while let Some((number, field)) = fields.next_field()? {
        match number {
            1 => key = field.as_str("map key")?,
            2 => value = field.as_str("map value")?,
            _ => {}
        }
    }
    Ok((key, value))
}

fn owner_reference(message: &[u8]) -> Result<OwnerReference, ProtobufError> {
    let mut owner = OwnerReference::default();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => owner.kind = string(value, "OwnerReference.kind")?,
            3 => owner.name = string(value, "OwnerReference.name")?,
            4 => owner.uid = string(value, "OwnerReference.uid")?,
            5 => owner.api_version = string(value, "OwnerReference.apiVersion")?,
            6 => owner.controller = Some(boolean(value, "OwnerReference.controller")?),
            7 => owner.block_owner_deletion = Some(boolean(value, "OwnerReference.blockOwnerDeletion")?),
            _ => {}
        }
    }
    Ok(owner)
}

/// Room for one: a Job's pod has one owner, one finalizer and, most often, one container. A
/// list grown from empty has room for four, and the store gives back what it does not fill
/// ([`crate::informer::trim`]), which for one element of four is a copy into a new block.
fn one_or_more<T>() -> Vec<T> {
    Vec::with_capacity(1)
}

fn pod_spec(message: &[u8]) -> Result<PodSpec, ProtobufError> {
    let mut spec = PodSpec::default();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        if number == 10 {
            spec.node_name = Some(string(value, "PodSpec.nodeName")?);
        }
    }
    Ok(spec)
}

/// The conditions a running pod carries (PodReadyToStartContainers, Initialized, Ready,
/// ContainersReady, PodScheduled) and one more: room for them at once, rather than 4 then 8.
const POD_CONDITIONS: usize = 6;

fn pod_status(message: &[u8]) -> Result<PodStatus, ProtobufError> {
    let mut status = PodStatus::default();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => status.phase = Some(string(value, "PodStatus.phase")?),
            2 => status
                .conditions
                .get_or_insert_with(|| Vec::with_capacity(POD_CONDITIONS))
                .push(pod_condition(value.as_bytes("PodStatus.conditions")?)?),
            8 => status
                .container_statuses
                .get_or_insert_with(one_or_more)
                .push(container_status(value.as_bytes("PodStatus.containerStatuses")?)?),
            10 => status
                .init_container_statuses
                .get_or_insert_with(one_or_more)
                .push(container_status(value.as_bytes("PodStatus.initContainerStatuses")?)?),
            _ => {}
        }
    }
    Ok(status)
}

fn pod_condition(message: &[u8]) -> Result<PodCondition, ProtobufError> {
    let mut condition = PodCondition::default();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => condition.type_ = string(value, "PodCondition.type")?,
            2 => condition.status = string(value, "PodCondition.status")?,
            4 => {
                condition.last_transition_time = time(
                    value.as_bytes("PodCondition.lastTransitionTime")?,
                    "PodCondition.lastTransitionTime",
                )?
            }
            _ => {}
        }
    }
    Ok(condition)
}

fn container_status(message: &[u8]) -> Result<ContainerStatus, ProtobufError> {
    let mut container = ContainerStatus::default();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => container.name = string(value, "ContainerStatus.name")?,
            2 => container.state = Some(container_state(value.as_bytes("ContainerStatus.state")?)?),
            5 => container.restart_count = int32(value, "ContainerStatus.restartCount")?,
            _ => {}
        }
    }
    Ok(container)
}

/// A container's state: waiting and running whole, of a terminated state its exit code and
/// finish time.
fn container_state(message: &[u8]) -> Result<ContainerState, ProtobufError> {
    let mut state = ContainerState::default();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => state.waiting = Some(waiting(value.as_bytes("ContainerState.waiting")?)?),
            2 => state.running = Some(running(value.as_bytes("ContainerState.running")?)?),
            3 => state.terminated = Some(terminated(value.as_bytes("ContainerState.terminated")?)?),
            _ => {}
        }
    }
    Ok(state)
}

fn waiting(message: &[u8]) -> Result<ContainerStateWaiting, ProtobufError> {
    let mut waiting = ContainerStateWaiting::default();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => waiting.reason = Some(string(value, "ContainerStateWaiting.reason")?),
            2 => waiting.message = Some(string(value, "ContainerStateWaiting.message")?),
            _ => {}
        }
    }
    Ok(waiting)
}

fn running(message: &[u8]) -> Result<ContainerStateRunning, ProtobufError> {
    let mut running = ContainerStateRunning::default();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        if number == 1 {
            running.started_at =
                time(value.as_bytes("ContainerStateRunning.startedAt")?, "ContainerStateRunning.startedAt")?;
        }
    }
    Ok(running)
}

fn terminated(message: &[u8]) -> Result<ContainerStateTerminated, ProtobufError> {
    let mut terminated = ContainerStateTerminated::default();
    let mut fields = FieldReader::new(message);
    while let Some((number, value)) = fields.next_field()? {
        match number {
            1 => terminated.exit_code = int32(value, "ContainerStateTerminated.exitCode")?,
            6 => {
                terminated.finished_at = time(
                    value.as_bytes("ContainerStateTerminated.finishedAt")?,
                    "ContainerStateTerminated.finishedAt",
                )?
            }
            _ => {}
        }
    }
    Ok(terminated)
}

#[cfg(test)]
mod tests {
    use batchfleet_kube_wire::envelope;
    use batchfleet_sim::protobuf::codec::encode_enveloped;
    use batchfleet_sim::protobuf::schema::schema;

    use super::*;
    use crate::informer::Cached;
    use crate::informer::trim::tests::pods_with_every_kept_field;

    /// The `v1.Pod` message of a JSON pod, as the sim (checked against k8s-pb) encodes it.
    fn message_of(mut json: serde_json::Value) -> Vec<u8> {
        json["apiVersion"] = "v1".into();
        json["kind"] = "Pod".into();
        let body = encode_enveloped(schema(), &json).expect("pods have a protobuf form");
        envelope::decode(&body).expect("an envelope").raw.to_vec()
    }

    /// The same pod read in protobuf and in JSON is stored the same, and the protobuf read
    /// built nothing the store drops.
    #[test]
    fn a_pod_read_in_protobuf_is_stored_as_one_read_in_json() {
        for json in pods_with_every_kept_field() {
            let from_protobuf = pod(&message_of(json.clone())).expect("a pod");
            let from_json: Pod = serde_json::from_value(json).expect("a pod");
            assert_eq!(from_protobuf.clone().trimmed(), from_json.trimmed());
            assert_eq!(from_protobuf.metadata.labels, None, "labels are not read");
            let spec = from_protobuf.spec.expect("a spec");
            assert!(spec.containers.is_empty() && spec.restart_policy.is_none(), "only nodeName is read");
            let annotations = from_protobuf.metadata.annotations.expect("annotations");
            assert!(!annotations.contains_key("sim.batchfleet.io/run"), "only the kept annotations are read");
        }
    }

    /// Cut short anywhere or corrupted at any byte, a pod is an error or some pod: never a panic.
    #[test]
    fn a_cut_or_corrupted_pod_is_an_error_not_a_panic() {
        let [message, _] = pods_with_every_kept_field().map(message_of);
        for cut in 0..message.len() {
            let _ = pod(&message[..cut]);
        }
        assert!(pod(&message[..message.len() - 1]).is_err(), "a cut inside the last field");
        for at in 0..message.len() {
            let mut corrupted = message.clone();
            corrupted[at] ^= 0xff;
            let _ = pod(&corrupted);
        }
    }

    /// kube-apiserver writes a zero `metav1.Time` held in a struct (a terminated container's
    /// `finishedAt` before it is known) as an empty message; JSON writes it as `null`.
    #[test]
    fn a_zero_time_reads_as_absent_as_in_json() {
        use batchfleet_kube_wire::wire::Writer;
        let mut terminated = Writer::default();
        terminated.varint_field(1, 1);
        terminated.bytes(6, b"");
        let mut state = Writer::default();
        state.bytes(3, &terminated.into_bytes());
        let mut container = Writer::default();
        container.bytes(2, &state.into_bytes());
        let mut status = Writer::default();
        status.bytes(8, &container.into_bytes());
        let mut meta = Writer::default();
        meta.bytes(8, b"");
        let mut message = Writer::default();
        message.bytes(1, &meta.into_bytes());
        message.bytes(3, &status.into_bytes());
        let pod = pod(&message.into_bytes()).expect("a pod");
        assert_eq!(pod.metadata.creation_timestamp, None);
        let statuses = pod.status.and_then(|s| s.container_statuses).expect("a container status");
        let terminated = statuses[0].state.as_ref().and_then(|s| s.terminated.as_ref()).expect("terminated");
        assert_eq!((terminated.exit_code, terminated.finished_at.as_ref()), (1, None));
    }

    #[test]
    fn a_time_out_of_range_is_an_error() {
        use batchfleet_kube_wire::wire::Writer;
        let mut time = Writer::default();
        time.varint_field(1, i64::MAX as u64);
        let mut meta = Writer::default();
        meta.bytes(8, &time.into_bytes());
        let mut message = Writer::default();
        message.bytes(1, &meta.into_bytes());
        assert_eq!(
            pod(&message.into_bytes()).unwrap_err(),
            ProtobufError::OutOfRange("ObjectMeta.creationTimestamp".into())
        );
    }
}
