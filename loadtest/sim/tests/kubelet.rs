//! The simulated kubelet and the everyday commands around it, through the real kubectl 1.37 and
//! kube-rs: crash-loop back-off, pod events, `kubectl logs`, the clear refusal of exec, namespace
//! defaults, qosClass, and error bodies with details.

mod common;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

fn pod(name: &str, annotations: serde_json::Value, restart_policy: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"restartPolicy": restart_policy, "containers": [{"name": "main", "image": "busybox"}]}
    }))
    .expect("pod")
}

async fn running(api: &Api<Pod>, name: &str) -> Pod {
    common::wait_until(&format!("pod {name} Running"), Duration::from_secs(20), || async {
        let p = api.get(name).await.ok()?;
        (p.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(p)
    })
    .await
}

/// `kubectl debug` reads `details` of the 404 for the ephemeralcontainers subresource (it used
/// to dereference none and panic) and says ephemeral containers are unavailable.
#[tokio::test]
async fn kubectl_debug_reports_ephemeral_containers_unavailable() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    api.create(&PostParams::default(), &pod("target", json!({"sim.batchfleet.io/run": "forever"}), "Never"))
        .await
        .unwrap();
    running(&api, "target").await;
    let out = k.run(&["debug", "target", "--image=busybox"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!stderr.contains("panic"), "{stderr}");
    assert!(stderr.contains("ephemeral containers are disabled for this cluster"), "{stderr}");
    // A missing pod is a NotFound with details naming it.
    let out = k.run(&["debug", "nosuch", "--image=busybox"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(r#"pods "nosuch" not found"#), "{stderr}");
}

/// A sim whose restart back-off is scaled down (upstream's 10 s → 5 min becomes 500 ms →
/// 2 s), so a crash loop shows its growing waits within seconds.
async fn crash_loop_sim() -> batchfleet_sim::SimCluster {
    common::start(batchfleet_sim::SimConfig {
        nodes: 1,
        bookmark_interval: Duration::from_secs(1),
        container_restart_backoff: batchfleet_sim::cluster::backoff::BackoffConfig {
            initial: Duration::from_millis(500),
            max: Duration::from_millis(2000),
        },
        ..Default::default()
    })
    .await
}

fn restart_count(p: &Pod) -> i32 {
    p.status.as_ref().and_then(|s| s.container_statuses.as_ref()).map_or(0, |cs| cs[0].restart_count)
}

fn waiting(p: &Pod) -> Option<(String, String)> {
    let cs = p.status.as_ref()?.container_statuses.as_ref()?.first()?;
    let w = cs.state.as_ref()?.waiting.as_ref()?;
    Some((w.reason.clone()?, w.message.clone()?))
}

/// A crash-looping OnFailure pod: the first restart is immediate, later ones wait 500 ms, 1 s,
/// 2 s, 2 s (the scaled 10 s, 20 s, 40 s… up to 5 min), showing CrashLoopBackOff with the
/// kubelet's message meanwhile, and a BackOff warning event; kubectl shows the status.
#[tokio::test]
async fn a_crash_looping_pod_backs_off_with_growing_waits() {
    let sim = crash_loop_sim().await;
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    let ann = json!({"sim.batchfleet.io/run": "50ms", "sim.batchfleet.io/exit-code": "1"});
    let start = tokio::time::Instant::now();
    let created = api.create(&PostParams::default(), &pod("crash", ann, "OnFailure")).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();

    // When each restart count was first seen, and every waiting message.
    let mut seen: Vec<tokio::time::Instant> = Vec::new();
    let mut messages: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while seen.len() < 5 {
        assert!(tokio::time::Instant::now() < deadline, "five restarts within 30s: {seen:?} {messages:?}");
        let p = api.get("crash").await.unwrap();
        let count = restart_count(&p) as usize;
        while seen.len() < count {
            seen.push(tokio::time::Instant::now());
        }
        if let Some((reason, message)) = waiting(&p) {
            assert_eq!(reason, "CrashLoopBackOff");
            if !messages.contains(&message) {
                messages.push(message);
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for backoff in ["500ms", "1s", "2s"] {
        let want = format!("back-off {backoff} restarting failed container=main pod=crash_default({uid})");
        assert!(messages.contains(&want), "{want} not in {messages:?}");
    }
    // Restart n+1 comes a run (50 ms) plus the back-off after restart n.
    assert!(seen[0] - start < Duration::from_millis(450), "the first restart is immediate");
    let gaps: Vec<Duration> = seen.windows(2).map(|w| w[1] - w[0]).collect();
    for (gap, backoff) in gaps.iter().zip([500, 1000, 2000, 2000]) {
        assert!(*gap >= Duration::from_millis(backoff), "{gaps:?}");
        assert!(*gap < Duration::from_millis(backoff + 450), "{gaps:?}");
    }

    let events = common::client(&sim);
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(events, "default");
    let backoff = common::wait_until("a BackOff event", Duration::from_secs(10), || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|e| e.reason.as_deref() == Some("BackOff"))
    })
    .await;
    assert_eq!(backoff.type_.as_deref(), Some("Warning"));
    assert_eq!(
        backoff.message.as_deref(),
        Some(format!("Back-off restarting failed container main in pod crash_default({uid})").as_str())
    );
    assert_eq!(backoff.involved_object.field_path.as_deref(), Some("spec.containers{main}"));
    assert_eq!(backoff.source.as_ref().and_then(|s| s.component.as_deref()), Some("kubelet"));
    assert_eq!(backoff.reporting_component.as_deref(), Some("kubelet"));
    assert_eq!(backoff.reporting_instance.as_deref(), Some("sim-node-0"));
    assert!(backoff.count.unwrap_or(0) >= 2, "repeats fold into one event: {backoff:?}");

    let k = common::Kubectl::for_sim(&sim);
    let table =
        common::wait_until("kubectl get to show CrashLoopBackOff", Duration::from_secs(10), || async {
            let out = k.ok(&["get", "pod", "crash"]).await;
            out.contains("CrashLoopBackOff").then_some(out)
        })
        .await;
    assert!(table.contains("crash"), "{table}");
}

/// The kubelet's events of a pod's life, as `kubectl describe pod` and `kubectl events` show
/// them; deleting the pod records Killing.
#[tokio::test]
async fn kubectl_describe_and_events_show_the_kubelet_events() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let manifest = r#"apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations:
    sim.batchfleet.io/run: forever
spec:
  containers:
  - name: main
    image: busybox
  - name: side
    image: registry.k8s.io/pause:3.10
    imagePullPolicy: Never
"#;
    k.ok(&["apply", "-f", &k.write("pod.yaml", manifest)]).await;
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    let pod = running(&api, "web").await;
    let node = pod.spec.unwrap().node_name.unwrap();

    let describe = common::wait_until("describe to list Started", Duration::from_secs(10), || async {
        let out = k.ok(&["describe", "pod", "web"]).await;
        (out.matches("Started").count() >= 2).then_some(out)
    })
    .await;
    for line in [
        r#"Pulling image "busybox""#,
        r#"Successfully pulled image "busybox" in 0s (0s including waiting). Image size: 0 bytes."#,
        r#"Container image "registry.k8s.io/pause:3.10" already present on machine"#,
        "Created container: main",
        "Started container main",
        "Created container: side",
        "Started container side",
    ] {
        assert!(describe.contains(line), "{line:?} missing from:\n{describe}");
    }
    assert!(describe.contains("kubelet"), "{describe}");
    let qos = describe.lines().find(|l| l.starts_with("QoS Class:")).unwrap_or("");
    assert!(qos.ends_with("BestEffort"), "{describe}");

    let events = k.ok(&["events", "--for", "pod/web"]).await;
    for reason in ["Pulling", "Pulled", "Created", "Started"] {
        assert!(events.contains(reason), "{reason} missing from:\n{events}");
    }
    assert!(events.contains("Started container side"), "{events}");

    k.ok(&["delete", "pod", "web", "--wait=false"]).await;
    let kills = common::wait_until("Killing events", Duration::from_secs(10), || async {
        let out = k.ok(&["get", "events", "--field-selector", "reason=Killing", "-o", "json"]).await;
        let v: serde_json::Value = serde_json::from_str(&out).ok()?;
        let items = v["items"].as_array()?.clone();
        (items.len() == 2).then_some(items)
    })
    .await;
    let mut messages: Vec<&str> = kills.iter().filter_map(|e| e["message"].as_str()).collect();
    messages.sort();
    assert_eq!(messages, ["Stopping container main", "Stopping container side"]);
    assert_eq!(kills[0]["source"], json!({"component": "kubelet", "host": node}));
}

/// qosClass as the apiserver computes it at create, kept by the kubelet once the pod runs.
#[tokio::test]
async fn qos_class_for_the_three_classes() {
    let sim = common::sim().await;
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    let cases = [
        ("guaranteed", json!({"limits": {"cpu": "500m", "memory": "64Mi"}}), "Guaranteed"),
        ("burstable", json!({"requests": {"cpu": "100m"}}), "Burstable"),
        ("besteffort", json!({}), "BestEffort"),
    ];
    for (name, resources, _) in &cases {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {"sim.batchfleet.io/run": "forever"}},
            "spec": {"containers": [{"name": "main", "image": "busybox", "resources": resources}]}
        }))
        .unwrap();
        let created = api.create(&PostParams::default(), &p).await.unwrap();
        assert!(created.status.and_then(|s| s.qos_class).is_some(), "{name}: set at create");
    }
    for (name, _, want) in cases {
        let p = running(&api, name).await;
        assert_eq!(p.status.and_then(|s| s.qos_class).as_deref(), Some(want), "{name}");
    }
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `kubectl logs` reads the simulated log: a finished pod's lines, `--timestamps --tail`,
/// `-f` that ends when the container exits, `job/NAME`, `--previous` of a restarted container,
/// and the log REST's and kubelet's errors.
#[tokio::test]
async fn kubectl_logs_reads_the_simulated_log() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    let ann = json!({"sim.batchfleet.io/run": "100ms", "sim.batchfleet.io/exit-code": "3"});
    api.create(&PostParams::default(), &pod("done", ann, "Never")).await.unwrap();
    common::wait_until("pod done Failed", Duration::from_secs(20), || async {
        let p = api.get("done").await.ok()?;
        (p.status?.phase.as_deref() == Some("Failed")).then_some(())
    })
    .await;
    let node = api.get("done").await.unwrap().spec.unwrap().node_name.unwrap();
    let log = k.ok(&["logs", "done"]).await;
    assert_eq!(
        log,
        format!(
            "sim: container main (image busybox) started on {node}\nsim: scripted to run 100ms and exit with code 3\nsim: exiting with code 3\n"
        )
    );
    let last = k.ok(&["logs", "done", "--timestamps", "--tail=1"]).await;
    let (stamp, text) = last.trim_end().split_once(' ').unwrap();
    assert_eq!(text, "sim: exiting with code 3");
    assert!(stamp.ends_with('Z') && stamp.len() == "2026-01-02T03:04:05.000000000Z".len(), "{stamp}");
    let out = k.run(&["logs", "done", "-c", "nope"]).await;
    assert!(stderr(&out).contains("container nope is not valid for pod done"), "{}", stderr(&out));
    let out = k.run(&["logs", "done", "--previous"]).await;
    assert!(
        stderr(&out).contains(r#"previous terminated container "main" in pod "done" not found"#),
        "{}",
        stderr(&out)
    );

    // -f streams and ends by itself once the container exits.
    api.create(&PostParams::default(), &pod("slow", json!({"sim.batchfleet.io/run": "1500ms"}), "Never"))
        .await
        .unwrap();
    running(&api, "slow").await;
    let started = tokio::time::Instant::now();
    let followed = k.ok(&["logs", "-f", "slow"]).await;
    assert!(followed.starts_with("sim: container main (image busybox) started on"), "{followed}");
    assert!(followed.ends_with("sim: exiting with code 0\n"), "{followed}");
    assert!(started.elapsed() < Duration::from_secs(20));

    // job/NAME: kubectl finds the Job's pod by its selector.
    let job = r#"apiVersion: batch/v1
kind: Job
metadata:
  name: batch
spec:
  selector:
    matchLabels:
      app: batch
  manualSelector: true
  template:
    metadata:
      labels:
        app: batch
      annotations:
        sim.batchfleet.io/run: forever
    spec:
      restartPolicy: Never
      containers:
      - name: work
        image: busybox
"#;
    k.ok(&["create", "-f", &k.write("job.yaml", job)]).await;
    // No Job controller runs in the sim's own tests: create the pod it would.
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "batch-x1", "labels": {"app": "batch"}, "annotations": {"sim.batchfleet.io/run": "forever"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "work", "image": "busybox"}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &p).await.unwrap();
    running(&api, "batch-x1").await;
    let log = k.ok(&["logs", "job/batch"]).await;
    assert!(log.starts_with("sim: container work (image busybox) started on"), "{log}");
    assert!(log.contains("sim: scripted to run until stopped"), "{log}");
}

