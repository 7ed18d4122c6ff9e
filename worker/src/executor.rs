//! The tokio runtime a worker runs on: how many threads, and how long a thread that has run out
//! of work waits before it looks at its sockets and timers again (`--idle-wake-delay`, off by
//! default).
//!
//! Under load a worker pays more for waking up than for the work a wake-up brings: each time its
//! thread parks and an answer or a watch event wakes it, the kernel switches to it and its caches
//! start cold, and on a busy node one request's worth of work is a few dozen microseconds. An
//! idle thread that first waits a moment finds the answers and events that came in the meantime
//! ready together, and handles them in one wake-up. A busy thread never waits: the delay applies
//! only when there is nothing left to run.
//!
//! It is off by default: what it saves is small, and where the Event sink is busy it costs.
//! Where wake-ups are dense and few Events are written (`bench-jobs`: 2,000-pod Jobs, whose
//! Events the spam filter cuts to 25 each) a 2 ms wait gave 0.41 of 58d582c's CPU per pod
//! lifecycle against 0.42 without it, in adjacent sittings. In `loadtest run million` (10-pod
//! Jobs, an Event per pod) the same wait cost the workers 4% more CPU, let 25% fewer Events
//! through and put a Job's first pod later (p99 7.4 s against 1.5 s): the Event sink, which
//! writes one Event at a time, ran behind even with [`NoIdleWait`] held while it writes
//! (docs/benchmarks.md, cut 10).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How many [`NoIdleWait`]s are held in this process.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Held by a task whose round trips nothing else should hold up: while one is held, an idle
/// thread parks at once. The Event sink holds one while it has Events to write: it writes them
/// one at a time, as client-go's recorder does, so a wait on each answer would cut how many it
/// writes a second, and under a burst more would overflow its buffer and be dropped.
pub struct NoIdleWait(());

impl NoIdleWait {
    pub fn hold() -> Self {
        HELD.fetch_add(1, Ordering::Relaxed);
        Self(())
    }
}

impl Drop for NoIdleWait {
    fn drop(&mut self) {
        HELD.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A runtime of `threads` threads (1: a current-thread runtime, with no hand-over between
/// threads; 0: one per core), each of which sleeps `idle_wake_delay` before it parks.
pub fn build(threads: usize, idle_wake_delay: Duration) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        0 => tokio::runtime::Builder::new_multi_thread(),
        n => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(n);
            builder
        }
    };
    if !idle_wake_delay.is_zero() {
        builder.on_thread_park(move || {
            if HELD.load(Ordering::Relaxed) == 0 {
                std::thread::sleep(idle_wake_delay);
            }
        });
    }
    builder.enable_all().build()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{NoIdleWait, build};

    /// The count of held [`NoIdleWait`]s is the process's: under `cargo test`, which runs tests
    /// on threads of one process, one test's hold would keep another's runtime from waiting.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn alone() -> std::sync::MutexGuard<'static, ()> {
        ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How long the thread answering a round trip takes: long enough for the runtime, with
    /// nothing else to run, to reach its park first.
    const ANSWER_AFTER: Duration = Duration::from_millis(5);

    /// Round trips to another OS thread, each of which leaves the runtime with nothing to run
    /// until the answer comes back.
    fn round_trips(runtime: &tokio::runtime::Runtime, n: u32) -> Duration {
        runtime.block_on(async {
            let started = Instant::now();
            for _ in 0..n {
                let (tx, rx) = tokio::sync::oneshot::channel();
                std::thread::spawn(move || {
                    std::thread::sleep(ANSWER_AFTER);
                    tx.send(()).unwrap()
                });
                rx.await.unwrap();
            }
            started.elapsed()
        })
    }

    #[test]
    fn an_idle_thread_waits_the_delay_before_it_takes_new_work() {
        let _alone = alone();
        let delay = Duration::from_millis(20);
        let runtime = build(1, delay).unwrap();
        let took = round_trips(&runtime, 10);
        // Each waits the delay from its park; two may miss it on a loaded machine (the answer
        // came before the runtime parked). Without the wait, 10 take about 10 × 5 ms.
        assert!(took >= 8 * delay, "10 round trips took {took:?}, under 8 × {delay:?}");
    }

    #[test]
    fn a_thread_does_not_wait_while_a_round_trip_is_held_for() {
        let _alone = alone();
        let delay = Duration::from_millis(200);
        let runtime = build(1, delay).unwrap();
        let _writing = NoIdleWait::hold();
        let took = round_trips(&runtime, 5);
        assert!(took < 5 * delay, "5 round trips took {took:?}, as if each waited {delay:?}");
    }

    #[test]
    fn without_a_delay_a_thread_takes_new_work_as_it_comes() {
        let _alone = alone();
        let runtime = build(1, Duration::ZERO).unwrap();
        // Generous: 20 round trips to a fresh OS thread, against the 2 s the delay of the test
        // above would make them take.
        let took = round_trips(&runtime, 20);
        assert!(took < Duration::from_millis(20 * 100), "20 round trips took {took:?}");
    }
}
