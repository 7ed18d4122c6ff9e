//! API requests by verb, resource and process (User-Agent without its version), from the audit
//! log: each request once (a watch at its start, everything else when it completed).

use std::collections::BTreeMap;

use batchfleet_sim::audit::{AuditEvent, Stage};
use serde::Serialize;

/// Requests of one (process, verb, resource) and how many failed (not 2xx).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestCount {
    pub process: String,
    pub verb: String,
    pub resource: String,
    pub requests: u64,
    pub failed: u64,
}

/// `fleet-worker/0.1.0 (w-0)` → `fleet-worker (w-0)`; other agents up to their first `/`.
pub fn process_of(user_agent: &str) -> String {
    match user_agent.split_once('/') {
        Some((name, rest)) => match rest.split_once(" (") {
            Some((_, id)) => format!("{name} ({id}"),
            None => name.to_string(),
        },
        None if user_agent.is_empty() => "unknown".into(),
        None => user_agent.to_string(),
    }
}

pub fn requests_by_process(events: &[AuditEvent]) -> Vec<RequestCount> {
    let mut counts: BTreeMap<(String, String, String), (u64, u64)> = BTreeMap::new();
    for e in events {
        let counted = if e.verb == "watch" {
            e.stage == Stage::ResponseStarted
        } else {
            e.stage == Stage::ResponseComplete
        };
        if !counted {
            continue;
        }
        let resource = match &e.object_ref {
            Some(o) if o.subresource.is_empty() => o.resource.clone(),
            Some(o) => format!("{}/{}", o.resource, o.subresource),
            None => "(non-resource)".into(),
        };
        let slot = counts.entry((process_of(&e.user_agent), e.verb.clone(), resource)).or_default();
        slot.0 += 1;
        // A watch's start carries no final code; only finished requests can have failed.
        if e.stage == Stage::ResponseComplete && !e.succeeded() {
            slot.1 += 1;
        }
    }
    counts
        .into_iter()
        .map(|((process, verb, resource), (requests, failed))| RequestCount {
            process,
            verb,
            resource,
            requests,
            failed,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_events::audit_event;

    #[test]
    fn counts_each_request_once_by_process_verb_and_resource() {
        let w = "fleet-worker/0.1.0 (w-0)";
        let events = vec![
            audit_event("2026-11-26T10:00:00Z", "create", w, "pods", "ns", "a", 201),
            audit_event("2026-11-26T10:00:01Z", "create", w, "pods", "ns", "b", 409),
            audit_event(
                "2026-11-26T10:00:01Z",
                "get",
                "kubectl/v1.37.0 (linux/amd64)",
                "pods",
                "ns",
                "b",
                200,
            ),
        ];
        let counts = requests_by_process(&events);
        assert_eq!(counts.len(), 2);
        assert_eq!(
            counts[0],
            RequestCount {
                process: "fleet-worker (w-0)".into(),
                verb: "create".into(),
                resource: "pods".into(),
                requests: 2,
                failed: 1
            }
        );
        assert_eq!(counts[1].process, "kubectl (linux/amd64)");
    }
}
