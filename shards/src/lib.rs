//! The shard model (DESIGN.md), in the one place the worker, the sim, the audits and the
//! coordinator's tests read it from: a namespace's key is `fnv1a64(namespace)`, the key space is
//! cut into S equal ranges, and a worker watches only the ranges it owns through KEP-5866's
//! `shardSelector`.

use std::collections::BTreeSet;
use std::hash::Hasher;

/// 64-bit FNV-1a (Go's `hash/fnv.New64a`), the hash KEP-5866's `shardRange` uses.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

/// The shard among `count` (a power of two, at least 1) whose range `[i·2^64/S, (i+1)·2^64/S)`
/// holds `key`.
pub fn shard_of_key(key: u64, count: u32) -> u32 {
    ((u128::from(key) * u128::from(count.max(1))) >> 64) as u32
}

/// The fixed cut of the key space into `count` shards (a power of two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpace {
    count: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the shard count must be a power of two between 1 and 65536, got {0}")]
pub struct BadShardCount(pub u32);

impl ShardSpace {
    pub fn new(count: u32) -> Result<Self, BadShardCount> {
        if count == 0 || !count.is_power_of_two() || count > 65536 {
            return Err(BadShardCount(count));
        }
        Ok(Self { count })
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// The shard of a namespace.
    pub fn shard_of(&self, namespace: &str) -> u32 {
        shard_of_key(fnv1a64(namespace.as_bytes()), self.count)
    }

    /// `[start, end)` of shard `i`, with `end` as a u128 so the last shard can end at 2^64.
    pub fn range(&self, shard: u32) -> (u128, u128) {
        let width = (1u128 << 64) / u128::from(self.count);
        (u128::from(shard) * width, u128::from(shard + 1) * width)
    }

    /// The `shardSelector` for a set of shards: adjacent shards merge into one range.
    pub fn selector(&self, shards: &BTreeSet<u32>) -> Option<String> {
        let mut ranges: Vec<(u128, u128)> = Vec::new();
        for s in shards.iter().filter(|s| **s < self.count) {
            let (start, end) = self.range(*s);
            match ranges.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => ranges.push((start, end)),
            }
        }
        if ranges.is_empty() {
            return None;
        }
        let hex = |v: u128| {
            if v == 1u128 << 64 { "0x10000000000000000".to_string() } else { format!("0x{v:016x}") }
        };
        Some(
            ranges
                .iter()
                .map(|(s, e)| format!("shardRange(object.metadata.namespace, '{}', '{}')", hex(*s), hex(*e)))
                .collect::<Vec<_>>()
                .join(" || "),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn every_namespace_is_in_exactly_the_shard_whose_range_holds_its_hash() {
        let space = ShardSpace::new(256).unwrap();
        for i in 0..2000 {
            let ns = format!("team-{i}");
            let shard = space.shard_of(&ns);
            let (start, end) = space.range(shard);
            let h = u128::from(fnv1a64(ns.as_bytes()));
            assert!(start <= h && h < end, "{ns}");
        }
        assert_eq!(ShardSpace::new(1).unwrap().shard_of("x"), 0);
        assert_eq!(ShardSpace::new(65536).unwrap().shard_of("team-1"), (fnv1a64(b"team-1") >> 48) as u32);
        assert!(ShardSpace::new(3).is_err());
        assert!(ShardSpace::new(0).is_err());
    }

    #[test]
    fn a_key_falls_in_the_shard_whose_range_holds_it() {
        assert_eq!(shard_of_key(0, 16), 0);
        assert_eq!(shard_of_key((1 << 60) - 1, 16), 0);
        assert_eq!(shard_of_key(1 << 60, 16), 1);
        assert_eq!(shard_of_key(u64::MAX, 16), 15);
        assert_eq!(shard_of_key(u64::MAX, 1), 0);
    }

    #[test]
    fn selectors_merge_adjacent_shards() {
        let space = ShardSpace::new(4).unwrap();
        let all: BTreeSet<u32> = (0..4).collect();
        assert_eq!(
            space.selector(&all).unwrap(),
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')"
        );
        let split: BTreeSet<u32> = [0, 2, 3].into_iter().collect();
        assert_eq!(
            space.selector(&split).unwrap(),
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
        );
        assert_eq!(space.selector(&BTreeSet::new()), None);
    }
}
