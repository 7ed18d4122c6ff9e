//! One kind's shared cache in a worker: the objects the shard watches last showed (and the
//! controllers' own writes, which are newer), with secondary indexes, the handlers each
//! controller registers, and a per-shard synced signal. client-go's `SharedIndexInformer`
//! without the watch, which is [`crate::runtime::watch`]'s: one store is fed by several watches,
//! each serving a group of shards.
//!
//! Handlers are called after the store is updated and outside its lock, as client-go calls
//! them. A controller's own write (a status it wrote, a Job it created) goes in through
//! [`Store::wrote`]: the other controllers' handlers see it at once, the writer's does not (the
//! sync that wrote it already saw it), and its watch echo changes nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::RwLock;

use super::Handler;
use super::index::{Index, Indexer};
use super::key::ObjectKey;
use super::recently_deleted::RecentlyDeleted;
use super::trim::Cached;
use crate::client::lean_identity::ObjectIdentity;
use crate::runtime::shard::ShardTable;

/// Which shards a store holds a complete list of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Synced {
    /// A first list has completed, or the worker started holding no shard: controllers may sync.
    pub started: bool,
    /// Shards whose watch has listed them since they were gained.
    pub shards: BTreeSet<u32>,
}

/// Whether the store guards against write responses that arrive after their object's deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// Controllers put their writes in ([`Store::wrote`]): deletions are remembered a while.
    Taken,
    /// Only watches fill the store (pods: the Job controller reads its pod writes back from the
    /// watch), so no deletion needs remembering.
    NotTaken,
}

/// One kind's objects, indexes, handlers and synced signal.
pub struct Store<K> {
    shards: ShardTable,
    contents: RwLock<Contents<K>>,
    /// Shared, so that an event takes one reference to the list rather than a copy of it.
    handlers: RwLock<Arc<[Arc<dyn Handler<K>>]>>,
    deleted: Option<RecentlyDeleted>,
    synced: tokio::sync::watch::Sender<Synced>,
}

/// The objects by namespace and name (the namespace index), the namespaces by shard (the shard
/// index), and the secondary indexes.
struct Contents<K> {
    namespaces: HashMap<String, BTreeMap<String, Arc<K>>>,
    namespaces_by_shard: HashMap<u32, BTreeSet<String>>,
    indexes: Vec<Index<K>>,
}

impl<K> Contents<K> {
    fn index(&self, name: &str) -> Option<&Index<K>> {
        let index = self.indexes.iter().find(|i| i.indexer.name == name);
        debug_assert!(index.is_some(), "no index {name} on this store");
        index
    }

    fn get(&self, key: &ObjectKey) -> Option<&Arc<K>> {
        self.namespaces.get(&key.namespace)?.get(&key.name)
    }

    fn insert(&mut self, key: &ObjectKey, obj: Arc<K>, shard: u32) -> Option<Arc<K>> {
        let names = match self.namespaces.get_mut(&key.namespace) {
            Some(names) => names,
            None => {
                self.namespaces_by_shard.entry(shard).or_default().insert(key.namespace.clone());
                self.namespaces.entry(key.namespace.clone()).or_default()
            }
        };
        // An update finds its name filed already: no copy of the key is made for it.
        let old = match names.get_mut(&key.name) {
            Some(stored) => Some(std::mem::replace(stored, obj.clone())),
            None => names.insert(key.name.clone(), obj.clone()),
        };
        for index in &mut self.indexes {
            index.update(key, old.as_deref(), &obj);
        }
        old
    }

    fn remove(&mut self, key: &ObjectKey, shard: u32) -> Option<Arc<K>> {
        let names = self.namespaces.get_mut(&key.namespace)?;
        let old = names.remove(&key.name)?;
        if names.is_empty() {
            self.namespaces.remove(&key.namespace);
            if let Some(in_shard) = self.namespaces_by_shard.get_mut(&shard) {
                in_shard.remove(&key.namespace);
                if in_shard.is_empty() {
                    self.namespaces_by_shard.remove(&shard);
                }
            }
        }
        for index in &mut self.indexes {
            index.remove(key, &old);
        }
        Some(old)
    }

