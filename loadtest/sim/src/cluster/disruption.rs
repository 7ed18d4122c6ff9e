//! The disruption controller (kube-controller-manager `pkg/controller/disruption`): keeps each
//! PodDisruptionBudget's status — `currentHealthy`, `desiredHealthy`, `expectedPods`,
//! `disruptionsAllowed`, `disruptedPods`, `observedGeneration` and the `DisruptionAllowed`
//! condition — as its pods come, go and turn ready, which the Eviction subresource reads.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::apiserver::eviction::{label_selector_matches, pod_is_ready, set_disruption_allowed};
use crate::apiserver::meta;
use crate::apiserver::{ApiError, ApiServer, Subresource, Target};
use crate::store::{Interest, RecvError, StoredObject};

/// `DeletionTimeout`: how long an evicted pod may take to go before it counts again.
const DELETION_TIMEOUT: Duration = Duration::from_secs(120);
/// How often every budget is recomputed, for `disruptedPods` entries that time out.
const RESYNC: Duration = Duration::from_secs(5);
/// Changes are gathered this long, so a burst of pod writes costs one recomputation.
const BATCH: Duration = Duration::from_millis(50);

/// A budget's computed status, or why it could not be computed (`failSafe`).
#[derive(Debug, PartialEq)]
pub enum Computed {
    Status { expected: i64, desired: i64, healthy: i64, allowed: i64, disrupted: Map<String, Value> },
    Failed(String),
}

/// `intstr.GetScaledValueFromIntOrPercent(v, total, roundUp=true)`.
fn scaled(v: &Value, total: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            Some((pct * total + 99).div_euclid(100))
        }
        _ => None,
    }
}

/// The replicas of the controller owning `pod` (`getExpectedScale`'s finders): a ReplicaSet's
/// Deployment, a ReplicaSet, a StatefulSet or a ReplicationController. `Err` for an owner kind
/// without a scale.
fn controller_scale(api: &ApiServer, pod: &Value) -> Result<Option<(String, i64)>, String> {
    let name = meta::name(pod).to_string();
    let namespace = meta::str_field(pod, "namespace").unwrap_or("");
    let Some(owner) = meta::owner_references(pod)
        .into_iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
    else {
        return Ok(None);
    };
    let kind = owner.get("kind").and_then(Value::as_str).unwrap_or("");
    let owner_name = owner.get("name").and_then(Value::as_str).unwrap_or("");
    let lookup = |group: &str, plural: &str, n: &str| {
        let t = api.resolve(group, "v1", plural)?;
        api.store().get(t.rid, namespace, n).map(|o| o.value())
    };
    let replicas = |o: &Value| o.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
    let uid = |o: &Value| meta::str_field(o, "uid").unwrap_or("").to_string();
    let found = match kind {
        "ReplicaSet" => lookup("apps", "replicasets", owner_name).map(|rs| {
            let deployment = meta::owner_references(&rs)
                .into_iter()
                .find(|o| o.get("kind").and_then(Value::as_str) == Some("Deployment"))
                .and_then(|d| {
                    lookup("apps", "deployments", d.get("name").and_then(Value::as_str).unwrap_or(""))
                });
            match deployment {
                Some(d) => (uid(&d), replicas(&d)),
                None => (uid(&rs), replicas(&rs)),
            }
        }),
        "StatefulSet" => lookup("apps", "statefulsets", owner_name).map(|s| (uid(&s), replicas(&s))),
        "ReplicationController" => {
            lookup("", "replicationcontrollers", owner_name).map(|r| (uid(&r), replicas(&r)))
        }
        _ => None,
    };
    found.map(Some).ok_or_else(|| format!("found no controllers for pod {name:?}"))
}

/// `trySync`'s arithmetic over the budget and the pods its selector matches.
pub fn compute(api: &ApiServer, pdb: &Value, pods: &[Value], now: jiff::Timestamp) -> Computed {
    let spec = pdb.get("spec").cloned().unwrap_or(Value::Null);
    let expected_scale = || -> Result<i64, String> {
        let mut scales: BTreeMap<String, i64> = BTreeMap::new();
        for pod in pods {
            if let Some((uid, n)) = controller_scale(api, pod)? {
                scales.insert(uid, n);
            }
        }
        Ok(scales.values().sum())
    };
    let (expected, desired) = if let Some(max) = spec.get("maxUnavailable").filter(|v| !v.is_null()) {
        let expected = match expected_scale() {
            Ok(n) => n,
            Err(e) => return Computed::Failed(e),
        };
        let Some(max) = scaled(max, expected) else {
            return Computed::Failed(format!("invalid maxUnavailable {max}"));
        };
        (expected, (expected - max).max(0))
    } else if let Some(min) = spec.get("minAvailable").filter(|v| !v.is_null()) {
        match min {
            Value::Number(n) => (pods.len() as i64, n.as_i64().unwrap_or(0)),
            _ => {
                let expected = match expected_scale() {
                    Ok(n) => n,
                    Err(e) => return Computed::Failed(e),
                };
                let Some(min) = scaled(min, expected) else {
                    return Computed::Failed(format!("invalid minAvailable {min}"));
                };
                (expected, min)
            }
        }
    } else {
        (0, 0)
    };
    let recorded =
        pdb.pointer("/status/disruptedPods").and_then(Value::as_object).cloned().unwrap_or_default();
    let still_expected = |t: &Value| {
        t.as_str()
            .and_then(meta::parse_time)
            .is_some_and(|t| now.duration_since(t).unsigned_abs() < DELETION_TIMEOUT || t > now)
    };
    let mut disrupted = Map::new();
    let mut healthy = 0;
    for pod in pods {
        if meta::is_deleting(pod) {
            continue;
        }
        let name = meta::name(pod);
        if let Some(t) = recorded.get(name).filter(|t| still_expected(t)) {
            disrupted.insert(name.to_string(), t.clone());
            continue;
        }
        if pod_is_ready(pod) {
            healthy += 1;
        }
    }
    let allowed = if expected <= 0 { 0 } else { (healthy - desired).max(0) };
    Computed::Status { expected, desired, healthy, allowed, disrupted }
}

