//! The fleet state's knobs (`fleet-coordinator`'s flags set them).

use std::time::Duration;

use crate::placement::PlacementConfig;

#[derive(Debug, Clone)]
pub struct FleetConfig {
    pub placement: PlacementConfig,
    /// Moves started at once; the rest wait for a later step.
    pub max_moves_in_flight: usize,
    /// A move's current command goes again when it has made no progress for this long (the
    /// worker may have missed it while reconnecting; every command is idempotent).
    pub resend_after: Duration,
    /// After becoming leader, how long placement waits for live workers to register.
    pub registration_grace: Duration,
    /// A shard that moved for balance, while every shard's load was known, is not moved again
    /// for balance within this long. Moves made before then (a new fleet filling its workers
    /// before their first reports) were decided on guessed loads, and are not held: the first
    /// placement on measured loads may correct them at once.
    pub min_move_interval: Duration,
    /// A move whose new owner has not warmed the shard within this long is cancelled (the old
    /// owner, if any, keeps acting) and placed again.
    pub prepare_timeout: Duration,
    /// A worker that registered with this leader and then lost its session for this long is
    /// suspected lost: its shards are warmed on the workers they would go to (standby moves),
    /// so that they act as soon as its lease runs out instead of only then starting to list.
    /// Well inside the shortest lease, so the warming still overlaps the wait; long enough that
    /// a broken connection or a process restarted at once moves nothing.
    pub standby_after: Duration,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            placement: PlacementConfig::default(),
            max_moves_in_flight: 64,
            resend_after: Duration::from_secs(3),
            registration_grace: Duration::from_secs(10),
            min_move_interval: Duration::from_secs(60),
            prepare_timeout: Duration::from_secs(120),
            standby_after: Duration::from_secs(1),
        }
    }
}
