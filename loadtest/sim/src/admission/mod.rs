//! What the kube-apiserver itself does to batch/v1 Jobs and CronJobs and to v1 Pods on writes:
//! defaulting, the registry strategies (PrepareForCreate / PrepareForUpdate), the default
//! admission plugins' pod mutations, and validation with apimachinery's exact messages.
//! Pure functions over stored JSON; every other kind passes untouched.
//!
//! `ValidateObjectMeta` (names, labels, annotations, ownerReferences, finalizers) runs here for
//! every kind; pods get `ValidatePodCreate` / `ValidatePodUpdate`, and [`warnings_on_create`]
//! gives the strategies' `WarningsOnCreate`.
//!
//! The caller owns generic metadata (name generation, uid, creationTimestamp, resourceVersion)
//! and must have put the new uid in `metadata.uid` before
//! [`admit_create`]. [`admit_update`] sets `metadata.generation` itself (the old value, plus one
//! when the spec changed), so the caller must not bump it again.

mod common;
pub mod cron_syntax;
mod cronjob;
mod job;
mod job_status;
pub(crate) mod names;
mod object_meta;
mod pod;
mod pod_validation;
mod qos;
pub(crate) mod quantity;

use serde::Deserialize;
use serde_json::Value;

use crate::field_error::FieldError;

pub use cron_syntax::parse_standard;
pub(crate) use pod::parse_quantity;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Job,
    CronJob,
    Pod,
    Other,
}

fn kind_of(api_version: &str, kind: &str) -> Kind {
    match (api_version, kind) {
        ("batch/v1", "Job") => Kind::Job,
        ("batch/v1", "CronJob") => Kind::CronJob,
        ("v1", "Pod") => Kind::Pod,
        _ => Kind::Other,
    }
}

/// Create: [`decode_create`] then [`admit_decoded_create`], for callers that track no managed
/// fields in between.
pub fn admit_create(api_version: &str, kind: &str, obj: &mut Value) -> Result<(), Vec<FieldError>> {
    decode_create(api_version, kind, obj)?;
    admit_decoded_create(api_version, kind, obj)
}

/// What decoding a create's body does: the typed decode (wrong JSON types are rejected whole)
/// and the scheme's defaults. kube-apiserver records the creator's `managedFields` right after
/// this and before admission (create.go: `fieldManager.UpdateNoErrors`, then `Admit`), so the
/// defaults are the creator's fields and what admission and the strategy add below is nobody's.
pub fn decode_create(api_version: &str, kind: &str, obj: &mut Value) -> Result<(), Vec<FieldError>> {
    match kind_of(api_version, kind) {
        Kind::Job => {
            decode_check(obj, Kind::Job)?;
            job::default_job(obj);
        }
        Kind::CronJob => {
            decode_check(obj, Kind::CronJob)?;
            cronjob::default_cronjob(obj);
        }
        Kind::Pod => pod::default_pod(obj),
        Kind::Other => {
            // core/v1 SetDefaults_Secret.
            if (api_version, kind) == ("v1", "Secret")
                && let Some(secret) = obj.as_object_mut()
                && secret.get("type").and_then(Value::as_str).is_none_or(str::is_empty)
            {
                secret.insert("type".into(), Value::String("Opaque".into()));
            }
        }
    }
    Ok(())
}

/// The rest of a create after [`decode_create`]: the admission plugins' mutations,
/// PrepareForCreate (Job: generated selector and template labels unless manualSelector, status
/// `{}`, generation 1; CronJob: status `{}`, generation 1; Pod: ServiceAccount, Priority and
/// DefaultTolerationSeconds, phase Pending and qosClass, generation 1), then validation.
pub fn admit_decoded_create(api_version: &str, kind: &str, obj: &mut Value) -> Result<(), Vec<FieldError>> {
    match kind_of(api_version, kind) {
        Kind::Job => {
            job::prepare_for_create(obj);
            let mut errs = object_meta::validate_object_meta(api_version, kind, obj);
            errs.extend(job::validate_job(obj, &job::JobOpts::for_create()));
            into_result(errs)
        }
        Kind::CronJob => {
            cronjob::prepare_for_create(obj);
            let mut errs = object_meta::validate_object_meta(api_version, kind, obj);
            errs.extend(cronjob::validate_create(obj));
            into_result(errs)
        }
        Kind::Pod => {
            pod::admit_decoded_pod_create(obj);
            let mut errs = object_meta::validate_object_meta(api_version, kind, obj);
            errs.extend(pod_validation::validate_pods_spec(obj.get("spec")));
            errs.extend(pod_validation::validate_pod_only(obj.get("spec"), true));
            into_result(errs)
        }
        Kind::Other => into_result(object_meta::validate_object_meta(api_version, kind, obj)),
    }
}

