//! ResourceQuota as kube-apiserver enforces it for pods (`pods`, `count/pods`, `requests.*`,
//! `limits.*`, `cpu`, `memory`) and Jobs (`count/jobs.batch`): the quota admission plugin's check
//! of a create against every quota of its namespace (403 with upstream's "exceeded quota" and
//! "must specify" messages), and the quota controller's `status.hard`/`status.used`.
//!
//! Usage is computed from the store under one lock held across check and commit, so two
//! concurrent creates never both take the last slot. Upstream charges the quota's `status.used`
//! in the same step; the sim recomputes it synchronously after every write that changes it,
//! where upstream's quota controller releases usage (deleted or terminal pods) within seconds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{ApiError, ApiServer, Target};
use crate::store::{Expect, ResourceId, StoredObject};

pub(super) const PODS: &str = "pods";
pub(super) const COUNT_PODS: &str = "count/pods";
pub(super) const COUNT_JOBS: &str = "count/jobs.batch";

/// The store ids of the kinds quota admission looks at.
#[derive(Debug, Clone, Copy)]
pub(super) struct QuotaIds {
    pub quotas: ResourceId,
    pub pods: ResourceId,
    pub jobs: ResourceId,
}

impl QuotaIds {
    /// Whether writes of `rid` change what a quota counts (or are quotas themselves).
    pub(super) fn concerns(&self, rid: ResourceId) -> bool {
        rid == self.quotas || rid == self.pods || rid == self.jobs
    }
}

/// Upstream's `QuotaV1Pod`: terminal pods (Succeeded, Failed) are not charged.
fn pod_is_charged(pod: &StoredObject) -> bool {
    !matches!(pod.field("status.phase"), Some("Succeeded" | "Failed"))
}

/// Compute resources a pod is charged; `cpu`/`memory` are the old names of the requests.
const COMPUTE: &[&str] = &["cpu", "limits.cpu", "limits.memory", "memory", "requests.cpu", "requests.memory"];

/// A quantity as nano-units, remembering whether it was written in binary SI (as a sum keeps
/// the format of its first term, as `resource.Quantity.Add` does).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Amount {
    nanos: i128,
    binary: bool,
}

impl Amount {
    fn count(n: i64) -> Self {
        Amount { nanos: i128::from(n) * 1_000_000_000, binary: false }
    }

    pub(super) fn parse(text: &str) -> Option<Self> {
        let s = text.trim();
        let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let (number, suffix) = s.split_at(split);
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        let mantissa: i128 = format!("{int_part}{frac_part}").parse().ok()?;
        let (binary, power_1024, exp10): (bool, u32, i32) = match suffix {
            "" => (false, 0, 0),
            "n" => (false, 0, -9),
            "u" => (false, 0, -6),
            "m" => (false, 0, -3),
            "k" => (false, 0, 3),
            "M" => (false, 0, 6),
            "G" => (false, 0, 9),
            "T" => (false, 0, 12),
            "P" => (false, 0, 15),
            "Ki" => (true, 1, 0),
            "Mi" => (true, 2, 0),
            "Gi" => (true, 3, 0),
            "Ti" => (true, 4, 0),
            "Pi" => (true, 5, 0),
            _ => return None,
        };
        let mut nanos = mantissa.checked_mul(1024i128.checked_pow(power_1024)?)?;
        let exp = exp10 + 9 - i32::try_from(frac_part.len()).ok()?;
        if exp >= 0 {
            nanos = nanos.checked_mul(10i128.checked_pow(exp.unsigned_abs())?)?;
        } else {
            // Parsing rounds anything finer than nano up.
            let div = 10i128.checked_pow(exp.unsigned_abs())?;
            nanos = nanos / div + i128::from(nanos % div != 0);
        }
        Some(Amount { nanos, binary })
    }

    fn add(self, other: Amount) -> Amount {
        let binary = if self.nanos == 0 { other.binary } else { self.binary };
        Amount { nanos: self.nanos + other.nanos, binary }
    }

    /// `resource.Quantity.String()`.
    fn text(self) -> String {
        const NANO: i128 = 1_000_000_000;
        if self.binary && self.nanos % NANO == 0 && self.nanos != 0 && (self.nanos / NANO) % 1024 == 0 {
            return crate::admission::quantity::canonical(&format!("{}Ki", self.nanos / NANO / 1024));
        }
        crate::admission::quantity::canonical(&format!("{}n", self.nanos))
    }
}

