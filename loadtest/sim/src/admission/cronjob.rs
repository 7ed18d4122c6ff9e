//! batch/v1 CronJob: defaults (SetObjectDefaults_CronJob: the CronJob's own defaults and those of
//! the types inside jobTemplate — not SetDefaults_Job, which is registered for Job objects only),
//! the registry strategy (status cleared on create and kept on update, generation), and
//! ValidateCronJobCreate / ValidateCronJobUpdate (pkg/apis/batch/validation).

use serde_json::{Value, json};

use super::common::*;
use super::cron_syntax::{load_location, parse_standard};
use super::job::{default_job_spec_types, validate_job_spec_fields};
use crate::field_error::FieldError;

pub(crate) fn default_cronjob(cj: &mut Value) {
    let Some(spec) = cj.as_object_mut().and_then(|o| child_obj(o, "spec")) else { return };
    if spec.get("concurrencyPolicy").and_then(Value::as_str).is_none_or(str::is_empty) {
        spec.insert("concurrencyPolicy".to_string(), json!("Allow"));
    }
    set_default(spec, "suspend", json!(false));
    set_default(spec, "successfulJobsHistoryLimit", json!(3));
    set_default(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(job_template) = child_obj(spec, "jobTemplate") {
        // Written as `{}` when empty, as the template's in `default_pod_template`.
        set_default(job_template, "metadata", json!({}));
        if let Some(job_spec) = child_obj(job_template, "spec") {
            default_job_spec_types(job_spec);
        }
    }
}

/// PrepareForCreate: status cleared, generation 1.
pub(crate) fn prepare_for_create(cj: &mut Value) {
    let Some(obj) = cj.as_object_mut() else { return };
    obj.insert("status".to_string(), json!({}));
    if let Some(meta) = child_obj(obj, "metadata") {
        meta.insert("generation".to_string(), json!(1));
    }
}

/// `ValidateCronJobCreate`.
pub(crate) fn validate_create(cj: &Value) -> Errs {
    let null = Value::Null;
    let mut errs = validate_spec(at(cj, &["spec"]).unwrap_or(&null), None);
    let name = at_str(cj, &["metadata", "name"]).unwrap_or("");
    if name.len() > 52 {
        errs.push(FieldError::invalid(
            "metadata.name",
            &Value::from(name),
            "must be no more than 52 characters",
        ));
    }
    errs
}

/// `ValidateCronJobUpdate` (no name-length check, so old long names stay updatable).
pub(crate) fn validate_update(new: &Value, old: &Value) -> Errs {
    let null = Value::Null;
    validate_spec(at(new, &["spec"]).unwrap_or(&null), Some(at(old, &["spec"]).unwrap_or(&null)))
}

fn validate_spec(spec: &Value, old_spec: Option<&Value>) -> Errs {
    let mut errs = Errs::new();
    let schedule = at_str(spec, &["schedule"]).unwrap_or("");
    let time_zone = at(spec, &["timeZone"]);
    if schedule.is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    } else {
        let allow_tz = old_spec.and_then(|o| at_str(o, &["schedule"])).is_some_and(|s| s.contains("TZ"));
        if let Err(e) = parse_standard(schedule) {
            errs.push(FieldError::invalid("spec.schedule", &Value::from(schedule), &e));
        }
        if allow_tz && schedule.contains("TZ") && time_zone.is_some() {
            errs.push(FieldError::invalid(
                "spec.schedule",
                &Value::from(schedule),
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            ));
        } else if !allow_tz && schedule.contains("TZ") {
            errs.push(FieldError::invalid(
                "spec.schedule",
                &Value::from(schedule),
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
        }
    }
    nonnegative(spec, &["startingDeadlineSeconds"], "spec.startingDeadlineSeconds", &mut errs);
    if old_spec.is_none_or(|o| at(o, &["timeZone"]) != time_zone) {
        errs.extend(validate_time_zone(time_zone, "spec.timeZone"));
    }
    match at_str(spec, &["concurrencyPolicy"]).unwrap_or("") {
        "Allow" | "Forbid" | "Replace" => {}
        "" => errs.push(FieldError::required("spec.concurrencyPolicy", "")),
        other => errs.push(FieldError::not_supported(
            "spec.concurrencyPolicy",
            &Value::from(other),
            &["Allow", "Forbid", "Replace"],
        )),
    }
    errs.extend(validate_job_template_spec(at(spec, &["jobTemplate"]), "spec.jobTemplate"));
    nonnegative(spec, &["successfulJobsHistoryLimit"], "spec.successfulJobsHistoryLimit", &mut errs);
    nonnegative(spec, &["failedJobsHistoryLimit"], "spec.failedJobsHistoryLimit", &mut errs);
    errs
}

/// `ValidateJobTemplateSpec`: the job spec without a selector (it is always generated).
fn validate_job_template_spec(template: Option<&Value>, path: &str) -> Errs {
    let null = Value::Null;
    let spec = template.and_then(|t| at(t, &["spec"])).unwrap_or(&null);
    let mut errs = validate_job_spec_fields(spec, &format!("{path}.spec"));
    if let Some(sel) = at(spec, &["selector"]) {
        errs.push(invalid_go(
            format!("{path}.spec.selector"),
            &go_selector(sel),
            "`selector` will be auto-generated",
        ));
    }
    if at_bool(spec, &["manualSelector"]) == Some(true) {
        errs.push(FieldError::not_supported(
            format!("{path}.spec.manualSelector"),
            &Value::from(true),
            &["nil", "false"],
        ));
    }
    errs
}

/// `validateTimeZone`: non-empty, IANA name characters, not `Local`, and loadable.
pub(crate) fn validate_time_zone(tz: Option<&Value>, field: &str) -> Errs {
    let mut errs = Errs::new();
    let Some(tz) = tz else { return errs };
    let name = tz.as_str().unwrap_or("");
    if name.is_empty() {
        errs.push(FieldError::invalid(field, &Value::from(""), "timeZone must be nil or non-empty string"));
        return errs;
    }
    let valid_part = |p: &str| {
        (1..=14).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
    };
    for part in name.split('/') {
        if part == "." || part == ".." || part.starts_with('-') || !valid_part(part) {
            errs.push(FieldError::invalid(field, &Value::from(name), &format!("unknown time zone {name}")));
            return errs;
        }
    }
    if name.eq_ignore_ascii_case("Local") {
        errs.push(FieldError::invalid(
            field,
            &Value::from(name),
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    }
    if let Err(e) = load_location(name) {
        errs.push(FieldError::invalid(field, &Value::from(name), &e));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::super::{admit_create, admit_status_update, admit_update};
    use super::*;

    fn cronjob(spec: Value) -> Value {
        let mut s = json!({
            "schedule": "* * * * ?",
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "abc", "image": "image"}]}}}},
        });
        for (k, v) in spec.as_object().into_iter().flatten() {
            s[k] = v.clone();
        }
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "mycronjob", "namespace": "default", "uid": "u1"}, "spec": s})
    }

    fn create_errs(cj: Value) -> Vec<String> {
        let mut cj = cj;
        match admit_create("batch/v1", "CronJob", &mut cj) {
            Ok(()) => vec![],
            Err(e) => e.into_iter().map(|e| e.message).collect(),
        }
    }

    // defaults_test.go TestSetDefaultCronJob.
    #[test]
    fn defaults() {
        let mut cj = cronjob(json!({}));
        cj["status"] = json!({"active": [{"name": "x"}]});
        admit_create("batch/v1", "CronJob", &mut cj).expect("valid");
        let s = &cj["spec"];
        assert_eq!(s["concurrencyPolicy"], "Allow");
        assert_eq!(s["suspend"], false);
        assert_eq!(s["successfulJobsHistoryLimit"], 3);
        assert_eq!(s["failedJobsHistoryLimit"], 1);
        assert_eq!(s["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
        assert!(
            s["jobTemplate"]["spec"].get("backoffLimit").is_none(),
            "SetDefaults_Job does not run on templates"
        );
        assert_eq!(cj["status"], json!({}));
        assert_eq!(cj["metadata"]["generation"], 1);
        // Explicit values are kept.
        let mut cj = cronjob(
            json!({"concurrencyPolicy": "Forbid", "suspend": true, "successfulJobsHistoryLimit": 5, "failedJobsHistoryLimit": 5}),
        );
        admit_create("batch/v1", "CronJob", &mut cj).expect("valid");
        assert_eq!(cj["spec"]["concurrencyPolicy"], "Forbid");
        assert_eq!(cj["spec"]["successfulJobsHistoryLimit"], 5);
    }

    // validation_test.go TestValidateCronJob errorCases.
    #[test]
    fn validate_cronjob_error_cases() {
        let long = "a".repeat(53);
        let mut long_name = cronjob(json!({}));
        long_name["metadata"]["name"] = json!(long);
        let cases: Vec<(&str, Value, String)> = vec![
            ("spec.schedule: Invalid value", cronjob(json!({"schedule": "error"})), "spec.schedule: Invalid value: \"error\": expected exactly 5 fields, found 1: [error]".into()),
            ("spec.schedule: Required value", cronjob(json!({"schedule": ""})), "spec.schedule: Required value".into()),
            ("spec.schedule: 6 fields", cronjob(json!({"schedule": "* * * * * *"})), "spec.schedule: Invalid value: \"* * * * * *\": expected exactly 5 fields, found 6: [* * * * * *]".into()),
            ("spec.schedule: TZ in schedule on create", cronjob(json!({"schedule": "TZ=UTC 0 * * * *"})), "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead".into()),
            ("spec.schedule: CRON_TZ with a bad zone", cronjob(json!({"schedule": "CRON_TZ=Bogus/Zone 0 * * * *"})), "spec.schedule: Invalid value: \"CRON_TZ=Bogus/Zone 0 * * * *\": provided bad location Bogus/Zone: unknown time zone Bogus/Zone".into()),
            ("spec.timeZone: timeZone must be nil or non-empty string", cronjob(json!({"timeZone": ""})), "spec.timeZone: Invalid value: \"\": timeZone must be nil or non-empty string".into()),
            ("spec.timeZone: timeZone must be an explicit time zone", cronjob(json!({"timeZone": "Local"})), "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones".into()),
            ("spec.timeZone: Invalid value: \" Continent/Zone\": unknown time zone  Continent/Zone", cronjob(json!({"timeZone": " Continent/Zone"})), "spec.timeZone: Invalid value: \" Continent/Zone\": unknown time zone  Continent/Zone".into()),
            ("spec.timeZone: Invalid value: \"Continent/InvalidZone\": unknown time zone Continent/InvalidZone", cronjob(json!({"timeZone": "Continent/InvalidZone"})), "spec.timeZone: Invalid value: \"Continent/InvalidZone\": unknown time zone Continent/InvalidZone".into()),
            ("spec.timeZone: ../Etc/UTC", cronjob(json!({"timeZone": "../Etc/UTC"})), "spec.timeZone: Invalid value: \"../Etc/UTC\": unknown time zone ../Etc/UTC".into()),
            ("spec.timeZone: a..b (Go LoadLocation)", cronjob(json!({"timeZone": "a..b"})), "spec.timeZone: Invalid value: \"a..b\": time: invalid location name".into()),
            ("spec.timeZone: lower-case name", cronjob(json!({"timeZone": "america/new_york"})), "spec.timeZone: Invalid value: \"america/new_york\": unknown time zone america/new_york".into()),
            ("spec.startingDeadlineSeconds:must be greater than or equal to 0", cronjob(json!({"startingDeadlineSeconds": -1})), "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0".into()),
            ("spec.successfulJobsHistoryLimit: must be greater than or equal to 0", cronjob(json!({"successfulJobsHistoryLimit": -1})), "spec.successfulJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0".into()),
            ("spec.failedJobsHistoryLimit: must be greater than or equal to 0", cronjob(json!({"failedJobsHistoryLimit": -1})), "spec.failedJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0".into()),
            ("spec.concurrencyPolicy: Unsupported value", cronjob(json!({"concurrencyPolicy": "Bogus"})), "spec.concurrencyPolicy: Unsupported value: \"Bogus\": supported values: \"Allow\", \"Forbid\", \"Replace\"".into()),
            ("spec.jobTemplate.spec.parallelism:must be greater than or equal to 0", cronjob(json!({"jobTemplate": {"spec": {"parallelism": -1, "template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "abc", "image": "image"}]}}}}})), "spec.jobTemplate.spec.parallelism: Invalid value: -1: must be greater than or equal to 0".into()),
            ("spec.jobTemplate.spec.manualSelector: Unsupported value", cronjob(json!({"jobTemplate": {"spec": {"manualSelector": true, "template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "abc", "image": "image"}]}}}}})), "spec.jobTemplate.spec.manualSelector: Unsupported value: true: supported values: \"nil\", \"false\"".into()),
            ("spec.jobTemplate.spec.selector: will be auto-generated", cronjob(json!({"jobTemplate": {"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "abc", "image": "image"}]}}}}})), "spec.jobTemplate.spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"b\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: `selector` will be auto-generated".into()),
            ("spec.jobTemplate.spec.template.spec.restartPolicy: Required value", cronjob(json!({"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "abc", "image": "image"}]}}}}})), "spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"".into()),
            ("metadata.name: must be no more than 52 characters", long_name, format!("metadata.name: Invalid value: \"{long}\": must be no more than 52 characters")),
        ];
        for (name, cj, want) in cases {
            let errs = create_errs(cj);
            assert!(errs.contains(&want), "{name}: {errs:#?}");
        }
    }

    // validation_test.go TestValidateCronJob successCases.
    #[test]
    fn validate_cronjob_success_cases() {
        for spec in [
            json!({}),
            json!({"schedule": "@hourly"}),
            json!({"schedule": "@every 5m"}),
            json!({"schedule": "0 0 * * MON-FRI"}),
            json!({"timeZone": "America/New_York"}),
            json!({"timeZone": "Etc/GMT+5"}),
            json!({"timeZone": "UTC", "concurrencyPolicy": "Replace", "successfulJobsHistoryLimit": 0}),
        ] {
            assert_eq!(create_errs(cronjob(spec.clone())), Vec::<String>::new(), "{spec}");
        }
    }

    // validation_test.go TestValidateCronJobScheduleTZ / TestValidateCronJobUpdate.
    #[test]
    fn update_tz_rules_and_generation() {
        let mut old = cronjob(json!({}));
        admit_create("batch/v1", "CronJob", &mut old).expect("valid");
        // An old schedule carrying TZ may keep it on update, but not together with timeZone.
        let mut with_tz = old.clone();
        with_tz["spec"]["schedule"] = json!("TZ=UTC 0 * * * *");
        let mut new = with_tz.clone();
        new["spec"]["suspend"] = json!(true);
        assert!(admit_update("batch/v1", "CronJob", &with_tz, &mut new).is_ok());
        let mut new = with_tz.clone();
        new["spec"]["timeZone"] = json!("UTC");
        let errs = admit_update("batch/v1", "CronJob", &with_tz, &mut new).expect_err("both");
        assert_eq!(
            errs[0].message,
            "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use both timeZone field and TZ or CRON_TZ in schedule"
        );
        // Adding TZ on update is rejected.
        let mut new = old.clone();
        new["spec"]["schedule"] = json!("TZ=UTC 0 * * * *");
        assert!(admit_update("batch/v1", "CronJob", &old, &mut new).is_err());
        // A long name created before the 52-character rule stays updatable.
        let mut long = old.clone();
        long["metadata"]["name"] = json!("a".repeat(60));
        let mut new = long.clone();
        new["spec"]["schedule"] = json!("*/5 * * * *");
        new["status"] = json!({"lastScheduleTime": "2026-01-01T00:00:00Z"});
        admit_update("batch/v1", "CronJob", &long, &mut new).expect("valid");
        assert_eq!(new["metadata"]["generation"], 2);
        assert_eq!(new["status"], json!({}));
        // /status keeps the old spec and is not validated.
        let mut new = old.clone();
        new["spec"]["schedule"] = json!("garbage");
        new["status"] = json!({"lastScheduleTime": "2026-01-01T00:00:00Z"});
        admit_status_update("batch/v1", "CronJob", &old, &mut new).expect("valid");
        assert_eq!(new["spec"]["schedule"], "* * * * ?");
    }
}
