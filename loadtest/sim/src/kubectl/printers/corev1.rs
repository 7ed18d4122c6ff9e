//! printNode, printNamespace, printLease (coordination.k8s.io), printConfigMap, printSecret and
//! printServiceAccount.

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::{AGE, Col, NAME, Row, age, col, wide};
use crate::kubectl::Obj;

const ADDRESSES_DOC: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";

pub(super) const NODE_COLUMNS: &[Col] = &[
    NAME,
    col("Status", "string", "The status of the node"),
    col("Roles", "string", "The roles of the node"),
    AGE,
    col("Version", "string", "Kubelet Version reported by the node."),
    wide("Internal-IP", "string", ADDRESSES_DOC),
    wide("External-IP", "string", ADDRESSES_DOC),
    wide(
        "OS-Image",
        "string",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
    ),
    wide(
        "Kernel-Version",
        "string",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
    ),
    wide(
        "Container-Runtime",
        "string",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
    ),
];

pub(super) const NAMESPACE_COLUMNS: &[Col] =
    &[NAME, col("Status", "string", "The status of the namespace"), AGE];

pub(super) const LEASE_COLUMNS: &[Col] = &[
    NAME,
    col(
        "Holder",
        "string",
        "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
    ),
    AGE,
];

pub(super) const RESOURCEQUOTA_COLUMNS: &[Col] = &[
    NAME,
    AGE,
    col(
        "Request",
        "string",
        "Request represents a minimum amount of cpu/memory that a container may consume.",
    ),
    col(
        "Limit",
        "string",
        "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
    ),
];

pub(super) const CONFIGMAP_COLUMNS: &[Col] = &[
    NAME,
    col(
        "Data",
        "string",
        "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
    ),
    AGE,
];

pub(super) const SECRET_COLUMNS: &[Col] = &[
    NAME,
    col(
        "Type",
        "string",
        "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
    ),
    col(
        "Data",
        "string",
        "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
    ),
    AGE,
];

pub(super) const SERVICEACCOUNT_COLUMNS: &[Col] = &[
    NAME,
    col(
        "Secrets",
        "string",
        "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret",
    ),
    AGE,
];

const LABEL_NODE_ROLE_PREFIX: &str = "node-role.kubernetes.io/";
const NODE_LABEL_ROLE: &str = "kubernetes.io/role";

/// `findNodeRoles`: `node-role.kubernetes.io/<role>` keys and `kubernetes.io/role=<role>`, sorted.
fn node_roles(node: Obj) -> String {
    let mut roles = BTreeSet::new();
    if let Some(labels) = node.at(&["metadata", "labels"]).and_then(|l| l.as_object()) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix(LABEL_NODE_ROLE_PREFIX) {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if k == NODE_LABEL_ROLE
                && let Some(v) = v.as_str().filter(|v| !v.is_empty())
            {
                roles.insert(v.to_string());
            }
        }
    }
    if roles.is_empty() { "<none>".into() } else { roles.into_iter().collect::<Vec<_>>().join(",") }
}

fn node_address(node: Obj, kind: &str) -> String {
    node.list(&["status", "addresses"])
        .iter()
        .map(Obj)
        .find(|a| a.str(&["type"]) == kind)
        .map_or_else(|| "<none>".into(), |a| a.str(&["address"]).to_string())
}

