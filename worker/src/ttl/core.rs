//! The TTL-after-finished controller's pure decision core: upstream
//! `pkg/controller/ttlafterfinished` (`processTTL`, `needsCleanup`, `timeLeft`, `jobFinishTime`) with
//! the clock passed in.
//!
//! The shell's `processJob`, as upstream:
//!
//! 1. Job missing from the cache → done (`Forget`).
//! 2. [`decide`] on the cached Job: `Err` → `AddRateLimited`; [`TtlDecision::Nothing`] → `Forget`;
//!    [`TtlDecision::Requeue`] → `AddAfter(after)` and `Forget`; [`TtlDecision::DeleteNow`] → step 3.
//! 3. GET the Job from the API server: NotFound → `Forget`; other error → `AddRateLimited`.
//! 4. [`decide`] again on the fresh Job (its TTL may have changed), handled as in step 2, except
//!    that [`TtlDecision::DeleteNow`] now means: DELETE `fresh.namespace/fresh.name` with
//!    `propagationPolicy: Foreground` and `preconditions.uid` = the fresh Job's UID.
//! 5. DELETE NotFound → done (someone else deleted it); other errors, precondition conflicts
//!    included → `AddRateLimited` (the retry then finds the Job gone or changed); success → observe
//!    [`DELETION_DURATION_METRIC`] with [`deletion_duration_seconds`] and `Forget`.
//!
//! Only Jobs for which [`needs_cleanup`] holds are enqueued on add and update. A finish time in the
//! future ([`TimeLeft::finished_in_future`]) is logged as a warning: "Found Job finished in the
//! future. This is likely due to time skew in the cluster. Job cleanup will be deferred."

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;

/// The histogram observed after a successful delete (subsystem `ttl_after_finished_controller`).
pub const DELETION_DURATION_METRIC: &str = "ttl_after_finished_controller_job_deletion_duration_seconds";
/// Its buckets, upstream's `ExponentialBuckets(0.1, 2, 14)`: 0.1 s … 819.2 s.
pub const DELETION_DURATION_BUCKETS: [f64; 14] =
    [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6, 819.2];
/// The propagation policy of the delete.
pub const PROPAGATION_POLICY: &str = "Foreground";

const NANOS_PER_SECOND: i128 = 1_000_000_000;
/// Go's zero `time.Time`, 0001-01-01T00:00:00Z, in Unix seconds.
const GO_ZERO_SECONDS: i64 = -62_135_596_800;

/// Why the TTL of a Job cannot be computed (upstream's error texts, for the log).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TtlError {
    /// No `ttlSecondsAfterFinished`, or not finished.
    #[error("job {namespace}/{name} should not be cleaned up")]
    ShouldNotBeCleanedUp { namespace: String, name: String },
    /// The `Complete`/`Failed` condition has no (or a zero) `lastTransitionTime`.
    #[error("unable to find the time when the Job {namespace}/{name} finished")]
    NoFinishTime { namespace: String, name: String },
}

/// What [`time_left`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeLeft {
    /// `expire_at − now` (Go Duration arithmetic, saturating); ≤ 0 means expired.
    pub remaining: SignedDuration,
    /// The `lastTransitionTime` of the first `Complete=True` or `Failed=True` condition.
    pub finish_at: Timestamp,
    /// `finish_at + ttlSecondsAfterFinished`.
    pub expire_at: Timestamp,
    /// `finish_at` is after `now`: clock skew, warn (the expiry is simply later).
    pub finished_in_future: bool,
}

impl TimeLeft {
    /// `Some(remaining)` while time is left (requeue after it), `None` once expired.
    pub fn requeue_after(&self) -> Option<Duration> {
        (self.remaining > SignedDuration::ZERO).then(|| self.remaining.unsigned_abs())
    }
}

/// What to do with a Job now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TtlDecision {
    /// Deleting already, no TTL, or not finished: nothing (`Forget`).
    Nothing,
    /// The TTL expires later: `AddAfter(after)`.
    Requeue { after: Duration, finished_in_future: bool },
    /// Expired. On the cached Job: GET it fresh and decide again. On the fresh Job: DELETE.
    DeleteNow(DeleteNow),
}

/// The DELETE of an expired Job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteNow {
    pub namespace: String,
    pub name: String,
    /// `preconditions.uid` (the Job's UID; `""` if the object has none, as Go sends it).
    pub precondition_uid: String,
    /// Always [`PROPAGATION_POLICY`]: the pods go first, through the garbage collector.
    pub propagation_policy: &'static str,
    /// When the TTL expired, for [`deletion_duration_seconds`].
    pub expired_at: Timestamp,
    pub finished_in_future: bool,
}

