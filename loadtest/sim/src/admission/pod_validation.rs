//! Pod spec validation (pkg/apis/core/validation/validation.go: `ValidatePodSpec`,
//! `validateContainers`, `validateInitContainers`, `validateContainerCommon`,
//! `validateContainerPorts`, `ValidateEnv`, `validatePullPolicy`, `validateRestartPolicy`,
//! `ValidateResourceRequirements`, `ValidatePodUpdate`) and the pod warnings of
//! pkg/api/pod/warnings.go the sim reproduces. A documented subset: see docs/sim-cluster.md.

use std::cell::RefCell;

use serde_json::Value;

use super::common::*;
use super::names::*;
use super::pod::parse_quantity;
use super::quantity::canonical;
use crate::field_error::FieldError;
use crate::value_memo::{self, Memo};

/// `updatablePodSpecFieldsStringArray`, joined as `ValidatePodUpdate` prints it.
const UPDATABLE_POD_SPEC_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

thread_local! {
    static POD_SPEC_ERRORS: RefCell<Memo<Errs>> = const { RefCell::new(Memo::new()) };
}

/// [`validate_pod_spec`] of a pod's own `spec`, remembered for a spec identical to one met
/// before (the pods of a Job share theirs, and most updates keep it): see [`value_memo`].
pub(crate) fn validate_pods_spec(spec: Option<&Value>) -> Errs {
    match spec {
        Some(spec) => value_memo::remembered(&POD_SPEC_ERRORS, (0, 0), spec, |spec| {
            Some(validate_pod_spec(Some(spec), "spec", false))
        })
        .unwrap_or_default(),
        None => validate_pod_spec(None, "spec", false),
    }
}