/// Writes `computed` into the budget; says whether anything changed.
pub fn apply(pdb: &mut Value, computed: &Computed, now: &str) -> bool {
    let before = pdb.get("status").cloned();
    if !pdb.get("status").is_some_and(Value::is_object) {
        pdb["status"] = json!({});
    }
    match computed {
        Computed::Failed(message) => {
            pdb["status"]["disruptionsAllowed"] = json!(0);
            let observed = pdb.pointer("/status/observedGeneration").and_then(Value::as_i64).unwrap_or(0);
            if !pdb["status"]["conditions"].is_array() {
                pdb["status"]["conditions"] = json!([]);
            }
            let condition = json!({"type": "DisruptionAllowed", "status": "False", "reason": "SyncFailed",
                                   "message": message, "observedGeneration": observed, "lastTransitionTime": now});
            if let Some(list) = pdb["status"]["conditions"].as_array_mut() {
                match list
                    .iter_mut()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionAllowed"))
                {
                    Some(c) => {
                        let mut next = condition;
                        if c.get("status").and_then(Value::as_str) == Some("False") {
                            next["lastTransitionTime"] =
                                c.get("lastTransitionTime").cloned().unwrap_or(json!(now));
                        }
                        *c = next;
                    }
                    None => list.push(condition),
                }
            }
        }
        Computed::Status { expected, desired, healthy, allowed, disrupted } => {
            let generation =
                meta::meta(pdb).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0);
            let status = &mut pdb["status"];
            status["currentHealthy"] = json!(healthy);
            status["desiredHealthy"] = json!(desired);
            status["expectedPods"] = json!(expected);
            status["disruptionsAllowed"] = json!(allowed);
            status["observedGeneration"] = json!(generation);
            if disrupted.is_empty() {
                status.as_object_mut().map(|s| s.remove("disruptedPods"));
            } else {
                status["disruptedPods"] = Value::Object(disrupted.clone());
            }
            set_disruption_allowed(pdb, *allowed > 0, now);
        }
    }
    pdb.get("status").cloned() != before
}

pub struct Disruption {
    api: Arc<ApiServer>,
    pdbs: Target,
    pods: Target,
}

impl Disruption {
    pub fn new(api: Arc<ApiServer>) -> Self {
        let pdbs = api.builtin("policy", "v1", "poddisruptionbudgets");
        let pods = api.builtin("", "v1", "pods");
        Self { api, pdbs, pods }
    }

    pub async fn run(self) {
        let (_, _, mut rx) = self.api.store().snapshot_and_watch(
            self.pdbs.rid,
            None,
            Interest::resources(&[self.pdbs.rid, self.pods.rid]),
        );
        self.sync_all();
        let mut resync = tokio::time::interval(RESYNC);
        let mut batch = tokio::time::interval(BATCH);
        // Namespaces whose pods or budgets changed since the last batch.
        let mut dirty: HashSet<Box<str>> = HashSet::new();
        loop {
            tokio::select! {
                received = rx.recv() => match received {
                    Ok(change) => {
                        let o = &change.object;
                        if o.resource == self.pdbs.rid || o.resource == self.pods.rid {
                            dirty.insert(o.namespace.clone());
                        }
                    }
                    Err(RecvError::Lagged) => self.sync_all(),
                    Err(RecvError::Closed) => return,
                },
                _ = batch.tick(), if !dirty.is_empty() => {
                    for ns in std::mem::take(&mut dirty) {
                        self.sync_namespace(&ns);
                    }
                }
                _ = resync.tick() => self.sync_all(),
            }
        }
    }

