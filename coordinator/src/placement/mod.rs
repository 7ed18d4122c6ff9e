//! Where shards should live: a pure, deterministic function of the shard count, the eligible
//! workers, each shard's measured load, the operator's pins and the current owners. It returns
//! the target map and the moves that reach it; it does no I/O.
//!
//! # Algorithm
//! Consistent hashing with bounded loads, made sticky:
//! 1. Pinned shards go to their pinned worker while it is eligible.
//! 2. Every other shard stays with its current owner while that owner is eligible.
//! 3. A worker above the bound `cap = (1+ε)·average` sheds shards until it is within it —
//!    shards away from their ring home first, heavier first — as long as another worker could
//!    take the shard within `cap`.
//! 4. Unowned shards (new, shed, or on a worker that left or drains) go to the first worker in
//!    their ring preference that stays within `aim = (1+slack)·average`, else the first within
//!    `cap`, else the least-loaded worker. Aiming below the bound keeps a settled map close to
//!    the average, so a leave later moves little more than one worker's share.
//! 5. A worker below `floor = (1−ε)·average`, by more than the hysteresis margin (a newcomer), is
//!    filled up to the average from the
//!    most-loaded workers — shards whose ring home it is first — as long as each move lowers the
//!    donor below where it started and keeps the receiver within `cap`.
//!
//! Loads between `floor` and `cap` move nothing, so measurement noise does not start move storms
//! (the band below the average is widened by the hysteresis margin; above it the bound is kept
//! as stated, since a settled map sits near the average, loads are smoothed by the workers and a
//! shard that moved stays put for a while), and the result is a fixed point: placing it again moves nothing. A join moves
//! about the newcomer's share, a leave exactly the leaver's shards.
//!
//! # Complexity
//! Building the ring is O(W·V log(W·V)) for W workers and V virtual nodes each; placing is
//! O(S·log S + S·P) for S shards and P probes, plus O(W) per filling move.

mod ring;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use crate::ids::{ShardId, WorkerId};
use ring::Ring;

/// Loads are compared in integer milli-units, so the result never depends on float rounding.
type Units = u64;

/// The placement's knobs.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacementConfig {
    /// The bound: no worker carries more than `(1+ε)` times the average load, when shard sizes
    /// allow. Also the width of the hysteresis band below the average.
    pub epsilon: f64,
    /// Points on the whole ring; each worker gets an equal part of them, between
    /// `min_virtual_nodes` and `max_virtual_nodes`. More points spread a small fleet's shares more
    /// evenly; a large fleet is kept even by the load bound, and a smaller ring is faster.
    pub ring_points: u32,
    pub min_virtual_nodes: u32,
    pub max_virtual_nodes: u32,
    /// Ring probes per shard before falling back to the least-loaded worker.
    pub max_probes: u32,
    /// Shards being placed aim at workers within `(1+slack)` times the average.
    pub slack: f64,
    /// A worker is filled only below `(1−ε−hysteresis)` times the average, so a settled map does
    /// not start moving when measured loads wobble. (It sheds above `(1+ε)` times it: with a
    /// margin above the bound too, a fleet placed before its loads were measured settled at
    /// 1.37 × the average at 1,000 workers, `loadtest run fleet-scale`.)
    pub hysteresis: f64,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        Self {
            epsilon: 0.25,
            ring_points: 16_384,
            min_virtual_nodes: 16,
            max_virtual_nodes: 256,
            max_probes: 32,
            slack: 0.05,
            hysteresis: 0.10,
        }
    }
}

impl PlacementConfig {
    /// Virtual nodes per worker for a fleet of `workers`.
    pub fn virtual_nodes_for(&self, workers: usize) -> u32 {
        let share = self.ring_points / u32::try_from(workers.max(1)).unwrap_or(u32::MAX);
        share.clamp(self.min_virtual_nodes, self.max_virtual_nodes.max(self.min_virtual_nodes))
    }
}

