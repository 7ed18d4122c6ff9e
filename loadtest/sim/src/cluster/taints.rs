//! Taints and tolerations as upstream matches them (`k8s.io/component-helpers/scheduling/corev1`
//! and `pkg/apis/core/v1/helper`): shared by the scheduler, the taint-eviction controller and the
//! node lifecycle controller.

use serde_json::Value;

pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// A pod toleration; an empty operator means `Equal`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Toleration {
    pub key: String,
    pub operator: String,
    pub value: String,
    pub effect: String,
    pub seconds: Option<i64>,
}

fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

impl Taint {
    pub fn new(key: &str, value: &str, effect: &str) -> Self {
        Self { key: key.into(), value: value.into(), effect: effect.into() }
    }

    fn from_json(v: &Value) -> Self {
        Self { key: text(v, "key"), value: text(v, "value"), effect: text(v, "effect") }
    }
}

impl Toleration {
    fn from_json(v: &Value) -> Self {
        Self {
            key: text(v, "key"),
            operator: text(v, "operator"),
            value: text(v, "value"),
            effect: text(v, "effect"),
            seconds: v.get("tolerationSeconds").and_then(Value::as_i64),
        }
    }

    /// `Toleration.ToleratesTaint`: an empty effect matches every effect, an empty key with
    /// `Exists` matches every key.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if !self.effect.is_empty() && self.effect != taint.effect {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator.as_str() {
            "" | "Equal" => self.value == taint.value,
            "Exists" => true,
            _ => false,
        }
    }
}

/// `node.spec.taints`.
pub fn node_taints(node: &Value) -> Vec<Taint> {
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .map(|ts| ts.iter().map(Taint::from_json).collect())
        .unwrap_or_default()
}

/// `pod.spec.tolerations`.
pub fn pod_tolerations(pod: &Value) -> Vec<Toleration> {
    pod.pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .map(|ts| ts.iter().map(Toleration::from_json).collect())
        .unwrap_or_default()
}

pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// `FindMatchingUntoleratedTaint`: the first taint passing `filter` that no toleration
/// tolerates, in the node's order.
pub fn first_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    filter: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints.iter().filter(|t| filter(t)).find(|t| !tolerated(tolerations, t))
}

/// `GetMatchingTolerations`: whether every taint is tolerated, and for each taint the first
/// toleration that tolerates it.
pub fn matching_tolerations(taints: &[Taint], tolerations: &[Toleration]) -> Option<Vec<Toleration>> {
    let mut used = Vec::with_capacity(taints.len());
    for taint in taints {
        used.push(tolerations.iter().find(|t| t.tolerates(taint))?.clone());
    }
    Some(used)
}

/// `getMinTolerationTime` of the taint-eviction controller: `None` is forever; a non-positive
/// `tolerationSeconds` (or no taints at all) evicts at once.
pub fn min_toleration_seconds(used: &[Toleration]) -> Option<i64> {
    if used.is_empty() {
        return Some(0);
    }
    let mut min: Option<i64> = None;
    for t in used {
        if let Some(s) = t.seconds {
            if s <= 0 {
                return Some(0);
            }
            min = Some(min.map_or(s, |m| m.min(s)));
        }
    }
    min
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        Toleration {
            key: key.into(),
            operator: op.into(),
            value: value.into(),
            effect: effect.into(),
            seconds: None,
        }
    }

    /// Cases of upstream's `TestTolerationToleratesTaint` (core/v1 helper).
    #[test]
    fn tolerates_taint_as_upstream() {
        let taint = Taint::new("foo", "bar", "NoSchedule");
        let cases = [
            ("empty toleration tolerates nothing keyed", tol("", "", "", ""), false),
            ("Exists with empty key tolerates everything", tol("", "Exists", "", ""), true),
            ("same key, Equal, same value", tol("foo", "Equal", "bar", "NoSchedule"), true),
            ("empty operator means Equal", tol("foo", "", "bar", ""), true),
            ("different value", tol("foo", "Equal", "baz", "NoSchedule"), false),
            ("Exists ignores the value", tol("foo", "Exists", "", "NoSchedule"), true),
            ("different effect", tol("foo", "Exists", "", "NoExecute"), false),
            ("different key", tol("other", "Exists", "", ""), false),
            ("unknown operator", tol("foo", "Sometimes", "bar", ""), false),
        ];
        for (name, t, want) in cases {
            assert_eq!(t.tolerates(&taint), want, "{name}");
        }
    }

    /// `getMinTolerationTime` (taint_eviction.go).
    #[test]
    fn min_toleration_time() {
        let with = |s: Option<i64>| Toleration { seconds: s, ..tol("k", "Exists", "", "NoExecute") };
        assert_eq!(min_toleration_seconds(&[]), Some(0));
        assert_eq!(min_toleration_seconds(&[with(None)]), None);
        assert_eq!(min_toleration_seconds(&[with(Some(300)), with(Some(20)), with(None)]), Some(20));
        assert_eq!(min_toleration_seconds(&[with(Some(300)), with(Some(-1))]), Some(0));
    }

    #[test]
    fn matching_tolerations_needs_every_taint_tolerated() {
        let taints = [Taint::new("a", "", "NoExecute"), Taint::new("b", "x", "NoExecute")];
        let tols = [tol("a", "Exists", "", ""), tol("b", "Equal", "x", "NoExecute")];
        assert_eq!(matching_tolerations(&taints, &tols).map(|u| u.len()), Some(2));
        assert_eq!(matching_tolerations(&taints, &tols[..1]), None);
        assert_eq!(matching_tolerations(&[], &[]), Some(vec![]));
    }
}