    fn sync_all(&self) {
        let (pdbs, _) = self.api.store().list(self.pdbs.rid, None);
        let namespaces: HashSet<Box<str>> = pdbs.iter().map(|p| p.namespace.clone()).collect();
        for ns in namespaces {
            self.sync_namespace(&ns);
        }
    }

    /// Recomputes the budgets of `namespace`.
    fn sync_namespace(&self, namespace: &str) {
        let (pdbs, _) = self.api.store().list(self.pdbs.rid, Some(namespace));
        if pdbs.is_empty() {
            return;
        }
        let (pods, _) = self.api.store().list(self.pods.rid, Some(namespace));
        let pods: Vec<Value> = pods.iter().map(|p| p.value()).collect();
        for pdb in &pdbs {
            if let Err(e) = self.sync(pdb, &pods)
                && e.code != 404
            {
                tracing::warn!(pdb = %pdb.name, namespace, error = %e, "PodDisruptionBudget status update failed");
            }
        }
    }

    fn sync(&self, pdb: &StoredObject, pods: &[Value]) -> Result<(), ApiError> {
        let value = pdb.value();
        let selector = value.pointer("/spec/selector");
        let matching: Vec<Value> = pods
            .iter()
            .filter(|p| {
                label_selector_matches(selector, p.pointer("/metadata/labels").and_then(Value::as_object))
            })
            .cloned()
            .collect();
        let now = meta::now_seconds();
        let mut probe = value.clone();
        if !apply(&mut probe, &compute(&self.api, &value, &matching, jiff::Timestamp::now()), &now) {
            return Ok(());
        }
        self.api.update_with(&self.pdbs, &pdb.namespace, &pdb.name, Subresource::Status, |p| {
            let computed = compute(&self.api, p, &matching, jiff::Timestamp::now());
            Ok(apply(p, &computed, &now))
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> Arc<ApiServer> {
        ApiServer::new(Arc::new(crate::store::Store::new(Default::default()))).0
    }

    fn pod(name: &str, ready: bool, deleting: bool) -> Value {
        let mut p = json!({"metadata": {"name": name, "namespace": "ns"},
                           "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}});
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        p
    }

    /// `TestBasicFinderFunctions`/`TestNakedPod`/`TestUnavailable` shapes (disruption_test.go):
    /// an integer minAvailable counts the matching pods; deleting and unready pods are not
    /// healthy; disruptedPods entries are not healthy until they time out.
    #[test]
    fn integer_min_available() {
        let api = api();
        let now = jiff::Timestamp::now();
        let pdb = json!({"metadata": {"generation": 2}, "spec": {"minAvailable": 2}});
        let pods = [
            pod("a", true, false),
            pod("b", true, false),
            pod("c", true, false),
            pod("d", false, false),
            pod("e", true, true),
        ];
        assert_eq!(
            compute(&api, &pdb, &pods, now),
            Computed::Status { expected: 5, desired: 2, healthy: 3, allowed: 1, disrupted: Map::new() }
        );
        let recent = meta::timestamp_seconds(now - jiff::SignedDuration::from_secs(10));
        let old = meta::timestamp_seconds(now - jiff::SignedDuration::from_secs(300));
        let with_disrupted = json!({"metadata": {"generation": 2}, "spec": {"minAvailable": 2},
                                    "status": {"disruptedPods": {"a": recent, "b": old}}});
        let Computed::Status { healthy, allowed, disrupted, .. } = compute(&api, &with_disrupted, &pods, now)
        else {
            panic!("computed");
        };
        assert_eq!(
            (healthy, allowed, disrupted.keys().cloned().collect::<Vec<_>>()),
            (2, 0, vec!["a".to_string()])
        );
        let mut written = with_disrupted.clone();
        assert!(apply(&mut written, &compute(&api, &with_disrupted, &pods, now), "t"));
        let s = &written["status"];
        assert_eq!(
            (
                s["observedGeneration"].as_i64(),
                s["expectedPods"].as_i64(),
                s["conditions"][0]["reason"].as_str()
            ),
            (Some(2), Some(5), Some("InsufficientPods"))
        );
    }

    #[test]
    fn no_matching_pods_allow_nothing_and_naked_pods_fail_a_percentage() {
        let api = api();
        let now = jiff::Timestamp::now();
        let pdb = json!({"spec": {"minAvailable": 0}});
        assert_eq!(
            compute(&api, &pdb, &[], now),
            Computed::Status { expected: 0, desired: 0, healthy: 0, allowed: 0, disrupted: Map::new() }
        );
        let mut owned = pod("a", true, false);
        owned["metadata"]["ownerReferences"] =
            json!([{"kind": "Job", "name": "j", "controller": true, "uid": "u"}]);
        let pct = json!({"spec": {"maxUnavailable": "50%"}});
        assert_eq!(
            compute(&api, &pct, &[owned], now),
            Computed::Failed("found no controllers for pod \"a\"".into())
        );
        assert_eq!(scaled(&json!("50%"), 3), Some(2));
        assert_eq!(scaled(&json!(1), 3), Some(1));
    }
}
