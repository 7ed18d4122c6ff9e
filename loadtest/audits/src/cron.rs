//! CronJob times from the Jobs they created: upstream names a CronJob's Job
//! `<cronjob>-<scheduled time in minutes since the epoch>`, so the Jobs seen tell which
//! scheduled times ran. Every time of the schedule inside a window ran, and nothing else did.

use std::collections::{BTreeMap, BTreeSet};

use batchfleet_cron::Schedule;
use jiff::{Timestamp, tz::TimeZone};

use crate::Outcome;
use crate::objects::ObjectsSeen;

/// A CronJob the workload created.
#[derive(Debug, Clone)]
pub struct CronJobUnderTest {
    pub namespace: String,
    pub name: String,
    pub schedule: String,
}

/// The controllers' clock when workers run with `--test-clock SPEED@ANCHOR`:
/// `anchor + (wall − anchor) · speed`. It drives CronJob schedules, and also the times the
/// controllers write (condition transitions) and wait for (TTLs); speed 1 is the wall clock.
#[derive(Debug, Clone, Copy)]
pub struct CronClock {
    pub anchor: Timestamp,
    pub speed: f64,
}

impl CronClock {
    pub fn starting_now(speed: f64) -> Self {
        Self { anchor: Timestamp::now(), speed }
    }

    /// The value of `fleet-worker --test-clock`.
    pub fn flag(&self) -> String {
        format!("{}@{}", self.speed, self.anchor)
    }

    /// The clock's time at wall time `wall`.
    pub fn at(&self, wall: Timestamp) -> Timestamp {
        let since = wall.duration_since(self.anchor).as_secs_f64() * self.speed;
        self.anchor + jiff::SignedDuration::from_secs_f64(since)
    }

    /// The wall time at which the clock shows `t`.
    pub fn wall_at(&self, t: Timestamp) -> Timestamp {
        let since = t.duration_since(self.anchor).as_secs_f64() / self.speed;
        self.anchor + jiff::SignedDuration::from_secs_f64(since)
    }

    /// The wall clock itself.
    pub fn wall() -> Self {
        Self { anchor: Timestamp::UNIX_EPOCH, speed: 1.0 }
    }

    pub fn now(&self) -> Timestamp {
        self.at(Timestamp::now())
    }
}

/// The scheduled times of `schedule` in `[from, to)` (UTC), in seconds since the epoch.
pub fn scheduled_times(schedule: &Schedule, from: Timestamp, to: Timestamp) -> Vec<i64> {
    let mut out = Vec::new();
    let mut at = from.to_zoned(TimeZone::UTC) - jiff::SignedDuration::from_secs(1);
    while let Some(next) = schedule.next(&at) {
        if next.timestamp() >= to {
            break;
        }
        if next.timestamp() >= from {
            out.push(next.timestamp().as_second());
        }
        at = next;
    }
    out
}

/// Every scheduled time of each CronJob in `[from, to)` (on the CronJob clock) ran exactly
/// once, and no Job ran for a time off the schedule.
pub fn every_time_ran_once(
    seen: &ObjectsSeen,
    cronjobs: &[CronJobUnderTest],
    from: Timestamp,
    to: Timestamp,
) -> Outcome {
    let mut ran: BTreeMap<(String, String), BTreeMap<i64, usize>> = BTreeMap::new();
    for ((ns, name), uids) in &seen.names {
        for cj in cronjobs.iter().filter(|c| c.namespace == *ns) {
            if let Some(time) = scheduled_time_of(&cj.name, name) {
                *ran.entry((ns.clone(), cj.name.clone())).or_default().entry(time).or_default() += uids.len();
            }
        }
    }
    let mut violations = Vec::new();
    let mut checked = 0;
    for cj in cronjobs {
        let schedule = match Schedule::parse_standard(&cj.schedule) {
            Ok(s) => s,
            Err(e) => {
                violations.push(format!(
                    "{}/{}: schedule {:?}: {}",
                    cj.namespace,
                    cj.name,
                    cj.schedule,
                    e.message()
                ));
                continue;
            }
        };
        let times = ran.remove(&(cj.namespace.clone(), cj.name.clone())).unwrap_or_default();
        let expected: BTreeSet<i64> = scheduled_times(&schedule, from, to).into_iter().collect();
        checked += expected.len();
        let label =
            |t: i64| Timestamp::from_second(t).map(|t| t.to_string()).unwrap_or_else(|_| t.to_string());
        for t in &expected {
            match times.get(t) {
                None => violations.push(format!("{}/{}: {} missed", cj.namespace, cj.name, label(*t))),
                Some(n) if *n > 1 => {
                    violations.push(format!("{}/{}: {} ran {n} times", cj.namespace, cj.name, label(*t)))
                }
                Some(_) => {}
            }
        }
        let within = |t: &i64| *t >= from.as_second() && *t < to.as_second();
        let all_expected: BTreeSet<i64> = scheduled_times(
            &schedule,
            from - jiff::SignedDuration::from_hours(24),
            to + jiff::SignedDuration::from_hours(24),
        )
        .into_iter()
        .collect();
        for t in times.keys().filter(|t| within(t) && !all_expected.contains(t)) {
            violations.push(format!(
                "{}/{}: ran for {}, not a time of its schedule",
                cj.namespace,
                cj.name,
                label(*t)
            ));
        }
    }
    Outcome::from_violations(
        "cron-times-run-once",
        "every scheduled time in the window ran exactly once",
        checked,
        "scheduled times",
        violations,
    )
}

