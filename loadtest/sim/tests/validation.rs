//! Pod and metadata validation as clients see it: the 422 Status and its causes through
//! kube-rs, and the real kubectl 1.37 printing upstream's error text for invalid pods, Jobs and
//! names, `--dry-run=server`, pod update rules, and the `Warning:` lines of WarningsOnCreate.

mod common;

use std::process::Output;

use serde_json::{Value, json};

#[tokio::test]
async fn invalid_pod_is_a_422_with_upstream_causes_for_kube_rs() {
    let sim = common::api_only().await;
    let client = common::client(&sim);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "labels": {"a/b/c": "v"}},
        "spec": {"containers": [{"name": "main", "image": ""}]}});
    let (status, _, body) = common::raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/pods",
        Some("application/json"),
        serde_json::to_vec(&pod).unwrap(),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    let s: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(s["reason"], "Invalid");
    assert_eq!(s["details"]["kind"], "Pod");
    assert_eq!(s["details"]["name"], "x");
    let causes = s["details"]["causes"].as_array().cloned().unwrap_or_default();
    let fields: Vec<(&str, &str)> = causes
        .iter()
        .map(|c| (c["reason"].as_str().unwrap_or(""), c["field"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        fields,
        vec![("FieldValueInvalid", "metadata.labels"), ("FieldValueRequired", "spec.containers[0].image")],
        "{body}"
    );
    assert_eq!(
        s["message"],
        "Pod \"x\" is invalid: [metadata.labels: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName'), spec.containers[0].image: Required value]"
    );
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn failed(out: &Output) -> String {
    assert!(!out.status.success(), "kubectl should fail: {}", String::from_utf8_lossy(&out.stdout));
    stderr(out)
}

const BAD_POD: &str = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
 "spec": {"restartPolicy": "Sometimes", "containers": [
   {"name": "main"},
   {"name": "main", "image": "busybox", "imagePullPolicy": "Sometimes",
    "ports": [{"containerPort": 70000}], "env": [{"value": "x"}],
    "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}]}}"#;

#[tokio::test]
async fn invalid_pod_prints_upstream_causes() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let f = k.write("bad-pod.json", BAD_POD);
    let err = failed(&k.run(&["create", "-f", &f]).await);
    assert!(err.contains(r#"The Pod "bad" is invalid: "#), "{err}");
    for cause in [
        "spec.containers[0].image: Required value",
        r#"spec.containers[1].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"#,
        "spec.containers[1].env[0].name: Required value",
        r#"spec.containers[1].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never""#,
        r#"spec.containers[1].resources.requests: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi"#,
        r#"spec.containers[1].name: Duplicate value: "main""#,
        r#"spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never""#,
    ] {
        assert!(err.contains(cause), "missing {cause:?} in {err}");
    }
    let gone = failed(&k.run(&["get", "pod", "bad"]).await);
    assert!(gone.contains(r#"pods "bad" not found"#), "{gone}");

    let f = k.write(
        "nocontainers.json",
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "empty"}, "spec": {}}"#,
    );
    let err = failed(&k.run(&["apply", "-f", &f]).await);
    assert!(err.contains(r#"The Pod "empty" is invalid: spec.containers: Required value"#), "{err}");
}

#[tokio::test]
async fn invalid_names_labels_and_annotations() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let f = k.write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n");
    let err = failed(&k.run(&["apply", "-f", &f]).await);
    assert!(
        err.contains(r#"The ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#),
        "{err}"
    );
    let long = "a".repeat(254);
    let f = k.write("long.yaml", &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {long}\n"));
    let err = failed(&k.run(&["create", "-f", &f]).await);
    assert!(err.contains("must be no more than 253 bytes"), "{err}");
    let f = k.write(
        "labels.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: l\n  labels:\n    -bad: ok\n",
    );
    let err = failed(&k.run(&["create", "-f", &f]).await);
    assert!(err.contains(r#"metadata.labels: Invalid value: "-bad": name part must consist of"#), "{err}");
    let big = "x".repeat(256 * 1024);
    let f = k.write("ann.json", &format!(r#"{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "a", "annotations": {{"big": "{big}"}}}}}}"#));
    let err = failed(&k.run(&["create", "-f", &f]).await);
    assert!(err.contains("metadata.annotations: Too long: may not be more than 262144 bytes"), "{err}");
}

const BAD_JOB: &str = r#"apiVersion: batch/v1
kind: Job
metadata:
  name: bad-job
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
"#;

const GOOD_JOB: &str = r#"apiVersion: batch/v1
kind: Job
metadata:
  name: good-job
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
"#;

#[tokio::test]
async fn jobs_and_cronjobs_validate_their_pod_template_and_dry_run_stores_nothing() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let f = k.write("bad-job.yaml", BAD_JOB);
    let err = failed(&k.run(&["apply", "-f", &f]).await);
    assert!(
        err.contains(
            r#"The Job "bad-job" is invalid: spec.template.spec.containers[0].image: Required value"#
        ),
        "{err}"
    );
    let err = failed(&k.run(&["create", "--dry-run=server", "-f", &f]).await);
    assert!(err.contains("spec.template.spec.containers[0].image: Required value"), "{err}");

    let mount = GOOD_JOB.replace(
        "        image: busybox\n",
        "        image: busybox\n        volumeMounts:\n        - name: data\n          mountPath: /data\n",
    );
    let f = k.write("mount-job.yaml", &mount);
    let err = failed(&k.run(&["apply", "--dry-run=server", "-f", &f]).await);
    assert!(
        err.contains(r#"The Job "good-job" is invalid: spec.template.spec.containers[0].volumeMounts[0].name: Not found: "data""#),
        "{err}"
    );

    let good = k.write("good-job.yaml", GOOD_JOB);
    let out = k.ok(&["create", "--dry-run=server", "-f", &good]).await;
    assert!(out.contains("job.batch/good-job created (server dry run)"), "{out}");
    let err = failed(&k.run(&["get", "job", "good-job"]).await);
    assert!(err.contains(r#"jobs.batch "good-job" not found"#), "{err}");

    let cron = r#"apiVersion: batch/v1
kind: CronJob
metadata:
  name: bad-cron
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Sometimes
          containers:
          - name: main
            image: busybox
"#;
    let f = k.write("cron.yaml", cron);
    let err = failed(&k.run(&["apply", "-f", &f]).await);
    assert!(
        err.contains(r#"spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "OnFailure", "Never""#)
            || err.contains(r#"spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: "Sometimes""#),
        "{err}"
    );
}

#[tokio::test]
async fn warnings_for_fractional_memory_and_job_names() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let pod = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "frac"},
      "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"memory": "1500m"}}}]}}"#;
    let f = k.write("frac.json", pod);
    let out = k.run(&["create", "-f", &f]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(r#"Warning: spec.containers[0].resources.requests[memory]: fractional byte value "1500m" is invalid, must be an integer"#),
        "{err}"
    );
    let job = GOOD_JOB.replace("name: good-job", "name: v1.2");
    let f = k.write("dotted.yaml", &job);
    let out = k.run(&["apply", "-f", &f]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("Warning: metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]"),
        "{err}"
    );
}

#[tokio::test]
async fn pod_spec_is_immutable_but_images_may_change() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: main\n    image: busybox:1\n    ports:\n    - containerPort: 80\n";
    let f = k.write("p.yaml", pod);
    k.ok(&["apply", "-f", &f]).await;
    let f = k.write("p.yaml", &pod.replace("busybox:1", "busybox:2"));
    let out = k.ok(&["apply", "-f", &f]).await;
    assert!(out.contains("pod/p configured"), "{out}");
    let f = k.write("p.yaml", &pod.replace("busybox:1", "busybox:2").replace("80", "81"));
    let err = failed(&k.run(&["apply", "-f", &f]).await);
    assert!(
        err.contains(r#"The Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"#),
        "{err}"
    );
}

#[tokio::test]
async fn job_update_warns_only_when_the_generation_changes() {
    let sim = common::sim().await;
    let k = common::Kubectl::for_sim(&sim);
    let job = GOOD_JOB
        .replace(
            "        image: busybox\n",
            "        image: busybox\n        resources:\n          requests:\n            memory: 0.5\n",
        )
        .replace("spec:\n  template:", "spec:\n  suspend: true\n  template:");
    let f = k.write("frac-job.yaml", &job);
    let out = k.run(&["create", "-f", &f]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let warning = r#"Warning: spec.template.spec.containers[0].resources.requests[memory]: fractional byte value "500m" is invalid, must be an integer"#;
    assert!(stderr(&out).contains(warning), "{}", stderr(&out));
    let out = k.run(&["patch", "job", "good-job", "-p", r#"{"spec":{"parallelism":2}}"#]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains(warning), "{}", stderr(&out));
    let out = k.run(&["label", "job", "good-job", "a=b"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Warning"), "{}", stderr(&out));
}
