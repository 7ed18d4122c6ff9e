//! The filter plugins of kube-scheduler's default profile that the sim runs, in upstream's
//! order, each stopping a node at its first failure: NodeUnschedulable, TaintToleration,
//! NodeAffinity (nodeSelector and required node affinity) and NodeResourcesFit.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::admission::parse_quantity;
use crate::cluster::taints::{self, Taint, Toleration, UNSCHEDULABLE_TAINT};

/// `nodeunschedulable.ErrReasonUnschedulable`.
pub const REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// `tainttoleration` Filter's reason (the taint itself is no longer named, since v1.33).
pub const REASON_UNTOLERATED_TAINT: &str = "node(s) had untolerated taint(s)";
/// `nodeaffinity.ErrReasonPod`.
pub const REASON_NODE_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
/// `noderesources` Fit's reason for the pod count.
pub const REASON_TOO_MANY_PODS: &str = "Too many pods";

/// Resource amounts: `cpu` in millicores, everything else in whole units, each rounded up as
/// `Quantity.MilliValue`/`Value` do.
pub type Resources = BTreeMap<String, i64>;

/// What the filters need of a node.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub unschedulable: bool,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    /// `allocatable.pods`.
    pub max_pods: i64,
}

/// What a node already carries: its scheduled, non-terminal pods.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    pub pods: i64,
    pub requested: Resources,
}

impl Usage {
    pub fn add(&mut self, r: &Resources) {
        self.pods += 1;
        for (k, v) in r {
            *self.requested.entry(k.clone()).or_default() += v;
        }
    }

    pub fn remove(&mut self, r: &Resources) {
        self.pods -= 1;
        for (k, v) in r {
            *self.requested.entry(k.clone()).or_default() -= v;
        }
    }
}

/// A `nodeSelectorRequirement`.
#[derive(Debug, Clone)]
struct Requirement {
    key: String,
    operator: String,
    values: Vec<String>,
}

/// A `nodeSelectorTerm`: every expression and field requirement must hold.
#[derive(Debug, Clone, Default)]
struct Term {
    expressions: Vec<Requirement>,
    fields: Vec<Requirement>,
}

/// What the filters need of a pod, parsed once per scheduling attempt.
#[derive(Debug, Clone, Default)]
pub struct PodFacts {
    pub tolerations: Vec<Toleration>,
    node_selector: BTreeMap<String, String>,
    /// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`; `None` when unset.
    required_terms: Option<Vec<Term>>,
    pub requests: Resources,
    pub preemption_never: bool,
}

/// Why a node does not fit, as one plugin's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reasons: Vec<String>,
    /// `UnschedulableAndUnresolvable`: preemption cannot help on this node.
    pub unresolvable: bool,
}

impl Rejection {
    fn unresolvable(reason: &str) -> Self {
        Self { reasons: vec![reason.to_string()], unresolvable: true }
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect())
        .unwrap_or_default()
}

fn requirements(v: Option<&Value>) -> Vec<Requirement> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|r| Requirement {
                    key: r.get("key").and_then(Value::as_str).unwrap_or("").to_string(),
                    operator: r.get("operator").and_then(Value::as_str).unwrap_or("").to_string(),
                    values: strings(r.get("values")),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A quantity in the unit [`Resources`] keeps for `name`, rounded up.
fn amount(name: &str, q: &Value) -> Option<i64> {
    let text = match q {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let v = parse_quantity(&text)?;
    let scaled = if name == "cpu" { v * 1000.0 } else { v };
    // Float noise must not round 0.1 CPU up to 101m.
    Some((scaled - 1e-9).ceil().max(0.0) as i64)
}

fn resource_map(v: Option<&Value>) -> Resources {
    v.and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, q)| Some((k.clone(), amount(k, q)?))).collect())
        .unwrap_or_default()
}

fn add_into(total: &mut Resources, r: &Resources) {
    for (k, v) in r {
        *total.entry(k.clone()).or_default() += v;
    }
}

