//! The shell's side of TTL smoothing: the worker's one [`Pacer`], shared by the Job and the pod
//! TTL controllers (one budget for the deletions they send), and the slot each object waiting for
//! its deletion holds, so that a deletion retried after an error keeps its turn.

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;
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
}

impl Smoothing {
    /// `None` when `rate` is 0: no smoothing, upstream's behaviour.
    pub fn new(rate: f64, seed: u64) -> Option<Self> {
        let pacer = Pacer::new(rate, seed)?;
        Some(Self { inner: Mutex::new(Slots { pacer, held: HashMap::new() }) })
    }

    /// How long the deletion of `key`, expired at `expired_at`, still waits for its slot at
    /// `now`; `None`: it goes now. A slot held from before a later expiry (the TTL was raised
    /// meanwhile) is given up for a new one.
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
        (at > now).then(|| at.duration_since(now).unsigned_abs())
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

    #[test]
    fn a_slot_before_a_later_expiry_is_given_up() {
        let s = Smoothing::new(1.0, 1).expect("on");
        let _ = s.wait(Kind::Job, &key("a"), t(0), t(0));
        // Its TTL was raised by a minute: it waits for the new expiry, not the old slot.
        let w = s.wait(Kind::Job, &key("a"), t(60), t(1)).expect("waits");
        assert!(w >= Duration::from_secs(59), "{w:?}");
    }
}
