//! The real kubectl 1.37 against the sim's OpenAPI documents: `kubectl explain` to any depth (v3,
//! and v2 in protobuf), and "save, edit, apply" — `kubectl get -o yaml` of every kind the sim
//! serves (a `kind: List`, which kubectl validates client-side against `/openapi/v2`) fed back
//! through `apply -f`, `replace -f`, `diff -f` and, after a delete, `create -f` — and the other
//! paths everyday commands read (`get --raw /openapi/v2`, `auth can-i [--list]`, `auth whoami`).

mod common;

use batchfleet_sim::resources::Registry;

/// `kubectl explain` at depth: each answer names the field and carries upstream's description.
#[tokio::test]
async fn explain_reaches_any_depth() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    let cases: &[(&str, &[&str])] = &[
        ("job.spec.backoffLimit", &["FIELD: backoffLimit <integer>", "Specifies the number of retries"]),
        (
            "cronjob.spec.jobTemplate.spec.template.spec.containers.resources",
            &["FIELD: resources <ResourceRequirements>", "limits", "requests"],
        ),
        ("pod.status.conditions", &["FIELD: conditions <[]PodCondition>", "lastTransitionTime", "type"]),
        // explain names a `$ref`'s type only for objects; IntOrString is a string.
        (
            "deployment.spec.strategy.rollingUpdate.maxSurge",
            &["FIELD: maxSurge <string>", "maximum number of pods"],
        ),
        ("node.status.addresses.type", &["FIELD: type <string>"]),
        ("lease.spec.holderIdentity", &["FIELD: holderIdentity <string>"]),
        // JSONSchemaProps has properties named `$ref` and `allOf`: fields, not references.
        (
            "crd.spec.versions.schema.openAPIV3Schema",
            &["FIELD: openAPIV3Schema <JSONSchemaProps>", "$ref\t<string>", "allOf\t<[]JSONSchemaProps>"],
        ),
        (
            "--api-version=events.k8s.io/v1 events.regarding.uid",
            &["GROUP:      events.k8s.io", "FIELD: uid <string>"],
        ),
    ];
    for (path, wanted) in cases {
        let args: Vec<&str> = std::iter::once("explain").chain(path.split(' ')).collect();
        let out = k.ok(&args).await;
        for w in *wanted {
            assert!(out.contains(w), "kubectl explain {path}: no {w:?} in\n{out}");
        }
    }
    // A field that does not exist is still refused.
    let out = k.run(&["explain", "job.spec.noSuchField"]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));

    // The same through OpenAPI v2, which kubectl reads as protobuf.
    let out = k.ok(&["explain", "--output=plaintext-openapiv2", "job.spec.backoffLimit"]).await;
    assert!(out.contains("FIELD:    backoffLimit <integer>"), "{out}");
    assert!(out.contains("Specifies the number of retries"), "{out}");
    let out = k.ok(&["explain", "--recursive", "pod.spec.containers.resources"]).await;
    assert!(out.contains("limits") && out.contains("claims"), "{out}");
}