fn max_into(total: &mut Resources, r: &Resources) {
    for (k, v) in r {
        let e = total.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
}

/// `resourcehelper.PodRequests`: pod-level resources when set; else the sum of the containers
/// (restartable init containers included) against the largest regular init container, plus
/// the overhead.
pub fn pod_requests(pod: &Value) -> Resources {
    let spec = pod.get("spec").cloned().unwrap_or(Value::Null);
    if let Some(r) =
        spec.pointer("/resources/requests").filter(|r| r.as_object().is_some_and(|m| !m.is_empty()))
    {
        let mut total = resource_map(Some(r));
        add_into(&mut total, &resource_map(spec.get("overhead")));
        return total;
    }
    let container_requests = |c: &Value| resource_map(c.pointer("/resources/requests"));
    let mut total = Resources::new();
    for c in spec.get("containers").and_then(Value::as_array).into_iter().flatten() {
        add_into(&mut total, &container_requests(c));
    }
    let mut sidecars = Resources::new();
    let mut init_max = Resources::new();
    for c in spec.get("initContainers").and_then(Value::as_array).into_iter().flatten() {
        let r = container_requests(c);
        if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            add_into(&mut total, &r);
            add_into(&mut sidecars, &r);
            // A sidecar runs alongside the init containers after it.
            max_into(&mut init_max, &sidecars);
        } else {
            let mut with_sidecars = r;
            add_into(&mut with_sidecars, &sidecars);
            max_into(&mut init_max, &with_sidecars);
        }
    }
    max_into(&mut total, &init_max);
    add_into(&mut total, &resource_map(spec.get("overhead")));
    total.retain(|_, v| *v != 0);
    total
}

impl PodFacts {
    pub fn of(pod: &Value) -> Self {
        let required =
            pod.pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution");
        let required_terms = required.filter(|r| !r.is_null()).map(|r| {
            r.get("nodeSelectorTerms")
                .and_then(Value::as_array)
                .map(|terms| {
                    terms
                        .iter()
                        .map(|t| Term {
                            expressions: requirements(t.get("matchExpressions")),
                            fields: requirements(t.get("matchFields")),
                        })
                        .collect()
                })
                .unwrap_or_default()
        });
        Self {
            tolerations: taints::pod_tolerations(pod),
            node_selector: string_map(pod.pointer("/spec/nodeSelector")),
            required_terms,
            requests: pod_requests(pod),
            preemption_never: pod.pointer("/spec/preemptionPolicy").and_then(Value::as_str) == Some("Never"),
        }
    }
}

impl NodeInfo {
    pub fn of(node: &Value) -> Self {
        let allocatable = resource_map(node.pointer("/status/allocatable"));
        let max_pods = allocatable.get("pods").copied().unwrap_or(0);
        Self {
            name: node.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string(),
            labels: string_map(node.pointer("/metadata/labels")),
            unschedulable: node.pointer("/spec/unschedulable").and_then(Value::as_bool).unwrap_or(false),
            taints: taints::node_taints(node),
            allocatable,
            max_pods,
        }
    }
}

/// `NodeSelectorRequirement` against labels (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`,
/// `Lt`, as `labels.Requirement.Matches`); an unknown operator or bad value fails the term.
fn label_requirement_matches(r: &Requirement, labels: &BTreeMap<String, String>) -> bool {
    let label = labels.get(&r.key);
    match r.operator.as_str() {
        "In" => label.is_some_and(|l| r.values.contains(l)),
        "NotIn" => label.is_none_or(|l| !r.values.contains(l)),
        "Exists" => label.is_some(),
        "DoesNotExist" => label.is_none(),
        "Gt" | "Lt" => {
            let [bound] = r.values.as_slice() else { return false };
            let (Some(label), Ok(bound)) = (label, bound.parse::<i64>()) else { return false };
            let Ok(value) = label.parse::<i64>() else { return false };
            if r.operator == "Gt" { value > bound } else { value < bound }
        }
        _ => false,
    }
}

/// `matchFields`: only `metadata.name` with `In` or `NotIn` is valid.
fn field_requirement_matches(r: &Requirement, node_name: &str) -> bool {
    if r.key != "metadata.name" {
        return false;
    }
    match r.operator.as_str() {
        "In" => r.values.iter().any(|v| v == node_name),
        "NotIn" => r.values.iter().all(|v| v != node_name),
        _ => false,
    }
}

