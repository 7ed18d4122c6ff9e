//! printJob and printCronJob.

use jiff::Timestamp;
use serde_json::json;

use super::{AGE, CONTAINERS, Col, IMAGES, NAME, Row, age, col, containers, format_label_selector, wide};
use crate::kubectl::Obj;
use crate::kubectl::duration::{between, since};

const JOB_SELECTOR_DOC: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";

pub(super) const JOB_COLUMNS: &[Col] = &[
    NAME,
    col("Status", "string", "Status of the job."),
    col(
        "Completions",
        "string",
        "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
    ),
    col("Duration", "string", "Time required to complete the job."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", JOB_SELECTOR_DOC),
];

pub(super) const CRONJOB_COLUMNS: &[Col] = &[
    NAME,
    col("Schedule", "string", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
    col(
        "Timezone",
        "string",
        "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones",
    ),
    col(
        "Suspend",
        "boolean",
        "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions. Defaults to false.",
    ),
    col("Active", "integer", "A list of pointers to currently running jobs."),
    col("Last Schedule", "string", "Information when was the last time the job was successfully scheduled."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", JOB_SELECTOR_DOC),
];

/// `hasJobCondition`: the first condition of that type decides.
fn has_condition(job: Obj, kind: &str) -> bool {
    job.list(&["status", "conditions"])
        .iter()
        .map(Obj)
        .find(|c| c.str(&["type"]) == kind)
        .is_some_and(|c| c.str(&["status"]) == "True")
}

/// The Job Status cell, in printJob's order of precedence (1.34+ adds SuccessCriteriaMet,
/// kubernetes#132832).
fn job_status(job: Obj) -> &'static str {
    if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if job.has(&["metadata", "deletionTimestamp"]) {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(job, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    }
}

pub(super) fn job(job: Obj, now: Timestamp) -> Row {
    let succeeded = job.int(&["status", "succeeded"]);
    let completions = match job.opt_int(&["spec", "completions"]) {
        Some(c) => format!("{succeeded}/{c}"),
        None => {
            let parallelism = job.int(&["spec", "parallelism"]);
            if parallelism > 1 { format!("{succeeded}/1 of {parallelism}") } else { format!("{succeeded}/1") }
        }
    };
    let duration = match (job.time(&["status", "startTime"]), job.time(&["status", "completionTime"])) {
        (None, _) => String::new(),
        (Some(start), None) => since(Some(start), now),
        (Some(start), Some(end)) => between(start, end),
    };
    let (names, images) = containers(job.sub(&["spec", "template", "spec"]));
    Row::cells(vec![
        json!(job.name()),
        json!(job_status(job)),
        json!(completions),
        json!(duration),
        json!(age(job, now)),
        json!(names),
        json!(images),
        json!(format_label_selector(job.at(&["spec", "selector"]))),
    ])
}

/// `printBoolPtr`.
fn bool_ptr(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    }
}

pub(super) fn cronjob(cj: Obj, now: Timestamp) -> Row {
    let last_schedule = match cj.at(&["status", "lastScheduleTime"]) {
        Some(_) => since(cj.time(&["status", "lastScheduleTime"]), now),
        None => "<none>".into(),
    };
    let time_zone = cj.at(&["spec", "timeZone"]).and_then(|v| v.as_str()).unwrap_or("<none>");
    let job_spec = cj.sub(&["spec", "jobTemplate", "spec"]);
    let (names, images) = containers(job_spec.sub(&["template", "spec"]));
    Row::cells(vec![
        json!(cj.name()),
        json!(cj.str(&["spec", "schedule"])),
        json!(time_zone),
        json!(bool_ptr(cj.opt_bool(&["spec", "suspend"]))),
        json!(cj.list(&["status", "active"]).len() as i64),
        json!(last_schedule),
        json!(age(cj, now)),
        json!(names),
        json!(images),
        json!(format_label_selector(job_spec.at(&["selector"]))),
    ])
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::test_support::*;

    fn job(name: &str, created: String, spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": name, "creationTimestamp": created}, "spec": spec, "status": status})
    }

    fn cond(kind: &str, status: &str) -> Value {
        json!({"type": kind, "status": status})
    }

    const TEN_YEARS: i64 = 10 * 365 * 86400;

    /// printers_test.go TestPrintJob (and TestPrintJobList); creation 1.9s in the future prints
    /// 0s, as upstream's `time.Now().Add(1.9e9)`.
    #[test]
    fn print_job() {
        let template = json!({"spec": {"containers": [
            {"name": "fake-job-container1", "image": "fake-job-image1"},
            {"name": "fake-job-container2", "image": "fake-job-image2"}]}});
        let wide_spec = json!({"completions": 2, "template": template, "selector": {"matchLabels": {"job-label": "job-label-value"}}});
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (
                job("job1", soon(), wide_spec, json!({"succeeded": 1})),
                vec![
                    "job1",
                    "Running",
                    "1/2",
                    "",
                    "0s",
                    "fake-job-container1,fake-job-container2",
                    "fake-job-image1,fake-job-image2",
                    "job-label=job-label-value",
                ],
            ),
            // ten-year age
            (
                job("job2", at(-TEN_YEARS), json!({}), json!({"succeeded": 0})),
                vec!["job2", "Running", "0/1", "", "10y"],
            ),
            // duration from start to completion
            (
                job(
                    "job3",
                    at(-TEN_YEARS),
                    json!({}),
                    json!({"startTime": at(60), "completionTime": at(31 * 60)}),
                ),
                vec!["job3", "Running", "0/1", "30m", "10y"],
            ),
            // still running: duration since start
            (
                job("job4", at(-TEN_YEARS), json!({}), json!({"startTime": at(-20 * 60)})),
                vec!["job4", "Running", "0/1", "20m", "10y"],
            ),
            (
                job("job5", soon(), json!({}), json!({"conditions": [cond("Complete", "True")]})),
                vec!["job5", "Complete", "0/1", "", "0s"],
            ),
            (
                job("job6", soon(), json!({}), json!({"conditions": [cond("Failed", "True")]})),
                vec!["job6", "Failed", "0/1", "", "0s"],
            ),
            (
                job("job7", soon(), json!({}), json!({"conditions": [cond("Suspended", "True")]})),
                vec!["job7", "Suspended", "0/1", "", "0s"],
            ),
            (
                job("job8", soon(), json!({}), json!({"conditions": [cond("FailureTarget", "True")]})),
                vec!["job8", "FailureTarget", "0/1", "", "0s"],
            ),
            (
                json!({"metadata": {"name": "job9", "creationTimestamp": soon(), "deletionTimestamp": soon()}, "spec": {}}),
                vec!["job9", "Terminating", "0/1", "", "0s"],
            ),
            // kubernetes#132832 (job10)
            (
                job("job10", soon(), json!({}), json!({"conditions": [cond("SuccessCriteriaMet", "True")]})),
                vec!["job10", "SuccessCriteriaMet", "0/1", "", "0s"],
            ),
            // sim extras: precedence, first-condition-wins, parallelism, completed being deleted
            (
                job(
                    "sc-then-complete",
                    soon(),
                    json!({}),
                    json!({"conditions": [cond("SuccessCriteriaMet", "True"), cond("Complete", "True")]}),
                ),
                vec!["sc-then-complete", "Complete", "0/1", "", "0s"],
            ),
            (
                job(
                    "first-wins",
                    soon(),
                    json!({}),
                    json!({"conditions": [cond("Failed", "False"), cond("Failed", "True")]}),
                ),
                vec!["first-wins", "Running", "0/1", "", "0s"],
            ),
            (
                job("par", soon(), json!({"parallelism": 3}), json!({})),
                vec!["par", "Running", "0/1 of 3", "", "0s"],
            ),
            (
                job("par1", soon(), json!({"parallelism": 1}), json!({"succeeded": 1})),
                vec!["par1", "Running", "1/1", "", "0s"],
            ),
            (
                json!({"metadata": {"name": "done", "deletionTimestamp": at(0)},
                       "status": {"conditions": [cond("Complete", "True")], "succeeded": 1}}),
                vec!["done", "Complete", "1/1", "", "<unknown>"],
            ),
            (
                json!({"metadata": {"name": "suspended-deleting", "deletionTimestamp": at(0)},
                       "status": {"conditions": [cond("Suspended", "True")]}}),
                vec!["suspended-deleting", "Terminating", "0/1", "", "<unknown>"],
            ),
        ];
        for (j, want) in cases {
            let got = cells("batch", "jobs", &j);
            assert_eq!(got.len(), 8);
            let want: Vec<Value> = want.iter().map(|s| json!(s)).collect();
            assert_eq!(got[..want.len()], want[..], "{}", j["metadata"]["name"]);
        }
        // Non-wide cells of a bare Job: empty container cells and a nil selector.
        assert_eq!(cells("batch", "jobs", &json!({}))[5..], [json!(""), json!(""), json!("<none>")]);
    }

    /// printers_test.go TestPrintCronJob-style cases for the current column set (Timezone
    /// added in 1.25; Suspend printBoolPtr; Active counts status.active).
    #[test]
    fn print_cronjob() {
        let job_template =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
        let cases: Vec<(Value, Vec<Value>)> = vec![
            (
                json!({"metadata": {"name": "cj1", "creationTimestamp": at(-3 * 3600)},
                       "spec": {"schedule": "*/5 * * * *", "suspend": false, "jobTemplate": job_template},
                       "status": {"active": [{"name": "a"}, {"name": "b"}], "lastScheduleTime": at(-190)}}),
                vec![
                    json!("cj1"),
                    json!("*/5 * * * *"),
                    json!("<none>"),
                    json!("False"),
                    json!(2),
                    json!("3m10s"),
                    json!("3h"),
                    json!("c"),
                    json!("busybox"),
                    json!("<none>"),
                ],
            ),
            (
                json!({"metadata": {"name": "cj2"}, "spec": {"schedule": "0 0 * * *", "timeZone": "Etc/UTC", "suspend": true}}),
                vec![
                    json!("cj2"),
                    json!("0 0 * * *"),
                    json!("Etc/UTC"),
                    json!("True"),
                    json!(0),
                    json!("<none>"),
                    json!("<unknown>"),
                    json!(""),
                    json!(""),
                    json!("<none>"),
                ],
            ),
            (
                json!({"metadata": {"name": "cj3"}, "spec": {"jobTemplate": {"spec": {"selector": {"matchLabels": {"a": "b"}}}}},
                       "status": {"lastScheduleTime": "garbage"}}),
                vec![
                    json!("cj3"),
                    json!(""),
                    json!("<none>"),
                    json!("<unset>"),
                    json!(0),
                    json!("<unknown>"),
                    json!("<unknown>"),
                    json!(""),
                    json!(""),
                    json!("a=b"),
                ],
            ),
        ];
        for (cj, want) in cases {
            assert_eq!(cells("batch", "cronjobs", &cj), want, "{}", cj["metadata"]["name"]);
        }
    }
}