    fn namespaces_of(&self, shard: u32) -> impl Iterator<Item = &String> {
        self.namespaces_by_shard.get(&shard).into_iter().flatten()
    }
}

fn rv_of<K: kube::Resource>(obj: &K) -> u64 {
    obj.meta().resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0)
}

impl<K: Cached> Store<K> {
    pub fn new(shards: ShardTable, indexers: &[Indexer<K>], writes: Writes) -> Self {
        Self {
            shards,
            contents: RwLock::new(Contents {
                namespaces: HashMap::new(),
                namespaces_by_shard: HashMap::new(),
                indexes: indexers.iter().map(|i| Index::new(*i)).collect(),
            }),
            handlers: RwLock::new(Arc::new([])),
            deleted: (writes == Writes::Taken).then(RecentlyDeleted::default),
            synced: tokio::sync::watch::channel(Synced::default()).0,
        }
    }

    /// Registers a controller's handler: it is called for every later change.
    pub fn add_handler(&self, handler: Arc<dyn Handler<K>>) {
        let mut handlers = self.handlers.write();
        *handlers = handlers.iter().cloned().chain([handler]).collect();
    }

    /// Whether any controller reads this kind: only then is it watched.
    pub fn has_handlers(&self) -> bool {
        !self.handlers.read().is_empty()
    }

    fn handlers(&self) -> Arc<[Arc<dyn Handler<K>>]> {
        self.handlers.read().clone()
    }

