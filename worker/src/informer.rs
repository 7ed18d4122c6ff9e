//! What controllers do with watch events ([`Handler`]), and the cache rules they share. The
//! watches themselves are [`crate::runtime::watch`]'s: the Job, CronJob and TTL-after-finished
//! controllers share one Job watch per shard group, so each Job event is decoded once.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// What a controller does with the events of one kind.
pub trait Handler<K>: Send + Sync {
    /// An object was added or changed; `old` is the version this informer saw before, if any.
    fn applied(&self, old: Option<&Arc<K>>, obj: &Arc<K>);
    /// An object was deleted (seen in the watch, or missing from a relist).
    fn deleted(&self, obj: &Arc<K>);
    /// The initial list is complete: the controller may start syncing.
    fn synced(&self);
}

/// Whether `incoming` should replace `cached`: another object under the same name (a new uid),
/// or a later version of the same one. Resource versions are opaque by contract, but etcd-backed
/// API servers (and the sim) issue increasing integers; when either does not parse, `incoming`
/// counts as newer, which is what an informer assumes.
pub fn is_newer(cached: &ObjectMeta, incoming: &ObjectMeta) -> bool {
    if cached.uid != incoming.uid {
        return true;
    }
    let version = |m: &ObjectMeta| m.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok());
    match (version(cached), version(incoming)) {
        (Some(c), Some(i)) => i > c,
        _ => true,
    }
}

/// What a cache keeps of an object: all of it but `managedFields`, which no controller reads and
/// which is the bulk of a decoded pod (a tree of maps per field manager). kube-controller-manager
/// trims them from its informers likewise (`informers.WithTransform(trim)`).
pub fn trimmed<K: kube::Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj
}

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
    uids: HashSet<String>,
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
        if uids.insert(uid.to_string()) {
            order.push_back((Instant::now(), uid.to_string()));
        }
    }

    pub fn contains(&self, uid: Option<&str>) -> bool {
        uid.is_some_and(|uid| self.inner.lock().uids.contains(uid))
    }
}

/// A handler of Job events.
pub type JobHandler = dyn Handler<Job>;

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rv: Option<&str>) -> ObjectMeta {
        ObjectMeta { resource_version: rv.map(String::from), ..ObjectMeta::default() }
    }

    #[test]
    fn a_later_integer_version_is_newer_and_an_equal_or_earlier_one_is_not() {
        assert!(is_newer(&at(Some("9")), &at(Some("10"))), "numeric, not string, order");
        assert!(!is_newer(&at(Some("10")), &at(Some("10"))), "the echo of our own write");
        assert!(!is_newer(&at(Some("11")), &at(Some("10"))), "a late response must not roll the cache back");
    }

    #[test]
    fn a_cached_object_keeps_everything_but_its_managed_fields() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let manager = ManagedFieldsEntry { manager: Some("kubectl".into()), ..ManagedFieldsEntry::default() };
        let job = Job {
            metadata: ObjectMeta { managed_fields: Some(vec![manager]), ..at(Some("7")) },
            spec: Some(Default::default()),
            ..Job::default()
        };
        let kept = trimmed(job.clone());
        assert_eq!(kept.metadata.managed_fields, None);
        assert_eq!(
            Job { metadata: ObjectMeta { managed_fields: None, ..job.metadata.clone() }, ..job },
            kept
        );
    }

    #[test]
    fn another_object_under_the_same_name_is_newer_whatever_its_version() {
        let old = ObjectMeta { uid: Some("a".into()), ..at(Some("10")) };
        let recreated = ObjectMeta { uid: Some("b".into()), ..at(Some("5")) };
        assert!(is_newer(&old, &recreated));
    }

    #[test]
    fn recently_deleted_remembers_uids_and_ignores_missing_ones() {
        let deleted = RecentlyDeleted::default();
        deleted.record(Some("u1"));
        deleted.record(None);
        assert!(deleted.contains(Some("u1")));
        assert!(!deleted.contains(Some("u2")));
        assert!(!deleted.contains(None));
    }

    #[test]
    fn an_unparseable_or_missing_version_counts_as_newer() {
        assert!(is_newer(&at(Some("abc")), &at(Some("10"))));
        assert!(is_newer(&at(Some("10")), &at(Some("opaque"))));
        assert!(is_newer(&at(None), &at(Some("1"))));
    }
}
