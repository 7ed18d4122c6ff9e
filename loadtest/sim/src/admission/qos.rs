//! A pod's QoS class, as `pkg/apis/core/helper/qos.ComputePodQOS` computes it at create: from the
//! pod-level resources when they set cpu, memory or hugepages (PodLevelResources, on by default
//! since 1.34, with PodLevelResourcesFixKubeletQOSClass), else from every container and init
//! container. Only cpu and memory count, and only quantities above zero.

use serde_json::Value;

use super::common::{Obj, at_obj};
use super::pod::parse_quantity;

/// `[cpu, memory]` sums; `None` where nothing above zero was set.
type Totals = [Option<f64>; 2];

const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// `Guaranteed`, `Burstable` or `BestEffort` for a defaulted pod spec.
pub(crate) fn pod_qos_class(spec: &Obj) -> &'static str {
    let mut requests: Totals = [None, None];
    let mut limits: Totals = [None, None];
    let mut guaranteed = true;
    let pod_level = spec.get("resources").filter(|r| pod_level_resources_set(r));
    match pod_level {
        Some(resources) => {
            add(&mut requests, at_obj(resources, &["requests"]));
            let pod_limits = at_obj(resources, &["limits"]);
            if pod_limits.is_some_and(|l| !l.is_empty()) && add(&mut limits, pod_limits) != [true, true] {
                guaranteed = false;
            }
        }
        None => {
            let containers = ["containers", "initContainers"]
                .iter()
                .flat_map(|k| spec.get(*k).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]));
            for c in containers {
                add(&mut requests, at_obj(c, &["resources", "requests"]));
                if add(&mut limits, at_obj(c, &["resources", "limits"])) != [true, true] {
                    guaranteed = false;
                }
            }
        }
    }
    if requests.iter().chain(&limits).all(Option::is_none) {
        return "BestEffort";
    }
    let requests_match_limits = requests.iter().zip(&limits).all(|(r, l)| match (r, l) {
        (None, _) => true,
        (Some(r), Some(l)) => (l - r).abs() <= f64::EPSILON * l.abs().max(1.0),
        (Some(_), None) => false,
    });
    let count = |t: &Totals| t.iter().filter(|x| x.is_some()).count();
    if guaranteed && requests_match_limits && count(&requests) == count(&limits) {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Adds the positive cpu and memory quantities of `list` to `totals`; says which were found.
fn add(totals: &mut Totals, list: Option<&Obj>) -> [bool; 2] {
    let mut found = [false, false];
    let Some(list) = list else { return found };
    for (i, name) in QOS_RESOURCES.iter().enumerate() {
        if let Some(q) = list.get(*name).and_then(Value::as_str).and_then(parse_quantity)
            && q > 0.0
        {
            totals[i] = Some(totals[i].unwrap_or(0.0) + q);
            found[i] = true;
        }
    }
    found
}

/// `isPodLevelResourcesSet`: a pod-level request or limit of a supported resource.
fn pod_level_resources_set(resources: &Value) -> bool {
    let supported = |name: &String| name == "cpu" || name == "memory" || name.starts_with("hugepages-");
    ["requests", "limits"].iter().any(|k| at_obj(resources, &[k]).is_some_and(|m| m.keys().any(supported)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn container(requests: Value, limits: Value) -> Value {
        json!({"name": "c", "image": "i", "resources": {"requests": requests, "limits": limits}})
    }

    fn qos(spec: Value) -> &'static str {
        pod_qos_class(spec.as_object().expect("spec"))
    }

    /// The cases of upstream's TestComputePodQOS (qos_test.go), requests defaulted from limits
    /// as the apiserver does before computing.
    #[test]
    fn compute_pod_qos_table() {
        let cases = [
            (
                "best-effort: no resources",
                json!({"containers": [container(json!({}), json!({}))]}),
                "BestEffort",
            ),
            (
                "best-effort: zero quantities",
                json!({"containers": [container(json!({"cpu": "0", "memory": "0"}), json!({"cpu": "0"}))]}),
                "BestEffort",
            ),
            (
                "best-effort: only extended resources",
                json!({"containers": [container(json!({"nvidia.com/gpu": "1"}), json!({"nvidia.com/gpu": "1"}))]}),
                "BestEffort",
            ),
            (
                "guaranteed: equal cpu and memory",
                json!({"containers": [container(json!({"cpu": "100m", "memory": "100Mi"}), json!({"cpu": "0.1", "memory": "100Mi"}))]}),
                "Guaranteed",
            ),
            (
                "guaranteed: two containers",
                json!({"containers": [
                    container(json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1", "memory": "1Gi"})),
                    container(json!({"cpu": "2", "memory": "1Gi"}), json!({"cpu": "2", "memory": "1Gi"})),
                ]}),
                "Guaranteed",
            ),
            (
                "burstable: one container without limits",
                json!({"containers": [
                    container(json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1", "memory": "1Gi"})),
                    container(json!({}), json!({})),
                ]}),
                "Burstable",
            ),
            (
                "burstable: requests below limits",
                json!({"containers": [container(json!({"cpu": "100m", "memory": "100Mi"}), json!({"cpu": "200m", "memory": "100Mi"}))]}),
                "Burstable",
            ),
            (
                "burstable: only a cpu limit",
                json!({"containers": [container(json!({"cpu": "100m"}), json!({"cpu": "100m"}))]}),
                "Burstable",
            ),
            (
                "burstable: an init container without limits",
                json!({"containers": [container(json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1", "memory": "1Gi"}))],
                       "initContainers": [container(json!({"cpu": "1"}), json!({}))]}),
                "Burstable",
            ),
            (
                "guaranteed: pod-level resources override containers",
                json!({"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                       "containers": [container(json!({}), json!({}))]}),
                "Guaranteed",
            ),
            (
                "burstable: pod-level requests only",
                json!({"resources": {"requests": {"cpu": "1"}},
                       "containers": [container(json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1", "memory": "1Gi"}))]}),
                "Burstable",
            ),
            (
                "burstable: pod-level limits miss memory",
                json!({"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}, "containers": [container(json!({}), json!({}))]}),
                "Burstable",
            ),
            (
                "containers decide: pod-level resources set nothing supported",
                json!({"resources": {"limits": {"nvidia.com/gpu": "1"}}, "containers": [container(json!({}), json!({}))]}),
                "BestEffort",
            ),
        ];
        for (name, spec, want) in cases {
            assert_eq!(qos(spec), want, "{name}");
        }
    }
}
