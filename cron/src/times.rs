//! `pkg/controller/cronjob/utils.go`: `mostRecentScheduleTime`, `nextScheduleTimeDuration` and
//! `nextScheduleTime`, as pure functions of plain values.
//!
//! Times carry a zone as Go's do: `lastScheduleTime` and `creationTimestamp` are decoded into the
//! controller's local zone (metav1.Time), which is `now`'s zone here; `Next` evaluates a schedule
//! without `TZ=` in the zone of the time it is handed. Go's zero time (what robfig's `Next`
//! returns when nothing matches) is 0001-01-01T00:00:00Z in UTC and takes part in the arithmetic
//! exactly as upstream's does (it is before every `now`, and `Next` of it searches from year 1).
//! Durations are Go `time.Duration`s: int64 nanoseconds, products wrap, `Sub` saturates.

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};

use super::Schedule;

/// upstream `nextScheduleDelta`: requeue 100ms after the next schedule time.
pub const NEXT_SCHEDULE_DELTA_NANOS: i64 = 100_000_000;

/// Bound on the scan for the most recent time. Upstream has none: it scans from about two
/// periods before `now`, so a real schedule needs a handful of steps, but wrapped Go arithmetic
/// on absurd input could otherwise scan for seconds.
const MAX_SCAN: u32 = 10_000;

const NANOS_PER_SECOND: i64 = 1_000_000_000;
/// Go's zero `time.Time`, 0001-01-01T00:00:00Z, in Unix nanoseconds.
const GO_ZERO_NANOS: i128 = -62_135_596_800 * NANOS_PER_SECOND as i128;

/// The CronJob fields the computation reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CronJobTimes {
    /// `metadata.creationTimestamp`.
    pub creation: Timestamp,
    /// `status.lastScheduleTime`.
    pub last_schedule: Option<Timestamp>,
    /// `spec.startingDeadlineSeconds`.
    pub starting_deadline_seconds: Option<i64>,
}

/// upstream `missedSchedulesType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissedSchedules {
    None,
    Few,
    /// More than 100 missed: Warning `TooManyMissedTimes`, the Job is still created.
    Many,
}

/// What `mostRecentScheduleTime` returns when it returns no error.
#[derive(Debug, Clone, PartialEq)]
pub struct MostRecent {
    /// lastScheduleTime, else creationTimestamp, raised to now − startingDeadlineSeconds.
    pub earliest: Zoned,
    /// The most recent time a Job should have been created, if any is due.
    pub most_recent: Option<Zoned>,
    pub missed: MissedSchedules,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleTimeError {
    /// Upstream's error for a schedule whose next two times are less than a second apart (in
    /// practice both zero: `59 23 31 2 *`): Warning `InvalidSchedule`, no requeue.
    #[error("time difference between two schedules is less than 1 second")]
    TooClose,
    /// A time left the range jiff represents (years −9999…9999); Go would have carried on.
    #[error("schedule time out of range")]
    OutOfRange,
}

/// A Go `time.Time`: an instant in Unix nanoseconds and its location.
#[derive(Debug, Clone)]
struct GoTime {
    nanos: i128,
    tz: TimeZone,
}

impl GoTime {
    fn zero() -> GoTime {
        GoTime { nanos: GO_ZERO_NANOS, tz: TimeZone::UTC }
    }

    fn of(ts: Timestamp, tz: &TimeZone) -> GoTime {
        GoTime { nanos: ts.as_nanosecond(), tz: tz.clone() }
    }

    fn is_zero(&self) -> bool {
        self.nanos == GO_ZERO_NANOS
    }

    /// `t.Add(d)`.
    fn add(&self, d: i64) -> GoTime {
        GoTime { nanos: self.nanos + i128::from(d), tz: self.tz.clone() }
    }

    /// `t.Sub(u)`, saturating at Go's min/max Duration.
    fn sub(&self, u: &GoTime) -> i64 {
        let d = self.nanos - u.nanos;
        i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
    }