fn ttl_seconds(job: &Job) -> Option<i32> {
    job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished)
}

/// The first `Complete=True` or `Failed=True` condition's `lastTransitionTime` (upstream
/// `jobFinishTime` scans for the same condition `IsJobFinished` found). `Some(None)`: finished, but
/// without a usable time.
fn finish_condition_time(job: &Job) -> Option<Option<Timestamp>> {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    conditions
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| c.last_transition_time.as_ref().map(|t| t.0).filter(|t| !is_go_zero(*t)))
}

fn is_go_zero(t: Timestamp) -> bool {
    t.as_second() == GO_ZERO_SECONDS && t.subsec_nanosecond() == 0
}

/// upstream `needsCleanup` (TTL set, Job finished), without the deletion check.
fn has_ttl_and_finished(job: &Job) -> bool {
    ttl_seconds(job).is_some() && finish_condition_time(job).is_some()
}

/// Whether the controller looks at the Job at all (upstream `addJob`/`updateJob`/`processTTL`:
/// `DeletionTimestamp == nil && needsCleanup(job)`): not being deleted, `ttlSecondsAfterFinished`
/// set, and a `Complete` or `Failed` condition with status `True`.
pub fn needs_cleanup(job: &Job) -> bool {
    job.metadata.deletion_timestamp.is_none() && has_ttl_and_finished(job)
}

/// upstream `timeLeft(job, now)`: how long until the TTL expires.
pub fn time_left(job: &Job, now: Timestamp) -> Result<TimeLeft, TtlError> {
    let namespace = job.metadata.namespace.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let (Some(ttl), Some(finish)) = (ttl_seconds(job), finish_condition_time(job)) else {
        return Err(TtlError::ShouldNotBeCleanedUp { namespace, name });
    };
    let Some(finish_at) = finish else {
        return Err(TtlError::NoFinishTime { namespace, name });
    };
    let expire_nanos = finish_at.as_nanosecond() + i128::from(ttl) * NANOS_PER_SECOND;
    // Past jiff's range (year 9999) nothing expires in practice: clamp.
    let expire_at = Timestamp::from_nanosecond(expire_nanos).unwrap_or(if expire_nanos < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    });
    let remaining = expire_nanos - now.as_nanosecond();
    let remaining = i64::try_from(remaining).unwrap_or(if remaining < 0 { i64::MIN } else { i64::MAX });
    Ok(TimeLeft {
        remaining: SignedDuration::from_nanos(remaining),
        finish_at,
        expire_at,
        finished_in_future: finish_at > now,
    })
}

/// upstream `processTTL(job)` at `now`, applied first to the cached Job and then to the fresh one.
pub fn decide(job: &Job, now: Timestamp) -> Result<TtlDecision, TtlError> {
    if !needs_cleanup(job) {
        return Ok(TtlDecision::Nothing);
    }
    let left = time_left(job, now)?;
    if let Some(after) = left.requeue_after() {
        return Ok(TtlDecision::Requeue { after, finished_in_future: left.finished_in_future });
    }
    Ok(TtlDecision::DeleteNow(DeleteNow {
        namespace: job.metadata.namespace.clone().unwrap_or_default(),
        name: job.metadata.name.clone().unwrap_or_default(),
        precondition_uid: job.metadata.uid.clone().unwrap_or_default(),
        propagation_policy: PROPAGATION_POLICY,
        expired_at: left.expire_at,
        finished_in_future: left.finished_in_future,
    }))
}

