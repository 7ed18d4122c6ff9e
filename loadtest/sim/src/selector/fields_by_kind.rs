//! Which field labels each kind accepts in a `fieldSelector`, and their values.
//!
//! The apiserver has two independent layers, reproduced separately here:
//! 1. Acceptance: the handler runs every term through `Scheme.ConvertFieldLabel`, i.e. the
//!    kind's `AddFieldLabelConversionFunc` (`pkg/apis/core/v1/conversion.go`,
//!    `pkg/apis/batch/v1/conversion.go`, `pkg/apis/events/v1/conversion.go`), falling back to
//!    `runtime.DefaultMetaV1FieldSelectorConversion` for kinds without one (cronjobs, leases,
//!    apps, custom resources, …). A rejected label is a 400 with that function's text. The
//!    conversion may also rename the label (pods `spec.host` → `spec.nodeName`, events.k8s.io
//!    `regarding.kind` → `involvedObject.kind`, `reportingController` → `reportingComponent`).
//! 2. Values: the registry's `ToSelectableFields` (`pkg/registry/…/strategy.go`). A label that
//!    is accepted but not set there (pods `status.podIPs`) reads as `""`, as `fields.Set.Get`
//!    returns for a missing key.
//!
//! Objects are the v1 wire JSON the sim stores; internal-type quirks are mapped onto it
//! (pods `status.podIP` = `status.podIPs[0].ip`, jobs `status.successful` = `status.succeeded`).

use std::borrow::Cow;

use serde_json::Value;

use super::{FieldSelector, SelectorError};
use crate::go_fmt::go_quote;

/// The kinds with their own field-label rules; everything else is [`Kind::Generic`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pod,
    Node,
    Namespace,
    Secret,
    Service,
    ReplicationController,
    /// core/v1 Event
    CoreEvent,
    /// events.k8s.io/v1 Event (same storage, its own label spellings)
    EventsEvent,
    Job,
    Generic,
}

fn kind_of(group: &str, plural: &str) -> Kind {
    match (group, plural) {
        ("", "pods") => Kind::Pod,
        ("", "nodes") => Kind::Node,
        ("", "namespaces") => Kind::Namespace,
        ("", "secrets") => Kind::Secret,
        ("", "services") => Kind::Service,
        ("", "replicationcontrollers") => Kind::ReplicationController,
        ("", "events") => Kind::CoreEvent,
        ("events.k8s.io", "events") => Kind::EventsEvent,
        ("batch", "jobs") => Kind::Job,
        _ => Kind::Generic,
    }
}

/// A selectable field after the kind's label conversion (the keys of `ToSelectableFields`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Canon {
    Name,
    Namespace,
    PodNodeName,
    PodRestartPolicy,
    PodSchedulerName,
    PodServiceAccountName,
    PodHostNetwork,
    PodPhase,
    PodIp,
    PodNominatedNodeName,
    /// Accepted by the conversion func, never set by `ToSelectableFields`: always "".
    Unset,
    NodeUnschedulable,
    NamespacePhase,
    SecretType,
    ServiceClusterIp,
    ServiceType,
    RcReplicas,
    EventInvolved(&'static str),
    EventReason,
    EventReportingComponent,
    EventSource,
    EventType,
    JobSuccessful,
}

const INVOLVED_FIELDS: [&str; 7] =
    ["kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"];

fn involved(sub: &str) -> Option<Canon> {
    INVOLVED_FIELDS.iter().find(|f| **f == sub).map(|f| Canon::EventInvolved(f))
}

