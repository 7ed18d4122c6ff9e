//! A store's secondary indexes, as client-go's `cache.Indexers`: a named function from an object
//! to the value it is filed under, and the objects filed under each value, in no set order (as
//! client-go's: readers that need an order sort).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use super::key::ObjectKey;

/// A named index function: the value an object is filed under, if any (borrowed from the
/// object where it can be: most updates file an object where it already was, and allocate
/// nothing).
pub struct Indexer<K> {
    pub name: &'static str,
    pub value: fn(&K) -> Option<Cow<'_, str>>,
}

impl<K> Clone for Indexer<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Indexer<K> {}

/// The objects under one value. Most values file one object (a Job's uid, a Job with one pod),
/// and that case allocates no map. A Job's pods are many: each of their events finds its entry
/// by one hash of its key, where a B-tree compared the key's strings a dozen times.
enum Bucket<K> {
    One(ObjectKey, Arc<K>),
    Many(hashbrown::HashMap<ObjectKey, Arc<K>>),
}

/// One index's contents.
pub(super) struct Index<K> {
    pub(super) indexer: Indexer<K>,
    buckets: HashMap<String, Bucket<K>>,
}

impl<K> Index<K> {
    pub(super) fn new(indexer: Indexer<K>) -> Self {
        Self { indexer, buckets: HashMap::new() }
    }

    /// Files `new` under its value, and takes `old` (the version it replaces) out of a value it
    /// no longer has.
    pub(super) fn update(&mut self, key: &ObjectKey, old: Option<&K>, new: &Arc<K>) {
        let value = (self.indexer.value)(new);
        if let Some(old) = old {
            let previous = (self.indexer.value)(old);
            if previous != value
                && let Some(previous) = previous
            {
                self.remove_from(&previous, key);
            }
        }
        let Some(value) = value else { return };
        match self.buckets.get_mut(value.as_ref()) {
            None => {
                self.buckets.insert(value.into_owned(), Bucket::One(key.clone(), new.clone()));
            }
            Some(Bucket::One(k, obj)) if k == key => *obj = new.clone(),
            Some(bucket @ Bucket::One(..)) => {
                let Bucket::One(k, obj) = std::mem::replace(bucket, Bucket::Many(hashbrown::HashMap::new()))
                else {
                    unreachable!("matched One above")
                };
                *bucket = Bucket::Many(hashbrown::HashMap::from([(k, obj), (key.clone(), new.clone())]));
            }
            Some(Bucket::Many(map)) => match map.get_mut(key) {
                Some(filed) => *filed = new.clone(),
                None => {
                    map.insert(key.clone(), new.clone());
                }
            },
        }
    }

    /// Takes `old`, stored under `key`, out of the index.
    pub(super) fn remove(&mut self, key: &ObjectKey, old: &K) {
        if let Some(value) = (self.indexer.value)(old) {
            self.remove_from(&value, key);
        }
    }

    fn remove_from(&mut self, value: &str, key: &ObjectKey) {
        let empty = match self.buckets.get_mut(value) {
            None => return,
            Some(Bucket::One(k, _)) => k == key,
            Some(Bucket::Many(map)) => {
                map.remove(key);
                map.is_empty()
            }
        };
        if empty {
            self.buckets.remove(value);
        }
    }

    /// One object filed under `value`, for an index that files one object under each value (a
    /// uid): no list is built for it.
    pub(super) fn first(&self, value: &str) -> Option<Arc<K>> {
        match self.buckets.get(value)? {
            Bucket::One(_, obj) => Some(obj.clone()),
            Bucket::Many(map) => map.values().next().cloned(),
        }
    }

    /// The objects filed under `value`.
    pub(super) fn get(&self, value: &str) -> Vec<Arc<K>> {
        match self.buckets.get(value) {
            None => Vec::new(),
            Some(Bucket::One(_, obj)) => vec![obj.clone()],
            Some(Bucket::Many(map)) => map.values().cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Obj {
        owner: Option<&'static str>,
    }

    fn by_owner() -> Index<Obj> {
        Index::new(Indexer { name: "owner", value: |o: &Obj| o.owner.map(Cow::Borrowed) })
    }

    fn owners(index: &Index<Obj>, value: &str) -> Vec<Option<&'static str>> {
        index.get(value).iter().map(|o| o.owner).collect()
    }

    #[test]
    fn objects_move_between_values_and_leave_no_empty_bucket() {
        let mut index = by_owner();
        let (a, b) = (ObjectKey::new("ns", "a"), ObjectKey::new("ns", "b"));
        let a1 = Arc::new(Obj { owner: Some("u1") });
        index.update(&a, None, &a1);
        index.update(&b, None, &Arc::new(Obj { owner: Some("u1") }));
        assert_eq!(index.get("u1").len(), 2);
        // Orphaned: `a` leaves u1's bucket and is filed nowhere.
        let orphan = Arc::new(Obj { owner: None });
        index.update(&a, Some(&a1), &orphan);
        assert_eq!(owners(&index, "u1"), vec![Some("u1")]);
        assert_eq!(index.first("u1").map(|o| o.owner), Some(Some("u1")));
        index.remove(&b, &Obj { owner: Some("u1") });
        assert!(index.get("u1").is_empty());
        assert!(index.first("u1").is_none());
        assert!(index.buckets.is_empty(), "no bucket is kept for a value nothing is filed under");
    }

    #[test]
    fn a_new_version_replaces_the_old_under_the_same_value() {
        let mut index = by_owner();
        let keys: Vec<ObjectKey> = ["c", "a", "b"].iter().map(|n| ObjectKey::new("ns", *n)).collect();
        let filed: Vec<Arc<Obj>> = keys.iter().map(|_| Arc::new(Obj { owner: Some("u") })).collect();
        for (k, obj) in keys.iter().zip(&filed) {
            index.update(k, None, obj);
        }
        let newer = Arc::new(Obj { owner: Some("u") });
        index.update(&keys[1], Some(&filed[1]), &newer);
        let got = index.get("u");
        assert_eq!(got.len(), 3, "replaced, not added");
        assert!(got.iter().any(|o| Arc::ptr_eq(o, &newer)), "the newer version is filed");
        assert!(!got.iter().any(|o| Arc::ptr_eq(o, &filed[1])), "the older one is not");
        assert!(
            got.iter().any(|o| Arc::ptr_eq(o, &filed[0])) && got.iter().any(|o| Arc::ptr_eq(o, &filed[2]))
        );
    }
}