    fn to_zoned(&self) -> Result<Zoned, ScheduleTimeError> {
        let ts = Timestamp::from_nanosecond(self.nanos).map_err(|_| ScheduleTimeError::OutOfRange)?;
        Ok(ts.to_zoned(self.tz.clone()))
    }
}

/// `schedule.Next(t)`, zero time included.
fn next(schedule: &Schedule, t: &GoTime) -> GoTime {
    let Ok(ts) = Timestamp::from_nanosecond(t.nanos) else { return GoTime::zero() };
    match schedule.next(&ts.to_zoned(t.tz.clone())) {
        Some(z) => GoTime::of(z.timestamp(), &t.tz),
        None => GoTime::zero(),
    }
}

/// `Duration.Round(time.Second)`: halves away from zero, saturating.
fn round_second(d: i64) -> i64 {
    let m = NANOS_PER_SECOND;
    let r = d % m;
    let less_than_half = |x: i64| (x as u64).wrapping_add(x as u64) < m as u64;
    if d < 0 {
        let r = -r;
        if less_than_half(r) {
            return d + r;
        }
        return d.checked_sub(m - r).unwrap_or(i64::MIN);
    }
    if less_than_half(r) {
        return d - r;
    }
    d.checked_add(m - r).unwrap_or(i64::MAX)
}

/// `int64(d.Seconds())`.
fn whole_seconds(d: i64) -> i64 {
    let sec = d / NANOS_PER_SECOND;
    let nsec = d % NANOS_PER_SECOND;
    (sec as f64 + nsec as f64 / 1e9) as i64
}

/// upstream `mostRecentScheduleTime(cj, now, schedule, includeStartingDeadlineSeconds)`.
///
/// `now` is in the controller's local zone; the CronJob's timestamps are read in that zone.
pub fn most_recent_schedule_time(
    schedule: &Schedule,
    cj: &CronJobTimes,
    now: &Zoned,
    include_starting_deadline_seconds: bool,
) -> Result<MostRecent, ScheduleTimeError> {
    let now = GoTime::of(now.timestamp(), now.time_zone());
    let mut earliest = GoTime::of(cj.last_schedule.unwrap_or(cj.creation), &now.tz);
    if include_starting_deadline_seconds && let Some(sds) = cj.starting_deadline_seconds {
        // now.Add(-time.Second * time.Duration(sds))
        let deadline = now.add((-NANOS_PER_SECOND).wrapping_mul(sds));
        if deadline.nanos > earliest.nanos {
            earliest = deadline;
        }
    }

    let t1 = next(schedule, &earliest);
    let t2 = next(schedule, &t1);
    if now.nanos < t1.nanos {
        return Ok(MostRecent {
            earliest: earliest.to_zoned()?,
            most_recent: None,
            missed: MissedSchedules::None,
        });
    }
    if now.nanos < t2.nanos {
        return Ok(MostRecent {
            earliest: earliest.to_zoned()?,
            most_recent: Some(t1.to_zoned()?),
            missed: MissedSchedules::None,
        });
    }

    let between = whole_seconds(round_second(t2.sub(&t1)));
    if between < 1 {
        return Err(ScheduleTimeError::TooClose);
    }
    // The rough approximation: how many periods of t2−t1 fit between t1 and now.
    let elapsed = whole_seconds(now.sub(&t1));
    let missed_count = elapsed / between + 1;
    // Go back one period more than that and let the schedule find the real times (this is what
    // makes `30 10,11,12 * * 1-5` miss Friday 12:30 in upstream's test; reproduced).
    let back = missed_count.wrapping_sub(2).wrapping_mul(between).wrapping_mul(NANOS_PER_SECOND);
    let potential_earliest = t1.add(back);
    let mut most_recent: Option<GoTime> = None;
    let mut t = next(schedule, &potential_earliest);
    let mut scanned = 0;
    // Upstream loops forever if Next returns the zero time here (zero is never after now, and
    // the search restarts from year 1); this stops instead.
    while t.nanos <= now.nanos && !t.is_zero() && scanned < MAX_SCAN {
        let following = next(schedule, &t);
        most_recent = Some(t);
        t = following;
        scanned += 1;
    }

    let missed = if missed_count > 100 {
        MissedSchedules::Many
    } else if missed_count > 0 {
        MissedSchedules::Few
    } else {
        MissedSchedules::None
    };
    Ok(MostRecent {
        earliest: earliest.to_zoned()?,
        most_recent: most_recent.map(|t| t.to_zoned()).transpose()?,
        missed,
    })
}

/// upstream `nextScheduleTimeDuration`: when to requeue, `Next(base) + 100ms − now`, where base is
/// the most recent schedule time, else the earliest time if none was missed, else `now` (also
/// `now` when the schedule is invalid). startingDeadlineSeconds is not applied.
pub fn next_schedule_time_duration(schedule: &Schedule, cj: &CronJobTimes, now: &Zoned) -> SignedDuration {
    let go_now = GoTime::of(now.timestamp(), now.time_zone());
    let base = match most_recent_schedule_time(schedule, cj, now, false) {
        Err(_) => go_now.clone(),
        Ok(MostRecent { most_recent: Some(t), .. }) => GoTime::of(t.timestamp(), t.time_zone()),
        Ok(MostRecent { earliest, missed: MissedSchedules::None, .. }) => {
            GoTime::of(earliest.timestamp(), earliest.time_zone())
        }
        Ok(MostRecent { .. }) => go_now.clone(),
    };
    let requeue = next(schedule, &base).add(NEXT_SCHEDULE_DELTA_NANOS).sub(&go_now);
    SignedDuration::from_nanos(requeue)
}

/// A schedule time that is due.
#[derive(Debug, Clone, PartialEq)]
pub struct DueTime {
    pub scheduled: Zoned,
    /// More than 100 schedules were missed: record Warning `TooManyMissedTimes` ("too many missed
    /// start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew").
    pub too_many_missed: bool,
}

/// upstream `nextScheduleTime`: the most recent unmet schedule time at or before `now`
/// (startingDeadlineSeconds applied), or `None`.
pub fn next_schedule_time(
    schedule: &Schedule,
    cj: &CronJobTimes,
    now: &Zoned,
) -> Result<Option<DueTime>, ScheduleTimeError> {
    let recent = most_recent_schedule_time(schedule, cj, now, true)?;
    Ok(recent
        .most_recent
        .filter(|t| t.timestamp() <= now.timestamp())
        .map(|scheduled| DueTime { scheduled, too_many_missed: recent.missed == MissedSchedules::Many }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// utils_test.go topOfTheHour(): 2016-05-19T10:00:00Z (a Thursday), parsed as UTC.
    fn top() -> Zoned {
        "2016-05-19T10:00:00Z[UTC]".parse().expect("valid")
    }

    fn after(d: SignedDuration) -> Zoned {
        top().checked_add(d).expect("in range")
    }

    fn ts(d: SignedDuration) -> Timestamp {
        after(d).timestamp()
    }

    fn mins(m: i64) -> SignedDuration {
        SignedDuration::from_mins(m)
    }

    fn hours(h: i64) -> SignedDuration {
        SignedDuration::from_hours(h)
    }

    fn sched(s: &str) -> Schedule {
        Schedule::parse_standard(s).expect("valid schedule")
    }

    struct Case {
        name: &'static str,
        schedule: &'static str,
        creation: SignedDuration,
        last: Option<SignedDuration>,
        sds: Option<i64>,
        include_sds: bool,
        now: SignedDuration,
        earliest: SignedDuration,
        recent: Option<SignedDuration>,
        missed: MissedSchedules,
        err: bool,
    }

    // utils_test.go TestMostRecentScheduleTime, every row.
    #[test]
    fn upstream_most_recent_schedule_time() {
        use MissedSchedules::{Few, Many, None as NoneMissed};
        let z = SignedDuration::ZERO;
        let cases = [
            Case {
                name: "now before next schedule",
                schedule: "0 * * * *",
                creation: z,
                last: None,
                sds: None,
                include_sds: false,
                now: SignedDuration::from_secs(30),
                earliest: z,
                recent: None,
                missed: NoneMissed,
                err: false,
            },
            Case {
                name: "now just after next schedule",
                schedule: "0 * * * *",
                creation: z,
                last: None,
                sds: None,
                include_sds: false,
                now: mins(61),
                earliest: z,
                recent: Some(mins(60)),
                missed: NoneMissed,
                err: false,
            },
            Case {
                name: "missed 5 schedules",
                schedule: "0 * * * *",
                creation: SignedDuration::from_secs(10),
                last: None,
                sds: None,
                include_sds: false,
                now: mins(301),
                earliest: SignedDuration::from_secs(10),
                recent: Some(mins(300)),
                missed: Few,
                err: false,
            },
            Case {
                name: "complex schedule",
                schedule: "30 6-16/4 * * 1-5",
                creation: z,
                last: Some(mins(30)),
                sds: None,
                include_sds: false,
                now: hours(24) + mins(31),
                earliest: mins(30),
                recent: Some(hours(24) + mins(30)),
                missed: Few,
                err: false,
            },
            Case {
                name: "another complex schedule",
                schedule: "30 10,11,12 * * 1-5",
                creation: z,
                last: Some(mins(30)),
                sds: None,
                include_sds: false,
                now: hours(30) + mins(30),
                earliest: mins(30),
                recent: None,
                missed: Few,
                err: false,
            },
            Case {
                name: "complex schedule with longer diff between executions",
                schedule: "30 6-16/4 * * 1-5",
                creation: z,
                last: Some(mins(30)),
                sds: None,
                include_sds: false,
                now: hours(96) + mins(31),
                earliest: mins(30),
                recent: Some(hours(96) + mins(30)),
                missed: Few,
                err: false,
            },
            Case {
                name: "complex schedule with shorter diff between executions",
                schedule: "30 6-16/4 * * 1-5",
                creation: z,
                last: None,
                sds: None,
                include_sds: false,
                now: hours(24) + mins(31),
                earliest: z,
                recent: Some(hours(24) + mins(30)),
                missed: Few,
                err: false,
            },
            Case {
                name: "@every schedule",
                schedule: "@every 1h",
                creation: -mins(59),
                last: Some(mins(1)),
                sds: Some(10),
                include_sds: false,
                now: hours(7 * 24),
                earliest: mins(1),
                recent: Some(hours(6 * 24 + 23) + mins(1)),
                missed: Many,
                err: false,
            },
            Case {
                name: "rogue cronjob",
                schedule: "59 23 31 2 *",
                creation: SignedDuration::from_secs(10),
                last: None,
                sds: None,
                include_sds: false,
                now: hours(1),
                earliest: z,
                recent: None,
                missed: NoneMissed,
                err: true,
            },
            Case {
                name: "earliestTime being CreationTimestamp and LastScheduleTime",
                schedule: "0 * * * *",
                creation: z,
                last: Some(z),
                sds: None,
                include_sds: false,
                now: SignedDuration::from_secs(30),
                earliest: z,
                recent: None,
                missed: NoneMissed,
                err: false,
            },
            Case {
                name: "earliestTime being LastScheduleTime",
                schedule: "*/5 * * * *",
                creation: z,
                last: Some(mins(30)),
                sds: None,
                include_sds: false,
                now: mins(31),
                earliest: mins(30),
                recent: None,
                missed: NoneMissed,
                err: false,
            },
            Case {
                name: "earliestTime being LastScheduleTime (within StartingDeadlineSeconds)",
                schedule: "*/5 * * * *",
                creation: z,
                last: Some(mins(30)),
                sds: Some(60),
                include_sds: false,
                now: mins(31),
                earliest: mins(30),
                recent: None,
                missed: NoneMissed,
                err: false,
            },
            Case {
                name: "earliestTime being LastScheduleTime (outside StartingDeadlineSeconds)",
                schedule: "*/5 * * * *",
                creation: z,
                last: Some(mins(30)),
                sds: Some(60),
                include_sds: true,
                now: mins(32),
                earliest: mins(31),
                recent: None,
                missed: NoneMissed,
                err: false,
            },
        ];
        for c in cases {
            let cj = CronJobTimes {
                creation: ts(c.creation),
                last_schedule: c.last.map(ts),
                starting_deadline_seconds: c.sds,
            };
            let got = most_recent_schedule_time(&sched(c.schedule), &cj, &after(c.now), c.include_sds);
            if c.err {
                assert_eq!(got, Err(ScheduleTimeError::TooClose), "{}", c.name);
                continue;
            }
            let got = got.unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert_eq!(got.earliest, after(c.earliest), "{}", c.name);
            assert_eq!(got.most_recent, c.recent.map(after), "{}", c.name);
            assert_eq!(got.missed, c.missed, "{}", c.name);
        }
    }

    // utils_test.go TestNextScheduleTimeDuration, every row.
    #[test]
    fn upstream_next_schedule_time_duration() {
        let delta = SignedDuration::from_millis(100);
        let cases: [(&str, &str, Option<SignedDuration>, SignedDuration, SignedDuration); 4] = [
            (
                "complex schedule skipping weekend",
                "30 6-16/4 * * 1-5",
                Some(mins(30)),
                hours(24) + mins(31),
                hours(3) + mins(59) + delta,
            ),
            (
                "another complex schedule skipping weekend",
                "30 10,11,12 * * 1-5",
                Some(mins(30)),
                hours(30) + mins(30),
                hours(66) + delta,
            ),
            (
                "once a week cronjob, missed two runs",
                "0 12 * * 4",
                Some(hours(2)),
                hours(19 * 24 + 1) + mins(30),
                hours(48) + mins(30) + delta,
            ),
            ("no previous run of a cronjob", "0 12 * * 5", None, hours(6), hours(20) + delta),
        ];
        for (name, schedule, last, now, want) in cases {
            let cj = CronJobTimes {
                creation: top().timestamp(),
                last_schedule: last.map(ts),
                starting_deadline_seconds: None,
            };
            assert_eq!(next_schedule_time_duration(&sched(schedule), &cj, &after(now)), want, "{name}");
        }
    }

    // utils_test.go TestNextScheduleTime, cases 1-8 (schedule "0 * * * ?").
    #[test]
    fn upstream_next_schedule_time() {
        let s = sched("0 * * * ?");
        let t1 = SignedDuration::ZERO;
        let t2 = hours(1);
        let run = |creation, last: Option<SignedDuration>, sds, now, s: &Schedule| {
            let cj = CronJobTimes {
                creation: ts(creation),
                last_schedule: last.map(ts),
                starting_deadline_seconds: sds,
            };
            next_schedule_time(s, &cj, &after(now))
        };
        // 1: no known start times, and none needed yet.
        assert_eq!(run(t1 - mins(10), None, None, t1 - mins(7), &s), Ok(None));
        // 2: no known start times, and one needed.
        let got = run(t1 - mins(10), None, None, t1 + SignedDuration::from_secs(2), &s).expect("ok");
        assert_eq!(got.map(|d| d.scheduled), Some(after(t1)));
        // 3: known LastScheduleTime, no start needed.
        assert_eq!(run(t1 - mins(10), Some(t1), None, t1 + mins(2), &s), Ok(None));
        // 4: known LastScheduleTime, a start needed.
        let got = run(t1 - mins(10), Some(t1), None, t2 + mins(5), &s).expect("ok");
        assert_eq!(got.map(|d| d.scheduled), Some(after(t2)));
        // 5: known LastScheduleTime, two starts needed.
        let got = run(t1 - hours(2), Some(t1 - hours(1)), None, t2 + mins(5), &s).expect("ok");
        assert_eq!(got.map(|d| d.scheduled), Some(after(t2)));
        // 6: now is way way ahead of last start time, and there is no deadline.
        let got = run(t1 - hours(2), Some(t1 - hours(1)), None, t2 + hours(240), &s).expect("ok");
        let got = got.expect("missed times");
        assert_eq!(got.scheduled, after(t2 + hours(240)));
        assert!(got.too_many_missed);
        // 7: now is way way ahead of last start time, but there is a short deadline.
        let got =
            run(t1 - hours(2), Some(t1 - hours(1)), Some(2 * 60 * 60), t2 + hours(240), &s).expect("ok");
        let got = got.expect("missed times");
        assert_eq!(got.scheduled, after(t2 + hours(240)));
        assert!(!got.too_many_missed);
        // 8: the error from mostRecentScheduleTime gets populated up.
        let rogue = sched("59 23 31 2 *");
        assert_eq!(
            run(t1 + SignedDuration::from_secs(10), None, None, hours(1), &rogue),
            Err(ScheduleTimeError::TooClose)
        );
    }

    // UPSTREAM.md §2 CronJob mostRecent case 8 and the requeue of the controller cases.
    #[test]
    fn upstream_md_cases() {
        let cj = CronJobTimes {
            creation: top().timestamp(),
            last_schedule: Some(ts(mins(30))),
            starting_deadline_seconds: Some(60),
        };
        let got = most_recent_schedule_time(&sched("*/5 * * * *"), &cj, &after(mins(32)), true).expect("ok");
        assert_eq!((got.earliest, got.most_recent), (after(mins(31)), None));
        // Controller case 1: created 09:59, now 09:59 → requeue 1m+100ms.
        let s = sched("0 * * * ?");
        let cj =
            CronJobTimes { creation: ts(-mins(1)), last_schedule: None, starting_deadline_seconds: None };
        assert_eq!(
            next_schedule_time_duration(&s, &cj, &after(-mins(1))),
            mins(1) + SignedDuration::from_millis(100)
        );
        // Controller case 2: now 10:01, after the Job for 10:00 was created → 59m+100ms.
        let cj = CronJobTimes { last_schedule: Some(ts(SignedDuration::ZERO)), ..cj };
        assert_eq!(
            next_schedule_time_duration(&s, &cj, &after(mins(1))),
            mins(59) + SignedDuration::from_millis(100)
        );
        // Controller case 5: last run a week ago → due now, one warning (168 missed > 100).
        let cj = CronJobTimes { last_schedule: Some(ts(-hours(168))), ..cj };
        let due = next_schedule_time(&s, &cj, &after(SignedDuration::ZERO)).expect("ok").expect("due");
        assert_eq!(due.scheduled, top());
        assert!(due.too_many_missed);
    }

    #[test]
    fn go_duration_helpers() {
        assert_eq!(round_second(1_499_999_999), 1_000_000_000);
        assert_eq!(round_second(1_500_000_000), 2_000_000_000);
        assert_eq!(round_second(-1_500_000_000), -2_000_000_000);
        assert_eq!(round_second(i64::MAX), i64::MAX);
        assert_eq!(whole_seconds(i64::MAX), 9_223_372_036);
        assert_eq!(whole_seconds(-1_999_999_999), -1);
    }

    /// The zero-time arithmetic of a schedule that has no activation: requeue saturates at Go's
    /// minimum Duration, as upstream's `Next(zero).Add(100ms).Sub(now)` does.
    #[test]
    fn unsatisfiable_schedule_requeue() {
        let s = sched("0 0 30 2 *");
        let cj = CronJobTimes {
            creation: top().timestamp(),
            last_schedule: None,
            starting_deadline_seconds: None,
        };
        let now = after(hours(1));
        assert_eq!(most_recent_schedule_time(&s, &cj, &now, false), Err(ScheduleTimeError::TooClose));
        assert_eq!(next_schedule_time_duration(&s, &cj, &now), SignedDuration::from_nanos(i64::MIN));
    }
}
