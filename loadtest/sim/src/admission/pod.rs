//! Pod defaulting (pkg/apis/core/v1/defaults.go plus what the default admission chain adds:
//! ServiceAccount, Priority, DefaultTolerationSeconds, and the pod strategy's PrepareForCreate)
//! and the part of `ValidatePodTemplateSpec` that Job and CronJob templates need.
//!
//! Pods are the hot path: everything here works on the JSON in place, without a typed round trip.

use serde_json::{Value, json};

use super::common::*;
use super::names::is_lower_alnum;

// ---------------------------------------------------------------------------------------------
// Defaults shared by Pods and pod templates (SetDefaults_PodSpec, _Container, _Volume, _Probe …).

/// Defaults of a `PodSpec`. `is_pod` adds the parts upstream applies to Pods only
/// (SetDefaults_Pod): requests from limits, enableServiceLinks, host-network ports.
pub(crate) fn default_pod_spec(spec: &mut Obj, is_pod: bool) {
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        each_obj_in(spec, key, default_container);
    }
    each_obj_in(spec, "volumes", default_volume);
    if is_pod {
        for key in ["containers", "initContainers"] {
            each_obj_in(spec, key, requests_from_limits);
        }
        set_default(spec, "enableServiceLinks", json!(true));
        if spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
            for key in ["containers", "initContainers"] {
                each_obj_in(spec, key, |c| {
                    each_obj_in(c, "ports", |p| {
                        let unset = p.get("hostPort").and_then(Value::as_i64).is_none_or(|h| h == 0);
                        if unset && let Some(cp) = p.get("containerPort").cloned() {
                            p.insert("hostPort".to_string(), cp);
                        }
                    })
                });
            }
        }
    }
}

/// Defaults of the `spec` of a `PodTemplateSpec` value (Job and CronJob templates), and its
/// `metadata`, which Go's encoder writes as `{}` when empty (a struct, not a pointer; its
/// `creationTimestamp` is `omitzero`).
pub(crate) fn default_pod_template(template: &mut Value) {
    let Some(template) = template.as_object_mut() else { return };
    set_default(template, "metadata", json!({}));
    if let Some(spec) = child_obj(template, "spec") {
        default_pod_spec(spec, false);
    }
}

fn default_container(c: &mut Obj) {
    if c.get("imagePullPolicy").and_then(Value::as_str).is_none_or(str::is_empty) {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let policy = if pull_always(image) { "Always" } else { "IfNotPresent" };
        c.insert("imagePullPolicy".to_string(), json!(policy));
    }
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    // Not a default: Go's encoder writes the `resources` struct (not a pointer) even when empty,
    // so every container kube-apiserver returns has it, and its creator's entry `f:resources`.
    set_default(c, "resources", json!({}));
    each_obj_in(c, "ports", |p| set_default(p, "protocol", json!("TCP")));
    each_obj_in(c, "env", |e| {
        if let Some(fr) = e
            .get_mut("valueFrom")
            .and_then(Value::as_object_mut)
            .and_then(|vf| vf.get_mut("fieldRef").and_then(Value::as_object_mut))
        {
            set_default(fr, "apiVersion", json!("v1"));
        }
    });
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            for (k, d) in [
                ("timeoutSeconds", 1),
                ("periodSeconds", 10),
                ("successThreshold", 1),
                ("failureThreshold", 3),
            ] {
                if p.get(k).and_then(Value::as_i64).is_none_or(|v| v == 0) {
                    p.insert(k.to_string(), json!(d));
                }
            }
            default_http_get(p);
        }
    }
    if let Some(lc) = c.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = lc.get_mut(hook).and_then(Value::as_object_mut) {
                default_http_get(h);
            }
        }
    }
}

fn default_http_get(handler: &mut Obj) {
    if let Some(h) = handler.get_mut("httpGet").and_then(Value::as_object_mut) {
        if h.get("path").and_then(Value::as_str).is_none_or(str::is_empty) {
            h.insert("path".to_string(), json!("/"));
        }
        if h.get("scheme").and_then(Value::as_str).is_none_or(str::is_empty) {
            h.insert("scheme".to_string(), json!("HTTP"));
        }
    }
}

