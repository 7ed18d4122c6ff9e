//! `kubectl apply -k` of the base, of each overlay, and of the base with each component (as a
//! kustomization of one's own lists it) against a sim cluster the test starts, then
//! `kubectl apply -k --dry-run=server` and `kubectl diff -k`, which must find nothing to change:
//! the server keeps what the manifests say (no field it drops or defaults differently on every
//! apply). (The sim serves every kind deploy/ uses, as kube-apiserver does: NetworkPolicy and
//! HorizontalPodAutoscaler among its built-in kinds, and CRDs it marks Established.) The
//! Prometheus Operator's and cert-manager's kinds are CustomResources: as on a real cluster,
//! their CRDs are applied first when what is applied uses them.

use std::path::Path;
use std::time::Duration;

use batchfleet_deploy_tests::{Sim, Stack, components, kubectl_ok, kustomizations, root, run_kubectl};
use batchfleet_sim::SimConfig;
use batchfleet_sim::testing::wait_until;
use serde_json::Value;

/// The CRDs of an API group, as a test fixture: the group, the fixture, the CRDs and a kind
/// discovery must list once they are established.
const CRDS: &[(&str, &str, &[&str], &str)] = &[
    (
        "monitoring.coreos.com",
        "deploy/tests/fixtures/prometheus-operator-crds.yaml",
        &["crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com"],
        "PrometheusRule",
    ),
    (
        "cert-manager.io",
        "deploy/tests/fixtures/cert-manager-crds.yaml",
        &["crd/issuers.cert-manager.io", "crd/certificates.cert-manager.io"],
        "Certificate",
    ),
];

/// Installs the CRDs of every custom API group `objects` use; fails on a group with none.
async fn install_crds(kubeconfig: &Path, objects: &[Value]) {
    let builtin = |group: &str| !group.contains('.') || group.ends_with(".k8s.io");
    let groups: std::collections::BTreeSet<&str> = objects
        .iter()
        .filter_map(|o| o["apiVersion"].as_str()?.split_once('/').map(|(g, _)| g))
        .filter(|g| !builtin(g))
        .collect();
    for group in groups {
        let (_, fixture, crds, kind) = CRDS
            .iter()
            .find(|(g, ..)| *g == group)
            .unwrap_or_else(|| panic!("no CRD fixture for the API group {group}: add one to CRDS"));
        kubectl_ok(Some(kubeconfig), &["apply", "-f", &root().join(fixture).to_string_lossy()]);
        for crd in *crds {
            kubectl_ok(Some(kubeconfig), &["wait", "--for=condition=Established", "--timeout=30s", crd]);
        }
        // Discovery serves the new group once the CRDs are established.
        wait_until(&format!("{group} in discovery"), Duration::from_secs(30), || async {
            let out = run_kubectl(Some(kubeconfig), &["api-resources", &format!("--api-group={group}")]);
            String::from_utf8_lossy(&out.stdout).contains(kind).then_some(())
        })
        .await;
    }
}

async fn applies_and_stays_unchanged(name: &str) {
    let sim = Sim::start(SimConfig { nodes: 1, kubelet: false, ..SimConfig::default() }).await;
    let kubeconfig = sim.kubeconfig();
    let stack = Stack::new(name);
    let dir = stack.dir().to_string_lossy().into_owned();
    let built = stack.build();
    install_crds(&kubeconfig, &built).await;
    let applied = kubectl_ok(Some(&kubeconfig), &["apply", "-k", &dir]);
    let lines: Vec<&str> = applied.lines().collect();
    assert!(
        lines.iter().all(|l| l.ends_with(" created")),
        "{name}: a first apply creates everything:\n{applied}"
    );
    let expected = built.len();
    assert_eq!(lines.len(), expected, "{name}: one line per object:\n{applied}");

    let again = kubectl_ok(Some(&kubeconfig), &["apply", "-k", &dir, "--dry-run=server"]);
    // A PodDisruptionBudget's `spec.selector` has patchStrategy `replace`, so kubectl's
    // three-way patch always carries it and kubectl prints "configured" for every PDB, against
    // kube-apiserver too (e.g. Azure/eno#246). `kubectl diff` below compares the objects instead.
    let changed: Vec<&str> = again
        .lines()
        .filter(|l| !l.ends_with(" unchanged (server dry run)"))
        .filter(|l| {
            !(l.starts_with("poddisruptionbudget.policy/") && l.ends_with(" configured (server dry run)"))
        })
        .collect();
    assert!(changed.is_empty(), "{name}: a second apply would change:\n{}", changed.join("\n"));
    assert_eq!(again.lines().count(), expected, "{name}:\n{again}");

    let diff = run_kubectl(Some(&kubeconfig), &["diff", "-k", &dir]);
    assert!(
        diff.status.code() == Some(0),
        "{name}: kubectl diff -k found differences ({}):\n{}\n{}",
        diff.status,
        String::from_utf8_lossy(&diff.stdout),
        String::from_utf8_lossy(&diff.stderr)
    );
}

/// A new overlay or component fails here until it has its test below.
#[test]
fn every_kustomization_and_component_has_an_apply_test() {
    let overlays: Vec<String> = kustomizations().into_iter().map(|(n, _)| n).collect();
    assert_eq!(overlays, ["base", "beside-kcm", "replace-kcm"], "add a test below");
    let components: Vec<String> = components().into_iter().map(|(n, _)| n).collect();
    assert_eq!(components, ["etcd", "hpa-example", "monitoring", "tls"], "add a test below");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base() {
    applies_and_stays_unchanged("base").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_kcm() {
    applies_and_stays_unchanged("beside-kcm").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_kcm() {
    applies_and_stays_unchanged("replace-kcm").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_with_etcd() {
    applies_and_stays_unchanged("base+etcd").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_with_hpa_example() {
    applies_and_stays_unchanged("base+hpa-example").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_with_monitoring() {
    applies_and_stays_unchanged("base+monitoring").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_with_tls() {
    applies_and_stays_unchanged("base+tls").await;
}

/// Every component at once, on the mode most installs use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_kcm_with_every_component() {
    applies_and_stays_unchanged("replace-kcm+etcd+hpa-example+monitoring+tls").await;
}
