//! robfig/cron v3.0.1 `spec.go`: `SpecSchedule.Next`, on whole Unix seconds and a jiff
//! [`TimeZone`], reproducing the Go `time` operations it is written with:
//!
//! - `t.Year()`, `t.Month()`, … read the wall clock of `t` in its location;
//! - `t.Add(d)` moves the instant (absolute time), so stepping an hour or a minute across a DST
//!   change lands on whatever wall time that instant has;
//! - `t.Truncate(time.Minute)` truncates the instant (not the wall clock) to a whole minute;
//! - `time.Date(y, mo, d, h, mi, s, 0, loc)` (and `AddDate`, which is `Date` on the wall fields
//!   plus the increments) normalises overflowing fields (Feb 30 → Mar 1/2, month 13 → January of
//!   the next year), then resolves the wall time with Go's rule: with `unix` the wall time read as
//!   UTC, `off1 = offset(unix)` and the result is `unix - offset(unix - off1)`. For a time that
//!   does not exist this picks the pre-transition offset's reading (New York 02:30 → 01:30 EST,
//!   Berlin 02:30 → 03:30 CEST); for a repeated time, the offset in force at `unix - off1`
//!   (New York 01:30 → the first, EDT; Berlin 02:30 → the second, CET).
//!
//! Go's `Date` checks whether `unix - off1` lies in the zone period found for `unix` and looks the
//! offset up again only if not; both branches give `offset(unix - off1)`, which is what is used
//! here. The test-only transliteration in `reference.rs` keeps Go's period check (on jiff's
//! transitions) and must agree.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::parser::STAR_BIT;

/// The parsed bit sets (bit n = value n; bit 63 = the star bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpecSchedule {
    pub(crate) second: u64,
    pub(crate) minute: u64,
    pub(crate) hour: u64,
    pub(crate) dom: u64,
    pub(crate) month: u64,
    pub(crate) dow: u64,
}

/// Loop iterations after which `next` gives up. robfig itself never stops where Go's `time.Date`
/// keeps mapping the next day back onto the same day (Pacific/Apia, 2011-12-30, which did not
/// exist): it spins forever there. Legitimate searches take a few thousand steps at most
/// (five years of day steps plus one day's hours and minutes).
const MAX_STEPS: u32 = 200_000;

/// Wall-clock fields of an instant in a zone, as Go's accessors return them.
#[derive(Debug, Clone, Copy)]
struct Wall {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    /// Sunday = 0.
    weekday: i64,
}

struct Zone<'a>(&'a TimeZone);

