//! Test-only: a second, literal transliteration of robfig/cron v3.0.1 `SpecSchedule.Next`,
//! written independently of `spec.rs` to cross-check it.
//!
//! Where `spec.rs` works on Unix seconds with its own calendar arithmetic and a simplified form of
//! Go's `time.Date` offset rule, this one models a Go `time.Time` as a jiff instant plus location,
//! reads fields through jiff's civil `DateTime`, normalises `time.Date` fields with jiff's civil
//! arithmetic, resolves the offset with Go's code as written (`lookup` returning the zone period
//! `[start, end)`, taken from jiff's transition iterators, and the `utc < start || utc >= end`
//! re-lookup), and follows spec.go's `goto WRAP` with an explicit state machine.

use jiff::civil::{DateTime, date};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Span, Timestamp, Zoned};

use super::parser::STAR_BIT;
use super::spec::SpecSchedule;
use super::{Kind, Schedule};

/// Seconds from Go's zero time (0001-01-01 UTC) to the Unix epoch.
const ZERO_TO_UNIX: i64 = 62_135_596_800;

/// A Go `time.Time` with whole seconds (spec.go never has nanoseconds after its first step).
#[derive(Clone)]
struct T {
    ts: Timestamp,
    loc: TimeZone,
}

impl T {
    fn civil(&self) -> DateTime {
        self.loc.to_datetime(self.ts)
    }
    fn year(&self) -> i64 {
        i64::from(self.civil().year())
    }
    fn month(&self) -> i64 {
        i64::from(self.civil().month())
    }
    fn day(&self) -> i64 {
        i64::from(self.civil().day())
    }
    fn hour(&self) -> i64 {
        i64::from(self.civil().hour())
    }
    fn minute(&self) -> i64 {
        i64::from(self.civil().minute())
    }
    fn second(&self) -> i64 {
        i64::from(self.civil().second())
    }
    fn weekday(&self) -> i64 {
        i64::from(self.civil().weekday().to_sunday_zero_offset())
    }
    /// `t.Add(n * time.Second)`.
    fn add(&self, secs: i64) -> Option<T> {
        Some(T { ts: self.ts.checked_add(SignedDuration::from_secs(secs)).ok()?, loc: self.loc.clone() })
    }
    /// `t.AddDate(years, months, days)` = `Date(y+years, m+months, d+days, h, mi, s, ns, loc)`.
    fn add_date(&self, years: i64, months: i64, days: i64) -> Option<T> {
        go_date(
            self.year() + years,
            self.month() + months,
            self.day() + days,
            self.hour(),
            self.minute(),
            self.second(),
            &self.loc,
        )
    }
    /// `t.Truncate(d)`: rounds the instant down to a multiple of `d` since Go's zero time.
    fn truncate(&self, d: i64) -> Option<T> {
        let since_zero = self.ts.as_second() + ZERO_TO_UNIX;
        let r = since_zero.rem_euclid(d);
        self.add(-r)
    }
}

/// Go's `Location.lookup(sec)`: the offset in force at `sec` and the bounds of its zone period.
fn lookup(loc: &TimeZone, sec: i64) -> Option<(i64, i64, i64)> {
    let ts = Timestamp::from_second(sec).ok()?;
    let offset = i64::from(loc.to_offset(ts).seconds());
    // The last transition at or before `sec` (transitions are on whole seconds).
    let start = loc.preceding(ts.checked_add(SignedDuration::from_secs(1)).ok()?).next();
    let end = loc.following(ts).next();
    let start = start.map_or(i64::MIN, |t| t.timestamp().as_second());
    let end = end.map_or(i64::MAX, |t| t.timestamp().as_second());
    Some((offset, start, end))
}

