//! Counters the admin endpoint reports: requests by verb and resource, open watches and watch
//! events sent.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use parking_lot::Mutex;
use serde_json::{Value, json};

#[derive(Default)]
pub struct Counters {
    requests: Mutex<BTreeMap<(String, String), u64>>,
    open_watches: AtomicI64,
    watch_events_sent: AtomicU64,
}

impl Counters {
    pub fn request(&self, verb: &str, resource: &str) {
        *self.requests.lock().entry((verb.to_string(), resource.to_string())).or_default() += 1;
    }

    pub fn watch_opened(&self) {
        self.open_watches.fetch_add(1, Ordering::Relaxed);
    }

    pub fn watch_closed(&self) {
        self.open_watches.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn events_sent(&self, n: u64) {
        self.watch_events_sent.fetch_add(n, Ordering::Relaxed);
    }

    pub fn open_watches(&self) -> i64 {
        self.open_watches.load(Ordering::Relaxed)
    }

    pub fn watch_events_sent(&self) -> u64 {
        self.watch_events_sent.load(Ordering::Relaxed)
    }

    /// `{"requests":[{"verb","resource","count"}…],"openWatches":N,"watchEventsSent":N}`.
    pub fn snapshot(&self) -> Value {
        let requests: Vec<Value> = self
            .requests
            .lock()
            .iter()
            .map(|((verb, resource), count)| json!({"verb": verb, "resource": resource, "count": count}))
            .collect();
        json!({
            "requests": requests,
            "openWatches": self.open_watches(),
            "watchEventsSent": self.watch_events_sent(),
        })
    }
}