/// `kubectl logs --previous` of a container that restarted reads its last run.
#[tokio::test]
async fn kubectl_logs_previous_reads_the_last_run() {
    let sim = crash_loop_sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    let ann = json!({"sim.batchfleet.io/run": "50ms", "sim.batchfleet.io/exit-code": "7"});
    api.create(&PostParams::default(), &pod("loop", ann, "Always")).await.unwrap();
    common::wait_until("a restart", Duration::from_secs(20), || async {
        let p = api.get("loop").await.ok()?;
        (restart_count(&p) >= 1).then_some(())
    })
    .await;
    let previous = k.ok(&["logs", "loop", "--previous"]).await;
    assert!(previous.ends_with("sim: exiting with code 7\n"), "{previous}");
}

/// exec, attach and port-forward say plainly that the sim does not run processes.
#[tokio::test]
async fn exec_attach_and_port_forward_are_refused_clearly() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let api: Api<Pod> = Api::namespaced(common::client(&sim), "default");
    api.create(&PostParams::default(), &pod("shell", json!({"sim.batchfleet.io/run": "forever"}), "Never"))
        .await
        .unwrap();
    running(&api, "shell").await;
    for (args, sub) in [
        (vec!["exec", "shell", "--", "ls"], "exec"),
        (vec!["attach", "shell"], "attach"),
        (vec!["port-forward", "pod/shell", "18080:80"], "portforward"),
    ] {
        let out = k.run(&args).await;
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(&format!("pods/{sub} is not supported by the sim cluster")), "{args:?}: {err}");
    }
}