/// Go's `time.Date(year, month, day, hour, min, sec, 0, loc)`.
fn go_date(year: i64, month: i64, day: i64, hour: i64, min: i64, sec: i64, loc: &TimeZone) -> Option<T> {
    // Normalize month, overflowing into year; the rest overflow into days (civil arithmetic).
    let m = month - 1;
    let year = year + m.div_euclid(12);
    let month = m.rem_euclid(12) + 1;
    let first = date(i16::try_from(year).ok()?, i8::try_from(month).ok()?, 1).at(0, 0, 0, 0);
    let span = Span::new()
        .try_days(day - 1)
        .ok()?
        .try_hours(hour)
        .ok()?
        .try_minutes(min)
        .ok()?
        .try_seconds(sec)
        .ok()?;
    let civil = first.checked_add(span).ok()?;
    let mut unix = civil.to_zoned(TimeZone::UTC).ok()?.timestamp().as_second();
    // Look for zone offset for expected time, so we can adjust to UTC.
    let (mut offset, start, end) = lookup(loc, unix)?;
    if offset != 0 {
        let utc = unix - offset;
        if utc < start || utc >= end {
            offset = lookup(loc, utc)?.0;
        }
        unix -= offset;
    }
    Some(T { ts: Timestamp::from_second(unix).ok()?, loc: loc.clone() })
}

fn bit(bits: u64, n: i64) -> bool {
    bits & (1u64 << n) != 0
}

fn day_matches(s: &SpecSchedule, t: &T) -> bool {
    let dom_match = bit(s.dom, t.day());
    let dow_match = bit(s.dow, t.weekday());
    if s.dom & STAR_BIT > 0 || s.dow & STAR_BIT > 0 {
        return dom_match && dow_match;
    }
    dom_match || dow_match
}

