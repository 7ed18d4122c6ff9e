//! The coordinator's only cluster-sized state: a compact projection of every pod (namespace and
//! node names interned, uid, phase, creation time, deletion, eviction), and the nodes PodGC looks
//! at. Fed by watch events; whole pods are never kept.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;
use hashbrown::HashTable;
use k8s_openapi::api::core::v1::Node;

use super::core::{NodeView, OUT_OF_SERVICE_TAINT, PodView, Uid};
use super::pod_facts::PodFacts;

/// Pod phases, one byte each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Unset,
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl Phase {
    fn parse(s: Option<&str>) -> Self {
        match s {
            Some("Pending") => Phase::Pending,
            Some("Running") => Phase::Running,
            Some("Succeeded") => Phase::Succeeded,
            Some("Failed") => Phase::Failed,
            Some("Unknown") => Phase::Unknown,
            _ => Phase::Unset,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Phase::Unset => "",
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
            Phase::Unknown => "Unknown",
        }
    }
}

const EVICTED: u8 = 1;
const HAS_FINALIZERS: u8 = 2;
/// `metadata.deletionGracePeriodSeconds == 0`: deleted with no grace (a force deletion).
const GRACE_ZERO: u8 = 4;

/// One cached pod in 48 bytes: its name is a slice of the shared arena, namespace and node are
/// interned ids (0: none, which also marks a free slot), the uid is 16 bytes when it is a
/// canonical UUID. `created` is seconds since the epoch; the termination and deletion times are
/// offsets from it in seconds (within 68 years of it), which keeps the record at 48 bytes.
#[derive(Debug, Clone, Copy)]
struct Record {
    name_at: u32,
    /// Pod names are at most 253 bytes.
    name_len: u16,
    namespace: u32,
    node: u32,
    uid: [u8; 16],
    created: i64,
    /// Termination time − creation time (0 also when unknown: then it is the creation time). It
    /// may be negative: a kubelet's clock behind the API server's, or a pod whose statuses were
    /// written for it (the loadtest's podgc-policy scenario), is taken as the pod says.
    terminated_offset: i32,
    /// Deletion timestamp − creation time, + 1; 0: not being deleted.
    deleted_after: u32,
    phase: Phase,
    flags: u8,
}

/// `at − created` in seconds, clamped to what a record holds (a deletion before the creation, from
/// a skewed clock, counts as at the creation).
fn seconds_after(created: i64, at: i64) -> u32 {
    u32::try_from(at.saturating_sub(created).max(0)).unwrap_or(u32::MAX - 1).min(u32::MAX - 1)
}

/// Strings seen many times (namespaces, nodes), stored once, by id from 1.
#[derive(Debug, Default)]
struct Interner {
    ids: HashMap<Box<str>, u32>,
    strings: Vec<Box<str>>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(id) = self.ids.get(s) {
            return *id;
        }
        self.strings.push(s.into());
        let id = u32::try_from(self.strings.len()).unwrap_or(u32::MAX);
        self.ids.insert(s.into(), id);
        id
    }

    fn lookup(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }

    fn get(&self, id: u32) -> &str {
        id.checked_sub(1).and_then(|i| self.strings.get(i as usize)).map_or("", |s| s)
    }
}

/// Pods by namespace and name: a slab of [`Record`]s, a hash index of slot numbers, and one
/// arena for the names.
#[derive(Default)]
pub struct PodCache {
    records: Vec<Record>,
    free: Vec<u32>,
    index: HashTable<u32>,
    hasher: DefaultHashBuilder,
    names: String,
    /// Arena bytes no live record uses; compacted when they outgrow the rest.
    garbage: usize,
    strings: Interner,
    /// Uids that are not canonical UUIDs, by slot.
    text_uids: HashMap<u32, Box<str>>,
}

impl std::fmt::Debug for PodCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodCache").field("pods", &self.len()).finish()
    }
}

impl PodCache {
    fn name_of(&self, r: &Record) -> &str {
        self.names.get(r.name_at as usize..r.name_at as usize + r.name_len as usize).unwrap_or("")
    }

    fn hash(&self, namespace: u32, name: &str) -> u64 {
        self.hasher.hash_one((namespace, name))
    }

    fn find(&self, namespace: u32, name: &str) -> Option<u32> {
        let hash = self.hash(namespace, name);
        self.index
            .find(hash, |slot| {
                let r = &self.records[*slot as usize];
                r.namespace == namespace && self.name_of(r) == name
            })
            .copied()
    }