impl Zone<'_> {
    fn offset(&self, unix: i64) -> Option<i64> {
        let ts = Timestamp::from_second(unix).ok()?;
        Some(i64::from(self.0.to_offset(ts).seconds()))
    }

    fn wall(&self, unix: i64) -> Option<Wall> {
        let local = unix.checked_add(self.offset(unix)?)?;
        let days = local.div_euclid(86_400);
        let secs = local.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        Some(Wall {
            year,
            month,
            day,
            hour: secs / 3600,
            minute: secs / 60 % 60,
            second: secs % 60,
            // 1970-01-01 was a Thursday.
            weekday: (days + 4).rem_euclid(7),
        })
    }

    /// `time.Date(year, month, day, hour, min, sec, 0, loc).Unix()`.
    fn date(&self, year: i64, month: i64, day: i64, hour: i64, min: i64, sec: i64) -> Option<i64> {
        let m0 = month - 1;
        let year = year + m0.div_euclid(12);
        let month = m0.rem_euclid(12) + 1;
        let min = min + sec.div_euclid(60);
        let sec = sec.rem_euclid(60);
        let hour = hour + min.div_euclid(60);
        let min = min.rem_euclid(60);
        let day = day + hour.div_euclid(24);
        let hour = hour.rem_euclid(24);
        if !(-20_000..=20_000).contains(&year) {
            return None;
        }
        let days = days_from_civil(year, month, 1) + (day - 1);
        let unix = days * 86_400 + hour * 3600 + min * 60 + sec;
        let off1 = self.offset(unix)?;
        Some(unix - self.offset(unix - off1)?)
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn has(bits: u64, n: i64) -> bool {
    (0..64).contains(&n) && bits & (1 << n) != 0
}

/// `dayMatches`: day-of-month and day-of-week are ORed, unless either carries the star bit.
fn day_matches(s: &SpecSchedule, w: &Wall) -> bool {
    let dom_match = has(s.dom, w.day);
    let dow_match = has(s.dow, w.weekday);
    if s.dom & STAR_BIT != 0 || s.dow & STAR_BIT != 0 {
        dom_match && dow_match
    } else {
        dom_match || dow_match
    }
}

impl SpecSchedule {
    /// `Next(t)` with `t` already converted to the evaluation location `tz`: the first activation
    /// strictly after `t`, or `None` where robfig returns the zero time.
    pub(crate) fn next(&self, tz: &TimeZone, t: Timestamp) -> Option<Timestamp> {
        let z = Zone(tz);
        // Start at the earliest possible time (the upcoming second).
        let mut u = i64::try_from(t.as_nanosecond().div_euclid(1_000_000_000)).ok()?.checked_add(1)?;
        let mut added = false;
        let mut w = z.wall(u)?;
        let year_limit = w.year + 5;
        let mut steps = 0u32;
        let mut step = || {
            steps += 1;
            (steps <= MAX_STEPS).then_some(())
        };

        'wrap: loop {
            step()?;
            if w.year > year_limit {
                return None;
            }

            while !has(self.month, w.month) {
                step()?;
                if !added {
                    added = true;
                    u = z.date(w.year, w.month, 1, 0, 0, 0)?;
                    w = z.wall(u)?;
                }
                // AddDate(0, 1, 0)
                u = z.date(w.year, w.month + 1, w.day, w.hour, w.minute, w.second)?;
                w = z.wall(u)?;
                if w.month == 1 {
                    continue 'wrap;
                }
            }

            while !day_matches(self, &w) {
                step()?;
                if !added {
                    added = true;
                    u = z.date(w.year, w.month, w.day, 0, 0, 0)?;
                    w = z.wall(u)?;
                }
                // AddDate(0, 0, 1)
                u = z.date(w.year, w.month, w.day + 1, w.hour, w.minute, w.second)?;
                w = z.wall(u)?;
                // Notice if the hour is no longer midnight due to DST.
                if w.hour != 0 {
                    if w.hour > 12 {
                        u += (24 - w.hour) * 3600;
                    } else {
                        u -= w.hour * 3600;
                    }
                    w = z.wall(u)?;
                }
                if w.day == 1 {
                    continue 'wrap;
                }
            }

            while !has(self.hour, w.hour) {
                step()?;
                if !added {
                    added = true;
                    u = z.date(w.year, w.month, w.day, w.hour, 0, 0)?;
                }
                u += 3600;
                w = z.wall(u)?;
                if w.hour == 0 {
                    continue 'wrap;
                }
            }

            while !has(self.minute, w.minute) {
                step()?;
                if !added {
                    added = true;
                    // Truncate(time.Minute): the instant, not the wall clock (Go counts from
                    // 0001-01-01 UTC, a whole number of minutes before the Unix epoch).
                    u = u.div_euclid(60) * 60;
                }
                u += 60;
                w = z.wall(u)?;
                if w.minute == 0 {
                    continue 'wrap;
                }
            }

            if !has(self.second, w.second) {
                // `Truncate(time.Second)` is a no-op: `u` is already whole seconds.
                added = true;
                // Go steps one second at a time until the second matches or wraps to 0. Under a
                // whole-minute offset the wall second is the Unix second mod 60, so the stop is
                // known; step there at once unless the offset differs at the far end.
                let k =
                    (1..=60 - w.second).find(|k| (w.second + k) % 60 == 0 || has(self.second, w.second + k));
                let off = z.offset(u)?;
                match k {
                    Some(k) if off % 60 == 0 && z.offset(u + k)? == off => {
                        for _ in 0..k {
                            step()?;
                        }
                        u += k;
                        w = z.wall(u)?;
                    }
                    _ => loop {
                        step()?;
                        u += 1;
                        w = z.wall(u)?;
                        if w.second == 0 || has(self.second, w.second) {
                            break;
                        }
                    },
                }
                if w.second == 0 {
                    continue 'wrap;
                }
            }

            return Timestamp::from_second(u).ok();
        }
    }
}
