//! The consistent-hash ring the placement consults: each worker appears as many virtual nodes,
//! and a shard's preference is a fixed sequence of workers that depends only on who is on the
//! ring, so a join or a leave changes the preferences of only the shards it must.

use std::hash::{Hash, Hasher};

use hashring::HashRing;

use crate::ids::WorkerId;

/// One of a worker's points on the ring. Its position hashes the worker's name, so it does not
/// move when other workers come or go; `worker` is the caller's index of that name.
#[derive(Debug, Clone)]
struct VirtualNode<'a> {
    name: &'a str,
    replica: u32,
    worker: usize,
}

impl Hash for VirtualNode<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        self.replica.hash(state);
    }
}

pub struct Ring<'a> {
    ring: HashRing<VirtualNode<'a>>,
    workers: usize,
}

impl<'a> Ring<'a> {
    /// A ring of `workers`, each known to callers by its index in the slice.
    pub fn new(workers: &'a [WorkerId], virtual_nodes_per_worker: u32) -> Self {
        let mut ring = HashRing::new();
        ring.batch_add(
            workers
                .iter()
                .enumerate()
                .flat_map(|(worker, w)| {
                    (0..virtual_nodes_per_worker).map(move |replica| VirtualNode {
                        name: &w.0,
                        replica,
                        worker,
                    })
                })
                .collect(),
        );
        Self { ring, workers: workers.len() }
    }

    /// The shard's first choice.
    pub fn home(&self, shard: usize) -> Option<usize> {
        self.ring.get(&(shard as u32, 0u32)).map(|v| v.worker)
    }

    /// The shard's preferences, best first, without repeats: the ring is probed with the shard
    /// hashed together with the probe number (bounded-load consistent hashing by rehashing), so
    /// each probe lands on a worker in proportion to its share of the ring. Stops after
    /// `max_probes`; callers fall back to the least-loaded worker.
    pub fn preferences(&self, shard: usize, max_probes: u32) -> impl Iterator<Item = usize> + '_ {
        let mut seen: Vec<usize> = Vec::new();
        let distinct = self.workers;
        (0..max_probes).filter_map(move |probe| {
            if seen.len() == distinct {
                return None;
            }
            let worker = self.ring.get(&(shard as u32, probe))?.worker;
            if seen.contains(&worker) {
                return None;
            }
            seen.push(worker);
            Some(worker)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::BTreeSet;

    fn workers(n: usize) -> Vec<WorkerId> {
        (0..n).map(|i| WorkerId(format!("w-{i}"))).collect()
    }

    #[test]
    fn a_join_changes_the_home_of_about_its_share_of_shards() {
        let (four, five) = (workers(4), workers(5));
        let before = Ring::new(&four, 128);
        let after = Ring::new(&five, 128);
        let changed = (0..4096).filter(|s| before.home(*s) != after.home(*s)).count();
        // Consistent hashing: only shards now homed on the newcomer change, about S/5.
        assert!((600..1100).contains(&changed), "{changed} of 4096 changed home");
        for s in 0..4096 {
            let (b, a) = (before.home(s), after.home(s));
            assert!(b == a || a == Some(4), "shard {s} moved {b:?} -> {a:?}");
        }
    }

    #[test]
    fn preferences_are_distinct_and_start_at_home() {
        let three = workers(3);
        let ring = Ring::new(&three, 64);
        for s in 0..256 {
            let prefs: Vec<_> = ring.preferences(s, 64).collect();
            assert_eq!(prefs.first().copied(), ring.home(s));
            let distinct: BTreeSet<_> = prefs.iter().collect();
            assert_eq!(distinct.len(), prefs.len());
        }
    }
}
