//! Restartable watches over a set of shards. Each lists then watches one kind for the shards it
//! serves — with KEP-5866's `shardSelector` when the API server applies it, otherwise over every
//! namespace, split on the worker by the same hash — feeds that kind's shared
//! [`Store`](crate::informer::Store), and records the highest resourceVersion it has seen (list,
//! events and bookmarks), so ACTIVATE can wait until the store reflects the hand-over barrier.
//! Asked to, it lists again (a consistent LIST of its shards); what the store holds of its shards
//! and the list lacks was deleted meanwhile.
//!
//! Lists and events are read in protobuf or JSON ([`list_watch`]), decoded only as far as the
//! stores keep them: in JSON through [`Lean`](crate::client::lean_decode::Lean), which steps over
//! `managedFields` and the rest the stores' trim drops rather than building and freeing them.
//! The echo of a controller's own write (a JSON event of the very version its store took from
//! the write's answer) is not decoded at all: its identity is read first
//! ([`lean_identity`](crate::client::lean_identity)), and the store calls the handlers with what
//! it holds ([`Store::observe_echo`](crate::informer::Store::observe_echo)).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::core::Request;
use tokio::sync::Notify;

use super::list_watch::{self, ContentType, Seen};
use super::shard::ShardTable;
use crate::client::lean_identity::ObjectIdentity;
use crate::informer::{Cached, ObjectKey, Store};
use crate::retry::RetryBackoff;

/// How watches are narrowed to a worker's shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardFiltering {
    /// The API server applies `shardSelector` (it echoed `metadata.shardInfo.selector`).
    Server,
    /// It does not: watch every namespace and keep only this worker's shards.
    Client,
}

/// Asks the API server once, with a raw LIST (`limit=1`), whether it applies `shardSelector`.
pub async fn probe(client: &kube::Client, table: &ShardTable) -> ShardFiltering {
    let all: BTreeSet<u32> = (0..table.space().count()).collect();
    let Some(selector) = table.space().selector(&all) else { return ShardFiltering::Client };
    let uri = format!("/api/v1/namespaces?limit=1&shardSelector={}", percent_encode(&selector));
    let Ok(request) = http::Request::get(uri).body(Vec::new()) else { return ShardFiltering::Client };
    match client.request::<serde_json::Value>(request).await {
        Ok(list) if list.pointer("/metadata/shardInfo/selector").and_then(|s| s.as_str()).is_some() => {
            ShardFiltering::Server
        }
        Ok(_) => ShardFiltering::Client,
        Err(e) => {
            tracing::warn!(error = %e, "probing shardSelector failed; filtering shards on the worker");
            ShardFiltering::Client
        }
    }
}

/// RFC 3986 percent-encoding of a query value.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// How long a listed watch behind the hand-over barrier may take to pass it through its events
/// before it lists again; a bound on the wait, not a guess at it.
const RELIST_AFTER: Duration = Duration::from_millis(50);

/// A watch behind the barrier holding at most this many objects lists again at once: that costs
/// less than waiting for an event of a quiet kind (a shard's Jobs and CronJobs change rarely once
/// their owner stopped), which may never come before a bookmark. A larger one (a shard's pods)
/// is usually behind only by the old owner's last writes, which its own events bring within
/// moments, so it waits [`RELIST_AFTER`] first.
const RELIST_AT_ONCE_UP_TO: usize = 100;

/// A running watch; dropping it stops the watch.
pub struct WatchHandle {
    kind: String,
    relist: Arc<Notify>,
    seen: tokio::sync::watch::Receiver<Progress>,
    task: tokio::task::JoinHandle<()>,
}

