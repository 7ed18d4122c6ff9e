//! CronJob schedules: the shared `batchfleet-cron` crate (the sim validates with the same parser).

pub use batchfleet_cron::*;