/// What the placement is asked.
#[derive(Debug, Clone, Copy)]
pub struct PlacementInput<'a> {
    pub shard_count: u32,
    /// Live workers that may take shards (not draining).
    pub eligible: &'a BTreeSet<WorkerId>,
    /// Measured weight per shard (see [`shard_weight`]); a shard without one weighs as an idle one.
    pub loads: &'a BTreeMap<ShardId, f64>,
    pub pins: &'a BTreeMap<ShardId, WorkerId>,
    /// Who owns each shard now; owners need not be eligible (they may have left or be draining).
    pub current: &'a BTreeMap<ShardId, WorkerId>,
}

/// One shard changing owner; `from` is `None` for a shard nobody owned.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Move {
    pub shard: ShardId,
    pub from: Option<WorkerId>,
    pub to: WorkerId,
}

/// The placement's answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Placement {
    /// Every shard's owner; empty when no worker is eligible.
    pub target: BTreeMap<ShardId, WorkerId>,
    /// The changes from `current` to `target`, by shard.
    pub moves: Vec<Move>,
}

/// The weight of a shard from what its owner reports: an idle shard weighs 1, and each
/// reconcile per second weighs as much as 100 cached objects.
pub fn shard_weight(objects: u64, reconciles_per_second: f64) -> f64 {
    let rps = if reconciles_per_second.is_finite() { reconciles_per_second.max(0.0) } else { 0.0 };
    1.0 + objects as f64 / 100.0 + rps
}

/// A shard's most units: about 4.3 million reconciles per second, far beyond any real shard. Loads
/// are what workers report over the network; with the cap, the sum over even `u32::MAX` shards
/// fits in `Units`, so a worker reporting an absurd load cannot overflow the totals.
const MAX_SHARD_UNITS: Units = u32::MAX as Units;

fn units(weight: f64) -> Units {
    if weight.is_finite() && weight > 0.0 {
        ((weight * 1000.0).round() as Units).clamp(1, MAX_SHARD_UNITS)
    } else {
        1000
    }
}

/// Places every shard; see the module documentation.
pub fn place(input: PlacementInput<'_>, config: &PlacementConfig) -> Placement {
    if input.eligible.is_empty() {
        return Placement::default();
    }
    // Workers by index, in id order: the work below compares numbers, not names.
    let names: Vec<WorkerId> = input.eligible.iter().cloned().collect();
    let index_of = |w: &WorkerId| names.binary_search(w).ok();
    let weight: Vec<Units> = (0..input.shard_count).map(|s| shard_units(input.loads, ShardId(s))).collect();
    let pinned: Vec<Option<usize>> =
        (0..input.shard_count).map(|s| input.pins.get(&ShardId(s)).and_then(index_of)).collect();

    let total: Units = weight.iter().sum();
    let bounds = Bounds::new(total, names.len(), config);
    let ring = Ring::new(&names, config.virtual_nodes_for(names.len()));
    let mut book = Book::new(names.len(), &weight);

    // 1 and 2: pins, then current owners.
    for (s, pin) in pinned.iter().enumerate() {
        let current = || input.current.get(&ShardId(s as u32)).and_then(index_of);
        if let Some(w) = pin.or_else(current) {
            book.assign(s, w);
        }
    }

    // 3 to 5 repeat until a round changes nothing, so the answer is a fixed point: placing it
    // again moves nothing.
    for _ in 0..MAX_ROUNDS {
        let before = book.owner.clone();
        shed_above_cap(&mut book, &ring, &pinned, &bounds);
        place_unowned(&mut book, &ring, config, &bounds);
        fill_below_floor(&mut book, &ring, &pinned, &bounds);
        if book.owner == before {
            break;
        }
    }

    let mut target = BTreeMap::new();
    let mut moves = Vec::new();
    for (s, owner) in book.owner.iter().enumerate() {
        let Some(to) = owner.map(|w| &names[w]) else { continue };
        let shard = ShardId(s as u32);
        let from = input.current.get(&shard);
        if from != Some(to) {
            moves.push(Move { shard, from: from.cloned(), to: to.clone() });
        }
        target.insert(shard, to.clone());
    }
    Placement { target, moves }
}

