//! WATCH: newline-delimited events over a chunked 200 response, with bookmarks, timeouts,
//! streaming initial lists (`sendInitialEvents`), 410 Expired inside the stream, selector
//! transitions, and Table rows for kubectl.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Shared;
use super::list::Filter;
use super::query::Query;
use crate::apiserver::{ApiError, Target, View};
use crate::kubectl::{self, IncludeObject};
use crate::store::{
    Change, ChangeKind, ChangeReceiver, Interest, RecvError, StoredObject, TryRecvError, watch_line,
    write_watch_line,
};

/// Where the stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// Synthetic ADDED events for the current state (resourceVersion "" or "0").
    Current,
    /// A streaming list: the current state as ADDED, then the initial-events-end bookmark.
    InitialEvents,
    /// Changes after this version.
    After(u64),
}

/// A validated watch request.
pub struct WatchRequest {
    target: Target,
    filter: Filter,
    start: Start,
    bookmarks: bool,
    timeout: Duration,
    table: Option<IncludeObject>,
}

impl WatchRequest {
    /// The changes that could concern this watch: its resource, namespace and shards. Its
    /// label and field selectors, which an update may enter or leave, are applied per change.
    fn interest(&self) -> Interest {
        Interest::resource(self.target.rid)
            .in_namespace(self.filter.namespace.as_deref())
            .in_shards(self.filter.shard.clone())
    }

