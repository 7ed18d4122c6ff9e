//! A work queue with client-go's semantics: a key is queued at most once, never processed by two
//! workers at once (a key added while in flight is queued again when it is done), delayed adds
//! keep the earliest time, and failures back off exponentially per key. It reports upstream's
//! `workqueue_*` metrics.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus::{Gauge, Histogram, HistogramOpts, IntCounter, IntGauge, Opts, Registry};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Per-key exponential back-off: `base · 2^failures`, capped at `max`.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    /// Saturates at `max`: `base · 2^failures` is computed without overflowing however many
    /// failures there were (a float product would panic past `Duration::MAX`).
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 1u32.checked_shl(failures).filter(|_| failures < 32);
        factor.and_then(|f| self.base.checked_mul(f)).map_or(self.max, |d| d.min(self.max))
    }
}

/// The `workqueue_*` metrics of one named queue.
#[derive(Clone)]
pub struct QueueMetrics {
    depth: IntGauge,
    adds: IntCounter,
    queue_duration: Histogram,
    work_duration: Histogram,
    retries: IntCounter,
    unfinished_work: Gauge,
    longest_running: Gauge,
}

fn exponential_buckets() -> Vec<f64> {
    // client-go: 10ns · 10^i, 10 buckets.
    (0..10).map(|i| 1e-8 * 10f64.powi(i)).collect()
}

impl QueueMetrics {
    /// Registers the metrics for queue `name` (label `name`, as client-go's provider does).
    pub fn register(registry: &Registry, name: &str) -> prometheus::Result<Self> {
        let label = |o: Opts| o.const_label("name", name);
        let hlabel = |o: HistogramOpts| o.const_label("name", name).buckets(exponential_buckets());
        let m = Self {
            depth: IntGauge::with_opts(label(Opts::new("workqueue_depth", "Current depth of workqueue")))?,
            adds: IntCounter::with_opts(label(Opts::new(
                "workqueue_adds_total",
                "Total number of adds handled by workqueue",
            )))?,
            queue_duration: Histogram::with_opts(hlabel(HistogramOpts::new(
                "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested.",
            )))?,
            work_duration: Histogram::with_opts(hlabel(HistogramOpts::new(
                "workqueue_work_duration_seconds",
                "How long in seconds processing an item from workqueue takes.",
            )))?,
            retries: IntCounter::with_opts(label(Opts::new(
                "workqueue_retries_total",
                "Total number of retries handled by workqueue",
            )))?,
            unfinished_work: Gauge::with_opts(label(Opts::new(
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been observed by work_duration.",
            )))?,
            longest_running: Gauge::with_opts(label(Opts::new(
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
            )))?,
        };
        registry.register(Box::new(m.depth.clone()))?;
        registry.register(Box::new(m.adds.clone()))?;
        registry.register(Box::new(m.queue_duration.clone()))?;
        registry.register(Box::new(m.work_duration.clone()))?;
        registry.register(Box::new(m.retries.clone()))?;
        registry.register(Box::new(m.unfinished_work.clone()))?;
        registry.register(Box::new(m.longest_running.clone()))?;
        Ok(m)
    }

    /// Metrics that go nowhere, for tests.
    pub fn unregistered() -> Self {
        Self::register(&Registry::new(), "test").expect("fresh registry")
    }
}

struct State<K> {
    queue: VecDeque<K>,
    dirty: HashSet<K>,
    processing: HashMap<K, Instant>,
    queued_at: HashMap<K, Instant>,
    /// Delayed adds: (ready at, sequence, key); `ready` holds each key's earliest time.
    delayed: BinaryHeap<Reverse<(Instant, u64, K)>>,
    ready: HashMap<K, Instant>,
    seq: u64,
    failures: HashMap<K, u32>,
    /// Keys processed (`done`) since the queue was made: the liveness probe's sign of progress.
    completed: u64,
    shutting_down: bool,
    /// The time one waiting `get` sleeps until, for the earliest delayed key. The other waiters
    /// sleep on the notification alone, so a due key wakes one of them, not every idle worker.
    timer_until: Option<Instant>,
}

