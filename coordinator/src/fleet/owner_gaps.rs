//! When shards have no acting owner, as the leader can tell from the outside, for the metrics
//! `fleet_shard_handover_gap_seconds` and `fleet_shard_unowned_seconds_total` (docs/protocol.md,
//! "Metrics of the coordinator"). Pure: the fleet state tells it, with the step's time, when a
//! shard lost its acting owner and when it got one again.
//!
//! A shard has **no acting owner** from the moment the leader knows its owner stopped — it received
//! REVOKED, it judged the owner gone (lease expired plus the margin), or the owner registered
//! without the shard or with it stopped — until it receives ACTIVATED from the new owner. A shard
//! the stored map gives nobody when this leader starts (a new fleet, or one the previous leader
//! left unowned) counts from the leader's start. The true stop can be earlier than the leader
//! sees it (a crashed worker stops at its crash, not when its lease runs out), so both figures
//! are lower bounds of the real gap; they are exact for graceful moves up to the time the leader
//! takes to step (acknowledgements are gathered for 20 ms before a step).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::ids::ShardId;

#[derive(Debug, Clone, Copy)]
struct Unowned {
    since: Instant,
    /// Whether this leader saw the owner stop; a gap it did not see the start of is counted in
    /// the unowned time but not observed as a hand-over gap.
    stop_seen: bool,
}

/// What happened to ownership since the metrics last looked.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct GapObservations {
    /// One per shard that got an acting owner again after this leader saw its owner stop: from
    /// that stop to ACTIVATED.
    pub handover_gaps: Vec<Duration>,
    /// Time summed over shards without an acting owner.
    pub unowned: Duration,
}

#[derive(Debug)]
pub struct OwnerGaps {
    unowned: BTreeMap<ShardId, Unowned>,
    /// Unowned time is counted up to here for every shard in `unowned`.
    counted_to: Instant,
    observed: GapObservations,
}

impl OwnerGaps {
    pub fn new(now: Instant) -> Self {
        Self { unowned: BTreeMap::new(), counted_to: now, observed: GapObservations::default() }
    }

    /// The leader saw the shard's acting owner stop at `now` (an earlier stop it already knows
    /// of stands).
    pub fn stopped(&mut self, shard: ShardId, now: Instant) {
        self.unowned.entry(shard).or_insert(Unowned { since: now, stop_seen: true });
    }

    /// The shard had no acting owner when this leader learnt of it, since a time it cannot know.
    pub fn unowned_before(&mut self, shard: ShardId, now: Instant) {
        self.unowned.entry(shard).or_insert(Unowned { since: now, stop_seen: false });
    }

    /// The shard's new owner acts (ACTIVATED received at `now`).
    pub fn acting(&mut self, shard: ShardId, now: Instant) {
        let Some(gap) = self.unowned.remove(&shard) else { return };
        self.observed.unowned += now.saturating_duration_since(gap.since.max(self.counted_to));
        if gap.stop_seen {
            self.observed.handover_gaps.push(now.saturating_duration_since(gap.since));
        }
    }

    /// Counts the unowned time of every shard still without an acting owner up to `now`, so the
    /// counter grows during a long gap rather than only at its end.
    pub fn count_to(&mut self, now: Instant) {
        if now <= self.counted_to {
            return;
        }
        for gap in self.unowned.values() {
            self.observed.unowned += now.saturating_duration_since(gap.since.max(self.counted_to));
        }
        self.counted_to = now;
    }

    /// Shards without an acting owner now.
    pub fn count(&self) -> usize {
        self.unowned.len()
    }

    pub fn is_unowned(&self, shard: ShardId) -> bool {
        self.unowned.contains_key(&shard)
    }

    pub fn take(&mut self) -> GapObservations {
        std::mem::take(&mut self.observed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ShardId = ShardId(1);
    const B: ShardId = ShardId(2);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Each row: the calls made, then the gaps observed and the unowned time counted.
    #[test]
    fn gaps_and_unowned_time_by_case() {
        enum Call {
            Stopped(ShardId, u64),
            Before(ShardId, u64),
            Acting(ShardId, u64),
            CountTo(u64),
        }
        use Call::*;
        let rows: Vec<(&str, Vec<Call>, Vec<u64>, u64)> = vec![
            (
                "a graceful move: REVOKED at 100, ACTIVATED at 130",
                vec![Stopped(A, 100), Acting(A, 130)],
                vec![30],
                30,
            ),
            (
                "counted while it lasts, not twice at its end",
                vec![Stopped(A, 100), CountTo(150), CountTo(200), Acting(A, 260)],
                vec![160],
                160,
            ),
            (
                "a later stop does not restart the gap (a move left the shard unowned, the next one activates)",
                vec![Stopped(A, 100), Stopped(A, 300), Acting(A, 400)],
                vec![300],
                300,
            ),
            (
                "unowned before this leader: counted, not observed as a gap",
                vec![Before(A, 0), CountTo(50), Acting(A, 80)],
                vec![],
                80,
            ),
            ("ACTIVATED for a shard that had an acting owner: nothing", vec![Acting(A, 50)], vec![], 0),
            (
                "two shards at once add up",
                vec![Stopped(A, 0), Stopped(B, 10), CountTo(100), Acting(B, 110), Acting(A, 120)],
                vec![100, 120],
                220,
            ),
            ("still unowned: counted up to the last count", vec![Stopped(A, 0), CountTo(500)], vec![], 500),
        ];
        let t0 = Instant::now();
        for (case, calls, gaps, unowned) in rows {
            let mut g = OwnerGaps::new(t0);
            for call in calls {
                match call {
                    Stopped(s, t) => g.stopped(s, t0 + ms(t)),
                    Before(s, t) => g.unowned_before(s, t0 + ms(t)),
                    Acting(s, t) => g.acting(s, t0 + ms(t)),
                    CountTo(t) => g.count_to(t0 + ms(t)),
                }
            }
            let seen = g.take();
            assert_eq!(seen.handover_gaps, gaps.into_iter().map(ms).collect::<Vec<_>>(), "{case}");
            assert_eq!(seen.unowned, ms(unowned), "{case}");
            assert_eq!(g.take(), GapObservations::default(), "{case}: taken once");
        }
    }

    #[test]
    fn the_count_is_of_shards_without_an_acting_owner_now() {
        let t0 = Instant::now();
        let mut g = OwnerGaps::new(t0);
        g.stopped(A, t0);
        g.unowned_before(B, t0);
        assert_eq!(g.count(), 2);
        g.acting(A, t0 + ms(5));
        assert_eq!(g.count(), 1);
        assert!(g.is_unowned(B) && !g.is_unowned(A));
    }
}
