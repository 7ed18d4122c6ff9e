//! `loadtest bench-placement`: the coordinator's placement function on its own — balance, shards
//! moved per join and leave, stability under load noise, and how long a large placement takes
//! (issue 11's figures). Pure computation: no cluster is started.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use batchfleet_coordinator::ids::{ShardId, WorkerId};
use batchfleet_coordinator::placement::{Placement, PlacementConfig, PlacementInput, place, shard_weight};

use crate::splitmix::SplitMix;

#[derive(clap::Args, Debug)]
pub struct BenchPlacementArgs {
    /// Timed repetitions of the large placement.
    #[arg(long, default_value_t = 20)]
    repeats: usize,
    /// Seed of the generated shard loads.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

struct Fleet {
    shard_count: u32,
    eligible: BTreeSet<WorkerId>,
    loads: BTreeMap<ShardId, f64>,
    current: BTreeMap<ShardId, WorkerId>,
}

impl Fleet {
    fn new(shard_count: u32, workers: usize, loads: BTreeMap<ShardId, f64>) -> Self {
        let eligible = (0..workers).map(|i| WorkerId(format!("worker-{i}"))).collect();
        Self { shard_count, eligible, loads, current: BTreeMap::new() }
    }

    fn place(&self) -> Placement {
        let pins = BTreeMap::new();
        place(
            PlacementInput {
                shard_count: self.shard_count,
                eligible: &self.eligible,
                loads: &self.loads,
                pins: &pins,
                current: &self.current,
            },
            &PlacementConfig::default(),
        )
    }

    fn settle(&mut self) -> Placement {
        let p = self.place();
        self.current = p.target.clone();
        p
    }

    /// No placement does better than the heaviest shard alone on a worker, or the average.
    fn best_possible(&self) -> f64 {
        let total: f64 = self.loads.values().sum();
        let heaviest = self.loads.values().copied().fold(0.0, f64::max);
        (heaviest / (total / self.eligible.len() as f64)).max(1.0)
    }

    fn max_over_average(&self) -> f64 {
        let mut per: BTreeMap<&WorkerId, f64> = self.eligible.iter().map(|w| (w, 0.0)).collect();
        for (s, w) in &self.current {
            *per.entry(w).or_default() += self.loads.get(s).copied().unwrap_or(1.0);
        }
        let total: f64 = per.values().sum();
        per.values().copied().fold(0.0, f64::max) / (total / per.len() as f64)
    }
}

/// Shard loads as namespaces have them: most small, a few large (objects Pareto-like, reconcile
/// rates proportional), expressed with the coordinator's own weight.
fn skewed_loads(shards: u32, seed: u64) -> BTreeMap<ShardId, f64> {
    let mut rng = SplitMix(seed);
    (0..shards)
        .map(|s| {
            let objects = (20.0 / (1.0 - rng.next_f64()).max(1e-3).powf(0.8)) as u64;
            (ShardId(s), shard_weight(objects, objects as f64 / 200.0))
        })
        .collect()
}

fn unit_loads(shards: u32) -> BTreeMap<ShardId, f64> {
    (0..shards).map(|s| (ShardId(s), 1.0)).collect()
}

pub async fn run(args: BenchPlacementArgs) -> anyhow::Result<()> {
    println!("## Balance (max/avg load after placing from scratch; bound 1.25)\n");
    println!("| shards | workers | equal loads | measured, skewed loads | skewed: best possible |");
    println!("|---:|---:|---:|---:|---:|");
    for shards in [256, 4096] {
        for workers in [3, 8, 64] {
            let mut equal = Fleet::new(shards, workers, unit_loads(shards));
            equal.settle();
            let mut skewed = Fleet::new(shards, workers, skewed_loads(shards, args.seed));
            skewed.settle();
            println!(
                "| {shards} | {workers} | {:.3} | {:.3} | {:.3} |",
                equal.max_over_average(),
                skewed.max_over_average(),
                skewed.best_possible()
            );
        }
    }

    println!(
        "\n## Shards moved per join and per leave (bound 1.1 × S/N; N = workers after a join, before a leave)\n"
    );
    println!("| shards | workers | join: moved | join: moved ÷ S/N | leave: moved | leave: moved ÷ S/N |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for shards in [256, 4096] {
        for workers in [3, 8, 64] {
            let mut fleet = Fleet::new(shards, workers, unit_loads(shards));
            fleet.settle();
            fleet.eligible.insert(WorkerId(format!("worker-{workers}")));
            let joined = fleet.settle().moves.len();
            fleet.eligible.remove(&WorkerId("worker-0".into()));
            let left = fleet.settle().moves.len();
            // A join ends with, and the leave starts from, workers + 1.
            let share = f64::from(shards) / (workers + 1) as f64;
            println!(
                "| {shards} | {workers}→{} | {joined} | {:.3} | {left} ({}→{workers}) | {:.3} |",
                workers + 1,
                joined as f64 / share,
                workers + 1,
                left as f64 / share
            );
        }
    }

    println!("\n## Load noise (±10% on every shard of a settled map; moves wanted: 0)\n");
    let mut fleet = Fleet::new(4096, 64, skewed_loads(4096, args.seed));
    fleet.settle();
    let mut rng = SplitMix(args.seed ^ 0x5eed);
    let mut noise_moves = Vec::new();
    for _ in 0..10 {
        let base = skewed_loads(4096, args.seed);
        fleet.loads = base.into_iter().map(|(s, w)| (s, w * (0.9 + 0.2 * rng.next_f64()))).collect();
        noise_moves.push(fleet.place().moves.len());
    }
    println!("4,096 shards, 64 workers, 10 noisy rounds: moves per round {noise_moves:?}");

    println!("\n## Time to place 4,096 shards on 1,000 workers (goal < 50 ms)\n");
    let mut from_scratch = Vec::new();
    let mut after_leave = Vec::new();
    for _ in 0..args.repeats.max(1) {
        let mut fleet = Fleet::new(4096, 1000, skewed_loads(4096, args.seed));
        let t = Instant::now();
        fleet.settle();
        from_scratch.push(t.elapsed());
        fleet.eligible.remove(&WorkerId("worker-500".into()));
        let t = Instant::now();
        fleet.settle();
        after_leave.push(t.elapsed());
    }
    println!("| placement | median | max |");
    println!("|---|---:|---:|");
    for (what, times) in [("from scratch", &mut from_scratch), ("after one leave", &mut after_leave)] {
        times.sort();
        println!("| {what} | {} | {} |", ms(times[times.len() / 2]), ms(times[times.len() - 1]));
    }
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
