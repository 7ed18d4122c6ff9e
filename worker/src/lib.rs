//! The batchfleet worker: the shard runtime plus the Job, CronJob and TTL-after-finished
//! reconcilers, each a pure decision core and a thin I/O shell.

pub mod api_errors;
pub mod client;
pub mod clock;
pub mod cronjob;
pub mod events;
pub mod fleet;
pub mod health;
pub mod informer;
pub mod job;
pub mod runtime;
pub mod serve_metrics;
pub mod shards;
pub mod standalone;
pub mod ttl;
