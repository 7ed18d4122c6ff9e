//! LIST: selectors, pagination over snapshots that expire, and resourceVersion semantics.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::query::Query;
use crate::apiserver::{ApiError, ApiServer, Target, View, events};
use crate::selector::{FieldSelector, LabelSelector, ShardSelector};
use crate::store::StoredObject;

/// Which objects a list or watch returns.
#[derive(Debug, Default)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: Option<LabelSelector>,
    /// Field requirements, in the stored form's field names.
    pub fields: Option<FieldSelector>,
    pub field_names: Vec<(String, String)>,
    pub shard: Option<ShardSelector>,
}

impl Filter {
    pub fn from_query(target: &Target, namespace: Option<&str>, q: &Query) -> Result<Self, ApiError> {
        let labels = match q.non_empty("labelSelector") {
            Some(s) => Some(LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?),
            None => None,
        };
        let fields = match q.non_empty("fieldSelector") {
            Some(s) => {
                let sel = FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?;
                crate::selector::check_fields(&target.rt.group, &target.rt.plural, &sel)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?;
                Some(sel)
            }
            None => None,
        };
        let field_names = fields
            .as_ref()
            .map(|f| {
                f.fields()
                    .map(|name| {
                        let stored = if target.view == View::EventsV1 {
                            events::field_to_core(name)
                        } else {
                            name.to_string()
                        };
                        (name.to_string(), stored)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let shard = match q.non_empty("shardSelector") {
            Some(s) => Some(ShardSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?),
            None => None,
        };
        Ok(Self { namespace: namespace.map(str::to_string), labels, fields, field_names, shard })
    }

    pub fn matches(&self, o: &StoredObject) -> bool {
        if let Some(ns) = &self.namespace
            && *o.namespace != **ns
        {
            return false;
        }
        if let Some(l) = &self.labels
            && !l.matches(o.labels.as_ref())
        {
            return false;
        }
        if let Some(s) = &self.shard
            && !s.matches_hashes(o.namespace_hash, o.uid_hash)
        {
            return false;
        }
        if let Some(f) = &self.fields
            && !f.matches(|name| {
                let stored =
                    self.field_names.iter().find(|(n, _)| n == name).map(|(_, s)| s.as_str()).unwrap_or(name);
                o.field(stored).map(str::to_string)
            })
        {
            return false;
        }
        true
    }
}

/// Paginated list snapshots, so every page of one list comes from the same resourceVersion.
pub struct Snapshots {
    next_id: AtomicU64,
    ttl: Mutex<Duration>,
    entries: Mutex<HashMap<u64, Snapshot>>,
}

struct Snapshot {
    items: Arc<Vec<Arc<StoredObject>>>,
    rv: u64,
    created: Instant,
}

impl Default for Snapshots {
    fn default() -> Self {
        Self {
            next_id: AtomicU64::new(1),
            ttl: Mutex::new(Duration::from_secs(300)),
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl Snapshots {
    pub fn set_ttl(&self, ttl: Duration) {
        *self.ttl.lock() = ttl;
    }

    fn put(&self, items: Arc<Vec<Arc<StoredObject>>>, rv: u64) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut entries = self.entries.lock();
        let ttl = *self.ttl.lock();
        entries.retain(|_, s| s.created.elapsed() < ttl);
        entries.insert(id, Snapshot { items, rv, created: Instant::now() });
        id
    }

    fn get(&self, id: u64) -> Option<(Arc<Vec<Arc<StoredObject>>>, u64)> {
        let ttl = *self.ttl.lock();
        let entries = self.entries.lock();
        let s = entries.get(&id)?;
        (s.created.elapsed() < ttl).then(|| (s.items.clone(), s.rv))
    }
}

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

fn encode_continue(id: u64, start: usize, rv: u64) -> String {
    let raw = json!({ "v": "meta.k8s.io/v1", "rv": rv, "id": id, "start": start }).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> Result<(u64, usize, u64), ApiError> {
    let bad = || ApiError::bad_request("continue key is not valid: illegal base64 data at input byte 0");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let field = |k: &str| v.get(k).and_then(Value::as_u64).ok_or_else(bad);
    Ok((field("id")?, field("start")? as usize, field("rv")?))
}

/// The page a LIST returns, and its list metadata.
pub struct Page {
    pub items: Vec<Arc<StoredObject>>,
    pub rv: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

pub fn list(
    api: &ApiServer,
    snapshots: &Snapshots,
    target: &Target,
    filter: &Filter,
    q: &Query,
) -> Result<Page, ApiError> {
    let limit = q.int("limit").map_err(ApiError::bad_request)?.filter(|l| *l > 0).map(|l| l as usize);
    let (items, rv, start) = match q.non_empty("continue") {
        Some(token) => {
            if q.non_empty("resourceVersion").is_some() {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            let (id, start, _) = decode_continue(token)?;
            let (items, rv) = snapshots.get(id).ok_or_else(|| ApiError::expired(CONTINUE_EXPIRED))?;
            (items, rv, start)
        }
        None => {
            check_resource_version(api, q)?;
            let (all, rv) = api.store().list(target.rid, filter.namespace.as_deref());
            let items: Vec<Arc<StoredObject>> = all.into_iter().filter(|o| filter.matches(o)).collect();
            (Arc::new(items), rv, 0)
        }
    };
    let end = limit.map_or(items.len(), |l| (start + l).min(items.len()));
    let page = items.get(start..end).map(<[_]>::to_vec).unwrap_or_default();
    let (continue_token, remaining) = if end < items.len() {
        let id = if start == 0 {
            snapshots.put(items.clone(), rv)
        } else {
            decode_continue(q.get("continue").unwrap_or(""))?.0
        };
        (Some(encode_continue(id, end, rv)), Some(items.len() - end))
    } else {
        (None, None)
    };
    Ok(Page { items: page, rv, continue_token, remaining })
}

/// Rejects a resourceVersion the sim cannot serve: one from the future.
pub fn check_resource_version(api: &ApiServer, q: &Query) -> Result<(), ApiError> {
    let Some(rv) = q.non_empty("resourceVersion") else { return Ok(()) };
    if rv == "0" {
        return Ok(());
    }
    let requested: u64 =
        rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?;
    let current = api.store().current_rv();
    if requested > current {
        return Err(ApiError::too_large_resource_version(requested, current));
    }
    if q.get("resourceVersionMatch") == Some("Exact") && requested != current {
        return Err(ApiError::expired(format!("too old resource version: {requested} ({current})")));
    }
    Ok(())
}

/// `{"kind":"PodList","apiVersion":"v1","metadata":{…},"items":[…]}` from stored bytes, with no
/// parse of the items.
pub fn render_list(api: &ApiServer, target: &Target, page: &Page, shard_echo: Option<String>) -> Bytes {
    let mut metadata = json!({ "resourceVersion": page.rv.to_string() });
    if let Some(c) = &page.continue_token {
        metadata["continue"] = json!(c);
    }
    if let Some(r) = page.remaining {
        metadata["remainingItemCount"] = json!(r);
    }
    if let Some(s) = shard_echo {
        metadata["shardInfo"] = json!({ "selector": s });
    }
    let head =
        json!({ "kind": target.rt.list_kind(), "apiVersion": target.rt.api_version(), "metadata": metadata });
    let head = head.to_string();
    let mut out =
        Vec::with_capacity(head.len() + page.items.iter().map(|o| o.bytes.len() + 1).sum::<usize>() + 16);
    out.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    out.extend_from_slice(br#","items":["#);
    for (i, o) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&api.render(target, o));
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}
