//! The real kubectl 1.37 binary against the sim: discovery, create, apply (twice), get as a table,
//! JSON, YAML and -w, wait, delete with each cascade, describe.

mod common;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const JOB: &str = r#"apiVersion: batch/v1
kind: Job
metadata:
  name: hello
  labels:
    app: hello
spec:
  completions: 2
  template:
    metadata:
      annotations:
        sim.batchfleet.io/run: 100ms
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        env:
        - name: A
          value: "1"
"#;

#[tokio::test]
async fn create_get_as_table_json_and_yaml() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let f = k.write("job.yaml", JOB);
    let out = k.ok(&["create", "-f", &f]).await;
    assert!(out.contains("job.batch/hello created"), "{out}");

    let table = k.ok(&["get", "jobs"]).await;
    let header = table.lines().next().unwrap_or("");
    for column in ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"] {
        assert!(header.contains(column), "{table}");
    }
    assert!(table.contains("hello"), "{table}");

    let json_out: Value = serde_json::from_str(&k.ok(&["get", "job", "hello", "-o", "json"]).await).unwrap();
    assert_eq!(json_out["spec"]["completions"], 2);
    assert_eq!(json_out["spec"]["backoffLimit"], 6);
    let yaml = k.ok(&["get", "job", "hello", "-o", "yaml"]).await;
    assert!(yaml.contains("batch.kubernetes.io/controller-uid"), "{yaml}");

    let nodes = k.ok(&["get", "nodes"]).await;
    assert!(nodes.contains("sim-node-0") && nodes.contains("Ready"), "{nodes}");
    let all_ns = k.ok(&["get", "namespaces"]).await;
    assert!(all_ns.contains("kube-system") && all_ns.contains("Active"), "{all_ns}");
}

#[tokio::test]
async fn apply_twice_with_a_change_merges_strategically() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\n  labels:\n    a: \"1\"\ndata:\n  x: \"1\"\n";
    let f = k.write("cm.yaml", cm);
    assert!(k.ok(&["apply", "-f", &f]).await.contains("configmap/conf created"));
    // Someone else adds a label; apply must keep it (3-way merge).
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    api.patch(
        "conf",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": {"other": "kept"}}})),
    )
    .await
    .unwrap();
    let changed = cm.replace("x: \"1\"", "x: \"2\"\n  z: \"3\"");
    let f = k.write("cm.yaml", &changed);
    assert!(k.ok(&["apply", "-f", &f]).await.contains("configmap/conf configured"));
    let got = api.get("conf").await.unwrap();
    let data = got.data.unwrap();
    assert_eq!((data["x"].as_str(), data["z"].as_str()), ("2", "3"));
    assert_eq!(got.metadata.labels.unwrap()["other"], "kept");
    // Applying the same file again changes nothing.
    assert!(k.ok(&["apply", "-f", &f]).await.contains("configmap/conf unchanged"));

    // A Job with a pod template: kubectl's strategic merge patch of containers/env.
    let jf = k.write("job.yaml", JOB);
    k.ok(&["apply", "-f", &jf]).await;
    let relabelled = JOB.replace("app: hello", "app: hello\n    tier: batch");
    let jf = k.write("job.yaml", &relabelled);
    assert!(k.ok(&["apply", "-f", &jf]).await.contains("job.batch/hello configured"));

    // Server-side apply.
    let f =
        k.write("ssa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"1\"\n");
    assert!(k.ok(&["apply", "--server-side", "-f", &f]).await.contains("serverside-applied"));
}

#[tokio::test]
async fn get_watch_prints_changes() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let mut child = k
        .command(&["get", "configmaps", "-w", "--output-watch-events"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let api: Api<ConfigMap> = Api::namespaced(common::client(&sim), "default");
    // Keep creating until kubectl's watch has shown one of them (it may start after the first).
    let seen = tokio::time::timeout(Duration::from_secs(30), async {
        let mut i = 0;
        loop {
            let cm: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": format!("w{i}")}})).unwrap();
            api.create(&Default::default(), &cm).await.unwrap();
            i += 1;
            match tokio::time::timeout(Duration::from_millis(500), lines.next_line()).await {
                Ok(Ok(Some(line))) if line.contains("ADDED") && line.contains("w") => return line,
                _ => continue,
            }
        }
    })
    .await
    .expect("kubectl get -w printed an ADDED event");
    assert!(seen.contains("ADDED"), "{seen}");
    child.kill().await.unwrap();
}

#[tokio::test]
async fn wait_for_condition_complete() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    let f = k.write("job.yaml", JOB);
    k.ok(&["create", "-f", &f]).await;
    let waiter = k.command(&["wait", "--for=condition=Complete", "job/hello", "--timeout=30s"]).output();
    let waiter = tokio::spawn(waiter);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Stand in for the Job controller: the two-step success the apiserver requires.
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(common::client(&sim), "default");
    let now = "2026-01-01T00:00:00Z";
    let status = json!({"status": {"startTime": now, "succeeded": 2, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastTransitionTime": now, "lastProbeTime": now}
    ]}});
    jobs.patch_status("hello", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let status = json!({"status": {"completionTime": now, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastTransitionTime": now, "lastProbeTime": now},
        {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastTransitionTime": now, "lastProbeTime": now}
    ]}});
    jobs.patch_status("hello", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let out = tokio::time::timeout(Duration::from_secs(40), waiter).await.unwrap().unwrap().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("condition met"));
}

