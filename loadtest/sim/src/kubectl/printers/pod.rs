//! printPod.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::{AGE, Col, NAME, Row, age, col, wide};
use crate::kubectl::Obj;
use crate::kubectl::duration::since;

pub(super) const COLUMNS: &[Col] = &[
    NAME,
    col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    col("Status", "string", "The aggregate status of the containers in this pod."),
    col(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    AGE,
    wide(
        "IP",
        "string",
        "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
    ),
    wide(
        "Node",
        "string",
        "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
    ),
    wide(
        "Nominated Node",
        "string",
        "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
    ),
    wide(
        "Readiness Gates",
        "string",
        "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
    ),
];

/// `node.NodeUnreachablePodReason`.
const NODE_LOST: &str = "NodeLost";

fn is_restartable_init_container(c: Option<&Value>) -> bool {
    c.is_some_and(|c| Obj(c).str(&["restartPolicy"]) == "Always")
}

/// Keeps the later of two restart times (`lastRestartDate.Before(&terminatedDate)`).
fn later(cur: Option<Timestamp>, candidate: Option<Timestamp>) -> Option<Timestamp> {
    match (cur, candidate) {
        (Some(c), Some(t)) if c < t => Some(t),
        (None, t) => t,
        (c, _) => c,
    }
}

fn last_terminated(cs: Obj) -> Option<Timestamp> {
    if cs.has(&["lastState", "terminated"]) {
        cs.time(&["lastState", "terminated", "finishedAt"])
    } else {
        None
    }
}

/// `Signal:N` / `ExitCode:N` for a terminated state without a reason.
fn exit_reason(term: Obj, prefix: &str) -> String {
    let signal = term.int(&["signal"]);
    if signal != 0 {
        format!("{prefix}Signal:{signal}")
    } else {
        format!("{prefix}ExitCode:{}", term.int(&["exitCode"]))
    }
}

fn first_condition<'a>(status: Obj<'a>, kind: &str) -> Option<Obj<'a>> {
    status.list(&["conditions"]).iter().map(Obj).find(|c| c.str(&["type"]) == kind)
}