/// The named quantities of `resources.requests` or `.limits` of a container (or `spec.overhead`).
fn quantities(list: Option<&Value>) -> BTreeMap<&'static str, Amount> {
    let mut out = BTreeMap::new();
    for name in ["cpu", "memory"] {
        if let Some(a) = list.and_then(|l| l.get(name)).and_then(Value::as_str).and_then(Amount::parse) {
            out.insert(name, a);
        }
    }
    out
}

/// What a container charges: `requests.*`, `limits.*` and the old `cpu`/`memory` (= requests).
fn container_usage(container: &Value) -> BTreeMap<&'static str, Amount> {
    let mut out = BTreeMap::new();
    for (name, a) in quantities(container.pointer("/resources/requests")) {
        out.insert(if name == "cpu" { "requests.cpu" } else { "requests.memory" }, a);
        out.insert(name, a);
    }
    for (name, a) in quantities(container.pointer("/resources/limits")) {
        out.insert(if name == "cpu" { "limits.cpu" } else { "limits.memory" }, a);
    }
    out
}

/// `podComputeUsageHelper` over the pod: containers summed, each init container a floor, the
/// pod overhead added.
fn pod_compute_usage(pod: &Value) -> BTreeMap<&'static str, Amount> {
    let containers = |key: &str| pod.pointer(&format!("/spec/{key}")).and_then(Value::as_array).cloned();
    let mut sum: BTreeMap<&'static str, Amount> = BTreeMap::new();
    for c in containers("containers").unwrap_or_default() {
        for (k, a) in container_usage(&c) {
            let total = sum.get(k).copied().unwrap_or_default().add(a);
            sum.insert(k, total);
        }
    }
    for c in containers("initContainers").unwrap_or_default() {
        for (k, a) in container_usage(&c) {
            if sum.get(k).is_none_or(|s| s.nanos < a.nanos) {
                sum.insert(k, a);
            }
        }
    }
    let overhead = quantities(pod.pointer("/spec/overhead"));
    for (name, a) in overhead {
        let keys: &[&'static str] = if name == "cpu" {
            &["cpu", "requests.cpu", "limits.cpu"]
        } else {
            &["memory", "requests.memory", "limits.memory"]
        };
        for &k in keys {
            if let Some(s) = sum.get(k).copied() {
                sum.insert(k, s.add(a));
            }
        }
    }
    sum
}

