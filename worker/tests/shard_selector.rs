//! The worker's `shardSelector`s against the sim's KEP-5866 parser: the sim parses every selector
//! the worker builds, and selects exactly the namespaces the worker's hash puts in those shards.

use std::collections::BTreeSet;

use batchfleet_sim::selector::ShardSelector;
use batchfleet_worker::shards::ShardSpace;

/// A deterministic spread of shard sets: singles, neighbours that merge, scattered sets, all.
fn shard_sets(count: u32) -> Vec<BTreeSet<u32>> {
    let mut sets: Vec<BTreeSet<u32>> = (0..count).map(|s| BTreeSet::from([s])).collect();
    sets.push((0..count).collect());
    sets.push((0..count).step_by(2).collect());
    sets.push((0..count / 2).collect());
    sets.push((count / 2..count).collect());
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..50 {
        let mut set = BTreeSet::new();
        for s in 0..count {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x.is_multiple_of(3) {
                set.insert(s);
            }
        }
        sets.push(set);
    }
    sets.retain(|s| !s.is_empty());
    sets
}

#[test]
fn the_sim_parses_every_worker_selector_and_selects_exactly_the_workers_namespaces() {
    let namespaces: Vec<String> =
        (0..3000).map(|i| format!("team-{i}")).chain(["default".into(), "".into()]).collect();
    for count in [1, 2, 16, 256] {
        let space = ShardSpace::new(count).unwrap();
        for shards in shard_sets(count) {
            let selector = space.selector(&shards).expect("a non-empty set has a selector");
            let parsed = ShardSelector::parse(&selector)
                .unwrap_or_else(|e| panic!("the sim rejects the worker's selector {selector:?}: {e}"));
            for ns in &namespaces {
                assert_eq!(
                    parsed.matches(ns, ""),
                    shards.contains(&space.shard_of(ns)),
                    "namespace {ns:?}, {count} shards, selector {selector}"
                );
            }
        }
    }
}
