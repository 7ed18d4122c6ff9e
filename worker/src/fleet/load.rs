//! Each held shard's load as the coordinator's placement weighs it: reconciles per second,
//! smoothed so that one busy second does not move shards (the placement's hysteresis absorbs
//! wobble, not bursts). The meter outlives sessions, so a new leader hears the figures the old
//! one heard.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct LoadMeter {
    half_life: Duration,
    shards: BTreeMap<u32, Sample>,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    reconciles: u64,
    at: Instant,
    rate: f64,
}

impl LoadMeter {
    /// A burst's weight halves every `half_life` once it ends.
    pub fn new(half_life: Duration) -> Self {
        Self { half_life, shards: BTreeMap::new() }
    }

    /// Takes each held shard's reconcile count at `now`; shards not given are no longer held and
    /// are forgotten. A shard's first count only starts its meter.
    pub fn record(&mut self, counts: impl IntoIterator<Item = (u32, u64)>, now: Instant) {
        let mut next = BTreeMap::new();
        for (shard, reconciles) in counts {
            let sample = match self.shards.get(&shard) {
                Some(last) => {
                    let elapsed = now.saturating_duration_since(last.at).as_secs_f64();
                    if elapsed <= 0.0 {
                        *last
                    } else {
                        let instant = reconciles.saturating_sub(last.reconciles) as f64 / elapsed;
                        let keep = 0.5f64.powf(elapsed / self.half_life.as_secs_f64().max(f64::MIN_POSITIVE));
                        Sample { reconciles, at: now, rate: keep * last.rate + (1.0 - keep) * instant }
                    }
                }
                None => Sample { reconciles, at: now, rate: 0.0 },
            };
            next.insert(shard, sample);
        }
        self.shards = next;
    }

    /// The smoothed reconciles per second of every shard recorded last.
    pub fn rates(&self) -> Vec<(u32, f64)> {
        self.shards.iter().map(|(shard, s)| (*shard, s.rate)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(meter: &LoadMeter, shard: u32) -> f64 {
        meter.rates().into_iter().find(|(s, _)| *s == shard).map_or(f64::NAN, |(_, r)| r)
    }

    #[test]
    fn a_steady_rate_is_reached_and_a_single_busy_second_barely_counts() {
        let start = Instant::now();
        let mut meter = LoadMeter::new(Duration::from_secs(30));
        meter.record([(1, 0), (2, 0)], start);
        for second in 1..=300u64 {
            // Shard 1 reconciles 10 times a second throughout; shard 2 once, 50 times, in second 150.
            let burst = if second >= 150 { 50 } else { 0 };
            meter.record([(1, second * 10), (2, burst)], start + Duration::from_secs(second));
            if second == 150 {
                assert!(rate(&meter, 2) < 50.0 * 0.03, "one busy second weighs {}", rate(&meter, 2));
            }
        }
        assert!((rate(&meter, 1) - 10.0).abs() < 0.05, "steady rate {}", rate(&meter, 1));
        assert!(rate(&meter, 2) < 0.05, "the burst decays: {}", rate(&meter, 2));
    }

    #[test]
    fn a_burst_halves_every_half_life_and_shards_not_held_are_forgotten() {
        let start = Instant::now();
        let mut meter = LoadMeter::new(Duration::from_secs(10));
        meter.record([(7, 0)], start);
        // 100 reconciles a second over 60 s: the rate settles at 100.
        for second in 1..=60u64 {
            meter.record([(7, second * 100)], start + Duration::from_secs(second));
        }
        let busy = rate(&meter, 7);
        meter.record([(7, 6000)], start + Duration::from_secs(70));
        assert!((rate(&meter, 7) - busy / 2.0).abs() < 0.01, "{busy} → {}", rate(&meter, 7));
        meter.record([(8, 5)], start + Duration::from_secs(71));
        assert_eq!(meter.rates(), vec![(8, 0.0)]);
    }

    #[test]
    fn a_count_that_goes_backwards_or_no_time_passing_gives_no_negative_or_infinite_rate() {
        let start = Instant::now();
        let mut meter = LoadMeter::new(Duration::from_secs(30));
        meter.record([(1, 100)], start);
        meter.record([(1, 50)], start + Duration::from_secs(1));
        meter.record([(1, 60)], start + Duration::from_secs(1));
        let r = rate(&meter, 1);
        assert!(r.is_finite() && r >= 0.0, "{r}");
    }
}