pub(super) fn node(node: Obj, now: Timestamp) -> Row {
    // conditionMap[type] = cond: the last Ready condition wins; only Ready is shown.
    let ready =
        node.list(&["status", "conditions"]).iter().rev().map(Obj).find(|c| c.str(&["type"]) == "Ready");
    let mut status = vec![match ready {
        Some(c) if c.str(&["status"]) == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if node.bool(&["spec", "unschedulable"]) {
        status.push("SchedulingDisabled");
    }
    let info = node.sub(&["status", "nodeInfo"]);
    let or_unknown = |s: &str| if s.is_empty() { "<unknown>".to_string() } else { s.to_string() };
    Row::cells(vec![
        json!(node.name()),
        json!(status.join(",")),
        json!(node_roles(node)),
        json!(age(node, now)),
        json!(info.str(&["kubeletVersion"])),
        json!(node_address(node, "InternalIP")),
        json!(node_address(node, "ExternalIP")),
        json!(or_unknown(info.str(&["osImage"]))),
        json!(or_unknown(info.str(&["kernelVersion"]))),
        json!(or_unknown(info.str(&["containerRuntimeVersion"]))),
    ])
}

pub(super) fn namespace(ns: Obj, now: Timestamp) -> Row {
    Row::cells(vec![json!(ns.name()), json!(ns.str(&["status", "phase"])), json!(age(ns, now))])
}

pub(super) fn lease(lease: Obj, now: Timestamp) -> Row {
    Row::cells(vec![
        json!(lease.name()),
        json!(lease.str(&["spec", "holderIdentity"])),
        json!(age(lease, now)),
    ])
}

/// printResourceQuota: `resource: used/hard` sorted by name; `limits.*` in the Limit column.
pub(super) fn resourcequota(quota: Obj, now: Timestamp) -> Row {
    let hard = quota.at(&["spec", "hard"]).and_then(Value::as_object);
    let used = quota.at(&["status", "used"]).and_then(Value::as_object);
    let mut request = Vec::new();
    let mut limit = Vec::new();
    for (resource, quantity) in hard.into_iter().flatten() {
        let used = used.and_then(|u| u.get(resource)).and_then(Value::as_str).unwrap_or("0");
        let hard = crate::admission::quantity::canonical(quantity.as_str().unwrap_or(""));
        let column = if resource.split('.').next() == Some("limits") && resource.contains('.') {
            &mut limit
        } else {
            &mut request
        };
        column.push(format!("{resource}: {used}/{hard}"));
    }
    Row::cells(vec![
        json!(quota.name()),
        json!(age(quota, now)),
        json!(request.join(", ")),
        json!(limit.join(", ")),
    ])
}

pub(super) fn configmap(cm: Obj, now: Timestamp) -> Row {
    let data = cm.map_len(&["data"]) + cm.map_len(&["binaryData"]);
    Row::cells(vec![json!(cm.name()), json!(data as i64), json!(age(cm, now))])
}

pub(super) fn secret(secret: Obj, now: Timestamp) -> Row {
    // The apiserver merges stringData into data and defaults the type to Opaque.
    let keys: BTreeSet<&String> = ["data", "stringData"]
        .iter()
        .filter_map(|f| secret.at(&[f]).and_then(|m| m.as_object()))
        .flat_map(|m| m.keys())
        .collect();
    let kind = match secret.str(&["type"]) {
        "" => "Opaque",
        t => t,
    };
    Row::cells(vec![json!(secret.name()), json!(kind), json!(keys.len() as i64), json!(age(secret, now))])
}

pub(super) fn serviceaccount(sa: Obj, now: Timestamp) -> Row {
    Row::cells(vec![json!(sa.name()), json!(sa.list(&["secrets"]).len() as i64), json!(age(sa, now))])
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::test_support::*;

    fn node(name: &str, spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": spec, "status": status})
    }

    fn ready(status: &str) -> Value {
        json!({"conditions": [{"type": "Ready", "status": status}]})
    }

    /// printers_test.go TestPrintNodeStatus (Columns: Name, Status, Roles, Age, KubeletVersion).
    #[test]
    fn print_node_status() {
        let cases: Vec<(Value, &str)> = vec![
            (node("foo1", json!({}), ready("True")), "Ready"),
            (node("foo2", json!({"unschedulable": true}), ready("True")), "Ready,SchedulingDisabled"),
            (
                node(
                    "foo3",
                    json!({}),
                    json!({"conditions": [{"type": "Ready", "status": "True"}, {"type": "Ready", "status": "True"}]}),
                ),
                "Ready",
            ),
            (node("foo4", json!({}), ready("False")), "NotReady"),
            (node("foo5", json!({"unschedulable": true}), ready("False")), "NotReady,SchedulingDisabled"),
            (
                node("foo6", json!({}), json!({"conditions": [{"type": "InvalidValue", "status": "True"}]})),
                "Unknown",
            ),
            (node("foo7", json!({}), json!({"conditions": [{}]})), "Unknown"),
            (
                node(
                    "foo8",
                    json!({"unschedulable": true}),
                    json!({"conditions": [{"type": "InvalidValue", "status": "True"}]}),
                ),
                "Unknown,SchedulingDisabled",
            ),
            (
                node("foo9", json!({"unschedulable": true}), json!({"conditions": [{}]})),
                "Unknown,SchedulingDisabled",
            ),
            // the node lifecycle controller's Ready=Unknown prints NotReady
            (node("foo10", json!({}), ready("Unknown")), "NotReady"),
            // the last Ready condition wins
            (
                node(
                    "foo11",
                    json!({}),
                    json!({"conditions": [{"type": "Ready", "status": "True"}, {"type": "Ready", "status": "False"}]}),
                ),
                "NotReady",
            ),
        ];
        for (n, status) in cases {
            let name = n["metadata"]["name"].clone();
            assert_eq!(
                cells("", "nodes", &n)[..5],
                [name, json!(status), json!("<none>"), json!("<unknown>"), json!("")]
            );
        }
    }

    /// printers_test.go TestPrintNodeRole.
    #[test]
    fn print_node_role() {
        let cases: &[(Value, &str)] = &[
            (json!({}), "<none>"),
            (
                json!({"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": "",
                       "node-role.kubernetes.io/proxy": "", "kubernetes.io/role": "node"}),
                "control-plane,master,node,proxy",
            ),
            (json!({"kubernetes.io/role": "node"}), "node"),
            (json!({"node-role.kubernetes.io/": "x", "kubernetes.io/role": ""}), "<none>"),
        ];
        for (labels, want) in cases {
            let n = json!({"metadata": {"name": "n", "labels": labels}});
            assert_eq!(cells("", "nodes", &n)[2], json!(want), "{labels}");
        }
    }

    /// printers_test.go TestPrintNodeOSImage, TestPrintNodeKernelVersion,
    /// TestPrintNodeContainerRuntimeVersion, TestPrintNodeExternalIP and TestPrintNodeInternalIP
    /// (wide columns).
    #[test]
    fn print_node_wide() {
        let ext = json!([{"type": "ExternalIP", "address": "1.1.1.1"}]);
        let cases: Vec<(Value, [&str; 5])> = vec![
            (
                json!({"nodeInfo": {"osImage": "fake-os-image"}, "addresses": ext}),
                ["<none>", "1.1.1.1", "fake-os-image", "<unknown>", "<unknown>"],
            ),
            (
                json!({"nodeInfo": {"kernelVersion": "fake-kernel-version"}, "addresses": ext}),
                ["<none>", "1.1.1.1", "<unknown>", "fake-kernel-version", "<unknown>"],
            ),
            (
                json!({"nodeInfo": {"containerRuntimeVersion": "foo://1.2.3"}, "addresses": ext}),
                ["<none>", "1.1.1.1", "<unknown>", "<unknown>", "foo://1.2.3"],
            ),
            (
                json!({"addresses": [{"type": "InternalIP", "address": "1.1.1.1"}]}),
                ["1.1.1.1", "<none>", "<unknown>", "<unknown>", "<unknown>"],
            ),
            (
                json!({"addresses": [{"type": "ExternalIP", "address": "2.2.2.2"}, {"type": "InternalIP", "address": "3.3.3.3"},
                                     {"type": "ExternalIP", "address": "4.4.4.4"}]}),
                ["3.3.3.3", "2.2.2.2", "<unknown>", "<unknown>", "<unknown>"],
            ),
            (
                json!({"addresses": [{"type": "InternalIP", "address": "2.2.2.2"}, {"type": "ExternalIP", "address": "3.3.3.3"},
                                     {"type": "InternalIP", "address": "4.4.4.4"}]}),
                ["2.2.2.2", "3.3.3.3", "<unknown>", "<unknown>", "<unknown>"],
            ),
        ];
        for (status, want) in cases {
            let n = node("foo1", json!({}), status);
            let got = cells("", "nodes", &n);
            assert_eq!(
                got[..5],
                [json!("foo1"), json!("Unknown"), json!("<none>"), json!("<unknown>"), json!("")]
            );
            assert_eq!(got[5..], want.map(|s| json!(s)));
        }
        // Version and age of a registered node.
        let n = json!({"metadata": {"name": "w1", "creationTimestamp": at(-49 * 3600)},
                       "status": {"nodeInfo": {"kubeletVersion": "v1.37.0"}, "conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(
            cells("", "nodes", &n)[..5],
            [json!("w1"), json!("Ready"), json!("<none>"), json!("2d1h"), json!("v1.37.0")]
        );
    }

    #[test]
    fn print_namespace_lease_and_config() {
        let cases: Vec<(&str, &str, Value, Vec<Value>)> = vec![
            (
                "",
                "namespaces",
                json!({"metadata": {"name": "ns", "creationTimestamp": at(-70)}, "status": {"phase": "Terminating"}}),
                vec![json!("ns"), json!("Terminating"), json!("70s")],
            ),
            (
                "",
                "namespaces",
                json!({"metadata": {"name": "bare"}}),
                vec![json!("bare"), json!(""), json!("<unknown>")],
            ),
            (
                "coordination.k8s.io",
                "leases",
                json!({"metadata": {"name": "w1", "creationTimestamp": at(-5)}, "spec": {"holderIdentity": "w1-abc"}}),
                vec![json!("w1"), json!("w1-abc"), json!("5s")],
            ),
            (
                "coordination.k8s.io",
                "leases",
                json!({"metadata": {"name": "free"}}),
                vec![json!("free"), json!(""), json!("<unknown>")],
            ),
            (
                "",
                "configmaps",
                json!({"metadata": {"name": "cm"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}),
                vec![json!("cm"), json!(3), json!("<unknown>")],
            ),
            (
                "",
                "secrets",
                json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}),
                vec![json!("s"), json!("kubernetes.io/tls"), json!(2), json!("<unknown>")],
            ),
            (
                "",
                "secrets",
                json!({"metadata": {"name": "s2"}, "data": {"a": ""}, "stringData": {"a": "x", "b": "y"}}),
                vec![json!("s2"), json!("Opaque"), json!(2), json!("<unknown>")],
            ),
            (
                "",
                "serviceaccounts",
                json!({"metadata": {"name": "default"}, "secrets": [{"name": "t"}]}),
                vec![json!("default"), json!(1), json!("<unknown>")],
            ),
        ];
        for (group, plural, obj, want) in cases {
            assert_eq!(cells(group, plural, &obj), want, "{plural} {}", obj["metadata"]["name"]);
        }
    }
}
