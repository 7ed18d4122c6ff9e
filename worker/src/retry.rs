//! The pause before a failed list, watch or coordinator session is tried again: exponential with
//! jitter and capped, as kube-runtime's watcher backs off (backon, the crate it uses), and back to
//! the shortest once a try gets through. Fixed pauses had every worker of a fleet retry in step
//! against an API server or a coordinator that was already struggling.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// Delays from `shortest`, doubling up to `longest`, each with jitter of up to itself again (so
/// at most twice `longest`); never exhausted.
pub struct RetryBackoff {
    builder: ExponentialBuilder,
    delays: ExponentialBackoff,
    longest: Duration,
}

impl RetryBackoff {
    pub fn new(shortest: Duration, longest: Duration) -> Self {
        let builder = ExponentialBuilder::default()
            .with_min_delay(shortest)
            .with_max_delay(longest)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        Self { delays: (&builder).build(), builder, longest }
    }

    /// The pause before the next try.
    pub fn next_delay(&mut self) -> Duration {
        self.delays.next().unwrap_or(self.longest)
    }

    /// A try got through: the next failure pauses the shortest again.
    pub fn reset(&mut self) {
        self.delays = (&self.builder).build();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_within_jitter_up_to_the_cap_and_start_over_after_a_reset() {
        let (shortest, longest) = (Duration::from_millis(100), Duration::from_secs(1));
        let mut backoff = RetryBackoff::new(shortest, longest);
        let delays: Vec<Duration> = (0..12).map(|_| backoff.next_delay()).collect();
        // Without jitter 100, 200, 400, 800, then the cap; jitter adds up to the delay itself.
        // backon computes in f32: allow its rounding.
        let within = |d: Duration, base: Duration| {
            d.as_secs_f64() >= base.as_secs_f64() * 0.999 && d.as_secs_f64() <= base.as_secs_f64() * 2.001
        };
        for (i, d) in delays.iter().enumerate() {
            let base = (shortest * 2u32.pow(i.min(4) as u32)).min(longest);
            assert!(within(*d, base), "try {i}: {d:?} outside [{base:?}, {:?}]", base * 2);
        }
        assert!(within(delays[11], longest), "the delays reach the cap: {delays:?}");
        backoff.reset();
        let first = backoff.next_delay();
        assert!(within(first, shortest), "after a reset: {first:?}");
    }
}