pub(super) fn row(pod: Obj, now: Timestamp) -> Row {
    let spec = pod.sub(&["spec"]);
    let status = pod.sub(&["status"]);
    let init_specs = spec.list(&["initContainers"]);

    let mut restarts: i64 = 0;
    let mut restartable_init_restarts: i64 = 0;
    let mut total = spec.list(&["containers"]).len();
    let mut ready = 0usize;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_restartable_init_restart: Option<Timestamp> = None;

    let phase = status.str(&["phase"]);
    let mut reason = phase.to_string();
    if !status.str(&["reason"]).is_empty() {
        reason = status.str(&["reason"]).to_string();
    }
    // A {type: PodScheduled, reason: SchedulingGated} condition shows as SchedulingGated.
    for c in status.list(&["conditions"]).iter().map(Obj) {
        if c.str(&["type"]) == "PodScheduled" && c.str(&["reason"]) == "SchedulingGated" {
            reason = "SchedulingGated".into();
        }
    }
    let conditions = match phase {
        "Succeeded" => Some(json!([{"type": "Completed", "status": "True", "reason": "Succeeded",
                                     "message": "The pod has completed successfully."}])),
        "Failed" => Some(json!([{"type": "Completed", "status": "True", "reason": "Failed",
                                  "message": "The pod failed."}])),
        _ => None,
    };

    // initContainers[name], as a Go map: the last definition of a name wins.
    let init_spec = |name: &str| init_specs.iter().rev().find(|c| Obj(c).str(&["name"]) == name);
    total += init_specs.iter().filter(|c| is_restartable_init_container(Some(c))).count();

    let mut initializing = false;
    for (i, cs) in status.list(&["initContainerStatuses"]).iter().map(Obj).enumerate() {
        let restartable = is_restartable_init_container(init_spec(cs.str(&["name"])));
        restarts += cs.int(&["restartCount"]);
        last_restart = later(last_restart, last_terminated(cs));
        if restartable {
            restartable_init_restarts += cs.int(&["restartCount"]);
            last_restartable_init_restart = later(last_restartable_init_restart, last_terminated(cs));
        }
        let terminated = cs.has(&["state", "terminated"]).then(|| cs.sub(&["state", "terminated"]));
        let waiting_reason = cs.str(&["state", "waiting", "reason"]);
        match terminated {
            Some(t) if t.int(&["exitCode"]) == 0 => continue,
            _ if restartable && cs.opt_bool(&["started"]) == Some(true) => {
                if cs.bool(&["ready"]) {
                    ready += 1;
                }
                continue;
            }
            Some(t) => {
                // initialization failed
                let r = t.str(&["reason"]);
                reason = if r.is_empty() { exit_reason(t, "Init:") } else { format!("Init:{r}") };
            }
            None if cs.has(&["state", "waiting"])
                && !waiting_reason.is_empty()
                && waiting_reason != "PodInitializing" =>
            {
                reason = format!("Init:{waiting_reason}");
            }
            None => reason = format!("Init:{i}/{}", init_specs.len()),
        }
        initializing = true;
        break;
    }

    let initialized = first_condition(status, "Initialized").is_some_and(|c| c.str(&["status"]) == "True");
    if !initializing || initialized {
        restarts = restartable_init_restarts;
        last_restart = last_restartable_init_restart;
        let mut has_running = false;
        for cs in status.list(&["containerStatuses"]).iter().rev().map(Obj) {
            restarts += cs.int(&["restartCount"]);
            last_restart = later(last_restart, last_terminated(cs));
            let waiting_reason = cs.str(&["state", "waiting", "reason"]);
            let terminated = cs.has(&["state", "terminated"]).then(|| cs.sub(&["state", "terminated"]));
            if cs.has(&["state", "waiting"]) && !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                let r = t.str(&["reason"]);
                reason = if r.is_empty() { exit_reason(t, "") } else { r.to_string() };
            } else if cs.bool(&["ready"]) && cs.has(&["state", "running"]) {
                has_running = true;
                ready += 1;
            }
        }
        // Back to Running if at least one container still reports running.
        if reason == "Completed" && has_running {
            let pod_ready = status
                .list(&["conditions"])
                .iter()
                .map(Obj)
                .any(|c| c.str(&["type"]) == "Ready" && c.str(&["status"]) == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }

    if pod.has(&["metadata", "deletionTimestamp"]) {
        if status.str(&["reason"]) == NODE_LOST {
            reason = "Unknown".into();
        } else if !matches!(phase, "Succeeded" | "Failed") {
            reason = "Terminating".into();
        }
    }

    let restarts_cell = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", since(Some(t), now)),
        _ => restarts.to_string(),
    };

    // v1 -> internal conversion: podIP is authoritative, else podIPs[0].
    let mut ip = status.str(&["podIP"]);
    if ip.is_empty() {
        ip = status.list(&["podIPs"]).first().map_or("", |p| Obj(p).str(&["ip"]));
    }
    let or_none = |s: &str| if s.is_empty() { "<none>".to_string() } else { s.to_string() };
    let gates = spec.list(&["readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let true_conditions = gates
            .iter()
            .filter(|g| {
                first_condition(status, Obj(g).str(&["conditionType"]))
                    .is_some_and(|c| c.str(&["status"]) == "True")
            })
            .count();
        format!("{true_conditions}/{}", gates.len())
    };

    Row {
        cells: vec![
            json!(pod.name()),
            json!(format!("{ready}/{total}")),
            json!(reason),
            json!(restarts_cell),
            json!(age(pod, now)),
            json!(or_none(ip)),
            json!(or_none(spec.str(&["nodeName"]))),
            json!(or_none(status.str(&["nominatedNodeName"]))),
            json!(readiness_gates),
        ],
        conditions,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::test_support::*;

    fn print(pod: &Value) -> Vec<Value> {
        cells("", "pods", pod)
    }

    /// `n` empty containers, like `make([]api.Container, n)`.
    fn containers(n: usize) -> Value {
        Value::Array(vec![json!({}); n])
    }

    fn pod(name: &str, n: usize, status: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": {"containers": containers(n)}, "status": status})
    }

    fn running() -> Value {
        json!({"running": {}})
    }

    fn restarted(secs_ago: i64) -> Value {
        json!({"terminated": {"finishedAt": at(-secs_ago)}})
    }

    /// printers_test.go TestPrintPod (non-wide cells; the sim always prints wide, so the
    /// remaining four cells are checked separately).
    #[test]
    fn print_pod() {
        let cases: Vec<(Value, [&str; 5])> = vec![
            // Test name, num of containers, restarts, container ready status
            (
                pod(
                    "test1",
                    2,
                    json!({"phase": "podPhase", "containerStatuses": [
                    {"ready": true, "restartCount": 3, "state": running()}, {"restartCount": 3}]}),
                ),
                ["test1", "1/2", "podPhase", "6", "<unknown>"],
            ),
            // Test container error overwrites pod phase
            (
                pod(
                    "test2",
                    2,
                    json!({"phase": "podPhase", "containerStatuses": [
                    {"ready": true, "restartCount": 3, "state": running()},
                    {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3}]}),
                ),
                ["test2", "1/2", "ContainerWaitingReason", "6", "<unknown>"],
            ),
            // Terminated state; the first container overwrites the rest
            (
                pod(
                    "test3",
                    2,
                    json!({"phase": "podPhase", "containerStatuses": [
                    {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3},
                    {"state": {"terminated": {"reason": "ContainerTerminatedReason"}}, "restartCount": 3}]}),
                ),
                ["test3", "0/2", "ContainerWaitingReason", "6", "<unknown>"],
            ),
            // Ready is not enough for reporting running
            (
                pod(
                    "test4",
                    2,
                    json!({"phase": "podPhase", "containerStatuses": [
                    {"ready": true, "restartCount": 3, "state": running()}, {"ready": true, "restartCount": 3}]}),
                ),
                ["test4", "1/2", "podPhase", "6", "<unknown>"],
            ),
            (
                pod(
                    "test5",
                    2,
                    json!({"reason": "podReason", "phase": "podPhase", "containerStatuses": [
                    {"ready": true, "restartCount": 3, "state": running()}, {"ready": true, "restartCount": 3}]}),
                ),
                ["test5", "1/2", "podReason", "6", "<unknown>"],
            ),
            // One running, one completed, without a Ready condition
            (
                pod(
                    "test6",
                    2,
                    json!({"phase": "Running", "containerStatuses": [
                    {"ready": true, "restartCount": 3, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
                    {"ready": true, "restartCount": 3, "state": running()}]}),
                ),
                ["test6", "1/2", "NotReady", "6", "<unknown>"],
            ),
            // ... and with it
            (
                pod(
                    "test6",
                    2,
                    json!({"phase": "Running", "containerStatuses": [
                    {"ready": true, "restartCount": 3, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
                    {"ready": true, "restartCount": 3, "state": running()}],
                    "conditions": [{"type": "Ready", "status": "True"}]}),
                ),
                ["test6", "1/2", "Running", "6", "<unknown>"],
            ),
            // 1 init container restarting and 1 container not running
            (
                json!({"metadata": {"name": "test7"}, "spec": {"initContainers": containers(1), "containers": containers(1)},
                       "status": {"phase": "podPhase",
                         "initContainerStatuses": [{"ready": false, "restartCount": 3, "state": running(), "lastState": restarted(10)}],
                         "containerStatuses": [{"ready": false, "restartCount": 0, "state": {"waiting": {}}}]}}),
                ["test7", "0/1", "Init:0/1", "3 (10s ago)", "<unknown>"],
            ),
            // 2 init containers, one restarting and the other not running
            (
                json!({"metadata": {"name": "test8"}, "spec": {"initContainers": containers(2), "containers": containers(1)},
                       "status": {"phase": "podPhase",
                         "initContainerStatuses": [
                           {"ready": false, "restartCount": 3, "state": running(), "lastState": restarted(10)},
                           {"ready": false, "state": {"waiting": {}}}],
                         "containerStatuses": [{"ready": false, "state": {"waiting": {}}}]}}),
                ["test8", "0/1", "Init:0/2", "3 (10s ago)", "<unknown>"],
            ),
            // 2 init containers, one completed without restarts and the other restarting
            (
                json!({"metadata": {"name": "test9"}, "spec": {"initContainers": containers(2), "containers": containers(1)},
                       "status": {"phase": "podPhase",
                         "initContainerStatuses": [
                           {"ready": false, "state": {"terminated": {}}},
                           {"ready": false, "restartCount": 3, "state": running(), "lastState": restarted(10)}],
                         "containerStatuses": [{"ready": false, "state": {"waiting": {}}}]}}),
                ["test9", "0/1", "Init:1/2", "3 (10s ago)", "<unknown>"],
            ),
            // 2 init containers, one completed with restarts and the other restarting
            (
                json!({"metadata": {"name": "test10"}, "spec": {"initContainers": containers(2), "containers": containers(1)},
                       "status": {"phase": "podPhase",
                         "initContainerStatuses": [
                           {"ready": false, "restartCount": 2, "state": {"terminated": {}}, "lastState": restarted(120)},
                           {"ready": false, "restartCount": 3, "state": running(), "lastState": restarted(10)}],
                         "containerStatuses": [{"ready": false, "state": {"waiting": {}}}]}}),
                ["test10", "0/1", "Init:1/2", "5 (10s ago)", "<unknown>"],
            ),
            // 1 init container completed with restarts and one container restarting
            (
                json!({"metadata": {"name": "test11"}, "spec": {"initContainers": containers(1), "containers": containers(1)},
                       "status": {"phase": "Running",
                         "initContainerStatuses": [{"ready": false, "restartCount": 2, "state": {"terminated": {}}, "lastState": restarted(120)}],
                         "containerStatuses": [{"ready": false, "restartCount": 4, "state": running(), "lastState": restarted(20)}]}}),
                ["test11", "0/1", "Running", "4 (20s ago)", "<unknown>"],
            ),
            // 1 container that restarted 5d ago
            (
                pod(
                    "test12",
                    1,
                    json!({"phase": "Running", "containerStatuses": [
                    {"ready": true, "restartCount": 3, "state": running(), "lastState": restarted(5 * 86400)}]}),
                ),
                ["test12", "1/1", "Running", "3 (5d ago)", "<unknown>"],
            ),
            // one never restarted, the other restarted 10d ago
            (
                pod(
                    "test13",
                    2,
                    json!({"phase": "Running", "containerStatuses": [
                    {"ready": true, "restartCount": 0, "state": running()},
                    {"ready": true, "restartCount": 3, "state": running(), "lastState": restarted(10 * 86400)}]}),
                ),
                ["test13", "2/2", "Running", "3 (10d ago)", "<unknown>"],
            ),
            // one restarted 5d ago and the other 20d ago
            (
                pod(
                    "test14",
                    2,
                    json!({"phase": "Running", "containerStatuses": [
                    {"ready": true, "restartCount": 6, "state": running(), "lastState": restarted(5 * 86400)},
                    {"ready": true, "restartCount": 3, "state": running(), "lastState": restarted(20 * 86400)}]}),
                ),
                ["test14", "2/2", "Running", "9 (5d ago)", "<unknown>"],
            ),
            // PodScheduled condition with reason SchedulingGated
            (
                pod(
                    "test15",
                    2,
                    json!({"phase": "podPhase", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
                ),
                ["test15", "0/2", "SchedulingGated", "0", "<unknown>"],
            ),
            // succeeded
            (
                pod(
                    "test16",
                    1,
                    json!({"phase": "Succeeded", "containerStatuses": [
                    {"ready": false, "restartCount": 0, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]}),
                ),
                ["test16", "0/1", "Completed", "0", "<unknown>"],
            ),
            // failed
            (
                pod(
                    "test17",
                    1,
                    json!({"phase": "Failed", "containerStatuses": [
                    {"ready": false, "restartCount": 0, "state": {"terminated": {"reason": "Error", "exitCode": 1}}}]}),
                ),
                ["test17", "0/1", "Error", "0", "<unknown>"],
            ),
            // succeeded, being deleted: a terminal pod never shows Terminating
            (
                json!({"metadata": {"name": "test18", "deletionTimestamp": at(-10)}, "spec": {"containers": containers(1)},
                       "status": {"phase": "Succeeded", "containerStatuses": [
                         {"ready": false, "restartCount": 0, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]}}),
                ["test18", "0/1", "Completed", "0", "<unknown>"],
            ),
            // running, being deleted
            (
                json!({"metadata": {"name": "test19", "deletionTimestamp": at(-10)}, "spec": {"containers": containers(1)},
                       "status": {"phase": "Running", "containerStatuses": [{"ready": false, "restartCount": 0, "state": running()}]}}),
                ["test19", "0/1", "Terminating", "0", "<unknown>"],
            ),
            // pending, being deleted
            (
                json!({"metadata": {"name": "test20", "deletionTimestamp": at(-10)}, "spec": {"containers": containers(1)},
                       "status": {"phase": "Pending"}}),
                ["test20", "0/1", "Terminating", "0", "<unknown>"],
            ),
            // sim extras: node lost while deleting; exit code and signal without a reason; an age
            (
                json!({"metadata": {"name": "lost", "deletionTimestamp": at(-1)}, "spec": {"containers": containers(1)},
                       "status": {"phase": "Running", "reason": "NodeLost"}}),
                ["lost", "0/1", "Unknown", "0", "<unknown>"],
            ),
            (
                pod(
                    "codes",
                    2,
                    json!({"phase": "Running", "containerStatuses": [
                    {"state": {"terminated": {"exitCode": 3}}}, {"state": {"terminated": {"exitCode": 0, "signal": 9}}}]}),
                ),
                ["codes", "0/2", "ExitCode:3", "0", "<unknown>"],
            ),
            (
                json!({"metadata": {"name": "init-fail", "creationTimestamp": at(-190)},
                       "spec": {"initContainers": containers(1), "containers": containers(1)},
                       "status": {"phase": "Pending", "initContainerStatuses": [{"state": {"terminated": {"exitCode": 2}}}]}}),
                ["init-fail", "0/1", "Init:ExitCode:2", "0", "3m10s"],
            ),
            (
                json!({"metadata": {"name": "init-wait"}, "spec": {"initContainers": containers(1), "containers": containers(1)},
                       "status": {"phase": "Pending", "initContainerStatuses": [{"state": {"waiting": {"reason": "ErrImagePull"}}}]}}),
                ["init-wait", "0/1", "Init:ErrImagePull", "0", "<unknown>"],
            ),
        ];
        for (pod, want) in cases {
            let got = print(&pod);
            assert_eq!(got[..5], want.map(|s| json!(s)), "{}", pod["metadata"]["name"]);
        }
    }

    /// printers_test.go TestPrintPodWithRestartableInitContainer.
    #[test]
    fn print_pod_with_restartable_init_container() {
        let sidecars = json!([{"name": "restartable-init-1", "restartPolicy": "Always"},
                              {"name": "restartable-init-2", "restartPolicy": "Always"}]);
        let with = |name: &str, status: Value| json!({"metadata": {"name": name}, "spec": {"initContainers": sidecars, "containers": containers(1)}, "status": status});
        let cases: Vec<(Value, [&str; 5])> = vec![
            (
                with(
                    "test1",
                    json!({"phase": "Pending", "initContainerStatuses": [
                    {"name": "restartable-init-1", "ready": false, "restartCount": 3, "state": running(), "started": false, "lastState": restarted(10)},
                    {"name": "restartable-init-2", "ready": false, "state": {"waiting": {}}, "started": false}],
                    "containerStatuses": [{"ready": false, "restartCount": 0, "state": {"waiting": {}}}],
                    "conditions": [{"type": "Initialized", "status": "False"}]}),
                ),
                ["test1", "0/3", "Init:0/2", "3 (10s ago)", "<unknown>"],
            ),
            (
                with(
                    "test1",
                    json!({"phase": "Pending", "initContainerStatuses": [
                    {"name": "restartable-init-1", "ready": false, "restartCount": 3, "state": running(), "started": true, "lastState": restarted(10)},
                    {"name": "restartable-init-2", "ready": false, "state": running(), "started": false}],
                    "containerStatuses": [{"ready": false, "restartCount": 0, "state": {"waiting": {}}}],
                    "conditions": [{"type": "Initialized", "status": "False"}]}),
                ),
                ["test1", "0/3", "Init:1/2", "3 (10s ago)", "<unknown>"],
            ),
            (
                with(
                    "test2",
                    json!({"phase": "Running", "initContainerStatuses": [
                    {"name": "restartable-init-1", "ready": false, "restartCount": 3, "state": running(), "started": true, "lastState": restarted(10)},
                    {"name": "restartable-init-2", "ready": false, "state": running(), "started": true}],
                    "containerStatuses": [{"ready": true, "restartCount": 4, "state": running(), "lastState": restarted(20)}],
                    "conditions": [{"type": "Initialized", "status": "True"}]}),
                ),
                ["test2", "1/3", "Running", "7 (10s ago)", "<unknown>"],
            ),
            (
                with(
                    "test3",
                    json!({"phase": "Succeeded", "initContainerStatuses": [
                    {"name": "restartable-init-1", "ready": false, "restartCount": 3, "state": {"terminated": {"reason": "Error", "exitCode": 137}}, "started": false, "lastState": restarted(10)},
                    {"name": "restartable-init-2", "ready": false, "state": {"terminated": {"reason": "Error", "exitCode": 137}}, "started": false}],
                    "containerStatuses": [{"ready": false, "restartCount": 4, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}, "lastState": restarted(20)}],
                    "conditions": [{"type": "Initialized", "status": "True"}]}),
                ),
                ["test3", "0/3", "Completed", "7 (10s ago)", "<unknown>"],
            ),
            // statuses for non-existent init containers and containers
            (
                json!({"metadata": {"name": "test4"},
                       "spec": {"initContainers": [{"name": "init1", "image": "initimage"},
                                                   {"name": "sidecar1", "image": "sidecarimage", "restartPolicy": "Always"}],
                                "containers": [{"name": "container1", "image": "containerimage"}]},
                       "status": {"phase": "Running",
                                  "initContainerStatuses": [{"name": "initinvalid"}, {"name": "init1"}, {"name": "sidecar1"}],
                                  "containerStatuses": [{"name": "containerinvalid"}, {"name": "container1"}]}}),
                ["test4", "0/2", "Init:0/2", "0", "<unknown>"],
            ),
        ];
        for (pod, want) in cases {
            assert_eq!(print(&pod)[..5], want.map(|s| json!(s)), "{}", pod["metadata"]["name"]);
        }
    }

    /// printers_test.go TestPrintPodwide, plus the podIP/podIPs conversion rule.
    #[test]
    fn print_pod_wide() {
        let gates = json!([{"conditionType": "condition1"}, {"conditionType": "condition2"}, {"conditionType": "condition3"}]);
        let base = |ips: Value| {
            json!({"metadata": {"name": "test1"},
                   "spec": {"containers": containers(2), "nodeName": "test1", "readinessGates": gates},
                   "status": {"conditions": [{"type": "condition1", "status": "False"}, {"type": "condition2", "status": "True"}],
                              "phase": "podPhase", "podIPs": ips, "nominatedNodeName": "node1",
                              "containerStatuses": [{"ready": true, "restartCount": 3, "state": running()}, {"restartCount": 3}]}})
        };
        let wide = ["test1", "1/2", "podPhase", "6", "<unknown>", "1.1.1.1", "test1", "node1", "1/3"];
        assert_eq!(print(&base(json!([{"ip": "1.1.1.1"}]))), wide.map(|s| json!(s)));
        assert_eq!(print(&base(json!([{"ip": "1.1.1.1"}, {"ip": "2001:db8::"}]))), wide.map(|s| json!(s)));
        let mut with_pod_ip = base(json!([{"ip": "9.9.9.9"}]));
        with_pod_ip["status"]["podIP"] = json!("1.1.1.1");
        assert_eq!(print(&with_pod_ip), wide.map(|s| json!(s)));

        let none = pod(
            "test2",
            2,
            json!({"phase": "podPhase", "containerStatuses": [
            {"ready": true, "restartCount": 3, "state": running()},
            {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3}]}),
        );
        let want = [
            "test2",
            "1/2",
            "ContainerWaitingReason",
            "6",
            "<unknown>",
            "<none>",
            "<none>",
            "<none>",
            "<none>",
        ];
        assert_eq!(print(&none), want.map(|s| json!(s)));
    }

    /// printers_test.go TestPrintPodConditions: Completed row conditions for terminal phases.
    #[test]
    fn print_pod_conditions() {
        let statuses = json!([{"ready": true, "restartCount": 3, "state": running()}, {"restartCount": 3}]);
        let rt = rt("", "pods");
        let cases: &[(&str, Value)] = &[
            ("Running", Value::Null),
            (
                "Succeeded",
                json!([{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}]),
            ),
            (
                "Failed",
                json!([{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]),
            ),
        ];
        for (phase, want) in cases {
            let p = pod("test1", 2, json!({"phase": phase, "containerStatuses": statuses}));
            let row = super::super::row(&rt, &p, now());
            assert_eq!(row.cells[2], json!(phase));
            assert_eq!(row.conditions.unwrap_or(Value::Null), *want, "{phase}");
        }
    }

    #[test]
    fn malformed_pods_print_zero_values() {
        let cases: &[(Value, [&str; 9])] = &[
            (json!({}), ["", "0/0", "", "0", "<unknown>", "<none>", "<none>", "<none>", "<none>"]),
            (
                json!({"metadata": {"name": "x", "creationTimestamp": "bad"}, "spec": {"containers": "nope"},
                       "status": {"containerStatuses": [7, null, {"state": "weird", "restartCount": "3"}]}}),
                ["x", "0/0", "", "0", "<unknown>", "<none>", "<none>", "<none>", "<none>"],
            ),
        ];
        for (p, want) in cases {
            assert_eq!(print(p), want.map(|s| json!(s)));
        }
    }
}
