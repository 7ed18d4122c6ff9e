//! The balancing policy around placement (`crate::placement`): what placement is asked — who may
//! take shards, where each shard is, the pins and the shards it should leave where they are —
//! and which of the moves it plans a step holds back: moves of shards that moved lately, moves a
//! new leader's predecessor may have been holding back, and moves between live workers beyond
//! `max_moves_in_flight`. Placement itself stays a pure function of its input.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::moves::MovesInFlight;
use super::shard_map::ShardMap;
use super::{FleetConfig, StepInput};
use crate::ids::{ShardId, WorkerId};
use crate::placement::{self, Move, PlacementConfig, PlacementInput};

/// Why a shard last moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MoveCause {
    Operator,
    Balance,
}

#[derive(Debug)]
pub(super) struct Balancing {
    placement: PlacementConfig,
    max_moves_in_flight: usize,
    min_move_interval: Duration,
    /// How long a restarted worker's shards wait to go back to it (the registration grace).
    returning_window: Duration,
    leading_since: Instant,
    /// When each shard last started moving, so that placement does not move it straight back
    /// (an operator's move, or loads that wobble), and whether an operator asked for it.
    moved_at: BTreeMap<ShardId, (Instant, MoveCause)>,
    /// Shards the map gave a worker that registered again without them (it restarted), and
    /// when: placement gives them back to it while it may take them, rather than spreading them
    /// and then filling the empty worker from everyone else (a storm of restarts moved half as
    /// many shards again as the restarted workers held).
    returning: BTreeMap<ShardId, (WorkerId, Instant)>,
    /// Shards the stored map gave an owner when this leader started, not moved since: the
    /// previous leader may have been holding a balancing move of them back.
    inherited: BTreeSet<ShardId>,
}

impl Balancing {
    pub(super) fn new(config: &FleetConfig, map: &ShardMap, now: Instant) -> Self {
        Self {
            placement: config.placement.clone(),
            max_moves_in_flight: config.max_moves_in_flight,
            min_move_interval: config.min_move_interval,
            returning_window: config.registration_grace,
            leading_since: now,
            moved_at: BTreeMap::new(),
            returning: BTreeMap::new(),
            inherited: map.owned().map(|(shard, _)| shard).collect(),
        }
    }

    /// The shard started moving at `now`, for `cause`.
    pub(super) fn moved(&mut self, shard: ShardId, now: Instant, cause: MoveCause) {
        self.moved_at.insert(shard, (now, cause));
    }

    /// The shard moves under this leader: its predecessor's hold on it no longer matters.
    pub(super) fn no_longer_inherited(&mut self, shard: ShardId) {
        self.inherited.remove(&shard);
    }

    /// `worker` registered again without the shard the map gave it.
    pub(super) fn returning(&mut self, shard: ShardId, worker: WorkerId, now: Instant) {
        self.returning.insert(shard, (worker, now));
    }

    /// Forgets the shards that went back, or were placed elsewhere, or waited long enough.
    pub(super) fn end_returns(&mut self, map: &ShardMap, now: Instant) {
        let window = self.returning_window;
        self.returning.retain(|shard, (_, at)| {
            now.saturating_duration_since(*at) < window && map.owner(*shard).is_none()
        });
    }

