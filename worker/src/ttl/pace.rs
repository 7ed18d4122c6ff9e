//! TTL smoothing's schedule, pure: when each expired object may be deleted under
//! `--ttl-max-deletions-per-second`, so that 10,000 Jobs expiring in the same second reach the API
//! server (and the garbage collector, which then deletes their pods) as a steady stream, not a
//! spike (kubernetes/kubernetes#104966, #80957).
//!
//! Time is cut into slots of `1 / rate` seconds, counted from the Unix epoch so that every second
//! holds the same slots. Each deletion takes the first free slot that starts at or after both its
//! expiry and now, and goes at a seeded, random point in the first half of that slot. Hence:
//!
//! - no deletion goes before its expiry, nor more than one per slot: with a whole-number rate, no
//!   calendar second holds more than `rate` deletions. The half slot left over is the margin for
//!   the request's own latency to vary without pushing a deletion into the next second's slots;
//! - a wave of `n` objects expiring together is deleted within `(n + ½) / rate` seconds of its
//!   expiry (the first slot starts within one slot of it, the last deletion half a slot into the
//!   `n`th);
//! - one object alone waits less than one and a half slots;
//! - the jitter keeps workers, which cut time the same way, from sending on the same instants.

use jiff::Timestamp;
use rand::{Rng, SeedableRng, rngs::SmallRng};

/// The part of a slot in which its deletion goes.
const JITTER_SHARE: f64 = 0.5;

/// Hands out deletion slots in the order asked for.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: f64,
    seed: u64,
    /// The first slot not handed out yet.
    next_free: i64,
}

impl Pacer {
    /// A pacer of `rate` deletions per second; `None` when `rate` is not above 0 (or not finite):
    /// smoothing off, as upstream.
    pub fn new(rate: f64, seed: u64) -> Option<Self> {
        (rate.is_finite() && rate > 0.0).then_some(Self { rate, seed, next_free: i64::MIN })
    }

    /// The time the deletion of an object that must not go before `not_before` (its expiry, or
    /// now if later) goes at, taking its slot.
    pub fn take(&mut self, not_before: Timestamp) -> Timestamp {
        let earliest = (seconds(not_before) * self.rate).ceil();
        // `as` saturates: times out of i64 slots clamp to the ends, which no deletion reaches.
        let slot = (earliest as i64).max(self.next_free);
        self.next_free = slot.saturating_add(1);
        let offset = jitter(self.seed, slot) * JITTER_SHARE;
        at_seconds((slot as f64 + offset) / self.rate)
    }
}

/// The schedule of one wave: when each object, expiring at `expiries[i]`, is deleted, seen at
/// `now` by a pacer of `rate` with `seed`. Earlier expiries take earlier slots (ties in the given
/// order), as the work queue hands them out when each one's wait ends.
pub fn schedule(rate: f64, seed: u64, now: Timestamp, expiries: &[Timestamp]) -> Option<Vec<Timestamp>> {
    let mut pacer = Pacer::new(rate, seed)?;
    let mut order: Vec<usize> = (0..expiries.len()).collect();
    order.sort_by_key(|&i| expiries[i]);
    let mut at = vec![Timestamp::UNIX_EPOCH; expiries.len()];
    for i in order {
        at[i] = pacer.take(expiries[i].max(now));
    }
    Some(at)
}

