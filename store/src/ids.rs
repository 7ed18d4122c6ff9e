//! The names the fleet gives its parts: shards by index, workers by their `--worker-id`.

use std::fmt;

/// A virtual shard: index `i` covers `[i·2^64/S, (i+1)·2^64/S)` of the namespace hash space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId(pub u32);

/// A worker, by the id it registers with (`fleet-worker --worker-id`, the pod's hostname).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkerId(pub String);

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for WorkerId {
    fn from(s: &str) -> Self {
        WorkerId(s.to_string())
    }
}
