//! A port of client-go's event correlator (`k8s.io/client-go/tools/record/events_cache.go`).
//!
//! Every event a recorder is about to write goes through [`EventCorrelator::correlate`], which,
//! in upstream's order:
//!
//! 1. **aggregates** (`EventAggregator.EventAggregate`): once 10 events that differ only by
//!    message have been seen for the same source/object/type/reason within 600 s of each other,
//!    the event is replaced by a new one whose message is `"(combined from similar events): "`
//!    followed by the latest message, and which is counted under the aggregate key from then on;
//! 2. **observes** (`eventLogger.eventObserve`): an event seen before (same key) takes the cached
//!    name, resource version and first timestamp, gets `count = cached count + 1`, and comes with
//!    the patch upstream sends (`{"count", "lastTimestamp", "message"}`);
//! 3. **filters** (`EventSourceObjectSpamFilter.Filter`): a token bucket per source + object,
//!    25 events of burst refilled at one every 300 s; an event without a token is skipped.
//!
//! Upstream writes the result with a patch when its count is above 1 and creates it otherwise;
//! after a successful write the caller hands the stored event to [`EventCorrelator::update_state`]
//! (`EventCorrelator.UpdateState`). Upstream also falls back to a create (with the resource
//! version cleared) when the patch answers 404; that retry belongs to the caller.
//!
//! Time is never read from a clock: every call takes `now`.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use lru::LruCache;
use serde_json::Value;

/// `maxLruCacheEntries`: the size of each of the three caches.
const MAX_LRU_CACHE_ENTRIES: NonZeroUsize = match NonZeroUsize::new(4096) {
    Some(n) => n,
    None => NonZeroUsize::MIN,
};

/// `defaultAggregateMaxEvents`: distinct messages within the interval before aggregating.
const DEFAULT_AGGREGATE_MAX_EVENTS: usize = 10;

/// `defaultAggregateIntervalInSeconds`.
const DEFAULT_AGGREGATE_INTERVAL: SignedDuration = SignedDuration::from_secs(600);

/// `defaultSpamBurst`: events a source may send about one object at once.
const DEFAULT_SPAM_BURST: u32 = 25;

/// `defaultSpamQPS` (`1. / 300.`), which upstream passes as a `float32`: one token every 5 minutes.
const DEFAULT_SPAM_QPS: f32 = 1.0 / 300.0;

/// The message prefix of `EventAggregatorByReasonMessageFunc`.
const AGGREGATE_MESSAGE_PREFIX: &str = "(combined from similar events): ";

/// What to do with an event.
#[derive(Debug, Clone, PartialEq)]
pub enum Correlated {
    /// Over the source + object's rate: drop it.
    Skip,
    /// Create this event (its count is at most 1).
    Create(Event),
    /// Patch the existing event `event.metadata.name` with `patch` (a strategic-merge patch; its
    /// count is above 1). Should the patch answer 404, create `event` instead, without its
    /// resource version.
    Patch { event: Event, patch: Value },
}

/// Filters, aggregates, counts and de-duplicates events before they are written.
pub struct EventCorrelator {
    aggregator: EventAggregator,
    logger: EventLogger,
    spam_filter: SpamFilter,
}

impl Default for EventCorrelator {
    fn default() -> Self {
        Self::new()
    }
}

impl EventCorrelator {
    /// A correlator with upstream's defaults (`NewEventCorrelator`).
    pub fn new() -> Self {
        Self::with_spam_filter(DEFAULT_SPAM_BURST, get_spam_key)
    }

    /// Upstream's `NewEventCorrelatorWithOptions` with only the spam filter's burst and key set.
    fn with_spam_filter(burst: u32, spam_key: fn(&Event) -> String) -> Self {
        Self {
            aggregator: EventAggregator {
                cache: LruCache::new(MAX_LRU_CACHE_ENTRIES),
                max_events: DEFAULT_AGGREGATE_MAX_EVENTS,
                max_interval: DEFAULT_AGGREGATE_INTERVAL,
            },
            logger: EventLogger { cache: LruCache::new(MAX_LRU_CACHE_ENTRIES) },
            spam_filter: SpamFilter {
                cache: LruCache::new(MAX_LRU_CACHE_ENTRIES),
                burst,
                qps: DEFAULT_SPAM_QPS,
                spam_key,
            },
        }
    }

