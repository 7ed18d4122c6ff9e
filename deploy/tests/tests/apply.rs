//! `kubectl apply -k` of the base and of every overlay against a sim cluster the test starts,
//! then `kubectl apply -k --dry-run=server` and `kubectl diff -k`, which must find nothing to
//! change: the server keeps what the manifests say (no field it drops or defaults differently
//! on every apply). (The sim serves every kind deploy/ uses, as kube-apiserver does:
//! NetworkPolicy and HorizontalPodAutoscaler among its built-in kinds, and CRDs it marks
//! Established.) The monitoring overlay's Prometheus Operator kinds are CustomResources: as
//! on a real cluster, their CRDs are applied first.

use batchfleet_deploy_tests::{Sim, kubectl_ok, kustomization, kustomizations, run_kubectl};
use batchfleet_sim::SimConfig;
use batchfleet_sim::testing::wait_until;
use std::time::Duration;

async fn applies_and_stays_unchanged(name: &str) {
    let sim = Sim::start(SimConfig { nodes: 1, kubelet: false, ..SimConfig::default() }).await;
    let kubeconfig = sim.kubeconfig();
    let dir = kustomization(name).to_string_lossy().into_owned();
    if name == "monitoring" {
        let crds =
            batchfleet_deploy_tests::root().join("deploy/tests/fixtures/prometheus-operator-crds.yaml");
        kubectl_ok(Some(&kubeconfig), &["apply", "-f", &crds.to_string_lossy()]);
        let crds = ["crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com"];
        for crd in crds {
            kubectl_ok(Some(&kubeconfig), &["wait", "--for=condition=Established", "--timeout=30s", crd]);
        }
        // Discovery serves the new group once the CRDs are established.
        wait_until("monitoring.coreos.com in discovery", Duration::from_secs(30), || async {
            let out = run_kubectl(Some(&kubeconfig), &["api-resources", "--api-group=monitoring.coreos.com"]);
            String::from_utf8_lossy(&out.stdout).contains("PrometheusRule").then_some(())
        })
        .await;
    }
    let applied = kubectl_ok(Some(&kubeconfig), &["apply", "-k", &dir]);
    let lines: Vec<&str> = applied.lines().collect();
    assert!(
        lines.iter().all(|l| l.ends_with(" created")),
        "{name}: a first apply creates everything:\n{applied}"
    );
    let expected = batchfleet_deploy_tests::build(&kustomization(name)).len();
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

#[test]
fn every_kustomization_has_an_apply_test() {
    let names: Vec<String> = kustomizations().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        ["base", "beside-kcm", "etcd", "hpa-example", "monitoring", "replace-kcm"],
        "add a test below"
    );
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
async fn etcd() {
    applies_and_stays_unchanged("etcd").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpa_example() {
    applies_and_stays_unchanged("hpa-example").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitoring() {
    applies_and_stays_unchanged("monitoring").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_kcm() {
    applies_and_stays_unchanged("replace-kcm").await;
}