#[tokio::test]
async fn delete_with_each_cascade_and_describe() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let client = common::client(&sim);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (owner, cascade) in [("fg", "foreground"), ("bg", "background"), ("or", "orphan")] {
        let o: ConfigMap = serde_json::from_value(json!({"metadata": {"name": owner}})).unwrap();
        let o = api.create(&Default::default(), &o).await.unwrap();
        let r = kube::Resource::controller_owner_ref(&o, &()).unwrap();
        let dep: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("{owner}-dep"), "ownerReferences": [r]}}),
        )
        .unwrap();
        api.create(&Default::default(), &dep).await.unwrap();
        let out = k.ok(&["delete", "configmap", owner, &format!("--cascade={cascade}")]).await;
        assert!(out.contains(&format!("configmap \"{owner}\" deleted")), "{out}");
        let dep_name = format!("{owner}-dep");
        let api = api.clone();
        if cascade == "orphan" {
            let d = api.get(&dep_name).await.unwrap();
            common::wait_until("the orphan to lose its owner", Duration::from_secs(10), || {
                let api = api.clone();
                let dep_name = dep_name.clone();
                async move {
                    let d = api.get(&dep_name).await.unwrap();
                    d.metadata.owner_references.unwrap_or_default().is_empty().then_some(())
                }
            })
            .await;
            drop(d);
        } else {
            common::wait_until("the dependent collected", Duration::from_secs(10), || {
                let api = api.clone();
                let dep_name = dep_name.clone();
                async move { api.get_opt(&dep_name).await.unwrap().is_none().then_some(()) }
            })
            .await;
        }
    }

    let f = k.write("job.yaml", JOB);
    k.ok(&["create", "-f", &f]).await;
    let described = k.ok(&["describe", "job", "hello"]).await;
    assert!(described.contains("Name:") && described.contains("hello"), "{described}");
    assert!(described.contains("Completions:"), "{described}");
}

#[tokio::test]
async fn custom_resources_and_generic_kinds_apply_and_delete() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    let crd = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    subresources: {status: {}}
"#;
    let f = k.write("crd.yaml", crd);
    assert!(k.ok(&["apply", "-f", &f]).await.contains("created"));
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n";
    let f = k.write("w.yaml", widget);
    assert!(k.ok(&["apply", "-f", &f]).await.contains("widget.example.com/w1 created"));
    let f = k.write("w.yaml", &widget.replace("size: 3", "size: 4"));
    assert!(k.ok(&["apply", "-f", &f]).await.contains("configured"));
    let got: Value = serde_json::from_str(&k.ok(&["get", "wd", "w1", "-o", "json"]).await).unwrap();
    assert_eq!(got["spec"]["size"], 4);
    assert!(k.ok(&["get", "widgets"]).await.contains("w1"));

    let deploy = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
"#;
    let f = k.write("d.yaml", deploy);
    assert!(k.ok(&["apply", "-f", &f]).await.contains("deployment.apps/web created"));
    assert!(k.ok(&["delete", "-f", &f]).await.contains("deleted"));
    assert!(k.ok(&["delete", "widget", "w1"]).await.contains("deleted"));
}

#[tokio::test]
async fn kubectl_delete_node_removes_it_from_the_scheduler() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    assert!(k.ok(&["delete", "node", "sim-node-1"]).await.contains("deleted"));
    let nodes = k.ok(&["get", "nodes"]).await;
    assert!(nodes.contains("sim-node-0") && !nodes.contains("sim-node-1"), "{nodes}");
    let pods: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    for i in 0..4 {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("after-{i}")},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let nodes: Vec<String> = common::wait_until("every pod to be bound", Duration::from_secs(10), || async {
        let list = pods.list(&Default::default()).await.unwrap();
        let bound: Vec<String> =
            list.items.iter().filter_map(|p| p.spec.as_ref()?.node_name.clone()).collect();
        (bound.len() == 4).then_some(bound)
    })
    .await;
    assert!(nodes.iter().all(|n| n == "sim-node-0"), "{nodes:?}");
}