/// The kind's field label conversion: `Some` when accepted (with the label it maps to).
fn canonical(kind: Kind, label: &str) -> Option<Canon> {
    use Canon::*;
    Some(match (kind, label) {
        (Kind::Node | Kind::Namespace, "metadata.name") => Name,
        (Kind::Node | Kind::Namespace, _) => match (kind, label) {
            (Kind::Node, "spec.unschedulable") => NodeUnschedulable,
            (Kind::Namespace, "status.phase") => NamespacePhase,
            _ => return None,
        },
        (_, "metadata.name") => Name,
        (_, "metadata.namespace") => Namespace,
        (Kind::Pod, "spec.nodeName" | "spec.host") => PodNodeName,
        (Kind::Pod, "spec.restartPolicy") => PodRestartPolicy,
        (Kind::Pod, "spec.schedulerName") => PodSchedulerName,
        (Kind::Pod, "spec.serviceAccountName") => PodServiceAccountName,
        (Kind::Pod, "spec.hostNetwork") => PodHostNetwork,
        (Kind::Pod, "status.phase") => PodPhase,
        (Kind::Pod, "status.podIP") => PodIp,
        (Kind::Pod, "status.podIPs") => Unset,
        (Kind::Pod, "status.nominatedNodeName") => PodNominatedNodeName,
        (Kind::Secret, "type") => SecretType,
        (Kind::Service, "spec.clusterIP") => ServiceClusterIp,
        (Kind::Service, "spec.type") => ServiceType,
        (Kind::ReplicationController, "status.replicas") => RcReplicas,
        (Kind::CoreEvent, l) if l.starts_with("involvedObject.") => involved(&l["involvedObject.".len()..])?,
        (Kind::CoreEvent, "reportingComponent") | (Kind::EventsEvent, "reportingController") => {
            EventReportingComponent
        }
        (Kind::EventsEvent, l) if l.starts_with("regarding.") => involved(&l["regarding.".len()..])?,
        (Kind::CoreEvent | Kind::EventsEvent, "reason") => EventReason,
        (Kind::CoreEvent | Kind::EventsEvent, "source") => EventSource,
        (Kind::CoreEvent | Kind::EventsEvent, "type") => EventType,
        (Kind::Job, "status.successful") => JobSuccessful,
        _ => return None,
    })
}

/// The 400 text of the kind's conversion func for a label it does not accept.
fn rejection(kind: Kind, label: &str) -> String {
    match kind {
        Kind::Generic => format!(
            "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
            go_quote(label)
        ),
        Kind::Job => format!("field label {} not supported for Job", go_quote(label)),
        _ => format!("field label not supported: {label}"),
    }
}

/// Validate the selector's fields against what the kind supports, in the order the apiserver
/// checks them; the first unsupported one is the error, with the apiserver's text.
pub fn check_fields(group: &str, plural: &str, sel: &FieldSelector) -> Result<(), SelectorError> {
    let kind = kind_of(group, plural);
    for f in sel.fields() {
        if canonical(kind, f).is_none() {
            return Err(SelectorError::UnknownField(rejection(kind, f)));
        }
    }
    Ok(())
}

/// The value of a selectable field of an object, as upstream's `ToSelectableFields` renders
/// it (booleans `"true"`/`"false"`, counts in decimal, absent strings `""`); `None` when the
/// kind does not accept the field. Accepts the kind's aliases (`spec.host`, `regarding.*`, …).
pub fn field_value(group: &str, plural: &str, obj: &Value, field: &str) -> Option<String> {
    field_value_ref(group, plural, obj, field).map(Cow::into_owned)
}

/// [`field_value`] borrowing from the object where it can (everything but counts).
pub fn field_value_ref<'o>(group: &str, plural: &str, obj: &'o Value, field: &str) -> Option<Cow<'o, str>> {
    let kind = kind_of(group, plural);
    let canon = canonical(kind, field)?;
    Some(value_of(canon, obj))
}

