//! When a CronJob fires: the controller's own schedule path (formatSchedule, ParseStandard, Next),
//! for `fleetctl schedule` and anyone who wants to preview a schedule.

use jiff::Zoned;

use crate::{ParseError, Schedule, UnknownTimeZone, format_schedule, unsupported_schedule_message};

/// Why a schedule cannot be previewed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreviewError {
    #[error("{0}")]
    UnknownTimeZone(#[from] UnknownTimeZone),
    #[error("unparseable schedule {schedule:?}: {error}")]
    Unparseable { schedule: String, error: ParseError },
}

/// The next fire times, and the warning upstream would record for the schedule, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Upcoming {
    pub times: Vec<Zoned>,
    pub warning: Option<String>,
}

/// Up to `count` activations strictly after `from`, as the CronJob controller computes them for
/// `spec.schedule` and `spec.timeZone`. Fewer when the schedule has no activation within five
/// years.
pub fn upcoming(
    schedule: &str,
    time_zone: Option<&str>,
    from: &Zoned,
    count: usize,
) -> Result<Upcoming, PreviewError> {
    let (formatted, unsupported) = format_schedule(schedule, time_zone)?;
    let parsed = Schedule::parse_standard(&formatted)
        .map_err(|error| PreviewError::Unparseable { schedule: schedule.to_string(), error })?;
    let mut times = Vec::with_capacity(count);
    let mut at = from.clone();
    while times.len() < count {
        match parsed.next(&at) {
            Some(next) => {
                at = next.clone();
                times.push(next);
            }
            None => break,
        }
    }
    Ok(Upcoming { times, warning: unsupported.then(|| unsupported_schedule_message(schedule)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> Zoned {
        s.parse::<jiff::Timestamp>().unwrap().to_zoned(jiff::tz::TimeZone::UTC)
    }

    fn rfc3339(z: &Zoned) -> String {
        z.timestamp().to_string()
    }

    #[test]
    fn time_zone_field_shifts_the_schedule() {
        let up = upcoming("0 9 * * *", Some("Europe/Berlin"), &utc("2026-11-02T00:00:00Z"), 2).unwrap();
        assert_eq!(
            up.times.iter().map(rfc3339).collect::<Vec<_>>(),
            ["2026-11-02T08:00:00Z", "2026-11-03T08:00:00Z"]
        );
        assert_eq!(up.warning, None);
    }

    #[test]
    fn tz_prefix_is_used_with_upstreams_warning() {
        let up = upcoming("TZ=UTC 30 * * * *", None, &utc("2026-11-02T00:00:00Z"), 1).unwrap();
        assert_eq!(rfc3339(&up.times[0]), "2026-11-02T00:30:00Z");
        assert!(up.warning.unwrap().contains("is not officially supported"));
    }

    #[test]
    fn bad_input_is_an_error_and_impossible_dates_give_nothing() {
        assert!(matches!(
            upcoming("0 0 * *", None, &utc("2026-01-01T00:00:00Z"), 1),
            Err(PreviewError::Unparseable { .. })
        ));
        assert!(matches!(
            upcoming("@hourly", Some("Mars/Base"), &utc("2026-01-01T00:00:00Z"), 1),
            Err(PreviewError::UnknownTimeZone(_))
        ));
        assert!(upcoming("0 0 30 2 *", None, &utc("2026-01-01T00:00:00Z"), 3).unwrap().times.is_empty());
    }
}
