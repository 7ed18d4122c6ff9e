//! Simulated nodes: Node objects, their heartbeat Leases in kube-node-lease, readiness and
//! taints, driven by the admin endpoint.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::apiserver::meta;
use crate::apiserver::{ApiError, ApiServer, DeleteOptions, Subresource, WriteOptions};
use crate::http::NodeAdmin;

pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";
const LEASE_DURATION_SECONDS: i64 = 40;

/// The simulated nodes and whether each one heartbeats.
pub struct Nodes {
    api: Arc<ApiServer>,
    /// Per node: whether its kubelet runs pods (Ready) and whether it renews its Lease.
    state: Mutex<BTreeMap<String, NodeState>>,
    pub(crate) confirm_deletions: AtomicBool,
    /// Nodes added so far, for their addresses.
    added: AtomicU32,
}

#[derive(Debug, Clone, Copy)]
struct NodeState {
    ready: bool,
    heartbeat: bool,
}

impl Nodes {
    pub fn new(api: Arc<ApiServer>) -> Arc<Self> {
        Arc::new(Self {
            api,
            state: Mutex::new(BTreeMap::new()),
            confirm_deletions: AtomicBool::new(true),
            added: AtomicU32::new(0),
        })
    }

    /// Whether the kubelet of `node` is alive (exists and Ready).
    pub fn is_ready(&self, node: &str) -> bool {
        self.state.lock().get(node).is_some_and(|s| s.ready)
    }

    /// Whether the kubelet of `node` still runs: the node exists and its heartbeat was not
    /// stopped. A dead kubelet moves none of its pods on.
    pub fn kubelet_alive(&self, node: &str) -> bool {
        self.state.lock().get(node).is_some_and(|s| s.heartbeat)
    }

    fn heartbeating(&self) -> Vec<String> {
        self.state.lock().iter().filter(|(_, s)| s.heartbeat).map(|(n, _)| n.clone()).collect()
    }

    /// The kubelet of `node` dies: no more Lease renewals, no pod progress. The node lifecycle
    /// check marks it Unknown once its Lease is older than the grace period.
    pub fn stop_heartbeat(&self, node: &str) -> Result<(), ApiError> {
        let mut state = self.state.lock();
        let s = state
            .get_mut(node)
            .ok_or_else(|| ApiError::not_found(&self.api.builtin("", "v1", "nodes").rt, node))?;
        s.heartbeat = false;
        s.ready = false;
        Ok(())
    }

    /// The node lifecycle controller's health check: a node whose Lease was not renewed within
    /// `grace` becomes Ready=Unknown, as upstream's node-monitor-grace-period (40s); its taints
    /// follow from `cluster::node_lifecycle`.
    pub async fn lifecycle(self: Arc<Self>, every: Duration, grace: Duration) {
        let mut tick = tokio::time::interval(every);
        let leases = self.api.builtin("coordination.k8s.io", "v1", "leases");
        loop {
            tick.tick().await;
            let (all, _) = self.api.store().list(leases.rid, Some(NODE_LEASE_NAMESPACE));
            let now = jiff::Timestamp::now();
            for lease in all {
                let v = lease.value();
                let renewed = v.pointer("/spec/renewTime").and_then(Value::as_str).and_then(meta::parse_time);
                let stale = renewed.is_none_or(|t| now.duration_since(t).unsigned_abs() > grace);
                if stale
                    && let Err(e) = self.mark_unknown(&lease.name)
                    && e.code != 404
                {
                    tracing::warn!(node = %lease.name, error = %e, "marking the node Unknown failed");
                }
            }
        }
    }

    fn mark_unknown(&self, name: &str) -> Result<(), ApiError> {
        let nodes = self.api.builtin("", "v1", "nodes");
        let now = meta::now_seconds();
        self.api.update_with(&nodes, "", name, Subresource::Status, |node| {
            let Some(conditions) = node.pointer_mut("/status/conditions").and_then(Value::as_array_mut)
            else {
                return Ok(false);
            };
            let mut changed = false;
            for c in conditions.iter_mut() {
                if c.get("status").and_then(Value::as_str) == Some("Unknown") {
                    continue;
                }
                c["status"] = json!("Unknown");
                c["reason"] = json!("NodeStatusUnknown");
                c["message"] = json!("Kubelet stopped posting node status.");
                c["lastTransitionTime"] = json!(now);
                changed = true;
            }
            Ok(changed)
        })?;
        Ok(())
    }