/// How far a watch has come.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Completed lists since the watch started.
    pub lists: u64,
    /// The highest resourceVersion seen (0 before the first list).
    pub seen_rv: u64,
    /// Objects of the watch's shards in the store: about what a relist would fetch again.
    pub objects: usize,
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WatchHandle {
    /// Waits until this watch's cache reflects `barrier`: its list is complete and it has seen
    /// `barrier` or later. If it has not got there yet, it lists again (a consistent LIST), which
    /// brings it past any write committed before now, rather than waiting for a bookmark.
    pub fn reflect_owned(&self, barrier: u64) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut seen = self.seen.clone();
        let relist = self.relist.clone();
        async move {
            // The list count after which a relist was last asked for.
            let mut asked_after = None;
            loop {
                let p = *seen.borrow_and_update();
                if p.lists > 0 && p.seen_rv >= barrier {
                    return;
                }
                // A listed watch usually passes the barrier by itself within moments (the old
                // owner's writes are in its shard); one that stays behind lists again.
                let patience = match (p.lists > 0 && asked_after != Some(p.lists), p.objects) {
                    (false, _) => None,
                    (true, objects) if objects <= RELIST_AT_ONCE_UP_TO => Some(Duration::ZERO),
                    (true, _) => Some(RELIST_AFTER),
                };
                match patience {
                    Some(Duration::ZERO) => {
                        relist.notify_one();
                        asked_after = Some(p.lists);
                    }
                    Some(wait) => match tokio::time::timeout(wait, seen.changed()).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => return,
                        Err(_) => {
                            relist.notify_one();
                            asked_after = Some(p.lists);
                        }
                    },
                    None => {
                        if seen.changed().await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }

    pub fn progress(&self) -> Progress {
        *self.seen.borrow()
    }

    /// The kind watched (`Job`, `Pod`, `CronJob`).
    pub fn kind(&self) -> &str {
        &self.kind
    }
}

/// What one watch serves.
#[derive(Clone)]
pub struct WatchScope {
    pub table: ShardTable,
    pub shards: BTreeSet<u32>,
    pub filtering: ShardFiltering,
    /// Which watch feeds a shard's part of the stores ([`ShardTable::feeder`]); events for shards
    /// another watch feeds are ignored, so two watches never fight over one shard.
    pub id: u64,
    /// What the lists and watches ask the API server to answer in.
    pub content_type: ContentType,
}

impl WatchScope {
    fn serves(&self, namespace: &str) -> bool {
        let shard = self.table.shard_of(namespace);
        self.shards.contains(&shard) && self.table.feeder(shard) == Some(self.id)
    }
}

/// Starts a watch of `K` over `scope`, feeding `store`.
pub fn start<K: Cached>(client: kube::Client, scope: WatchScope, store: Arc<Store<K>>) -> WatchHandle {
    let relist = Arc::new(Notify::new());
    let (progress, seen) = tokio::sync::watch::channel(Progress::default());
    let task = tokio::spawn(run(client, scope, store, relist.clone(), progress));
    WatchHandle { kind: K::kind(&()).to_string(), relist, seen, task }
}

fn rv_of(v: Option<&str>) -> u64 {
    v.and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn with_selector(mut request: http::Request<Vec<u8>>, scope: &WatchScope) -> http::Request<Vec<u8>> {
    if scope.filtering != ShardFiltering::Server {
        return request;
    }
    let Some(selector) = scope.table.space().selector(&scope.shards) else { return request };
    let uri = request.uri().to_string();
    let sep = if uri.contains('?') { '&' } else { '?' };
    if let Ok(uri) = format!("{uri}{sep}shardSelector={}", percent_encode(&selector)).parse() {
        *request.uri_mut() = uri;
    }
    request
}

/// The loop: list, watch from the list's version, and on 410, a failed request or a relist
/// request, list again; objects missing from a list are reported deleted.
async fn run<K: Cached>(
    client: kube::Client,
    scope: WatchScope,
    store: Arc<Store<K>>,
    relist: Arc<Notify>,
    progress: tokio::sync::watch::Sender<Progress>,
) {
    let kind = K::kind(&()).to_string();
    let request = Request::new(K::url_path(&(), None));
    let serves = |namespace: &str| scope.serves(namespace);
    // The echoes of the controllers' own writes are dealt with from the store, undecoded.
    let observe_echo = |id: &ObjectIdentity| store.observe_echo(id, serves);
    let echo: Option<&(dyn Fn(&ObjectIdentity) -> bool + Sync)> =
        store.takes_writes().then_some(&observe_echo);
    // Objects of this watch's shards in the store, as far as its own events tell.
    let mut objects: usize;
    let advance = |rv: u64, listed: bool, objects: usize| {
        progress.send_if_modified(|p| {
            let before = *p;
            p.seen_rv = p.seen_rv.max(rv);
            p.lists += u64::from(listed);
            p.objects = objects;
            *p != before
        });
        scope.table.record_seen(scope.id, rv);
    };
    // Short caps: a shard's activation waits for this list, and a worker taking over a dead
    // worker's shards must not sit out an API server's recovery by seconds.
    let mut list_backoff = RetryBackoff::new(Duration::from_millis(250), Duration::from_secs(2));
    let mut watch_backoff = RetryBackoff::new(Duration::from_millis(250), Duration::from_secs(2));
    loop {
        // LIST, page by page, from one snapshot.
        let mut seen: HashSet<ObjectKey> = HashSet::new();
        let mut continue_token: Option<String> = None;
        let list_rv = loop {
            let mut lp = ListParams::default().limit(500);
            if let Some(c) = &continue_token {
                lp = lp.continue_token(c);
            }
            let page = match request.list(&lp) {
                Ok(r) => list_watch::list::<K>(&client, with_selector(r, &scope), scope.content_type).await,
                Err(e) => {
                    tracing::error!(kind = %kind, error = %e, "building the list request");
                    return;
                }
            };
            let page = match page {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(kind = %kind, error = %e, "list failed; retrying");
                    tokio::time::sleep(list_backoff.next_delay()).await;
                    continue_token = None;
                    seen.clear();
                    continue;
                }
            };
            list_backoff.reset();
            let rv = rv_of(page.resource_version.as_deref());
            for obj in page.items {
                seen.insert(ObjectKey::of(obj.meta()));
                store.observe(obj, serves);
            }
            continue_token = page.continue_token.filter(|c| !c.is_empty());
            if continue_token.is_none() {
                break rv;
            }
        };
        // Objects deleted while this watch was not looking never sent a DELETED event.
        objects = store.relisted(&scope.shards, &seen, list_rv, serves);
        drop(seen);
        advance(list_rv, true, objects);
        store.listed(scope.shards.iter().copied().filter(|s| scope.table.feeder(*s) == Some(scope.id)));
        // WATCH from the list's version until it expires or a relist is asked for.
        let mut rv = list_rv;
        'watch: loop {
            let wp = WatchParams::default().timeout(290);
            let events = match request.watch(&wp, &rv.to_string()) {
                Ok(r) => list_watch::watch::<K>(&client, with_selector(r, &scope), scope.content_type).await,
                Err(e) => {
                    tracing::error!(kind = %kind, error = %e, "building the watch request");
                    return;
                }
            };
            let mut events = match events {
                Ok(events) => events,
                Err(e) => {
                    tracing::warn!(kind = %kind, error = %e, "watch failed; listing again");
                    tokio::time::sleep(watch_backoff.next_delay()).await;
                    break 'watch;
                }
            };
            watch_backoff.reset();
            loop {
                let event = tokio::select! {
                    e = events.next_unless_echo(echo) => e,
                    _ = relist.notified() => break 'watch,
                };
                match event {
                    None => continue 'watch,
                    Some(Ok(Seen::Echo(echo_rv))) => {
                        rv = rv.max(echo_rv);
                        advance(rv, false, objects);
                    }
                    Some(Ok(Seen::Event(WatchEvent::Added(obj) | WatchEvent::Modified(obj)))) => {
                        rv = rv.max(rv_of(obj.meta().resource_version.as_deref()));
                        if store.observe(obj, serves) == Some(true) {
                            objects += 1;
                        }
                        advance(rv, false, objects);
                    }
                    Some(Ok(Seen::Event(WatchEvent::Deleted(obj)))) => {
                        rv = rv.max(rv_of(obj.meta().resource_version.as_deref()));
                        if store.observe_deleted(&obj, serves) {
                            objects = objects.saturating_sub(1);
                        }
                        advance(rv, false, objects);
                    }
                    Some(Ok(Seen::Event(WatchEvent::Bookmark(b)))) => {
                        rv = rv.max(rv_of(Some(&b.metadata.resource_version)));
                        advance(rv, false, objects);
                    }
                    Some(Ok(Seen::Event(WatchEvent::Error(status)))) => {
                        if status.code != 410 {
                            tracing::warn!(kind = %kind, message = %status.message, "watch error; listing again");
                        }
                        break 'watch;
                    }
                    Some(Err(e)) => {
                        tracing::warn!(kind = %kind, error = %e, "watch stream failed; listing again");
                        break 'watch;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_percent_encoded_for_the_query() {
        assert_eq!(
            percent_encode("shardRange(object.metadata.namespace, '0x00', '0x10') || x"),
            "shardRange%28object.metadata.namespace%2C%20%270x00%27%2C%20%270x10%27%29%20%7C%7C%20x"
        );
    }
}
