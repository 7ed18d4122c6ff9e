//! The batchfleet worker: the shard runtime plus the Job, CronJob and TTL-after-finished
//! reconcilers, each a pure decision core and a thin I/O shell.

pub mod api_errors;
pub mod client;
pub mod clock;
pub mod cronjob;
pub mod events;
pub mod executor;
pub mod finalizers;
pub mod fleet;
pub mod health;
pub mod informer;
pub mod jitter;
pub mod job;
pub mod retry;
pub mod runtime;
pub mod serve_metrics;
/// The shard model, shared with the sim and the audits.
pub use batchfleet_shards as shards;
pub mod start;
pub mod ttl;