/// A waiter's hold on the delayed keys' timer. Released when the waiter stops waiting, even by
/// being dropped, and then another waiter is woken to take it up.
struct TimerHold<'a, K> {
    queue: &'a WorkQueue<K>,
    until: Instant,
}

impl<K> Drop for TimerHold<'_, K> {
    fn drop(&mut self) {
        let mut s = self.queue.state.lock();
        if s.timer_until == Some(self.until) {
            s.timer_until = None;
            drop(s);
            self.queue.notify.notify_one();
        }
    }
}

/// A queue's progress, for the liveness probe (`crate::health`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueProgress {
    /// Keys ready and waiting for a worker.
    pub waiting: usize,
    /// How long the oldest of them has waited.
    pub oldest_wait: Option<Duration>,
    /// Keys processed since the queue was made.
    pub completed: u64,
}

/// The queue. Cheap to clone.
pub struct WorkQueue<K> {
    state: Arc<Mutex<State<K>>>,
    notify: Arc<Notify>,
    backoff: Backoff,
    metrics: QueueMetrics,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            notify: self.notify.clone(),
            backoff: self.backoff,
            metrics: self.metrics.clone(),
        }
    }
}

impl<K: Clone + Eq + Hash + Ord> WorkQueue<K> {
    pub fn new(backoff: Backoff, metrics: QueueMetrics) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashMap::new(),
                queued_at: HashMap::new(),
                delayed: BinaryHeap::new(),
                ready: HashMap::new(),
                seq: 0,
                failures: HashMap::new(),
                completed: 0,
                shutting_down: false,
                timer_until: None,
            })),
            notify: Arc::new(Notify::new()),
            backoff,
            metrics,
        }
    }

    /// Queues `key` now.
    pub fn add(&self, key: K) {
        let mut s = self.state.lock();
        if self.add_locked(&mut s, key) {
            self.notify.notify_one();
        }
    }

    /// Queues `key` unless it is queued or in flight; returns whether a worker should be woken.
    fn add_locked(&self, s: &mut State<K>, key: K) -> bool {
        if s.shutting_down || s.dirty.contains(&key) {
            return false;
        }
        self.metrics.adds.inc();
        s.dirty.insert(key.clone());
        if s.processing.contains_key(&key) {
            return false;
        }
        s.queued_at.insert(key.clone(), Instant::now());
        s.queue.push_back(key);
        self.metrics.depth.set(s.queue.len() as i64);
        true
    }

    /// Queues `key` after `delay`; an earlier pending time for the same key wins.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let at = Instant::now() + delay;
        let mut s = self.state.lock();
        if s.shutting_down {
            return;
        }
        if s.ready.get(&key).is_some_and(|existing| *existing <= at) {
            return;
        }
        s.ready.insert(key.clone(), at);
        s.seq += 1;
        let seq = s.seq;
        s.delayed.push(Reverse((at, seq, key)));
        self.notify.notify_one();
    }

    /// Queues `key` after its back-off, and counts a failure.
    pub fn add_rate_limited(&self, key: K) {
        let failures = {
            let mut s = self.state.lock();
            let f = s.failures.entry(key.clone()).or_default();
            let current = *f;
            *f += 1;
            current
        };
        self.metrics.retries.inc();
        self.add_after(key, self.backoff.delay(failures));
    }

    /// Clears `key`'s failure count.
    pub fn forget(&self, key: &K) {
        self.state.lock().failures.remove(key);
    }

    pub fn num_requeues(&self, key: &K) -> u32 {
        self.state.lock().failures.get(key).copied().unwrap_or(0)
    }

    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next key to process, waiting for one; `None` once shut down.
    pub async fn get(&self) -> Option<K> {
        // Held across wake-ups; dropped on return (or cancellation), which hands it over.
        let mut timer: Option<TimerHold<'_, K>> = None;
        loop {
            // Registered before the queue is checked, so a wake-up in between is not lost.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let sleep_until = {
                let mut s = self.state.lock();
                let now = Instant::now();
                let mut came_due = 0usize;
                while let Some(Reverse((at, _, _))) = s.delayed.peek() {
                    if *at > now {
                        break;
                    }
                    let Some(Reverse((at, _, key))) = s.delayed.pop() else { break };
                    // Only the key's current earliest time counts; stale heap entries are skipped.
                    if s.ready.get(&key) == Some(&at) {
                        s.ready.remove(&key);
                        came_due += usize::from(self.add_locked(&mut s, key));
                    }
                }
                // This waiter takes one key; the rest go to others. Many keys due at once (a
                // schedule tick) wake every idle worker in one go rather than one by one.
                match came_due {
                    0 | 1 => {}
                    2 => self.notify.notify_one(),
                    _ => self.notify.notify_waiters(),
                }
                if let Some(key) = s.queue.pop_front() {
                    s.dirty.remove(&key);
                    if let Some(t) = s.queued_at.remove(&key) {
                        self.metrics.queue_duration.observe(t.elapsed().as_secs_f64());
                    }
                    s.processing.insert(key.clone(), now);
                    self.metrics.depth.set(s.queue.len() as i64);
                    return Some(key);
                }
                if s.shutting_down {
                    return None;
                }
                let holding = timer.as_ref().is_some_and(|t| s.timer_until == Some(t.until));
                // One waiter keeps the timer for the earliest delayed key: this one if it holds
                // it already, or if nobody does, or if a key came due before the held time.
                match s.delayed.peek().map(|Reverse((at, _, _))| *at) {
                    Some(at) if holding || s.timer_until.is_none_or(|held| at < held) => {
                        s.timer_until = Some(at);
                        Some(at)
                    }
                    None if holding => {
                        s.timer_until = None;
                        None
                    }
                    _ => None,
                }
            };
            match sleep_until {
                Some(at) => {
                    match timer.as_mut() {
                        Some(t) => t.until = at,
                        None => timer = Some(TimerHold { queue: self, until: at }),
                    }
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => {
                    // Another waiter holds the timer, or none is needed: letting go hands nothing over.
                    timer = None;
                    notified.await;
                }
            }
        }
    }

    /// Marks `key` processed; if it was added meanwhile it is queued again.
    pub fn done(&self, key: &K) {
        let mut s = self.state.lock();
        s.completed += 1;
        if let Some(started) = s.processing.remove(key) {
            self.metrics.work_duration.observe(started.elapsed().as_secs_f64());
        }
        if s.dirty.contains(key) {
            s.queued_at.insert(key.clone(), Instant::now());
            s.queue.push_back(key.clone());
            self.metrics.depth.set(s.queue.len() as i64);
            self.notify.notify_one();
        }
    }

    /// How many keys wait, how long the oldest has, and how many were processed so far.
    pub fn progress(&self) -> QueueProgress {
        let s = self.state.lock();
        let now = Instant::now();
        // First in, first out: the front key has waited longest. A delayed key that came due
        // waits too, though only a worker's `get` moves it into the queue.
        let queued = s.queue.front().and_then(|k| s.queued_at.get(k)).copied();
        let due = s.delayed.peek().map(|Reverse((at, _, _))| *at).filter(|at| *at <= now);
        let oldest = queued.into_iter().chain(due).min();
        QueueProgress {
            waiting: s.queue.len() + usize::from(due.is_some()),
            oldest_wait: oldest.map(|t| now.duration_since(t)),
            completed: s.completed,
        }
    }

    /// Updates the in-progress gauges; call periodically.
    pub fn update_unfinished_work(&self) {
        let s = self.state.lock();
        let now = Instant::now();
        let ages: Vec<f64> = s.processing.values().map(|t| now.duration_since(*t).as_secs_f64()).collect();
        self.metrics.unfinished_work.set(ages.iter().sum());
        self.metrics.longest_running.set(ages.iter().copied().fold(0.0, f64::max));
    }

    /// Stops handing out keys; waiting `get`s return `None`.
    pub fn shut_down(&self) {
        self.state.lock().shutting_down = true;
        self.notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> WorkQueue<String> {
        WorkQueue::new(
            Backoff { base: Duration::from_secs(1), max: Duration::from_secs(60) },
            QueueMetrics::unregistered(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_is_queued_once_and_requeued_if_added_while_processing() {
        let q = queue();
        q.add("a".to_string());
        q.add("a".to_string());
        assert_eq!(q.len(), 1);
        let k = q.get().await.unwrap();
        q.add("a".to_string());
        assert_eq!(q.len(), 0, "not handed to a second worker while in flight");
        q.done(&k);
        assert_eq!(q.len(), 1, "queued again once done");
    }

    /// The bound on a queue under a flood of watch events is the number of objects, not of
    /// events: a key is queued once however often it is added, and a delayed add that comes no
    /// earlier than the one pending keeps no entry.
    #[tokio::test(start_paused = true)]
    async fn a_flood_of_adds_holds_one_entry_per_key() {
        let q = queue();
        for round in 0..1_000u64 {
            for key in 0..100 {
                q.add(format!("ns/job-{key}"));
                q.add_after(format!("ns/job-{key}"), Duration::from_secs(30 + round % 7));
            }
        }
        assert_eq!(q.len(), 100);
        let s = q.state.lock();
        assert_eq!(s.dirty.len(), 100);
        assert!(s.delayed.len() <= 100, "{} delayed entries for 100 keys", s.delayed.len());
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_adds_keep_the_earliest_time() {
        let q = queue();
        q.add_after("a".to_string(), Duration::from_secs(10));
        q.add_after("a".to_string(), Duration::from_secs(2));
        q.add_after("a".to_string(), Duration::from_secs(5));
        let started = Instant::now();
        assert_eq!(q.get().await.as_deref(), Some("a"));
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        q.done(&"a".to_string());
        // The stale 5s and 10s entries do not fire again.
        tokio::select! {
            k = q.get() => panic!("unexpected {k:?}"),
            _ = tokio::time::sleep(Duration::from_secs(20)) => {}
        }
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_exponentially_and_forget_resets() {
        let q = queue();
        assert_eq!(q.backoff.delay(0), Duration::from_secs(1));
        assert_eq!(q.backoff.delay(3), Duration::from_secs(8));
        assert_eq!(q.backoff.delay(10), Duration::from_secs(60));
        let key = "a".to_string();
        q.add_rate_limited(key.clone());
        q.add_rate_limited(key.clone());
        assert_eq!(q.num_requeues(&key), 2);
        let started = Instant::now();
        q.get().await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(1), "the earliest of 1s and 2s");
        q.forget(&key);
        assert_eq!(q.num_requeues(&key), 0);
    }

    #[test]
    fn the_back_off_saturates_at_its_cap_however_many_failures() {
        let b = Backoff { base: Duration::from_secs(4), max: Duration::from_secs(600) };
        for failures in [10, 31, 32, 62, 63, 64, 1000, u32::MAX] {
            assert_eq!(b.delay(failures), Duration::from_secs(600), "{failures} failures");
        }
        assert_eq!(b.delay(2), Duration::from_secs(16));
        let huge = Backoff { base: Duration::MAX, max: Duration::from_secs(1) };
        assert_eq!(huge.delay(1), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_releases_waiting_workers() {
        let q = queue();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_key_still_comes_due_when_the_waiter_holding_its_timer_goes_away() {
        let q = queue();
        q.add_after("a".to_string(), Duration::from_secs(3));
        // This waiter takes the timer, then is dropped before it fires.
        let first = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        let second = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        first.abort();
        let started = Instant::now();
        assert_eq!(second.await.unwrap().as_deref(), Some("a"));
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn many_idle_workers_share_one_timer_and_each_due_key_goes_to_one() {
        let q = queue();
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..50 {
            let q = q.clone();
            workers.spawn(async move { q.get().await });
        }
        tokio::task::yield_now().await;
        q.add_after("late".to_string(), Duration::from_secs(5));
        q.add_after("early".to_string(), Duration::from_secs(2));
        let started = Instant::now();
        let first = workers.join_next().await.unwrap().unwrap();
        assert_eq!((first.as_deref(), started.elapsed()), (Some("early"), Duration::from_secs(2)));
        let second = workers.join_next().await.unwrap().unwrap();
        assert_eq!((second.as_deref(), started.elapsed()), (Some("late"), Duration::from_secs(5)));
        assert_eq!(workers.len(), 48, "the other workers are still waiting");
        q.shut_down();
        while let Some(w) = workers.join_next().await {
            assert_eq!(w.unwrap(), None);
        }
    }
}
