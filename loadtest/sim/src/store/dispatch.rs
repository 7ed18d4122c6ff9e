//! The store's changes, handed only to the subscribers whose interest admits them, as
//! kube-apiserver's watch cache dispatches by resource and its cacher by namespace: one broadcast
//! woke every watch for every change of every kind, and with a fleet's ~200 shard watches that
//! was most of what a change cost to deliver.
//!
//! An interest names only what an object never changes (its resource, namespace and uid), so a
//! change either reaches a watch or could never concern it. Label and field selectors, which
//! an update can enter or leave, stay with the watch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;

use super::{Change, ResourceId, StoredObject};
use crate::selector::ShardSelector;

/// Which changes a subscriber receives.
#[derive(Debug, Clone, Default)]
pub struct Interest {
    /// `None`: every resource.
    resources: Option<Box<[ResourceId]>>,
    namespace: Option<Box<str>>,
    shard: Option<ShardSelector>,
}

impl Interest {
    /// Every change.
    pub fn everything() -> Self {
        Self::default()
    }

    /// The changes of one resource.
    pub fn resource(resource: ResourceId) -> Self {
        Self::resources(&[resource])
    }

    /// The changes of any of these resources.
    pub fn resources(resources: &[ResourceId]) -> Self {
        Self { resources: Some(resources.into()), ..Self::default() }
    }

    /// Narrowed to one namespace (`None` keeps every namespace).
    pub fn in_namespace(mut self, namespace: Option<&str>) -> Self {
        self.namespace = namespace.map(Box::from);
        self
    }

    /// Narrowed to the objects a `shardSelector` selects (`None` keeps them all).
    pub fn in_shards(mut self, shard: Option<ShardSelector>) -> Self {
        self.shard = shard;
        self
    }

    pub fn admits(&self, o: &StoredObject) -> bool {
        self.resources.as_ref().is_none_or(|r| r.contains(&o.resource))
            && self.namespace.as_ref().is_none_or(|ns| *ns == o.namespace)
            && self.shard.as_ref().is_none_or(|s| s.matches_hashes(o.namespace_hash, o.uid_hash))
    }
}

#[derive(Debug)]
struct Subscriber {
    interest: Arc<Interest>,
    tx: mpsc::Sender<Arc<Change>>,
    /// Set when the queue overflowed, and cleared by the receiver once it has read the queue
    /// out and reported the lag; the changes in between are the ones it missed. A full queue
    /// has a receiver to wake, so the flag needs no wake-up of its own.
    lagging: Arc<AtomicBool>,
}

