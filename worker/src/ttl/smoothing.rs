//! The shell's side of TTL smoothing: the worker's one [`Pacer`], shared by the Job and the pod
//! TTL controllers (one budget for the deletions they send), the slot each object waiting for
//! its deletion holds, so that a deletion retried after an error keeps its turn, and a gate that
//! lets deletions go at most one per `1 / rate` seconds of real time.
//!
//! The slots spread a wave by expiry; the gate holds the rate when the worker falls behind them
//! (a starved CPU, a slow API server): deletions whose slots passed while the worker was busy
//! would otherwise all go at once when it catches up. Gated, they go one per `1 / rate` again, so
//! no calendar second holds more than ⌈rate⌉ go-aheads whatever the worker's delays.

use std::collections::HashMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use parking_lot::Mutex;

use super::pace::Pacer;
use crate::informer::ObjectKey;

/// What a slot is held for: a Job and a pod may share a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Job,
    Pod,
}

pub struct Smoothing {
    inner: Mutex<Slots>,
}

struct Slots {
    pacer: Pacer,
    held: HashMap<(Kind, ObjectKey), Timestamp>,
    /// `1 / rate`, and when the gate lets the next deletion go.
    interval: SignedDuration,
    next_go: Timestamp,
}

impl Smoothing {
    /// `None` when `rate` is 0: no smoothing, upstream's behaviour.
    pub fn new(rate: f64, seed: u64) -> Option<Self> {
        let pacer = Pacer::new(rate, seed)?;
        let interval = SignedDuration::try_from_secs_f64(1.0 / rate).unwrap_or(SignedDuration::MAX);
        let slots = Slots { pacer, held: HashMap::new(), interval, next_go: Timestamp::MIN };
        Some(Self { inner: Mutex::new(slots) })
    }

    /// How long the deletion of `key`, expired at `expired_at`, still waits for its slot (and
    /// then the gate) at `now`; `None`: it goes now. A slot held from before a later expiry (the
    /// TTL was raised meanwhile) is given up for a new one.
    pub fn wait(
        &self,
        kind: Kind,
        key: &ObjectKey,
        expired_at: Timestamp,
        now: Timestamp,
    ) -> Option<Duration> {
        let mut slots = self.inner.lock();
        let held = slots.held.get(&(kind, key.clone())).copied().filter(|&at| at >= expired_at);
        let at = match held {
            Some(at) => at,
            None => {
                let at = slots.pacer.take(expired_at.max(now));
                slots.held.insert((kind, key.clone()), at);
                at
            }
        };
        if at > now {
            return Some(at.duration_since(now).unsigned_abs());
        }
        if slots.next_go > now {
            return Some(slots.next_go.duration_since(now).unsigned_abs());
        }
        slots.next_go = now.saturating_add(slots.interval).unwrap_or(Timestamp::MAX);
        None
    }

    /// The object is gone or no longer waits: its slot is no longer held.
    pub fn forget(&self, kind: Kind, key: &ObjectKey) {
        self.inner.lock().held.remove(&(kind, key.clone()));
    }

    /// Slots held now (a gauge would show a backlog; the tests read it).
    pub fn held(&self) -> usize {
        self.inner.lock().held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: "ns".into(), name: name.into() }
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).expect("valid")
    }

    #[test]
    fn a_held_slot_is_kept_across_retries_and_freed_when_forgotten() {
        let s = Smoothing::new(1.0, 1).expect("on");
        assert!(s.wait(Kind::Job, &key("a"), t(0), t(0)).is_some_and(|w| w < Duration::from_secs(1)));
        let b = s.wait(Kind::Job, &key("b"), t(0), t(0)).expect("the next slot");
        assert!(b >= Duration::from_secs(1) && b < Duration::from_secs(2), "{b:?}");
        // Seen again after its wait: it goes, without taking another slot.
        assert_eq!(s.wait(Kind::Job, &key("b"), t(0), t(2)), None);
        assert_eq!(s.held(), 2);
        // A pod of the same name holds a slot of its own.
        assert!(s.wait(Kind::Pod, &key("b"), t(0), t(0)).is_some());
        assert_eq!(s.held(), 3);
        s.forget(Kind::Job, &key("a"));
        s.forget(Kind::Job, &key("b"));
        s.forget(Kind::Pod, &key("b"));
        assert_eq!(s.held(), 0);
    }

    /// Slots passed while the worker was busy: the gate lets one go per `1 / rate`, not all.
    #[test]
    fn deletions_late_for_their_slots_go_one_per_interval() {
        let s = Smoothing::new(10.0, 1).expect("on");
        for name in ["a", "b", "c"] {
            let _ = s.wait(Kind::Job, &key(name), t(0), t(0));
        }
        // Seen only at t(5): all three slots passed.
        assert_eq!(s.wait(Kind::Job, &key("a"), t(0), t(5)), None);
        let b = s.wait(Kind::Job, &key("b"), t(0), t(5)).expect("gated");
        assert_eq!(b, Duration::from_millis(100));
        let at = |ms: i64| t(5) + SignedDuration::from_millis(ms);
        assert_eq!(s.wait(Kind::Job, &key("b"), t(0), at(100)), None);
        assert!(s.wait(Kind::Job, &key("c"), t(0), at(150)).is_some(), "50 ms after b");
        assert_eq!(s.wait(Kind::Job, &key("c"), t(0), at(200)), None);
    }

    #[test]
    fn a_slot_before_a_later_expiry_is_given_up() {
        let s = Smoothing::new(1.0, 1).expect("on");
        let _ = s.wait(Kind::Job, &key("a"), t(0), t(0));
        // Its TTL was raised by a minute: it waits for the new expiry, not the old slot.
        let w = s.wait(Kind::Job, &key("a"), t(60), t(1)).expect("waits");
        assert!(w >= Duration::from_secs(59), "{w:?}");
    }
}
