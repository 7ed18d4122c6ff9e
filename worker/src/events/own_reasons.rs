//! The reasons of the Events batchfleet records beyond upstream (docs/beyond-upstream.md).
//!
//! Upstream's spam filter gives each object one bucket (25 Events, then one every 5 minutes)
//! shared by every reason. A large Job spends it on `SuccessfulCreate` within its first syncs, so
//! a signal raised later (its status nearing the size limit, pod creates blocked) would be
//! dropped, and batchfleet's signals would in turn spend the budget of upstream's own Events.
//! These reasons get a bucket of their own per object, with upstream's burst and rate; upstream's
//! reasons keep theirs exactly as upstream fills it. Each signal is already raised once per
//! change, not per sync.

use crate::finalizers::sweeper::REJECTED_REASON;
use crate::job::core::counted_pods::EVENT_INVALID_ANNOTATION;
use crate::job::core::stall::{
    EVENT_POD_CREATION_BLOCKED, EVENT_POD_FAILURE_BACKOFF, EVENT_PODS_TERMINATING_ON_LOST_NODE,
};
use crate::job::core::status_size::{EVENT_BELOW_LIMIT, EVENT_NEAR_LIMIT};
use crate::ttl::pod_core::BAD_TTL_REASON;

const REASONS: [&str; 12] = [
    EVENT_POD_CREATION_BLOCKED,
    EVENT_POD_FAILURE_BACKOFF,
    EVENT_PODS_TERMINATING_ON_LOST_NODE,
    EVENT_NEAR_LIMIT,
    EVENT_BELOW_LIMIT,
    EVENT_INVALID_ANNOTATION,
    BAD_TTL_REASON,
    REJECTED_REASON,
    // The CronJob controller's (`cronjob/core/events.rs`).
    "CatchUp",
    "ForbidBlocked",
    "Triggered",
    "TriggerSkipped",
];

/// Whether `reason` is one of batchfleet's own, which the spam filter counts apart.
pub fn is_own(reason: &str) -> bool {
    REASONS.contains(&reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_reasons_are_not_own_and_batchfleets_are() {
        for upstream in [
            "SuccessfulCreate",
            "FailedCreate",
            "BackoffLimitExceeded",
            "SawCompletedJob",
            "JobAlreadyActive",
        ] {
            assert!(!is_own(upstream), "{upstream}");
        }
        for own in [EVENT_NEAR_LIMIT, EVENT_POD_CREATION_BLOCKED, "ForbidBlocked", "Triggered"] {
            assert!(is_own(own), "{own}");
        }
    }
}
