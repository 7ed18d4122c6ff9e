//! How the in-process controllers (the scheduler, the kubelet) follow the store, as an informer
//! follows a watch: every change in order, and after falling behind, the changes missed.

use std::sync::Arc;

use crate::store::{Change, ChangeReceiver, Interest, RecvError, ResourceId, Store, StoredObject};

/// A controller fed by the store's changes.
pub trait Follower {
    fn on_change(&mut self, change: &Change);
    /// Everything of the followed resource again, when the changes missed are gone from the
    /// store's history.
    fn relist(&mut self, objects: Vec<Arc<StoredObject>>);
}

/// A follow of the store's changes from a snapshot of one resource: `recv` in a loop's
/// `select!`, then `handle` what it answered.
pub struct Following {
    store: Arc<Store>,
    /// The resource listed on a relist.
    resource: ResourceId,
    /// The resources whose changes are followed: `resource` and those it depends on.
    resources: Box<[ResourceId]>,
    /// The last change handed on.
    seen: u64,
    rx: ChangeReceiver,
}

impl Following {
    /// The objects of `resource` now, and the follow of every change of it and of `also` after
    /// them.
    pub fn start(
        store: Arc<Store>,
        resource: ResourceId,
        also: &[ResourceId],
    ) -> (Vec<Arc<StoredObject>>, Self) {
        let resources: Box<[ResourceId]> = std::iter::once(resource).chain(also.iter().copied()).collect();
        let (objects, seen, rx) = store.snapshot_and_watch(resource, None, Interest::resources(&resources));
        (objects, Self { store, resource, resources, seen, rx })
    }

    pub async fn recv(&mut self) -> Result<Arc<Change>, RecvError> {
        self.rx.recv().await
    }

    /// Hands what [`Self::recv`] answered to `follower`, catching up after a lag; false once
    /// the store is gone.
    pub fn handle(&mut self, follower: &mut impl Follower, received: Result<Arc<Change>, RecvError>) -> bool {
        match received {
            Ok(change) => {
                self.seen = change.rv;
                follower.on_change(&change);
                true
            }
            Err(RecvError::Lagged) => {
                self.rx = catch_up(follower, &self.store, self.resource, &self.resources, &mut self.seen);
                true
            }
            Err(RecvError::Closed) => false,
        }
    }
}

/// After `follower` fell behind the live stream: the changes since `seen` from the store's
/// history, as a watch resumes from its last resourceVersion, or a relist of `resource` when
/// they are no longer there; the receiver to go on with. Relisting at every lag (parsing every
/// pod) cost more than the changes missed and, under load, left the follower behind again.
fn catch_up(
    follower: &mut impl Follower,
    store: &Store,
    resource: ResourceId,
    resources: &[ResourceId],
    seen: &mut u64,
) -> ChangeReceiver {
    match store.watch_from(Interest::resources(resources), *seen) {
        Ok((missed, rx)) => {
            for change in missed {
                *seen = change.rv;
                follower.on_change(&change);
            }
            rx
        }
        Err(_) => {
            let (objects, rv, rx) = store.snapshot_and_watch(resource, None, Interest::resources(resources));
            *seen = rv;
            follower.relist(objects);
            rx
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::ResourceKey;
    use crate::store::{HistoryConfig, Prepared, RV_PLACEHOLDER, TryRecvError};

    #[derive(Default)]
    struct Seen {
        changes: Vec<u64>,
        relisted: Option<Vec<Box<str>>>,
    }

    impl Follower for Seen {
        fn on_change(&mut self, change: &Change) {
            self.changes.push(change.rv);
        }
        fn relist(&mut self, objects: Vec<Arc<StoredObject>>) {
            self.relisted = Some(objects.iter().map(|o| o.name.clone()).collect());
        }
    }

    fn create(store: &Store, resource: ResourceId, name: &str) -> u64 {
        let body = json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": RV_PLACEHOLDER}});
        let prepared =
            Prepared::new("ns", name, name, None, vec![], vec![], serde_json::to_vec(&body).unwrap())
                .unwrap();
        store.create(resource, prepared).unwrap().rv
    }

    /// Drains what is queued into `follower` through [`Following::handle`], as the loops do.
    fn follow(follower: &mut Seen, following: &mut Following) {
        loop {
            let received = match following.rx.try_recv() {
                Ok(change) => Ok(change),
                Err(TryRecvError::Lagged) => Err(RecvError::Lagged),
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            };
            assert!(following.handle(follower, received));
        }
    }

    fn small_store() -> (Arc<Store>, ResourceId) {
        // A live stream of 4: the fifth change unread makes a follower lag.
        let store =
            Arc::new(Store::starting_at(100, HistoryConfig { live_buffer: 4, ..HistoryConfig::default() }));
        let resource = store.resource_id(&ResourceKey { group: String::new(), plural: "configmaps".into() });
        (store, resource)
    }

    #[test]
    fn a_follower_that_fell_behind_gets_every_change_missed_once_and_in_order_without_a_relist() {
        let (store, resource) = small_store();
        let (_, mut following) = Following::start(store.clone(), resource, &[]);
        let written: Vec<u64> = (0..20).map(|i| create(&store, resource, &format!("o{i}"))).collect();
        let mut follower = Seen::default();
        follow(&mut follower, &mut following);
        assert_eq!(follower.changes, written);
        assert_eq!(follower.relisted, None);
        assert_eq!(following.seen, *written.last().unwrap());
    }

    #[test]
    fn a_follower_whose_missed_changes_left_the_history_relists() {
        let (store, resource) = small_store();
        let (_, mut following) = Following::start(store.clone(), resource, &[]);
        for i in 0..10 {
            create(&store, resource, &format!("o{i}"));
        }
        let compacted = store.compact();
        let mut follower = Seen::default();
        follow(&mut follower, &mut following);
        let names: Vec<Box<str>> = (0..10).map(|i| format!("o{i}").into()).collect();
        let mut relisted = follower.relisted.expect("a relist");
        relisted.sort();
        let mut want = names;
        want.sort();
        assert_eq!(relisted, want);
        assert_eq!(following.seen, compacted);
    }
}