fn value_of(canon: Canon, obj: &Value) -> Cow<'_, str> {
    use Canon::*;
    match canon {
        Name => s(obj, &["metadata", "name"]),
        Namespace => s(obj, &["metadata", "namespace"]),
        PodNodeName => s(obj, &["spec", "nodeName"]),
        PodRestartPolicy => s(obj, &["spec", "restartPolicy"]),
        PodSchedulerName => s(obj, &["spec", "schedulerName"]),
        PodServiceAccountName => s(obj, &["spec", "serviceAccountName"]),
        PodHostNetwork => boolean(obj, &["spec", "hostNetwork"]),
        PodPhase => s(obj, &["status", "phase"]),
        // Upstream reads the internal Status.PodIPs[0]; on the wire status.podIP mirrors it.
        PodIp => match at(obj, &["status", "podIPs"]).and_then(|v| v.get(0)) {
            Some(first) => s(first, &["ip"]),
            None => s(obj, &["status", "podIP"]),
        },
        PodNominatedNodeName => s(obj, &["status", "nominatedNodeName"]),
        Unset => Cow::Borrowed(""),
        NodeUnschedulable => boolean(obj, &["spec", "unschedulable"]),
        NamespacePhase => s(obj, &["status", "phase"]),
        SecretType => s(obj, &["type"]),
        ServiceClusterIp => s(obj, &["spec", "clusterIP"]),
        ServiceType => s(obj, &["spec", "type"]),
        RcReplicas => int(obj, &["status", "replicas"]),
        JobSuccessful => int(obj, &["status", "succeeded"]),
        EventInvolved(sub) => {
            let outer = if is_events_v1(obj) { "regarding" } else { "involvedObject" };
            s(obj, &[outer, sub])
        }
        EventReason => s(obj, &["reason"]),
        EventType => s(obj, &["type"]),
        EventReportingComponent => s(obj, &[reporting_key(obj)]),
        // core: source := Source.Component; if "" then ReportingController.
        EventSource => {
            let source = if is_events_v1(obj) { "deprecatedSource" } else { "source" };
            let component = s(obj, &[source, "component"]);
            if component.is_empty() { s(obj, &[reporting_key(obj)]) } else { component }
        }
    }
}

/// An Event stored in its events.k8s.io/v1 shape (`regarding`, `reportingController`, …).
fn is_events_v1(obj: &Value) -> bool {
    obj.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v.starts_with("events.k8s.io/"))
        || (obj.get("regarding").is_some() && obj.get("involvedObject").is_none())
}

fn reporting_key(obj: &Value) -> &'static str {
    if is_events_v1(obj) { "reportingController" } else { "reportingComponent" }
}

fn at<'o>(obj: &'o Value, path: &[&str]) -> Option<&'o Value> {
    path.iter().try_fold(obj, |v, k| v.get(*k))
}

fn s<'o>(obj: &'o Value, path: &[&str]) -> Cow<'o, str> {
    Cow::Borrowed(at(obj, path).and_then(Value::as_str).unwrap_or(""))
}

fn boolean<'o>(obj: &'o Value, path: &[&str]) -> Cow<'o, str> {
    let b = at(obj, path).and_then(Value::as_bool).unwrap_or(false);
    Cow::Borrowed(if b { "true" } else { "false" })
}

