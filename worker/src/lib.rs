//! The batchfleet worker: the shard runtime plus the Job, CronJob and TTL-after-finished
//! reconcilers, each a pure decision core and a thin I/O shell.

pub mod cronjob;
pub mod runtime;
pub mod shards;
