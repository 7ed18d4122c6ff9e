//! The CronJob signals beyond upstream (docs/beyond-upstream.md): the next-run gauge, the
//! missed-run, catch-up and trigger counters, and the Forbid-blocked Event, recorded once per
//! change of its "N runs skipped".

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus::{GaugeVec, IntCounter, IntCounterVec, Opts, Registry};

use super::core::{MissedReason, TriggerResult};
use crate::informer::ObjectKey;

pub struct CronJobSignals {
    /// kube-state-metrics' `kube_cronjob_next_schedule_time{namespace,cronjob}` shape: one series
    /// per CronJob this worker syncs (Unix seconds), as KSM has; removed when the CronJob is
    /// deleted, will not run, or its shard leaves this worker.
    next_schedule_time: GaugeVec,
    missed: IntCounterVec,
    forbid_skipped: IntCounter,
    catch_up_runs: IntCounter,
    triggers: IntCounterVec,
    /// The "N runs skipped" last recorded per Forbid-blocked CronJob.
    forbid_reported: Mutex<HashMap<ObjectKey, usize>>,
}

impl CronJobSignals {
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let next_schedule_time = GaugeVec::new(
            Opts::new(
                "batchfleet_cronjob_next_schedule_time_seconds",
                "Next time the CronJob's schedule fires, in Unix seconds (batchfleet.io/next-schedule-time)",
            ),
            &["namespace", "cronjob"],
        )?;
        let missed = IntCounterVec::new(
            Opts::new(
                "batchfleet_cronjob_missed_schedules_total",
                "Schedule times not run, by reason: starting_deadline (later than startingDeadlineSeconds), not_run (only the most recent missed time runs, or Forbid skipped it), too_many_missed (TooManyMissedTimes events)",
            ),
            &["reason"],
        )?;
        let forbid_skipped = IntCounter::with_opts(Opts::new(
            "batchfleet_cronjob_forbid_skipped_runs_total",
            "Schedule times skipped because concurrencyPolicy Forbid found a Job still running",
        ))?;
        let catch_up_runs = IntCounter::with_opts(Opts::new(
            "batchfleet_cronjob_catch_up_runs_total",
            "Jobs created for missed schedule times under batchfleet.io/catch-up",
        ))?;
        let triggers = IntCounterVec::new(
            Opts::new("batchfleet_cronjob_triggers_total", "batchfleet.io/trigger values handled, by result"),
            &["result"],
        )?;
        registry.register(Box::new(next_schedule_time.clone()))?;
        registry.register(Box::new(missed.clone()))?;
        registry.register(Box::new(forbid_skipped.clone()))?;
        registry.register(Box::new(catch_up_runs.clone()))?;
        registry.register(Box::new(triggers.clone()))?;
        Ok(Self {
            next_schedule_time,
            missed,
            forbid_skipped,
            catch_up_runs,
            triggers,
            forbid_reported: Mutex::new(HashMap::new()),
        })
    }

    pub fn next_schedule_time(&self, key: &ObjectKey, at: Option<jiff::Timestamp>) {
        let labels = [key.namespace.as_str(), key.name.as_str()];
        match at {
            Some(t) => self.next_schedule_time.with_label_values(&labels).set(t.as_second() as f64),
            None => {
                let _ = self.next_schedule_time.remove_label_values(&labels);
            }
        }
    }

    pub fn missed(&self, reason: MissedReason, count: usize) {
        self.missed.with_label_values(&[reason.label()]).inc_by(count as u64);
    }

    pub fn caught_up(&self) {
        self.catch_up_runs.inc();
    }

    pub fn trigger(&self, result: TriggerResult) {
        self.triggers.with_label_values(&[result.label()]).inc();
    }

    /// Whether to record the Forbid-blocked Event for `skipped` runs: only when it differs from
    /// the last one recorded for the CronJob. The counter grows by the runs newly skipped.
    pub fn forbid_blocked(&self, key: &ObjectKey, skipped: usize) -> bool {
        let mut reported = self.forbid_reported.lock().unwrap_or_else(|e| e.into_inner());
        let before = reported.insert(key.clone(), skipped);
        if before == Some(skipped) {
            return false;
        }
        let new = skipped.saturating_sub(before.unwrap_or(0)).max(1);
        self.forbid_skipped.inc_by(new as u64);
        true
    }

    /// A sync of `key` found no Forbid block: the next block counts from scratch.
    pub fn not_blocked(&self, key: &ObjectKey) {
        self.forbid_reported.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }

    /// The CronJob is gone (or no longer this worker's): drop its series and state.
    pub fn forget(&self, key: &ObjectKey) {
        self.next_schedule_time(key, None);
        self.not_blocked(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forbid_event_is_recorded_once_per_change_of_the_skipped_count() {
        let signals = CronJobSignals::register(&Registry::new()).unwrap();
        let key = ObjectKey::new("ns".to_string(), "cj".to_string());
        assert!(signals.forbid_blocked(&key, 1));
        assert!(!signals.forbid_blocked(&key, 1), "a resync with the same block says nothing new");
        assert!(signals.forbid_blocked(&key, 3));
        assert_eq!(signals.forbid_skipped.get(), 3);
        signals.not_blocked(&key);
        assert!(signals.forbid_blocked(&key, 1), "a new block is reported again");
        assert_eq!(signals.forbid_skipped.get(), 4);
    }

    #[test]
    fn the_next_schedule_time_series_goes_with_the_cronjob() {
        let registry = Registry::new();
        let signals = CronJobSignals::register(&registry).unwrap();
        let key = ObjectKey::new("ns".to_string(), "cj".to_string());
        signals.next_schedule_time(&key, Some(jiff::Timestamp::from_second(60).unwrap()));
        assert_eq!(signals.next_schedule_time.with_label_values(&["ns", "cj"]).get(), 60.0);
        signals.forget(&key);
        let families = registry.gather();
        let series: usize = families
            .iter()
            .filter(|f| f.name() == "batchfleet_cronjob_next_schedule_time_seconds")
            .map(|f| f.get_metric().len())
            .sum();
        assert_eq!(series, 0);
    }
}