/// `ValidatePodSpec` for the spec at `path` (`spec`, `spec.template.spec`, …): volume names,
/// containers (with their volume mounts),
/// init containers, the restart and DNS policies. `is_template` adds `ValidatePodTemplateSpec`'s ban
/// on ephemeral containers. Reads nothing but its arguments: [`validate_pods_spec`] remembers its
/// answers by the spec alone.
pub(crate) fn validate_pod_spec(spec: Option<&Value>, path: &str, is_template: bool) -> Errs {
    let null = Value::Null;
    let spec = spec.unwrap_or(&null);
    let mut errs = Errs::new();
    let volumes = validate_volumes(at_arr(spec, &["volumes"]), &format!("{path}.volumes"), &mut errs);
    let containers = at_arr(spec, &["containers"]);
    let containers_path = format!("{path}.containers");
    if containers.is_empty() {
        errs.push(FieldError::required(containers_path.clone(), ""));
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, c) in containers.iter().enumerate() {
        let idx = format!("{containers_path}[{i}]");
        validate_container_common(c, &idx, &volumes, &mut errs);
        let name = at_str(c, &["name"]).unwrap_or("");
        if names.contains(&name) {
            errs.push(FieldError::duplicate(format!("{idx}.name"), &Value::from(name)));
        } else {
            names.push(name);
        }
    }
    let init_path = format!("{path}.initContainers");
    for (i, c) in at_arr(spec, &["initContainers"]).iter().enumerate() {
        let idx = format!("{init_path}[{i}]");
        validate_container_common(c, &idx, &volumes, &mut errs);
        let name = at_str(c, &["name"]).unwrap_or("");
        if names.contains(&name) {
            errs.push(FieldError::duplicate(format!("{idx}.name"), &Value::from(name)));
        } else if !name.is_empty() {
            names.push(name);
        }
    }
    match at_str(spec, &["restartPolicy"]).unwrap_or("") {
        "Always" | "OnFailure" | "Never" => {}
        "" => errs.push(FieldError::required(format!("{path}.restartPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            &Value::from(other),
            &["Always", "OnFailure", "Never"],
        )),
    }
    match at_str(spec, &["dnsPolicy"]).unwrap_or("") {
        "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None" => {}
        "" => errs.push(FieldError::required(format!("{path}.dnsPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            format!("{path}.dnsPolicy"),
            &Value::from(other),
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        )),
    }
    // ValidatePodTemplateSpec checks this after ValidatePodSpec.
    if is_template && !at_arr(spec, &["ephemeralContainers"]).is_empty() {
        errs.push(FieldError::forbidden(
            format!("{path}.ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
    errs
}

/// What `ValidatePodCreate` / `ValidatePodUpdate` add for Pods (not templates):
/// `validateContainersOnlyForPod` (no whitespace around images) and, on create, no ephemeral
/// containers.
pub(crate) fn validate_pod_only(spec: Option<&Value>, create: bool) -> Errs {
    let mut errs = Errs::new();
    let Some(spec) = spec else { return errs };
    for key in ["containers", "initContainers"] {
        for (i, c) in at_arr(spec, &[key]).iter().enumerate() {
            let image = at_str(c, &["image"]).unwrap_or("");
            if image.len() != image.trim().len() {
                errs.push(FieldError::invalid(
                    format!("spec.{key}[{i}].image"),
                    &Value::from(image),
                    "must not have leading or trailing whitespace",
                ));
            }
        }
    }
    if create && !at_arr(spec, &["ephemeralContainers"]).is_empty() {
        errs.push(FieldError::forbidden("spec.ephemeralContainers", "cannot be set on create"));
    }
    errs
}

/// `validateContainerCommon`: name, image, terminationMessagePolicy, ports, env,
/// imagePullPolicy, resources.
fn validate_container_common(c: &Value, path: &str, volumes: &[&str], errs: &mut Errs) {
    let name = at_str(c, &["name"]).unwrap_or("");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    } else {
        for msg in is_dns1123_label(name) {
            errs.push(FieldError::invalid(format!("{path}.name"), &Value::from(name), &msg));
        }
    }
    if at_str(c, &["image"]).unwrap_or("").is_empty() {
        errs.push(FieldError::required(format!("{path}.image"), ""));
    }
    let tmp_path = format!("{path}.terminationMessagePolicy");
    match at_str(c, &["terminationMessagePolicy"]).unwrap_or("") {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(FieldError::required(tmp_path, "must be 'File' or 'FallbackToLogsOnError'")),
        other => errs.push(FieldError::invalid(
            tmp_path,
            &Value::from(other),
            "must be 'File' or 'FallbackToLogsOnError'",
        )),
    }
    validate_container_ports(at_arr(c, &["ports"]), &format!("{path}.ports"), errs);
    validate_env(at_arr(c, &["env"]), &format!("{path}.env"), errs);
    validate_volume_mounts(at_arr(c, &["volumeMounts"]), volumes, &format!("{path}.volumeMounts"), errs);
    let pull_path = format!("{path}.imagePullPolicy");
    match at_str(c, &["imagePullPolicy"]).unwrap_or("") {
        "Always" | "IfNotPresent" | "Never" => {}
        "" => errs.push(FieldError::required(pull_path, "")),
        other => errs.push(FieldError::not_supported(
            pull_path,
            &Value::from(other),
            &["Always", "IfNotPresent", "Never"],
        )),
    }
    validate_resources(at(c, &["resources"]), &format!("{path}.resources"), errs);
}

/// `ValidateVolumes`, names only (the sources are not checked): required, DNS labels, unique.
/// Returns the names mounts may refer to.
fn validate_volumes<'a>(volumes: &'a [Value], path: &str, errs: &mut Errs) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    for (i, v) in volumes.iter().enumerate() {
        let name_path = format!("{path}[{i}].name");
        let name = at_str(v, &["name"]).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(name_path.clone(), ""));
        } else {
            for msg in is_dns1123_label(name) {
                errs.push(FieldError::invalid(name_path.clone(), &Value::from(name), &msg));
            }
        }
        if names.contains(&name) {
            errs.push(FieldError::duplicate(name_path, &Value::from(name)));
        } else {
            names.push(name);
        }
    }
    names
}

/// `ValidateVolumeMounts`: the name required and naming a volume, the mount path required and
/// unique within the container.
fn validate_volume_mounts(mounts: &[Value], volumes: &[&str], path: &str, errs: &mut Errs) {
    let mut paths: Vec<&str> = Vec::new();
    for (i, m) in mounts.iter().enumerate() {
        let idx = format!("{path}[{i}]");
        let name = at_str(m, &["name"]).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{idx}.name"), ""));
        }
        if !volumes.contains(&name) {
            errs.push(FieldError::not_found(format!("{idx}.name"), &Value::from(name)));
        }
        let mount_path = at_str(m, &["mountPath"]).unwrap_or("");
        if mount_path.is_empty() {
            errs.push(FieldError::required(format!("{idx}.mountPath"), ""));
        }
        if paths.contains(&mount_path) {
            errs.push(FieldError::invalid(
                format!("{idx}.mountPath"),
                &Value::from(mount_path),
                "must be unique",
            ));
        }
        paths.push(mount_path);
    }
}