fn default_volume(v: &mut Obj) {
    let has_source = v.iter().any(|(k, val)| k != "name" && !val.is_null());
    if !has_source {
        v.insert("emptyDir".to_string(), json!({}));
        return;
    }
    for key in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(src) = v.get_mut(key).and_then(Value::as_object_mut) {
            set_default(src, "defaultMode", json!(420));
            each_obj_in(src, "items", default_field_ref);
            each_obj_in(src, "sources", |s| {
                if let Some(t) = s.get_mut("serviceAccountToken").and_then(Value::as_object_mut) {
                    set_default(t, "expirationSeconds", json!(3600));
                }
                if let Some(d) = s.get_mut("downwardAPI").and_then(Value::as_object_mut) {
                    each_obj_in(d, "items", default_field_ref);
                }
            });
        }
    }
    if let Some(hp) = v.get_mut("hostPath").and_then(Value::as_object_mut) {
        set_default(hp, "type", json!(""));
    }
    if let Some(iscsi) = v.get_mut("iscsi").and_then(Value::as_object_mut) {
        set_default(iscsi, "iscsiInterface", json!("default"));
    }
    if let Some(spec) = v
        .get_mut("ephemeral")
        .and_then(Value::as_object_mut)
        .and_then(|e| e.get_mut("volumeClaimTemplate"))
        .and_then(Value::as_object_mut)
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
    {
        set_default(spec, "volumeMode", json!("Filesystem"));
    }
}

fn default_field_ref(item: &mut Obj) {
    if let Some(fr) = item.get_mut("fieldRef").and_then(Value::as_object_mut) {
        set_default(fr, "apiVersion", json!("v1"));
    }
}

fn requests_from_limits(c: &mut Obj) {
    let Some(res) = c.get_mut("resources").and_then(Value::as_object_mut) else { return };
    let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() else { return };
    let Some(requests) = child_obj(res, "requests") else { return };
    for (k, v) in limits {
        requests.entry(k).or_insert(v);
    }
}

/// `SetDefaults_Container`'s image pull policy: `Always` when the reference parses and has the
/// tag `latest`, or neither tag nor digest (parsers.ParseImageName); else `IfNotPresent`.
pub(crate) fn pull_always(image: &str) -> bool {
    match parse_image_ref(image) {
        Some((tag, digest)) => tag == Some("latest") || (tag.is_none() && !digest),
        None => false,
    }
}

