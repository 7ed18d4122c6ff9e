//! batch/v1 Job: defaults (pkg/apis/batch/v1/defaults.go), the registry strategy's
//! PrepareForCreate / PrepareForUpdate / generateSelector (pkg/registry/batch/job/strategy.go)
//! and ValidateJob / ValidateJobSpec / ValidateJobUpdate (pkg/apis/batch/validation).

use serde_json::{Value, json};

use super::common::*;
use super::pod::{default_pod_template, validate_pod_template};
use crate::field_error::FieldError;

pub(crate) const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
pub(crate) const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
pub(crate) const LEGACY_JOB_NAME_LABEL: &str = "job-name";
pub(crate) const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";

const MAX_PARALLELISM_FOR_INDEXED_JOB: i64 = 100_000;
const MAX_FAILED_INDEXES_FOR_INDEXED_JOB: i64 = 100_000;
const COMPLETIONS_SOFT_LIMIT: i64 = 100_000;
const PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_POD_FAILURE_POLICY_RULES: usize = 20;
const MAX_ON_EXIT_CODES_VALUES: usize = 255;
const MAX_ON_POD_CONDITIONS_PATTERNS: usize = 20;
const MAX_MANAGED_BY_LENGTH: usize = 63;
const MAX_SUCCEEDED_INDEXES_LENGTH: usize = 64 * 1024;
const MAX_SUCCESS_POLICY_RULES: usize = 20;

// ---------------------------------------------------------------------------------------------
// Defaults.

/// `SetObjectDefaults_Job`: SetDefaults_Job, the pod template's defaults, and the
/// onPodConditions pattern status.
pub(crate) fn default_job(job: &mut Value) {
    let Some(obj) = job.as_object_mut() else { return };
    let template_labels = obj
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"))
        .filter(|l| l.is_object())
        .cloned();
    let Some(spec) = child_obj(obj, "spec") else { return };
    let completions_set = spec.get("completions").is_some_and(|v| !v.is_null());
    let parallelism_set = spec.get("parallelism").is_some_and(|v| !v.is_null());
    if !completions_set && !parallelism_set {
        spec.insert("completions".to_string(), json!(1));
    }
    set_default(spec, "parallelism", json!(1));
    let per_index = spec.get("backoffLimitPerIndex").is_some_and(|v| !v.is_null());
    set_default(spec, "backoffLimit", json!(if per_index { i32::MAX } else { 6 }));
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    let has_pfp = spec.get("podFailurePolicy").is_some_and(|v| !v.is_null());
    set_default(spec, "podReplacementPolicy", json!(if has_pfp { "Failed" } else { "TerminatingOrFailed" }));
    set_default(spec, "manualSelector", json!(false));
    default_job_spec_types(spec);
    if let Some(labels) = template_labels
        && let Some(meta) = child_obj(obj, "metadata")
        && meta.get("labels").and_then(Value::as_object).is_none_or(|m| m.is_empty())
    {
        meta.insert("labels".to_string(), labels);
    }
}