    /// `EventCorrelator.EventCorrelate`: aggregate, then observe, then filter.
    pub fn correlate(&mut self, event: Event, now: Timestamp) -> Correlated {
        let (aggregate_event, cache_key) = self.aggregator.event_aggregate(event, now);
        let (observed, patch) = self.logger.event_observe(aggregate_event, &cache_key);
        if self.spam_filter.filter(&observed, now) {
            return Correlated::Skip;
        }
        // recordToSink: `recordEvent(..., result.Event.Count > 1, ...)`.
        match patch {
            Some(patch) if observed.count.unwrap_or(0) > 1 => Correlated::Patch { event: observed, patch },
            _ => Correlated::Create(observed),
        }
    }

    /// `EventCorrelator.UpdateState`: remember the server's copy of an event just written.
    pub fn update_state(&mut self, written: &Event) {
        self.logger.update_state(written);
    }
}

fn s(field: &Option<String>) -> &str {
    field.as_deref().unwrap_or("")
}

/// The source and involved object, as every key starts; upstream's event key alone also has the
/// object's field path, between its name and uid.
fn source_and_object(event: &Event, with_field_path: bool) -> Vec<&str> {
    let source = event.source.as_ref();
    let obj = &event.involved_object;
    let mut parts = vec![
        source.map_or("", |src| s(&src.component)),
        source.map_or("", |src| s(&src.host)),
        s(&obj.kind),
        s(&obj.namespace),
        s(&obj.name),
    ];
    if with_field_path {
        parts.push(s(&obj.field_path));
    }
    parts.extend([s(&obj.uid), s(&obj.api_version)]);
    parts
}

/// `getEventKey`: source, involved object (with its field path), type, reason and message,
/// joined with no separator.
fn get_event_key(event: &Event) -> String {
    let mut parts = source_and_object(event, true);
    parts.extend([s(&event.type_), s(&event.reason), s(&event.message)]);
    parts.concat()
}

/// `getSpamKey`: source and involved object (without its field path), joined with no separator.
fn get_spam_key(event: &Event) -> String {
    let key = source_and_object(event, false).concat();
    // batchfleet's own reasons count in a bucket of their own (`own_reasons.rs`).
    match event.reason.as_deref() {
        Some(reason) if super::own_reasons::is_own(reason) => key + "\0batchfleet",
        _ => key,
    }
}

/// `EventAggregatorByReasonFunc`: the aggregate key (source, involved object without its field
/// path, type, reason, reporting controller and instance, joined with no separator) and the local
/// key (the message).
pub fn event_aggregator_by_reason_func(event: &Event) -> (String, String) {
    let mut parts = source_and_object(event, false);
    parts.extend([
        s(&event.type_),
        s(&event.reason),
        // Go's `ReportingController` is the API's `reportingComponent`.
        s(&event.reporting_component),
        s(&event.reporting_instance),
    ]);
    (parts.concat(), s(&event.message).to_owned())
}

/// `EventAggregatorByReasonMessageFunc`.
pub fn event_aggregator_by_reason_message_func(event: &Event) -> String {
    format!("{AGGREGATE_MESSAGE_PREFIX}{}", s(&event.message))
}

/// `aggregateRecord`.
#[derive(Default)]
struct AggregateRecord {
    /// The distinct local keys (messages) seen in the current interval.
    local_keys: BTreeSet<String>,
    /// When the aggregate was last recorded; `None` is Go's zero time.
    last_timestamp: Option<Timestamp>,
}

/// `EventAggregator`.
struct EventAggregator {
    cache: LruCache<String, AggregateRecord>,
    max_events: usize,
    max_interval: SignedDuration,
}