    pub fn apply(&mut self, pod: &PodFacts) {
        let (Some(namespace), Some(name)) = (pod.metadata.namespace.as_deref(), pod.metadata.name.as_deref())
        else {
            return;
        };
        let namespace = self.strings.id(namespace);
        let node = match pod.node_name.as_deref().filter(|n| !n.is_empty()) {
            Some(n) => self.strings.id(n),
            None => 0,
        };
        let uid_text = pod.metadata.uid.as_deref().unwrap_or("");
        let uuid = uuid::Uuid::try_parse(uid_text).ok().filter(|u| u.as_hyphenated().to_string() == uid_text);
        let mut flags = 0;
        if pod.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
            flags |= HAS_FINALIZERS;
        }
        if pod.reason.as_deref() == Some("Evicted") {
            flags |= EVICTED;
        }
        if pod.metadata.deletion_grace_period_seconds == Some(0) {
            flags |= GRACE_ZERO;
        }
        let created = pod.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second());
        let fields = Record {
            name_at: 0,
            name_len: 0,
            namespace,
            node,
            uid: uuid.map_or([0; 16], |u| *u.as_bytes()),
            created,
            terminated_offset: pod.terminated_at.map_or(0, |at| {
                i32::try_from(at.saturating_sub(created)).unwrap_or(if at < created {
                    i32::MIN
                } else {
                    i32::MAX
                })
            }),
            deleted_after: pod
                .metadata
                .deletion_timestamp
                .as_ref()
                .map_or(0, |t| seconds_after(created, t.0.as_second()) + 1),
            phase: Phase::parse(pod.phase.as_deref()),
            flags,
        };
        let slot = match self.find(namespace, name) {
            Some(slot) => {
                let r = &mut self.records[slot as usize];
                *r = Record { name_at: r.name_at, name_len: r.name_len, ..fields };
                slot
            }
            None => {
                let record = Record {
                    name_at: self.names.len() as u32,
                    name_len: u16::try_from(name.len()).unwrap_or(u16::MAX),
                    ..fields
                };
                self.names.push_str(name);
                let slot = match self.free.pop() {
                    Some(slot) => {
                        self.records[slot as usize] = record;
                        slot
                    }
                    None => {
                        self.records.push(record);
                        (self.records.len() - 1) as u32
                    }
                };
                let hash = self.hash(namespace, name);
                let (records, names, hasher) = (&self.records, &self.names, &self.hasher);
                self.index.insert_unique(hash, slot, |s| {
                    let r = &records[*s as usize];
                    let n =
                        names.get(r.name_at as usize..r.name_at as usize + r.name_len as usize).unwrap_or("");
                    hasher.hash_one((r.namespace, n))
                });
                slot
            }
        };
        if uuid.is_some() {
            self.text_uids.remove(&slot);
        } else {
            self.text_uids.insert(slot, uid_text.into());
        }
    }

    pub fn delete(&mut self, pod: &PodFacts) {
        let (Some(namespace), Some(name)) = (pod.metadata.namespace.as_deref(), pod.metadata.name.as_deref())
        else {
            return;
        };
        let Some(namespace) = self.strings.lookup(namespace) else { return };
        let hash = self.hash(namespace, name);
        let (records, names) = (&self.records, &self.names);
        let Ok(entry) = self.index.find_entry(hash, |slot| {
            let r = &records[*slot as usize];
            r.namespace == namespace
                && names.get(r.name_at as usize..r.name_at as usize + r.name_len as usize) == Some(name)
        }) else {
            return;
        };
        let (slot, _) = entry.remove();
        let r = &mut self.records[slot as usize];
        self.garbage += r.name_len as usize;
        r.namespace = 0;
        self.free.push(slot);
        self.text_uids.remove(&slot);
        if self.garbage > 1 << 20 && self.garbage > self.names.len() / 2 {
            self.compact_names();
        }
    }

    /// Rewrites the name arena with only the live names.
    fn compact_names(&mut self) {
        let mut names = String::with_capacity(self.names.len() - self.garbage);
        for r in self.records.iter_mut().filter(|r| r.namespace != 0) {
            let at = names.len() as u32;
            names.push_str(
                self.names.get(r.name_at as usize..r.name_at as usize + r.name_len as usize).unwrap_or(""),
            );
            r.name_at = at;
        }
        self.names = names;
        self.garbage = 0;
    }

    pub fn len(&self) -> usize {
        self.records.len() - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every pod, borrowed for one pass.
    pub fn views(&self) -> Vec<PodView<'_>> {
        self.records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.namespace != 0)
            .map(|(slot, r)| PodView {
                namespace: self.strings.get(r.namespace),
                name: self.name_of(r),
                uid: match self.text_uids.get(&(slot as u32)) {
                    Some(text) => Uid::Text(text),
                    None => Uid::Uuid(uuid::Uuid::from_bytes(r.uid)),
                },
                phase: r.phase.as_str(),
                node_name: if r.node == 0 { "" } else { self.strings.get(r.node) },
                deleting: r.deleted_after != 0,
                has_finalizers: r.flags & HAS_FINALIZERS != 0,
                grace_zero: r.flags & GRACE_ZERO != 0,
                created: r.created,
                terminated_at: r.created + i64::from(r.terminated_offset),
                deleted_at: r.created + i64::from(r.deleted_after.saturating_sub(1)),
                evicted_reason: r.flags & EVICTED != 0,
            })
            .collect()
    }
}