/// Defaults that hang off the types inside a JobSpec (so they also apply to a CronJob's
/// jobTemplate): the pod template's and the onPodConditions pattern status `True`.
pub(crate) fn default_job_spec_types(spec: &mut Obj) {
    if let Some(t) = spec.get_mut("template") {
        default_pod_template(t);
    }
    if let Some(pfp) = spec.get_mut("podFailurePolicy").and_then(Value::as_object_mut) {
        each_obj_in(pfp, "rules", |rule| {
            each_obj_in(rule, "onPodConditions", |p| {
                if p.get("status").and_then(Value::as_str).is_none_or(str::is_empty) {
                    p.insert("status".to_string(), json!("True"));
                }
            })
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Strategy.

/// PrepareForCreate: selector and labels unless manualSelector, status cleared, generation 1.
pub(crate) fn prepare_for_create(job: &mut Value) {
    if at_bool(job, &["spec", "manualSelector"]) != Some(true) {
        generate_selector(job);
    }
    let Some(obj) = job.as_object_mut() else { return };
    obj.insert("status".to_string(), json!({}));
    if let Some(meta) = child_obj(obj, "metadata") {
        meta.insert("generation".to_string(), json!(1));
    }
}

/// generateSelector: the four template labels (kept when the user set them) and
/// `spec.selector.matchLabels[batch.kubernetes.io/controller-uid]`.
fn generate_selector(job: &mut Value) {
    let name = at_str(job, &["metadata", "name"]).unwrap_or("").to_string();
    let uid = at_str(job, &["metadata", "uid"]).unwrap_or("").to_string();
    let Some(spec) = job.as_object_mut().and_then(|o| child_obj(o, "spec")) else { return };
    if let Some(labels) = child_obj(spec, "template")
        .and_then(|t| child_obj(t, "metadata"))
        .and_then(|m| child_obj(m, "labels"))
    {
        for key in [LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL] {
            labels.entry(key.to_string()).or_insert_with(|| json!(name));
        }
        for key in [LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL] {
            labels.entry(key.to_string()).or_insert_with(|| json!(uid));
        }
    }
    if let Some(ml) = child_obj(spec, "selector").and_then(|s| child_obj(s, "matchLabels")) {
        ml.entry(CONTROLLER_UID_LABEL.to_string()).or_insert_with(|| json!(uid));
    }
}

/// Validation options the strategy derives from the new and old Job (`validationOptionsForJob`,
/// 1.37: ElasticIndexedJob GA, MutableSchedulingDirectivesForSuspendedJobs and
/// MutablePodResourcesForSuspendedJobs beta-on, with the k/k#139287 fix).
#[derive(Debug, Clone, Copy)]
pub(crate) struct JobOpts {
    pub require_prefixed_labels: bool,
    pub allow_mutable_scheduling_directives: bool,
    pub allow_mutable_pod_resources: bool,
    pub allow_invalid_label_value_in_selector: bool,
}

impl JobOpts {
    pub(crate) fn for_create() -> Self {
        JobOpts {
            require_prefixed_labels: true,
            allow_mutable_scheduling_directives: false,
            allow_mutable_pod_resources: false,
            allow_invalid_label_value_in_selector: false,
        }
    }

    pub(crate) fn for_update(old: &Value) -> Self {
        let suspended = at_bool(old, &["spec", "suspend"]) == Some(true);
        let not_started = at(old, &["status", "startTime"]).is_none();
        let suspended_cond = is_condition_true(old, "Suspended");
        let no_active = at_i64(old, &["status", "active"]).unwrap_or(0) == 0;
        let mutable = suspended && (not_started || (suspended_cond && no_active));
        let labels = at_obj(old, &["spec", "template", "metadata", "labels"]);
        let has = |k: &str| labels.is_some_and(|l| l.contains_key(k));
        JobOpts {
            require_prefixed_labels: has(JOB_NAME_LABEL) && has(CONTROLLER_UID_LABEL),
            allow_mutable_scheduling_directives: mutable,
            allow_mutable_pod_resources: mutable,
            allow_invalid_label_value_in_selector: selector_has_invalid_label_value(at(
                old,
                &["spec", "selector"],
            )),
        }
    }
}

pub(crate) fn is_condition_true(job: &Value, cond_type: &str) -> bool {
    at_arr(job, &["status", "conditions"])
        .iter()
        .any(|c| at_str(c, &["type"]) == Some(cond_type) && at_str(c, &["status"]) == Some("True"))
}

// ---------------------------------------------------------------------------------------------
// WarningsForJobSpec (pkg/api/job/warnings.go), without the pod template's part.

/// `parallelismSoftLimitForUnlimitedCompletions` (with `COMPLETIONS_SOFT_LIMIT` above).
const PARALLELISM_SOFT_LIMIT: i64 = 10_000;

/// The Indexed-Job size warning for the job spec at `path` (`spec` or `spec.jobTemplate.spec`).
pub(crate) fn warnings_for_job_spec(spec: Option<&Value>, path: &str) -> Vec<String> {
    let Some(spec) = spec else { return Vec::new() };
    let indexed = at_str(spec, &["completionMode"]) == Some("Indexed");
    if indexed
        && at_i64(spec, &["completions"]).unwrap_or(0) > COMPLETIONS_SOFT_LIMIT
        && at_i64(spec, &["parallelism"]).unwrap_or(0) > PARALLELISM_SOFT_LIMIT
    {
        return vec![format!(
            "{path}: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail"
        )];
    }
    Vec::new()
}

// ---------------------------------------------------------------------------------------------
// ValidateJob.

pub(crate) fn validate_job(job: &Value, opts: &JobOpts) -> Errs {
    let mut errs = validate_generated_selector(job, opts.require_prefixed_labels);
    let null = Value::Null;
    let spec = at(job, &["spec"]).unwrap_or(&null);
    errs.extend(validate_job_spec(spec, "spec", opts));
    let indexed = at_str(spec, &["completionMode"]) == Some("Indexed");
    if indexed && let Some(c) = at_i64(spec, &["completions"]).filter(|c| *c > 0) {
        let name = at_str(job, &["metadata", "name"]).unwrap_or("");
        let host = format!("{name}-{}", c - 1);
        if !is_dns1123_label(&host).is_empty() {
            errs.push(FieldError::invalid(
                "metadata.name",
                &Value::from(name),
                &format!("will not able to create pod with invalid DNS label: {host}"),
            ));
        }
    }
    errs
}

fn validate_generated_selector(job: &Value, validate_batch_labels: bool) -> Errs {
    let mut errs = Errs::new();
    if at_bool(job, &["spec", "manualSelector"]) == Some(true) {
        return errs;
    }
    let Some(selector) = at(job, &["spec", "selector"]) else { return errs };
    let uid = at_str(job, &["metadata", "uid"]).unwrap_or("");
    let name = at_str(job, &["metadata", "name"]).unwrap_or("");
    if uid.is_empty() {
        errs.push(FieldError::required("metadata.uid", ""));
    }
    let labels_value = at(job, &["spec", "template", "metadata", "labels"]);
    let labels = labels_value.and_then(Value::as_object);
    let mut has_label = |key: &str, expected: &str| {
        let field = format!("spec.template.metadata.labels[{key}]");
        let detail = format!("must be '{expected}'");
        match labels.and_then(|l| l.get(key)) {
            None => errs.push(FieldError::required(field, &detail)),
            Some(v) if v.as_str() != Some(expected) => {
                errs.push(invalid_go(field, &go_string_map(labels_value), &detail))
            }
            Some(_) => {}
        }
    };
    has_label(LEGACY_CONTROLLER_UID_LABEL, uid);
    has_label(LEGACY_JOB_NAME_LABEL, name);
    let mut expected = Obj::new();
    if validate_batch_labels {
        has_label(CONTROLLER_UID_LABEL, uid);
        has_label(JOB_NAME_LABEL, name);
        expected.insert(CONTROLLER_UID_LABEL.to_string(), json!(uid));
        expected.insert(JOB_NAME_LABEL.to_string(), json!(name));
    }
    expected.insert(LEGACY_CONTROLLER_UID_LABEL.to_string(), json!(uid));
    expected.insert(LEGACY_JOB_NAME_LABEL.to_string(), json!(name));
    if selector_matches(Some(selector), Some(&expected)) == Some(false) {
        errs.push(invalid_go("spec.selector", &go_selector(selector), "`selector` not auto-generated"));
    }
    errs
}

/// `ValidateJobSpec`: validateJobSpec plus the selector.
pub(crate) fn validate_job_spec(spec: &Value, path: &str, opts: &JobOpts) -> Errs {
    let mut errs = validate_job_spec_fields(spec, path);
    let selector = at(spec, &["selector"]);
    match selector {
        None => errs.push(FieldError::required(format!("{path}.selector"), "")),
        Some(sel) => errs.extend(validate_label_selector(
            sel,
            &format!("{path}.selector"),
            opts.allow_invalid_label_value_in_selector,
        )),
    }
    let labels = at(spec, &["template", "metadata", "labels"]);
    if selector_matches(selector, labels.and_then(Value::as_object)) == Some(false) {
        errs.push(invalid_go(
            format!("{path}.template.metadata.labels"),
            &go_string_map(labels),
            "`selector` does not match template `labels`",
        ));
    }
    errs
}

/// `validateJobSpec` (shared with CronJob job templates).
pub(crate) fn validate_job_spec_fields(spec: &Value, path: &str) -> Errs {
    let mut errs = Errs::new();
    let f = |name: &str| format!("{path}.{name}");
    for key in
        ["parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished"]
    {
        nonnegative(spec, &[key], &f(key), &mut errs);
    }
    nonnegative(spec, &["backoffLimitPerIndex"], &f("backoffLimitPerIndex"), &mut errs);
    let parallelism = at_i64(spec, &["parallelism"]);
    let completions = at_i64(spec, &["completions"]);
    let per_index = at_i64(spec, &["backoffLimitPerIndex"]);
    let max_failed = at_i64(spec, &["maxFailedIndexes"]);
    if max_failed.is_some() {
        nonnegative(spec, &["maxFailedIndexes"], &f("maxFailedIndexes"), &mut errs);
        if per_index.is_none() {
            errs.push(FieldError::required(f("backoffLimitPerIndex"), "when maxFailedIndexes is specified"));
        }
    }
    if let Some(mb) = at_str(spec, &["managedBy"]) {
        errs.extend(is_domain_prefixed_path(&f("managedBy"), mb));
        if mb.len() > MAX_MANAGED_BY_LENGTH {
            errs.push(FieldError::too_long(f("managedBy"), MAX_MANAGED_BY_LENGTH));
        }
    }
    let mode = at_str(spec, &["completionMode"]);
    if let Some(mode) = mode {
        if mode != "NonIndexed" && mode != "Indexed" {
            errs.push(FieldError::not_supported(
                f("completionMode"),
                &Value::from(mode),
                &["NonIndexed", "Indexed"],
            ));
        }
        if mode == "Indexed" {
            if completions.is_none() {
                errs.push(FieldError::required(f("completions"), "when completion mode is Indexed"));
            }
            if let Some(p) = parallelism.filter(|p| *p > MAX_PARALLELISM_FOR_INDEXED_JOB) {
                errs.push(FieldError::invalid(
                    f("parallelism"),
                    &Value::from(p),
                    &format!("must be less than or equal to {MAX_PARALLELISM_FOR_INDEXED_JOB} when completion mode is Indexed"),
                ));
            }
            if let (Some(c), Some(m)) = (completions, max_failed)
                && m > c
            {
                errs.push(FieldError::invalid(
                    f("maxFailedIndexes"),
                    &Value::from(m),
                    "must be less than or equal to completions",
                ));
            }
            if let Some(m) = max_failed.filter(|m| *m > MAX_FAILED_INDEXES_FOR_INDEXED_JOB) {
                errs.push(FieldError::invalid(
                    f("maxFailedIndexes"),
                    &Value::from(m),
                    &format!("must be less than or equal to {MAX_FAILED_INDEXES_FOR_INDEXED_JOB}"),
                ));
            }
            if completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT) && per_index.is_some() {
                if max_failed.is_none() {
                    errs.push(FieldError::required(
                        f("maxFailedIndexes"),
                        &format!("must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"),
                    ));
                }
                let suffix = format!(
                    "when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
                );
                if let Some(p) = parallelism.filter(|p| *p > PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS) {
                    errs.push(FieldError::invalid(
                        f("parallelism"),
                        &Value::from(p),
                        &format!(
                            "must be less than or equal to {PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS} {suffix}"
                        ),
                    ));
                }
                if let Some(m) = max_failed.filter(|m| *m > MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS) {
                    errs.push(FieldError::invalid(
                        f("maxFailedIndexes"),
                        &Value::from(m),
                        &format!("must be less than or equal to {MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS} {suffix}"),
                    ));
                }
            }
        }
    }
    if mode.is_none_or(|m| m == "NonIndexed") {
        if let Some(b) = per_index {
            errs.push(FieldError::invalid(
                f("backoffLimitPerIndex"),
                &Value::from(b),
                "requires indexed completion mode",
            ));
        }
        if let Some(m) = max_failed {
            errs.push(FieldError::invalid(
                f("maxFailedIndexes"),
                &Value::from(m),
                "requires indexed completion mode",
            ));
        }
    }
    let pfp = at(spec, &["podFailurePolicy"]);
    if let Some(pfp) = pfp {
        errs.extend(validate_pod_failure_policy(spec, pfp, &f("podFailurePolicy")));
    }
    if let Some(sp) = at(spec, &["successPolicy"]) {
        if mode != Some("Indexed") {
            errs.push(FieldError::invalid(f("successPolicy"), sp, "requires indexed completion mode"));
        } else {
            errs.extend(validate_success_policy(sp, completions, &f("successPolicy")));
        }
    }
    if let Some(prp) = at_str(spec, &["podReplacementPolicy"]) {
        if pfp.is_some() {
            if prp != "Failed" {
                errs.push(FieldError::not_supported(
                    f("podReplacementPolicy"),
                    &Value::from(prp),
                    &["Failed"],
                ));
            }
        } else if prp != "Failed" && prp != "TerminatingOrFailed" {
            errs.push(FieldError::not_supported(
                f("podReplacementPolicy"),
                &Value::from(prp),
                &["Failed", "TerminatingOrFailed"],
            ));
        }
    }
    errs.extend(validate_pod_template(at(spec, &["template"]), &f("template")));
    let rp_field = f("template.spec.restartPolicy");
    match at_str(spec, &["template", "spec", "restartPolicy"]).unwrap_or("") {
        "" | "Always" => errs.push(FieldError::required(rp_field, "valid values: \"OnFailure\", \"Never\"")),
        "OnFailure" if pfp.is_some() => errs.push(FieldError::invalid(
            rp_field,
            &Value::from("OnFailure"),
            "only \"Never\" is supported when podFailurePolicy is specified",
        )),
        "OnFailure" | "Never" => {}
        other => errs.push(FieldError::not_supported(rp_field, &Value::from(other), &["OnFailure", "Never"])),
    }
    errs
}

/// `IsDomainPrefixedPath`.
fn is_domain_prefixed_path(field: &str, dp: &str) -> Errs {
    let mut errs = Errs::new();
    if dp.is_empty() {
        errs.push(FieldError::required(field, ""));
        return errs;
    }
    let Some((host, path)) = dp.split_once('/').filter(|(h, p)| !h.is_empty() && !p.is_empty()) else {
        errs.push(FieldError::invalid(
            field,
            &Value::from(dp),
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
        return errs;
    };
    for msg in is_dns1123_subdomain(host) {
        errs.push(FieldError::invalid(field, &Value::from(host), &msg));
    }
    let path_ok = path.chars().all(|c| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c));
    if !path_ok {
        errs.push(FieldError::invalid(
            field,
            &Value::from(path),
            &regex_error("Invalid path", "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+", &[]),
        ));
    }
    errs
}

fn validate_pod_failure_policy(spec: &Value, pfp: &Value, path: &str) -> Errs {
    let mut errs = Errs::new();
    let rules_path = format!("{path}.rules");
    let rules = at_arr(pfp, &["rules"]);
    if rules.len() > MAX_POD_FAILURE_POLICY_RULES {
        errs.push(FieldError::too_many(&rules_path, rules.len(), MAX_POD_FAILURE_POLICY_RULES));
    }
    let names: Vec<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|k| at_arr(spec, &["template", "spec", k]))
        .filter_map(|c| at_str(c, &["name"]))
        .collect();
    let per_index = at(spec, &["backoffLimitPerIndex"]).is_some();
    for (i, rule) in rules.iter().enumerate() {
        let rule_path = format!("{rules_path}[{i}]");
        let action_path = format!("{rule_path}.action");
        match at_str(rule, &["action"]).unwrap_or("") {
            "" => errs.push(FieldError::required(
                action_path,
                "valid values: [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]",
            )),
            "FailIndex" => {
                if !per_index {
                    errs.push(FieldError::invalid(
                        action_path,
                        &Value::from("FailIndex"),
                        "requires the backoffLimitPerIndex to be set",
                    ));
                }
            }
            "Count" | "FailJob" | "Ignore" => {}
            other => errs.push(FieldError::not_supported(
                action_path,
                &Value::from(other),
                &["Count", "FailIndex", "FailJob", "Ignore"],
            )),
        }
        let on_exit = at(rule, &["onExitCodes"]);
        let on_conds = at_arr(rule, &["onPodConditions"]);
        if let Some(req) = on_exit {
            errs.extend(validate_on_exit_codes(req, &format!("{rule_path}.onExitCodes"), &names));
        }
        if !on_conds.is_empty() {
            let cpath = format!("{rule_path}.onPodConditions");
            if on_conds.len() > MAX_ON_POD_CONDITIONS_PATTERNS {
                errs.push(FieldError::too_many(&cpath, on_conds.len(), MAX_ON_POD_CONDITIONS_PATTERNS));
            }
            for (j, pattern) in on_conds.iter().enumerate() {
                let ppath = format!("{cpath}[{j}]");
                let t = at_str(pattern, &["type"]).unwrap_or("");
                for msg in is_qualified_name(t) {
                    errs.push(FieldError::invalid(format!("{ppath}.type"), &Value::from(t), &msg));
                }
                match at_str(pattern, &["status"]).unwrap_or("") {
                    "" => errs.push(FieldError::required(
                        format!("{ppath}.status"),
                        "valid values: [\"False\" \"True\" \"Unknown\"]",
                    )),
                    "False" | "True" | "Unknown" => {}
                    other => errs.push(FieldError::not_supported(
                        format!("{ppath}.status"),
                        &Value::from(other),
                        &["False", "True", "Unknown"],
                    )),
                }
            }
        }
        if on_exit.is_some() && !on_conds.is_empty() {
            errs.push(invalid_omit(
                &rule_path,
                "specifying both OnExitCodes and OnPodConditions is not supported",
            ));
        }
        if on_exit.is_none() && on_conds.is_empty() {
            errs.push(invalid_omit(
                &rule_path,
                "specifying one of OnExitCodes and OnPodConditions is required",
            ));
        }
    }
    errs
}

fn validate_on_exit_codes(req: &Value, path: &str, names: &[&str]) -> Errs {
    let mut errs = Errs::new();
    let op = at_str(req, &["operator"]).unwrap_or("");
    match op {
        "" => errs.push(FieldError::required(format!("{path}.operator"), "valid values: [\"In\" \"NotIn\"]")),
        "In" | "NotIn" => {}
        other => errs.push(FieldError::not_supported(
            format!("{path}.operator"),
            &Value::from(other),
            &["In", "NotIn"],
        )),
    }
    if let Some(cn) = at_str(req, &["containerName"])
        && !names.contains(&cn)
    {
        errs.push(FieldError::invalid(
            format!("{path}.containerName"),
            &Value::from(cn),
            "must be one of the container or initContainer names in the pod template",
        ));
    }
    let values_path = format!("{path}.values");
    let raw_values = at(req, &["values"]);
    let values: Vec<i64> = at_arr(req, &["values"]).iter().filter_map(Value::as_i64).collect();
    if values.is_empty() {
        errs.push(invalid_go(&values_path, &go_int32_slice(raw_values), "at least one value is required"));
    } else if values.len() > MAX_ON_EXIT_CODES_VALUES {
        errs.push(FieldError::too_many(&values_path, values.len(), MAX_ON_EXIT_CODES_VALUES));
    }
    let mut ordered = true;
    let mut seen = std::collections::HashSet::new();
    for (j, v) in values.iter().enumerate() {
        let vpath = format!("{values_path}[{j}]");
        if op == "In" && *v == 0 {
            errs.push(FieldError::invalid(&vpath, &Value::from(0), "must not be 0 for the In operator"));
        }
        if !seen.insert(*v) {
            errs.push(FieldError::duplicate(&vpath, &Value::from(*v)));
        }
        if j > 0 && values[j - 1] > *v {
            ordered = false;
        }
    }
    if !ordered {
        errs.push(invalid_go(&values_path, &go_int32_slice(raw_values), "must be ordered"));
    }
    errs
}

fn validate_success_policy(sp: &Value, completions: Option<i64>, path: &str) -> Errs {
    let mut errs = Errs::new();
    let rules_path = format!("{path}.rules");
    let rules = at_arr(sp, &["rules"]);
    if rules.is_empty() {
        errs.push(FieldError::required(
            &rules_path,
            "at least one rules must be specified when the successPolicy is specified",
        ));
    }
    if rules.len() > MAX_SUCCESS_POLICY_RULES {
        errs.push(FieldError::too_many(&rules_path, rules.len(), MAX_SUCCESS_POLICY_RULES));
    }
    for (i, rule) in rules.iter().enumerate() {
        let rule_path = format!("{rules_path}[{i}]");
        let count = at_i64(rule, &["succeededCount"]);
        let indexes = at_str(rule, &["succeededIndexes"]);
        if count.is_none() && indexes.is_none() {
            errs.push(FieldError::required(
                &rule_path,
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
        let mut total = 0;
        if let Some(ix) = indexes {
            let ipath = format!("{rule_path}.succeededIndexes");
            if ix.len() > MAX_SUCCEEDED_INDEXES_LENGTH {
                errs.push(FieldError::too_long(&ipath, MAX_SUCCEEDED_INDEXES_LENGTH));
            }
            // Upstream dereferences spec.completions here (nil only for an already invalid spec).
            if let Some(c) = completions {
                match validate_indexes_format(ix, c) {
                    Ok(t) => total = t,
                    Err(e) => errs.push(FieldError::invalid(
                        &ipath,
                        &Value::from(ix),
                        &format!("error parsing succeededIndexes: {e}"),
                    )),
                }
            }
        }
        if let Some(n) = count {
            let cpath = format!("{rule_path}.succeededCount");
            nonnegative(rule, &["succeededCount"], &cpath, &mut errs);
            if let Some(c) = completions
                && n > c
            {
                errs.push(FieldError::invalid(
                    &cpath,
                    &Value::from(n),
                    &format!("must be less than or equal to {c} (the number of specified completions)"),
                ));
            }
            if indexes.is_some() && n > total {
                errs.push(FieldError::invalid(
                    &cpath,
                    &Value::from(n),
                    &format!("must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)"),
                ));
            }
        }
    }
    errs
}

/// `validateIndexesFormat`: the number of indexes, or the parse error.
pub(crate) fn validate_indexes_format(s: &str, completions: i64) -> Result<i64, String> {
    if s.is_empty() {
        return Ok(0);
    }
    let mut last: Option<i64> = None;
    let mut total = 0;
    for interval in s.split(',') {
        let (x, y) = parse_index_interval(interval, completions)?;
        if let Some(l) = last
            && l >= x
        {
            return Err(format!("non-increasing order, previous: {l}, current: {x}"));
        }
        total += y - x + 1;
        last = Some(y);
    }
    Ok(total)
}

/// `parseIndexInterval`.
pub(crate) fn parse_index_interval(s: &str, completions: i64) -> Result<(i64, i64), String> {
    let parts: Vec<&str> = s.split('-').collect();
    if parts.len() > 2 {
        return Err(format!(
            "the fragment {} violates the requirement that an index interval can have at most two parts separated by '-'",
            go_quote(s)
        ));
    }
    let parse = |p: &str| {
        super::cron_syntax::go_atoi(p)
            .map_err(|_| format!("cannot convert string to integer for index: {}", go_quote(p)))
    };
    let x = parse(parts[0])?;
    if x >= completions {
        return Err(format!("too large index: {}", go_quote(parts[0])));
    }
    if parts.len() > 1 {
        let y = parse(parts[1])?;
        if y >= completions {
            return Err(format!("too large index: {}", go_quote(parts[1])));
        }
        if x >= y {
            return Err(format!("non-increasing order, previous: {x}, current: {y}"));
        }
        return Ok((x, y));
    }
    Ok((x, x))
}

// ---------------------------------------------------------------------------------------------
// ValidateJobUpdate.

pub(crate) fn validate_job_update(new: &Value, old: &Value, opts: &JobOpts) -> Errs {
    let null = Value::Null;
    let spec = at(new, &["spec"]).unwrap_or(&null);
    let old_spec = at(old, &["spec"]).unwrap_or(&null);
    // ValidateJobSpecUpdate runs ValidateJobSpec again (upstream reports spec errors twice).
    let mut errs = validate_job_spec(spec, "spec", opts);
    errs.extend(validate_completions_update(spec, old_spec));
    if !pointer_eq(at(spec, &["selector"]), at(old_spec, &["selector"])) {
        let rendered = at(spec, &["selector"]).map_or_else(|| "null".to_string(), go_selector);
        errs.push(invalid_go("spec.selector", &rendered, FIELD_IMMUTABLE_ERROR_MSG));
    }
    errs.extend(validate_pod_template_update(spec, old_spec, opts));
    for key in ["completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"] {
        if !pointer_eq(at(spec, &[key]), at(old_spec, &[key])) {
            errs.push(FieldError::invalid(
                format!("spec.{key}"),
                at(spec, &[key]).unwrap_or(&null),
                FIELD_IMMUTABLE_ERROR_MSG,
            ));
        }
    }
    errs
}

/// `validateCompletions` with ElasticIndexedJob: completions may change only for Indexed Jobs,
/// and only in tandem with parallelism.
fn validate_completions_update(spec: &Value, old_spec: &Value) -> Errs {
    let mut errs = Errs::new();
    let new_c = at(spec, &["completions"]);
    let indexed = at_str(spec, &["completionMode"]) == Some("Indexed");
    if !indexed {
        if !pointer_eq(new_c, at(old_spec, &["completions"])) {
            errs.push(FieldError::invalid(
                "spec.completions",
                new_c.unwrap_or(&Value::Null),
                FIELD_IMMUTABLE_ERROR_MSG,
            ));
        }
        return errs;
    }
    if pointer_eq(new_c, at(old_spec, &["completions"])) {
        return errs;
    }
    let Some(c) = new_c else { return errs };
    if Some(c) != at(spec, &["parallelism"]) {
        errs.push(FieldError::invalid(
            "spec.completions",
            c,
            "can only be modified in tandem with spec.parallelism",
        ));
    }
    errs
}

/// `validatePodTemplateUpdate`: the template is immutable, except that a suspended Job (not
/// started, or JobSuspended=True with no active pods) may change node affinity, node selector,
/// tolerations, scheduling gates, template labels and annotations, and container resources.
fn validate_pod_template_update(spec: &Value, old_spec: &Value, opts: &JobOpts) -> Errs {
    let mut errs = Errs::new();
    let new_t = at(spec, &["template"]);
    let old_t = at(old_spec, &["template"]);
    if !opts.allow_mutable_scheduling_directives {
        if !semantic_eq(new_t, old_t) {
            errs.push(FieldError::invalid(
                "spec.template",
                new_t.unwrap_or(&Value::Null),
                FIELD_IMMUTABLE_ERROR_MSG,
            ));
        }
        return errs;
    }
    let null = Value::Null;
    let new_t = new_t.unwrap_or(&null);
    let mut munged = old_t.cloned().unwrap_or_else(|| json!({}));
    if let Some(m) = munged.as_object_mut() {
        let copy = |dst: &mut Obj, key: &str, src: Option<&Value>| match src {
            Some(v) => {
                dst.insert(key.to_string(), v.clone());
            }
            None => {
                dst.remove(key);
            }
        };
        if let Some(meta) = child_obj(m, "metadata") {
            copy(meta, "labels", at(new_t, &["metadata", "labels"]));
            copy(meta, "annotations", at(new_t, &["metadata", "annotations"]));
        }
        if let Some(s) = child_obj(m, "spec") {
            let new_aff = at(new_t, &["spec", "affinity"]);
            let new_node_aff = at(new_t, &["spec", "affinity", "nodeAffinity"]);
            match (new_aff.is_some(), s.get("affinity").is_some_and(|a| !a.is_null())) {
                (false, true) => {
                    if let Some(a) = s.get_mut("affinity").and_then(Value::as_object_mut) {
                        a.remove("nodeAffinity");
                        if a.values().all(Value::is_null) {
                            s.remove("affinity");
                        }
                    }
                }
                (true, false) => {
                    let mut a = Obj::new();
                    if let Some(na) = new_node_aff {
                        a.insert("nodeAffinity".to_string(), na.clone());
                    }
                    s.insert("affinity".to_string(), Value::Object(a));
                }
                (true, true) => {
                    if let Some(a) = s.get_mut("affinity").and_then(Value::as_object_mut) {
                        copy(a, "nodeAffinity", new_node_aff);
                    }
                }
                (false, false) => {}
            }
            for key in ["nodeSelector", "tolerations", "schedulingGates"] {
                copy(s, key, at(new_t, &["spec", key]));
            }
            if opts.allow_mutable_pod_resources {
                for key in ["containers", "initContainers"] {
                    let new_cs = at_arr(new_t, &["spec", key]);
                    if let Some(Value::Array(old_cs)) = s.get_mut(key)
                        && old_cs.len() == new_cs.len()
                    {
                        for (oc, nc) in old_cs.iter_mut().zip(new_cs) {
                            if let Some(oc) = oc.as_object_mut()
                                && oc.get("name") == nc.get("name")
                            {
                                copy(oc, "resources", at(nc, &["resources"]));
                            }
                        }
                    }
                }
            }
        }
    }
    if opts.allow_mutable_pod_resources {
        if !semantic_eq(at(new_t, &["metadata"]), at(&munged, &["metadata"])) {
            errs.push(FieldError::invalid("spec.template", new_t, FIELD_IMMUTABLE_ERROR_MSG));
        }
        if !semantic_eq(at(new_t, &["spec"]), at(&munged, &["spec"])) {
            errs.push(FieldError::invalid(
                "spec.template.spec",
                at(new_t, &["spec"]).unwrap_or(&null),
                FIELD_IMMUTABLE_ERROR_MSG,
            ));
        }
    } else if !semantic_eq(Some(new_t), Some(&munged)) {
        errs.push(FieldError::invalid("spec.template", new_t, FIELD_IMMUTABLE_ERROR_MSG));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::super::{admit_create, admit_update};
    use super::*;

    const UID: &str = "1a2b3c4d-0000-4000-8000-000000000001";

    fn job(spec: Value) -> Value {
        let mut spec = spec;
        if let Some(s) = spec.as_object_mut() {
            s.entry("template").or_insert_with(|| {
                json!({"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "abc", "image": "image"}]}})
            });
        }
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "myjob", "namespace": "default", "uid": UID}, "spec": spec})
    }

    fn create(spec: Value) -> Result<Value, Vec<String>> {
        let mut j = job(spec);
        admit_create("batch/v1", "Job", &mut j)
            .map_err(|e| e.into_iter().map(|e| e.message).collect::<Vec<_>>())?;
        Ok(j)
    }

    fn create_errs(spec: Value) -> Vec<String> {
        create(spec).err().unwrap_or_default()
    }

    // defaults_test.go TestSetDefaultJob.
    #[test]
    fn defaults_table() {
        struct Case {
            name: &'static str,
            spec: Value,
            want: Value,
        }
        let cases = [
            Case {
                name: "All unspecified -> sets all to default values",
                spec: json!({}),
                want: json!({"completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed", "suspend": false, "manualSelector": false, "podReplacementPolicy": "TerminatingOrFailed"}),
            },
            Case {
                name: "completions unspecified -> completions stays nil",
                spec: json!({"parallelism": 2}),
                want: json!({"completions": null, "parallelism": 2, "backoffLimit": 6}),
            },
            Case {
                name: "parallelism unspecified -> parallelism 1",
                spec: json!({"completions": 5}),
                want: json!({"completions": 5, "parallelism": 1}),
            },
            Case {
                name: "backoffLimitPerIndex specified -> backoffLimit MaxInt32",
                spec: json!({"completions": 2, "completionMode": "Indexed", "backoffLimitPerIndex": 1}),
                want: json!({"backoffLimit": 2147483647}),
            },
            Case {
                name: "podFailurePolicy -> podReplacementPolicy Failed, pattern status True",
                spec: json!({"podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image"}]}}}),
                want: json!({"podReplacementPolicy": "Failed", "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}}),
            },
        ];
        for c in cases {
            let j = create(c.spec).unwrap_or_else(|e| panic!("{}: {e:?}", c.name));
            for (k, v) in c.want.as_object().into_iter().flatten() {
                assert_eq!(j["spec"].get(k).unwrap_or(&Value::Null), v, "{}: {k}", c.name);
            }
        }
    }

    // strategy_test.go TestJobStrategy_PrepareForCreate / generateSelector and defaults_test.go
    // (labels from the template).
    #[test]
    fn prepare_for_create_generates_selector_and_labels() {
        let mut j = job(
            json!({"template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image:1"}]}}}),
        );
        j["status"] = json!({"active": 3});
        admit_create("batch/v1", "Job", &mut j).expect("valid");
        let labels = &j["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["job-name"], "myjob");
        assert_eq!(labels[JOB_NAME_LABEL], "myjob");
        assert_eq!(labels["controller-uid"], UID);
        assert_eq!(labels[CONTROLLER_UID_LABEL], UID);
        assert_eq!(j["spec"]["selector"], json!({"matchLabels": {CONTROLLER_UID_LABEL: UID}}));
        assert_eq!(j["metadata"]["labels"], json!({"a": "b"}));
        assert_eq!(j["status"], json!({}));
        assert_eq!(j["metadata"]["generation"], 1);
        let t = &j["spec"]["template"]["spec"];
        assert_eq!(t["dnsPolicy"], "ClusterFirst");
        assert_eq!(t["terminationGracePeriodSeconds"], 30);
        assert_eq!(t["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert!(t.get("enableServiceLinks").is_none(), "SetDefaults_Pod is not applied to templates");
    }

    // validation_test.go TestValidateJob errorCases (messages as apimachinery prints them).
    #[test]
    fn validate_job_error_cases() {
        let never = |extra: Value| {
            let mut s = json!({"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image"}]}}});
            if let (Some(s), Some(e)) = (s.as_object_mut(), extra.as_object()) {
                for (k, v) in e {
                    s.insert(k.clone(), v.clone());
                }
            }
            s
        };
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "spec.parallelism:must be greater than or equal to 0",
                json!({"parallelism": -1}),
                "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                "spec.completions:must be greater than or equal to 0",
                json!({"completions": -1}),
                "spec.completions: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                "spec.activeDeadlineSeconds:must be greater than or equal to 0",
                json!({"activeDeadlineSeconds": -1}),
                "spec.activeDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                "spec.backoffLimit:must be greater than or equal to 0",
                json!({"backoffLimit": -1}),
                "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                "spec.ttlSecondsAfterFinished: must be greater than or equal to 0",
                json!({"ttlSecondsAfterFinished": -1}),
                "spec.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                "spec.completions: Required value: when completion mode is Indexed",
                json!({"completionMode": "Indexed", "completions": null, "parallelism": 1}),
                "spec.completions: Required value: when completion mode is Indexed",
            ),
            (
                "spec.parallelism: must be less than or equal to 100000 when completion mode is Indexed",
                json!({"completionMode": "Indexed", "completions": 2, "parallelism": 100001}),
                "spec.parallelism: Invalid value: 100001: must be less than or equal to 100000 when completion mode is Indexed",
            ),
            (
                "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode",
                json!({"backoffLimitPerIndex": 1}),
                "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode",
            ),
            (
                "spec.maxFailedIndexes: Required value: must be specified when completions is above 100000",
                json!({"completionMode": "Indexed", "completions": 100001, "parallelism": 1, "backoffLimitPerIndex": 1}),
                "spec.maxFailedIndexes: Required value: must be specified when completions is above 100000",
            ),
            (
                "spec.parallelism: must be less than or equal to 10000 when completions are above 100000 and used with backoff limit per index",
                json!({"completionMode": "Indexed", "completions": 100001, "parallelism": 10001, "backoffLimitPerIndex": 1, "maxFailedIndexes": 1}),
                "spec.parallelism: Invalid value: 10001: must be less than or equal to 10000 when completions are above 100000 and used with backoff limit per index",
            ),
            (
                "spec.maxFailedIndexes: Invalid value: 11: must be less than or equal to completions",
                json!({"completionMode": "Indexed", "completions": 10, "backoffLimitPerIndex": 1, "maxFailedIndexes": 11}),
                "spec.maxFailedIndexes: Invalid value: 11: must be less than or equal to completions",
            ),
            (
                "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
                json!({"completionMode": "Indexed", "completions": 2, "maxFailedIndexes": 1}),
                "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
            ),
            (
                "spec.managedBy: Too long",
                json!({"managedBy": format!("example.com/{}", "a".repeat(60))}),
                "spec.managedBy: Too long: may not be more than 63 bytes",
            ),
            (
                "spec.managedBy: Invalid value: must be a domain-prefixed path",
                json!({"managedBy": "invalid custom controller name"}),
                "spec.managedBy: Invalid value: \"invalid custom controller name\": must be a domain-prefixed path (such as \"acme.io/foo\")",
            ),
            (
                "spec.completionMode: Unsupported value",
                json!({"completionMode": "Bogus"}),
                "spec.completionMode: Unsupported value: \"Bogus\": supported values: \"NonIndexed\", \"Indexed\"",
            ),
            (
                "spec.podReplacementPolicy: Unsupported value",
                json!({"podReplacementPolicy": "Bogus"}),
                "spec.podReplacementPolicy: Unsupported value: \"Bogus\": supported values: \"Failed\", \"TerminatingOrFailed\"",
            ),
            (
                "spec.successPolicy: Invalid value: requires indexed completion mode",
                json!({"successPolicy": {"rules": [{"succeededCount": 1}]}}),
                "spec.successPolicy: Invalid value: {\"rules\":[{\"succeededCount\":1}]}: requires indexed completion mode",
            ),
            (
                "spec.successPolicy.rules: at least one rules",
                json!({"completionMode": "Indexed", "completions": 3, "successPolicy": {"rules": []}}),
                "spec.successPolicy.rules: Required value: at least one rules must be specified when the successPolicy is specified",
            ),
            (
                "spec.successPolicy.rules[0].succeededIndexes: error parsing succeededIndexes: too large index",
                json!({"completionMode": "Indexed", "completions": 3, "successPolicy": {"rules": [{"succeededIndexes": "0-3"}]}}),
                "spec.successPolicy.rules[0].succeededIndexes: Invalid value: \"0-3\": error parsing succeededIndexes: too large index: \"3\"",
            ),
            (
                "spec.successPolicy.rules[0].succeededCount: must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)",
                json!({"completionMode": "Indexed", "completions": 5, "successPolicy": {"rules": [{"succeededIndexes": "0-1", "succeededCount": 3}]}}),
                "spec.successPolicy.rules[0].succeededCount: Invalid value: 3: must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)",
            ),
            (
                "spec.successPolicy.rules[0]: at least one of succeededCount or succeededIndexes",
                json!({"completionMode": "Indexed", "completions": 5, "successPolicy": {"rules": [{}]}}),
                "spec.successPolicy.rules[0]: Required value: at least one of succeededCount or succeededIndexes must be specified",
            ),
        ];
        for (name, extra, want) in cases {
            let errs = create_errs(never(extra));
            assert!(errs.iter().any(|e| e == want), "{name}: {errs:#?}");
        }
    }

    // validation_test.go TestValidateJob podFailurePolicy cases.
    #[test]
    fn pod_failure_policy_cases() {
        let pfp = |rules: Value| json!({"podFailurePolicy": {"rules": rules}, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image"}]}}});
        let many: Vec<Value> = (0..21)
            .map(|_| json!({"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}}))
            .collect();
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "too many rules",
                pfp(Value::Array(many)),
                "spec.podFailurePolicy.rules: Too many: 21: must have at most 20 items",
            ),
            (
                "too many values",
                pfp(
                    json!([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": (1..=256).collect::<Vec<i32>>()}}]),
                ),
                "spec.podFailurePolicy.rules[0].onExitCodes.values: Too many: 256: must have at most 255 items",
            ),
            (
                "FailIndex without backoffLimitPerIndex",
                pfp(json!([{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}])),
                "spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set",
            ),
            (
                "missing action",
                pfp(json!([{"onExitCodes": {"operator": "In", "values": [1]}}])),
                "spec.podFailurePolicy.rules[0].action: Required value: valid values: [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]",
            ),
            (
                "unknown action",
                pfp(json!([{"action": "UnknownAction", "onExitCodes": {"operator": "In", "values": [1]}}])),
                "spec.podFailurePolicy.rules[0].action: Unsupported value: \"UnknownAction\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
            ),
            (
                "zero with In",
                pfp(json!([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0, 1]}}])),
                "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator",
            ),
            (
                "duplicate value",
                pfp(json!([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1, 1]}}])),
                "spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Duplicate value: 1",
            ),
            (
                "not ordered",
                pfp(json!([{"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [2, 1]}}])),
                "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: []int32{2, 1}: must be ordered",
            ),
            (
                "empty values",
                pfp(json!([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": []}}])),
                "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: []int32{}: at least one value is required",
            ),
            (
                "unknown container",
                pfp(
                    json!([{"action": "FailJob", "onExitCodes": {"containerName": "x", "operator": "In", "values": [1]}}]),
                ),
                "spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value: \"x\": must be one of the container or initContainer names in the pod template",
            ),
            (
                "both requirements",
                pfp(
                    json!([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}, "onPodConditions": [{"type": "DisruptionTarget"}]}]),
                ),
                "spec.podFailurePolicy.rules[0]: Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
            ),
            (
                "no requirement",
                pfp(json!([{"action": "FailJob"}])),
                "spec.podFailurePolicy.rules[0]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
            ),
            (
                "bad pattern status",
                pfp(
                    json!([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "Bogus"}]}]),
                ),
                "spec.podFailurePolicy.rules[0].onPodConditions[0].status: Unsupported value: \"Bogus\": supported values: \"False\", \"True\", \"Unknown\"",
            ),
            (
                "OnFailure with podFailurePolicy",
                json!({"podFailurePolicy": {"rules": []}, "template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "abc", "image": "image"}]}}}),
                "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified",
            ),
            (
                "podReplacementPolicy TerminatingOrFailed with podFailurePolicy",
                json!({"podReplacementPolicy": "TerminatingOrFailed", "podFailurePolicy": {"rules": []}, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image"}]}}}),
                "spec.podReplacementPolicy: Unsupported value: \"TerminatingOrFailed\": supported values: \"Failed\"",
            ),
        ];
        for (name, spec, want) in cases {
            let errs = create_errs(spec);
            assert!(errs.iter().any(|e| e == want), "{name}: {errs:#?}");
        }
        // FailIndex with backoffLimitPerIndex on an Indexed Job is fine.
        let ok = json!({"completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": 1,
            "podFailurePolicy": {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}]},
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image"}]}}});
        assert_eq!(create_errs(ok), Vec::<String>::new());
    }

    // validation_test.go TestValidateJob: restartPolicy, selector and generated-label cases.
    #[test]
    fn restart_policy_and_selector_cases() {
        let errs =
            create_errs(json!({"template": {"spec": {"containers": [{"name": "abc", "image": "image"}]}}}));
        assert_eq!(
            errs,
            vec![
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
                    .to_string()
            ]
        );
        let errs = create_errs(
            json!({"template": {"spec": {"restartPolicy": "Bogus", "containers": [{"name": "abc", "image": "image"}]}}}),
        );
        assert!(errs.contains(&"spec.template.spec.restartPolicy: Unsupported value: \"Bogus\": supported values: \"OnFailure\", \"Never\"".to_string()), "{errs:#?}");

        // manualSelector without selector: Required plus the (nil-selector) mismatch.
        let errs = create_errs(
            json!({"manualSelector": true, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image"}]}}}),
        );
        assert_eq!(
            errs,
            vec![
                "spec.selector: Required value".to_string(),
                "spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"b\"}: `selector` does not match template `labels`".to_string()
            ]
        );
        // manualSelector with a matching selector is fine and gets no generated labels.
        let j = create(json!({"manualSelector": true, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image"}]}}})).expect("valid");
        assert!(j["spec"]["template"]["metadata"]["labels"].get("job-name").is_none());

        // User-set wrong controller-uid label: generated selector kept, validation rejects.
        let errs = create_errs(
            json!({"template": {"metadata": {"labels": {"controller-uid": "wrong"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image"}]}}}),
        );
        assert!(
            errs.iter().any(|e| e.starts_with(
                "spec.template.metadata.labels[controller-uid]: Invalid value: map[string]string{"
            ) && e.ends_with(&format!(": must be '{UID}'"))),
            "{errs:#?}"
        );

        // Missing uid.
        let mut j = job(json!({}));
        j["metadata"].as_object_mut().map(|m| m.remove("uid"));
        let errs = admit_create("batch/v1", "Job", &mut j).expect_err("invalid");
        assert_eq!(errs[0].message, "metadata.uid: Required value");

        // Indexed Job whose last pod hostname is not a DNS label.
        let mut j = job(
            json!({"completionMode": "Indexed", "completions": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image"}]}}}),
        );
        j["metadata"]["name"] = json!("a".repeat(62));
        let errs = admit_create("batch/v1", "Job", &mut j).expect_err("invalid");
        assert!(
            errs.iter().any(|e| e.message.ends_with(&format!(
                "will not able to create pod with invalid DNS label: {}-1",
                "a".repeat(62)
            ))),
            "{errs:#?}"
        );
    }

    fn updated(old: &Value, f: impl FnOnce(&mut Value)) -> Result<Value, Vec<String>> {
        let mut new = old.clone();
        f(&mut new);
        admit_update("batch/v1", "Job", old, &mut new)
            .map_err(|e| e.into_iter().map(|e| e.message).collect::<Vec<_>>())?;
        Ok(new)
    }

    // validation_test.go TestValidateJobUpdate and strategy_test.go TestJobStrategy_PrepareForUpdate.
    #[test]
    fn update_cases() {
        let old = create(json!({"parallelism": 2, "completions": 4, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image"}]}}})).expect("valid");

        // mutable: parallelism, bumps generation; status is kept from the old object.
        let new = updated(&old, |n| {
            n["spec"]["parallelism"] = json!(3);
            n["status"] = json!({"active": 9});
        })
        .expect("valid");
        assert_eq!(new["metadata"]["generation"], 2);
        assert_eq!(new["status"], json!({}));
        // annotation-only change: generation unchanged.
        let new = updated(&old, |n| n["metadata"]["annotations"] = json!({"hello": "world"})).expect("valid");
        assert_eq!(new["metadata"]["generation"], 1);

        type Mutation = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(&str, Mutation, &str)> = vec![
            (
                "immutable completions",
                Box::new(|n: &mut Value| n["spec"]["completions"] = json!(5)),
                "spec.completions: Invalid value: 5: field is immutable",
            ),
            (
                "immutable selector",
                Box::new(|n: &mut Value| n["spec"]["selector"]["matchLabels"]["x"] = json!("y")),
                "spec.selector: Invalid value: v1.LabelSelector{",
            ),
            (
                "immutable template",
                Box::new(|n: &mut Value| {
                    n["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other")
                }),
                "spec.template: Invalid value: ",
            ),
            (
                "immutable completionMode",
                Box::new(|n: &mut Value| n["spec"]["completionMode"] = json!("Indexed")),
                "spec.completionMode: Invalid value: \"Indexed\": field is immutable",
            ),
            (
                "immutable managedBy",
                Box::new(|n: &mut Value| n["spec"]["managedBy"] = json!("example.com/foo")),
                "spec.managedBy: Invalid value: \"example.com/foo\": field is immutable",
            ),
            (
                "immutable podFailurePolicy",
                Box::new(|n: &mut Value| n["spec"]["podFailurePolicy"] = json!({"rules": []})),
                "spec.podFailurePolicy: Invalid value: {\"rules\":[]}: field is immutable",
            ),
        ];
        for (name, f, want) in cases {
            let errs = updated(&old, f).expect_err(name);
            assert!(errs.iter().any(|e| e.starts_with(want)), "{name}: {errs:#?}");
        }
        // Spec errors are reported by ValidateJob and again by ValidateJobSpecUpdate.
        let errs = updated(&old, |n| n["spec"]["backoffLimit"] = json!(-1)).expect_err("invalid");
        assert_eq!(errs.iter().filter(|e| e.starts_with("spec.backoffLimit: Invalid value: -1")).count(), 2);
    }

    // validation_test.go TestValidateJobUpdate: elastic Indexed Jobs and suspended templates.
    #[test]
    fn update_elastic_and_suspended_template() {
        let indexed = create(json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image"}]}}})).expect("valid");
        updated(&indexed, |n| {
            n["spec"]["completions"] = json!(3);
            n["spec"]["parallelism"] = json!(3);
        })
        .expect("scale in tandem");
        let errs = updated(&indexed, |n| n["spec"]["completions"] = json!(3)).expect_err("not in tandem");
        assert!(
            errs.contains(
                &"spec.completions: Invalid value: 3: can only be modified in tandem with spec.parallelism"
                    .to_string()
            ),
            "{errs:#?}"
        );

        let suspended = create(json!({"suspend": true, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "abc", "image": "image", "resources": {"requests": {"cpu": "1"}}}]}}})).expect("valid");
        let new = updated(&suspended, |n| {
            n["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
            n["spec"]["template"]["metadata"]["labels"]["x"] = json!("y");
            n["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "4"}});
        });
        assert!(new.is_ok(), "{new:?}");
        let errs =
            updated(&suspended, |n| n["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other"))
                .expect_err("image");
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.template.spec: Invalid value:")
                    && e.ends_with("field is immutable")),
            "{errs:#?}"
        );
        // Started and suspended, without the Suspended condition: immutable.
        let mut started = suspended.clone();
        started["status"] = json!({"startTime": "2026-01-01T00:00:00Z"});
        let errs =
            updated(&started, |n| n["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"}))
                .expect_err("started");
        assert!(errs.iter().any(|e| e.starts_with("spec.template: Invalid value:")), "{errs:#?}");
        // ... but with Suspended=True and no active pods (k/k#139287) it is mutable again.
        started["status"]["conditions"] = json!([{"type": "Suspended", "status": "True"}]);
        assert!(
            updated(&started, |n| n["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"}))
                .is_ok()
        );
    }

    #[test]
    fn index_formats() {
        assert_eq!(validate_indexes_format("0,2-4,6", 10), Ok(5));
        assert_eq!(validate_indexes_format("", 1), Ok(0));
        assert_eq!(validate_indexes_format("1-2-3", 5), Err("the fragment \"1-2-3\" violates the requirement that an index interval can have at most two parts separated by '-'".into()));
        assert_eq!(
            validate_indexes_format("a", 5),
            Err("cannot convert string to integer for index: \"a\"".into())
        );
        assert_eq!(
            validate_indexes_format("3,1", 5),
            Err("non-increasing order, previous: 3, current: 1".into())
        );
        assert_eq!(
            validate_indexes_format("2-2", 5),
            Err("non-increasing order, previous: 2, current: 2".into())
        );
        assert_eq!(validate_indexes_format("5", 5), Err("too large index: \"5\"".into()));
    }
}
