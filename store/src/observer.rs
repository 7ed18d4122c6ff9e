//! Worker liveness as the coordinator judges it: a worker is alive while its lease record keeps
//! changing. Expiry is measured from when this observer last saw the record change, on this
//! process's monotonic clock — never by comparing the worker's clock with ours. A new observer
//! (after a coordinator fail-over) starts every worker's clock afresh, so a fail-over cannot
//! expire a healthy worker.
//!
//! A record the store expires itself (an etcd lease, `expires_in_store`) is alive while it is
//! there: etcd removes it a TTL after the last keep-alive it received, which is no earlier than
//! the worker's own deadline (a TTL from when it sent that keep-alive).
//!
//! A record that vanishes (etcd expired the worker's lease, or the worker removed it on a clean
//! exit) is Expiring for the margin from when it was seen gone, then Expired: the margin is the
//! allowance for a write the worker sent just before it stopped, as for a record that stops
//! changing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::WorkerLease;
use crate::ids::WorkerId;

#[derive(Debug, Clone)]
struct Seen {
    renewal: String,
    ttl: Duration,
    expires_in_store: bool,
    changed_at: Instant,
    /// When this observer first found the record gone.
    vanished_at: Option<Instant>,
}

/// How long a vanished record is remembered; longer than any sensible margin.
const VANISHED_KEPT: Duration = Duration::from_secs(300);

/// What the coordinator knows of each worker's lease.
#[derive(Debug, Default)]
pub struct LivenessObserver {
    seen: BTreeMap<WorkerId, Seen>,
}

/// How a worker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// Renewed within its TTL; `expires_in` is what is left of it.
    Alive { expires_in: Duration },
    /// Not renewed for its TTL, but within the margin: its shards are not yet free.
    Expiring,
    /// Not renewed for its TTL plus the margin: it has stopped by its own clock, and its shards
    /// may be given to others.
    Expired,
}

impl LivenessObserver {
    /// Takes in a fresh read of every lease at `now`. A record that vanished is remembered as
    /// vanished (see the module's comment); one that comes back starts afresh.
    pub fn observe(&mut self, leases: &[WorkerLease], now: Instant) {
        let mut next = BTreeMap::new();
        for lease in leases {
            let seen = match self.seen.remove(&lease.worker) {
                Some(old) if old.renewal == lease.renewal && old.vanished_at.is_none() => {
                    Seen { ttl: lease.ttl, expires_in_store: lease.expires_in_store, ..old }
                }
                _ => Seen {
                    renewal: lease.renewal.clone(),
                    ttl: lease.ttl,
                    expires_in_store: lease.expires_in_store,
                    changed_at: now,
                    vanished_at: None,
                },
            };
            next.insert(lease.worker.clone(), seen);
        }
        for (worker, mut gone) in std::mem::take(&mut self.seen) {
            let since = *gone.vanished_at.get_or_insert(now);
            if now.saturating_duration_since(since) < VANISHED_KEPT {
                next.insert(worker, gone);
            }
        }
        self.seen = next;
    }

    /// How `worker` stands at `now`; `None` for a worker without a record.
    pub fn liveness(&self, worker: &WorkerId, now: Instant, margin: Duration) -> Option<Liveness> {
        let seen = self.seen.get(worker)?;
        if let Some(vanished) = seen.vanished_at {
            let gone_for = now.saturating_duration_since(vanished);
            return Some(if gone_for < margin { Liveness::Expiring } else { Liveness::Expired });
        }
        if seen.expires_in_store {
            // At most a TTL is left; when exactly, only the store's clock says.
            return Some(Liveness::Alive { expires_in: seen.ttl });
        }
        let quiet = now.saturating_duration_since(seen.changed_at);
        Some(if quiet < seen.ttl {
            Liveness::Alive { expires_in: seen.ttl - quiet }
        } else if quiet < seen.ttl + margin {
            Liveness::Expiring
        } else {
            Liveness::Expired
        })
    }

