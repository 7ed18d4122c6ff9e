//! The fleet's metrics on the coordinator's `/metrics`, as the leader sees the fleet.

use prometheus::{
    Counter, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use super::WorkerSeen;
use super::owner_gaps::GapObservations;
use super::state::{FleetState, ShardState, WorkerHealth};
use crate::ids::{ShardId, WorkerId};

#[derive(Clone, Debug)]
pub struct FleetMetrics {
    shards: IntGaugeVec,
    workers: IntGaugeVec,
    moves: IntCounterVec,
    move_seconds: Histogram,
    handover_gap_seconds: Histogram,
    unowned_seconds: Counter,
    unowned_shards: IntGauge,
    activate_seconds: Histogram,
    session_overflows: IntCounter,
    step_seconds: Histogram,
}

impl FleetMetrics {
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let shards = IntGaugeVec::new(
            Opts::new(
                "fleet_shards",
                "Shards by state (active, preparing, revoking, unowned), on the leader.",
            ),
            &["state"],
        )?;
        let workers = IntGaugeVec::new(
            Opts::new(
                "fleet_workers",
                "Workers by health (live, disconnected, expiring, gone), on the leader.",
            ),
            &["health"],
        )?;
        let moves = IntCounterVec::new(
            Opts::new("fleet_shard_moves_total", "Shard moves by how they ended (done, cancelled, unowned)."),
            &["result"],
        )?;
        let move_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "fleet_shard_move_duration_seconds",
                "From a move's start to the new owner acting.",
            )
            .buckets(vec![0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]),
        )?;
        let handover_gap_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "fleet_shard_handover_gap_seconds",
                "Per shard that got an acting owner again: from the leader learning its owner stopped \
                 (REVOKED received, or the owner's lease expired plus the margin) to ACTIVATED received.",
            )
            .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]),
        )?;
        let unowned_seconds = Counter::new(
            "fleet_shard_unowned_seconds_total",
            "Seconds summed over shards with no acting owner (from the owner's stop as the leader learnt \
             it, or the leader's start, to ACTIVATED received).",
        )?;
        let unowned_shards = IntGauge::new(
            "fleet_shards_unowned",
            "Shards with no acting owner now: stopped or never owned, and no new owner has answered ACTIVATE.",
        )?;
        let activate_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "fleet_shard_activate_seconds",
                "As the new owner measured it: from receiving ACTIVATE to acting (reading the barrier \
                 when none was given, and its watches passing it); the worker's part of the hand-over gap.",
            )
            .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
        )?;
        registry.register(Box::new(shards.clone()))?;
        registry.register(Box::new(workers.clone()))?;
        registry.register(Box::new(moves.clone()))?;
        registry.register(Box::new(move_seconds.clone()))?;
        registry.register(Box::new(handover_gap_seconds.clone()))?;
        registry.register(Box::new(unowned_seconds.clone()))?;
        registry.register(Box::new(unowned_shards.clone()))?;
        let session_overflows = IntCounter::new(
            "fleet_session_command_overflows_total",
            "Worker sessions cut because the worker left --session-command-queue commands unread.",
        )?;
        registry.register(Box::new(activate_seconds.clone()))?;
        registry.register(Box::new(session_overflows.clone()))?;
        // The step is the leader's one loop: a slow one delays every move and every fail-over.
        let step_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "fleet_step_duration_seconds",
                "The leader's step of the fleet state (registrations, acknowledgements, liveness and \
                 placement), without the shard map's store write.",
            )
            .buckets(vec![0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1.0]),
        )?;
        registry.register(Box::new(step_seconds.clone()))?;
        Ok(Self {
            shards,
            workers,
            moves,
            move_seconds,
            handover_gap_seconds,
            unowned_seconds,
            unowned_shards,
            activate_seconds,
            session_overflows,
            step_seconds,
        })
    }

    pub fn stepped(&self, took: std::time::Duration) {
        self.step_seconds.observe(took.as_secs_f64());
    }

    pub fn session_overflowed(&self) {
        self.session_overflows.inc();
    }

    pub fn observe(&self, state: &FleetState, workers: &std::collections::BTreeMap<WorkerId, WorkerSeen>) {
        let states = [ShardState::Active, ShardState::Preparing, ShardState::Revoking, ShardState::Unowned];
        let mut counts = [0i64; 4];
        for shard in 0..state.shard_count() {
            let s = state.shard_state(ShardId(shard));
            if let Some(i) = states.iter().position(|x| *x == s) {
                counts[i] += 1;
            }
        }
        for (s, n) in states.iter().zip(counts) {
            self.shards.with_label_values(&[s.as_str()]).set(n);
        }
        for (health, name) in [
            (WorkerHealth::Live, "live"),
            (WorkerHealth::Disconnected, "disconnected"),
            (WorkerHealth::Expiring, "expiring"),
            (WorkerHealth::Gone, "gone"),
        ] {
            let n = workers.values().filter(|w| w.health == health).count();
            self.workers.with_label_values(&[name]).set(n as i64);
        }
        self.unowned_shards.set(state.shards_without_acting_owner() as i64);
    }

    pub fn observe_gaps(&self, seen: &GapObservations) {
        for gap in &seen.handover_gaps {
            self.handover_gap_seconds.observe(gap.as_secs_f64());
        }
        self.unowned_seconds.inc_by(seen.unowned.as_secs_f64());
    }

    pub fn observe_activate_times(&self, times: &[std::time::Duration]) {
        for took in times {
            self.activate_seconds.observe(took.as_secs_f64());
        }
    }

    /// This coordinator stopped leading: it no longer knows which shards have an owner.
    pub fn not_leading(&self) {
        self.unowned_shards.set(0);
    }

    pub fn moved(&self, result: &str, seconds: Option<f64>) {
        self.moves.with_label_values(&[result]).inc();
        if let Some(s) = seconds {
            self.move_seconds.observe(s);
        }
    }
}