/// The registry strategies' `WarningsOnCreate` for the kinds the sim covers: a Pod, Job or
/// CronJob name that is not a DNS label, and fractional memory / ephemeral-storage quantities
/// in the pod spec (pkg/api/pod/warnings.go). Everything else has none.
pub fn warnings_on_create(api_version: &str, kind: &str, obj: &Value) -> Vec<String> {
    let (used_in, job_spec_path, spec_path) = match kind_of(api_version, kind) {
        Kind::Pod => ("the Pod's hostname", None, &["spec"][..]),
        Kind::Job => ("Pod names and hostnames", Some(&["spec"][..]), &["spec", "template", "spec"][..]),
        Kind::CronJob => (
            "Pod names and hostnames",
            Some(&["spec", "jobTemplate", "spec"][..]),
            &["spec", "jobTemplate", "spec", "template", "spec"][..],
        ),
        Kind::Other => return Vec::new(),
    };
    let name = common::at_str(obj, &["metadata", "name"]).unwrap_or("");
    let mut out: Vec<String> = pod_validation::name_warning(name, used_in).into_iter().collect();
    if let Some(path) = job_spec_path {
        out.extend(job::warnings_for_job_spec(common::at(obj, path), &path.join(".")));
    }
    out.extend(pod_validation::pod_spec_warnings(common::at(obj, spec_path), &spec_path.join(".")));
    out
}

/// The Job and CronJob strategies' `WarningsOnUpdate`: when the generation changed,
/// `WarningsForJobSpec` with the pod template's warnings; for CronJobs also a TZ in the
/// schedule. Pods have none on update upstream ("humans don't typically interact directly with
/// pods").
pub fn warnings_on_update(api_version: &str, kind: &str, new: &Value, old: &Value) -> Vec<String> {
    let generation = |v: &Value| common::at_i64(v, &["metadata", "generation"]);
    let changed = generation(new) != generation(old);
    let mut out = Vec::new();
    match kind_of(api_version, kind) {
        Kind::Job if changed => {
            out.extend(job::warnings_for_job_spec(common::at(new, &["spec"]), "spec"));
            out.extend(pod_validation::pod_spec_warnings(
                common::at(new, &["spec", "template", "spec"]),
                "spec.template.spec",
            ));
        }
        Kind::CronJob => {
            if changed {
                out.extend(job::warnings_for_job_spec(
                    common::at(new, &["spec", "jobTemplate", "spec"]),
                    "spec.jobTemplate.spec",
                ));
                out.extend(pod_validation::pod_spec_warnings(
                    common::at(new, &["spec", "jobTemplate", "spec", "template", "spec"]),
                    "spec.jobTemplate.spec.template.spec",
                ));
            }
            if common::at_str(new, &["spec", "schedule"]).is_some_and(|s| s.contains("TZ")) {
                out.push("cannot use TZ or CRON_TZ in spec.spec.schedule, use timeZone instead, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details".to_string());
            }
        }
        _ => {}
    }
    out
}

