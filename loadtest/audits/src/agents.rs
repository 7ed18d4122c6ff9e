//! Who a request came from, and which shard a namespace falls in, as the fleet computes it.

/// The worker id in a `fleet-worker/VERSION (ID)` User-Agent.
pub fn worker_of(user_agent: &str) -> Option<&str> {
    user_agent.strip_prefix("fleet-worker/")?.split_once(" (")?.1.strip_suffix(')')
}

/// The shard of `namespace` among `shards` (a power of two): shard i covers the hashes
/// `[i·2^64/S, (i+1)·2^64/S)`, as the fleet computes it.
pub fn shard_of(namespace: &str, shards: u32) -> u32 {
    batchfleet_shards::shard_of_key(batchfleet_shards::fnv1a64(namespace.as_bytes()), shards)
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
    fn a_namespace_is_in_the_shard_the_fleet_gives_it() {
        assert_eq!(shard_of("anything", 1), 0);
        let space = batchfleet_shards::ShardSpace::new(256).expect("a power of two");
        for i in 0..500 {
            let ns = format!("team-{i}");
            assert_eq!(shard_of(&ns, 256), space.shard_of(&ns), "{ns}");
        }
    }
}
