//! Container restart back-off, as the kubelet's `flowcontrol.Backoff` keyed per container
//! (kuberuntime `doBackOff`): the first restart is immediate; each later exit waits the current
//! back-off (10 s, doubling up to 5 min) before the container starts again; a container that ran
//! longer than twice the maximum since the last restart starts over at no wait.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// The back-off bounds (upstream: 10 s and `MaxContainerBackOff`, 5 min).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffConfig {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self { initial: Duration::from_secs(10), max: Duration::from_secs(300) }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    backoff: Duration,
    last_update: Instant,
}

/// Back-off windows of every container that has restarted, by key (pod uid and container).
#[derive(Debug)]
pub struct RestartBackoff {
    config: BackoffConfig,
    entries: HashMap<Box<str>, Entry>,
}

impl RestartBackoff {
    pub fn new(config: BackoffConfig) -> Self {
        Self { config, entries: HashMap::new() }
    }

    /// `hasExpired`: nothing happened for twice the maximum back-off.
    fn expired(&self, entry: &Entry, at: Instant) -> bool {
        at.saturating_duration_since(entry.last_update) > self.config.max * 2
    }

    /// A container under `key` exited at `finished`: how long it must wait before it starts
    /// again (`IsInBackOffSince`), zero when it restarts now. A zero answer also records the
    /// restart (`Next`); after a wait, call [`RestartBackoff::restarted`].
    pub fn on_exit(&mut self, key: &str, finished: Instant) -> Duration {
        match self.entries.get(key) {
            Some(entry) if !self.expired(entry, finished) => entry.backoff,
            _ => {
                self.entries
                    .insert(key.into(), Entry { backoff: self.config.initial, last_update: finished });
                Duration::ZERO
            }
        }
    }

    /// The container restarts at `now` after its wait (`Next`): the window doubles.
    pub fn restarted(&mut self, key: &str, now: Instant) {
        let (initial, max) = (self.config.initial, self.config.max);
        let expired = self.entries.get(key).is_none_or(|e| self.expired(e, now));
        let entry = self.entries.entry(key.into()).or_insert(Entry { backoff: initial, last_update: now });
        entry.backoff = if expired { initial } else { (entry.backoff * 2).min(max) };
        entry.last_update = now;
    }

    /// Forgets every container of a pod that is gone.
    pub fn forget_pod(&mut self, uid: &str) {
        self.entries.retain(|k, _| k.split_once('/').is_none_or(|(u, _)| u != uid));
    }
}

/// The key of one container of one pod.
pub fn key(uid: &str, container: &str) -> String {
    format!("{uid}/{container}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container that keeps failing after running `run` each time: the waits before each
    /// restart, as the kubelet's back-off gives them.
    fn waits(config: BackoffConfig, runs: &[Duration]) -> Vec<Duration> {
        let mut b = RestartBackoff::new(config);
        let mut now = Instant::now();
        let mut out = Vec::new();
        for run in runs {
            now += *run;
            let wait = b.on_exit("u/c", now);
            if !wait.is_zero() {
                now += wait;
                b.restarted("u/c", now);
            }
            out.push(wait);
        }
        out
    }

    #[test]
    fn waits_double_from_ten_seconds_to_five_minutes() {
        let s = Duration::from_secs;
        let got = waits(BackoffConfig::default(), &[s(1); 9]);
        assert_eq!(got, [0, 10, 20, 40, 80, 160, 300, 300, 300].map(s));
    }

    #[test]
    fn a_run_longer_than_twice_the_maximum_resets_the_back_off() {
        let s = Duration::from_secs;
        // 10 min is not yet longer than twice 5 min; 10 min 1 s is.
        let got = waits(BackoffConfig::default(), &[s(1), s(1), s(1), s(600), s(601), s(1)]);
        assert_eq!(got, [0, 10, 20, 40, 0, 10].map(s));
    }

    #[test]
    fn scaled_bounds_for_tests() {
        let ms = Duration::from_millis;
        let config = BackoffConfig { initial: ms(100), max: ms(400) };
        assert_eq!(waits(config, &[ms(10); 6]), [0, 100, 200, 400, 400, 400].map(ms));
    }

    #[test]
    fn containers_and_pods_back_off_apart() {
        let mut b = RestartBackoff::new(BackoffConfig::default());
        let now = Instant::now();
        assert_eq!(b.on_exit(&key("p1", "a"), now), Duration::ZERO);
        assert_eq!(b.on_exit(&key("p1", "a"), now), Duration::from_secs(10));
        assert_eq!(b.on_exit(&key("p1", "b"), now), Duration::ZERO);
        assert_eq!(b.on_exit(&key("p2", "a"), now), Duration::ZERO);
        b.forget_pod("p1");
        assert_eq!(b.on_exit(&key("p1", "a"), now), Duration::ZERO);
        assert_eq!(b.on_exit(&key("p2", "a"), now), Duration::from_secs(10));
    }
}
