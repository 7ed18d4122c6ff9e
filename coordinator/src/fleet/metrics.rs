//! The fleet's metrics on the coordinator's `/metrics`, as the leader sees the fleet.

use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGaugeVec, Opts, Registry};

use super::WorkerSeen;
use super::state::{FleetState, ShardState, WorkerHealth};
use crate::ids::{ShardId, WorkerId};

#[derive(Clone, Debug)]
pub struct FleetMetrics {
    shards: IntGaugeVec,
    workers: IntGaugeVec,
    moves: IntCounterVec,
    move_seconds: Histogram,
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
        registry.register(Box::new(shards.clone()))?;
        registry.register(Box::new(workers.clone()))?;
        registry.register(Box::new(moves.clone()))?;
        registry.register(Box::new(move_seconds.clone()))?;
        Ok(Self { shards, workers, moves, move_seconds })
    }

    pub fn observe(&self, state: &FleetState, workers: &std::collections::BTreeMap<WorkerId, WorkerSeen>) {
        for s in [ShardState::Active, ShardState::Preparing, ShardState::Revoking, ShardState::Unowned] {
            let n = (0..state.shard_count()).filter(|i| state.shard_state(ShardId(*i)) == s).count();
            self.shards.with_label_values(&[s.as_str()]).set(n as i64);
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
    }

    pub fn moved(&self, result: &str, seconds: Option<f64>) {
        self.moves.with_label_values(&[result]).inc();
        if let Some(s) = seconds {
            self.move_seconds.observe(s);
        }
    }
}