/// Whether [`place`] would move nothing, checked in O(S + W) without building the ring: every
/// shard is on an eligible worker (its pinned one, when that one is eligible) and every worker's
/// load lies in the band where placement neither sheds nor fills. A sufficient condition only:
/// when it does not hold, `place` decides. A settled fleet meets it at every step but when its
/// loads leave the band, so the leader plans from scratch only then.
pub fn moves_nothing(input: PlacementInput<'_>, config: &PlacementConfig) -> bool {
    if input.eligible.is_empty() {
        return true;
    }
    let names: Vec<&WorkerId> = input.eligible.iter().collect();
    let index_of = |w: &WorkerId| names.binary_search(&w).ok();
    let mut load: Vec<Units> = vec![0; names.len()];
    let mut total: Units = 0;
    for s in 0..input.shard_count {
        let shard = ShardId(s);
        let weight = shard_units(input.loads, shard);
        total += weight;
        let Some(owner) = input.current.get(&shard).and_then(index_of) else { return false };
        if input.pins.get(&shard).and_then(index_of).is_some_and(|pin| pin != owner) {
            return false;
        }
        load[owner] += weight;
    }
    let bounds = Bounds::new(total, names.len(), config);
    load.iter().all(|l| (bounds.floor..=bounds.shed_above).contains(l))
}

fn shard_units(loads: &BTreeMap<ShardId, f64>, shard: ShardId) -> Units {
    loads.get(&shard).copied().map_or(1000, units)
}

/// The loads that decide, in units, per worker.
struct Bounds {
    average: Units,
    /// Where shards being placed aim.
    aim: Units,
    /// The bound.
    cap: Units,
    /// Above this a worker sheds, down to `cap` (the same bound, kept as stated).
    shed_above: Units,
    /// Below this a worker is filled, up to `average`.
    floor: Units,
}

impl Bounds {
    fn new(total: Units, workers: usize, config: &PlacementConfig) -> Self {
        let per_worker = |factor: f64| total as f64 * factor / workers as f64;
        Self {
            average: total.div_ceil(workers as Units),
            aim: per_worker(1.0 + config.slack.min(config.epsilon)).ceil() as Units,
            cap: per_worker(1.0 + config.epsilon).ceil() as Units,
            shed_above: per_worker(1.0 + config.epsilon).ceil() as Units,
            floor: per_worker((1.0 - config.epsilon - config.hysteresis).max(0.0)).floor() as Units,
        }
    }
}

/// Rounds of shedding, placing and filling; each round strictly evens the loads, so a handful
/// suffice (the bound only guards against a cycle the proof missed).
const MAX_ROUNDS: usize = 16;

/// Step 3: workers above `shed_above` shed shards, down to `cap`, that another worker could take
/// within `cap`.
fn shed_above_cap(book: &mut Book<'_>, ring: &Ring, pinned: &[Option<usize>], bounds: &Bounds) {
    for w in 0..book.load.len() {
        if book.load[w] <= bounds.shed_above {
            continue;
        }
        let mut candidates: Vec<usize> =
            book.held[w].iter().copied().filter(|s| pinned[*s].is_none()).collect();
        candidates.sort_by_key(|s| (ring.home(*s) == Some(w), std::cmp::Reverse(book.weight[*s]), *s));
        for s in candidates {
            if book.load[w] <= bounds.cap {
                break;
            }
            let lightest_other = book.by_load.iter().find(|(_, x)| *x != w).map(|(l, _)| *l);
            if lightest_other.is_some_and(|l| l + book.weight[s] <= bounds.cap) {
                book.unassign(s);
            }
        }
    }
}