fn int<'o>(obj: &'o Value, path: &[&str]) -> Cow<'o, str> {
    match at(obj, path).and_then(Value::as_i64) {
        None | Some(0) => Cow::Borrowed("0"),
        Some(n) => Cow::Owned(n.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(group: &str, plural: &str, sel: &str) -> Result<(), String> {
        check_fields(group, plural, &FieldSelector::parse(sel).unwrap()).map_err(|e| e.to_string())
    }

    /// The conversion funcs' accepted labels and rejection texts (core/v1, batch/v1,
    /// events/v1 conversion.go; runtime.DefaultMetaV1FieldSelectorConversion).
    #[test]
    fn check_fields_table() {
        let ok: &[(&str, &str, &str)] = &[
            ("", "pods", "metadata.name=a,metadata.namespace=b,spec.nodeName=n,spec.host=n"),
            ("", "pods", "spec.restartPolicy=Never,spec.schedulerName=s,spec.serviceAccountName=d"),
            ("", "pods", "spec.hostNetwork=true,status.phase=Running,status.podIP=1.2.3.4"),
            ("", "pods", "status.podIPs=1.2.3.4,status.nominatedNodeName=n"),
            ("", "nodes", "metadata.name=n,spec.unschedulable=true"),
            ("", "namespaces", "metadata.name=n,status.phase=Active"),
            ("", "secrets", "type=Opaque,metadata.namespace=x"),
            ("", "services", "spec.clusterIP=None,spec.type=ClusterIP"),
            ("", "replicationcontrollers", "status.replicas=1"),
            ("", "events", "involvedObject.kind=Pod,involvedObject.name=p,involvedObject.uid=u"),
            ("", "events", "involvedObject.namespace=n,involvedObject.apiVersion=v1"),
            ("", "events", "involvedObject.resourceVersion=1,involvedObject.fieldPath=f"),
            ("", "events", "reason=r,reportingComponent=c,source=s,type=Normal"),
            ("events.k8s.io", "events", "regarding.kind=Pod,regarding.name=p,reportingController=c"),
            ("events.k8s.io", "events", "reason=r,source=s,type=Normal,metadata.namespace=x"),
            ("batch", "jobs", "status.successful=1,metadata.name=j,metadata.namespace=n"),
            ("batch", "cronjobs", "metadata.name=c,metadata.namespace=n"),
            ("coordination.k8s.io", "leases", "metadata.name=l"),
            ("example.com", "widgets", "metadata.namespace="),
        ];
        for (g, p, s) in ok {
            assert_eq!(check(g, p, s), Ok(()), "{g}/{p} {s}");
        }
        let bad: &[(&str, &str, &str, &str)] = &[
            ("", "pods", "spec.foo=x", "field label not supported: spec.foo"),
            ("", "pods", "status.hostIP=x", "field label not supported: status.hostIP"),
            ("", "nodes", "metadata.namespace=x", "field label not supported: metadata.namespace"),
            ("", "namespaces", "name=x", "field label not supported: name"),
            ("", "events", "regarding.kind=Pod", "field label not supported: regarding.kind"),
            ("", "events", "involvedObject.foo=x", "field label not supported: involvedObject.foo"),
            (
                "events.k8s.io",
                "events",
                "involvedObject.kind=Pod",
                "field label not supported: involvedObject.kind",
            ),
            (
                "events.k8s.io",
                "events",
                "reportingComponent=x",
                "field label not supported: reportingComponent",
            ),
            ("batch", "jobs", "status.active=1", "field label \"status.active\" not supported for Job"),
            (
                "batch",
                "cronjobs",
                "spec.suspend=true",
                "\"spec.suspend\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
            ),
            (
                "coordination.k8s.io",
                "leases",
                "x=1",
                "\"x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
            ),
            // The first unsupported label in sorted-term order is the one reported.
            ("", "pods", "z.bad=1,a.bad=2,spec.nodeName=n", "field label not supported: a.bad"),
        ];
        for (g, p, s, want) in bad {
            assert_eq!(check(g, p, s).unwrap_err(), *want, "{g}/{p} {s}");
        }
    }

    /// pkg/registry/core/pod/strategy.go ToSelectableFields.
    #[test]
    fn pod_values() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": "n1", "restartPolicy": "Never", "schedulerName": "default-scheduler",
                     "serviceAccountName": "default", "hostNetwork": true},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}], "nominatedNodeName": "n2"}
        });
        let cases = [
            ("metadata.name", "p"),
            ("metadata.namespace", "ns"),
            ("spec.nodeName", "n1"),
            ("spec.host", "n1"),
            ("spec.restartPolicy", "Never"),
            ("spec.schedulerName", "default-scheduler"),
            ("spec.serviceAccountName", "default"),
            ("spec.hostNetwork", "true"),
            ("status.phase", "Running"),
            ("status.podIP", "10.0.0.1"),
            ("status.podIPs", ""),
            ("status.nominatedNodeName", "n2"),
        ];
        for (f, want) in cases {
            assert_eq!(field_value("", "pods", &pod, f).as_deref(), Some(want), "{f}");
        }
        assert_eq!(field_value("", "pods", &pod, "spec.foo"), None);
        let bare = json!({"metadata": {"name": "q"}});
        assert_eq!(field_value("", "pods", &bare, "spec.hostNetwork").as_deref(), Some("false"));
        assert_eq!(field_value("", "pods", &bare, "status.podIP").as_deref(), Some(""));
        assert_eq!(field_value("", "pods", &bare, "metadata.namespace").as_deref(), Some(""));

        let sel =
            FieldSelector::parse("spec.nodeName=n1,status.phase!=Succeeded,spec.hostNetwork=true").unwrap();
        assert!(sel.matches(|f| field_value("", "pods", &pod, f)));
        assert!(sel.matches_ref(|f| field_value_ref("", "pods", &pod, f)));
        assert!(!sel.matches(|f| field_value("", "pods", &bare, f)));
    }

    /// pkg/registry/batch/job/strategy.go JobToSelectableFields.
    #[test]
    fn job_values() {
        let job = json!({"metadata": {"name": "j", "namespace": "n"}, "status": {"succeeded": 3}});
        assert_eq!(field_value("batch", "jobs", &job, "status.successful").as_deref(), Some("3"));
        let fresh = json!({"metadata": {"name": "j"}, "status": {}});
        assert_eq!(field_value("batch", "jobs", &fresh, "status.successful").as_deref(), Some("0"));
        assert_eq!(field_value("batch", "jobs", &job, "status.succeeded"), None);
    }

    /// pkg/registry/core/event/strategy.go ToSelectableFields, for both stored shapes and both
    /// API groups' label spellings (events/v1 AddFieldLabelConversionsForEvent).
    #[test]
    fn event_values() {
        let core = json!({
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns", "uid": "u1",
                               "apiVersion": "v1", "resourceVersion": "7", "fieldPath": "spec.containers{c}"},
            "reason": "Started", "type": "Normal", "source": {"component": "kubelet"},
            "reportingComponent": "kubelet-rc"
        });
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ns"},
            "regarding": {"kind": "Job", "name": "j", "namespace": "ns", "uid": "u2"},
            "reason": "Completed", "type": "Normal", "reportingController": "batchfleet.io/worker"
        });
        let cases: &[(&str, &Value, &str, &str)] = &[
            ("", &core, "involvedObject.kind", "Pod"),
            ("", &core, "involvedObject.fieldPath", "spec.containers{c}"),
            ("", &core, "involvedObject.resourceVersion", "7"),
            ("", &core, "source", "kubelet"),
            ("", &core, "reportingComponent", "kubelet-rc"),
            ("", &core, "reason", "Started"),
            ("", &v1, "involvedObject.kind", "Job"),
            ("", &v1, "involvedObject.uid", "u2"),
            ("", &v1, "source", "batchfleet.io/worker"),
            ("", &v1, "reportingComponent", "batchfleet.io/worker"),
            ("events.k8s.io", &v1, "regarding.name", "j"),
            ("events.k8s.io", &v1, "reportingController", "batchfleet.io/worker"),
            ("events.k8s.io", &v1, "type", "Normal"),
            ("events.k8s.io", &core, "regarding.kind", "Pod"),
            ("events.k8s.io", &core, "source", "kubelet"),
        ];
        for (g, obj, f, want) in cases {
            assert_eq!(field_value(g, "events", obj, f).as_deref(), Some(*want), "{g} {f}");
        }
        let no_component = json!({"involvedObject": {}, "source": {}, "reportingComponent": "rc"});
        assert_eq!(field_value("", "events", &no_component, "source").as_deref(), Some("rc"));
    }

    /// node, namespace and secret strategies' ToSelectableFields; generic kinds.
    #[test]
    fn other_values() {
        let node = json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true}});
        assert_eq!(field_value("", "nodes", &node, "spec.unschedulable").as_deref(), Some("true"));
        assert_eq!(field_value("", "nodes", &json!({}), "spec.unschedulable").as_deref(), Some("false"));
        assert_eq!(field_value("", "nodes", &node, "metadata.namespace"), None);
        let ns = json!({"metadata": {"name": "default"}, "status": {"phase": "Terminating"}});
        assert_eq!(field_value("", "namespaces", &ns, "status.phase").as_deref(), Some("Terminating"));
        let secret = json!({"metadata": {"name": "s", "namespace": "n"}, "type": "kubernetes.io/tls"});
        assert_eq!(field_value("", "secrets", &secret, "type").as_deref(), Some("kubernetes.io/tls"));
        let rc = json!({"status": {"replicas": 12}});
        assert_eq!(field_value("", "replicationcontrollers", &rc, "status.replicas").as_deref(), Some("12"));
        let lease = json!({"metadata": {"name": "l", "namespace": "kube-node-lease"}});
        assert_eq!(
            field_value("coordination.k8s.io", "leases", &lease, "metadata.namespace").as_deref(),
            Some("kube-node-lease")
        );
        assert_eq!(field_value("coordination.k8s.io", "leases", &lease, "spec.holderIdentity"), None);
        // Never panics on odd shapes.
        for odd in [json!(null), json!([1, 2]), json!({"status": {"podIPs": "x", "succeeded": "2"}})] {
            for (g, p) in [("", "pods"), ("batch", "jobs"), ("", "events"), ("x", "y")] {
                for f in
                    ["status.podIP", "status.successful", "source", "metadata.name", "involvedObject.kind"]
                {
                    let _ = field_value(g, p, &odd, f);
                }
            }
        }
    }
}
