//! CronJob schedules exactly as kube-controller-manager evaluates them: a port of robfig/cron
//! v3.0.1 `ParseStandard` and `Schedule.Next` (parser.go, spec.go, constantdelay.go) on jiff,
//! plus upstream's `formatSchedule` and the scheduling arithmetic of
//! `pkg/controller/cronjob/utils.go` (in [`times`]).
//!
//! Kubernetes cron is robfig's: 5 fields (minute hour day-of-month month day-of-week, Sunday = 0,
//! 7 rejected), names case-insensitive, `?` = `*`, `N/s` = `N-max/s`, a step > 1 clears the star
//! bit, day-of-month and day-of-week ORed unless either carries the star bit, descriptors
//! `@yearly`/`@annually`/`@monthly`/`@weekly`/`@daily`/`@midnight`/`@hourly`/`@every <d>`, and a
//! `TZ=`/`CRON_TZ=` prefix naming the location. `Next` walks wall-clock fields with Go's
//! `time.Date` normalisation (see `spec.rs`), which decides the DST behaviour: a wall time that
//! does not exist is skipped, one that repeats fires twice, and nothing within five years gives
//! the zero time (`None` here).
//!
//! Agreement with robfig is checked in `golden.rs` against hand-derived expectations and a second,
//! literal transliteration of spec.go (`reference.rs`).

mod every;
mod parser;
pub mod preview;
mod spec;
pub mod times;

#[cfg(test)]
mod golden;
#[cfg(test)]
mod reference;

use jiff::Zoned;
use jiff::tz::TimeZone;

pub use parser::{go_strconv_quote, load_location};

use every::ConstantDelay;
use spec::SpecSchedule;

/// A schedule robfig's `ParseStandard` accepted.
#[derive(Debug, Clone)]
pub struct Schedule {
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    /// `SpecSchedule`; `location` is `None` for `time.Local` (no prefix, or `TZ=Local`), which
    /// robfig evaluates in the location of the time handed to `Next`.
    Spec { spec: SpecSchedule, location: Option<Location> },
    /// `ConstantDelaySchedule` (`@every`), which has no location.
    Every(ConstantDelay),
}

#[derive(Debug, Clone)]
struct Location {
    /// As written after `TZ=`/`CRON_TZ=` (`""` and `UTC` are UTC).
    name: String,
    tz: TimeZone,
}

/// A schedule robfig rejects; `Display` is robfig's error text, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

impl ParseError {
    /// robfig's error text.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl Schedule {
    /// `cron.ParseStandard(spec)`.
    pub fn parse_standard(spec: &str) -> Result<Schedule, ParseError> {
        parser::parse_standard(spec)
    }

    /// `Schedule.Next(t)`: the first activation strictly after `t`, in `t`'s time zone. A
    /// `TZ=`/`CRON_TZ=` location, when given, is the one the fields are matched in; otherwise
    /// they are matched in `t`'s own zone. `None` where robfig returns the zero time: no
    /// activation within five years (or, where upstream would loop forever or leave Go's
    /// range, see `spec.rs`).
    pub fn next(&self, t: &Zoned) -> Option<Zoned> {
        let ts = match &self.kind {
            Kind::Every(every) => every.next(t.timestamp())?,
            Kind::Spec { spec, location: Some(loc) } => spec.next(&loc.tz, t.timestamp())?,
            Kind::Spec { spec, location: None } => spec.next(t.time_zone(), t.timestamp())?,
        };
        Some(ts.to_zoned(t.time_zone().clone()))
    }

    /// The location named by a `TZ=`/`CRON_TZ=` prefix, as written (`None` without a prefix, for
    /// `TZ=Local`, and for `@every`, which ignores it).
    pub fn location_name(&self) -> Option<&str> {
        match &self.kind {
            Kind::Spec { location: Some(loc), .. } => Some(&loc.name),
            _ => None,
        }
    }

    /// The delay of an `@every` schedule, in whole seconds.
    pub fn every_seconds(&self) -> Option<i64> {
        match &self.kind {
            Kind::Every(every) => Some(every.delay_seconds),
            Kind::Spec { .. } => None,
        }
    }
}

/// `spec.timeZone` that `time.LoadLocation` rejects: upstream records Warning `UnknownTimeZone`
/// with this `Display` as the message and does not requeue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid timeZone: {}: {reason}", parser::go_strconv_quote(.time_zone))]
pub struct UnknownTimeZone {
    pub time_zone: String,
    /// `time.LoadLocation`'s error text.
    pub reason: String,
}

/// Upstream's `formatSchedule`, preceded by syncCronJob's `timeZone` check:
///
/// - a `timeZone` that does not load → `Err` (Warning `UnknownTimeZone`; checked first);
/// - a schedule containing `"TZ"` is used as is, with `true`: the caller records Warning
///   `UnsupportedSchedule` ([`unsupported_schedule_message`]);
/// - else with a `timeZone` → `"TZ=<tz> <schedule>"`; without one, the schedule as is.
pub fn format_schedule(schedule: &str, time_zone: Option<&str>) -> Result<(String, bool), UnknownTimeZone> {
    if let Some(tz) = time_zone
        && let Err(reason) = parser::load_location(tz)
    {
        return Err(UnknownTimeZone { time_zone: tz.to_string(), reason });
    }
    if schedule.contains("TZ") {
        return Ok((schedule.to_string(), true));
    }
    Ok(match time_zone {
        Some(tz) => (format!("TZ={tz} {schedule}"), false),
        None => (schedule.to_string(), false),
    })
}

/// The message of upstream's Warning `UnsupportedSchedule`.
pub fn unsupported_schedule_message(schedule: &str) -> String {
    format!(
        "CRON_TZ or TZ used in schedule {} is not officially supported, see \
         https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
        parser::go_strconv_quote(schedule)
    )
}
