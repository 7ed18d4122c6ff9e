//! A store's secondary indexes, as client-go's `cache.Indexers`: a named function from an object
//! to the value it is filed under, and the objects filed under each value, in key order.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
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
/// and that case allocates no map.
enum Bucket<K> {
    One(ObjectKey, Arc<K>),
    Many(BTreeMap<ObjectKey, Arc<K>>),
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
                let Bucket::One(k, obj) = std::mem::replace(bucket, Bucket::Many(BTreeMap::new())) else {
                    unreachable!("matched One above")
                };
                *bucket = Bucket::Many(BTreeMap::from([(k, obj), (key.clone(), new.clone())]));
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

    /// The objects filed under `value`, in key order.
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
        index.remove(&b, &Obj { owner: Some("u1") });
        assert!(index.get("u1").is_empty());
        assert!(index.buckets.is_empty(), "no bucket is kept for a value nothing is filed under");
    }

    #[test]
    fn a_new_version_replaces_the_old_under_the_same_value_in_key_order() {
        let mut index = by_owner();
        let keys: Vec<ObjectKey> = ["c", "a", "b"].iter().map(|n| ObjectKey::new("ns", *n)).collect();
        for k in &keys {
            index.update(k, None, &Arc::new(Obj { owner: Some("u") }));
        }
        let old = Obj { owner: Some("u") };
        let newer = Arc::new(Obj { owner: Some("u") });
        index.update(&keys[1], Some(&old), &newer);
        let got = index.get("u");
        assert_eq!(got.len(), 3, "replaced, not added");
        assert!(Arc::ptr_eq(&got[0], &newer), "\"a\" sorts first and holds the newer version");
    }
}
