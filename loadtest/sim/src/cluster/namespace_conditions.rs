//! The status conditions the namespace controller's deleter reports on a terminating namespace
//! (pkg/controller/namespace/deletion/status_condition_utils.go): what content and which
//! finalizers remain. The sim's discovery and group versions cannot fail, so those conditions
//! always read as succeeded.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The five condition types, in upstream's order, with their reasons and messages when fine.
const OK: [(&str, &str, &str); 5] = [
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentRemoved", "All content successfully removed"),
];

/// What is left in the namespace after a deletion pass.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Remaining {
    /// `resource.group` (core resources end in a dot, as upstream prints them) → count.
    pub resources: BTreeMap<String, usize>,
    /// Finalizer → objects that still carry it.
    pub finalizers: BTreeMap<String, usize>,
    /// Errors of the deletes this pass (ContentDeletionFailed).
    pub delete_errors: Vec<String>,
}

impl Remaining {
    /// Counts one remaining object of `resource` in `group` with `finalizers`.
    pub fn add(&mut self, resource: &str, group: &str, finalizers: &[String]) {
        *self.resources.entry(format!("{resource}.{group}")).or_default() += 1;
        for f in finalizers {
            *self.finalizers.entry(f.clone()).or_default() += 1;
        }
    }
}

/// The failing conditions for `remaining` (`ProcessContentTotals`, `makeDeleteContentCondition`).
fn failing(remaining: &Remaining) -> Vec<(&'static str, &'static str, String)> {
    let mut out = Vec::new();
    if !remaining.delete_errors.is_empty() {
        let mut msgs = remaining.delete_errors.clone();
        msgs.sort();
        out.push((
            "NamespaceDeletionContentFailure",
            "ContentDeletionFailed",
            format!("Failed to delete all resource types, {} remaining: {}", msgs.len(), msgs.join(", ")),
        ));
    }
    if !remaining.resources.is_empty() {
        let list: Vec<String> =
            remaining.resources.iter().map(|(r, n)| format!("{r} has {n} resource instances")).collect();
        out.push((
            "NamespaceContentRemaining",
            "SomeResourcesRemain",
            format!("Some resources are remaining: {}", list.join(", ")),
        ));
    }
    if !remaining.finalizers.is_empty() {
        let list: Vec<String> =
            remaining.finalizers.iter().map(|(f, n)| format!("{f} in {n} resource instances")).collect();
        out.push((
            "NamespaceFinalizersRemaining",
            "SomeFinalizerRemain",
            format!("Some finalizers are remaining: {}", list.join(", ")),
        ));
    }
    out
}

/// `updateConditions`: sets each of the five conditions on the namespace `status` (the
/// failing variant or the fine one), keeping `lastTransitionTime` unless the status flips.
/// Says whether anything changed.
pub fn update(status: &mut Value, remaining: &Remaining, now: &str) -> bool {
    if !status.is_object() {
        *status = json!({});
    }
    let failing = failing(remaining);
    let mut conditions: Vec<Value> =
        status.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut changed = false;
    for (kind, ok_reason, ok_message) in OK {
        let (state, reason, message) = match failing.iter().find(|(k, _, _)| *k == kind) {
            Some((_, reason, message)) => ("True", *reason, message.clone()),
            None => ("False", ok_reason, ok_message.to_string()),
        };
        match conditions.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some(kind)) {
            None => {
                conditions.push(json!({"type": kind, "status": state, "lastTransitionTime": now, "reason": reason, "message": message}));
                changed = true;
            }
            Some(c) => {
                let same = |k: &str, v: &str| c.get(k).and_then(Value::as_str) == Some(v);
                if same("status", state) && same("reason", reason) && same("message", &message) {
                    continue;
                }
                if !same("status", state) {
                    c["lastTransitionTime"] = json!(now);
                }
                c["status"] = json!(state);
                c["reason"] = json!(reason);
                c["message"] = json!(message);
                changed = true;
            }
        }
    }
    status["conditions"] = Value::Array(conditions);
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
        status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == kind).unwrap()
    }

    /// As TestUpdateConditions / TestProcessContentTotals in status_condition_utils_test.go.
    #[test]
    fn remaining_content_and_finalizers_then_all_removed() {
        let mut remaining = Remaining::default();
        remaining.add("pods", "", &["batch.kubernetes.io/job-tracking".into()]);
        remaining.add("pods", "", &[]);
        remaining.add(
            "jobs",
            "batch",
            &["batch.kubernetes.io/job-tracking".into(), "foregroundDeletion".into()],
        );
        let mut status = json!({"phase": "Terminating"});
        assert!(update(&mut status, &remaining, "t0"));
        assert_eq!(status["conditions"].as_array().unwrap().len(), 5);
        let content = condition(&status, "NamespaceContentRemaining");
        assert_eq!(content["status"], "True");
        assert_eq!(content["reason"], "SomeResourcesRemain");
        assert_eq!(
            content["message"],
            "Some resources are remaining: jobs.batch has 1 resource instances, pods. has 2 resource instances"
        );
        let finalizers = condition(&status, "NamespaceFinalizersRemaining");
        assert_eq!(finalizers["reason"], "SomeFinalizerRemain");
        assert_eq!(
            finalizers["message"],
            "Some finalizers are remaining: batch.kubernetes.io/job-tracking in 2 resource instances, foregroundDeletion in 1 resource instances"
        );
        let discovery = condition(&status, "NamespaceDeletionDiscoveryFailure");
        assert_eq!(
            (discovery["status"].as_str(), discovery["reason"].as_str(), discovery["message"].as_str()),
            (Some("False"), Some("ResourcesDiscovered"), Some("All resources successfully discovered"))
        );
        assert_eq!(
            condition(&status, "NamespaceDeletionGroupVersionParsingFailure")["reason"],
            "ParsedGroupVersions"
        );
        assert_eq!(condition(&status, "NamespaceDeletionContentFailure")["reason"], "ContentDeleted");
        // The same pass again changes nothing.
        assert!(!update(&mut status, &remaining, "t1"));
        // All gone: the fine variants, with a new transition time for the flipped ones.
        assert!(update(&mut status, &Remaining::default(), "t2"));
        let content = condition(&status, "NamespaceContentRemaining");
        assert_eq!(
            (content["status"].as_str(), content["reason"].as_str(), content["message"].as_str()),
            (Some("False"), Some("ContentRemoved"), Some("All content successfully removed"))
        );
        assert_eq!(content["lastTransitionTime"], "t2");
        assert_eq!(condition(&status, "NamespaceDeletionDiscoveryFailure")["lastTransitionTime"], "t0");
    }

    #[test]
    fn delete_errors_are_content_failures() {
        let remaining = Remaining { delete_errors: vec!["b".into(), "a".into()], ..Default::default() };
        let mut status = json!({});
        update(&mut status, &remaining, "t");
        let c = condition(&status, "NamespaceDeletionContentFailure");
        assert_eq!(c["reason"], "ContentDeletionFailed");
        assert_eq!(c["message"], "Failed to delete all resource types, 2 remaining: a, b");
    }
}