/// `validateContainerPorts`.
fn validate_container_ports(ports: &[Value], path: &str, errs: &mut Errs) {
    let mut names: Vec<&str> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let idx = format!("{path}[{i}]");
        let name = at_str(p, &["name"]).unwrap_or("");
        if !name.is_empty() {
            let msgs = port_name_errors(name);
            if !msgs.is_empty() {
                for msg in msgs {
                    errs.push(FieldError::invalid(format!("{idx}.name"), &Value::from(name), &msg));
                }
            } else if names.contains(&name) {
                errs.push(FieldError::duplicate(format!("{idx}.name"), &Value::from(name)));
            } else {
                names.push(name);
            }
        }
        match at_i64(p, &["containerPort"]).unwrap_or(0) {
            0 => errs.push(FieldError::required(format!("{idx}.containerPort"), "")),
            n if !(1..=65535).contains(&n) => errs.push(FieldError::invalid(
                format!("{idx}.containerPort"),
                &Value::from(n),
                "must be between 1 and 65535, inclusive",
            )),
            _ => {}
        }
        let host = at_i64(p, &["hostPort"]).unwrap_or(0);
        if host != 0 && !(1..=65535).contains(&host) {
            errs.push(FieldError::invalid(
                format!("{idx}.hostPort"),
                &Value::from(host),
                "must be between 1 and 65535, inclusive",
            ));
        }
        match at_str(p, &["protocol"]).unwrap_or("") {
            "TCP" | "UDP" | "SCTP" => {}
            "" => errs.push(FieldError::required(format!("{idx}.protocol"), "")),
            other => errs.push(FieldError::not_supported(
                format!("{idx}.protocol"),
                &Value::from(other),
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
}

/// `ValidateEnv` with RelaxedEnvironmentVariableValidation (GA): an empty name is both
/// required and invalid, as upstream reports it.
fn validate_env(env: &[Value], path: &str, errs: &mut Errs) {
    for (i, e) in env.iter().enumerate() {
        let name_path = format!("{path}[{i}].name");
        let name = at_str(e, &["name"]).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(name_path.clone(), ""));
        }
        for msg in env_var_name_errors(name) {
            errs.push(FieldError::invalid(name_path.clone(), &Value::from(name), &msg));
        }
    }
}

/// `ValidateResourceRequirements`: quantities not negative, requests not above limits
/// (reported at `<path>.requests`), quantities printed in their canonical form.
fn validate_resources(resources: Option<&Value>, path: &str, errs: &mut Errs) {
    let Some(r) = resources else { return };
    let limits = at_obj(r, &["limits"]);
    for (key, section) in [("limits", limits), ("requests", at_obj(r, &["requests"]))] {
        for (name, q) in section.into_iter().flatten() {
            let text = quantity_text(q);
            if parse_quantity(&text).is_some_and(|v| v < 0.0) {
                errs.push(FieldError::invalid(
                    format!("{path}.{key}[{name}]"),
                    &Value::from(canonical(&text)),
                    IS_NEGATIVE_ERROR_MSG,
                ));
            }
        }
    }
    for (name, q) in at_obj(r, &["requests"]).into_iter().flatten() {
        let Some(limit) = limits.and_then(|l| l.get(name)) else { continue };
        let request_text = quantity_text(q);
        let limit_text = quantity_text(limit);
        if let (Some(req), Some(lim)) = (parse_quantity(&request_text), parse_quantity(&limit_text))
            && req > lim
        {
            errs.push(FieldError::invalid(
                format!("{path}.requests"),
                &Value::from(canonical(&request_text)),
                &format!("must be less than or equal to {name} limit of {}", canonical(&limit_text)),
            ));
        }
    }
}

/// A quantity as text: a JSON number (which Quantity's decoder accepts, as YAML `memory: 0.5`
/// sends it) or a string.
fn quantity_text(v: &Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())
}