    pub fn from_query(
        target: Target,
        filter: Filter,
        q: &Query,
        table: Option<IncludeObject>,
    ) -> Result<Self, ApiError> {
        let bookmarks = q.flag("allowWatchBookmarks");
        let rv = q.non_empty("resourceVersion");
        let start = match q.get("sendInitialEvents") {
            Some(v) if v == "true" || v == "1" => {
                let mut errors = Vec::new();
                if q.get("resourceVersionMatch") != Some("NotOlderThan") {
                    errors.push("resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
                }
                if !bookmarks {
                    errors.push("allowWatchBookmarks: Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true");
                }
                if !errors.is_empty() {
                    return Err(invalid_list_options(&errors));
                }
                Start::InitialEvents
            }
            _ => {
                if q.non_empty("resourceVersionMatch").is_some() && q.get("sendInitialEvents").is_none() {
                    return Err(invalid_list_options(&[
                        "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ]));
                }
                match rv {
                    None | Some("0") => Start::Current,
                    Some(v) => Start::After(
                        v.parse()
                            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {v}")))?,
                    ),
                }
            }
        };
        let timeout = match q.int("timeoutSeconds").map_err(ApiError::bad_request)? {
            Some(t) if t > 0 => Duration::from_secs(t as u64),
            _ => Duration::from_secs(1800 + rand::random::<u64>() % 1800),
        };
        Ok(Self { target, filter, start, bookmarks, timeout, table })
    }
}

fn invalid_list_options(errors: &[&str]) -> ApiError {
    let mut e =
        ApiError::bad_request(format!("ListOptions.meta.k8s.io \"\" is invalid: [{}]", errors.join(", ")));
    e.code = 422;
    e.reason = "Invalid";
    e
}

/// Starts the watch; returns the receiving end of its lines.
pub fn start(shared: Arc<Shared>, req: WatchRequest) -> Result<mpsc::Receiver<Bytes>, ApiError> {
    let store = shared.api.store().clone();
    let (initial, from_rv, rx) = match req.start {
        Start::Current | Start::InitialEvents => {
            let (objects, rv, rx) =
                store.snapshot_and_watch(req.target.rid, req.filter.namespace.as_deref(), req.interest());
            (Initial::Objects(objects), rv, rx)
        }
        Start::After(rv) => {
            if rv > store.current_rv() {
                return Err(ApiError::too_large_resource_version(rv, store.current_rv()));
            }
            match store.watch_from(req.interest(), rv) {
                Ok((backlog, rx)) => (Initial::Backlog(backlog), rv, rx),
                Err(expired) => {
                    // Upstream answers 200 with one ERROR event, never a 410 status (kube-rs#1042).
                    let (tx, out) = mpsc::channel(1);
                    let _ = tx.try_send(error_line(&expired.to_string()));
                    return Ok(out);
                }
            }
        }
    };
    let (tx, out) = mpsc::channel(64);
    shared.counters.watch_opened();
    tokio::spawn(async move {
        let mut w = Watcher {
            shared: shared.clone(),
            req,
            tx,
            last_rv: from_rv,
            sent: 0,
            unflushed_lines: 0,
            wrote_columns: false,
        };
        w.run(initial, rx).await;
        shared.counters.watch_closed();
    });
    Ok(out)
}

enum Initial {
    Objects(Vec<Arc<StoredObject>>),
    Backlog(Vec<Arc<Change>>),
}

struct Watcher {
    shared: Arc<Shared>,
    req: WatchRequest,
    tx: mpsc::Sender<Bytes>,
    /// The latest version this watcher has passed, matching its selectors or not: what
    /// bookmarks carry.
    last_rv: u64,
    sent: u64,
    /// Lines (events, bookmarks, errors) in the buffer since the last flush, for the counters:
    /// counting the newlines of every flushed chunk read every byte sent a second time.
    unflushed_lines: u64,
    wrote_columns: bool,
}

/// Why the stream ended.
enum End {
    ClientGone,
    Done,
}

const BATCH_BYTES: usize = 64 * 1024;

impl Watcher {
    async fn run(&mut self, initial: Initial, mut rx: ChangeReceiver) {
        let faults = self.shared.faults.watch();
        let deadline = tokio::time::Instant::now()
            + match faults.drop_after_seconds {
                Some(s) if s >= 0.0 => self.req.timeout.min(Duration::from_secs_f64(s)),
                _ => self.req.timeout,
            };
        let dropped_by_fault =
            faults.drop_after_seconds.is_some_and(|s| Duration::from_secs_f64(s.max(0.0)) < self.req.timeout);
        // One buffer for the life of the watch: `split` hands each batch over, and the next
        // write into the buffer reuses its memory once every batch handed over has been written
        // and dropped, so a busy watch does not fault in fresh pages for every batch.
        let mut buf = BytesMut::with_capacity(2 * BATCH_BYTES);
        match initial {
            Initial::Objects(objects) => {
                for o in &objects {
                    if !self.req.filter.matches(o) {
                        continue;
                    }
                    self.push_object(&mut buf, "ADDED", o);
                    if buf.len() > BATCH_BYTES && self.flush(&mut buf).await.is_err() {
                        return;
                    }
                }
                if self.req.start == Start::InitialEvents {
                    let line = self.bookmark(true);
                    self.push_line(&mut buf, &line);
                }
            }
            Initial::Backlog(changes) => {
                for c in &changes {
                    self.push_change(&mut buf, c);
                }
            }
        }
        if self.flush(&mut buf).await.is_err() {
            return;
        }
        let mut bookmark_tick = tokio::time::interval(self.shared.bookmark_interval);
        bookmark_tick.tick().await;
        let tx = self.tx.clone();
        loop {
            if self.over_event_budget(&faults) {
                return;
            }
            let step = tokio::select! {
                received = rx.recv() => self.on_receive(received, &mut rx, &mut buf, true),
                _ = bookmark_tick.tick() => {
                    if self.req.bookmarks {
                        self.push_bookmark(&mut rx, &mut buf)
                    } else {
                        Ok(())
                    }
                }
                _ = tokio::time::sleep_until(deadline) => {
                    if self.req.bookmarks && !dropped_by_fault {
                        // Ending either way: a closed store only leaves the bookmark out.
                        let _ = self.push_bookmark(&mut rx, &mut buf);
                    }
                    let _ = self.flush(&mut buf).await;
                    return;
                }
                _ = tx.closed() => Err(End::ClientGone),
            };
            match step {
                Ok(()) => {
                    if self.flush(&mut buf).await.is_err() {
                        return;
                    }
                }
                Err(End::Done) => {
                    let _ = self.flush(&mut buf).await;
                    return;
                }
                Err(End::ClientGone) => return,
            }
        }
    }

    fn over_event_budget(&self, faults: &crate::faults::WatchFaults) -> bool {
        faults.drop_after_events.is_some_and(|n| self.sent >= n)
    }

    /// A bookmark at the store's current version. The store hands this watch only the changes
    /// that could concern it, so the version it passed may be far behind; the changes up to
    /// the current one are queued by the time it is read (both happen under the store's lock),
    /// and are sent before the bookmark that passes them.
    fn push_bookmark(&mut self, rx: &mut ChangeReceiver, buf: &mut BytesMut) -> Result<(), End> {
        let now = self.shared.api.store().current_rv();
        loop {
            let received = match rx.try_recv() {
                Ok(change) => Ok(change),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Lagged) => Err(RecvError::Lagged),
                Err(TryRecvError::Closed) => Err(RecvError::Closed),
            };
            self.on_receive(received, rx, buf, false)?;
        }
        self.last_rv = self.last_rv.max(now);
        let line = self.bookmark(false);
        self.push_line(buf, &line);
        Ok(())
    }

    /// Handles what was received, and, with `batch`, what else is queued up to a batch.
    fn on_receive(
        &mut self,
        received: Result<Arc<Change>, RecvError>,
        rx: &mut ChangeReceiver,
        buf: &mut BytesMut,
        batch: bool,
    ) -> Result<(), End> {
        let mut next = Some(received);
        while let Some(r) = next.take() {
            match r {
                Ok(change) => self.push_change(buf, &change),
                Err(RecvError::Closed) => return Err(End::Done),
                Err(RecvError::Lagged) => {
                    // Fell behind the store: catch up from history, or end like upstream
                    // ends a watcher whose history is gone. The history and the new receiver
                    // come from one moment under the store's lock: a change between the two
                    // would reach neither.
                    match self.shared.api.store().watch_from(self.req.interest(), self.last_rv) {
                        Ok((changes, receiver)) => {
                            for c in &changes {
                                self.push_change(buf, c);
                            }
                            *rx = receiver;
                        }
                        Err(expired) => {
                            self.push_line(buf, &error_line(&expired.to_string()));
                            return Err(End::Done);
                        }
                    }
                }
            }
            if batch && buf.len() < BATCH_BYTES {
                match rx.try_recv() {
                    Ok(c) => next = Some(Ok(c)),
                    Err(TryRecvError::Lagged) => next = Some(Err(RecvError::Lagged)),
                    Err(_) => {}
                }
            }
        }
        Ok(())
    }

    fn push_change(&mut self, buf: &mut BytesMut, c: &Change) {
        if c.rv <= self.last_rv {
            return;
        }
        self.last_rv = c.rv;
        let now = self.req.filter.matches(&c.object);
        let before = c.prev.as_ref().is_some_and(|p| self.req.filter.matches(p));
        let kind = match (c.kind, before, now) {
            (ChangeKind::Added, _, true) => ChangeKind::Added,
            (ChangeKind::Modified, true, true) => ChangeKind::Modified,
            (ChangeKind::Modified, false, true) => ChangeKind::Added,
            (ChangeKind::Modified, true, false) => ChangeKind::Deleted,
            (ChangeKind::Deleted, true, _) => ChangeKind::Deleted,
            _ => return,
        };
        let plain = self.req.target.view == View::Native && self.req.table.is_none();
        if plain && kind == c.kind {
            self.push_event(buf, c.kind.as_str(), &c.object.bytes);
            return;
        }
        if kind == ChangeKind::Deleted && c.kind == ChangeKind::Modified {
            // Leaving the selector: the last matching state, at this change's version.
            if let Some(prev) = &c.prev {
                let mut v = prev.value();
                v["metadata"]["resourceVersion"] = json!(c.rv.to_string());
                self.push_value(buf, kind.as_str(), v);
                return;
            }
        }
        self.push_object(buf, kind.as_str(), &c.object);
    }

    fn push_object(&mut self, buf: &mut BytesMut, kind: &str, o: &StoredObject) {
        if self.req.target.view == View::Native && self.req.table.is_none() {
            self.push_event(buf, kind, &o.bytes);
        } else {
            let v = self.shared.api.view_value(&self.req.target, o);
            self.push_value(buf, kind, v);
        }
    }

    fn push_value(&mut self, buf: &mut BytesMut, kind: &str, mut v: Value) {
        if self.req.target.view == View::EventsV1 && v.get("apiVersion").and_then(Value::as_str) == Some("v1")
        {
            v = crate::apiserver::events::to_events_v1(&v);
        }
        if let Some(include) = self.req.table {
            let with_columns = !self.wrote_columns;
            self.wrote_columns = true;
            let rv = v.pointer("/metadata/resourceVersion").cloned().unwrap_or(json!(""));
            v = kubectl::table(
                &self.req.target.rt,
                &[&v],
                json!({ "resourceVersion": rv }),
                jiff::Timestamp::now(),
                include,
                with_columns,
            );
        }
        let bytes = serde_json::to_vec(&v).unwrap_or_default();
        self.push_event(buf, kind, &bytes);
    }

    /// One event of the stream, written straight into the buffer.
    fn push_event(&mut self, buf: &mut BytesMut, kind: &str, object: &[u8]) {
        write_watch_line(buf, kind, object);
        self.unflushed_lines += 1;
        self.sent += 1;
    }

    /// One line of the stream (a bookmark, an error), `\n`-terminated.
    fn push_line(&mut self, buf: &mut BytesMut, line: &[u8]) {
        buf.extend_from_slice(line);
        self.unflushed_lines += 1;
    }

    fn bookmark(&self, initial_events_end: bool) -> Bytes {
        let mut metadata = json!({ "resourceVersion": self.last_rv.to_string(), "creationTimestamp": null });
        if initial_events_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        let rt = &self.req.target.rt;
        let object = json!({ "kind": rt.kind, "apiVersion": rt.api_version(), "metadata": metadata });
        watch_line("BOOKMARK", object.to_string().as_bytes())
    }

    async fn flush(&mut self, buf: &mut BytesMut) -> Result<(), End> {
        if buf.is_empty() {
            return Ok(());
        }
        // Read each time, so a delay configured while watches are open applies to them too.
        if let Some(ms) = self.shared.faults.watch().delay_ms.filter(|ms| *ms > 0) {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        let lines = std::mem::take(&mut self.unflushed_lines);
        let chunk = buf.split().freeze();
        self.tx.send(chunk).await.map_err(|_| End::ClientGone)?;
        self.shared.counters.events_sent(lines);
        Ok(())
    }
}

fn error_line(message: &str) -> Bytes {
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "Expired", "code": 410,
    });
    watch_line("ERROR", status.to_string().as_bytes())
}