    /// Renews every heartbeating node's Lease; run every 10s like the kubelet.
    pub async fn heartbeat(self: Arc<Self>, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            for name in self.heartbeating() {
                if let Err(e) = self.renew_lease(&name)
                    && e.code != 404
                {
                    tracing::warn!(node = name, error = %e, "lease renewal failed");
                }
            }
        }
    }

    fn renew_lease(&self, name: &str) -> Result<(), ApiError> {
        let leases = self.api.builtin("coordination.k8s.io", "v1", "leases");
        let now = meta::now_micros();
        self.api.update_with(&leases, NODE_LEASE_NAMESPACE, name, Subresource::Main, |lease| {
            lease["spec"]["renewTime"] = json!(now);
            Ok(true)
        })?;
        Ok(())
    }

    /// The node's InternalIP, as the kubelet reports it in its pods' `hostIP`.
    pub fn internal_ip(&self, name: &str) -> String {
        let nodes = self.api.builtin("", "v1", "nodes");
        self.api
            .store()
            .get(nodes.rid, "", name)
            .and_then(|n| {
                let v = n.value();
                v.pointer("/status/addresses")?
                    .as_array()?
                    .iter()
                    .find(|a| a.get("type").and_then(Value::as_str) == Some("InternalIP"))?
                    .get("address")?
                    .as_str()
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "10.0.0.1".to_string())
    }

    /// Distinct InternalIPs, `10.0.0.1` upwards, in the order nodes are added.
    fn next_internal_ip(&self) -> String {
        let n = self.added.fetch_add(1, Ordering::Relaxed) + 1;
        format!("10.0.{}.{}", n >> 8, n & 0xff)
    }

    fn node_object(name: &str, ip: &str) -> Value {
        let now = meta::now_seconds();
        let condition = |t: &str, status: &str, reason: &str, message: &str| {
            json!({"type": t, "status": status, "reason": reason, "message": message,
                   "lastHeartbeatTime": now, "lastTransitionTime": now})
        };
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "type": "sim"
            }},
            "spec": {},
            "status": {
                "capacity": {"cpu": "32", "memory": "128Gi", "pods": "1000"},
                "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "1000"},
                "conditions": [
                    condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                    condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
                ],
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "nodeInfo": {
                    "kubeletVersion": "v1.37.0", "kubeProxyVersion": "", "operatingSystem": "linux",
                    "architecture": "amd64", "containerRuntimeVersion": "sim://1.0", "osImage": "batchfleet sim",
                    "kernelVersion": "6.0.0", "machineID": "", "systemUUID": "", "bootID": ""
                }
            }
        })
    }

    fn set_ready_condition(&self, name: &str, ready: bool) -> Result<(), ApiError> {
        let nodes = self.api.builtin("", "v1", "nodes");
        let now = meta::now_seconds();
        self.api.update_with(&nodes, "", name, Subresource::Status, |node| {
            let Some(conditions) = node.pointer_mut("/status/conditions").and_then(Value::as_array_mut)
            else {
                return Ok(false);
            };
            for c in conditions.iter_mut().filter(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
            {
                let (status, reason, message) = if ready {
                    ("True", "KubeletReady", "kubelet is posting ready status")
                } else {
                    ("False", "KubeletNotReady", "container runtime is down")
                };
                if c.get("status").and_then(Value::as_str) != Some(status) {
                    c["lastTransitionTime"] = json!(now);
                }
                c["status"] = json!(status);
                c["reason"] = json!(reason);
                c["message"] = json!(message);
                c["lastHeartbeatTime"] = json!(now);
            }
            Ok(true)
        })?;
        Ok(())
    }
}

impl NodeAdmin for Nodes {
    fn add_node(&self, name: &str) -> Result<(), ApiError> {
        let nodes = self.api.builtin("", "v1", "nodes");
        match self.api.create(
            &nodes,
            "",
            Self::node_object(name, &self.next_internal_ip()),
            &WriteOptions::default(),
        ) {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
        let leases = self.api.builtin("coordination.k8s.io", "v1", "leases");
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": meta::now_micros()}
        });
        match self.api.create(&leases, NODE_LEASE_NAMESPACE, lease, &WriteOptions::default()) {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
        self.state.lock().insert(name.to_string(), NodeState { ready: true, heartbeat: true });
        Ok(())
    }

    fn set_ready(&self, name: &str, ready: bool) -> Result<(), ApiError> {
        if !self.state.lock().contains_key(name) {
            return Err(ApiError::not_found(&self.api.builtin("", "v1", "nodes").rt, name));
        }
        self.set_ready_condition(name, ready)?;
        self.state.lock().insert(name.to_string(), NodeState { ready, heartbeat: true });
        Ok(())
    }

    fn taint_out_of_service(&self, name: &str) -> Result<(), ApiError> {
        let nodes = self.api.builtin("", "v1", "nodes");
        self.api.update_with(&nodes, "", name, Subresource::Main, |node| {
            let mut taints = node["spec"].get("taints").and_then(Value::as_array).cloned().unwrap_or_default();
            if taints.iter().any(|t| t.get("key").and_then(Value::as_str) == Some(OUT_OF_SERVICE_TAINT)) {
                return Ok(false);
            }
            taints.push(json!({"key": OUT_OF_SERVICE_TAINT, "value": "nodeshutdown", "effect": "NoExecute", "timeAdded": meta::now_seconds()}));
            node["spec"]["taints"] = Value::Array(taints);
            Ok(true)
        })?;
        Ok(())
    }

    fn delete_node(&self, name: &str) -> Result<(), ApiError> {
        let nodes = self.api.builtin("", "v1", "nodes");
        self.api.delete(&nodes, "", name, &DeleteOptions::default())?;
        self.state.lock().remove(name);
        Ok(())
    }

    fn set_confirm_deletions(&self, on: bool) {
        self.confirm_deletions.store(on, Ordering::Relaxed);
    }

    fn stop_heartbeat(&self, name: &str) -> Result<(), ApiError> {
        Nodes::stop_heartbeat(self, name)
    }
}

impl Nodes {
    /// Forgets a node deleted through the API (`kubectl delete node`).
    pub fn forget(&self, name: &str) {
        self.state.lock().remove(name);
    }

    pub fn confirms_deletions(&self) -> bool {
        self.confirm_deletions.load(Ordering::Relaxed)
    }
}