/// One object of a kind, labelled so a label selector finds it alone.
fn manifest(group: &str, plural: &str) -> Option<String> {
    let meta = |kind: &str, api: &str, extra: &str| {
        format!(
            "apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: rt-{}\n  labels: {{roundtrip: \"{}\"}}\n{extra}",
            selector_value(group, plural).replace('.', "-"),
            selector_value(group, plural)
        )
    };
    let pod_spec = "containers: [{name: main, image: busybox, env: [{name: A, value: \"1\"}], ports: [{containerPort: 80}]}]";
    let m = match (group, plural) {
        ("", "namespaces") => meta("Namespace", "v1", ""),
        ("", "nodes") => meta("Node", "v1", "spec: {podCIDRs: [10.0.0.0/24]}\n"),
        ("", "pods") => meta("Pod", "v1", &format!("spec: {{restartPolicy: Never, {pod_spec}}}\n")),
        ("", "events") => meta(
            "Event",
            "v1",
            "involvedObject: {kind: Pod, name: p, namespace: rt}\nreason: Tested\nmessage: m\ntype: Normal\n",
        ),
        ("", "configmaps") => meta("ConfigMap", "v1", "data: {a: \"1\"}\n"),
        ("", "secrets") => meta("Secret", "v1", "stringData: {a: \"1\"}\n"),
        ("", "services") => meta("Service", "v1", "spec: {selector: {app: a}, ports: [{port: 80}]}\n"),
        ("", "serviceaccounts") => meta("ServiceAccount", "v1", ""),
        ("", "endpoints") => {
            meta("Endpoints", "v1", "subsets: [{addresses: [{ip: 10.0.0.1}], ports: [{port: 80}]}]\n")
        }
        ("", "resourcequotas") => meta("ResourceQuota", "v1", "spec: {hard: {pods: \"10\"}}\n"),
        ("", "persistentvolumeclaims") => meta(
            "PersistentVolumeClaim",
            "v1",
            "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n",
        ),
        ("batch", "jobs") => meta(
            "Job",
            "batch/v1",
            &format!("spec: {{template: {{spec: {{restartPolicy: Never, {pod_spec}}}}}}}\n"),
        ),
        ("batch", "cronjobs") => meta(
            "CronJob",
            "batch/v1",
            &format!(
                "spec: {{schedule: \"*/5 * * * *\", jobTemplate: {{spec: {{template: {{spec: {{restartPolicy: Never, {pod_spec}}}}}}}}}}}\n"
            ),
        ),
        ("coordination.k8s.io", "leases") => {
            meta("Lease", "coordination.k8s.io/v1", "spec: {holderIdentity: h}\n")
        }
        ("events.k8s.io", "events") => meta(
            "Event",
            "events.k8s.io/v1",
            "eventTime: \"2026-01-01T00:00:00.000000Z\"\nreportingController: rt/c\nreportingInstance: i\naction: Test\nreason: Tested\nregarding: {kind: Pod, name: p, namespace: rt}\ntype: Normal\n",
        ),
        ("apps", "deployments" | "statefulsets" | "daemonsets" | "replicasets") => {
            let kind = match plural {
                "deployments" => "Deployment",
                "statefulsets" => "StatefulSet",
                "daemonsets" => "DaemonSet",
                _ => "ReplicaSet",
            };
            meta(
                kind,
                "apps/v1",
                &format!(
                    "spec: {{selector: {{matchLabels: {{app: a}}}}, template: {{metadata: {{labels: {{app: a}}}}, spec: {{{pod_spec}}}}}}}\n"
                ),
            )
        }
        ("policy", "poddisruptionbudgets") => meta(
            "PodDisruptionBudget",
            "policy/v1",
            "spec: {minAvailable: 1, selector: {matchLabels: {app: a}}}\n",
        ),
        ("networking.k8s.io", "networkpolicies") => {
            meta("NetworkPolicy", "networking.k8s.io/v1", "spec: {podSelector: {matchLabels: {app: a}}}\n")
        }
        ("autoscaling", "horizontalpodautoscalers") => meta(
            "HorizontalPodAutoscaler",
            "autoscaling/v2",
            "spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: d}, minReplicas: 1, maxReplicas: 3}\n",
        ),
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => meta(
            if plural == "roles" { "Role" } else { "ClusterRole" },
            "rbac.authorization.k8s.io/v1",
            "rules: [{apiGroups: [\"\"], resources: [pods], verbs: [get]}]\n",
        ),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => meta(
            if plural == "rolebindings" { "RoleBinding" } else { "ClusterRoleBinding" },
            "rbac.authorization.k8s.io/v1",
            "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\nsubjects: [{kind: ServiceAccount, name: default, namespace: rt}]\n",
        ),
        ("apiextensions.k8s.io", "customresourcedefinitions") => "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
  labels: {roundtrip: \"customresourcedefinitions.apiextensions.k8s.io\"}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"
        .to_string(),
        _ => return None,
    };
    Some(m)
}

fn selector_value(group: &str, plural: &str) -> String {
    if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") }
}

/// `get -o yaml` of the round-trip object of `resource` (`plural.version.group`), a List.
async fn save(k: &common::Kubectl, resource: &str, label: &str, file: &str) -> String {
    let yaml = k.ok(&["get", resource, "-n", "rt", "-l", &format!("roundtrip={label}"), "-o", "yaml"]).await;
    assert!(yaml.starts_with("apiVersion: v1\nitems:\n- "), "{resource}: not a one-item List:\n{yaml}");
    assert!(yaml.contains("\nkind: List\n"), "{yaml}");
    k.write(file, &yaml)
}

#[tokio::test]
async fn get_yaml_of_every_kind_goes_back_through_apply_create_replace_and_diff() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    k.ok(&["create", "namespace", "rt"]).await;
    let mut crd_seen = false;
    for rt in Registry::default().all() {
        let label = selector_value(&rt.group, &rt.plural);
        // The core group has no name to qualify with (`pods.v1` would be group `v1`); kubectl
        // resolves a bare `events` to core/v1 before events.k8s.io.
        let resource = if rt.group.is_empty() {
            rt.plural.clone()
        } else {
            format!("{}.{}.{}", rt.plural, rt.version, rt.group)
        };
        let m = manifest(&rt.group, &rt.plural)
            .unwrap_or_else(|| panic!("no round-trip manifest for {resource}: add one to manifest()"));
        let f = k.write("object.yaml", &m);
        k.ok(&["create", "-n", "rt", "-f", &f]).await;
        crd_seen |= rt.plural == "customresourcedefinitions";
        round_trip(&k, &resource, &label).await;
    }
    assert!(crd_seen, "the CRD for the custom resource below");

    // A custom resource: its schema is the stub, and kubectl skips its client-side validation.
    let gadget = "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n  labels: {roundtrip: gadgets}\nspec: {size: 1}\n";
    let f = k.write("object.yaml", gadget);
    k.ok(&["create", "-n", "rt", "-f", &f]).await;
    round_trip(&k, "gadgets.v1.example.com", "gadgets").await;
}

