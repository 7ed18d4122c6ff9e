//! printDeployment, printStatefulSet, printReplicaSet and printDaemonSet.

use jiff::Timestamp;
use serde_json::json;

use super::{
    AGE, CONTAINERS, Col, IMAGES, NAME, Row, age, col, containers, format_label_selector, format_labels,
    selector_string, wide,
};
use crate::kubectl::Obj;

const READY_DOC: &str = "Number of the pod with ready state";

pub(super) const DEPLOYMENT_COLUMNS: &[Col] = &[
    NAME,
    col("Ready", "string", READY_DOC),
    col(
        "Up-to-date",
        "string",
        "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
    ),
    col(
        "Available",
        "string",
        "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
    ),
];

pub(super) const STATEFULSET_COLUMNS: &[Col] =
    &[NAME, col("Ready", "string", READY_DOC), AGE, CONTAINERS, IMAGES];

pub(super) const REPLICASET_COLUMNS: &[Col] = &[
    NAME,
    col(
        "Desired",
        "integer",
        "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller",
    ),
    col("Current", "integer", "Replicas is the most recently observed number of replicas."),
    col("Ready", "integer", "The number of ready replicas for this replica set."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
];

pub(super) const DAEMONSET_COLUMNS: &[Col] = &[
    NAME,
    col(
        "Desired",
        "integer",
        "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).",
    ),
    col(
        "Current",
        "integer",
        "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
    ),
    col(
        "Ready",
        "integer",
        "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
    ),
    col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
    col(
        "Available",
        "integer",
        "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
    ),
    col(
        "Node Selector",
        "string",
        "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
];

/// `spec.replicas` as the apps/v1 defaulting leaves it (1 when unset).
fn desired(o: Obj) -> i64 {
    o.opt_int(&["spec", "replicas"]).unwrap_or(1)
}

pub(super) fn deployment(d: Obj, now: Timestamp) -> Row {
    let (names, images) = containers(d.sub(&["spec", "template", "spec"]));
    let selector = selector_string(d.at(&["spec", "selector"])).unwrap_or_else(|()| "<invalid>".into());
    Row::cells(vec![
        json!(d.name()),
        json!(format!("{}/{}", d.int(&["status", "readyReplicas"]), desired(d))),
        json!(d.int(&["status", "updatedReplicas"])),
        json!(d.int(&["status", "availableReplicas"])),
        json!(age(d, now)),
        json!(names),
        json!(images),
        json!(selector),
    ])
}

pub(super) fn statefulset(s: Obj, now: Timestamp) -> Row {
    let (names, images) = containers(s.sub(&["spec", "template", "spec"]));
    Row::cells(vec![
        json!(s.name()),
        json!(format!("{}/{}", s.int(&["status", "readyReplicas"]), desired(s))),
        json!(age(s, now)),
        json!(names),
        json!(images),
    ])
}

pub(super) fn replicaset(rs: Obj, now: Timestamp) -> Row {
    let (names, images) = containers(rs.sub(&["spec", "template", "spec"]));
    Row::cells(vec![
        json!(rs.name()),
        json!(desired(rs)),
        json!(rs.int(&["status", "replicas"])),
        json!(rs.int(&["status", "readyReplicas"])),
        json!(age(rs, now)),
        json!(names),
        json!(images),
        json!(format_label_selector(rs.at(&["spec", "selector"]))),
    ])
}

pub(super) fn daemonset(ds: Obj, now: Timestamp) -> Row {
    let (names, images) = containers(ds.sub(&["spec", "template", "spec"]));
    let status = ds.sub(&["status"]);
    Row::cells(vec![
        json!(ds.name()),
        json!(status.int(&["desiredNumberScheduled"])),
        json!(status.int(&["currentNumberScheduled"])),
        json!(status.int(&["numberReady"])),
        json!(status.int(&["updatedNumberScheduled"])),
        json!(status.int(&["numberAvailable"])),
        json!(format_labels(ds.at(&["spec", "template", "spec", "nodeSelector"]))),
        json!(age(ds, now)),
        json!(names),
        json!(images),
        json!(format_label_selector(ds.at(&["spec", "selector"]))),
    ])
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::test_support::*;

    fn template() -> Value {
        json!({"spec": {"containers": [{"name": "fake-container1", "image": "fake-image1"},
                                       {"name": "fake-container2", "image": "fake-image2"}]}})
    }

    /// printers_test.go TestPrintDeployment (wide).
    #[test]
    fn print_deployment() {
        let d = json!({"metadata": {"name": "test1", "creationTimestamp": soon()},
                       "spec": {"replicas": 5, "template": template(), "selector": {"matchLabels": {"foo": "bar"}}},
                       "status": {"replicas": 10, "updatedReplicas": 2, "availableReplicas": 1, "unavailableReplicas": 4}});
        let want = json!([
            "test1",
            "0/5",
            2,
            1,
            "0s",
            "fake-container1,fake-container2",
            "fake-image1,fake-image2",
            "foo=bar"
        ]);
        assert_eq!(Value::Array(cells("apps", "deployments", &d)), want);
        let bare = json!(["", "0/1", 0, 0, "<unknown>", "", "", ""]);
        assert_eq!(Value::Array(cells("apps", "deployments", &json!({}))), bare);
    }

    /// printers_test.go TestPrintDaemonSet (wide) and TestPrintDaemonSetList.
    #[test]
    fn print_daemonset() {
        let ds = json!({"metadata": {"name": "test1", "creationTimestamp": soon()},
                        "spec": {"template": template(), "selector": {"matchLabels": {"foo": "bar"}}},
                        "status": {"currentNumberScheduled": 2, "desiredNumberScheduled": 3, "numberReady": 1,
                                   "updatedNumberScheduled": 2, "numberAvailable": 0}});
        let want = json!([
            "test1",
            3,
            2,
            1,
            2,
            0,
            "<none>",
            "0s",
            "fake-container1,fake-container2",
            "fake-image1,fake-image2",
            "foo=bar"
        ]);
        assert_eq!(Value::Array(cells("apps", "daemonsets", &ds)), want);
        let ds2 = json!({"metadata": {"name": "daemonset2"},
                         "spec": {"template": {"spec": {"nodeSelector": {"zone": "a", "disk": "ssd"}}}}});
        assert_eq!(cells("apps", "daemonsets", &ds2)[6], json!("disk=ssd,zone=a"));
    }

    #[test]
    fn print_statefulset_and_replicaset() {
        let sts = json!({"metadata": {"name": "db"}, "spec": {"replicas": 3, "template": template()},
                         "status": {"readyReplicas": 2}});
        assert_eq!(
            Value::Array(cells("apps", "statefulsets", &sts)),
            json!(["db", "2/3", "<unknown>", "fake-container1,fake-container2", "fake-image1,fake-image2"])
        );
        let rs = json!({"metadata": {"name": "rs"}, "spec": {"replicas": 2, "template": template(), "selector": {"matchLabels": {"a": "b"}}},
                        "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(
            Value::Array(cells("apps", "replicasets", &rs)),
            json!([
                "rs",
                2,
                2,
                1,
                "<unknown>",
                "fake-container1,fake-container2",
                "fake-image1,fake-image2",
                "a=b"
            ])
        );
    }
}
