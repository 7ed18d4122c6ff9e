//! ResourceQuota as kube-apiserver enforces it for object counts: the quota admission plugin's
//! check of a pod or Job create against every quota of its namespace (403 with upstream's
//! "exceeded quota" message), and the quota controller's `status.hard`/`status.used`.
//!
//! Usage is computed from the store under one lock held across check and commit, so two
//! concurrent creates never both take the last slot. Upstream charges the quota's `status.used`
//! in the same step; the sim recomputes it synchronously after every write that changes it,
//! where upstream's quota controller releases usage (deleted or terminal pods) within seconds.

use std::collections::BTreeMap;
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

/// An integer count from a quantity such as `3`, `1k` or `2Ki`; `None` for fractions and text.
pub(super) fn count_of(quantity: &str) -> Option<i64> {
    let q = quantity.trim();
    let split = q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len());
    let (digits, suffix) = q.split_at(split);
    let n: i64 = digits.parse().ok()?;
    let scale: i64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
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

    /// What a create of `rid` charges, or `None` for kinds no supported quota resource counts.
    pub(super) fn quota_charge(&self, rid: ResourceId) -> Option<&'static [&'static str]> {
        if rid == self.quota_ids.pods {
            Some(&[PODS, COUNT_PODS])
        } else if rid == self.quota_ids.jobs {
            Some(&[COUNT_JOBS])
        } else {
            None
        }
    }

    /// Current usage of the counted resources in `namespace`.
    fn quota_usage(&self, namespace: &str) -> BTreeMap<&'static str, i64> {
        let (pods, _) = self.store.list(self.quota_ids.pods, Some(namespace));
        let charged = pods.iter().filter(|p| pod_is_charged(p)).count() as i64;
        let (jobs, _) = self.store.list(self.quota_ids.jobs, Some(namespace));
        BTreeMap::from([(PODS, charged), (COUNT_PODS, charged), (COUNT_JOBS, jobs.len() as i64)])
    }

    /// The quota admission check for creating `name` (the final name, as upstream checks after
    /// name generation). The caller holds `quota_lock` until the create is committed.
    pub(super) fn admit_quota(
        &self,
        target: &Target,
        namespace: &str,
        name: &str,
        charge: &[&'static str],
        quotas: &[Arc<StoredObject>],
    ) -> Result<(), ApiError> {
        let usage = self.quota_usage(namespace);
        for quota in quotas {
            let hard: BTreeMap<String, String> = hard_of(&quota.value()).into_iter().collect();
            let mut requested = BTreeMap::new();
            let mut used = BTreeMap::new();
            let mut limited = BTreeMap::new();
            for &resource in charge {
                let Some(limit) = hard.get(resource) else { continue };
                let in_use = usage.get(resource).copied().unwrap_or(0);
                let exceeded = count_of(limit).is_none_or(|h| in_use + 1 > h);
                if exceeded {
                    requested.insert(resource, "1".to_string());
                    used.insert(resource, in_use.to_string());
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
        let usage = self.quota_usage(namespace);
        let target = self.builtin("", "v1", "resourcequotas");
        for quota in self.quotas_in(namespace) {
            let mut value = quota.value();
            let hard = hard_of(&value);
            let mut status_hard = Map::new();
            let mut status_used = Map::new();
            for (resource, quantity) in &hard {
                status_hard.insert(resource.clone(), json!(crate::admission::quantity::canonical(quantity)));
                if let Some(n) = usage.get(resource.as_str()) {
                    status_used.insert(resource.clone(), json!(n.to_string()));
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
    fn counts_parse_with_suffixes_and_refuse_fractions() {
        assert_eq!(count_of("3"), Some(3));
        assert_eq!(count_of("1k"), Some(1000));
        assert_eq!(count_of("2Ki"), Some(2048));
        assert_eq!(count_of("500m"), None);
        assert_eq!(count_of("x"), None);
    }

    #[test]
    fn pretty_print_sorts_by_resource_name() {
        let items = BTreeMap::from([(PODS, "1".to_string()), (COUNT_JOBS, "2".to_string())]);
        assert_eq!(pretty(&items), "count/jobs.batch=2,pods=1");
    }
}