/// Step 4: every unowned shard, heaviest first, to its first ring preference within `aim`, else
/// the least-loaded worker if within `aim`, else the first preference within `cap`, else the
/// least-loaded worker.
fn place_unowned(book: &mut Book<'_>, ring: &Ring, config: &PlacementConfig, bounds: &Bounds) {
    let mut pool: Vec<usize> = (0..book.owner.len()).filter(|s| book.owner[*s].is_none()).collect();
    pool.sort_by_key(|s| (std::cmp::Reverse(book.weight[*s]), *s));
    for s in pool {
        let w = book.weight[s];
        let within =
            |bound: Units| ring.preferences(s, config.max_probes).find(|x| book.load[*x] + w <= bound);
        let least = book.least_loaded();
        let choice = within(bounds.aim)
            .or_else(|| (book.load[least] + w <= bounds.aim).then_some(least))
            .or_else(|| within(bounds.cap))
            .unwrap_or(least);
        book.assign(s, choice);
    }
}

/// Step 5: workers below `floor` are filled up to `average`.
fn fill_below_floor(book: &mut Book<'_>, ring: &Ring, pinned: &[Option<usize>], bounds: &Bounds) {
    for receiver in 0..book.load.len() {
        if book.load[receiver] >= bounds.floor {
            continue;
        }
        while book.load[receiver] < bounds.average {
            let Some(shard) = book.best_donation(receiver, bounds.cap, ring, pinned) else { break };
            book.assign(shard, receiver);
        }
    }
}

/// The placement's working state, by shard and worker index: who owns what, and each worker's
/// load, also indexed by load.
struct Book<'a> {
    weight: &'a [Units],
    owner: Vec<Option<usize>>,
    held: Vec<BTreeSet<usize>>,
    load: Vec<Units>,
    by_load: BTreeSet<(Units, usize)>,
    lightest: Units,
}

impl<'a> Book<'a> {
    fn new(workers: usize, weight: &'a [Units]) -> Self {
        Self {
            weight,
            owner: vec![None; weight.len()],
            held: vec![BTreeSet::new(); workers],
            load: vec![0; workers],
            by_load: (0..workers).map(|w| (0, w)).collect(),
            lightest: weight.iter().copied().min().unwrap_or(1),
        }
    }

    fn set_load(&mut self, w: usize, load: Units) {
        self.by_load.remove(&(self.load[w], w));
        self.load[w] = load;
        self.by_load.insert((load, w));
    }

    fn assign(&mut self, s: usize, w: usize) {
        self.unassign(s);
        self.owner[s] = Some(w);
        self.held[w].insert(s);
        self.set_load(w, self.load[w] + self.weight[s]);
    }

    fn unassign(&mut self, s: usize) {
        if let Some(old) = self.owner[s].take() {
            self.held[old].remove(&s);
            self.set_load(old, self.load[old] - self.weight[s]);
        }
    }

    /// The least-loaded worker, lowest index on ties.
    fn least_loaded(&self) -> usize {
        self.by_load.first().map_or(0, |(_, w)| *w)
    }

    /// The shard to move to `receiver` next: from the most-loaded worker that has one whose move
    /// keeps `receiver` within `cap` and strictly lowers the larger of the two loads. Shards whose
    /// ring home is `receiver` go first, then heavier ones.
    fn best_donation(
        &self,
        receiver: usize,
        cap: Units,
        ring: &Ring,
        pinned: &[Option<usize>],
    ) -> Option<usize> {
        let have = self.load[receiver];
        for (donor_load, donor) in self.by_load.iter().rev() {
            // Donors come heaviest first: once even the lightest shard cannot narrow the gap,
            // no donor further down can.
            if *donor_load <= have + self.lightest {
                return None;
            }
            if *donor == receiver {
                continue;
            }
            let best = self.held[*donor]
                .iter()
                .copied()
                .filter(|s| pinned[*s].is_none())
                .filter(|s| {
                    let w = self.weight[*s];
                    have + w <= cap && have + w < *donor_load
                })
                .min_by_key(|s| (ring.home(*s) != Some(receiver), std::cmp::Reverse(self.weight[*s]), *s));
            if best.is_some() {
                return best;
            }
        }
        None
    }
}
