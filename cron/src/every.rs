//! robfig/cron v3.0.1 `constantdelay.go`: the `@every <duration>` schedule.

use jiff::Timestamp;

/// `ConstantDelaySchedule`: a whole number of seconds, at least one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConstantDelay {
    pub(crate) delay_seconds: i64,
}

impl ConstantDelay {
    /// `Every(duration)`: below one second becomes one second (negative durations too); the
    /// sub-second part is dropped.
    pub(crate) fn every(nanos: i64) -> Self {
        const SECOND: i64 = 1_000_000_000;
        let nanos = nanos.max(SECOND);
        Self { delay_seconds: (nanos - nanos % SECOND) / SECOND }
    }

    /// `Next(t) = t.Add(Delay - t.Nanosecond())`: the whole second of `t` plus the delay, with no
    /// time-zone arithmetic at all. `None` only when the result leaves jiff's range.
    pub(crate) fn next(&self, t: Timestamp) -> Option<Timestamp> {
        let floor = i64::try_from(t.as_nanosecond().div_euclid(1_000_000_000)).ok()?;
        Timestamp::from_second(floor.checked_add(self.delay_seconds)?).ok()
    }
}
