//! Who a request came from, and which shard a namespace falls in, as the fleet computes it.

/// The worker id in a `fleet-worker/VERSION (ID)` User-Agent.
pub fn worker_of(user_agent: &str) -> Option<&str> {
    user_agent.strip_prefix("fleet-worker/")?.split_once(" (")?.1.strip_suffix(')')
}

/// The shard of `namespace` among `shards` (a power of two): shard i covers the hashes
/// `[i·2^64/S, (i+1)·2^64/S)`.
pub fn shard_of(namespace: &str, shards: u32) -> u32 {
    shard_of_hash(batchfleet_sim::selector::shard::fnv1a64(namespace.as_bytes()), shards)
}

/// The shard whose range holds `hash`.
pub fn shard_of_hash(hash: u64, shards: u32) -> u32 {
    ((u128::from(hash) * u128::from(shards.max(1))) >> 64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_worker_of_a_fleet_worker_agent_only() {
        assert_eq!(worker_of("fleet-worker/0.1.0 (w-3)"), Some("w-3"));
        assert_eq!(worker_of("fleet-coordinator/0.1.0 (c-0)"), None);
        assert_eq!(worker_of("fleet-worker/0.1.0"), None);
    }

    #[test]
    fn shards_are_equal_ranges_of_the_hash() {
        assert_eq!(shard_of("anything", 1), 0);
        assert_eq!(shard_of_hash(0, 16), 0);
        assert_eq!(shard_of_hash((1 << 60) - 1, 16), 0);
        assert_eq!(shard_of_hash(1 << 60, 16), 1);
        assert_eq!(shard_of_hash(u64::MAX, 16), 15);
        assert_eq!(shard_of_hash(u64::MAX, 256), 255);
    }
}