/// `ValidatePodUpdate`'s spec rule: only images, activeDeadlineSeconds, tolerations and
/// schedulingGates may change (plus nodeName from unset, which the sim's scheduler writes in
/// place of the pods/binding subresource). Upstream appends a go-cmp diff of the specs; the sim
/// names the changed top-level fields instead.
pub(crate) fn validate_pod_update(new: &Value, old: &Value) -> Errs {
    let mut errs = Errs::new();
    let (Some(new_spec), Some(old_spec)) = (at(new, &["spec"]), at(old, &["spec"])) else { return errs };
    // Most pod writes (labels, annotations, finalizers, owner references) leave the spec alone.
    if semantic_eq(Some(new_spec), Some(old_spec)) {
        return errs;
    }
    let new_len = at_arr(new_spec, &["containers"]).len();
    if new_len != at_arr(old_spec, &["containers"]).len() {
        errs.push(FieldError::forbidden("spec.containers", "pod updates may not add or remove containers"));
        return errs;
    }
    let mut munged = new_spec.clone();
    let Some(m) = munged.as_object_mut() else { return errs };
    for key in ["containers", "initContainers"] {
        let old_list = at_arr(old_spec, &[key]);
        if let Some(Value::Array(items)) = m.get_mut(key) {
            for (i, c) in items.iter_mut().enumerate() {
                if let (Some(obj), Some(old_image)) =
                    (c.as_object_mut(), old_list.get(i).and_then(|o| o.get("image")))
                {
                    obj.insert("image".to_string(), old_image.clone());
                }
            }
        }
    }
    for key in ["activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds"] {
        match old_spec.get(key) {
            Some(v) => m.insert(key.to_string(), v.clone()),
            None => m.remove(key),
        };
    }
    if at_str(old_spec, &["nodeName"]).unwrap_or("").is_empty() {
        match old_spec.get("nodeName") {
            Some(v) => m.insert("nodeName".to_string(), v.clone()),
            None => m.remove("nodeName"),
        };
    }
    if !semantic_eq(Some(&munged), Some(old_spec)) {
        let mut changed: Vec<&str> = Vec::new();
        let empty = Obj::new();
        let (mo, oo) = (munged.as_object().unwrap_or(&empty), old_spec.as_object().unwrap_or(&empty));
        for k in mo.keys().chain(oo.keys()) {
            if !changed.contains(&k.as_str()) && !semantic_eq(mo.get(k), oo.get(k)) {
                changed.push(k);
            }
        }
        changed.sort_unstable();
        let diff: Vec<String> = changed.iter().map(|k| format!("  spec.{k} changed")).collect();
        errs.push(FieldError::forbidden(
            "spec",
            &format!(
                "pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}\n{}",
                diff.join("\n")
            ),
        ));
    }
    errs
}