/// Nodes by name, as PodGC needs them.
#[derive(Debug, Default)]
pub struct NodeCache {
    nodes: BTreeMap<String, NodeView>,
}

impl NodeCache {
    pub fn apply(&mut self, node: &Node) {
        let Some(name) = node.metadata.name.clone() else { return };
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True");
        let out_of_service = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == OUT_OF_SERVICE_TAINT));
        self.nodes.insert(name.clone(), NodeView { name, ready, out_of_service });
    }

    pub fn delete(&mut self, node: &Node) {
        if let Some(name) = node.metadata.name.as_deref() {
            self.nodes.remove(name);
        }
    }

    pub fn nodes(&self) -> &BTreeMap<String, NodeView> {
        &self.nodes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> PodFacts {
        serde_json::from_value(json).expect("pod")
    }

    #[test]
    fn the_projection_keeps_what_podgc_reads_and_interns_names() {
        let mut cache = PodCache::default();
        cache.apply(&pod(serde_json::json!({
            "metadata": {"namespace": "team-a", "name": "p1", "uid": "u1", "creationTimestamp": "2026-11-24T10:00:00Z",
                         "deletionTimestamp": "2026-11-24T11:00:00Z"},
            "spec": {"nodeName": "node-1", "containers": []},
            "status": {"phase": "Failed", "reason": "Evicted"}
        })));
        cache.apply(&pod(serde_json::json!({
            "metadata": {"namespace": "team-a", "name": "p2", "uid": "u2"},
            "spec": {"nodeName": "node-1", "containers": []}
        })));
        let mut views = cache.views();
        views.sort_by_key(|v| v.name);
        assert_eq!(views[0].phase, "Failed");
        assert!(views[0].deleting && views[0].evicted_reason);
        assert_eq!(views[0].created, 1_795_514_400);
        assert_eq!(views[1].phase, "", "an unset phase stays empty");
        assert_eq!(cache.strings.strings.len(), 2, "team-a and node-1, once each");
        cache.delete(&pod(serde_json::json!({"metadata": {"namespace": "team-a", "name": "p1"}})));
        assert_eq!(cache.len(), 1);
    }

    fn simple(namespace: &str, name: &str, uid: &str, phase: &str) -> PodFacts {
        pod(serde_json::json!({
            "metadata": {"namespace": namespace, "name": name, "uid": uid},
            "spec": {"containers": []},
            "status": {"phase": phase}
        }))
    }

    #[test]
    fn a_record_stays_48_bytes_and_keeps_deletion_and_finalizers() {
        assert_eq!(std::mem::size_of::<Record>(), 48);
        let mut cache = PodCache::default();
        cache.apply(&pod(serde_json::json!({
            "metadata": {"namespace": "a", "name": "held", "finalizers": ["example.com/hold"],
                         "deletionTimestamp": "2026-11-24T11:00:00Z"},
            "spec": {"containers": []}
        })));
        let view = &cache.views()[0];
        assert!(view.deleting && view.has_finalizers);
        assert!(!view.grace_zero);
    }

    #[test]
    fn termination_and_deletion_times_survive_the_compact_record() {
        let mut cache = PodCache::default();
        cache.apply(&pod(serde_json::json!({
            "metadata": {"namespace": "a", "name": "held", "finalizers": ["example.com/hold"],
                         "creationTimestamp": "2026-11-24T10:00:00Z",
                         "deletionTimestamp": "2026-11-24T12:00:00Z", "deletionGracePeriodSeconds": 0},
            "status": {"phase": "Succeeded", "containerStatuses": [
                {"name": "c", "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-24T11:00:00Z"}}}]}
        })));
        cache.apply(&pod(serde_json::json!({
            "metadata": {"namespace": "a", "name": "plain", "creationTimestamp": "2026-11-24T10:00:00Z"},
            "status": {"phase": "Failed"}
        })));
        let mut views = cache.views();
        views.sort_by_key(|v| v.name);
        let created = 1_795_514_400;
        assert_eq!((views[0].terminated_at, views[0].deleted_at), (created + 3600, created + 7200));
        assert!(views[0].deleting && views[0].grace_zero && views[0].has_finalizers);
        assert_eq!(views[1].terminated_at, created, "nothing says: the creation time");

        assert!(!views[1].deleting);
        cache.apply(&pod(serde_json::json!({
            "metadata": {"namespace": "a", "name": "skewed", "creationTimestamp": "2026-11-24T10:00:00Z"},
            "status": {"phase": "Failed", "containerStatuses": [
                {"name": "c", "state": {"terminated": {"exitCode": 1, "finishedAt": "2026-11-24T07:00:00Z"}}}]}
        })));
        let skewed = cache.views().into_iter().find(|v| v.name == "skewed").expect("skewed");
        assert_eq!(skewed.terminated_at, created - 3 * 3600, "a finish before the creation is kept as it is");
    }

    #[test]
    fn updates_replace_deletes_free_and_slots_are_reused() {
        let mut cache = PodCache::default();
        let uuid = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";
        cache.apply(&simple("a", "p", uuid, "Pending"));
        cache.apply(&simple("a", "p", uuid, "Running"));
        cache.apply(&simple("b", "p", "not-a-uuid", "Failed"));
        assert_eq!(cache.len(), 2, "an update is not a second pod");
        let mut views = cache.views();
        views.sort_by_key(|v| v.namespace);
        assert_eq!((views[0].phase, views[0].uid.to_string()), ("Running", uuid.to_string()));
        assert_eq!(views[1].uid, Uid::Text("not-a-uuid"));
        cache.delete(&simple("a", "p", uuid, ""));
        cache.delete(&simple("a", "p", uuid, ""));
        cache.delete(&simple("nowhere", "p", uuid, ""));
        assert_eq!(cache.len(), 1);
        cache.apply(&simple("c", "q", "3F2504E0-4F89-41D3-9A0C-0305E82C3301", ""));
        assert_eq!(cache.records.len(), 2, "the freed slot is reused");
        let upper = cache.views().into_iter().find(|v| v.name == "q").expect("q");
        assert_eq!(upper.uid.to_string(), "3F2504E0-4F89-41D3-9A0C-0305E82C3301", "a uid is never rewritten");
    }

    #[test]
    fn the_name_arena_compacts_without_losing_a_live_name() {
        let mut cache = PodCache::default();
        let long = "x".repeat(200);
        for i in 0..20_000 {
            cache.apply(&simple("ns", &format!("{long}-{i}"), "", "Running"));
        }
        for i in (0..20_000).filter(|i| i % 4 != 0) {
            cache.delete(&simple("ns", &format!("{long}-{i}"), "", ""));
        }
        let live: usize = (0..20_000).filter(|i| i % 4 == 0).map(|i| format!("{long}-{i}").len()).sum();
        assert_eq!(cache.names.len() - cache.garbage, live);
        assert!(
            cache.names.len() <= 2 * live + (1 << 20),
            "compacted: {} bytes for {live} live",
            cache.names.len()
        );
        let mut names: Vec<String> = cache.views().iter().map(|v| v.name.to_string()).collect();
        names.sort();
        let mut want: Vec<String> =
            (0..20_000).filter(|i| i % 4 == 0).map(|i| format!("{long}-{i}")).collect();
        want.sort();
        assert_eq!(names, want);
        cache.apply(&simple("ns", &format!("{long}-4"), "", "Failed"));
        assert_eq!(cache.len(), 5_000, "lookups still find compacted names");
    }

    #[test]
    fn nodes_are_ready_and_out_of_service_as_their_conditions_and_taints_say() {
        let mut nodes = NodeCache::default();
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": OUT_OF_SERVICE_TAINT, "effect": "NoExecute", "value": "shutdown"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]}
        }))
        .expect("node");
        nodes.apply(&node);
        assert_eq!(nodes.nodes()["n1"], NodeView { name: "n1".into(), ready: false, out_of_service: true });
    }
}
