//! Checks of the fleet from the server's side, never from the fleet's view of itself: the sim's
//! audit log (who wrote what, and when) and watches on the cluster's objects. Shared by the
//! load-test harness and the coordinator's fleet tests; each check is a pure function over what
//! was recorded, so that a test can feed it a violation.

pub mod agents;
pub mod api_usage;
pub mod cron;
pub mod handover;
pub mod jobs;
pub mod logs;
pub mod objects;
pub mod outcome;
pub mod pod_summary;
pub mod podgc;
pub mod tenure;

pub use outcome::Outcome;

#[cfg(test)]
mod test_events;