/// Main-resource update (PUT/PATCH result, not /status): defaults, PrepareForUpdate (old status
/// kept, generation = old + 1 when the spec changed), then ValidateJob + ValidateJobUpdate /
/// ValidateCronJobUpdate; Pods: defaults, generation, ValidatePodSpec and ValidatePodUpdate; every
/// kind: ValidateObjectMeta.
pub fn admit_update(
    api_version: &str,
    kind: &str,
    old: &Value,
    obj: &mut Value,
) -> Result<(), Vec<FieldError>> {
    let k = kind_of(api_version, kind);
    match k {
        Kind::Job => {
            decode_check(obj, k)?;
            job::default_job(obj);
            prepare_for_update(old, obj, true);
            let opts = job::JobOpts::for_update(old);
            let mut errs = object_meta::validate_object_meta(api_version, kind, obj);
            errs.extend(job::validate_job(obj, &opts));
            errs.extend(job::validate_job_update(obj, old, &opts));
            into_result(errs)
        }
        Kind::CronJob => {
            decode_check(obj, k)?;
            cronjob::default_cronjob(obj);
            prepare_for_update(old, obj, true);
            let mut errs = object_meta::validate_object_meta(api_version, kind, obj);
            errs.extend(cronjob::validate_update(obj, old));
            into_result(errs)
        }
        Kind::Pod => {
            pod::default_pod(obj);
            prepare_for_update(old, obj, true);
            let mut errs = object_meta::validate_object_meta(api_version, kind, obj);
            errs.extend(pod_validation::validate_pods_spec(obj.get("spec")));
            errs.extend(pod_validation::validate_pod_only(obj.get("spec"), false));
            errs.extend(pod_validation::validate_pod_update(obj, old));
            into_result(errs)
        }
        Kind::Other => into_result(object_meta::validate_object_meta(api_version, kind, obj)),
    }
}

/// /status update: the old spec is kept; Jobs get ValidateJobStatusUpdate with the options the
/// 1.37 apiserver enables (JobManagedBy GA); CronJob status is not validated upstream.
pub fn admit_status_update(
    api_version: &str,
    kind: &str,
    old: &Value,
    obj: &mut Value,
) -> Result<(), Vec<FieldError>> {
    let k = kind_of(api_version, kind);
    match k {
        Kind::Job | Kind::CronJob => {
            decode_check(obj, k)?;
            if k == Kind::Job {
                job::default_job(obj);
            } else {
                cronjob::default_cronjob(obj);
            }
            if let Some(o) = obj.as_object_mut() {
                match old.get("spec") {
                    Some(spec) => o.insert("spec".to_string(), spec.clone()),
                    None => o.remove("spec"),
                };
            }
            if k == Kind::Job {
                into_result(job_status::validate_job_status_update(obj, old))
            } else {
                Ok(())
            }
        }
        Kind::Pod | Kind::Other => Ok(()),
    }
}

/// Whether `new.spec` differs from `old.spec` the way `apiequality.Semantic.DeepEqual` sees it
/// (nil and empty lists/maps are equal).
pub fn spec_changed(old: &Value, new: &Value) -> bool {
    !common::semantic_eq(old.get("spec"), new.get("spec"))
}

/// rest.BeforeUpdate keeps the old generation; PrepareForUpdate bumps it on spec changes and
/// (for the main resource of Jobs and CronJobs) keeps the old status.
fn prepare_for_update(old: &Value, obj: &mut Value, keep_status: bool) {
    let changed = spec_changed(old, obj);
    let old_gen = old.get("metadata").and_then(|m| m.get("generation")).and_then(Value::as_i64);
    let Some(o) = obj.as_object_mut() else { return };
    if keep_status {
        match old.get("status") {
            Some(s) => o.insert("status".to_string(), s.clone()),
            None => o.remove("status"),
        };
    }
    if let Some(meta) = common::child_obj(o, "metadata") {
        let base = old_gen.unwrap_or(0);
        let generation = if changed { base + 1 } else { base };
        if old_gen.is_some() || changed {
            meta.insert("generation".to_string(), Value::from(generation));
        }
    }
}