impl EventAggregator {
    /// `EventAggregate`: the event to go on with and its cache key for the logger.
    fn event_aggregate(&mut self, new_event: Event, now: Timestamp) -> (Event, String) {
        let event_key = get_event_key(&new_event);
        let (aggregate_key, local_key) = event_aggregator_by_reason_func(&new_event);

        // Get + Add in upstream: either way the key ends up most recently used.
        let record = self.cache.get_or_insert_mut(aggregate_key.clone(), AggregateRecord::default);
        // A record that is missing (zero lastTimestamp) or older than the interval starts afresh;
        // exactly the interval is not too old (`interval > maxInterval`).
        if record.last_timestamp.is_none_or(|last| now.duration_since(last) > self.max_interval) {
            *record = AggregateRecord::default();
        }
        record.local_keys.insert(local_key);
        record.last_timestamp = Some(now);

        if record.local_keys.len() < self.max_events {
            return (new_event, event_key);
        }

        // "do not grow our local key set any larger than max": upstream pops an arbitrary key
        // (Go map order) from the set it has already stored; this pops the smallest.
        record.local_keys.pop_first();

        let now_time = Time(now);
        let aggregate = Event {
            metadata: ObjectMeta {
                name: Some(event_name(s(&new_event.involved_object.name), now)),
                namespace: new_event.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            count: Some(1),
            first_timestamp: Some(now_time.clone()),
            involved_object: new_event.involved_object.clone(),
            last_timestamp: Some(now_time),
            message: Some(event_aggregator_by_reason_message_func(&new_event)),
            type_: new_event.type_.clone(),
            reason: new_event.reason.clone(),
            source: new_event.source.clone(),
            ..Event::default()
        };
        (aggregate, aggregate_key)
    }
}

/// An Event's name as client-go makes it: `fmt.Sprintf("%v.%x", name, t.UnixNano())`.
pub fn event_name(object_name: &str, at: Timestamp) -> String {
    format!("{object_name}.{}", go_hex(unix_nano(at)))
}

/// Go's `Time.UnixNano`: wraps outside int64 like Go does.
fn unix_nano(t: Timestamp) -> i64 {
    t.as_second().wrapping_mul(1_000_000_000).wrapping_add(i64::from(t.subsec_nanosecond()))
}

/// Go's `%x` of an int64: lower-case hex, with a minus sign rather than two's complement.
fn go_hex(v: i64) -> String {
    if v < 0 { format!("-{:x}", v.unsigned_abs()) } else { format!("{v:x}") }
}

/// `eventLog`.
#[derive(Clone, Default)]
struct EventLog {
    /// Go's `uint(event.Count)`: a negative count sign-extends.
    count: u64,
    first_timestamp: Option<Time>,
    name: Option<String>,
    resource_version: Option<String>,
}

impl EventLog {
    fn of(event: &Event) -> Self {
        Self {
            count: i64::from(event.count.unwrap_or(0)) as u64,
            first_timestamp: event.first_timestamp.clone(),
            name: event.metadata.name.clone(),
            resource_version: event.metadata.resource_version.clone(),
        }
    }
}

/// `eventLogger`.
struct EventLogger {
    cache: LruCache<String, EventLog>,
}

impl EventLogger {
    /// `eventObserve`: the event, updated from the last observation under `key` if there is one,
    /// with the patch for it.
    fn event_observe(&mut self, mut event: Event, key: &str) -> (Event, Option<Value>) {
        let last = self.last_event_observation_from_cache(key);
        let mut patch = None;
        if last.count > 0 {
            event.metadata.name = last.name;
            event.metadata.resource_version = last.resource_version;
            event.first_timestamp = last.first_timestamp;
            // `int32(lastObservation.count) + 1`, wrapping as Go does.
            event.count = Some((last.count as i32).wrapping_add(1));
            patch = Some(observe_patch(&event));
        }
        self.cache.put(key.to_owned(), EventLog::of(&event));
        (event, patch)
    }