/// The pod evaluator's `Constraints`: with a compute resource quota'd, every container must name
/// it. `Some("must specify requests.cpu for: main")` when one does not.
fn missing_compute(pod: &Value, hard: &BTreeMap<String, String>) -> Option<String> {
    let required: Vec<&str> = COMPUTE.iter().copied().filter(|r| hard.contains_key(*r)).collect();
    if required.is_empty() {
        return None;
    }
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for key in ["containers", "initContainers"] {
        for c in pod.pointer(&format!("/spec/{key}")).and_then(Value::as_array).into_iter().flatten() {
            let usage = container_usage(c);
            for &r in &required {
                if !usage.contains_key(r) {
                    let name = c.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                    missing.entry(r).or_default().insert(name);
                }
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| format!("{r} for: {}", names.iter().cloned().collect::<Vec<_>>().join(",")))
        .collect();
    Some(format!("must specify {}", parts.join("; ")))
}

/// `prettyPrint` of upstream's admission: `name=value` sorted by name, joined by ",".
fn pretty(items: &BTreeMap<&str, String>) -> String {
    items.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// `spec.hard` of a quota as (resource, quantity text).
fn hard_of(quota: &Value) -> Vec<(String, String)> {
    quota
        .pointer("/spec/hard")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default()
}

impl ApiServer {
    /// The quotas of `namespace`: one range lookup, empty for a namespace without quotas.
    pub(super) fn quotas_in(&self, namespace: &str) -> Vec<Arc<StoredObject>> {
        self.store.list(self.quota_ids.quotas, Some(namespace)).0
    }

    /// Whether creates of `rid` are charged to quotas.
    pub(super) fn quota_charged(&self, rid: ResourceId) -> bool {
        rid == self.quota_ids.pods || rid == self.quota_ids.jobs
    }

    /// What creating `obj` of `rid` charges.
    fn charge_of(&self, rid: ResourceId, obj: &Value) -> BTreeMap<&'static str, Amount> {
        if rid == self.quota_ids.jobs {
            return BTreeMap::from([(COUNT_JOBS, Amount::count(1))]);
        }
        let mut charge = pod_compute_usage(obj);
        charge.insert(PODS, Amount::count(1));
        charge.insert(COUNT_PODS, Amount::count(1));
        charge
    }

    /// Current usage in `namespace`; compute resources only when `with_compute` (they parse
    /// every charged pod).
    fn quota_usage(&self, namespace: &str, with_compute: bool) -> BTreeMap<&'static str, Amount> {
        let (pods, _) = self.store.list(self.quota_ids.pods, Some(namespace));
        let charged: Vec<_> = pods.iter().filter(|p| pod_is_charged(p)).collect();
        let (jobs, _) = self.store.list(self.quota_ids.jobs, Some(namespace));
        let n = charged.len() as i64;
        let mut usage = BTreeMap::from([
            (PODS, Amount::count(n)),
            (COUNT_PODS, Amount::count(n)),
            (COUNT_JOBS, Amount::count(jobs.len() as i64)),
        ]);
        if with_compute {
            for &r in COMPUTE {
                usage.insert(r, Amount::default());
            }
            for pod in charged {
                for (k, a) in pod_compute_usage(&pod.value()) {
                    let total = usage.get(k).copied().unwrap_or_default().add(a);
                    usage.insert(k, total);
                }
            }
        }
        usage
    }

    /// The quota admission check for creating `obj` as `name` (the final name, as upstream
    /// checks after name generation). The caller holds `quota_lock` until the create is
    /// committed.
    pub(super) fn admit_quota(
        &self,
        target: &Target,
        namespace: &str,
        name: &str,
        obj: &Value,
        quotas: &[Arc<StoredObject>],
    ) -> Result<(), ApiError> {
        let hards: Vec<(&StoredObject, BTreeMap<String, String>)> =
            quotas.iter().map(|q| (&**q, hard_of(&q.value()).into_iter().collect())).collect();
        let is_pod = target.rid == self.quota_ids.pods;
        let with_compute = is_pod && hards.iter().any(|(_, h)| COMPUTE.iter().any(|r| h.contains_key(*r)));
        let charge = self.charge_of(target.rid, obj);
        let usage = self.quota_usage(namespace, with_compute);
        // Upstream checks every quota's constraints before any quota's limits.
        for (quota, hard) in &hards {
            if is_pod && let Some(why) = missing_compute(obj, hard) {
                return Err(ApiError::forbidden(
                    &target.rt,
                    name,
                    &format!("failed quota: {}: {why}", quota.name),
                ));
            }
        }
        for (quota, hard) in &hards {
            let mut requested = BTreeMap::new();
            let mut used = BTreeMap::new();
            let mut limited = BTreeMap::new();
            for (&resource, &amount) in &charge {
                let Some(limit) = hard.get(resource) else { continue };
                let in_use = usage.get(resource).copied().unwrap_or_default();
                let exceeded = Amount::parse(limit).is_none_or(|h| in_use.add(amount).nanos > h.nanos);
                if exceeded {
                    requested.insert(resource, amount.text());
                    used.insert(resource, in_use.text());
                    limited.insert(resource, crate::admission::quantity::canonical(limit));
                }
            }
            if !requested.is_empty() {
                let why = format!(
                    "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                    quota.name,
                    pretty(&requested),
                    pretty(&used),
                    pretty(&limited)
                );
                return Err(ApiError::forbidden(&target.rt, name, &why));
            }
        }
        Ok(())
    }

    /// The quota controller's recalculation: writes `status.hard` (= `spec.hard`) and
    /// `status.used` of every quota in `namespace` whose status differs.
    pub(super) fn sync_quota_status(&self, namespace: &str) {
        let quotas = self.quotas_in(namespace);
        if quotas.is_empty() {
            return;
        }
        let _guard = self.quota_lock.lock();
        let with_compute =
            quotas.iter().any(|q| hard_of(&q.value()).iter().any(|(r, _)| COMPUTE.contains(&r.as_str())));
        let usage = self.quota_usage(namespace, with_compute);
        let target = self.builtin("", "v1", "resourcequotas");
        for quota in self.quotas_in(namespace) {
            let mut value = quota.value();
            let hard = hard_of(&value);
            let mut status_hard = Map::new();
            let mut status_used = Map::new();
            for (resource, quantity) in &hard {
                status_hard.insert(resource.clone(), json!(crate::admission::quantity::canonical(quantity)));
                if let Some(amount) = usage.get(resource.as_str()) {
                    status_used.insert(resource.clone(), json!(amount.text()));
                }
            }
            let status = json!({"hard": status_hard, "used": status_used});
            if value.get("status") == Some(&status) {
                continue;
            }
            value["status"] = status;
            let Ok(prepared) = self.prepare(&target, value) else { continue };
            // A concurrent write wins; the write after it recalculates again.
            if let Ok(stored) = self.store.update(target.rid, prepared, Expect::Version(quota.rv)) {
                tracing::trace!(namespace, quota = %stored.name, "quota status recalculated");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_add_and_print_as_quantities_do() {
        let a = |t: &str| Amount::parse(t).expect(t);
        assert_eq!(a("3").text(), "3");
        assert_eq!(a("500m").add(a("500m")).text(), "1");
        assert_eq!(a("250m").add(a("1")).text(), "1250m");
        assert_eq!(a("1Gi").add(a("512Mi")).text(), "1536Mi");
        assert_eq!(a("1G").add(a("1Gi")).text(), "2073741824");
        assert_eq!(Amount::default().add(a("64Mi")).text(), "64Mi");
        assert_eq!(Amount::parse("x"), None);
        assert!(a("1k").nanos > a("999").nanos);
    }

    #[test]
    fn pod_usage_sums_containers_and_floors_by_init_containers() {
        let pod = json!({"spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1"}}},
                {"name": "b", "resources": {"requests": {"cpu": "200m"}}}
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "500m"}}}]
        }});
        let usage = pod_compute_usage(&pod);
        let text = |k: &str| usage.get(k).map(|a| a.text());
        assert_eq!(text("requests.cpu").as_deref(), Some("500m"));
        assert_eq!(text("cpu").as_deref(), Some("500m"));
        assert_eq!(text("requests.memory").as_deref(), Some("64Mi"));
        assert_eq!(text("limits.cpu").as_deref(), Some("1"));
        assert_eq!(text("limits.memory"), None);
        let hard = BTreeMap::from([("requests.memory".to_string(), "1Gi".to_string())]);
        assert_eq!(missing_compute(&pod, &hard).as_deref(), Some("must specify requests.memory for: b,i"));
    }

    #[test]
    fn pretty_print_sorts_by_resource_name() {
        let items = BTreeMap::from([(PODS, "1".to_string()), (COUNT_JOBS, "2".to_string())]);
        assert_eq!(pretty(&items), "count/jobs.batch=2,pods=1");
    }

    /// Threads creating pods at once against the last slots: exactly `hard` are admitted
    /// (without the quota lock, most runs admit more).
    #[test]
    fn parallel_creates_never_exceed_the_quota() {
        use crate::apiserver::WriteOptions;
        use crate::store::{HistoryConfig, Store};
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let api = {
            let _entered = runtime.enter();
            ApiServer::new(Arc::new(Store::new(HistoryConfig::default()))).0
        };
        let opts = WriteOptions::default();
        let namespaces = api.builtin("", "v1", "namespaces");
        api.create(&namespaces, "", json!({"metadata": {"name": "t"}}), &opts).expect("namespace");
        let quotas = api.builtin("", "v1", "resourcequotas");
        let quota = json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "40"}}});
        api.create(&quotas, "t", quota, &opts).expect("quota");
        let pods = api.builtin("", "v1", "pods");
        let threads = 8;
        let barrier = std::sync::Barrier::new(threads);
        let admitted: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (api, pods, barrier) = (&api, &pods, &barrier);
                    scope.spawn(move || {
                        barrier.wait();
                        (0..25)
                            .filter(|i| {
                                let pod = json!({"metadata": {"name": format!("p-{t}-{i}")},
                                    "spec": {"containers": [{"name": "main", "image": "busybox"}]}});
                                api.create(pods, "t", pod, &WriteOptions::default()).is_ok()
                            })
                            .count()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("thread")).sum()
        });
        assert_eq!(admitted, 40);
        let stored = api.store.list(pods.rid, Some("t")).0.len();
        assert_eq!(stored, 40);
    }
}