/// A slot's jitter in [0, 1): a function of the seed and the slot alone, so a schedule repeats.
fn jitter(seed: u64, slot: i64) -> f64 {
    SmallRng::seed_from_u64(seed ^ (slot as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).random::<f64>()
}

fn seconds(t: Timestamp) -> f64 {
    t.as_nanosecond() as f64 / 1e9
}

fn at_seconds(s: f64) -> Timestamp {
    let nanos = (s * 1e9).round();
    if nanos.is_nan() {
        return Timestamp::UNIX_EPOCH;
    }
    Timestamp::from_nanosecond(nanos as i128).unwrap_or(if nanos < 0.0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn t(s: f64) -> Timestamp {
        at_seconds(1_800_000_000.0 + s)
    }

    fn since(base: Timestamp, at: Timestamp) -> f64 {
        at.duration_since(base).as_secs_f64()
    }

    /// Deletions per calendar second.
    fn per_second(at: &[Timestamp]) -> BTreeMap<i64, usize> {
        let mut counts = BTreeMap::new();
        for a in at {
            *counts.entry(a.as_second()).or_default() += 1;
        }
        counts
    }

    #[test]
    fn smoothing_is_off_unless_the_rate_is_above_zero() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(Pacer::new(rate, 1).is_none(), "{rate}");
            assert_eq!(schedule(rate, 1, t(0.0), &[t(0.0)]), None, "{rate}");
        }
    }

    /// A wave, table-tested: (rate, count, expiring together at, now) → every deletion at or after
    /// its expiry and now, at most ⌈rate⌉ per calendar second, the last within (count + ½) / rate.
    #[test]
    fn a_wave_is_spread_under_the_rate_and_ends_within_count_over_rate() {
        let rows: [(f64, usize, f64, f64); 7] = [
            (100.0, 10_000, 0.0, -30.0),
            (100.0, 10_000, 0.37, -30.0),
            (50.0, 300, 0.5, 0.0),
            (7.0, 50, 0.0, 0.0),
            (2.5, 20, 0.9, 0.0),
            (0.5, 4, 0.0, 0.0),
            // Seen late (a worker taking the shard over): from now on, not from the expiry.
            (20.0, 100, 0.0, 12.25),
        ];
        for (rate, count, expiry, now) in rows {
            let expiries = vec![t(expiry); count];
            let at = schedule(rate, 7, t(now), &expiries).expect("on");
            let start = t(expiry.max(now));
            assert!(at.iter().all(|&a| a >= start), "rate {rate}: none before its expiry or now");
            let peak = *per_second(&at).values().max().expect("some");
            assert!(peak as f64 <= rate.ceil(), "rate {rate}: peak {peak} per second");
            let last = at.iter().map(|&a| since(start, a)).fold(0.0, f64::max);
            assert!(last < (count as f64 + 0.5) / rate, "rate {rate}: last after {last}s");
            let mut sorted = at.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), count, "rate {rate}: one deletion per slot");
        }
    }

    #[test]
    fn whole_number_rates_fill_each_second_with_exactly_the_rate() {
        let at = schedule(10.0, 3, t(-1.0), &[t(0.0); 40]).expect("on");
        let counts: Vec<usize> = per_second(&at).into_values().collect();
        assert_eq!(counts, vec![10, 10, 10, 10]);
    }

    #[test]
    fn each_deletion_goes_in_the_first_half_of_its_own_slot() {
        let rate = 4.0;
        let at = schedule(rate, 11, t(0.0), &[t(0.0); 8]).expect("on");
        let mut sorted = at;
        sorted.sort();
        for (n, a) in sorted.iter().enumerate() {
            let into_slot = since(t(0.0), *a) - n as f64 / rate;
            assert!((0.0..0.5 / rate + 1e-6).contains(&into_slot), "slot {n}: {into_slot}");
        }
    }

    #[test]
    fn one_object_alone_waits_at_most_one_slot() {
        let mut pacer = Pacer::new(10.0, 5).expect("on");
        for expiry in [0.0, 0.05, 3.33, 100.0] {
            let at = pacer.take(t(expiry));
            let wait = since(t(expiry), at);
            assert!((0.0..0.15).contains(&wait), "expiry {expiry}: waited {wait}");
        }
    }

    #[test]
    fn the_jitter_is_seeded_and_varies() {
        let expiries = vec![t(0.0); 50];
        let a = schedule(10.0, 1, t(0.0), &expiries);
        assert_eq!(a, schedule(10.0, 1, t(0.0), &expiries), "the same seed, the same schedule");
        assert_ne!(a, schedule(10.0, 2, t(0.0), &expiries), "another seed, another jitter");
        let offsets: Vec<f64> = {
            let mut at = a.expect("on");
            at.sort();
            at.iter().enumerate().map(|(n, x)| since(t(0.0), *x) - n as f64 / 10.0).collect()
        };
        let (min, max) = offsets.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &o| (lo.min(o), hi.max(o)));
        assert!(max - min > 0.02, "offsets within their slots vary: {min}..{max}");
    }

    #[test]
    fn earlier_expiries_take_earlier_slots_and_later_ones_are_not_pulled_forward() {
        let expiries = [t(5.0), t(0.0), t(0.0), t(60.0)];
        let at = schedule(1.0, 9, t(0.0), &expiries).expect("on");
        assert!(at[1] < at[2] && at[2] < at[0], "{at:?}");
        assert!(since(t(0.0), at[1]) < 1.0 && since(t(0.0), at[2]) < 2.0);
        assert!(since(t(5.0), at[0]) < 1.0);
        assert!(since(t(60.0), at[3]) >= 0.0 && since(t(60.0), at[3]) < 1.0);
    }

    #[test]
    fn extreme_times_do_not_panic() {
        let mut pacer = Pacer::new(1e9, 1).expect("on");
        let _ = pacer.take(Timestamp::MAX);
        let _ = pacer.take(Timestamp::MIN);
        let mut pacer = Pacer::new(1e-9, 1).expect("on");
        let _ = pacer.take(Timestamp::MAX);
    }
}