async fn round_trip(k: &common::Kubectl, resource: &str, label: &str) {
    // apply -f: the object as saved, unchanged.
    let f = save(k, resource, label, "saved.yaml").await;
    let out = k.ok(&["apply", "-n", "rt", "-f", &f]).await;
    assert!(out.contains("configured") || out.contains("unchanged"), "{resource}: apply said {out}");

    // replace -f.
    let f = save(k, resource, label, "saved.yaml").await;
    let out = k.ok(&["replace", "-n", "rt", "-f", &f]).await;
    assert!(out.contains("replaced"), "{resource}: replace said {out}");

    // diff -f of the object as it is now, applied as it is: no difference, exit code 0.
    let f = save(k, resource, label, "saved.yaml").await;
    k.ok(&["apply", "-n", "rt", "-f", &f]).await;
    let f = save(k, resource, label, "saved.yaml").await;
    let out = k.run(&["diff", "-n", "rt", "-f", &f]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{resource}: kubectl diff of an unchanged object:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // create -f after delete: kubectl clears the saved resourceVersion (cli-runtime
    // `Helper.Create` with modify), which kube-apiserver would refuse on a create.
    k.ok(&["delete", "-n", "rt", "-f", &f]).await;
    let f = if resource == "jobs.v1.batch" {
        // A saved Job carries the selector and labels generated for its uid; as kube-apiserver,
        // the sim refuses them on a new Job, and a user removes them.
        let out = k.run(&["create", "-n", "rt", "-f", &f]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("`selector` not auto-generated"), "{stderr}");
        k.write("edited.yaml", &without_generated_job_selector(&std::fs::read_to_string(&f).expect("saved")))
    } else {
        f
    };
    let out = k.ok(&["create", "-n", "rt", "-f", &f]).await;
    assert!(out.contains("created"), "{resource}: create said {out}");
}

/// A saved Job List without `spec.selector` and the template's controller-uid labels.
fn without_generated_job_selector(yaml: &str) -> String {
    let mut list: serde_json::Value = serde_yaml::from_str(yaml).expect("saved YAML");
    for job in list["items"].as_array_mut().expect("items") {
        if let Some(spec) = job["spec"].as_object_mut() {
            spec.remove("selector");
        }
        if let Some(labels) = job["spec"]["template"]["metadata"]["labels"].as_object_mut() {
            labels.retain(|k, _| !k.ends_with("controller-uid"));
        }
    }
    serde_yaml::to_string(&list).expect("YAML")
}

/// The other paths kubectl's everyday commands read: `/openapi/v2` as JSON (`get --raw`), and the
/// reviews behind `auth can-i` and `auth whoami`.
#[tokio::test]
async fn raw_openapi_v2_and_auth_commands() {
    let sim = common::api_only().await;
    let k = common::Kubectl::for_sim(&sim);
    let v2: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "--raw", "/openapi/v2"]).await).expect("JSON");
    assert_eq!(v2["swagger"], "2.0");
    let job = &v2["definitions"]["io.k8s.api.batch.v1.Job"];
    assert_eq!(job["x-kubernetes-group-version-kind"][0]["kind"], "Job");
    assert_eq!(job["properties"]["spec"]["$ref"], "#/definitions/io.k8s.api.batch.v1.JobSpec");
    let containers = &v2["definitions"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");

    assert_eq!(k.ok(&["auth", "can-i", "create", "jobs"]).await.trim(), "yes");
    let rules = k.ok(&["auth", "can-i", "--list"]).await;
    assert!(rules.lines().any(|l| l.starts_with("*.*") && l.contains("[*]")), "{rules}");
    let whoami = k.ok(&["auth", "whoami"]).await;
    assert!(whoami.contains("sim") && whoami.contains("system:authenticated"), "{whoami}");
}