    /// The moves placement would start now, without the hysteresis band when `rebalance`.
    pub(super) fn plan(
        &self,
        map: &ShardMap,
        moves: &MovesInFlight,
        input: &StepInput,
        rebalance: bool,
    ) -> Vec<Move> {
        let eligible: BTreeSet<WorkerId> = input
            .workers
            .keys()
            // A worker whose session dropped keeps its place while its lease runs: it is most
            // likely reconnecting, and commands to it are sent again until it is back.
            .filter(|w| input.may_keep_shards(w) && !map.is_draining(w))
            .cloned()
            .collect();
        let mut current = BTreeMap::new();
        for (shard, record) in map.records() {
            if let Some(to) = moves.target(shard) {
                current.insert(shard, to.clone());
            } else if let Some(owner) = &record.owner {
                let owner = WorkerId(owner.clone());
                if !input.is_gone(&owner) {
                    current.insert(shard, owner);
                }
            }
        }
        let mut pins = map.pins();
        for (shard, (worker, _)) in &self.returning {
            if !current.contains_key(shard) && eligible.contains(worker) {
                pins.entry(*shard).or_insert_with(|| worker.clone());
            }
        }
        // While a worker holds nothing (it joined, or came back), a shard that placement moved
        // within `min_move_interval` stays with an owner that may keep it, as if pinned there:
        // placement fills the newcomer with shards that may move now, rather than with ones the
        // step would skip, which left it empty for up to the interval. Otherwise recent moves are
        // not held so: balancing around them would move other shards in their place, and an
        // operator's move or a leave would set off more moves than it needs.
        let now = input.now.unwrap_or_else(Instant::now);
        let owning: BTreeSet<&WorkerId> = current.values().collect();
        if eligible.iter().any(|w| !owning.contains(w)) {
            for (shard, owner) in &current {
                let by_balance = matches!(self.moved_at.get(shard), Some((_, MoveCause::Balance)));
                let recent = Move { shard: *shard, from: Some(owner.clone()), to: owner.clone() };
                if by_balance && !pins.contains_key(shard) && self.recently_moved(&recent, map, input, now) {
                    pins.insert(*shard, owner.clone());
                }
            }
        }
        let mut config = self.placement.clone();
        if rebalance {
            config.hysteresis = 0.0;
        }
        let asked = PlacementInput {
            shard_count: map.shard_count(),
            eligible: &eligible,
            loads: &input.loads,
            pins: &pins,
            current: &current,
        };
        // A settled fleet is at rest at nearly every step: telling so costs a pass over the
        // shards, planning from scratch a ring and probes (23–38 ms at 16,384 shards).
        if placement::moves_nothing(asked, &config) {
            return Vec::new();
        }
        let placed = placement::place(asked, &config);
        placed.moves.into_iter().filter(|m| !moves.contains(m.shard)).collect()
    }

    /// Whether a step holds back this move placement planned: the moves between workers that
    /// may keep their shards are paced by `max_moves_in_flight`, and some wait (see
    /// [`Balancing::recently_moved`] and [`Balancing::held_back_after_failover`]).
    pub(super) fn holds_back(
        &self,
        m: &Move,
        map: &ShardMap,
        moves: &MovesInFlight,
        input: &StepInput,
        now: Instant,
        owning: &BTreeMap<WorkerId, u32>,
    ) -> bool {
        let urgent = m.from.as_ref().is_none_or(|f| !input.may_keep_shards(f));
        (!urgent && moves.paced() >= self.max_moves_in_flight)
            || self.recently_moved(m, map, input, now)
            || self.held_back_after_failover(m, map, input, now, owning)
    }

    /// A balancing move of a shard that moved within `min_move_interval`, off an owner that may
    /// keep it, waits. Moves off a draining, gone or pinned-away owner do not.
    fn recently_moved(&self, m: &Move, map: &ShardMap, input: &StepInput, now: Instant) -> bool {
        let Some((at, _)) = self.moved_at.get(&m.shard) else { return false };
        owner_keeps(m, map, input) && now.saturating_duration_since(*at) < self.min_move_interval
    }

    /// A new leader does not know which shards the previous one moved lately, and so held back:
    /// for `min_move_interval` from its start it makes no balancing move of a shard it inherited
    /// between two workers that both hold shards, so that a fail-over moves nothing by itself.
    /// Filling a worker that holds nothing (a newcomer), moves off draining, gone or pinned-away
    /// owners, and a new fleet's first placement and balancing go on.
    fn held_back_after_failover(
        &self,
        m: &Move,
        map: &ShardMap,
        input: &StepInput,
        now: Instant,
        owning: &BTreeMap<WorkerId, u32>,
    ) -> bool {
        now.saturating_duration_since(self.leading_since) < self.min_move_interval
            && self.inherited.contains(&m.shard)
            && owning.contains_key(&m.to)
            && owner_keeps(m, map, input)
    }
}

/// Whether the move's old owner may keep the shard: it is not draining, its lease runs, and no
/// pin sends the shard elsewhere.
fn owner_keeps(m: &Move, map: &ShardMap, input: &StepInput) -> bool {
    m.from.as_ref().is_some_and(|f| {
        !map.is_draining(f) && input.may_keep_shards(f) && map.pinned_to(m.shard).is_none_or(|p| p == f.0)
    })
}