/// How many scheduled times of `cronjobs` in `[from, to)` no Job was seen for yet: the backlog
/// a CronJob storm leaves, which the controllers still work off (with no
/// `startingDeadlineSeconds`, a late time still runs). Cheap enough to poll: a lookup per time.
pub fn times_not_yet_run(
    seen: &ObjectsSeen,
    cronjobs: &[CronJobUnderTest],
    from: Timestamp,
    to: Timestamp,
) -> usize {
    cronjobs
        .iter()
        .filter_map(|cj| Some((cj, Schedule::parse_standard(&cj.schedule).ok()?)))
        .map(|(cj, schedule)| {
            scheduled_times(&schedule, from, to)
                .into_iter()
                .filter(|t| !seen.names.contains_key(&(cj.namespace.clone(), job_name(&cj.name, *t))))
                .count()
        })
        .sum()
}

/// The name upstream gives a CronJob's Job for a scheduled time (seconds since the epoch).
fn job_name(cronjob: &str, scheduled: i64) -> String {
    format!("{cronjob}-{}", scheduled / 60)
}

/// The scheduled time (seconds since the epoch, on the CronJob clock) a CronJob's Job ran for:
/// the minutes its name ends in ([`job_name`] read back).
fn scheduled_time_of(cronjob: &str, job: &str) -> Option<i64> {
    job.strip_prefix(cronjob)?.strip_prefix('-')?.parse::<i64>().ok().map(|minutes| minutes * 60)
}

/// Cron skew: wall seconds from each CronJob Job's scheduled time to when the watch first saw
/// the Job (its creation, to the watch's delay; the creation timestamp itself has whole seconds
/// only), for the Jobs of `cronjobs`.
pub fn skews(seen: &ObjectsSeen, cronjobs: &[CronJobUnderTest], clock: &CronClock) -> Vec<f64> {
    let ours: BTreeSet<(&str, &str)> =
        cronjobs.iter().map(|c| (c.namespace.as_str(), c.name.as_str())).collect();
    seen.jobs
        .values()
        .filter_map(|j| {
            let cronjob = j.cronjob.as_deref()?;
            if !ours.contains(&(j.namespace.as_str(), cronjob)) {
                return None;
            }
            let scheduled = Timestamp::from_second(scheduled_time_of(cronjob, &j.name)?).ok()?;
            let created = clock.at(j.first_seen?);
            Some(created.duration_since(scheduled).as_secs_f64() / clock.speed)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cron_job(name: &str, uid: &str) -> k8s_openapi::api::batch::v1::Job {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": uid,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "tick", "uid": "cj"}]},
            "spec": {"template": {"spec": {"containers": []}}},
        }))
        .expect("job")
    }

    #[test]
    fn a_missed_or_doubled_minute_fails() {
        let from: Timestamp = "2026-11-26T10:00:00Z".parse().expect("time");
        let to: Timestamp = "2026-11-26T10:03:00Z".parse().expect("time");
        let minute = |m: i64| from.as_second() / 60 + m;
        let cronjobs =
            [CronJobUnderTest { namespace: "ns".into(), name: "tick".into(), schedule: "* * * * *".into() }];
        let now = Timestamp::now();
        let mut seen = ObjectsSeen::default();
        for m in 0..3 {
            seen.apply_job(&cron_job(&format!("tick-{}", minute(m)), &format!("u{m}")), now, false);
        }
        let outcome = every_time_ran_once(&seen, &cronjobs, from, to);
        assert!(outcome.passed, "{outcome:?}");
        assert_eq!(outcome.measured, "0 violations in 3 scheduled times");
        // The same minute created again under a new uid, and one minute short.
        seen.apply_job(&cron_job(&format!("tick-{}", minute(1)), "again"), now, false);
        let outcome = every_time_ran_once(&seen, &cronjobs, from, to + jiff::SignedDuration::from_mins(1));
        assert!(!outcome.passed);
        let v = outcome.violations.join("\n");
        assert!(v.contains("10:01:00Z ran 2 times"), "{v}");
        assert!(v.contains("10:03:00Z missed"), "{v}");
        let late = to + jiff::SignedDuration::from_mins(1);
        assert_eq!(times_not_yet_run(&seen, &cronjobs, from, to), 0);
        assert_eq!(times_not_yet_run(&seen, &cronjobs, from, late), 1, "10:03 not run yet");
    }

    #[test]
    fn skew_is_from_the_scheduled_time_to_the_job_seen_on_the_cron_clock() {
        let minute: Timestamp = "2026-11-26T10:00:00Z".parse().expect("time");
        let cronjobs =
            [CronJobUnderTest { namespace: "ns".into(), name: "tick".into(), schedule: "* * * * *".into() }];
        let mut seen = ObjectsSeen::default();
        let name = format!("tick-{}", minute.as_second() / 60);
        seen.apply_job(&cron_job(&name, "u"), minute + jiff::SignedDuration::from_millis(1500), false);
        let other: k8s_openapi::api::batch::v1::Job =
            serde_json::from_value(json!({"metadata": {"name": "plain-1", "namespace": "ns", "uid": "p"}}))
                .expect("job");
        seen.apply_job(&other, minute, false);
        assert_eq!(skews(&seen, &cronjobs, &CronClock::wall()), vec![1.5]);
        // On a clock 6× the wall, 1.5 wall seconds after the minute's wall time is 1.5 s late.
        let clock = CronClock { anchor: minute, speed: 6.0 };
        let seen_at = clock.wall_at(minute) + jiff::SignedDuration::from_millis(1500);
        let mut fast = ObjectsSeen::default();
        fast.apply_job(&cron_job(&name, "u"), seen_at, false);
        let skew = skews(&fast, &cronjobs, &clock);
        assert!((skew[0] - 1.5).abs() < 1e-6, "{skew:?}");
    }
}
