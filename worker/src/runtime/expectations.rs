//! Expectations, as client-go's `ControllerExpectations` and the Job controller's
//! `uidTrackingExpectations`: what this worker wrote that its caches have not shown yet, so a
//! sync never acts on a cache that lags its own writes (and never over-creates).

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Upstream's ExpectationsTimeout: expectations older than this are considered satisfied, so a
/// lost watch event cannot stall a Job forever.
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Clone, Copy)]
struct Pending {
    adds: i64,
    dels: i64,
    at: Instant,
}

/// Pending creations and deletions per controller key.
pub struct Expectations<K> {
    pending: Mutex<HashMap<K, Pending>>,
}

impl<K: Clone + Eq + Hash> Default for Expectations<K> {
    fn default() -> Self {
        Self { pending: Mutex::new(HashMap::new()) }
    }
}

impl<K: Clone + Eq + Hash> Expectations<K> {
    /// Sets (replaces) what a sync is about to do.
    pub fn expect(&self, key: &K, adds: i64, dels: i64) {
        self.pending.lock().insert(key.clone(), Pending { adds, dels, at: Instant::now() });
    }

    /// Lowers the expectations by writes that did not happen (failed creates/deletes) or that
    /// the cache has shown.
    pub fn lower(&self, key: &K, adds: i64, dels: i64) {
        if let Some(p) = self.pending.lock().get_mut(key) {
            p.adds -= adds;
            p.dels -= dels;
        }
    }

    pub fn creation_observed(&self, key: &K) {
        self.lower(key, 1, 0);
    }

    pub fn deletion_observed(&self, key: &K) {
        self.lower(key, 0, 1);
    }

    /// Whether the cache has caught up (or the expectations expired, or none were set).
    pub fn satisfied(&self, key: &K) -> bool {
        match self.pending.lock().get(key) {
            None => true,
            Some(p) => (p.adds <= 0 && p.dels <= 0) || p.at.elapsed() > EXPECTATIONS_TIMEOUT,
        }
    }

    pub fn forget(&self, key: &K) {
        self.pending.lock().remove(key);
    }
}

/// Per-pod expectations: pods this worker deleted, or whose tracking finalizer it removed, that
/// the cache does not show so yet.
pub struct UidExpectations<K> {
    pending: Mutex<HashMap<K, HashSet<String>>>,
}

impl<K: Clone + Eq + Hash> Default for UidExpectations<K> {
    fn default() -> Self {
        Self { pending: Mutex::new(HashMap::new()) }
    }
}

impl<K: Clone + Eq + Hash> UidExpectations<K> {
    pub fn expect_uids(&self, key: &K, uids: impl IntoIterator<Item = String>) {
        self.pending.lock().entry(key.clone()).or_default().extend(uids);
    }

    /// The cache showed `uid` without the finalizer (or gone).
    pub fn observed(&self, key: &K, uid: &str) {
        let mut pending = self.pending.lock();
        if let Some(set) = pending.get_mut(key) {
            set.remove(uid);
            if set.is_empty() {
                pending.remove(key);
            }
        }
    }

    /// A removal that failed will not be observed.
    pub fn failed(&self, key: &K, uid: &str) {
        self.observed(key, uid);
    }

    pub fn satisfied(&self, key: &K) -> bool {
        !self.pending.lock().contains_key(key)
    }

    /// The uids still expected, for the sync to treat as already handled.
    pub fn pending(&self, key: &K) -> HashSet<String> {
        self.pending.lock().get(key).cloned().unwrap_or_default()
    }

    pub fn forget(&self, key: &K) {
        self.pending.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn creations_must_be_observed_before_the_next_sync() {
        let e = Expectations::<String>::default();
        let k = "ns/job".to_string();
        assert!(e.satisfied(&k));
        e.expect(&k, 2, 0);
        assert!(!e.satisfied(&k));
        e.creation_observed(&k);
        assert!(!e.satisfied(&k));
        // One create failed: it will never be observed.
        e.lower(&k, 1, 0);
        assert!(e.satisfied(&k));
    }

    #[tokio::test(start_paused = true)]
    async fn expectations_expire() {
        let e = Expectations::<String>::default();
        let k = "ns/job".to_string();
        e.expect(&k, 0, 3);
        tokio::time::advance(EXPECTATIONS_TIMEOUT + Duration::from_secs(1)).await;
        assert!(e.satisfied(&k));
    }

    #[test]
    fn finalizer_removals_are_tracked_per_uid() {
        let e = UidExpectations::<String>::default();
        let k = "ns/job".to_string();
        e.expect_uids(&k, ["a".to_string(), "b".to_string()]);
        assert!(!e.satisfied(&k));
        e.observed(&k, "a");
        assert_eq!(e.pending(&k).len(), 1);
        e.failed(&k, "b");
        assert!(e.satisfied(&k));
    }
}
