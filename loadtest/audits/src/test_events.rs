//! Synthetic audit lines, in the wire form the sim writes, for the checks' tests.

use batchfleet_sim::audit::AuditEvent;

/// A finished request (`ResponseComplete`) received at `at`.
pub fn audit_event(
    at: &str,
    verb: &str,
    user_agent: &str,
    resource: &str,
    namespace: &str,
    name: &str,
    code: u16,
) -> AuditEvent {
    let line = serde_json::json!({
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
        "auditID": format!("{at}-{verb}-{name}"), "stage": "ResponseComplete",
        "requestURI": format!("/api/v1/namespaces/{namespace}/{resource}/{name}"), "verb": verb,
        "user": {"username": "sim"}, "userAgent": user_agent,
        "objectRef": {"resource": resource, "namespace": namespace, "name": name, "apiVersion": "v1"},
        "responseStatus": {"metadata": {}, "code": code},
        "requestReceivedTimestamp": at, "stageTimestamp": at,
    });
    serde_json::from_value(line).expect("a well-formed audit event")
}
