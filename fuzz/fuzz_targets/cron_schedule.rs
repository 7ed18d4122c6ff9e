//! The CronJob schedule as the worker reads it from the API: `spec.schedule` and `spec.timeZone`
//! through `formatSchedule`, robfig's `ParseStandard`, `Next`, and the controller's
//! `mostRecentScheduleTime` arithmetic. Any answer is fine; a panic or a hang is not.
//!
//! Input (text, so that seeds are readable): `schedule`, then optionally lines `timeZone`,
//! `now creationAge lastScheduleAge startingDeadlineSeconds` (seconds; ages count back from now).
#![no_main]

use batchfleet_cron::times::{CronJobTimes, next_schedule_time, next_schedule_time_duration};
use batchfleet_cron::{Schedule, format_schedule};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use libfuzzer_sys::fuzz_target;

/// 2016-05-19T10:00:00Z, upstream's `topOfTheHour()`.
const DEFAULT_NOW: i64 = 1_463_652_000;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.split('\n');
    let schedule = lines.next().unwrap_or_default();
    let time_zone = lines.next().filter(|tz| !tz.is_empty());
    let mut numbers = lines.next().unwrap_or_default().split(' ').map(|n| n.parse::<i64>().ok());
    let mut number = || numbers.next().flatten();
    let now_secs = number().unwrap_or(DEFAULT_NOW);
    let created_age = number().unwrap_or(3600);
    let last_age = number();
    let starting_deadline_seconds = number();

    let Ok((formatted, _unsupported)) = format_schedule(schedule, time_zone) else { return };
    let Ok(schedule) = Schedule::parse_standard(&formatted) else { return };
    // Times an API server could hold (metav1.Time is RFC 3339: years 0000–9999).
    let at = |secs: i64| {
        Timestamp::from_second(secs).ok().filter(|t| (0..=9999).contains(&t.to_zoned(TimeZone::UTC).year()))
    };
    let Some(now) = at(now_secs) else { return };
    let now = now.to_zoned(TimeZone::UTC);
    let _ = schedule.next(&now);
    let Some(creation) = now_secs.checked_sub(created_age).and_then(at) else { return };
    let times = CronJobTimes {
        creation,
        last_schedule: last_age.and_then(|age| now_secs.checked_sub(age)).and_then(at),
        starting_deadline_seconds,
    };
    let _ = next_schedule_time(&schedule, &times, &now);
    let _ = next_schedule_time_duration(&schedule, &times, &now);
});
