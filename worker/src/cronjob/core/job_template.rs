//! upstream `getJobFromTemplate2` and `getJobName`: the Job a CronJob creates for a scheduled time.

use std::collections::BTreeMap;

use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use crate::cronjob::schedule::UnknownTimeZone;

/// The annotation holding the scheduled time (RFC 3339, in the CronJob's time zone).
pub const CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

const NANOS_PER_SECOND: i128 = 1_000_000_000;

/// Go's `t.Unix()`: whole seconds, rounded down.
pub(super) fn unix_seconds(t: Timestamp) -> i64 {
    i64::try_from(t.as_nanosecond().div_euclid(NANOS_PER_SECOND)).unwrap_or(i64::MIN)
}

/// upstream `getJobName`: `<cronjob name>-<scheduled Unix seconds / 60>` (Go integer division).
pub fn job_name(cronjob: &CronJob, scheduled: Timestamp) -> String {
    format!("{}-{}", cronjob.metadata.name.as_deref().unwrap_or_default(), unix_seconds(scheduled) / 60)
}

/// `time.LoadLocation` as the schedule module implements it, with `Local` as the controller's zone.
fn load_location(name: &str, local: &TimeZone) -> Result<TimeZone, UnknownTimeZone> {
    crate::cronjob::schedule::load_location(name)
        .map(|tz| tz.unwrap_or_else(|| local.clone()))
        .map_err(|reason| UnknownTimeZone { time_zone: name.to_string(), reason })
}

/// Go's `t.Format(time.RFC3339)`: seconds, no fraction, `Z` for a zero offset, else `±hh:mm`.
pub fn format_rfc3339(t: &Zoned) -> String {
    let offset = t.offset().seconds();
    let zone = if offset == 0 {
        "Z".to_string()
    } else {
        let minutes = offset / 60;
        let sign = if minutes < 0 { '-' } else { '+' };
        let m = minutes.abs();
        format!("{sign}{:02}:{:02}", m / 60, m % 60)
    };
    format!("{}{zone}", t.strftime("%Y-%m-%dT%H:%M:%S"))
}

/// upstream `getJobFromTemplate2(cronJob, scheduledTime)` with the CronJobsScheduledAnnotation gate
/// locked on (1.37):
///
/// - name [`job_name`]; no namespace (the shell creates it in the CronJob's namespace);
/// - the template's labels and annotations, plus [`CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION`] = the
///   scheduled time in `spec.timeZone` (UTC when unset, as `time.LoadLocation("")`);
/// - `creationTimestamp` = the scheduled time (the API server overwrites it);
/// - one owner reference: `batch/v1` `CronJob`, controller, blockOwnerDeletion;
/// - the template's spec.
///
/// `scheduled` is in the controller's local zone (the zone `timeZone: Local` stands for). The only
/// error is a `timeZone` that does not load, which the sync has ruled out before.
pub fn job_from_template(cronjob: &CronJob, scheduled: &Zoned) -> Result<Job, UnknownTimeZone> {
    let spec = &cronjob.spec;
    let tz = load_location(spec.time_zone.as_deref().unwrap_or_default(), scheduled.time_zone())?;
    let template_meta = spec.job_template.metadata.clone().unwrap_or_default();

    let labels = template_meta.labels.filter(|l| !l.is_empty());
    let mut annotations: BTreeMap<String, String> = template_meta.annotations.unwrap_or_default();
    annotations.insert(
        CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION.to_string(),
        format_rfc3339(&scheduled.timestamp().to_zoned(tz)),
    );
    let owner = OwnerReference {
        api_version: "batch/v1".to_string(),
        kind: "CronJob".to_string(),
        name: cronjob.metadata.name.clone().unwrap_or_default(),
        uid: cronjob.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(job_name(cronjob, scheduled.timestamp())),
            labels,
            annotations: Some(annotations),
            creation_timestamp: Some(Time(scheduled.timestamp())),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(spec.job_template.spec.clone().unwrap_or_default()),
        status: None,
    })
}