impl Subscriber {
    /// Queues `change` if the interest admits it; false once the receiver is gone.
    fn offer(&self, change: &Arc<Change>) -> bool {
        if self.lagging.load(Ordering::Acquire) || !self.interest.admits(&change.object) {
            return !self.tx.is_closed();
        }
        match self.tx.try_send(change.clone()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.lagging.store(true, Ordering::Release);
                true
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

/// The subscribers, by the resources they follow. Lives under the store's lock, so subscribing
/// and taking the history to resume from happen at one moment, and changes are queued in the
/// order of their versions.
#[derive(Debug)]
pub(super) struct Dispatch {
    by_resource: Vec<Vec<Subscriber>>,
    any_resource: Vec<Subscriber>,
    /// How many changes a subscriber may fall behind before it lags.
    capacity: usize,
}

impl Dispatch {
    pub fn new(capacity: usize) -> Self {
        Self { by_resource: Vec::new(), any_resource: Vec::new(), capacity: capacity.max(1) }
    }

    pub fn subscribe(&mut self, interest: Interest) -> ChangeReceiver {
        let (tx, rx) = mpsc::channel(self.capacity);
        let lagging = Arc::new(AtomicBool::new(false));
        let interest = Arc::new(interest);
        let subscriber = |tx: mpsc::Sender<Arc<Change>>| Subscriber {
            interest: interest.clone(),
            tx,
            lagging: lagging.clone(),
        };
        match interest.resources.as_deref() {
            None => join(&mut self.any_resource, subscriber(tx)),
            Some(resources) => {
                for &r in resources {
                    let r = r as usize;
                    if self.by_resource.len() <= r {
                        self.by_resource.resize_with(r + 1, Vec::new);
                    }
                    join(&mut self.by_resource[r], subscriber(tx.clone()));
                }
            }
        }
        ChangeReceiver { rx, lagging }
    }

    pub fn publish(&mut self, change: &Arc<Change>) {
        if let Some(list) = self.by_resource.get_mut(change.object.resource as usize) {
            list.retain(|s| s.offer(change));
        }
        self.any_resource.retain(|s| s.offer(change));
    }

    #[cfg(test)]
    fn subscribers(&self) -> usize {
        self.any_resource.len() + self.by_resource.iter().map(Vec::len).sum::<usize>()
    }
}

/// Adds `s`, dropping the subscribers already gone: a list a change rarely reaches would
/// otherwise keep every watch that ever ended on it.
fn join(list: &mut Vec<Subscriber>, s: Subscriber) {
    list.retain(|s| !s.tx.is_closed());
    list.push(s);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// Changes were missed: resume from the store's history after the last one received.
    #[error("fell behind the store's changes")]
    Lagged,
    #[error("the store is gone")]
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TryRecvError {
    #[error("no change queued")]
    Empty,
    #[error("fell behind the store's changes")]
    Lagged,
    #[error("the store is gone")]
    Closed,
}

/// The receiving end of a subscription: the admitted changes in order, with a
/// [`RecvError::Lagged`] where it fell behind and changes were dropped, as a tokio broadcast
/// receiver reports them.
#[derive(Debug)]
pub struct ChangeReceiver {
    rx: mpsc::Receiver<Arc<Change>>,
    lagging: Arc<AtomicBool>,
}

impl ChangeReceiver {
    /// The next change; cancel-safe, for `select!`.
    pub async fn recv(&mut self) -> Result<Arc<Change>, RecvError> {
        match self.try_recv() {
            Ok(change) => return Ok(change),
            Err(TryRecvError::Lagged) => return Err(RecvError::Lagged),
            Err(TryRecvError::Closed) => return Err(RecvError::Closed),
            Err(TryRecvError::Empty) => {}
        }
        // The queue is empty and not lagging: the next change, if any, comes through it.
        self.rx.recv().await.ok_or(RecvError::Closed)
    }

    pub fn try_recv(&mut self) -> Result<Arc<Change>, TryRecvError> {
        match self.rx.try_recv() {
            Ok(change) => Ok(change),
            // Read out: a lag flagged meanwhile starts after everything received.
            Err(_) if self.lagging.swap(false, Ordering::AcqRel) => Err(TryRecvError::Lagged),
            Err(mpsc::error::TryRecvError::Empty) => Err(TryRecvError::Empty),
            Err(mpsc::error::TryRecvError::Disconnected) => Err(TryRecvError::Closed),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::super::ChangeKind;
    use super::*;
    use crate::selector::{ShardKey, ShardRange};

    fn change(rv: u64, resource: ResourceId, namespace: &str) -> Arc<Change> {
        let object = Arc::new(StoredObject {
            rv,
            resource,
            namespace: namespace.into(),
            name: format!("o{rv}").into(),
            uid: format!("u{rv}").into(),
            labels: None,
            fields: Box::new([]),
            owner_uids: Box::new([]),
            namespace_hash: crate::selector::fnv1a64(namespace.as_bytes()),
            uid_hash: 0,
            bytes: bytes::Bytes::new(),
        });
        Arc::new(Change { rv, kind: ChangeKind::Added, object, prev: None, at: Instant::now() })
    }

    fn drain(rx: &mut ChangeReceiver) -> (Vec<u64>, TryRecvError) {
        let mut got = Vec::new();
        loop {
            match rx.try_recv() {
                Ok(c) => got.push(c.rv),
                Err(e) => return (got, e),
            }
        }
    }

    #[test]
    fn interests_admit_by_resource_namespace_and_shard() {
        let mut d = Dispatch::new(16);
        let mut pods = d.subscribe(Interest::resource(1));
        let mut pods_and_nodes = d.subscribe(Interest::resources(&[1, 2]));
        let mut in_a = d.subscribe(Interest::resource(1).in_namespace(Some("a")));
        let hash_a = crate::selector::fnv1a64(b"a");
        let only_a = ShardSelector::from_ranges(
            ShardKey::Namespace,
            vec![ShardRange::new(hash_a, u128::from(hash_a) + 1).unwrap()],
        );
        let mut shard_a = d.subscribe(Interest::resource(1).in_shards(Some(only_a)));
        let mut all = d.subscribe(Interest::everything());
        for c in [change(1, 1, "a"), change(2, 1, "b"), change(3, 2, ""), change(4, 3, "a")] {
            d.publish(&c);
        }
        assert_eq!(drain(&mut pods), (vec![1, 2], TryRecvError::Empty));
        assert_eq!(drain(&mut pods_and_nodes), (vec![1, 2, 3], TryRecvError::Empty));
        assert_eq!(drain(&mut in_a), (vec![1], TryRecvError::Empty));
        assert_eq!(drain(&mut shard_a), (vec![1], TryRecvError::Empty));
        assert_eq!(drain(&mut all), (vec![1, 2, 3, 4], TryRecvError::Empty));
    }

    /// What was queued before the overflow arrives, then one Lagged, then the changes after the
    /// receiver caught up, as a tokio broadcast receiver reports them.
    #[test]
    fn an_overflow_is_reported_once_where_the_changes_were_dropped() {
        let mut d = Dispatch::new(2);
        let mut rx = d.subscribe(Interest::resources(&[1, 2]));
        for rv in 1..=4 {
            d.publish(&change(rv, 1, "a"));
        }
        d.publish(&change(5, 2, "a"));
        assert_eq!(drain(&mut rx), (vec![1, 2], TryRecvError::Lagged));
        assert_eq!(rx.try_recv().unwrap_err(), TryRecvError::Empty);
        d.publish(&change(6, 2, "a"));
        assert_eq!(drain(&mut rx), (vec![6], TryRecvError::Empty));
        assert_eq!(d.subscribers(), 2, "one entry per resource, still subscribed");
    }

    /// A receiver waiting on an empty queue wakes for a change; a lag found on reading the queue
    /// out comes after what was queued.
    #[tokio::test]
    async fn a_waiting_receiver_gets_the_changes_then_the_lag() {
        let mut d = Dispatch::new(1);
        let mut rx = d.subscribe(Interest::resources(&[1, 2]));
        let waiting = tokio::spawn(async move { (rx.recv().await, rx.recv().await, rx) });
        tokio::task::yield_now().await;
        d.publish(&change(1, 2, "a"));
        d.publish(&change(2, 1, "a"));
        let (first, second, _rx) =
            tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await.unwrap().unwrap();
        assert_eq!(first.unwrap().rv, 1);
        assert_eq!(second.unwrap_err(), RecvError::Lagged);
    }

    #[test]
    fn ended_subscriptions_are_dropped_and_a_gone_dispatch_closes_its_receivers() {
        let mut d = Dispatch::new(4);
        let quiet = d.subscribe(Interest::resource(7));
        drop(quiet);
        let _kept = d.subscribe(Interest::resource(7));
        assert_eq!(d.subscribers(), 1, "joining the list dropped the ended one");
        let mut rx = d.subscribe(Interest::resource(1));
        d.publish(&change(1, 1, "a"));
        drop(d);
        assert_eq!(drain(&mut rx), (vec![1], TryRecvError::Closed));
    }
}