fn into_result(errs: Vec<FieldError>) -> Result<(), Vec<FieldError>> {
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

/// The typed decode the apiserver does before anything else: a body whose fields have the wrong
/// JSON types is rejected whole (upstream: 400 "... cannot be handled as a Job: json: cannot
/// unmarshal ..."). Missing required fields are not a decode error in Go, so they pass here and
/// validation reports them.
fn decode_check(obj: &Value, kind: Kind) -> Result<(), Vec<FieldError>> {
    let Some(map) = obj.as_object() else {
        return Err(vec![decode_error(kind, "expected a JSON object")]);
    };
    let kind_name = match kind {
        Kind::Job => "Job",
        Kind::CronJob => "CronJob",
        Kind::Pod | Kind::Other => return Ok(()),
    };
    // Decode straight from the request's value when it already names its type (it does after
    // `incoming`); only a bare object needs a copy with apiVersion and kind filled in.
    let typed = map.get("apiVersion").and_then(Value::as_str) == Some("batch/v1")
        && map.get("kind").and_then(Value::as_str) == Some(kind_name);
    let probe;
    let value = if typed {
        obj
    } else {
        let mut copy = map.clone();
        copy.insert("apiVersion".to_string(), Value::from("batch/v1"));
        copy.insert("kind".to_string(), Value::from(kind_name));
        probe = Value::Object(copy);
        &probe
    };
    let result = match kind {
        Kind::Job => k8s_openapi::api::batch::v1::Job::deserialize(value).map(|_| ()),
        _ => k8s_openapi::api::batch::v1::CronJob::deserialize(value).map(|_| ()),
    };
    match result {
        Err(e) if !e.to_string().starts_with("missing field") => {
            Err(vec![decode_error(kind, &e.to_string())])
        }
        _ => Ok(()),
    }
}

fn decode_error(kind: Kind, detail: &str) -> FieldError {
    let name = if kind == Kind::CronJob { "CronJob" } else { "Job" };
    FieldError {
        kind: crate::field_error::FieldErrorKind::Invalid,
        field: String::new(),
        message: format!("{name} in version \"v1\" cannot be handled as a {name}: {detail}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn other_kinds_pass_untouched() {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}});
        let before = v.clone();
        admit_create("v1", "ConfigMap", &mut v).expect("ok");
        admit_update("v1", "ConfigMap", &before, &mut v).expect("ok");
        admit_status_update("apps/v1", "Deployment", &before, &mut v).expect("ok");
        assert_eq!(v, before);
    }

    #[test]
    fn wrong_types_are_decode_errors() {
        let mut v = json!({"metadata": {"name": "j", "uid": "u"}, "spec": {"completions": "three"}});
        let errs = admit_create("batch/v1", "Job", &mut v).expect_err("decode");
        assert!(
            errs[0].message.starts_with("Job in version \"v1\" cannot be handled as a Job: "),
            "{errs:?}"
        );
        let mut v = json!({"metadata": {"name": "j"}, "spec": {"parallelism": 3_000_000_000u64}});
        assert!(admit_create("batch/v1", "Job", &mut v).is_err());
        let mut v = json!(["not", "an", "object"]);
        assert!(admit_create("batch/v1", "CronJob", &mut v).is_err());
    }

    /// Malformed objects give errors, never panics.
    #[test]
    fn malformed_inputs_never_panic() {
        let bodies = [
            json!(null),
            json!({}),
            json!({"spec": null}),
            json!({"spec": {}}),
            json!({"metadata": {"name": "x", "uid": "u"}, "spec": {"template": {}}}),
            json!({"metadata": {"name": "x", "uid": "u"}, "spec": {"template": {"spec": {"containers": []}}, "selector": {}}}),
            json!({"metadata": {"name": "x"}, "spec": {"completionMode": "Indexed", "successPolicy": {"rules": [{"succeededIndexes": "0-1"}]}}}),
            json!({"spec": {"schedule": "TZ=UTC", "jobTemplate": {}}}),
            json!({"spec": {"schedule": "@every", "timeZone": "../../etc/passwd"}}),
            json!({"status": {"conditions": [{}], "uncountedTerminatedPods": {"failed": [""]}}}),
        ];
        for b in &bodies {
            for kind in ["Job", "CronJob"] {
                let mut v = b.clone();
                let _ = admit_create("batch/v1", kind, &mut v);
                let mut v = b.clone();
                let _ = admit_update("batch/v1", kind, b, &mut v);
                let _ = admit_update("batch/v1", kind, &json!(null), &mut v);
                let mut v = b.clone();
                let _ = admit_status_update("batch/v1", kind, b, &mut v);
                let _ = admit_status_update("batch/v1", kind, &json!({"spec": 1}), &mut v);
            }
            let mut v = b.clone();
            let _ = admit_create("v1", "Pod", &mut v);
            let _ = admit_update("v1", "Pod", b, &mut v);
        }
    }

    /// Job/CronJob/Pod strategies' WarningsOnCreate; job/warnings.go WarningsForJobSpec.
    #[test]
    fn create_warnings() {
        let job = json!({"metadata": {"name": "v1.2"}, "spec": {"completionMode": "Indexed", "completions": 100_001, "parallelism": 10_001,
            "template": {"spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"memory": "0.5"}}}]}}}});
        assert_eq!(
            warnings_on_create("batch/v1", "Job", &job),
            vec![
                "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]".to_string(),
                "spec: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail".to_string(),
                "spec.template.spec.containers[0].resources.limits[memory]: fractional byte value \"500m\" is invalid, must be an integer".to_string(),
            ]
        );
        let cron = json!({"metadata": {"name": "ok"}, "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"ephemeral-storage": "1.5"}}}]}}}}}});
        assert_eq!(
            warnings_on_create("batch/v1", "CronJob", &cron),
            vec!["spec.jobTemplate.spec.template.spec.containers[0].resources.requests[ephemeral-storage]: fractional byte value \"1500m\" is invalid, must be an integer".to_string()]
        );
        let pod = json!({"metadata": {"name": "Pod1"}, "spec": {"containers": []}});
        assert_eq!(warnings_on_create("v1", "Pod", &pod).len(), 1);
        assert!(warnings_on_create("v1", "ConfigMap", &pod).is_empty());
    }

    /// job/strategy.go and cronjob/strategy.go WarningsOnUpdate.
    #[test]
    fn update_warnings() {
        let old = json!({"metadata": {"generation": 1}, "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}});
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["resources"] =
            json!({"requests": {"memory": "1.5"}});
        assert!(warnings_on_update("batch/v1", "Job", &new, &old).is_empty(), "same generation");
        new["metadata"]["generation"] = json!(2);
        assert_eq!(
            warnings_on_update("batch/v1", "Job", &new, &old),
            vec!["spec.template.spec.containers[0].resources.requests[memory]: fractional byte value \"1500m\" is invalid, must be an integer".to_string()]
        );
        let cron = json!({"metadata": {"generation": 1}, "spec": {"schedule": "CRON_TZ=UTC 0 * * * *"}});
        assert_eq!(
            warnings_on_update("batch/v1", "CronJob", &cron, &cron),
            vec!["cannot use TZ or CRON_TZ in spec.spec.schedule, use timeZone instead, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details".to_string()]
        );
        assert!(warnings_on_update("v1", "Pod", &new, &old).is_empty());
    }

    #[test]
    fn spec_changed_is_semantic() {
        assert!(!spec_changed(&json!({"spec": {"a": []}}), &json!({"spec": {}})));
        assert!(spec_changed(&json!({"spec": {"a": 1}}), &json!({"spec": {"a": 2}})));
    }

    #[test]
    fn pod_update_generation() {
        let mut old =
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "x"}]}});
        admit_create("v1", "Pod", &mut old).expect("ok");
        assert_eq!(old["metadata"]["generation"], 1);
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("y");
        admit_update("v1", "Pod", &old, &mut new).expect("ok");
        assert_eq!(new["metadata"]["generation"], 2);
        let mut new2 = new.clone();
        new2["status"] = json!({"phase": "Running"});
        admit_update("v1", "Pod", &new, &mut new2).expect("ok");
        assert_eq!(new2["metadata"]["generation"], 2);
    }
}
