//! kube-apiserver's `--event-ttl` (default 1h): every write of an Event stores it under an etcd
//! lease of that TTL, so an Event not written again for the TTL disappears. Expiry is etcd's,
//! not a request: watchers see it deleted, and no audit entry records it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::apiserver::ApiServer;
use crate::cluster::sleep_until;
use crate::store::{Change, ChangeKind, Expect, Interest, RecvError, ResourceId, Store, StoredObject};

/// kube-apiserver's default `--event-ttl`.
pub const DEFAULT_EVENT_TTL: Duration = Duration::from_secs(3600);

/// One write's lease: when it runs out, and the version it was granted for. A later write of the
/// same Event has a later lease of its own, so an expiry that finds another version does nothing.
#[derive(Debug)]
struct Lease {
    expires: Instant,
    namespace: Box<str>,
    name: Box<str>,
    rv: u64,
}

/// The leases in the order they run out: every write gets the same TTL, so that is the order
/// of the writes.
#[derive(Debug)]
pub struct EventLeases {
    ttl: Duration,
    leases: VecDeque<Lease>,
}

impl EventLeases {
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, leases: VecDeque::new() }
    }

    /// An Event stored (created or written again) at `at`.
    pub fn granted(&mut self, at: Instant, o: &StoredObject) {
        self.leases.push_back(Lease {
            expires: at + self.ttl,
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            rv: o.rv,
        });
    }

    /// When the next lease runs out.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.leases.front().map(|l| l.expires)
    }

    /// The leases run out by `now`: (namespace, name, version granted for).
    pub fn expired(&mut self, now: Instant) -> Vec<(Box<str>, Box<str>, u64)> {
        let mut out = Vec::new();
        while self.leases.front().is_some_and(|l| l.expires <= now) {
            if let Some(l) = self.leases.pop_front() {
                out.push((l.namespace, l.name, l.rv));
            }
        }
        out
    }
}

/// Deletes the Events whose lease ran out, for as long as the store lives.
pub async fn run(api: Arc<ApiServer>, ttl: Duration) {
    let events = api.builtin("", "v1", "events").rid;
    let store = api.store().clone();
    let mut leases = EventLeases::new(ttl);
    let mut rx = grant_all(&store, events, &mut leases);
    loop {
        let next = leases.next_expiry();
        tokio::select! {
            received = rx.recv() => match received {
                Ok(change) => on_change(&mut leases, &change),
                // The writes missed are unknown: every Event is granted a lease from now, which
                // only keeps some longer than their TTL.
                Err(RecvError::Lagged) => rx = grant_all(&store, events, &mut leases),
                Err(RecvError::Closed) => return,
            },
            _ = sleep_until(next) => {
                for (namespace, name, rv) in leases.expired(Instant::now()) {
                    // A conflict means the Event was written again since: its lease is later.
                    let _ = store.remove(events, &namespace, &name, Expect::Version(rv));
                }
            }
        }
    }
}

fn on_change(leases: &mut EventLeases, change: &Change) {
    if change.kind != ChangeKind::Deleted {
        leases.granted(Instant::from_std(change.at), &change.object);
    }
}

/// Leases from now for every stored Event, and the receiver for the writes after them.
fn grant_all(store: &Store, events: ResourceId, leases: &mut EventLeases) -> crate::store::ChangeReceiver {
    let (all, _, rx) = store.snapshot_and_watch(events, None, Interest::resource(events));
    let now = Instant::now();
    for o in &all {
        leases.granted(now, o);
    }
    rx
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::{Prepared, RV_PLACEHOLDER};

    fn stored(name: &str, rv: u64) -> StoredObject {
        let body = json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": RV_PLACEHOLDER}});
        let p = Prepared::new("ns", name, name, None, vec![], vec![], serde_json::to_vec(&body).unwrap())
            .unwrap();
        crate::store::materialize(0, p, rv)
    }

    /// Each write's lease runs out a TTL after it; leases run out in the order of the writes.
    #[test]
    fn leases_run_out_a_ttl_after_each_write() {
        let t0 = Instant::now();
        let mut leases = EventLeases::new(Duration::from_secs(60));
        leases.granted(t0, &stored("a", 1));
        leases.granted(t0 + Duration::from_secs(10), &stored("b", 2));
        leases.granted(t0 + Duration::from_secs(20), &stored("a", 3));
        assert_eq!(leases.next_expiry(), Some(t0 + Duration::from_secs(60)));
        assert!(leases.expired(t0 + Duration::from_secs(59)).is_empty());
        let names = |v: Vec<(Box<str>, Box<str>, u64)>| {
            v.into_iter().map(|(_, n, rv)| (n.to_string(), rv)).collect::<Vec<_>>()
        };
        assert_eq!(
            names(leases.expired(t0 + Duration::from_secs(70))),
            [("a".to_string(), 1), ("b".to_string(), 2)]
        );
        assert_eq!(leases.next_expiry(), Some(t0 + Duration::from_secs(80)));
        assert_eq!(names(leases.expired(t0 + Duration::from_secs(80))), [("a".to_string(), 3)]);
        assert!(leases.next_expiry().is_none());
    }
}