/// Every namespace carries the `kubernetes.io/metadata.name` label (kept whatever a write says),
/// a `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap, recreated when deleted.
#[tokio::test]
async fn namespaces_get_their_label_service_account_and_root_ca() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let label = |ns: &str| {
        let ns = ns.to_string();
        let k = &k;
        async move {
            let out = k.ok(&["get", "namespace", &ns, "-o", "json"]).await;
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            v["metadata"]["labels"]["kubernetes.io/metadata.name"].as_str().map(str::to_string)
        }
    };
    for bootstrapped in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert_eq!(label(bootstrapped).await.as_deref(), Some(bootstrapped));
        let sa = k.ok(&["get", "serviceaccount", "default", "-n", bootstrapped, "-o", "name"]).await;
        assert_eq!(sa.trim(), "serviceaccount/default");
    }
    k.ok(&["apply", "-f", &k.write("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n")])
        .await;
    assert_eq!(label("demo").await.as_deref(), Some("demo"));
    // Removing or changing the label puts it back.
    k.ok(&["label", "namespace", "demo", "kubernetes.io/metadata.name-"]).await;
    assert_eq!(label("demo").await.as_deref(), Some("demo"));

    let sa = common::wait_until("the default ServiceAccount", Duration::from_secs(10), || async {
        let out = k.run(&["get", "serviceaccount", "default", "-n", "demo", "-o", "name"]).await;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    })
    .await;
    assert_eq!(sa.trim(), "serviceaccount/default");
    let cm = common::wait_until("the root CA ConfigMap", Duration::from_secs(10), || async {
        let out = k.run(&["get", "configmap", "kube-root-ca.crt", "-n", "demo", "-o", "json"]).await;
        out.status.success().then(|| serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap())
    })
    .await;
    assert!(cm["data"]["ca.crt"].as_str().unwrap().starts_with("-----BEGIN CERTIFICATE-----\n"), "{cm}");
    assert!(
        cm["metadata"]["annotations"]["kubernetes.io/description"]
            .as_str()
            .unwrap()
            .starts_with("Contains a CA bundle that can be used to verify the kube-apiserver"),
        "{cm}"
    );

    let old_uid = sa_uid(&k, "demo").await;
    k.ok(&["delete", "serviceaccount", "default", "-n", "demo"]).await;
    common::wait_until("the default ServiceAccount again", Duration::from_secs(10), || async {
        let out = k
            .run(&["get", "serviceaccount", "default", "-n", "demo", "-o", "jsonpath={.metadata.uid}"])
            .await;
        let uid = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success() && !uid.is_empty() && uid != old_uid).then_some(())
    })
    .await;
}

