//! deploy/ without a cluster: every manifest (each file as written, and what `kubectl kustomize`
//! builds of the base, every overlay and the components stacked on them) parses into its
//! k8s-openapi type, or for the Prometheus Operator's and cert-manager's kinds into a strict
//! struct of the fields it uses, and encodes back to the same JSON: a misspelt or misindented
//! field is dropped by the decode and fails the comparison. Then what each kustomization and
//! component is for: the objects, flags and certificates it must give.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use batchfleet_deploy_tests::{Stack, deploy_dir, describe, documents, stacks};
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

/// cert-manager's kinds, with only the fields deploy/ uses, rejecting any other.
mod cert_manager {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Issuer {
        pub api_version: String,
        pub kind: String,
        pub metadata: ObjectMeta,
        pub spec: IssuerSpec,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct IssuerSpec {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub self_signed: Option<SelfSigned>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub ca: Option<CaIssuer>,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SelfSigned {}

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct CaIssuer {
        pub secret_name: String,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Certificate {
        pub api_version: String,
        pub kind: String,
        pub metadata: ObjectMeta,
        pub spec: CertificateSpec,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct CertificateSpec {
        pub secret_name: String,
        pub common_name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub is_c_a: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub dns_names: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub usages: Option<Vec<String>>,
        pub duration: String,
        pub renew_before: String,
        pub private_key: PrivateKey,
        pub issuer_ref: IssuerRef,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct PrivateKey {
        pub algorithm: String,
        pub size: u32,
        pub rotation_policy: String,
    }

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct IssuerRef {
        pub name: String,
        pub kind: String,
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
        ("cert-manager.io/v1", "Issuer") => round_trip::<cert_manager::Issuer>(obj),
        ("cert-manager.io/v1", "Certificate") => round_trip::<cert_manager::Certificate>(obj),
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
/// kubeadm patch, not this crate). Patches of the overlays and components are among them.
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
                && path.file_name().is_some_and(|n| n != "kube-controller-manager.patch.yaml")
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
    for name in stacks() {
        failures.extend(check_round_trips(&name, &Stack::new(&name).build()));
    }
    assert!(failures.is_empty(), "fields lost or types unknown:\n{}", failures.join("\n"));
}

/// The kinds and names each kustomization builds.
fn objects(name: &str) -> BTreeSet<String> {
    Stack::new(name).build().iter().map(describe).collect()
}

#[test]
fn kustomize_builds_every_overlay_and_component_with_what_it_is_for() {
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
    let etcd = objects("base+etcd");
    assert!(etcd.contains("StatefulSet/etcd") && etcd.contains("NetworkPolicy/etcd"), "{etcd:?}");
    assert!(!etcd.iter().any(|o| o.starts_with("Role")), "the etcd store needs no Role: {etcd:?}");
    let monitoring = objects("base+monitoring");
    for expected in [
        "ServiceMonitor/fleet-coordinator",
        "ServiceMonitor/fleet-worker",
        "PrometheusRule/batchfleet",
        "ConfigMap/batchfleet-dashboard",
    ] {
        assert!(monitoring.contains(expected), "monitoring lacks {expected}");
    }
    assert!(objects("base+hpa-example").contains("HorizontalPodAutoscaler/fleet-worker"));
    let tls = objects("base+tls");
    for expected in
        ["Issuer/batchfleet-selfsigned", "Issuer/batchfleet-ca", "Certificate/fleet-coordinator-tls"]
    {
        assert!(tls.contains(expected), "tls lacks {expected}");
    }
    // Components stack: every component on an overlay gives what each gives alone.
    let stacked = objects("replace-kcm+etcd+hpa-example+monitoring+tls");
    for component in ["etcd", "hpa-example", "monitoring", "tls"] {
        let added: BTreeSet<String> =
            objects(&format!("base+{component}")).difference(&base).cloned().collect();
        assert!(!added.is_empty(), "{component} adds nothing");
        let missing: Vec<&String> = added.difference(&stacked).collect();
        assert!(missing.is_empty(), "stacked, {component} lacks {missing:?}");
    }
    // Every object of every build lands in the fleet's namespace, or is cluster-scoped.
    for name in stacks() {
        for obj in Stack::new(&name).build() {
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

/// The coordinator container's args of what `name` builds.
fn coordinator_args(name: &str) -> Vec<String> {
    let built = Stack::new(name).build();
    let deployment =
        built.iter().find(|o| describe(o) == "Deployment/fleet-coordinator").expect("coordinator");
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].as_array().cloned();
    args.unwrap_or_default().iter().filter_map(|a| a.as_str().map(String::from)).collect()
}

/// The worker container's args and env of what `name` builds.
fn worker_settings(name: &str) -> (Vec<String>, Vec<(String, String)>) {
    let built = Stack::new(name).build();
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
    assert!(coordinator_args("beside-kcm").contains(&"--controllers=-podgc".to_string()));
    assert!(coordinator_args("replace-kcm").contains(&"--controllers=podgc".to_string()));
    let beside = objects("beside-kcm");
    assert!(!beside.contains("ClusterRole/batchfleet:fleet-coordinator"), "no PodGC, no cluster-wide rules");
    let (_, env) = worker_settings("base+etcd");
    assert!(env.iter().any(|(k, v)| k == "FLEET_STORE" && v == "etcd"), "{env:?}");
}

#[test]
fn every_container_runs_non_root_on_a_read_only_root_with_requests_and_a_memory_limit() {
    for name in stacks() {
        for obj in Stack::new(&name).build() {
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
    let built = Stack::new("base").build();
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

/// A container's `$(NAME)` references expand only to variables of its env, and in the env only
/// to one defined earlier in the list (Kubernetes leaves any other reference as written): the
/// `tls` component's per-pod paths depend on it, and a patch reorders env.
#[test]
fn every_variable_reference_names_a_variable_defined_before_it() {
    fn references(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find("$(") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
        out
    }
    let mut failures = Vec::new();
    let mut checked = 0;
    for name in stacks() {
        for obj in Stack::new(&name).build() {
            let Some(pod) = obj["spec"]["template"]["spec"].as_object() else { continue };
            for c in pod["containers"].as_array().expect("containers") {
                let what = format!("{name}: {} container {}", describe(&obj), c["name"]);
                let mut defined: Vec<String> = Vec::new();
                for e in c["env"].as_array().into_iter().flatten() {
                    for r in references(e["value"].as_str().unwrap_or_default()) {
                        checked += 1;
                        if !defined.contains(&r) {
                            failures
                                .push(format!("{what}: env {} uses $({r}) before it is defined", e["name"]));
                        }
                    }
                    defined.push(e["name"].as_str().unwrap_or_default().to_string());
                }
                let command_line = c["command"].as_array().into_iter().chain(c["args"].as_array()).flatten();
                for a in command_line {
                    for r in references(a.as_str().unwrap_or_default()) {
                        checked += 1;
                        if !defined.contains(&r) {
                            failures.push(format!("{what}: {a} uses $({r}), which its env does not define"));
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 0, "the tls component and etcd use references");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The `tls` component: a CA of the fleet's own; the coordinators' certificate with the names
/// workers and fleetctl verify; one certificate per worker ordinal, Common Name = the pod's
/// name = its worker id, each pod reading its own; no shared worker identity in the admin
/// policy; a certificate for each admin identity the policy names; the coordinator on TLS.
#[test]
fn the_tls_component_gives_each_worker_its_own_certificate() {
    for name in ["base+tls", "replace-kcm+etcd+hpa-example+monitoring+tls"] {
        let built = Stack::new(name).build();
        let find = |what: &str| {
            built.iter().find(|o| describe(o) == what).unwrap_or_else(|| panic!("{name}: no {what}")).clone()
        };
        let certificates: Vec<&Value> = built.iter().filter(|o| o["kind"] == "Certificate").collect();
        let issued_by = |c: &Value| c["spec"]["issuerRef"]["name"].as_str().unwrap_or_default().to_string();
        let ca = find("Certificate/batchfleet-ca");
        assert_eq!(ca["spec"]["isCA"], true, "{name}");
        assert_eq!(find("Issuer/batchfleet-ca")["spec"]["ca"]["secretName"], ca["spec"]["secretName"]);
        for c in certificates.iter().filter(|c| c["metadata"]["name"] != "batchfleet-ca") {
            assert_eq!(issued_by(c), "batchfleet-ca", "{name}: {}", describe(c));
        }

        // The coordinators: the Secret they mount, the names the workers verify.
        let coordinator = find("Certificate/fleet-coordinator-tls");
        let deployment = find("Deployment/fleet-coordinator");
        let pod = &deployment["spec"]["template"]["spec"];
        let volume =
            pod["volumes"].as_array().expect("volumes").iter().find(|v| v["name"] == "tls").expect("tls");
        assert_eq!(volume["secret"]["secretName"], coordinator["spec"]["secretName"], "{name}");
        let dns: Vec<&str> = coordinator["spec"]["dnsNames"]
            .as_array()
            .expect("dnsNames")
            .iter()
            .filter_map(|d| d.as_str())
            .collect();
        assert_eq!(dns, ["fleet-coordinator", "fleet-coordinator.batchfleet.svc"], "{name}");
        let (worker_args, worker_env) = worker_settings(name);
        assert!(worker_args.contains(&"--tls-server-name=fleet-coordinator".to_string()), "{worker_args:?}");
        let args = coordinator_args(name);
        for flag in ["--tls-cert=", "--tls-key=", "--tls-ca=", "--admin-policy="] {
            assert!(
                args.iter().any(|a| a.starts_with(flag)),
                "{name}: the coordinator lacks {flag}: {args:?}"
            );
        }
        assert!(!args.iter().chain(&worker_args).any(|a| a.starts_with("--insecure")), "{name}");

        // The workers: one certificate per ordinal, each in the pod's own directory.
        let sts = find("StatefulSet/fleet-worker");
        let replicas = sts["spec"]["replicas"].as_u64().expect("replicas");
        let pod = &sts["spec"]["template"]["spec"];
        let volume =
            pod["volumes"].as_array().expect("volumes").iter().find(|v| v["name"] == "tls").expect("tls");
        assert!(volume.get("secret").is_none(), "{name}: the shared Secret is gone: {volume}");
        let sources = volume["projected"]["sources"].as_array().expect("a projected volume");
        for ordinal in 0..replicas {
            let pod_name = format!("fleet-worker-{ordinal}");
            let cert = certificates
                .iter()
                .find(|c| c["spec"]["commonName"] == pod_name.as_str())
                .unwrap_or_else(|| panic!("{name}: no certificate with Common Name {pod_name}"));
            assert_eq!(cert["spec"]["usages"], serde_json::json!(["client auth", "digital signature"]));
            let source = sources
                .iter()
                .find(|s| s["secret"]["name"] == cert["spec"]["secretName"])
                .unwrap_or_else(|| panic!("{name}: {pod_name}'s Secret is not mounted"));
            let paths: BTreeSet<&str> = source["secret"]["items"]
                .as_array()
                .expect("items")
                .iter()
                .filter_map(|i| i["path"].as_str())
                .collect();
            let expected: BTreeSet<String> =
                ["tls.crt", "tls.key", "ca.crt"].iter().map(|f| format!("{pod_name}/{f}")).collect();
            assert_eq!(paths, expected.iter().map(String::as_str).collect(), "{name}");
        }
        assert_eq!(sources.len() as u64, replicas, "{name}: a Secret per ordinal, no more");
        let worker_certs = certificates
            .iter()
            .filter(|c| c["metadata"]["name"].as_str().is_some_and(|n| n.starts_with("fleet-worker-")))
            .count();
        assert_eq!(worker_certs as u64, replicas, "{name}: a Certificate per ordinal");
        for (var, file) in
            [("FLEET_TLS_CERT", "tls.crt"), ("FLEET_TLS_KEY", "tls.key"), ("FLEET_TLS_CA", "ca.crt")]
        {
            let value = format!("/etc/batchfleet/tls/$(FLEET_WORKER_ID)/{file}");
            assert!(
                worker_env.contains(&(var.to_string(), value.clone())),
                "{name}: {var}={value}: {worker_env:?}"
            );
        }

        // The admin policy: no shared worker identity; a certificate for each admin identity.
        let policy = find("ConfigMap/fleet-admin-policy");
        let policy: Value =
            documents(policy["data"]["admin-policy.yaml"].as_str().expect("the policy")).remove(0);
        assert_eq!(policy["workers"], serde_json::json!([]), "{name}: {policy}");
        for entry in policy["admin"].as_array().expect("admin entries") {
            let identity = entry["identity"].as_str().expect("identity");
            let cert = certificates.iter().find(|c| c["spec"]["commonName"] == identity);
            let cert = cert.unwrap_or_else(|| panic!("{name}: no certificate for {identity}"));
            assert_eq!(cert["spec"]["usages"], serde_json::json!(["client auth", "digital signature"]));
        }
    }
}

/// BatchfleetMemoryNearLimit's thresholds are 90% of the memory limits the base sets.
#[test]
fn the_memory_alert_follows_the_memory_limits() {
    let rules = std::fs::read_to_string(deploy_dir().join("components/monitoring/prometheusrule.yaml"))
        .expect("rules");
    let rules = documents(&rules).remove(0);
    let expr = rules["spec"]["groups"][0]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .find(|r| r["alert"] == "BatchfleetMemoryNearLimit")
        .and_then(|r| r["expr"].as_str())
        .expect("BatchfleetMemoryNearLimit")
        .to_string();
    let built = Stack::new("base").build();
    for (job, workload) in [
        ("fleet-worker", "StatefulSet/fleet-worker"),
        ("fleet-coordinator-metrics", "Deployment/fleet-coordinator"),
    ] {
        let obj = built.iter().find(|o| describe(o) == workload).expect("the workload");
        let limit = obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
            .as_str()
            .expect("a memory limit");
        let bytes: u64 = match limit.strip_suffix("Gi") {
            Some(n) => n.parse::<u64>().expect("Gi") << 30,
            None => limit.strip_suffix("Mi").expect("Mi or Gi").parse::<u64>().expect("Mi") << 20,
        };
        let term = format!("process_resident_memory_bytes{{job=\"{job}\"}} > 0.9 * {bytes}");
        assert!(expr.contains(&term), "the alert should have {term} for {workload}'s limit {limit}: {expr}");
    }
}

/// The plaintext, unauthenticated metrics ports (docs/security.md#metrics-and-health-endpoints)
/// admit only Prometheus's pods: every ingress rule that opens one names them in each `from`.
#[test]
fn the_metrics_ports_admit_only_prometheus() {
    let prometheus = serde_json::json!({"app.kubernetes.io/name": "prometheus"});
    let mut checked = BTreeSet::new();
    for name in stacks() {
        for policy in Stack::new(&name).build().iter().filter(|o| o["kind"] == "NetworkPolicy") {
            let what = format!("{name}: {}", describe(policy));
            for rule in policy["spec"]["ingress"].as_array().expect("ingress rules") {
                let ports: Vec<u64> = rule["ports"]
                    .as_array()
                    .expect("ports")
                    .iter()
                    .filter_map(|p| p["port"].as_u64())
                    .collect();
                let metrics: Vec<u64> =
                    ports.into_iter().filter(|p| [9400, 8080, 2381].contains(p)).collect();
                if metrics.is_empty() {
                    continue;
                }
                let from =
                    rule["from"].as_array().unwrap_or_else(|| panic!("{what}: {metrics:?} open to all"));
                assert!(!from.is_empty(), "{what}: {metrics:?} open to all");
                for peer in from {
                    assert_eq!(
                        peer["podSelector"]["matchLabels"], prometheus,
                        "{what}: {metrics:?} from {peer}"
                    );
                }
                checked.extend(metrics);
            }
        }
    }
    assert_eq!(checked, BTreeSet::from([2381, 8080, 9400]), "the metrics ports of the fleet and etcd");
}