/// `nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)`: the nodeSelector's labels, then any
/// one of the required terms (an empty term matches nothing).
pub fn matches_node_affinity(pod: &PodFacts, node: &NodeInfo) -> bool {
    if pod.node_selector.iter().any(|(k, v)| node.labels.get(k) != Some(v)) {
        return false;
    }
    let Some(terms) = &pod.required_terms else { return true };
    terms.iter().any(|t| {
        (!t.expressions.is_empty() || !t.fields.is_empty())
            && t.expressions.iter().all(|r| label_requirement_matches(r, &node.labels))
            && t.fields.iter().all(|r| field_requirement_matches(r, &node.name))
    })
}

/// `noderesources.fitsRequest`: the pod count first, then each requested resource against
/// what is left of allocatable; a request above allocatable itself is unresolvable.
fn fits_resources(pod: &PodFacts, node: &NodeInfo, usage: &Usage) -> Result<(), Rejection> {
    let mut reasons = Vec::new();
    let mut unresolvable = false;
    if usage.pods + 1 > node.max_pods {
        reasons.push(REASON_TOO_MANY_PODS.to_string());
    }
    for (name, &want) in &pod.requests {
        if name == "pods" || want <= 0 {
            continue;
        }
        let allocatable = node.allocatable.get(name).copied().unwrap_or(0);
        let used = usage.requested.get(name).copied().unwrap_or(0);
        if want > allocatable - used {
            reasons.push(format!("Insufficient {name}"));
            unresolvable |= want > allocatable;
        }
    }
    if reasons.is_empty() { Ok(()) } else { Err(Rejection { reasons, unresolvable }) }
}

/// Runs the filters on one node, stopping at the first that rejects it
/// (`frameworkImpl.RunFilterPlugins`).
pub fn filter(pod: &PodFacts, node: &NodeInfo, usage: &Usage) -> Result<(), Rejection> {
    // NodeUnschedulable: a cordoned node, unless the pod tolerates the unschedulable taint.
    if node.unschedulable
        && !taints::tolerated(&pod.tolerations, &Taint::new(UNSCHEDULABLE_TAINT, "", "NoSchedule"))
    {
        return Err(Rejection::unresolvable(REASON_UNSCHEDULABLE));
    }
    // TaintToleration: only NoSchedule and NoExecute taints keep pods off.
    let do_not_schedule = |t: &Taint| t.effect == "NoSchedule" || t.effect == "NoExecute";
    if taints::first_untolerated(&node.taints, &pod.tolerations, do_not_schedule).is_some() {
        return Err(Rejection::unresolvable(REASON_UNTOLERATED_TAINT));
    }
    if !matches_node_affinity(pod, node) {
        return Err(Rejection::unresolvable(REASON_NODE_AFFINITY));
    }
    fits_resources(pod, node, usage)
}

