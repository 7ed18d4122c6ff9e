//! Time as the controllers see it: one clock per worker, wall and monotonic, injected into every
//! shell (Job, CronJob, TTL) and the event recorder. The system clock in production; tests
//! inject a clock that runs faster than real time, so a CronJob that fires every minute fires
//! every second.

use std::time::Duration;

use jiff::Timestamp;

pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Wall time: what timestamps written to the API (and compared with them) use.
    fn now(&self) -> Timestamp;
    /// Monotonic time: what durations (sync timings) are measured with. Real time for every
    /// clock here (a sped-up clock speeds up wall time only; its delays are mapped by `real`);
    /// tokio's, so tests with paused time control it.
    fn monotonic(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
    /// How long to really wait for `delay` of this clock's time to pass.
    fn real(&self, delay: Duration) -> Duration;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn real(&self, delay: Duration) -> Duration {
        delay
    }
}

/// A clock that starts at `start` and runs `speed` times faster than real time.
#[derive(Debug, Clone)]
pub struct ScaledClock {
    origin: std::time::Instant,
    start: Timestamp,
    speed: f64,
}

impl ScaledClock {
    pub fn new(start: Timestamp, speed: f64) -> Self {
        Self { origin: std::time::Instant::now(), start, speed: speed.max(f64::MIN_POSITIVE) }
    }

    /// The clock that reads `anchor` at the wall time `anchor` and runs `speed` times faster
    /// than the wall clock from there: `anchor + (wall − anchor) · speed`. Every process built
    /// with the same anchor and speed reads the same time (as closely as their wall clocks
    /// agree), so several worker processes can share one fast CronJob clock.
    pub fn anchored(anchor: Timestamp, speed: f64) -> Self {
        Self::new(scaled_from(anchor, speed, Timestamp::now()), speed)
    }
}

/// `anchor + (wall − anchor) · speed`, the time an [anchored](ScaledClock::anchored) clock reads
/// at the wall time `wall`.
pub fn scaled_from(anchor: Timestamp, speed: f64, wall: Timestamp) -> Timestamp {
    let since = wall.duration_since(anchor).as_secs_f64() * speed;
    jiff::SignedDuration::try_from_secs_f64(since)
        .ok()
        .and_then(|d| anchor.checked_add(d).ok())
        .unwrap_or(wall)
}

impl Clock for ScaledClock {
    fn now(&self) -> Timestamp {
        let elapsed = self.origin.elapsed().mul_f64(self.speed);
        let elapsed = jiff::SignedDuration::try_from(elapsed).unwrap_or(jiff::SignedDuration::MAX);
        self.start.checked_add(elapsed).unwrap_or(self.start)
    }

    fn real(&self, delay: Duration) -> Duration {
        delay.div_f64(self.speed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scaled_clock_runs_faster_and_scales_delays_back() {
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let c = ScaledClock::new(start, 60.0);
        assert!(c.now() >= start);
        assert_eq!(c.real(Duration::from_secs(60)), Duration::from_secs(1));
        assert_eq!(SystemClock.real(Duration::from_secs(3)), Duration::from_secs(3));
    }

    #[test]
    fn an_anchored_clock_reads_the_anchor_at_the_anchor_and_runs_faster_after_it() {
        let anchor: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(scaled_from(anchor, 10.0, anchor), anchor);
        let later: Timestamp = "2026-01-01T00:00:06Z".parse().unwrap();
        assert_eq!(scaled_from(anchor, 10.0, later), "2026-01-01T00:01:00Z".parse().unwrap());
        let earlier: Timestamp = "2025-12-31T23:59:54Z".parse().unwrap();
        assert_eq!(scaled_from(anchor, 10.0, earlier), "2025-12-31T23:59:00Z".parse().unwrap());
        let c = ScaledClock::anchored(Timestamp::now(), 10.0);
        let read = c.now();
        assert!(read.duration_since(Timestamp::now()).abs() < jiff::SignedDuration::from_secs(1));
    }
}
