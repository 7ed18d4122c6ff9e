//! When a pod whose finalizer removal keeps failing is tried again, and when its rejection is
//! told in an Event: per pod, not per attempt, so a webhook that refuses 10,000 pods does not
//! turn the sweeper into 10,000 requests and Events a second.

use std::time::Duration;

/// The first retry of a failed removal comes this soon; each failure doubles it.
const RETRY_BASE: Duration = Duration::from_secs(1);
/// A rejection already told is told again after this long (or as soon as its message changes).
pub const EVENT_REPEAT: Duration = Duration::from_secs(300);

/// How long after its `failures`-th failure in a row a pod is tried again: doubling from a
/// second, up to the sweep period (a pod that keeps failing is tried once a period, as every
/// pass would).
pub fn retry_after(failures: u32, period: Duration) -> Duration {
    let doubled = RETRY_BASE.saturating_mul(1u32 << failures.saturating_sub(1).min(20));
    doubled.min(period.max(RETRY_BASE))
}

/// Whether a rejection with `message` is told again, given the last one told (its message and
/// how long ago).
pub fn tell(message: &str, last: Option<(&str, Duration)>) -> bool {
    match last {
        None => true,
        Some((told, ago)) => told != message || ago >= EVENT_REPEAT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_from_a_second_up_to_the_period() {
        let period = Duration::from_secs(30);
        let steps: Vec<u64> = (1..=7).map(|n| retry_after(n, period).as_secs()).collect();
        assert_eq!(steps, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(retry_after(u32::MAX, period), period, "no overflow however many failures");
        assert_eq!(retry_after(3, Duration::from_millis(200)), RETRY_BASE, "never below a second");
    }

    #[test]
    fn a_rejection_is_told_once_then_again_when_it_changes_or_after_the_repeat() {
        let msg = "admission webhook \"deny.example.com\" denied the request: no";
        assert!(tell(msg, None));
        assert!(!tell(msg, Some((msg, Duration::from_secs(10)))));
        assert!(tell("another reason", Some((msg, Duration::from_secs(10)))));
        assert!(tell(msg, Some((msg, EVENT_REPEAT))));
    }
}