/// A light docker reference parser: `Some((tag, has_digest))`, `None` when it does not parse.
fn parse_image_ref(image: &str) -> Option<(Option<&str>, bool)> {
    if image.is_empty() || image.len() > 255 + 128 + 80 {
        return None;
    }
    let (name_tag, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let (alg, hex) = d.split_once(':')?;
        let alg_ok = alg.split(['-', '_', '+', '.']).all(|p| {
            let mut ch = p.chars();
            ch.next().is_some_and(|c| c.is_ascii_alphabetic()) && ch.all(|c| c.is_ascii_alphanumeric())
        });
        if !alg_ok || hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        if alg == "sha256" && (hex.len() != 64 || hex.bytes().any(|b| b.is_ascii_uppercase())) {
            return None;
        }
    }
    let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_tag[last_slash..].rfind(':') {
        Some(i) => (&name_tag[..last_slash + i], Some(&name_tag[last_slash + i + 1..])),
        None => (name_tag, None),
    };
    if let Some(t) = tag {
        let b = t.as_bytes();
        let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        if b.is_empty()
            || b.len() > 128
            || !word(b[0])
            || !b.iter().all(|&c| word(c) || c == b'.' || c == b'-')
        {
            return None;
        }
    }
    if name.is_empty() || name.len() > 255 {
        return None;
    }
    let mut components: Vec<&str> = name.split('/').collect();
    if components.len() > 1 {
        let first = components[0];
        let is_domain = first.contains(['.', ':']) || first == "localhost" || first.to_lowercase() != first;
        if is_domain {
            let (host, port) = match first.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (first, None),
            };
            let host_ok = !host.is_empty()
                && host.split('.').all(|l| {
                    let b = l.as_bytes();
                    !b.is_empty()
                        && b[0].is_ascii_alphanumeric()
                        && b[b.len() - 1].is_ascii_alphanumeric()
                        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-')
                });
            if !host_ok || port.is_some_and(|p| p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit())) {
                return None;
            }
            components.remove(0);
        }
    }
    for comp in components {
        if !path_component_ok(comp) {
            return None;
        }
    }
    Some((tag, digest.is_some()))
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*`
fn path_component_ok(c: &str) -> bool {
    let b = c.as_bytes();
    if b.is_empty() || !is_lower_alnum(b[0]) || !is_lower_alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_lower_alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !is_lower_alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
}

// ---------------------------------------------------------------------------------------------
// Pod admission.

/// Pod create: defaults, the admission plugins every cluster runs, and PrepareForCreate's
/// status (reset to phase Pending and the qosClass, whatever the request said) and generation.
#[cfg(test)]
pub(crate) fn admit_pod_create(pod: &mut Value) {
    default_pod(pod);
    admit_decoded_pod_create(pod);
}

/// The defaults decoding a Pod applies (SetDefaults_Pod and SetDefaults_PodSpec), on create
/// and again on every update (main resource or /status).
pub(crate) fn default_pod(pod: &mut Value) {
    if let Some(spec) = pod.as_object_mut().and_then(|o| child_obj(o, "spec")) {
        default_pod_spec(spec, true);
    }
}

/// What follows decoding a created Pod: the admission plugins, then PrepareForCreate.
pub(crate) fn admit_decoded_pod_create(pod: &mut Value) {
    let Some(obj) = pod.as_object_mut() else { return };
    if let Some(meta) = child_obj(obj, "metadata") {
        meta.insert("generation".to_string(), json!(1));
    }
    let Some(spec) = child_obj(obj, "spec") else { return };
    admission_plugins(spec);
    let qos = super::qos::pod_qos_class(spec);
    let gated = spec.get("schedulingGates").and_then(Value::as_array).is_some_and(|g| !g.is_empty());
    obj.insert("status".to_string(), json!({}));
    let Some(status) = child_obj(obj, "status") else { return };
    status.insert("phase".to_string(), json!("Pending"));
    status.insert("qosClass".to_string(), json!(qos));
    if gated && status.get("conditions").is_none_or(Value::is_null) {
        status.insert(
            "conditions".to_string(),
            json!([{
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": null,
                "lastTransitionTime": null,
                "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
            }]),
        );
    }
}

/// ServiceAccount, Priority and DefaultTolerationSeconds admission.
fn admission_plugins(spec: &mut Obj) {
    // ServiceAccount: the deprecated `serviceAccount` mirrors serviceAccountName on output.
    let sa = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .or_else(|| spec.get("serviceAccount").and_then(Value::as_str).filter(|s| !s.is_empty()))
        .unwrap_or("default")
        .to_string();
    spec.insert("serviceAccountName".to_string(), json!(sa));
    spec.insert("serviceAccount".to_string(), json!(sa));

    // Priority: no global default PriorityClass; the two system classes are built in.
    let priority = match spec.get("priorityClassName").and_then(Value::as_str) {
        Some("system-node-critical") => 2_000_001_000,
        Some("system-cluster-critical") => 2_000_000_000,
        _ => 0,
    };
    set_default(spec, "priority", json!(priority));
    set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));

    // DefaultTolerationSeconds.
    let tolerates = |key: &str, tols: &[Value]| {
        tols.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            let e = t.get("effect").and_then(Value::as_str).unwrap_or("");
            (k == key || k.is_empty()) && (e == "NoExecute" || e.is_empty())
        })
    };
    let existing = spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut added = Vec::new();
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        if !tolerates(key, &existing) {
            added.push(
                json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}),
            );
        }
    }
    if !added.is_empty() {
        match spec.get_mut("tolerations") {
            Some(Value::Array(tols)) => tols.extend(added),
            _ => {
                spec.insert("tolerations".to_string(), Value::Array(added));
            }
        }
    }
}

/// A resource.Quantity as a float (enough to compare requests with limits).
pub(crate) fn parse_quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(end);
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    Some(n * mult)
}

// ---------------------------------------------------------------------------------------------
// ValidatePodTemplateSpec.

/// Validates a pod template at `path` (e.g. `spec.template`): template labels and annotations
/// (reported at `<path>.labels` / `<path>.annotations`, as upstream does), then
/// `ValidatePodSpec` at `<path>.spec` with the template's ban on ephemeral containers.
pub(crate) fn validate_pod_template(template: Option<&Value>, path: &str) -> Errs {
    let null = Value::Null;
    let t = template.unwrap_or(&null);
    let mut errs = validate_labels(at(t, &["metadata", "labels"]), &format!("{path}.labels"));
    errs.extend(validate_annotations(at(t, &["metadata", "annotations"]), &format!("{path}.annotations")));
    errs.extend(super::pod_validation::validate_pod_spec(at(t, &["spec"]), &format!("{path}.spec"), true));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    // core/v1 defaults_test.go TestSetDefaultPodSpec / TestSetDefaultsContainer (imagePullPolicy)
    // and the pod strategy's PrepareForCreate.
    #[test]
    fn pod_create_defaults() {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [
                {"name": "a", "image": "busybox", "ports": [{"containerPort": 80}],
                 "env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                 "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
            ], "volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "x"}}]},
        });
        admit_pod_create(&mut pod);
        let s = &pod["spec"];
        assert_eq!(s["restartPolicy"], "Always");
        assert_eq!(s["dnsPolicy"], "ClusterFirst");
        assert_eq!(s["schedulerName"], "default-scheduler");
        assert_eq!(s["terminationGracePeriodSeconds"], 30);
        assert_eq!(s["securityContext"], json!({}));
        assert_eq!(s["enableServiceLinks"], true);
        assert_eq!(s["priority"], 0);
        assert_eq!(s["preemptionPolicy"], "PreemptLowerPriority");
        assert_eq!(s["serviceAccountName"], "default");
        assert_eq!(s["tolerations"].as_array().map(Vec::len), Some(2));
        let c = &s["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(c["resources"]["requests"], json!({"cpu": "1", "memory": "1Gi"}));
        assert_eq!(s["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(s["volumes"][1]["secret"]["defaultMode"], 420);
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(pod["status"]["qosClass"], "Guaranteed");
        assert_eq!(pod["metadata"]["generation"], 1);
    }

    #[test]
    // pod strategy.go PrepareForCreate resets the status a client sent.
    fn pod_status_is_reset_on_create() {
        let mut pod =
            json!({"spec": {"containers": [{"name": "a", "image": "x:1"}]}, "status": {"phase": "Running"}});
        admit_pod_create(&mut pod);
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(pod["status"]["qosClass"], "BestEffort");
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
    }

    // core/v1 defaults_test.go TestSetDefaultsContainer image pull policy table.
    #[test]
    fn image_pull_policy() {
        for (image, always) in [
            ("busybox", true),
            ("busybox:latest", true),
            ("busybox:1.36", false),
            ("registry.k8s.io:5000/pause", true),
            ("registry.k8s.io:5000/pause:3.9", false),
            ("busybox@sha256:b5b2b2c507a0944348e0303114d8d93aaaa081732b86451d9bce1f432a537bc7", false),
            ("busybox:latest@sha256:b5b2b2c507a0944348e0303114d8d93aaaa081732b86451d9bce1f432a537bc7", true),
            ("BusyBox", false),
            ("", false),
        ] {
            assert_eq!(pull_always(image), always, "{image}");
        }
    }

    #[test]
    fn template_validation() {
        let t = json!({"metadata": {"labels": {"-bad": "x"}},
            "spec": {"containers": [{"name": "a", "image": "", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"}, {"name": "a", "image": "x", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"}], "restartPolicy": "Bogus", "dnsPolicy": "Default"}});
        let msgs: Vec<String> =
            validate_pod_template(Some(&t), "spec.template").into_iter().map(|e| e.message).collect();
        assert!(
            msgs[0].starts_with("spec.template.labels: Invalid value: \"-bad\": name part must consist of")
        );
        assert_eq!(msgs[1], "spec.template.spec.containers[0].image: Required value");
        assert_eq!(msgs[2], "spec.template.spec.containers[1].name: Duplicate value: \"a\"");
        assert_eq!(msgs.len(), 4, "{msgs:?}");
        assert_eq!(
            msgs[3],
            "spec.template.spec.restartPolicy: Unsupported value: \"Bogus\": supported values: \"Always\", \"OnFailure\", \"Never\""
        );
        assert_eq!(
            validate_pod_template(None, "spec.template")[0].message,
            "spec.template.spec.containers: Required value"
        );
    }

    #[test]
    fn malformed_pods_do_not_panic() {
        for mut v in
            [json!(null), json!([]), json!({"spec": 3}), json!({"spec": {"containers": "x", "volumes": [1]}})]
        {
            admit_pod_create(&mut v);
            default_pod(&mut v);
        }
    }
}