/// TaintToleration's score input: how many PreferNoSchedule taints the pod does not tolerate
/// (fewer is better).
pub fn intolerable_prefer_no_schedule(pod: &PodFacts, node: &NodeInfo) -> usize {
    node.taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule" && !taints::tolerated(&pod.tolerations, t))
        .count()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(v: Value) -> NodeInfo {
        NodeInfo::of(&v)
    }

    fn plain_node() -> Value {
        json!({"metadata": {"name": "n1", "labels": {"zone": "a", "gen": "5"}},
               "spec": {}, "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "3"}}})
    }

    fn pod(spec: Value) -> PodFacts {
        PodFacts::of(&json!({"spec": spec}))
    }

    fn verdict(p: &PodFacts, n: &NodeInfo, usage: &Usage) -> Option<(Vec<String>, bool)> {
        filter(p, n, usage).err().map(|r| (r.reasons, r.unresolvable))
    }

    /// `TestNodeUnschedulable` (nodeunschedulable plugin): a cordoned node rejects pods unless
    /// they tolerate `node.kubernetes.io/unschedulable:NoSchedule`.
    #[test]
    fn node_unschedulable() {
        let mut v = plain_node();
        v["spec"]["unschedulable"] = json!(true);
        let cordoned = node(v);
        assert_eq!(
            verdict(&pod(json!({})), &cordoned, &Usage::default()),
            Some((vec![REASON_UNSCHEDULABLE.to_string()], true))
        );
        let tolerating = pod(json!({"tolerations": [
            {"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]}));
        assert_eq!(verdict(&tolerating, &cordoned, &Usage::default()), None);
    }

    /// `TestTaintTolerationFilter`: NoSchedule and NoExecute keep untolerating pods off;
    /// PreferNoSchedule is only a score.
    #[test]
    fn taint_toleration() {
        let tainted = |effect: &str| {
            let mut v = plain_node();
            v["spec"]["taints"] = json!([{"key": "dedicated", "value": "gpu", "effect": effect}]);
            node(v)
        };
        let untolerated = Some((vec![REASON_UNTOLERATED_TAINT.to_string()], true));
        let none = pod(json!({}));
        assert_eq!(verdict(&none, &tainted("NoSchedule"), &Usage::default()), untolerated);
        assert_eq!(verdict(&none, &tainted("NoExecute"), &Usage::default()), untolerated);
        assert_eq!(verdict(&none, &tainted("PreferNoSchedule"), &Usage::default()), None);
        assert_eq!(intolerable_prefer_no_schedule(&none, &tainted("PreferNoSchedule")), 1);
        let equal =
            pod(json!({"tolerations": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}));
        assert_eq!(verdict(&equal, &tainted("NoSchedule"), &Usage::default()), None);
        assert_eq!(verdict(&equal, &tainted("NoExecute"), &Usage::default()), untolerated);
        let wrong_value =
            pod(json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "cpu"}]}));
        assert_eq!(verdict(&wrong_value, &tainted("NoSchedule"), &Usage::default()), untolerated);
        let everything = pod(json!({"tolerations": [{"operator": "Exists"}]}));
        assert_eq!(verdict(&everything, &tainted("NoExecute"), &Usage::default()), None);
    }

    /// `TestNodeAffinity` (nodeaffinity plugin): nodeSelector, and required terms ORed with
    /// their requirements ANDed, each operator, and matchFields on metadata.name.
    #[test]
    fn node_affinity() {
        let n = node(plain_node());
        let required = |terms: Value| {
            pod(
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}),
            )
        };
        let expr = |key: &str, op: &str, values: Value| json!([{"matchExpressions": [{"key": key, "operator": op, "values": values}]}]);
        let cases: Vec<(&str, PodFacts, bool)> = vec![
            ("no constraints", pod(json!({})), true),
            ("nodeSelector matches", pod(json!({"nodeSelector": {"zone": "a"}})), true),
            ("nodeSelector value differs", pod(json!({"nodeSelector": {"zone": "b"}})), false),
            ("nodeSelector label missing", pod(json!({"nodeSelector": {"disk": "ssd"}})), false),
            ("In", required(expr("zone", "In", json!(["b", "a"]))), true),
            ("In, no value matches", required(expr("zone", "In", json!(["b"]))), false),
            ("NotIn", required(expr("zone", "NotIn", json!(["b"]))), true),
            ("NotIn on a missing label", required(expr("disk", "NotIn", json!(["ssd"]))), true),
            ("NotIn excludes", required(expr("zone", "NotIn", json!(["a"]))), false),
            ("Exists", required(expr("zone", "Exists", json!(null))), true),
            ("Exists on a missing label", required(expr("disk", "Exists", json!(null))), false),
            ("DoesNotExist", required(expr("disk", "DoesNotExist", json!(null))), true),
            ("Gt", required(expr("gen", "Gt", json!(["4"]))), true),
            ("Gt, equal", required(expr("gen", "Gt", json!(["5"]))), false),
            ("Lt", required(expr("gen", "Lt", json!(["6"]))), true),
            ("Lt on a non-integer label", required(expr("zone", "Lt", json!(["6"]))), false),
            ("an unknown operator fails the term", required(expr("zone", "Like", json!(["a"]))), false),
            (
                "terms are ORed",
                required(json!([
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}])),
                true,
            ),
            (
                "requirements in a term are ANDed",
                required(json!([
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                      {"key": "gen", "operator": "In", "values": ["4"]}]}])),
                false,
            ),
            ("an empty term matches nothing", required(json!([{}])), false),
            ("no terms match nothing", required(json!([])), false),
            (
                "matchFields metadata.name In",
                required(json!([
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}])),
                true,
            ),
            (
                "matchFields metadata.name NotIn",
                required(json!([
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}])),
                false,
            ),
            (
                "matchFields on another field",
                required(json!([
                {"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["n1"]}]}])),
                false,
            ),
            (
                "nodeSelector and affinity both apply",
                {
                    let mut p = required(expr("zone", "In", json!(["a"])));
                    p.node_selector.insert("zone".into(), "b".into());
                    p
                },
                false,
            ),
        ];
        for (name, p, want) in cases {
            assert_eq!(matches_node_affinity(&p, &n), want, "{name}");
            let rejected = verdict(&p, &n, &Usage::default());
            assert_eq!(rejected.is_none(), want, "{name}");
            if !want {
                assert_eq!(rejected, Some((vec![REASON_NODE_AFFINITY.to_string()], true)), "{name}");
            }
        }
    }

    /// `TestEnoughRequests` (noderesources Fit): requests against allocatable minus what
    /// scheduled pods request, the pod count, and unresolvable requests above allocatable.
    #[test]
    fn resources_fit() {
        let n = node(plain_node());
        let req = |cpu: &str, mem: &str| {
            pod(
                json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}),
            )
        };
        let mut used = Usage::default();
        used.add(&Resources::from([("cpu".to_string(), 1500), ("memory".to_string(), 1 << 30)]));
        assert_eq!(verdict(&req("500m", "1Gi"), &n, &used), None);
        assert_eq!(
            verdict(&req("600m", "1Gi"), &n, &used),
            Some((vec!["Insufficient cpu".to_string()], false))
        );
        assert_eq!(
            verdict(&req("600m", "5Gi"), &n, &used),
            Some((vec!["Insufficient cpu".to_string(), "Insufficient memory".to_string()], true))
        );
        assert_eq!(
            verdict(&req("3", "1Mi"), &n, &Usage::default()),
            Some((vec!["Insufficient cpu".to_string()], true))
        );
        let gpu =
            pod(json!({"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}));
        assert_eq!(
            verdict(&gpu, &n, &Usage::default()),
            Some((vec!["Insufficient nvidia.com/gpu".to_string()], true))
        );
        let mut full = Usage::default();
        for _ in 0..3 {
            full.add(&Resources::new());
        }
        assert_eq!(
            verdict(&pod(json!({})), &n, &full),
            Some((vec![REASON_TOO_MANY_PODS.to_string()], false))
        );
        full.remove(&Resources::new());
        assert_eq!(verdict(&pod(json!({})), &n, &full), None);
    }

    /// `TestPodRequests` (component-helpers resource): containers add up, init containers take
    /// the max, sidecars add to both, overhead adds on top.
    #[test]
    fn pod_requests_as_upstream() {
        let r = pod_requests(&json!({"spec": {
            "containers": [{"resources": {"requests": {"cpu": "100m", "memory": "1Mi"}}},
                           {"resources": {"requests": {"cpu": "200m"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "1", "memory": "1Ki"}}}],
            "overhead": {"cpu": "10m"}
        }}));
        assert_eq!(r, Resources::from([("cpu".into(), 1010), ("memory".into(), 1 << 20)]));
        let sidecar = pod_requests(&json!({"spec": {
            "containers": [{"resources": {"requests": {"cpu": "100m"}}}],
            "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
                               {"resources": {"requests": {"cpu": "120m"}}}]
        }}));
        assert_eq!(sidecar, Resources::from([("cpu".into(), 170)]));
        assert_eq!(amount("cpu", &json!("0.1")), Some(100));
        assert_eq!(amount("cpu", &json!("1.5m")), Some(2));
        assert_eq!(amount("memory", &json!(1000)), Some(1000));
    }
}
