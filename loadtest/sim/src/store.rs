//! The object store: every kind's objects under one global, monotonic resourceVersion, an event
//! history for watch resumption, and each change handed to the subscribers interested in it.
//!
//! Objects are kept as their serialized JSON (plus the few fields selectors need), not as parsed
//! values: it keeps a million pods within a few GiB, and each watch event is serialized once
//! however many watchers receive it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use serde_json::{Map, Value};

use crate::resources::ResourceKey;

mod dispatch;

pub use dispatch::{ChangeReceiver, Interest, RecvError, TryRecvError};

/// A small interned id per `(group, plural)`, so watchers compare integers, not strings.
pub type ResourceId = u32;

/// The placeholder the apiserver layer writes as `metadata.resourceVersion` before serializing;
/// the store splices the real version in when it commits, outside of any parse.
pub const RV_PLACEHOLDER: &str = "\u{0}rv\u{0}";
const RV_PLACEHOLDER_JSON: &[u8] = br#""resourceVersion":"\u0000rv\u0000""#;
/// A u64 in decimal.
const MAX_RV_DIGITS: usize = 20;

/// One stored version of an object.
#[derive(Debug)]
pub struct StoredObject {
    pub rv: u64,
    pub resource: ResourceId,
    pub namespace: Box<str>,
    pub name: Box<str>,
    pub uid: Box<str>,
    pub labels: Option<Map<String, Value>>,
    /// Selectable fields (besides metadata.name/namespace) and their values; the names are
    /// the kind's static list (`ResourceType::field_selectors`), not a copy per object.
    pub fields: Box<[(&'static str, Box<str>)]>,
    pub owner_uids: Box<[Box<str>]>,
    pub namespace_hash: u64,
    pub uid_hash: u64,
    /// The object's JSON, with `metadata.resourceVersion` = `rv`.
    pub bytes: Bytes,
}

impl StoredObject {
    /// The object parsed; stored bytes are always valid JSON.
    pub fn value(&self) -> Value {
        crate::json::parse(&self.bytes).unwrap_or(Value::Null)
    }

    /// A selectable field's value.
    pub fn field(&self, name: &str) -> Option<&str> {
        match name {
            "metadata.name" => Some(&self.name),
            "metadata.namespace" => Some(&self.namespace),
            _ => self.fields.iter().find(|(k, _)| *k == name).map(|(_, v)| &**v),
        }
    }
}

/// An object ready to commit: its identity, selector data and JSON serialized with
/// [`RV_PLACEHOLDER`] as its resourceVersion.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub namespace: Box<str>,
    pub name: Box<str>,
    pub uid: Box<str>,
    pub labels: Option<Map<String, Value>>,
    pub fields: Box<[(&'static str, Box<str>)]>,
    pub owner_uids: Box<[Box<str>]>,
    /// The JSON up to the resourceVersion's digits, in a buffer with room for the digits and
    /// `suffix`: the stored bytes are this buffer once committed, allocated before the store's
    /// lock is taken (allocating them under it was a good part of the time it was held).
    prefix: Vec<u8>,
    suffix: Bytes,
}

impl Prepared {
    /// Splits `json` at its resourceVersion placeholder.
    pub fn new(
        namespace: &str,
        name: &str,
        uid: &str,
        labels: Option<Map<String, Value>>,
        fields: Vec<(&'static str, Box<str>)>,
        owner_uids: Vec<Box<str>>,
        json: Vec<u8>,
    ) -> Result<Self, StoreError> {
        // One searcher for every write: `memmem::find` sets one up on each call.
        static PLACEHOLDER: LazyLock<memchr::memmem::Finder<'static>> =
            LazyLock::new(|| memchr::memmem::Finder::new(RV_PLACEHOLDER_JSON));
        let at = PLACEHOLDER.find(&json).ok_or(StoreError::NoPlaceholder)?;
        let value_start = at + br#""resourceVersion":""#.len();
        let value_end = at + RV_PLACEHOLDER_JSON.len() - 1;
        let mut prefix = Vec::with_capacity(value_start + MAX_RV_DIGITS + (json.len() - value_end));
        prefix.extend_from_slice(&json[..value_start]);
        let json = Bytes::from(json);
        Ok(Self {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
            labels,
            fields: fields.into_boxed_slice(),
            owner_uids: owner_uids.into_boxed_slice(),
            prefix,
            suffix: json.slice(value_end..),
        })
    }

    /// The JSON at version `rv`, in the buffer `prefix` was made with room for.
    fn render(prefix: Vec<u8>, suffix: &[u8], rv: u64) -> Bytes {
        use std::io::Write;
        let mut out = prefix;
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{rv}");
        out.extend_from_slice(suffix);
        // Bytes keeps a buffer with spare room behind a second allocation; the allocator shrinks
        // this one by the few unused digits in place.
        out.shrink_to_fit();
        Bytes::from(out)
    }

    /// Whether committing this would store exactly `current` again (a no-op write).
    fn same_as(&self, current: &StoredObject) -> bool {
        let b = &current.bytes;
        let digits = current.rv.to_string();
        b.len() == self.prefix.len() + digits.len() + self.suffix.len()
            && b.starts_with(&self.prefix)
            && b[self.prefix.len()..].starts_with(digits.as_bytes())
            && b.ends_with(&self.suffix)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed change, shared by every watcher.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub kind: ChangeKind,
    pub object: Arc<StoredObject>,
    pub prev: Option<Arc<StoredObject>>,
    pub at: Instant,
}

/// `{"type":"<kind>","object":<object>}\n`.
pub fn watch_line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    write_watch_line(&mut out, kind, object);
    Bytes::from(out)
}

/// [`watch_line`], written into `out`: a watch writes each event straight into its buffer, as
/// the store hands a change to the few watches it concerns (a line rendered once and kept with
/// the change was a copy of every object version, held as long as the history).
pub fn write_watch_line(out: &mut impl bytes::BufMut, kind: &str, object: &[u8]) {
    out.put_slice(br#"{"type":""#);
    out.put_slice(kind.as_bytes());
    out.put_slice(br#"","object":"#);
    out.put_slice(object);
    out.put_slice(b"}\n");
}

/// What a write expects of the stored version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Only if the stored version is exactly this one.
    Version(u64),
    /// Whatever is stored.
    Any,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("object already exists")]
    AlreadyExists,
    #[error("object not found")]
    NotFound,
    #[error("object has been modified; stored version is {current}")]
    Conflict { current: u64 },
    #[error("serialized object carries no resourceVersion placeholder")]
    NoPlaceholder,
}

/// A watch could not start: the requested version is older than the retained history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too old resource version: {requested} ({oldest})")]
pub struct Expired {
    pub requested: u64,
    pub oldest: u64,
}

/// How much history the store keeps for resuming watches.
#[derive(Debug, Clone)]
pub struct HistoryConfig {
    /// Changes younger than this are always kept (upstream keeps at least 75s).
    pub window: Duration,
    /// Older changes beyond this count are dropped.
    pub max_events: usize,
    /// How many changes a watcher may fall behind the live stream before it catches up from
    /// this history instead. Fixed when the store starts.
    pub live_buffer: usize,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        Self { window: Duration::from_secs(75), max_events: 200_000, live_buffer: 1 << 16 }
    }
}

type ObjectKey = (Box<str>, Box<str>);
type Location = (ResourceId, Box<str>, Box<str>);

struct Inner {
    rv: u64,
    resource_ids: HashMap<ResourceKey, ResourceId>,
    objects: Vec<BTreeMap<ObjectKey, Arc<StoredObject>>>,
    by_uid: HashMap<Box<str>, Location>,
    dependents: HashMap<Box<str>, HashSet<Location>>,
    history: VecDeque<Arc<Change>>,
    /// Watches may resume from any version ≥ this.
    oldest_resumable: u64,
    history_config: HistoryConfig,
    dispatch: dispatch::Dispatch,
}

/// The store. Cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
    /// The ids already assigned (a copy of `Inner::resource_ids`), read without the store's
    /// lock: every request resolves its resource's id, and took that lock for it.
    assigned_ids: RwLock<HashMap<ResourceKey, ResourceId>>,
}

impl Store {
    /// A store whose first resourceVersion is derived from the wall clock, so versions never go
    /// backwards across restarts of the sim.
    pub fn new(history_config: HistoryConfig) -> Self {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(1);
        Self::starting_at(micros, history_config)
    }

    pub fn starting_at(rv: u64, history_config: HistoryConfig) -> Self {
        let dispatch = dispatch::Dispatch::new(history_config.live_buffer);
        Self {
            inner: Mutex::new(Inner {
                rv,
                resource_ids: HashMap::new(),
                objects: Vec::new(),
                by_uid: HashMap::new(),
                dependents: HashMap::new(),
                history: VecDeque::new(),
                oldest_resumable: rv,
                history_config,
                dispatch,
            }),
            assigned_ids: RwLock::new(HashMap::new()),
        }
    }

    /// The id of a resource, assigned on first use.
    pub fn resource_id(&self, key: &ResourceKey) -> ResourceId {
        if let Some(id) = self.assigned_ids.read().get(key) {
            return *id;
        }
        let mut inner = self.inner.lock();
        let id = match inner.resource_ids.get(key) {
            Some(id) => *id,
            None => {
                let id = inner.objects.len() as ResourceId;
                inner.objects.push(BTreeMap::new());
                inner.resource_ids.insert(key.clone(), id);
                id
            }
        };
        // Published while the store's lock is held, so the copy never disagrees with it.
        self.assigned_ids.write().insert(key.clone(), id);
        id
    }

    pub fn current_rv(&self) -> u64 {
        self.inner.lock().rv
    }

    pub fn get(&self, resource: ResourceId, namespace: &str, name: &str) -> Option<Arc<StoredObject>> {
        // The key is allocated before the lock is taken: every request holds it, briefly.
        let key: ObjectKey = (namespace.into(), name.into());
        let inner = self.inner.lock();
        inner.objects.get(resource as usize)?.get(&key).cloned()
    }

    pub fn get_by_uid(&self, uid: &str) -> Option<Arc<StoredObject>> {
        let inner = self.inner.lock();
        let (rid, ns, name) = inner.by_uid.get(uid)?;
        inner.objects.get(*rid as usize)?.get(&(ns.clone(), name.clone())).cloned()
    }

    /// Every object of `resource` (in `namespace`, if given), ordered by namespace and name, and
    /// the resourceVersion the snapshot was taken at.
    pub fn list(&self, resource: ResourceId, namespace: Option<&str>) -> (Vec<Arc<StoredObject>>, u64) {
        let inner = self.inner.lock();
        (Self::list_locked(&inner, resource, namespace), inner.rv)
    }

    fn list_locked(inner: &Inner, resource: ResourceId, namespace: Option<&str>) -> Vec<Arc<StoredObject>> {
        let Some(map) = inner.objects.get(resource as usize) else { return Vec::new() };
        match namespace {
            None => map.values().cloned().collect(),
            Some(ns) => {
                let start: ObjectKey = (ns.into(), "".into());
                map.range(start..).take_while(|((n, _), _)| &**n == ns).map(|(_, o)| o.clone()).collect()
            }
        }
    }

    /// Whether any object of any resource lives in `namespace`.
    pub fn namespace_is_empty(&self, namespace: &str, cluster_scoped: &HashSet<ResourceId>) -> bool {
        let inner = self.inner.lock();
        inner.objects.iter().enumerate().all(|(rid, map)| {
            if cluster_scoped.contains(&(rid as ResourceId)) {
                return true;
            }
            let start: ObjectKey = (namespace.into(), "".into());
            map.range(start..).next().is_none_or(|((n, _), _)| &**n != namespace)
        })
    }

    /// All resource ids with at least one object in `namespace`.
    pub fn objects_in_namespace(
        &self,
        namespace: &str,
        skip: &HashSet<ResourceId>,
    ) -> Vec<Arc<StoredObject>> {
        let inner = self.inner.lock();
        let mut out = Vec::new();
        for (rid, _) in inner.objects.iter().enumerate() {
            if !skip.contains(&(rid as ResourceId)) {
                out.extend(Self::list_locked(&inner, rid as ResourceId, Some(namespace)));
            }
        }
        out
    }

    /// The current versions of the objects that name `owner_uid` in their ownerReferences.
    pub fn dependents(&self, owner_uid: &str) -> Vec<Arc<StoredObject>> {
        let inner = self.inner.lock();
        let Some(set) = inner.dependents.get(owner_uid) else { return Vec::new() };
        set.iter()
            .filter_map(|(rid, ns, name)| {
                inner.objects.get(*rid as usize)?.get(&(ns.clone(), name.clone())).cloned()
            })
            .collect()
    }

    pub fn create(&self, resource: ResourceId, object: Prepared) -> Result<Arc<StoredObject>, StoreError> {
        let key: ObjectKey = (object.namespace.clone(), object.name.clone());
        let mut inner = self.inner.lock();
        let map = inner.objects.get(resource as usize).ok_or(StoreError::NotFound)?;
        if map.contains_key(&key) {
            return Err(StoreError::AlreadyExists);
        }
        let rv = inner.rv + 1;
        let stored = Arc::new(materialize(resource, object, rv));
        inner.rv = rv;
        index_add(&mut inner, &stored);
        inner.objects[resource as usize].insert(key, stored.clone());
        self.publish(&mut inner, ChangeKind::Added, stored.clone(), None);
        Ok(stored)
    }

    /// Replaces the object; a write that would store the same bytes again changes nothing and
    /// returns the stored version.
    pub fn update(
        &self,
        resource: ResourceId,
        object: Prepared,
        expect: Expect,
    ) -> Result<Arc<StoredObject>, StoreError> {
        let key: ObjectKey = (object.namespace.clone(), object.name.clone());
        let mut inner = self.inner.lock();
        let current = current_for_write(&inner, resource, &key, expect)?;
        if object.same_as(&current) {
            return Ok(current);
        }
        let rv = inner.rv + 1;
        let stored = Arc::new(materialize(resource, object, rv));
        inner.rv = rv;
        // The indexes map the uid and the owners' uids to the object's place, which an update
        // keeps: only a changed uid or owner list moves entries (most updates change neither).
        if stored.uid != current.uid || stored.owner_uids != current.owner_uids {
            index_remove(&mut inner, &current);
            index_add(&mut inner, &stored);
        }
        inner.objects[resource as usize].insert(key, stored.clone());
        self.publish(&mut inner, ChangeKind::Modified, stored.clone(), Some(current));
        Ok(stored)
    }

    /// Removes the object; the DELETED event carries its last state at a new resourceVersion.
    pub fn remove(
        &self,
        resource: ResourceId,
        namespace: &str,
        name: &str,
        expect: Expect,
    ) -> Result<Arc<StoredObject>, StoreError> {
        let mut inner = self.inner.lock();
        let key: ObjectKey = (namespace.into(), name.into());
        let current = current_for_write(&inner, resource, &key, expect)?;
        let rv = inner.rv + 1;
        let tombstone = Arc::new(restamp(&current, rv));
        inner.rv = rv;
        inner.objects[resource as usize].remove(&key);
        index_remove(&mut inner, &current);
        self.publish(&mut inner, ChangeKind::Deleted, tombstone.clone(), Some(current));
        Ok(tombstone)
    }

    fn publish(
        &self,
        inner: &mut Inner,
        kind: ChangeKind,
        object: Arc<StoredObject>,
        prev: Option<Arc<StoredObject>>,
    ) {
        let now = Instant::now();
        let change = Arc::new(Change { rv: object.rv, kind, object, prev, at: now });
        inner.dispatch.publish(&change);
        inner.history.push_back(change);
        trim_history(inner, now);
    }

    /// Subscribes to the changes `interest` admits after `from_rv`: the retained ones already
    /// past it, and a receiver for everything later. Fails when `from_rv` is older than the
    /// retained history.
    pub fn watch_from(
        &self,
        interest: Interest,
        from_rv: u64,
    ) -> Result<(Vec<Arc<Change>>, ChangeReceiver), Expired> {
        let mut inner = self.inner.lock();
        if from_rv < inner.oldest_resumable {
            return Err(Expired { requested: from_rv, oldest: inner.oldest_resumable });
        }
        let start = inner.history.partition_point(|c| c.rv <= from_rv);
        let backlog = inner.history.range(start..).filter(|c| interest.admits(&c.object)).cloned().collect();
        Ok((backlog, inner.dispatch.subscribe(interest)))
    }

    /// A consistent snapshot of `resource` (in `namespace`, if given) and a receiver for every
    /// change `interest` admits after it.
    pub fn snapshot_and_watch(
        &self,
        resource: ResourceId,
        namespace: Option<&str>,
        interest: Interest,
    ) -> (Vec<Arc<StoredObject>>, u64, ChangeReceiver) {
        let mut inner = self.inner.lock();
        let receiver = inner.dispatch.subscribe(interest);
        (Self::list_locked(&inner, resource, namespace), inner.rv, receiver)
    }

    /// Drops all history: watches resuming from any earlier version get 410 Expired.
    pub fn compact(&self) -> u64 {
        let mut inner = self.inner.lock();
        inner.history.clear();
        inner.oldest_resumable = inner.rv;
        inner.rv
    }

    pub fn set_history_config(&self, config: HistoryConfig) {
        let mut inner = self.inner.lock();
        inner.history_config = config;
        trim_history(&mut inner, Instant::now());
    }

    /// Number of stored objects, over all resources.
    pub fn object_count(&self) -> usize {
        self.inner.lock().objects.iter().map(|m| m.len()).sum()
    }

    pub fn history_len(&self) -> usize {
        self.inner.lock().history.len()
    }
}

/// The stored version a write replaces, if it meets the write's expectation.
fn current_for_write(
    inner: &Inner,
    resource: ResourceId,
    key: &ObjectKey,
    expect: Expect,
) -> Result<Arc<StoredObject>, StoreError> {
    let current =
        inner.objects.get(resource as usize).and_then(|m| m.get(key)).cloned().ok_or(StoreError::NotFound)?;
    match expect {
        Expect::Version(v) if v != current.rv => Err(StoreError::Conflict { current: current.rv }),
        _ => Ok(current),
    }
}

fn trim_history(inner: &mut Inner, now: Instant) {
    let window = inner.history_config.window;
    let max = inner.history_config.max_events;
    while let Some(front) = inner.history.front() {
        let too_many = inner.history.len() > max;
        let too_old = now.duration_since(front.at) > window && inner.history.len() > 1;
        if !(too_many || too_old) {
            break;
        }
        // A watch from `front.rv` no longer sees this change's successor-free history.
        inner.oldest_resumable = front.rv;
        inner.history.pop_front();
    }
}

/// The stored form of `p` at version `rv` (also used for dry runs, which store nothing).
pub fn materialize(resource: ResourceId, p: Prepared, rv: u64) -> StoredObject {
    let bytes = Prepared::render(p.prefix, &p.suffix, rv);
    let namespace_hash = crate::selector::fnv1a64(p.namespace.as_bytes());
    let uid_hash = crate::selector::fnv1a64(p.uid.as_bytes());
    StoredObject {
        rv,
        resource,
        namespace: p.namespace,
        name: p.name,
        uid: p.uid,
        labels: p.labels,
        fields: p.fields,
        owner_uids: p.owner_uids,
        namespace_hash,
        uid_hash,
        bytes,
    }
}

/// The same object at another resourceVersion.
fn restamp(current: &StoredObject, rv: u64) -> StoredObject {
    let old = format!("\"resourceVersion\":\"{}\"", current.rv);
    let bytes = match memchr::memmem::find(&current.bytes, old.as_bytes()) {
        Some(at) => {
            let new = format!("\"resourceVersion\":\"{rv}\"");
            let mut out = Vec::with_capacity(current.bytes.len() + 4);
            out.extend_from_slice(&current.bytes[..at]);
            out.extend_from_slice(new.as_bytes());
            out.extend_from_slice(&current.bytes[at + old.len()..]);
            Bytes::from(out)
        }
        None => current.bytes.clone(),
    };
    StoredObject {
        rv,
        resource: current.resource,
        namespace: current.namespace.clone(),
        name: current.name.clone(),
        uid: current.uid.clone(),
        labels: current.labels.clone(),
        fields: current.fields.clone(),
        owner_uids: current.owner_uids.clone(),
        namespace_hash: current.namespace_hash,
        uid_hash: current.uid_hash,
        bytes,
    }
}

fn index_add(inner: &mut Inner, o: &StoredObject) {
    let loc: Location = (o.resource, o.namespace.clone(), o.name.clone());
    inner.by_uid.insert(o.uid.clone(), loc.clone());
    for owner in o.owner_uids.iter() {
        inner.dependents.entry(owner.clone()).or_default().insert(loc.clone());
    }
}

fn index_remove(inner: &mut Inner, o: &StoredObject) {
    inner.by_uid.remove(&o.uid);
    let loc: Location = (o.resource, o.namespace.clone(), o.name.clone());
    for owner in o.owner_uids.iter() {
        if let Some(set) = inner.dependents.get_mut(owner) {
            set.remove(&loc);
            if set.is_empty() {
                inner.dependents.remove(owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prepared(ns: &str, name: &str, extra: Value) -> Prepared {
        let mut v = json!({"metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"), "resourceVersion": RV_PLACEHOLDER}, "data": extra});
        v["metadata"]["labels"] = json!({"app": "x"});
        Prepared::new(
            ns,
            name,
            &format!("uid-{name}"),
            v["metadata"]["labels"].as_object().cloned(),
            vec![],
            vec![],
            serde_json::to_vec(&v).unwrap(),
        )
        .unwrap()
    }

    fn store() -> (Store, ResourceId) {
        let s = Store::starting_at(100, HistoryConfig::default());
        let id = s.resource_id(&ResourceKey { group: String::new(), plural: "configmaps".into() });
        (s, id)
    }

    #[test]
    fn versions_are_global_and_spliced_into_the_json() {
        let (s, id) = store();
        let a = s.create(id, prepared("ns", "a", json!(1))).unwrap();
        let b = s.create(id, prepared("ns", "b", json!(1))).unwrap();
        assert_eq!((a.rv, b.rv), (101, 102));
        assert_eq!(b.value()["metadata"]["resourceVersion"], "102");
        assert_eq!(s.create(id, prepared("ns", "a", json!(2))).unwrap_err(), StoreError::AlreadyExists);
    }

    #[test]
    fn a_write_of_identical_bytes_makes_no_version_and_no_event() {
        let (s, id) = store();
        let a = s.create(id, prepared("ns", "a", json!(1))).unwrap();
        let (_, mut rx) = s.watch_from(Interest::everything(), a.rv).unwrap();
        let same = s.update(id, prepared("ns", "a", json!(1)), Expect::Version(a.rv)).unwrap();
        assert_eq!(same.rv, a.rv);
        assert!(rx.try_recv().is_err());
        let changed = s.update(id, prepared("ns", "a", json!(2)), Expect::Version(a.rv)).unwrap();
        assert_eq!(changed.rv, a.rv + 1);
        assert_eq!(rx.try_recv().unwrap().kind, ChangeKind::Modified);
    }

    /// An update keeps the object's uid entry, and moves its owner entries only when the owners
    /// change.
    #[test]
    fn updates_keep_the_uid_and_owner_indexes() {
        let (s, id) = store();
        let owned = |data: Value, owners: &[&str]| {
            let mut p = prepared("ns", "a", data);
            p.owner_uids = owners.iter().map(|o| Box::from(*o)).collect();
            p
        };
        s.create(id, owned(json!(1), &["o1"])).unwrap();
        s.update(id, owned(json!(2), &["o1"]), Expect::Any).unwrap();
        assert_eq!(s.get_by_uid("uid-a").map(|o| o.rv), s.get(id, "ns", "a").map(|o| o.rv));
        assert_eq!(s.dependents("o1").len(), 1);
        s.update(id, owned(json!(3), &["o2", "o3"]), Expect::Any).unwrap();
        assert!(s.dependents("o1").is_empty());
        assert_eq!((s.dependents("o2").len(), s.dependents("o3").len()), (1, 1));
        assert_eq!(s.get_by_uid("uid-a").map(|o| o.value()["data"].clone()), Some(json!(3)));
        s.update(id, owned(json!(4), &[]), Expect::Any).unwrap();
        assert!(s.dependents("o2").is_empty() && s.dependents("o3").is_empty());
        s.remove(id, "ns", "a", Expect::Any).unwrap();
        assert!(s.get_by_uid("uid-a").is_none());
    }

    #[test]
    fn stale_writes_conflict() {
        let (s, id) = store();
        let a = s.create(id, prepared("ns", "a", json!(1))).unwrap();
        s.update(id, prepared("ns", "a", json!(2)), Expect::Any).unwrap();
        let err = s.update(id, prepared("ns", "a", json!(3)), Expect::Version(a.rv)).unwrap_err();
        assert_eq!(err, StoreError::Conflict { current: a.rv + 1 });
    }

    #[test]
    fn deletion_events_carry_the_last_state_at_a_new_version() {
        let (s, id) = store();
        let a = s.create(id, prepared("ns", "a", json!(1))).unwrap();
        let gone = s.remove(id, "ns", "a", Expect::Any).unwrap();
        assert_eq!(gone.rv, a.rv + 1);
        assert_eq!(gone.value()["metadata"]["resourceVersion"], (a.rv + 1).to_string());
        assert!(s.get(id, "ns", "a").is_none());
        assert!(s.get_by_uid("uid-a").is_none());
    }

    #[test]
    fn watch_resumes_from_history_and_expires_after_compaction() {
        let (s, id) = store();
        let a = s.create(id, prepared("ns", "a", json!(1))).unwrap();
        s.create(id, prepared("ns", "b", json!(1))).unwrap();
        let (backlog, _) = s.watch_from(Interest::everything(), a.rv).unwrap();
        assert_eq!(backlog.len(), 1);
        assert_eq!(&*backlog[0].object.name, "b");
        let now = s.compact();
        assert!(s.watch_from(Interest::everything(), a.rv).is_err());
        assert!(s.watch_from(Interest::everything(), now).is_ok());
    }

    #[test]
    fn history_is_bounded_by_count() {
        let (s, id) = store();
        s.set_history_config(HistoryConfig {
            window: Duration::from_secs(0),
            max_events: 2,
            ..HistoryConfig::default()
        });
        for i in 0..5 {
            s.create(id, prepared("ns", &format!("o{i}"), json!(1))).unwrap();
        }
        assert_eq!(s.history_len(), 1);
        assert!(s.watch_from(Interest::everything(), 101).is_err());
    }

    #[test]
    fn namespace_listing_is_ordered_and_scoped() {
        let (s, id) = store();
        for (ns, n) in [("b", "2"), ("a", "9"), ("b", "1"), ("c", "0")] {
            s.create(id, prepared(ns, n, json!(1))).unwrap();
        }
        let (in_b, _) = s.list(id, Some("b"));
        assert_eq!(in_b.iter().map(|o| &*o.name).collect::<Vec<_>>(), ["1", "2"]);
        let (all, _) = s.list(id, None);
        assert_eq!(
            all.iter().map(|o| format!("{}/{}", o.namespace, o.name)).collect::<Vec<_>>(),
            ["a/9", "b/1", "b/2", "c/0"]
        );
    }
}
