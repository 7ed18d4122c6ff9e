//! deploy/ without a cluster: every manifest (each file as written, and what `kubectl kustomize`
//! builds of the base and every overlay) parses into its k8s-openapi type, or for the Prometheus
//! Operator's kinds into a strict struct of the fields it uses, and encodes back to the same
//! JSON: a misspelt or misindented field is dropped by the decode and fails the comparison.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use batchfleet_deploy_tests::{build, deploy_dir, describe, documents, kustomization, kustomizations};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The Prometheus Operator's kinds, with only the fields deploy/ uses, rejecting any other.
mod monitoring {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct ServiceMonitor {
        pub api_version: String,
        pub kind: String,
        pub metadata: ObjectMeta,
        pub spec: ServiceMonitorSpec,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct ServiceMonitorSpec {
        pub selector: LabelSelector,
        pub endpoints: Vec<Endpoint>,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Endpoint {
        pub port: String,
        pub path: String,
        pub interval: String,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct PrometheusRule {
        pub api_version: String,
        pub kind: String,
        pub metadata: ObjectMeta,
        pub spec: RuleSpec,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct RuleSpec {
        pub groups: Vec<RuleGroup>,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct RuleGroup {
        pub name: String,
        pub rules: Vec<Rule>,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Rule {
        pub alert: String,
        pub expr: String,
        #[serde(rename = "for", default, skip_serializing_if = "Option::is_none")]
        pub for_: Option<String>,
        pub labels: BTreeMap<String, String>,
        pub annotations: BTreeMap<String, String>,
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(obj: &Value) -> Result<Value, String> {
    let typed = T::deserialize(obj).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

/// Decodes `obj` as the type of its apiVersion and kind and encodes it again.
fn typed_round_trip(obj: &Value) -> Result<Value, String> {
    use k8s_openapi::api::{apps, autoscaling, core, networking, policy, rbac};
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    match (api_version, kind) {
        ("v1", "Namespace") => round_trip::<core::v1::Namespace>(obj),
        ("v1", "ServiceAccount") => round_trip::<core::v1::ServiceAccount>(obj),
        ("v1", "Service") => round_trip::<core::v1::Service>(obj),
        ("v1", "ConfigMap") => round_trip::<core::v1::ConfigMap>(obj),
        ("apps/v1", "Deployment") => round_trip::<apps::v1::Deployment>(obj),
        ("apps/v1", "StatefulSet") => round_trip::<apps::v1::StatefulSet>(obj),
        ("policy/v1", "PodDisruptionBudget") => round_trip::<policy::v1::PodDisruptionBudget>(obj),
        ("networking.k8s.io/v1", "NetworkPolicy") => round_trip::<networking::v1::NetworkPolicy>(obj),
        ("autoscaling/v2", "HorizontalPodAutoscaler") => {
            round_trip::<autoscaling::v2::HorizontalPodAutoscaler>(obj)
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => round_trip::<rbac::v1::ClusterRole>(obj),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            round_trip::<rbac::v1::ClusterRoleBinding>(obj)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => round_trip::<rbac::v1::Role>(obj),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => round_trip::<rbac::v1::RoleBinding>(obj),
        ("monitoring.coreos.com/v1", "ServiceMonitor") => round_trip::<monitoring::ServiceMonitor>(obj),
        ("monitoring.coreos.com/v1", "PrometheusRule") => round_trip::<monitoring::PrometheusRule>(obj),
        _ => Err(format!("no type for apiVersion {api_version:?} kind {kind:?}: add it to typed_round_trip")),
    }
}

/// Where `b` lost or changed what `a` has, as JSON paths with both sides (fields the round trip
/// adds, such as a required field's default, are not a loss).
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (va, vb) = (x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null));
                differences(&format!("{path}.{k}"), va, vb, out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}[{i}]"), va, vb, out);
            }
        }
        _ if a == b || a.is_null() => {}
        _ => out.push(format!("{path}: written {a}, after the round trip {b}")),
    }
}

fn check_round_trips(source: &str, objects: &[Value]) -> Vec<String> {
    let mut failures = Vec::new();
    for obj in objects {
        match typed_round_trip(obj) {
            Err(e) => failures.push(format!("{source}: {}: {e}", describe(obj))),
            Ok(back) => {
                let mut diffs = Vec::new();
                differences("", obj, &back, &mut diffs);
                for d in diffs {
                    failures.push(format!("{source}: {}: {d}", describe(obj)));
                }
            }
        }
    }
    failures
}

/// Every `*.yaml` under deploy/ that holds Kubernetes objects (not kustomizations, not the
/// kubeadm patch, not this crate).
fn manifest_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read deploy/").flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "yaml")
                && path.file_name().is_some_and(|n| n != "kustomization.yaml")
                && !path.to_string_lossy().ends_with(".patch.yaml")
            {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&deploy_dir(), &mut out);
    out.sort();
    out
}

#[test]
fn every_manifest_file_parses_into_its_type_and_round_trips() {
    let files = manifest_files();
    assert!(files.len() >= 10, "deploy/ has its manifests: {files:?}");
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        let objects = documents(&text);
        assert!(!objects.is_empty(), "{} holds no object", file.display());
        // A strategic-merge patch of an overlay is a partial object: its fields must still exist.
        let name = file.strip_prefix(deploy_dir()).unwrap_or(file).display().to_string();
        failures.extend(check_round_trips(&format!("deploy/{name}"), &objects));
    }
    assert!(failures.is_empty(), "fields lost or types unknown:\n{}", failures.join("\n"));
}

#[test]
fn what_kustomize_builds_parses_into_its_types_and_round_trips() {
    let mut failures = Vec::new();
    for (name, dir) in kustomizations() {
        failures.extend(check_round_trips(&name, &build(&dir)));
    }
    assert!(failures.is_empty(), "fields lost or types unknown:\n{}", failures.join("\n"));
}

/// The kinds and names each kustomization builds.
fn objects(name: &str) -> BTreeSet<String> {
    build(&kustomization(name)).iter().map(describe).collect()
}

#[test]
fn kustomize_builds_every_overlay_with_what_it_is_for() {
    let names: Vec<String> = kustomizations().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["base", "beside-kcm", "etcd", "hpa-example", "monitoring", "replace-kcm"]);
    let base = objects("base");
    for expected in [
        "Namespace/batchfleet",
        "Deployment/fleet-coordinator",
        "StatefulSet/fleet-worker",
        "PodDisruptionBudget/fleet-coordinator",
        "PodDisruptionBudget/fleet-worker",
        "Service/fleet-coordinator",
        "Service/fleet-coordinator-metrics",
        "Service/fleet-worker",
        "NetworkPolicy/fleet-coordinator",
        "NetworkPolicy/fleet-worker",
        "ClusterRole/batchfleet:fleet-coordinator",
        "ClusterRole/batchfleet:fleet-worker",
        "Role/fleet-coordinator",
        "Role/fleet-worker",
    ] {
        assert!(base.contains(expected), "base lacks {expected}: {base:?}");
    }
    let etcd = objects("etcd");
    assert!(etcd.contains("StatefulSet/etcd") && etcd.contains("NetworkPolicy/etcd"), "{etcd:?}");
    assert!(!etcd.iter().any(|o| o.starts_with("Role")), "the etcd store needs no Role: {etcd:?}");
    let monitoring = objects("monitoring");
    for expected in [
        "ServiceMonitor/fleet-coordinator",
        "ServiceMonitor/fleet-worker",
        "PrometheusRule/batchfleet",
        "ConfigMap/batchfleet-dashboard",
    ] {
        assert!(monitoring.contains(expected), "monitoring lacks {expected}");
    }
    assert!(objects("hpa-example").contains("HorizontalPodAutoscaler/fleet-worker"));
    // Every object of every overlay lands in the fleet's namespace, or is cluster-scoped.
    for (name, dir) in kustomizations() {
        for obj in build(&dir) {
            let cluster_scoped =
                matches!(obj["kind"].as_str(), Some("Namespace" | "ClusterRole" | "ClusterRoleBinding"));
            let ns = obj["metadata"]["namespace"].as_str();
            assert!(
                cluster_scoped == ns.is_none() && ns.is_none_or(|ns| ns == "batchfleet"),
                "{name}: {} in namespace {ns:?}",
                describe(&obj)
            );
        }
    }
}

/// The worker container's args and env of an overlay's StatefulSet.
fn worker_settings(name: &str) -> (Vec<String>, Vec<(String, String)>) {
    let built = build(&kustomization(name));
    let sts = built.iter().find(|o| describe(o) == "StatefulSet/fleet-worker").expect("the workers");
    let container = &sts["spec"]["template"]["spec"]["containers"][0];
    let args =
        container["args"].as_array().into_iter().flatten().filter_map(|a| a.as_str()).map(String::from);
    let env = container["env"].as_array().into_iter().flatten().filter_map(|e| {
        Some((e["name"].as_str()?.to_string(), e["value"].as_str().unwrap_or_default().to_string()))
    });
    (args.collect(), env.collect())
}

#[test]
fn the_kcm_overlays_split_the_controllers_as_the_migration_doc_says() {
    let (args, env) = worker_settings("beside-kcm");
    assert!(args.contains(&"--controllers=job".to_string()), "{args:?}");
    assert!(env.contains(&("FLEET_JOB_MANAGED_BY".into(), "batchfleet.io/job-controller".into())), "{env:?}");
    let (args, env) = worker_settings("replace-kcm");
    assert!(args.contains(&"--controllers=*".to_string()), "{args:?}");
    assert!(env.contains(&("FLEET_JOB_MANAGED_BY".into(), "kubernetes.io/job-controller".into())), "{env:?}");
    let patch =
        std::fs::read_to_string(deploy_dir().join("overlays/replace-kcm/kube-controller-manager.patch.yaml"))
            .expect("the kube-controller-manager patch");
    let config: Value = documents(&patch).remove(0);
    let args = config["controllerManager"]["extraArgs"].as_array().expect("extraArgs");
    assert!(
        args.iter().any(|a| a["name"] == "controllers" && a["value"] == "*,-job,-cronjob,-ttl-after-finished,-podgc"),
        "{args:?}"
    );
    let coordinator_args = |name: &str| -> Vec<String> {
        let built = build(&kustomization(name));
        let deployment =
            built.iter().find(|o| describe(o) == "Deployment/fleet-coordinator").expect("coordinator");
        let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].as_array().cloned();
        args.unwrap_or_default().iter().filter_map(|a| a.as_str().map(String::from)).collect()
    };
    assert!(coordinator_args("beside-kcm").contains(&"--controllers=-podgc".to_string()));
    assert!(coordinator_args("replace-kcm").contains(&"--controllers=podgc".to_string()));
    let beside = objects("beside-kcm");
    assert!(!beside.contains("ClusterRole/batchfleet:fleet-coordinator"), "no PodGC, no cluster-wide rules");
    let (_, env) = worker_settings("etcd");
    assert!(env.iter().any(|(k, v)| k == "FLEET_STORE" && v == "etcd"), "{env:?}");
}

#[test]
fn every_container_runs_non_root_on_a_read_only_root_with_requests_and_a_memory_limit() {
    for (name, dir) in kustomizations() {
        for obj in build(&dir) {
            let Some(pod) = obj["spec"]["template"]["spec"].as_object() else { continue };
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}: {}", describe(&obj));
            for c in pod["containers"].as_array().expect("containers") {
                let what = format!("{name}: {} container {}", describe(&obj), c["name"]);
                assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true, "{what}");
                assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false, "{what}");
                assert!(c["resources"]["requests"]["cpu"].is_string(), "{what}: cpu request");
                assert!(c["resources"]["requests"]["memory"].is_string(), "{what}: memory request");
                assert!(c["resources"]["limits"]["memory"].is_string(), "{what}: memory limit");
                assert!(c["readinessProbe"].is_object() && c["livenessProbe"].is_object(), "{what}: probes");
            }
        }
    }
}

#[test]
fn the_workers_grace_period_outlasts_their_drain_timeout() {
    let built = build(&kustomization("base"));
    let sts = built.iter().find(|o| describe(o) == "StatefulSet/fleet-worker").expect("the workers");
    let grace = sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"].as_u64().expect("grace");
    let (args, _) = worker_settings("base");
    let drain = args
        .iter()
        .find_map(|a| a.strip_prefix("--drain-timeout="))
        .and_then(|d| d.strip_suffix('s'))
        .and_then(|d| d.parse::<u64>().ok())
        .expect("--drain-timeout=Ns");
    assert!(
        grace >= drain + 15,
        "terminationGracePeriodSeconds {grace} leaves no margin over --drain-timeout {drain}s"
    );
}