    /// `updateState`: keyed by the written event's own `getEventKey`.
    fn update_state(&mut self, event: &Event) {
        self.cache.put(get_event_key(event), EventLog::of(event));
    }

    /// `lastEventObservationFromCache` (a hit makes the key most recently used).
    fn last_event_observation_from_cache(&mut self, key: &str) -> EventLog {
        self.cache.get(key).cloned().unwrap_or_default()
    }
}

/// The patch upstream gets from `strategicpatch.CreateTwoWayMergePatch(old, new, event)`, where
/// `old` is `new` with count 0, lastTimestamp `time.Unix(0, 0)` and an empty message. Only those
/// three fields differ; a field equal in both (count 0 and message "" are omitted by `omitempty`,
/// a lastTimestamp of 1970-01-01T00:00:00Z) is left out, and a zero lastTimestamp becomes null.
/// Keys are in Go's (sorted) order.
fn observe_patch(event: &Event) -> Value {
    let mut patch = serde_json::Map::new();
    let count = event.count.unwrap_or(0);
    if count != 0 {
        patch.insert("count".to_owned(), Value::from(count));
    }
    let last_timestamp = go_time_json(event.last_timestamp.as_ref());
    if last_timestamp != "1970-01-01T00:00:00Z" {
        patch.insert("lastTimestamp".to_owned(), last_timestamp);
    }
    let message = s(&event.message);
    if !message.is_empty() {
        patch.insert("message".to_owned(), Value::from(message));
    }
    Value::Object(patch)
}

/// `metav1.Time.MarshalJSON`: null for Go's zero time (unset), else RFC 3339 in UTC to the second.
fn go_time_json(t: Option<&Time>) -> Value {
    // 0001-01-01T00:00:00Z, Go's zero `time.Time`.
    let go_zero = Timestamp::from_second(-62_135_596_800).ok();
    match t {
        Some(t) if Some(t.0) != go_zero => serde_json::to_value(t).unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

/// `EventSourceObjectSpamFilter`.
struct SpamFilter {
    cache: LruCache<String, TokenBucket>,
    burst: u32,
    qps: f32,
    spam_key: fn(&Event) -> String,
}

impl SpamFilter {
    /// `Filter`: true when the event is to be skipped.
    fn filter(&mut self, event: &Event, now: Timestamp) -> bool {
        let key = (self.spam_key)(event);
        let (limit, burst) = (f64::from(self.qps), self.burst);
        let bucket = self.cache.get_or_insert_mut(key, TokenBucket::default);
        !bucket.allow(now, limit, burst)
    }
}

/// `golang.org/x/time/rate.Limiter` as `flowcontrol.NewTokenBucketPassiveRateLimiterWithClock`
/// uses it: `TryAccept` is `AllowN(now, 1)`.
#[derive(Default)]
struct TokenBucket {
    tokens: f64,
    /// `None` is Go's zero time: the bucket is full.
    last: Option<Timestamp>,
}

impl TokenBucket {
    /// `reserveN(now, 1, 0).ok`: tokens refill continuously at `limit` per second up to `burst`;
    /// state changes only when the token is granted.
    fn allow(&mut self, now: Timestamp, limit: f64, burst: u32) -> bool {
        let burst = f64::from(burst);
        let tokens = match self.last {
            None => burst,
            Some(last) => {
                let last = last.min(now);
                let elapsed = now.duration_since(last);
                // Duration.Seconds() * limit (tokensFromDuration).
                let secs = elapsed.as_secs() as f64 + f64::from(elapsed.subsec_nanos()) / 1e9;
                (self.tokens + secs * limit).min(burst)
            }
        } - 1.0;
        // The wait for a missing fraction is truncated to whole nanoseconds; a wait of zero is ok.
        let wait_ok = tokens >= 0.0 || (limit > 0.0 && (-tokens / limit) * 1e9 < 1.0);
        let ok = burst >= 1.0 && wait_ok;
        if ok {
            self.tokens = tokens;
            self.last = Some(now);
        }
        ok
    }
}

#[cfg(test)]
mod tests;
