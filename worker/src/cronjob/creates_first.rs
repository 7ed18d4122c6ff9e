//! Job creations before status writes. When many CronJobs fall due at once, every sync creates
//! a Job and then writes its CronJob's status; a sync that reaches its status write holds it back
//! while other syncs have yet to issue their creations, so the burst's Jobs are created first and
//! the status writes, which users do not wait on, follow. Each sync keeps upstream's order (the
//! Job, then the status) and holds its CronJob's key until its status is written.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Syncs that may still create a Job, and a wake-up for the status writes waiting on them.
#[derive(Default)]
pub struct CreatesFirst {
    before_create: AtomicUsize,
    none_left: Notify,
}

/// A sync that has not yet created its Job (or found it need not); dropping it says it is past.
pub struct BeforeCreate<'a>(&'a CreatesFirst);

impl Drop for BeforeCreate<'_> {
    fn drop(&mut self) {
        if self.0.before_create.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.none_left.notify_waiters();
        }
    }
}

impl CreatesFirst {
    /// Counts a starting sync as one that may still create a Job.
    pub fn sync_started(&self) -> BeforeCreate<'_> {
        self.before_create.fetch_add(1, Ordering::AcqRel);
        BeforeCreate(self)
    }

    /// Waits until no sync is before its creation, or `at_most`: a steady stream of new syncs
    /// must not hold status writes back for long.
    pub async fn wait_for_creates(&self, at_most: Duration) {
        let deadline = tokio::time::Instant::now() + at_most;
        loop {
            let none_left = self.none_left.notified();
            tokio::pin!(none_left);
            // Registered before the check, so a wake-up between the two is not lost.
            none_left.as_mut().enable();
            if self.before_create.load(Ordering::Acquire) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, none_left).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_status_write_waits_until_every_started_sync_is_past_its_creation() {
        let gate = CreatesFirst::default();
        let a = gate.sync_started();
        let b = gate.sync_started();
        let wait = gate.wait_for_creates(Duration::from_secs(60));
        tokio::pin!(wait);
        assert!(futures::poll!(wait.as_mut()).is_pending());
        drop(a);
        assert!(futures::poll!(wait.as_mut()).is_pending(), "one sync is still before its creation");
        drop(b);
        assert!(futures::poll!(wait.as_mut()).is_ready());
    }

    #[tokio::test(start_paused = true)]
    async fn a_status_write_waits_no_longer_than_its_bound() {
        let gate = CreatesFirst::default();
        let _stuck = gate.sync_started();
        let started = tokio::time::Instant::now();
        gate.wait_for_creates(Duration::from_secs(1)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn with_no_sync_before_its_creation_a_status_write_goes_at_once() {
        let gate = CreatesFirst::default();
        drop(gate.sync_started());
        tokio::time::timeout(Duration::from_secs(5), gate.wait_for_creates(Duration::from_secs(3600)))
            .await
            .expect("the wait should end at once");
    }
}