/// The [`DELETION_DURATION_METRIC`] observation after a successful delete: `time.Since(expiredAt)`
/// in seconds, with `now` read by the shell when the DELETE returned.
pub fn deletion_duration_seconds(expired_at: Timestamp, now: Timestamp) -> f64 {
    let d = now.as_nanosecond() - expired_at.as_nanosecond();
    let d = i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX });
    (d / 1_000_000_000) as f64 + (d % 1_000_000_000) as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobSpec, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn now() -> Timestamp {
        "2026-03-01T12:00:00.123456789Z".parse().expect("valid")
    }

    fn secs(s: i64) -> SignedDuration {
        SignedDuration::from_secs(s)
    }

    fn at(d: SignedDuration) -> Timestamp {
        now().checked_add(d).expect("in range")
    }

    fn cond(type_: &str, status: &str, t: Option<Timestamp>) -> JobCondition {
        JobCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            last_transition_time: t.map(Time),
            ..Default::default()
        }
    }

    /// ttlafterfinished_controller_test.go `newJob(completionTime, failedTime, ttl)`.
    fn new_job(completion: Option<Timestamp>, failed: Option<Timestamp>, ttl: Option<i32>) -> Job {
        let mut conditions = Vec::new();
        if let Some(t) = completion {
            conditions.push(cond("Complete", "True", Some(t)));
        }
        if let Some(t) = failed {
            conditions.push(cond("Failed", "True", Some(t)));
        }
        Job {
            metadata: ObjectMeta {
                name: Some("foobar".into()),
                namespace: Some("default".into()),
                uid: Some("uid-1".into()),
                ..Default::default()
            },
            spec: Some(JobSpec { ttl_seconds_after_finished: ttl, ..Default::default() }),
            status: Some(JobStatus { conditions: Some(conditions), ..Default::default() }),
        }
    }

    // TestTimeLeft, every row.
    #[test]
    fn upstream_time_left() {
        let n = now();
        type Row =
            (&'static str, Option<Timestamp>, Option<Timestamp>, Option<i32>, Option<(i64, Timestamp)>);
        let rows: [Row; 9] = [
            ("Error case: Job unfinished", None, None, Some(100), None),
            ("Error case: Job completed now, no TTL", Some(n), None, None, None),
            ("Job completed now, 0s TTL", Some(n), None, Some(0), Some((0, n))),
            ("Job completed now, 10s TTL", Some(n), None, Some(10), Some((10, at(secs(10))))),
            ("Job completed 10s ago, 15s TTL", Some(at(secs(-10))), None, Some(15), Some((5, at(secs(5))))),
            ("Error case: Job failed now, no TTL", None, Some(n), None, None),
            ("Job failed now, 0s TTL", None, Some(n), Some(0), Some((0, n))),
            ("Job failed now, 10s TTL", None, Some(n), Some(10), Some((10, at(secs(10))))),
            ("Job failed 10s ago, 15s TTL", None, Some(at(secs(-10))), Some(15), Some((5, at(secs(5))))),
        ];
        for (name, completion, failed, ttl, want) in rows {
            let got = time_left(&new_job(completion, failed, ttl), n);
            match want {
                None => {
                    let e = got.expect_err(name);
                    assert!(e.to_string().contains("should not be cleaned up"), "{name}: {e}");
                }
                Some((left, expire_at)) => {
                    let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert_eq!(got.remaining, secs(left), "{name}");
                    assert_eq!(got.expire_at, expire_at, "{name}");
                    assert!(!got.finished_in_future, "{name}");
                }
            }
        }
    }

    // UPSTREAM.md §2 TTL: finished 10s ago, ttl 15 → 5s left; ttl 0 → 0 (expired).
    #[test]
    fn upstream_md_ttl_cases() {
        let job = new_job(Some(at(secs(-10))), None, Some(15));
        assert_eq!(time_left(&job, now()).map(|l| l.requeue_after()), Ok(Some(Duration::from_secs(5))));
        assert_eq!(
            decide(&job, now()),
            Ok(TtlDecision::Requeue { after: Duration::from_secs(5), finished_in_future: false })
        );
        let job = new_job(Some(at(secs(-10))), None, Some(0));
        assert_eq!(time_left(&job, now()).map(|l| l.requeue_after()), Ok(None));
    }

    // needsCleanup (and addJob/updateJob's deletion check).
    #[test]
    fn needs_cleanup_cases() {
        let n = now();
        let cases: [(&str, Job, bool); 8] = [
            ("complete with ttl", new_job(Some(n), None, Some(5)), true),
            ("failed with ttl", new_job(None, Some(n), Some(5)), true),
            ("complete without ttl", new_job(Some(n), None, None), false),
            ("unfinished with ttl", new_job(None, None, Some(5)), false),
            (
                "deleting",
                {
                    let mut j = new_job(Some(n), None, Some(5));
                    j.metadata.deletion_timestamp = Some(Time(n));
                    j
                },
                false,
            ),
            (
                "Complete=False",
                {
                    let mut j = new_job(None, None, Some(5));
                    j.status = Some(JobStatus {
                        conditions: Some(vec![cond("Complete", "False", Some(n))]),
                        ..Default::default()
                    });
                    j
                },
                false,
            ),
            (
                "FailureTarget only",
                {
                    let mut j = new_job(None, None, Some(5));
                    j.status = Some(JobStatus {
                        conditions: Some(vec![cond("FailureTarget", "True", Some(n))]),
                        ..Default::default()
                    });
                    j
                },
                false,
            ),
            ("no spec, no status", Job::default(), false),
        ];
        for (name, job, want) in cases {
            assert_eq!(needs_cleanup(&job), want, "{name}");
        }
    }

    #[test]
    fn zero_or_missing_transition_time_is_an_error() {
        for t in [None, Some(Timestamp::from_second(GO_ZERO_SECONDS).expect("valid"))] {
            let mut job = new_job(None, None, Some(5));
            job.status =
                Some(JobStatus { conditions: Some(vec![cond("Complete", "True", t)]), ..Default::default() });
            let e = time_left(&job, now()).expect_err("zero time");
            assert_eq!(e.to_string(), "unable to find the time when the Job default/foobar finished");
            assert_eq!(decide(&job, now()), Err(e));
        }
    }

    /// The first terminal condition decides, as jobFinishTime scans.
    #[test]
    fn first_terminal_condition_gives_the_finish_time() {
        let job = new_job(Some(at(secs(-100))), Some(at(secs(-5))), Some(10));
        assert_eq!(time_left(&job, now()).map(|l| l.finish_at), Ok(at(secs(-100))));
    }

    #[test]
    fn finished_in_the_future_is_reported_and_requeued() {
        let job = new_job(Some(at(secs(30))), None, Some(10));
        let left = time_left(&job, now()).expect("ok");
        assert!(left.finished_in_future);
        assert_eq!(left.remaining, secs(40));
        assert_eq!(
            decide(&job, now()),
            Ok(TtlDecision::Requeue { after: Duration::from_secs(40), finished_in_future: true })
        );
    }

    #[test]
    fn expired_job_is_deleted_foreground_with_its_uid() {
        let job = new_job(Some(at(secs(-20))), None, Some(15));
        assert_eq!(
            decide(&job, now()),
            Ok(TtlDecision::DeleteNow(DeleteNow {
                namespace: "default".into(),
                name: "foobar".into(),
                precondition_uid: "uid-1".into(),
                propagation_policy: "Foreground",
                expired_at: at(secs(-5)),
                finished_in_future: false,
            }))
        );
        // Exactly at expiry (remaining 0) is expired too.
        let job = new_job(Some(at(secs(-15))), None, Some(15));
        assert!(matches!(decide(&job, now()), Ok(TtlDecision::DeleteNow(_))));
        assert_eq!(deletion_duration_seconds(at(secs(-5)), now()), 5.0);
        assert_eq!(deletion_duration_seconds(now(), at(SignedDuration::from_millis(1500))), 1.5);
    }

    /// The fresh GET decides again: a TTL raised meanwhile turns the delete into a requeue, and a
    /// Job being deleted into nothing.
    #[test]
    fn fresh_job_is_rechecked() {
        let cached = new_job(Some(at(secs(-20))), None, Some(15));
        assert!(matches!(decide(&cached, now()), Ok(TtlDecision::DeleteNow(_))));
        let mut fresh = cached.clone();
        fresh.spec = Some(JobSpec { ttl_seconds_after_finished: Some(60), ..Default::default() });
        assert_eq!(
            decide(&fresh, now()),
            Ok(TtlDecision::Requeue { after: Duration::from_secs(40), finished_in_future: false })
        );
        let mut fresh = cached.clone();
        fresh.metadata.deletion_timestamp = Some(Time(now()));
        assert_eq!(decide(&fresh, now()), Ok(TtlDecision::Nothing));
        let mut fresh = cached;
        fresh.spec = None;
        assert_eq!(decide(&fresh, now()), Ok(TtlDecision::Nothing));
    }

    #[test]
    fn extreme_values_do_not_panic() {
        let mut job = new_job(Some(Timestamp::MAX), None, Some(i32::MAX));
        let _ = decide(&job, Timestamp::MIN);
        job = new_job(Some(Timestamp::MIN), None, Some(i32::MIN));
        let left = time_left(&job, Timestamp::MAX).expect("ok");
        assert!(left.remaining < SignedDuration::ZERO);
        let _ = deletion_duration_seconds(Timestamp::MIN, Timestamp::MAX);
    }
}
