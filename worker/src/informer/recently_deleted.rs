//! The guard against ghosts: uids whose deletion a watch reported lately.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How long [`RecentlyDeleted`] remembers a deletion: far longer than any request takes.
const RECENTLY_DELETED_WINDOW: Duration = Duration::from_secs(60);

/// UIDs whose deletion a watch reported lately. A write's response can arrive after the watch
/// has already reported the object deleted; a cache that took the response in would keep a ghost
/// that no later event removes.
#[derive(Default)]
pub struct RecentlyDeleted {
    inner: parking_lot::Mutex<Deletions>,
}

/// The deletions in the order seen, and the same uids for lookup.
#[derive(Default)]
struct Deletions {
    order: VecDeque<(Instant, String)>,
    uids: HashMap<String, Instant>,
}

impl RecentlyDeleted {
    pub fn record(&self, uid: Option<&str>) {
        let Some(uid) = uid else { return };
        let mut inner = self.inner.lock();
        let Deletions { order, uids } = &mut *inner;
        while order.front().is_some_and(|(at, _)| at.elapsed() > RECENTLY_DELETED_WINDOW) {
            if let Some((_, old)) = order.pop_front() {
                uids.remove(&old);
            }
        }
        let now = Instant::now();
        if uids.insert(uid.to_string(), now).is_none() {
            order.push_back((now, uid.to_string()));
        }
    }

    pub fn contains(&self, uid: Option<&str>) -> bool {
        uid.is_some_and(|uid| self.inner.lock().uids.contains_key(uid))
    }

    /// How long ago the watch reported `uid` deleted, if it did lately.
    pub fn deleted_ago(&self, uid: &str) -> Option<Duration> {
        let at = *self.inner.lock().uids.get(uid)?;
        let ago = at.elapsed();
        (ago <= RECENTLY_DELETED_WINDOW).then_some(ago)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recently_deleted_remembers_uids_and_ignores_missing_ones() {
        let deleted = RecentlyDeleted::default();
        deleted.record(Some("u1"));
        deleted.record(None);
        assert!(deleted.contains(Some("u1")));
        assert!(!deleted.contains(Some("u2")));
        assert!(!deleted.contains(None));
        assert!(deleted.deleted_ago("u1").is_some_and(|d| d < RECENTLY_DELETED_WINDOW));
        assert_eq!(deleted.deleted_ago("u2"), None);
    }
}