/// pkg/api/pod/warnings.go, the part the sim covers: fractional byte values of memory and
/// ephemeral-storage requests and limits, for the pod spec at `path`.
pub(crate) fn pod_spec_warnings(spec: Option<&Value>, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Some(spec) = spec else { return out };
    for key in ["initContainers", "containers"] {
        for (i, c) in at_arr(spec, &[key]).iter().enumerate() {
            for resource in ["memory", "ephemeral-storage"] {
                for section in ["limits", "requests"] {
                    let Some(text) = at(c, &["resources", section, resource]).map(quantity_text) else {
                        continue;
                    };
                    let text = text.as_str();
                    let Some(v) = parse_quantity(text) else { continue };
                    let milli = (v * 1000.0).round();
                    if milli % 1000.0 != 0.0 {
                        out.push(format!(
                            "{path}.{key}[{i}].resources.{section}[{resource}]: fractional byte value {} is invalid, must be an integer",
                            go_quote(&canonical(text))
                        ));
                    }
                }
            }
        }
    }
    out
}

/// The `metadata.name` warning of the pod, Job and CronJob strategies' `WarningsOnCreate`.
pub(crate) fn name_warning(name: &str, used_in: &str) -> Option<String> {
    let msgs = is_dns1123_label(name);
    if name.is_empty() || msgs.is_empty() {
        return None;
    }
    Some(format!(
        "metadata.name: this is used in {used_in}, which can result in surprising behavior; a DNS label is recommended: [{}]",
        msgs.join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A pod's spec validated through the memory of specs met before gets the errors validating
    /// it gives, each time, valid or not, among others.
    #[test]
    fn remembered_spec_validation_is_the_validation() {
        let specs = [
            json!({"containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Never"}),
            json!({"containers": []}),
            json!({"containers": [{"name": "a", "image": "i"}, {"name": "a", "image": "i"}]}),
            json!({"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}),
            json!({"containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Sometimes"}),
        ];
        // Enough rounds for every spec to be remembered (one miss in sixteen is) and answered.
        for _ in 0..40 {
            for spec in &specs {
                assert_eq!(
                    validate_pods_spec(Some(spec)),
                    validate_pod_spec(Some(spec), "spec", false),
                    "{spec}"
                );
            }
        }
        assert_eq!(validate_pods_spec(None), validate_pod_spec(None, "spec", false));
    }

    fn container(extra: Value) -> Value {
        let mut c = json!({"name": "c", "image": "busybox", "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"});
        for (k, v) in extra.as_object().into_iter().flatten() {
            c[k] = v.clone();
        }
        c
    }

    fn spec(containers: Vec<Value>) -> Value {
        json!({"restartPolicy": "Never", "dnsPolicy": "ClusterFirst", "containers": containers})
    }

    fn messages(spec: &Value) -> Vec<String> {
        validate_pod_spec(Some(spec), "spec", false).into_iter().map(|e| e.message).collect()
    }

    /// Each row names the upstream function or validation_test.go case it reproduces.
    #[test]
    fn pod_spec_table() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("TestValidateContainers: valid", spec(vec![container(json!({}))]), vec![]),
            (
                "validateContainers: zero-length containers",
                spec(vec![]),
                vec!["spec.containers: Required value"],
            ),
            (
                "validateContainerCommon: zero-length image",
                spec(vec![container(json!({"image": ""}))]),
                vec!["spec.containers[0].image: Required value"],
            ),
            (
                "validateContainers: duplicate names",
                spec(vec![container(json!({})), container(json!({}))]),
                vec!["spec.containers[1].name: Duplicate value: \"c\""],
            ),
            (
                "validateInitContainers: duplicate with a regular container",
                json!({"restartPolicy": "Never", "dnsPolicy": "ClusterFirst", "containers": [container(json!({}))], "initContainers": [container(json!({}))]}),
                vec!["spec.initContainers[0].name: Duplicate value: \"c\""],
            ),
            (
                "validateContainerCommon: zero-length name",
                spec(vec![container(json!({"name": ""}))]),
                vec!["spec.containers[0].name: Required value"],
            ),
            (
                "validateContainerCommon: name not a DNS label",
                spec(vec![container(json!({"name": "Web_1"}))]),
                vec![
                    "spec.containers[0].name: Invalid value: \"Web_1\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                ],
            ),
            (
                "validateRestartPolicy: unsupported",
                json!({"restartPolicy": "Sometimes", "dnsPolicy": "ClusterFirst", "containers": [container(json!({}))]}),
                vec![
                    "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                ],
            ),
            (
                "validatePullPolicy: unsupported",
                spec(vec![container(json!({"imagePullPolicy": "Sometimes"}))]),
                vec![
                    "spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
                ],
            ),
            (
                "validateContainerPorts: containerPort out of range",
                spec(vec![container(json!({"ports": [{"containerPort": 70000, "protocol": "TCP"}]}))]),
                vec![
                    "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                ],
            ),
            (
                "validateContainerPorts: zero containerPort, bad hostPort and protocol",
                spec(vec![container(
                    json!({"ports": [{"containerPort": 0, "hostPort": -1, "protocol": "HTTP"}]}),
                )]),
                vec![
                    "spec.containers[0].ports[0].containerPort: Required value",
                    "spec.containers[0].ports[0].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive",
                    "spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                ],
            ),
            (
                "validateContainerPorts: duplicate and invalid port names (IsValidPortName)",
                spec(vec![container(json!({"ports": [
                    {"name": "http", "containerPort": 80, "protocol": "TCP"},
                    {"name": "http", "containerPort": 81, "protocol": "TCP"},
                    {"name": "a--b", "containerPort": 82, "protocol": "TCP"},
                ]}))]),
                vec![
                    "spec.containers[0].ports[1].name: Duplicate value: \"http\"",
                    "spec.containers[0].ports[2].name: Invalid value: \"a--b\": must not contain consecutive hyphens",
                ],
            ),
            (
                "ValidateEnv: zero-length name (relaxed env var names)",
                spec(vec![container(json!({"env": [{"value": "x"}]}))]),
                vec![
                    "spec.containers[0].env[0].name: Required value",
                    "spec.containers[0].env[0].name: Invalid value: \"\": environment variable name must be non-empty",
                ],
            ),
            (
                "ValidateEnv: '=' in the name",
                spec(vec![container(json!({"env": [{"name": "A=B"}]}))]),
                vec![
                    "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='",
                ],
            ),
            (
                "ValidateResourceRequirements: request above limit",
                spec(vec![container(
                    json!({"resources": {"limits": {"memory": "1Gi"}, "requests": {"memory": "2Gi"}}}),
                )]),
                vec![
                    "spec.containers[0].resources.requests: Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi",
                ],
            ),
            (
                "ValidateResourceRequirements: request above limit, canonical quantities",
                spec(vec![container(
                    json!({"resources": {"limits": {"cpu": "500m", "memory": "0.5Gi"}, "requests": {"cpu": "0.75", "memory": "1024Mi"}}}),
                )]),
                vec![
                    "spec.containers[0].resources.requests: Invalid value: \"750m\": must be less than or equal to cpu limit of 500m",
                    "spec.containers[0].resources.requests: Invalid value: \"1Gi\": must be less than or equal to memory limit of 512Mi",
                ],
            ),
            (
                "ValidateResourceQuantityValue: negative",
                spec(vec![container(json!({"resources": {"requests": {"cpu": "-1"}}}))]),
                vec![
                    "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
                ],
            ),
            (
                "ValidateVolumes: bad and duplicate names; ValidateVolumeMounts: not found, unique",
                json!({"restartPolicy": "Never", "dnsPolicy": "ClusterFirst",
                "volumes": [{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}, {"name": "Cache", "emptyDir": {}}],
                "containers": [container(json!({"volumeMounts": [
                    {"name": "data", "mountPath": "/data"},
                    {"name": "missing", "mountPath": "/data"},
                    {"name": "data"},
                ]}))]}),
                vec![
                    "spec.volumes[1].name: Duplicate value: \"data\"",
                    "spec.volumes[2].name: Invalid value: \"Cache\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                    "spec.containers[0].volumeMounts[1].name: Not found: \"missing\"",
                    "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/data\": must be unique",
                    "spec.containers[0].volumeMounts[2].mountPath: Required value",
                ],
            ),
            (
                "validateDNSPolicy: unsupported",
                json!({"restartPolicy": "Never", "dnsPolicy": "Cluster", "containers": [container(json!({}))]}),
                vec![
                    "spec.dnsPolicy: Unsupported value: \"Cluster\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"",
                ],
            ),
            (
                "validateContainerCommon: terminationMessagePolicy",
                spec(vec![container(json!({"terminationMessagePolicy": "Always"}))]),
                vec![
                    "spec.containers[0].terminationMessagePolicy: Invalid value: \"Always\": must be 'File' or 'FallbackToLogsOnError'",
                ],
            ),
            (
                "ValidateResourceRequirements: request equal to limit",
                spec(vec![container(
                    json!({"resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1000m"}}}),
                )]),
                vec![],
            ),
        ];
        for (case, spec, want) in cases {
            assert_eq!(messages(&spec), want, "{case}");
        }
        let pod = json!({"containers": [container(json!({"image": " busybox"}))], "ephemeralContainers": [{"name": "e"}]});
        let only: Vec<String> = validate_pod_only(Some(&pod), true).into_iter().map(|e| e.message).collect();
        assert_eq!(
            only,
            vec![
                "spec.containers[0].image: Invalid value: \" busybox\": must not have leading or trailing whitespace",
                "spec.ephemeralContainers: Forbidden: cannot be set on create",
            ],
            "validateContainersOnlyForPod + ValidatePodCreate"
        );
        let t = json!({"restartPolicy": "Never", "dnsPolicy": "ClusterFirst", "containers": [container(json!({}))], "ephemeralContainers": [{"name": "e"}]});
        assert_eq!(
            validate_pod_spec(Some(&t), "spec.template.spec", true)[0].message,
            "spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template"
        );
    }

    /// ValidatePodUpdate: images, activeDeadlineSeconds and tolerations may change; others not.
    #[test]
    fn pod_update_table() {
        let old = json!({"spec": {"restartPolicy": "Never", "containers": [container(json!({}))]}});
        let mut image = old.clone();
        image["spec"]["containers"][0]["image"] = json!("busybox:2");
        image["spec"]["activeDeadlineSeconds"] = json!(10);
        assert!(validate_pod_update(&image, &old).is_empty());
        let mut bound = old.clone();
        bound["spec"]["nodeName"] = json!("node-1");
        assert!(validate_pod_update(&bound, &old).is_empty(), "binding from unset");
        let mut moved = bound.clone();
        moved["spec"]["nodeName"] = json!("node-2");
        let errs = validate_pod_update(&moved, &bound);
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].message.starts_with(&format!(
                "spec: Forbidden: pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}\n"
            )),
            "{}",
            errs[0].message
        );
        let mut more = old.clone();
        more["spec"]["containers"] = json!([container(json!({})), container(json!({"name": "d"}))]);
        assert_eq!(
            validate_pod_update(&more, &old)[0].message,
            "spec.containers: Forbidden: pod updates may not add or remove containers"
        );
    }

    /// pkg/api/pod/warnings.go fractional byte values; strategy WarningsOnCreate name warning.
    #[test]
    fn warnings() {
        let s = spec(vec![container(
            json!({"resources": {"requests": {"memory": "1500m", "cpu": "1500m"}, "limits": {"memory": "2Gi"}}}),
        )]);
        assert_eq!(
            pod_spec_warnings(Some(&s), "spec.template.spec"),
            vec![
                "spec.template.spec.containers[0].resources.requests[memory]: fractional byte value \"1500m\" is invalid, must be an integer"
            ]
        );
        assert_eq!(
            name_warning("a.b", "Pod names and hostnames").as_deref(),
            Some(
                "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]"
            )
        );
        assert_eq!(name_warning("ab", "Pod names and hostnames"), None);
    }
}