    // ---- reads ---------------------------------------------------------------------------

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.contents.read().get(key).cloned()
    }

    /// The objects the index `name` files under `value`, in no set order.
    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<K>> {
        self.contents.read().index(name).map(|i| i.get(value)).unwrap_or_default()
    }

    /// An object the index `name` files under `value` (of an index of unique values: a uid).
    pub fn first_by_index(&self, name: &str, value: &str) -> Option<Arc<K>> {
        self.contents.read().index(name)?.first(value)
    }

    /// The objects of `shard`.
    pub fn in_shard(&self, shard: u32) -> Vec<Arc<K>> {
        let contents = self.contents.read();
        contents
            .namespaces_of(shard)
            .filter_map(|ns| contents.namespaces.get(ns))
            .flat_map(|names| names.values().cloned())
            .collect()
    }

    /// The keys of `shard`'s objects.
    pub fn keys_in_shard(&self, shard: u32) -> Vec<ObjectKey> {
        let contents = self.contents.read();
        contents
            .namespaces_of(shard)
            .filter_map(|ns| contents.namespaces.get_key_value(ns))
            .flat_map(|(ns, names)| names.keys().map(|name| ObjectKey::new(ns.clone(), name.clone())))
            .collect()
    }

    /// How long ago a watch reported the object of `uid` deleted, if it did lately (stores of
    /// [`Writes::Taken`] only: the others remember no deletion).
    pub fn deleted_ago(&self, uid: &str) -> Option<std::time::Duration> {
        self.deleted.as_ref()?.deleted_ago(uid)
    }

    /// Objects held, all shards.
    pub fn len(&self) -> usize {
        self.contents.read().namespaces.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.contents.read().namespaces.is_empty()
    }

    // ---- the synced signal ---------------------------------------------------------------

    /// Waits until a first list completed (or the worker started with no shard to list).
    pub async fn wait_synced(&self) {
        let _ = self.synced.subscribe().wait_for(|s| s.started).await;
    }

    /// Whether `shard` has been listed since this worker gained it.
    pub fn has_synced(&self, shard: u32) -> bool {
        self.synced.borrow().shards.contains(&shard)
    }

    /// The worker holds no shard yet: there is nothing to wait for.
    pub fn start_empty(&self) {
        self.synced.send_if_modified(|s| !std::mem::replace(&mut s.started, true));
    }

    /// A watch completed a list of `shards`.
    pub fn listed(&self, shards: impl IntoIterator<Item = u32>) {
        self.synced.send_if_modified(|s| {
            let before = s.shards.len();
            s.shards.extend(shards);
            !std::mem::replace(&mut s.started, true) || s.shards.len() != before
        });
    }

    // ---- what watches and writes bring ---------------------------------------------------

    /// A watch brought `obj` (listed, added or modified). Unless `serves` says its namespace is
    /// not this watch's to feed, it is stored — if newer than what the store holds — and every
    /// handler is called with the version it replaces. Returns whether the key was new.
    pub fn observe(&self, obj: K, serves: impl Fn(&str) -> bool) -> Option<bool> {
        let obj = Arc::new(obj.trimmed());
        let key = ObjectKey::of(obj.meta());
        let shard = self.shards.shard_of(&key.namespace);
        let old = {
            let mut contents = self.contents.write();
            // Asked under the lock, so a shard dropped meanwhile is not filled again.
            if !serves(&key.namespace) {
                return None;
            }
            match contents.get(&key) {
                // Our own later write is in already; the watch will catch up with it.
                Some(stored) if !super::is_newer(stored.meta(), obj.meta()) => Some(stored.clone()),
                _ => contents.insert(&key, obj.clone(), shard),
            }
        };
        for h in self.handlers().iter() {
            h.applied(old.as_ref(), &obj);
        }
        Some(old.is_none())
    }

    /// Whether controllers write this kind into the store ([`Writes::Taken`]): only then can a
    /// watch event be the echo of a version it holds already.
    pub fn takes_writes(&self) -> bool {
        self.deleted.is_some()
    }

    /// A watch brought the object `id` names. If the store holds that very version (the same
    /// uid and resourceVersion: the echo of a controller's write, in through [`Store::wrote`])
    /// and `serves` says the namespace is this watch's to feed, every handler is called as
    /// [`Store::observe`] calls them for it, with the stored object as the event's, which is
    /// the same version; the event need not be decoded. Returns whether it was such an echo.
    pub fn observe_echo(&self, id: &ObjectIdentity, serves: impl Fn(&str) -> bool) -> bool {
        let stored = {
            let contents = self.contents.read();
            if !serves(id.namespace) {
                return false;
            }
            let held = contents.namespaces.get(id.namespace).and_then(|names| names.get(id.name));
            match held {
                Some(s)
                    if s.meta().uid.as_deref() == Some(id.uid)
                        && s.meta().resource_version.as_deref() == Some(id.resource_version) =>
                {
                    s.clone()
                }
                _ => return false,
            }
        };
        for h in self.handlers().iter() {
            h.applied(Some(&stored), &stored);
        }
        true
    }

    /// A watch reported `obj` deleted. Returns whether the store held it.
    pub fn observe_deleted(&self, obj: &K, serves: impl Fn(&str) -> bool) -> bool {
        let key = ObjectKey::of(obj.meta());
        let uid = obj.meta().uid.as_deref();
        if let Some(deleted) = &self.deleted {
            deleted.record(uid);
        }
        let shard = self.shards.shard_of(&key.namespace);
        let old = {
            let mut contents = self.contents.write();
            // Another object under the same name (written by a controller since) stays.
            let same = contents.get(&key).is_some_and(|s| uid.is_none() || s.meta().uid.as_deref() == uid);
            if !serves(&key.namespace) || !same {
                return false;
            }
            contents.remove(&key, shard)
        };
        let Some(old) = old else { return false };
        for h in self.handlers().iter() {
            h.deleted(&old);
        }
        true
    }

    /// A watch serving `shards` (those `serves` says it feeds) completed a list at `list_rv`
    /// holding `listed`: what the store holds of those shards and the list lacks was deleted
    /// meanwhile, unless it is newer than the list (a write answered after the list's snapshot).
    /// Returns how many objects of the watch's shards the store holds now.
    pub fn relisted(
        &self,
        shards: &BTreeSet<u32>,
        listed: &HashSet<ObjectKey>,
        list_rv: u64,
        serves: impl Fn(&str) -> bool,
    ) -> usize {
        let mut gone = Vec::new();
        let mut held = 0;
        {
            let mut contents = self.contents.write();
            let mut stale = Vec::new();
            for &shard in shards {
                for ns in contents.namespaces_of(shard).filter(|ns| serves(ns)) {
                    let Some(names) = contents.namespaces.get(ns) else { continue };
                    for (name, obj) in names {
                        let key = ObjectKey::new(ns.clone(), name.clone());
                        if listed.contains(&key) || rv_of(&**obj) > list_rv {
                            held += 1;
                        } else {
                            stale.push((key, shard));
                        }
                    }
                }
            }
            for (key, shard) in stale {
                if let Some(old) = contents.remove(&key, shard) {
                    gone.push(old);
                }
            }
        }
        for old in gone {
            if let Some(deleted) = &self.deleted {
                deleted.record(old.meta().uid.as_deref());
            }
            for h in self.handlers().iter() {
                h.deleted(&old);
            }
        }
        held
    }

    /// A controller wrote `obj` and got it back: it goes in unless the store holds this version
    /// or a later one, its shard is no longer held, or a watch reported it deleted (the answer
    /// came late). Every handler but `writer`'s is called. Returns whether it went in.
    pub fn wrote(&self, obj: K, writer: &dyn Handler<K>) -> bool {
        let obj = Arc::new(obj.trimmed());
        if self.deleted.as_ref().is_some_and(|d| d.contains(obj.meta().uid.as_deref())) {
            return false;
        }
        let key = ObjectKey::of(obj.meta());
        let shard = self.shards.shard_of(&key.namespace);
        let old = {
            let mut contents = self.contents.write();
            if !self.shards.caches(&key.namespace)
                || contents.get(&key).is_some_and(|s| !super::is_newer(s.meta(), obj.meta()))
            {
                return false;
            }
            contents.insert(&key, obj.clone(), shard)
        };
        for h in self.handlers().iter() {
            if !std::ptr::addr_eq(Arc::as_ptr(h), writer as *const dyn Handler<K>) {
                h.applied(old.as_ref(), &obj);
            }
        }
        true
    }

    /// Empties `shard`, which this worker no longer holds; no handler is called.
    pub fn forget_shard(&self, shard: u32) {
        let mut contents = self.contents.write();
        let namespaces: Vec<String> = contents.namespaces_of(shard).cloned().collect();
        for ns in namespaces {
            let names: Vec<String> =
                contents.namespaces.get(&ns).map(|n| n.keys().cloned().collect()).unwrap_or_default();
            for name in names {
                contents.remove(&ObjectKey::new(ns.clone(), name), shard);
            }
        }
        drop(contents);
        self.synced.send_if_modified(|s| s.shards.remove(&shard));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shards::ShardSpace;
    use k8s_openapi::api::core::v1::Pod;
    use parking_lot::Mutex;
    use serde_json::json;

    /// What a handler was told, in order: `+name@rv (old rv)` or `-name@rv`.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    fn rv(p: &Pod) -> &str {
        p.metadata.resource_version.as_deref().unwrap_or("")
    }

    impl Handler<Pod> for Recorder {
        fn applied(&self, old: Option<&Arc<Pod>>, obj: &Arc<Pod>) {
            let old = old.map_or("none".to_string(), |o| rv(o).to_string());
            self.0.lock().push(format!(
                "+{}@{} ({old})",
                obj.metadata.name.as_deref().unwrap_or(""),
                rv(obj)
            ));
        }
        fn deleted(&self, obj: &Arc<Pod>) {
            self.0.lock().push(format!("-{}@{}", obj.metadata.name.as_deref().unwrap_or(""), rv(obj)));
        }
    }

    impl Recorder {
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock())
        }
    }

    fn pod(ns: &str, name: &str, uid: &str, rv: u64, job: Option<&str>) -> Pod {
        let refs = job.map(|uid| json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": uid, "controller": true}]));
        serde_json::from_value(json!({"metadata": {
            "name": name, "namespace": ns, "uid": uid, "resourceVersion": rv.to_string(), "ownerReferences": refs
        }}))
        .expect("a pod")
    }

    const BY_JOB: Indexer<Pod> = Indexer {
        name: "job",
        value: |p: &Pod| super::super::controlling_job_uid(p).map(std::borrow::Cow::Borrowed),
    };

    fn store() -> (Store<Pod>, Arc<Recorder>, Arc<Recorder>, ShardTable) {
        let table = ShardTable::all_active(ShardSpace::new(4).expect("four shards"));
        let store = Store::new(table.clone(), &[BY_JOB], Writes::Taken);
        let (a, b) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
        store.add_handler(a.clone());
        store.add_handler(b.clone());
        (store, a, b, table)
    }

    fn all(_: &str) -> bool {
        true
    }

    #[test]
    fn handlers_see_each_change_after_the_store_with_the_version_it_replaced() {
        let (store, a, b, _) = store();
        assert_eq!(store.observe(pod("ns", "p", "u", 5, Some("j1")), all), Some(true));
        assert_eq!(store.observe(pod("ns", "p", "u", 6, Some("j1")), all), Some(false));
        assert_eq!(a.take(), vec!["+p@5 (none)", "+p@6 (5)"]);
        assert_eq!(b.take().len(), 2, "every handler is called");
        assert_eq!(store.by_index("job", "j1").len(), 1);
        assert!(store.observe_deleted(&pod("ns", "p", "u", 7, Some("j1")), all));
        assert_eq!(a.take(), vec!["-p@6"], "the handler gets the stored version");
        assert!(store.by_index("job", "j1").is_empty());
        assert!(store.is_empty());
    }

    #[test]
    fn a_write_reaches_every_handler_but_the_writers_and_its_echo_changes_nothing() {
        let (store, writer, other, _) = store();
        store.observe(pod("ns", "p", "u", 5, None), all);
        writer.take();
        other.take();
        assert!(store.wrote(pod("ns", "p", "u", 9, None), &*writer));
        assert!(writer.take().is_empty());
        assert_eq!(other.take(), vec!["+p@9 (5)"]);
        // The watch catches up with an intermediate version, then the echo: the store keeps 9.
        store.observe(pod("ns", "p", "u", 7, None), all);
        assert_eq!(store.get(&ObjectKey::new("ns", "p")).map(|p| rv(&p).to_string()), Some("9".into()));
        // A late answer older than what the store holds is not taken.
        assert!(!store.wrote(pod("ns", "p", "u", 8, None), &*writer));
    }

    fn identity<'a>(ns: &'a str, name: &'a str, uid: &'a str, rv: &'a str) -> ObjectIdentity<'a> {
        ObjectIdentity { namespace: ns, name, uid, resource_version: rv }
    }

    #[test]
    fn an_echo_taken_from_the_store_calls_the_handlers_as_the_decoded_event_would() {
        // Two stores given the same write; one is shown its echo decoded, the other only the
        // echo's identity.
        let (decoded, decoded_writer, decoded_other, _) = store();
        let (undecoded, undecoded_writer, undecoded_other, _) = store();
        for (s, writer) in [(&decoded, &decoded_writer), (&undecoded, &undecoded_writer)] {
            s.observe(pod("ns", "p", "u", 5, Some("j")), all);
            assert!(s.wrote(pod("ns", "p", "u", 9, Some("j")), &**writer));
        }
        assert_eq!(decoded.observe(pod("ns", "p", "u", 9, Some("j")), all), Some(false));
        assert!(undecoded.observe_echo(&identity("ns", "p", "u", "9"), all));
        assert_eq!(undecoded_writer.take(), decoded_writer.take());
        assert_eq!(undecoded_other.take(), decoded_other.take());
        assert_eq!(undecoded.get(&ObjectKey::new("ns", "p")), decoded.get(&ObjectKey::new("ns", "p")));
        assert_eq!(undecoded.by_index("job", "j"), decoded.by_index("job", "j"));

        // Anything but that very version is decoded: another version, another object under the
        // name, a name not held, a namespace the watch does not feed.
        let (writer, other) = (&undecoded_writer, &undecoded_other);
        for (id, serves) in [
            (identity("ns", "p", "u", "10"), true),
            (identity("ns", "p", "u", "8"), true),
            (identity("ns", "p", "u2", "9"), true),
            (identity("ns", "q", "u", "9"), true),
            (identity("ns2", "p", "u", "9"), true),
            (identity("ns", "p", "u", "9"), false),
        ] {
            assert!(!undecoded.observe_echo(&id, |_| serves), "{id:?} served: {serves}");
        }
        assert!(writer.take().is_empty() && other.take().is_empty(), "no handler was called");
    }

    #[test]
    fn a_write_answered_after_the_deletion_leaves_no_ghost() {
        let (store, writer, _, _) = store();
        store.observe(pod("ns", "p", "u", 5, None), all);
        store.observe_deleted(&pod("ns", "p", "u", 6, None), all);
        assert!(!store.wrote(pod("ns", "p", "u", 5, None), &*writer));
        assert!(store.get(&ObjectKey::new("ns", "p")).is_none());
    }

    #[test]
    fn a_relist_deletes_what_it_lacks_in_the_watchs_shards_only_and_keeps_newer_writes() {
        let (store, a, _, table) = store();
        // Two namespaces in different shards.
        let (ns1, ns2) = (
            "team-a",
            (0..)
                .map(|i| format!("ns-{i}"))
                .find(|n| table.shard_of(n) != table.shard_of("team-a"))
                .expect("another shard"),
        );
        store.observe(pod(ns1, "gone", "u1", 5, None), all);
        store.observe(pod(ns1, "kept", "u2", 5, None), all);
        store.observe(pod(&ns2, "other", "u3", 5, None), all);
        assert!(store.wrote(pod(ns1, "written", "u4", 12, None), &Recorder::default()));
        a.take();
        let listed = HashSet::from([ObjectKey::new(ns1, "kept")]);
        let shards = BTreeSet::from([table.shard_of(ns1)]);
        assert_eq!(store.relisted(&shards, &listed, 10, all), 2, "kept, and the write after the list");
        assert_eq!(a.take(), vec!["-gone@5"]);
        assert!(store.get(&ObjectKey::new(ns2, "other")).is_some(), "another watch's shard is untouched");
        assert_eq!(store.len(), 3);
    }

    #[test]
    fn objects_a_watch_does_not_serve_are_ignored_and_a_dropped_shard_is_emptied() {
        let (store, a, _, table) = store();
        assert_eq!(store.observe(pod("ns", "p", "u", 5, Some("j")), |_| false), None);
        assert!(a.take().is_empty());
        store.observe(pod("ns", "p", "u", 5, Some("j")), all);
        let shard = table.shard_of("ns");
        store.listed([shard]);
        assert!(store.has_synced(shard));
        assert_eq!(store.in_shard(shard).len(), 1);
        assert_eq!(store.keys_in_shard(shard), vec![ObjectKey::new("ns", "p")]);
        store.forget_shard(shard);
        assert!(store.is_empty() && store.by_index("job", "j").is_empty());
        assert!(!store.has_synced(shard));
        assert!(a.take().iter().all(|e| e.starts_with('+')), "forgetting calls no handler");
    }

    #[tokio::test]
    async fn controllers_wait_for_a_first_list_or_an_empty_start() {
        let (store, ..) = store();
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(20), store.wait_synced()).await;
        assert!(waiting.is_err(), "nothing listed yet");
        store.start_empty();
        tokio::time::timeout(std::time::Duration::from_secs(5), store.wait_synced())
            .await
            .expect("synced once started with no shard");
    }
}