async fn sa_uid(k: &common::Kubectl, ns: &str) -> String {
    k.ok(&["get", "serviceaccount", "default", "-n", ns, "-o", "jsonpath={.metadata.uid}"]).await
}

/// A terminating namespace reports what remains as the namespace deleter's conditions, and
/// goes once the last finalizer is released.
#[tokio::test]
async fn a_terminating_namespace_reports_remaining_content_and_finalizers() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    k.ok(&[
        "apply",
        "-f",
        &k.write("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: going\n"),
    ])
    .await;
    let held = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: going\n  finalizers:\n  - example.com/hold\n";
    k.ok(&["apply", "-f", &k.write("cm.yaml", held)]).await;
    k.ok(&["delete", "namespace", "going", "--wait=false"]).await;

    let conditions = common::wait_until("the deleter's conditions", Duration::from_secs(10), || async {
        let out = k.ok(&["get", "namespace", "going", "-o", "json"]).await;
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let conditions = v["status"]["conditions"].as_array()?.clone();
        let remaining = conditions.iter().find(|c| c["type"] == "NamespaceContentRemaining")?;
        (remaining["status"] == "True" && v["status"]["phase"] == "Terminating").then_some(conditions)
    })
    .await;
    let find = |kind: &str| conditions.iter().find(|c| c["type"] == kind).unwrap().clone();
    let content = find("NamespaceContentRemaining");
    assert_eq!(content["reason"], "SomeResourcesRemain");
    assert_eq!(content["message"], "Some resources are remaining: configmaps. has 1 resource instances");
    let finalizers = find("NamespaceFinalizersRemaining");
    assert_eq!(finalizers["reason"], "SomeFinalizerRemain");
    assert_eq!(
        finalizers["message"],
        "Some finalizers are remaining: example.com/hold in 1 resource instances"
    );
    for (kind, reason) in [
        ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered"),
        ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions"),
        ("NamespaceDeletionContentFailure", "ContentDeleted"),
    ] {
        let c = find(kind);
        assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("False"), Some(reason)), "{kind}");
    }
    let describe = k.ok(&["describe", "namespace", "going"]).await;
    assert!(describe.contains("NamespaceContentRemaining"), "{describe}");

    k.ok(&[
        "patch",
        "configmap",
        "held",
        "-n",
        "going",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .await;
    common::wait_until("the namespace to go", Duration::from_secs(10), || async {
        let out = k.run(&["get", "namespace", "going"]).await;
        (!out.status.success()).then_some(())
    })
    .await;
}