    /// Every worker with a record, and how it stands.
    pub fn all(&self, now: Instant, margin: Duration) -> Vec<(WorkerId, Liveness)> {
        self.seen.keys().filter_map(|w| self.liveness(w, now, margin).map(|l| (w.clone(), l))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(worker: &str, renewal: &str) -> WorkerLease {
        WorkerLease {
            worker: WorkerId(worker.into()),
            renewal: renewal.into(),
            ttl: Duration::from_secs(10),
            expires_in_store: false,
        }
    }

    /// An etcd record is renewed by keep-alives, which do not change it: it is alive for as long
    /// as etcd keeps it, then waits out the margin from when it was seen gone.
    #[test]
    fn a_record_the_store_expires_is_alive_while_present() {
        let t0 = Instant::now();
        let a = WorkerId("a".into());
        let etcd = WorkerLease { expires_in_store: true, ..lease("a", "5") };
        let mut o = LivenessObserver::default();
        for s in 0..60 {
            o.observe(std::slice::from_ref(&etcd), t0 + Duration::from_secs(s));
        }
        let at = t0 + Duration::from_secs(59);
        assert!(matches!(o.liveness(&a, at, MARGIN), Some(Liveness::Alive { .. })), "long past its TTL");
        o.observe(&[], at + Duration::from_secs(1));
        assert_eq!(o.liveness(&a, at + Duration::from_secs(2), MARGIN), Some(Liveness::Expiring));
        assert_eq!(o.liveness(&a, at + Duration::from_secs(3), MARGIN), Some(Liveness::Expired));
    }

    const MARGIN: Duration = Duration::from_secs(2);

    #[test]
    fn a_record_that_keeps_changing_stays_alive() {
        let t0 = Instant::now();
        let mut o = LivenessObserver::default();
        for i in 0..10u64 {
            o.observe(&[lease("a", &i.to_string())], t0 + Duration::from_secs(5 * i));
        }
        let at = t0 + Duration::from_secs(48);
        assert_eq!(
            o.liveness(&WorkerId("a".into()), at, MARGIN),
            Some(Liveness::Alive { expires_in: Duration::from_secs(7) })
        );
    }

    #[test]
    fn a_record_that_stops_changing_expires_after_ttl_then_margin() {
        let t0 = Instant::now();
        let mut o = LivenessObserver::default();
        o.observe(&[lease("a", "1")], t0);
        o.observe(&[lease("a", "1")], t0 + Duration::from_secs(9));
        let w = WorkerId("a".into());
        assert!(matches!(o.liveness(&w, t0 + Duration::from_secs(9), MARGIN), Some(Liveness::Alive { .. })));
        assert_eq!(o.liveness(&w, t0 + Duration::from_secs(11), MARGIN), Some(Liveness::Expiring));
        assert_eq!(o.liveness(&w, t0 + Duration::from_secs(12), MARGIN), Some(Liveness::Expired));
    }

    /// A standby that takes over sees every record for the first time: full TTL for everyone,
    /// however old the renewal times written in the records are.
    #[test]
    fn a_new_observer_gives_every_worker_its_full_ttl() {
        let t0 = Instant::now();
        let mut o = LivenessObserver::default();
        o.observe(&[lease("a", "41"), lease("b", "7")], t0);
        for w in ["a", "b"] {
            assert_eq!(
                o.liveness(&WorkerId(w.into()), t0, MARGIN),
                Some(Liveness::Alive { expires_in: Duration::from_secs(10) })
            );
        }
    }

    /// etcd expires a lease on its own clock, from the last keep-alive it received: the worker
    /// stopped by then, but a write it sent just before may still land. Its shards wait out the
    /// margin from when the record was seen gone, as they do for a record that stops changing.
    #[test]
    fn a_vanished_record_waits_out_the_margin_and_a_returning_one_starts_afresh() {
        let t0 = Instant::now();
        let a = WorkerId("a".into());
        let mut o = LivenessObserver::default();
        o.observe(&[lease("a", "1")], t0);
        o.observe(&[], t0 + Duration::from_secs(1));
        assert_eq!(o.liveness(&a, t0 + Duration::from_secs(1), MARGIN), Some(Liveness::Expiring));
        o.observe(&[], t0 + Duration::from_secs(2));
        assert_eq!(o.liveness(&a, t0 + Duration::from_millis(2_999), MARGIN), Some(Liveness::Expiring));
        assert_eq!(o.liveness(&a, t0 + Duration::from_secs(3), MARGIN), Some(Liveness::Expired));
        // Back with the same renewal it vanished with: a new record, alive afresh.
        o.observe(&[lease("a", "1")], t0 + Duration::from_secs(30));
        assert!(matches!(o.liveness(&a, t0 + Duration::from_secs(35), MARGIN), Some(Liveness::Alive { .. })));
        assert_eq!(o.all(t0 + Duration::from_secs(35), MARGIN).len(), 1);
        // Gone for good: forgotten after a while.
        o.observe(&[], t0 + Duration::from_secs(40));
        o.observe(&[], t0 + Duration::from_secs(40) + VANISHED_KEPT);
        assert_eq!(o.liveness(&a, t0 + Duration::from_secs(40) + VANISHED_KEPT, MARGIN), None, "forgotten");
    }
}
