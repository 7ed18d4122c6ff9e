//! The sim's admin endpoint under `/_sim/`: fault injection, history compaction, node faults and
//! counters. Not part of the Kubernetes API.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::query::Query;
use super::{Reply, Shared};
use crate::apiserver::ApiError;
use crate::faults::FaultConfig;
use crate::store::HistoryConfig;

/// Node operations the simulated cluster offers the admin endpoint.
pub trait NodeAdmin: Send + Sync {
    fn add_node(&self, name: &str) -> Result<(), ApiError>;
    /// Ready=True, or the kubelet stops heartbeating and reports NotReady.
    fn set_ready(&self, name: &str, ready: bool) -> Result<(), ApiError>;
    /// Adds the `node.kubernetes.io/out-of-service` NoExecute taint.
    fn taint_out_of_service(&self, name: &str) -> Result<(), ApiError>;
    fn delete_node(&self, name: &str) -> Result<(), ApiError>;
    /// The kubelet dies: its Lease goes stale and the node becomes Unknown after the grace period.
    fn stop_heartbeat(&self, name: &str) -> Result<(), ApiError>;
    /// Whether the kubelet confirms graceful pod deletions (off: pods stay Terminating).
    fn set_confirm_deletions(&self, on: bool);
}

fn body_json(body: &Bytes) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

fn nodes(shared: &Shared) -> Result<&Arc<dyn NodeAdmin>, ApiError> {
    shared.nodes.as_ref().ok_or_else(|| ApiError::service_unavailable("the simulated kubelet is not running"))
}

pub async fn handle(
    shared: &Arc<Shared>,
    method: &Method,
    rest: &[String],
    _q: &Query,
    body: Bytes,
) -> Result<Reply, ApiError> {
    let path: Vec<&str> = rest.iter().map(String::as_str).collect();
    let ok = || Ok(Reply::json(StatusCode::OK, &json!({ "ok": true })));
    match (method.as_str(), path.as_slice()) {
        ("GET", ["counters"]) => {
            let mut v = shared.counters.snapshot();
            v["objects"] = json!(shared.api.store().object_count());
            v["resourceVersion"] = json!(shared.api.store().current_rv().to_string());
            Ok(Reply::json(StatusCode::OK, &v))
        }
        ("GET", ["faults"]) => Ok(Reply::json(StatusCode::OK, &json!(shared.faults.config()))),
        ("PUT" | "POST", ["faults"]) => {
            let config: FaultConfig = serde_json::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("invalid fault configuration: {e}")))?;
            shared.faults.configure(config);
            ok()
        }
        ("DELETE", ["faults"]) => {
            shared.faults.configure(FaultConfig::default());
            ok()
        }
        ("POST", ["compact"]) => {
            let rv = shared.api.store().compact();
            Ok(Reply::json(StatusCode::OK, &json!({ "compactedTo": rv.to_string() })))
        }
        ("PUT" | "POST", ["history"]) => {
            let v = body_json(&body)?;
            let window = v.get("windowSeconds").and_then(Value::as_f64).unwrap_or(75.0).max(0.0);
            let max_events = v.get("maxEvents").and_then(Value::as_u64).unwrap_or(200_000) as usize;
            shared.api.store().set_history_config(HistoryConfig {
                window: Duration::from_secs_f64(window),
                max_events,
                ..HistoryConfig::default()
            });
            ok()
        }
        ("PUT" | "POST", ["continue-ttl"]) => {
            let v = body_json(&body)?;
            let seconds = v.get("seconds").and_then(Value::as_f64).unwrap_or(300.0).max(0.0);
            shared.snapshots.set_ttl(Duration::from_secs_f64(seconds));
            ok()
        }
        ("POST", ["nodes"]) => {
            let v = body_json(&body)?;
            let name = v
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::bad_request("name is required"))?;
            nodes(shared)?.add_node(name)?;
            ok()
        }
        ("POST", ["nodes", name, "not-ready"]) => {
            nodes(shared)?.set_ready(name, false)?;
            ok()
        }
        ("POST", ["nodes", name, "ready"]) => {
            nodes(shared)?.set_ready(name, true)?;
            ok()
        }
        ("POST", ["nodes", name, "out-of-service"]) => {
            nodes(shared)?.taint_out_of_service(name)?;
            ok()
        }
        ("POST", ["nodes", name, "stop-heartbeat"]) => {
            nodes(shared)?.stop_heartbeat(name)?;
            ok()
        }
        ("DELETE", ["nodes", name]) => {
            nodes(shared)?.delete_node(name)?;
            ok()
        }
        ("GET", ["features"]) => Ok(Reply::json(
            StatusCode::OK,
            &json!({ "shardSelector": shared.shard_selector.load(std::sync::atomic::Ordering::Relaxed) }),
        )),
        ("PUT" | "POST", ["features"]) => {
            let v = body_json(&body)?;
            if let Some(on) = v.get("shardSelector").and_then(Value::as_bool) {
                shared.shard_selector.store(on, std::sync::atomic::Ordering::Relaxed);
            }
            ok()
        }
        ("POST" | "PUT", ["kubelet", "confirm-deletions"]) => {
            let v = body_json(&body)?;
            nodes(shared)?.set_confirm_deletions(v.get("enabled").and_then(Value::as_bool).unwrap_or(true));
            ok()
        }
        _ => Err(ApiError::page_not_found()),
    }
}
