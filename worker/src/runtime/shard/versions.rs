//! resourceVersion tracking for the hand-over: the highest one a tenure's writes got back (what
//! REVOKE answers with, the barrier the next owner waits for), and the highest one each watch
//! group delivered, with the group that feeds each shard (what ACTIVATE waits to see past the
//! barrier).

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;

/// What one tenure wrote, and which watch group feeds it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct TenureVersions {
    /// The highest resourceVersion a write of this tenure got back.
    pub written_rv: u64,
    /// When the last write of this tenure was answered.
    pub last_write_at: Option<Instant>,
    /// The watch group that feeds the shard's caches.
    pub feeder: Option<u64>,
}

impl TenureVersions {
    /// Records the resourceVersion a write got back.
    pub fn record_written(&mut self, rv: u64) {
        self.written_rv = self.written_rv.max(rv);
        self.last_write_at = Some(Instant::now());
    }
}

/// A write's answer as a number to compare; one that is not a number (opaque to clients by the
/// API's contract, a number on every server we know) is none.
pub(super) fn parse(resource_version: Option<&str>) -> Option<u64> {
    resource_version.and_then(|v| v.parse::<u64>().ok())
}

/// The highest resourceVersion each watch group has seen, by feeder id. Kept per group, not per
/// shard: a standalone worker's one group feeds every shard, and each of its events would
/// otherwise update them all.
#[derive(Debug, Default)]
pub(super) struct SeenVersions(Mutex<HashMap<u64, u64>>);

impl SeenVersions {
    /// Records a resourceVersion `feeder` delivered (an object's, or a bookmark's).
    pub fn record(&self, feeder: u64, resource_version: u64) {
        let mut seen = self.0.lock();
        let at = seen.entry(feeder).or_default();
        *at = (*at).max(resource_version);
    }

    /// The highest resourceVersion `feeder` delivered; 0 for none.
    pub fn of(&self, feeder: Option<u64>) -> u64 {
        feeder.and_then(|f| self.0.lock().get(&f).copied()).unwrap_or(0)
    }

    pub fn forget(&self, feeder: u64) {
        self.0.lock().remove(&feeder);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenures_written_version_only_grows_and_ignores_what_is_not_a_number() {
        let mut tenure = TenureVersions::default();
        for answer in [Some("10"), Some("7"), Some("opaque"), None] {
            if let Some(rv) = parse(answer) {
                tenure.record_written(rv);
            }
        }
        assert_eq!(tenure.written_rv, 10);
        assert!(tenure.last_write_at.is_some());
        assert_eq!(parse(Some("opaque")), None);
    }

    #[test]
    fn each_feeder_keeps_the_highest_version_it_delivered_until_forgotten() {
        let seen = SeenVersions::default();
        seen.record(4, 12);
        seen.record(4, 3);
        seen.record(5, 20);
        assert_eq!((seen.of(Some(4)), seen.of(Some(5)), seen.of(None)), (12, 20, 0));
        seen.forget(4);
        assert_eq!(seen.of(Some(4)), 0);
    }
}