/// spec.go's labels and loops as states.
#[derive(Clone, Copy)]
enum State {
    Wrap,
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

/// `SpecSchedule.Next(t)` for `t` in `loc` (already converted).
fn spec_next(s: &SpecSchedule, loc: &TimeZone, t: Timestamp) -> Option<Timestamp> {
    // t = t.Add(1*time.Second - time.Duration(t.Nanosecond())*time.Nanosecond)
    let nanos = t.as_nanosecond();
    let whole = Timestamp::from_nanosecond(nanos - nanos.rem_euclid(1_000_000_000)).ok()?;
    let mut t = T { ts: whole, loc: loc.clone() }.add(1)?;
    let mut added = false;
    let year_limit = t.year() + 5;
    let mut state = State::Wrap;
    for _ in 0..400_000 {
        state = match state {
            State::Wrap => {
                if t.year() > year_limit {
                    return None;
                }
                State::Month
            }
            State::Month => {
                if bit(s.month, t.month()) {
                    State::Day
                } else {
                    if !added {
                        added = true;
                        t = go_date(t.year(), t.month(), 1, 0, 0, 0, loc)?;
                    }
                    t = t.add_date(0, 1, 0)?;
                    if t.month() == 1 { State::Wrap } else { State::Month }
                }
            }
            State::Day => {
                if day_matches(s, &t) {
                    State::Hour
                } else {
                    if !added {
                        added = true;
                        t = go_date(t.year(), t.month(), t.day(), 0, 0, 0, loc)?;
                    }
                    t = t.add_date(0, 0, 1)?;
                    if t.hour() != 0 {
                        if t.hour() > 12 {
                            t = t.add((24 - t.hour()) * 3600)?;
                        } else {
                            t = t.add(-t.hour() * 3600)?;
                        }
                    }
                    if t.day() == 1 { State::Wrap } else { State::Day }
                }
            }
            State::Hour => {
                if bit(s.hour, t.hour()) {
                    State::Minute
                } else {
                    if !added {
                        added = true;
                        t = go_date(t.year(), t.month(), t.day(), t.hour(), 0, 0, loc)?;
                    }
                    t = t.add(3600)?;
                    if t.hour() == 0 { State::Wrap } else { State::Hour }
                }
            }
            State::Minute => {
                if bit(s.minute, t.minute()) {
                    State::Second
                } else {
                    if !added {
                        added = true;
                        t = t.truncate(60)?;
                    }
                    t = t.add(60)?;
                    if t.minute() == 0 { State::Wrap } else { State::Minute }
                }
            }
            State::Second => {
                if bit(s.second, t.second()) {
                    return Some(t.ts);
                }
                if !added {
                    added = true;
                    t = t.truncate(1)?;
                }
                t = t.add(1)?;
                if t.second() == 0 { State::Wrap } else { State::Second }
            }
        };
    }
    None
}

/// `Schedule.Next` by the literal transliteration (ConstantDelay written out again too).
pub(super) fn next(schedule: &Schedule, t: &Zoned) -> Option<Zoned> {
    let ts = match &schedule.kind {
        Kind::Every(every) => {
            let nanos = t.timestamp().as_nanosecond();
            let sub = nanos.rem_euclid(1_000_000_000);
            Timestamp::from_nanosecond(nanos - sub + i128::from(every.delay_seconds) * 1_000_000_000).ok()?
        }
        Kind::Spec { spec, location } => {
            let loc = location.as_ref().map_or_else(|| t.time_zone().clone(), |l| l.tz.clone());
            spec_next(spec, &loc, t.timestamp())?
        }
    };
    Some(ts.to_zoned(t.time_zone().clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's time_test.go TestDate rows for America/Los_Angeles ("Local" there), and the Berlin
    /// counterparts: a nonexistent time takes the pre-transition offset's reading, a repeated
    /// one the offset in force at `unix - off1`.
    #[test]
    fn go_date_rows() {
        let la = TimeZone::get("America/Los_Angeles").expect("tz");
        let unix =
            |y, mo, d, h, mi, s, tz: &TimeZone| go_date(y, mo, d, h, mi, s, tz).expect("ok").ts.as_second();
        assert_eq!(unix(2011, 11, 6, 1, 0, 0, &la), 1_320_566_400); // 1:00:00 PDT
        assert_eq!(unix(2011, 11, 6, 1, 59, 59, &la), 1_320_569_999); // 1:59:59 PDT
        assert_eq!(unix(2011, 11, 6, 2, 0, 0, &la), 1_320_573_600); // 2:00:00 PST
        assert_eq!(unix(2011, 3, 13, 1, 0, 0, &la), 1_300_006_800); // 1:00:00 PST
        assert_eq!(unix(2011, 3, 13, 1, 59, 59, &la), 1_300_010_399); // 1:59:59 PST
        assert_eq!(unix(2011, 3, 13, 3, 0, 0, &la), 1_300_010_400); // 3:00:00 PDT
        assert_eq!(unix(2011, 3, 13, 2, 30, 0, &la), 1_300_008_600); // 2:30:00 PDT ≡ 1:30 PST
        assert_eq!(unix(2012, 12, 31, 23, 59, 60, &TimeZone::UTC), 1_356_998_400);
        let berlin = TimeZone::get("Europe/Berlin").expect("tz");
        // 2024-03-31 02:30 does not exist → 03:30 CEST (01:30Z).
        assert_eq!(unix(2024, 3, 31, 2, 30, 0, &berlin), 1_711_848_600);
        // 2024-10-27 02:30 happens twice → the second one, CET (01:30Z).
        assert_eq!(unix(2024, 10, 27, 2, 30, 0, &berlin), 1_729_992_600);
    }

    /// The period bounds come out as Go's: start ≤ sec < end.
    #[test]
    fn lookup_bounds() {
        let ny = TimeZone::get("America/New_York").expect("tz");
        let transition = 1_710_054_000; // 2024-03-10T07:00:00Z
        assert_eq!(lookup(&ny, transition), Some((-4 * 3600, transition, 1_730_613_600)));
        let (off, _, end) = lookup(&ny, transition - 1).expect("ok");
        assert_eq!((off, end), (-5 * 3600, transition));
        assert_eq!(lookup(&TimeZone::UTC, 0), Some((0, i64::MIN, i64::MAX)));
    }
}
