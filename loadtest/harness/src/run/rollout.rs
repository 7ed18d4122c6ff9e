//! `rolling-restart`: every worker restarted one at a time in StatefulSet order, as `kubectl
//! rollout restart statefulset` does (RollingUpdate, the highest ordinal first): SIGTERM, wait
//! for the exit, start the same id, wait until its `/readyz` answers 200 (the readiness probe a
//! StatefulSet would gate on), next. Nothing undrains anyone: a SIGTERMed worker's drain ends
//! when its process does, so the next process under its id takes shards again.
//!
//! What the rollout's goals are judged from, all outside the fleet's processes:
//! - whether each move was graceful: the shard map in the coordination store, read the moment
//!   each worker had exited. A worker that exits owning nothing there had every shard moved off
//!   by the hand-over; a shard it still owned would be freed only by its lease's expiry;
//! - moves: the stored epochs after the rollout settled, minus those before it started;
//! - gaps and unowned time: the sim's audit log (`batchfleet_audits::handover`), which sees
//!   writes only: a gap there runs from a change the old owner never answered to the new owner's
//!   first write;
//! - Job latency: the watches, Jobs alive during the rollout against those that lived wholly
//!   before it.
//!
//! Beside them, the leader's own figures over the rollout, scraped from its `/metrics` before
//! and after (`leader_metrics`): its moves by how they ended (none may end by a lease's expiry:
//! the graceful goal holds it to that), its hand-over gaps (REVOKED → ACTIVATED: the old owner's
//! last write to the new owner's first possible write, which only the leader sees) and its
//! unowned shard-seconds. The gap and unowned goals are judged from the audit log, from outside;
//! the leader's figures are shown beside them (a histogram's bucket bound over a few dozen moves
//! of a CI run is no figure to fail a run on).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use batchfleet_audits::Outcome;
use batchfleet_audits::handover::HandOver;
use jiff::Timestamp;
use serde::Serialize;
use tokio::time::Instant;

use super::leader_metrics::{LeaderFigures, Scrape};
use super::report::{Percentiles, seconds};
use super::stored_map::{self, StoredMap};
use crate::fleet_processes::FleetProcesses;
use crate::proc_stat::UsageSampler;
use crate::scenario::Goals;

/// How long a SIGTERMed worker may take to be drained and exit (its `--drain-timeout` is 60 s).
const EXIT_WITHIN: Duration = Duration::from_secs(90);
/// How long a restarted worker may take to answer `/readyz` with 200.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// How long the shard map may take to settle after the last worker is ready: every shard owned,
/// none moving, the epochs unchanged for [`SETTLED_FOR`].
const SETTLE_WITHIN: Duration = Duration::from_secs(60);
const SETTLED_FOR: Duration = Duration::from_secs(2);
/// The baseline's Jobs are those created from this long after the workload's start (the fleet's
/// first seconds under load are no steady state) that finished before the rollout started.
pub const BASELINE_FROM: Duration = Duration::from_secs(5);

/// One worker's restart.
#[derive(Debug, Clone, Serialize)]
pub struct RolloutStep {
    pub worker: String,
    /// Seconds from the SIGTERM to the exit, its status, and to the new process's readiness.
    pub exited_after_seconds: f64,
    pub exit_status: String,
    /// The shards the stored map still gave the worker once it had exited (none: every one of
    /// its shards had moved by the hand-over).
    pub owned_at_exit: Vec<u32>,
    pub ready_after_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the rollout did, for the report and its goals.
#[derive(Debug, Clone, Serialize)]
pub struct RolloutRecord {
    pub started: Timestamp,
    /// When the shard map had settled after the last restart (or the rollout stopped).
    pub ended: Timestamp,
    pub steps: Vec<RolloutStep>,
    /// Every worker restarted and ready, and the stored map settled after.
    pub completed: bool,
    /// The stored epochs' growth over the rollout: one per move.
    pub moves: u64,
    pub shards: u32,
    /// Workers the stored map still had draining at the end: a drain that outlived its process
    /// leaves the next process under that id without shards.
    pub left_draining: Vec<String>,
    /// The leader's figures over the rollout; `None` when it could not be scraped twice, or the
    /// leadership changed in between.
    pub leader: Option<LeaderFigures>,
}

/// Worker ids in StatefulSet RollingUpdate order: the highest ordinal (`w-<i>`) first.
pub fn statefulset_order<'a>(workers: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut ids: Vec<(Option<u64>, String)> =
        workers.map(|id| (id.strip_prefix("w-").and_then(|i| i.parse().ok()), id.to_string())).collect();
    ids.sort_by(|a, b| b.cmp(a));
    ids.into_iter().map(|(_, id)| id).collect()
}

/// Restarts every worker of `fleet` in StatefulSet order; stops at the first step that fails,
/// as a rollout halts on a pod that does not become ready.
pub async fn run(
    fleet: &mut FleetProcesses,
    map: &StoredMap,
    sampler: &UsageSampler,
    restarts: &mut usize,
) -> anyhow::Result<RolloutRecord> {
    let started = Timestamp::now();
    let before = map.load().await.context("reading the stored shard map")?;
    let leader_before = fleet.leader_metrics().await;
    let mut steps = Vec::new();
    let mut completed = true;
    for worker in statefulset_order(fleet.workers.iter().map(|(id, _)| id.as_str())) {
        let step = restart_one(fleet, map, &worker, sampler, restarts).await;
        tracing::info!(?step, "rollout step");
        let failed = step.error.is_some();
        steps.push(step);
        if failed {
            completed = false;
            break;
        }
    }
    let settled = completed && wait_settled(map).await;
    let after = map.load().await.context("reading the stored shard map")?;
    let leader = match (leader_before, fleet.leader_metrics().await) {
        (Some((i, before)), Some((j, after))) if i == j => Some(LeaderFigures::between(
            format!("coordinator-{i}"),
            &Scrape::parse(&before),
            &Scrape::parse(&after),
        )),
        _ => None,
    };
    let before_epochs = stored_map::epochs(&before);
    let moves = stored_map::epochs(&after)
        .iter()
        .map(|(s, e)| e.saturating_sub(before_epochs.get(s).copied().unwrap_or(0)))
        .sum();
    Ok(RolloutRecord {
        started,
        ended: Timestamp::now(),
        steps,
        completed: settled,
        moves,
        shards: after.shard_count,
        left_draining: after.draining.iter().cloned().collect(),
        leader,
    })
}

async fn restart_one(
    fleet: &mut FleetProcesses,
    map: &StoredMap,
    worker: &str,
    sampler: &UsageSampler,
    restarts: &mut usize,
) -> RolloutStep {
    let mut step = RolloutStep {
        worker: worker.to_string(),
        exited_after_seconds: 0.0,
        exit_status: String::new(),
        owned_at_exit: Vec::new(),
        ready_after_seconds: None,
        error: None,
    };
    let result: anyhow::Result<()> = async {
        let i = fleet.workers.iter().position(|(w, _)| w == worker).context("no such worker")?;
        let sigterm = Instant::now();
        super::faults::signal(fleet.workers[i].1.id(), "-TERM")?;
        let status = tokio::time::timeout(EXIT_WITHIN, fleet.workers[i].1.wait())
            .await
            .with_context(|| format!("did not exit within {EXIT_WITHIN:?} of SIGTERM"))??;
        step.exited_after_seconds = seconds(sigterm.elapsed());
        step.exit_status = status.to_string();
        step.owned_at_exit = stored_map::owned_by(&map.load().await?, worker);
        let child = fleet.spawn_worker(worker)?;
        *restarts += 1;
        sampler.register(&format!("{worker} (restart {restarts})"), child.id());
        fleet.workers[i].1 = child;
        let ready = fleet.wait_worker_ready(worker, READY_WITHIN).await?;
        step.ready_after_seconds = Some(seconds(ready));
        Ok(())
    }
    .await;
    step.error = result.err().map(|e| format!("{e:#}"));
    step
}

/// Waits until the stored map is settled (every shard owned, none moving) with its epochs
/// unchanged for [`SETTLED_FOR`]; `false` when it was not within [`SETTLE_WITHIN`].
async fn wait_settled(map: &StoredMap) -> bool {
    let deadline = Instant::now() + SETTLE_WITHIN;
    let mut stable_since: Option<(BTreeMap<u32, u64>, Instant)> = None;
    while Instant::now() < deadline {
        if let Ok(now) = map.load().await {
            if stored_map::settled(&now) {
                let epochs = stored_map::epochs(&now);
                match &stable_since {
                    Some((seen, since)) if *seen == epochs => {
                        if since.elapsed() >= SETTLED_FOR {
                            return true;
                        }
                    }
                    _ => stable_since = Some((epochs, Instant::now())),
                }
            } else {
                stable_since = None;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// The hand-overs the rollout made: those needed or done between its start and its end.
pub fn during<'a>(hand_overs: &'a [HandOver], rollout: &RolloutRecord) -> Vec<&'a HandOver> {
    let within = |t: Timestamp| t >= rollout.started && t <= rollout.ended;
    hand_overs.iter().filter(|h| within(h.acted_at) || h.needed_from.is_some_and(within)).collect()
}

/// Creation → finished (seconds) of the baseline's Jobs and of the rollout's.
#[derive(Debug, Clone, Default)]
pub struct FinishedLatencies {
    pub baseline: Vec<f64>,
    pub during: Vec<f64>,
}

impl FinishedLatencies {
    /// Sorts each Job, `(created, finished)`, into the baseline (created from [`BASELINE_FROM`]
    /// after `work_started`, finished before the rollout started: none of its life under the
    /// rollout) and the rollout's (some of its life under it: created before the rollout ended,
    /// finished after it started). A Job created after the rollout is neither.
    pub fn split(
        jobs: impl Iterator<Item = (Timestamp, Timestamp)>,
        work_started: Timestamp,
        rollout: &RolloutRecord,
    ) -> Self {
        let baseline_from = work_started
            .checked_add(jiff::SignedDuration::try_from(BASELINE_FROM).unwrap_or_default())
            .unwrap_or(work_started);
        let mut out = Self::default();
        for (created, finished) in jobs {
            let latency = finished.duration_since(created).as_secs_f64();
            if created >= baseline_from && finished < rollout.started {
                out.baseline.push(latency);
            } else if created <= rollout.ended && finished >= rollout.started {
                out.during.push(latency);
            }
        }
        out
    }
}

/// What the rollout section of the report holds besides the record: the measured figures.
#[derive(Debug, Clone, Serialize)]
pub struct RolloutReport {
    #[serde(flatten)]
    pub record: RolloutRecord,
    pub hand_overs: usize,
    pub gap_seconds: Percentiles,
    pub unowned_seconds: f64,
    pub baseline_finished_seconds: Percentiles,
    pub rollout_finished_seconds: Percentiles,
}

/// The rollout's figures and goals: every step done and graceful always; gaps, unowned time,
/// moves and the latency ratio where `goals` set them.
pub fn goals(
    goals: &Goals,
    rollout: &RolloutRecord,
    hand_overs: &[HandOver],
    latencies: &FinishedLatencies,
) -> (RolloutReport, Vec<Outcome>) {
    let mine = during(hand_overs, rollout);
    let gaps: Vec<f64> = mine.iter().filter(|h| h.gap_seconds > 0.0).map(|h| h.gap_seconds).collect();
    let unowned: f64 = mine.iter().map(|h| h.unowned_seconds).sum();
    let report = RolloutReport {
        record: rollout.clone(),
        hand_overs: mine.len(),
        gap_seconds: Percentiles::of(&gaps),
        unowned_seconds: seconds(Duration::from_secs_f64(unowned)),
        baseline_finished_seconds: Percentiles::of(&latencies.baseline),
        rollout_finished_seconds: Percentiles::of(&latencies.during),
    };
    let mut out = Vec::new();
    let failed: Vec<String> = rollout
        .steps
        .iter()
        .filter_map(|s| s.error.as_ref().map(|e| format!("{}: {e}", s.worker)))
        .chain(rollout.left_draining.iter().map(|w| {
            format!("{w}: still draining in the stored map after the rollout: its drain outlived the process")
        }))
        .collect();
    let ready = rollout.steps.iter().filter(|s| s.ready_after_seconds.is_some()).count();
    out.push(Outcome {
        name: "rollout-completed".into(),
        target: "every worker restarted and ready, then the stored shard map settled, nobody draining".into(),
        measured: format!(
            "{ready} of {} restarted and ready{}",
            rollout.steps.len(),
            if rollout.completed { ", map settled" } else { "; not completed" }
        ),
        passed: rollout.completed && failed.is_empty(),
        skipped: None,
        violations: failed,
    });
    let leader = rollout.leader.as_ref();
    let kept: Vec<String> = rollout
        .steps
        .iter()
        .filter(|s| !s.owned_at_exit.is_empty())
        .map(|s| {
            format!(
                "{} exited owning shards {:?} in the stored map: they move only once its lease expires",
                s.worker, s.owned_at_exit
            )
        })
        .chain(leader.map(|l| l.moves.get("unowned").copied().unwrap_or(0)).filter(|n| *n > 0).map(|n| {
            format!("the leader ended {n} moves by the old owner's lease expiry (fleet_shard_moves_total{{result=\"unowned\"}})")
        }))
        .collect();
    out.push(Outcome::from_violations(
        "rollout-moves-graceful",
        "every worker exits owning no shard in the stored map, and the leader ends no move by a lease's expiry",
        rollout.steps.len(),
        "exits",
        kept,
    ));
    // What the leader measured, after the audit log's figure.
    let leader_says = |what: &dyn Fn(&LeaderFigures) -> String| match leader {
        Some(l) => format!("; the leader ({}): {}", l.coordinator, what(l)),
        None => "; the leader: not scraped".into(),
    };
    if let Some(goal) = goals.rollout_gap_p99 {
        let p = &report.gap_seconds;
        let bound = goal.0.as_secs_f64();
        let leader_text = leader_says(&|l| match l.gap_p99_at_most_seconds {
            Some(at_most) => format!("p99 ≤ {at_most} s of {} (mean {:.3} s)", l.gaps, l.gap_mean_seconds),
            None => format!("p99 beyond the histogram's last bucket, of {}", l.gaps),
        });
        out.push(Outcome {
            name: "rollout-hand-over-gap-p99".into(),
            target: format!("≤ {goal} in the audit log (the leader's beside it)"),
            measured: if p.count == 0 {
                format!("audit log: no sample (no hand-over left work waiting){leader_text}")
            } else {
                format!("audit log: {:.3} s p99 of {} (max {:.3} s){leader_text}", p.p99, p.count, p.max)
            },
            passed: p.count > 0 && p.p99 <= bound,
            skipped: None,
            violations: Vec::new(),
        });
    }
    if let Some(per_move) = goals.rollout_unowned_per_move {
        let bound = per_move.0.as_secs_f64() * rollout.moves as f64;
        let leader_text = leader_says(&|l| format!("{:.3} s", l.unowned_seconds));
        out.push(Outcome {
            name: "rollout-unowned-seconds".into(),
            target: format!(
                "< {per_move} × {} moves = {bound:.2} s in the audit log (the leader's beside it)",
                rollout.moves
            ),
            measured: format!(
                "audit log: {:.3} s with work and no acting owner{leader_text}",
                report.unowned_seconds
            ),
            passed: report.unowned_seconds < bound,
            skipped: None,
            violations: Vec::new(),
        });
    }
    if let Some(per_shard) = goals.rollout_moves_per_shard {
        let bound = per_shard * f64::from(rollout.shards);
        out.push(Outcome {
            name: "rollout-moves".into(),
            target: format!("≤ {per_shard} × {} shards = {bound:.0}", rollout.shards),
            measured: format!("{} moves (stored epochs)", rollout.moves),
            passed: rollout.completed && rollout.moves as f64 <= bound,
            skipped: None,
            violations: Vec::new(),
        });
    }
    if let Some(ratio) = goals.rollout_finished_p99_ratio {
        let (base, during) = (&report.baseline_finished_seconds, &report.rollout_finished_seconds);
        let measured_ratio = if base.p99 > 0.0 { during.p99 / base.p99 } else { f64::INFINITY };
        let sampled = base.count > 0 && during.count > 0;
        out.push(Outcome {
            name: "rollout-finished-p99-ratio".into(),
            target: format!("≤ {ratio} × the baseline's p99 (Jobs that lived wholly before the rollout)"),
            measured: if sampled {
                format!(
                    "{measured_ratio:.2}: {:.3} s p99 of {} alive during it, {:.3} s p99 of {} before",
                    during.p99, during.count, base.p99, base.count
                )
            } else {
                format!("no sample: {} Jobs before, {} during", base.count, during.count)
            },
            passed: sampled && measured_ratio <= ratio,
            skipped: None,
            violations: Vec::new(),
        });
    }
    (report, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("time")
    }

    fn step(worker: &str, owned: Vec<u32>, error: Option<&str>) -> RolloutStep {
        RolloutStep {
            worker: worker.into(),
            exited_after_seconds: 1.0,
            exit_status: "exit status: 0".into(),
            owned_at_exit: owned,
            ready_after_seconds: error.is_none().then_some(0.5),
            error: error.map(String::from),
        }
    }

    fn rollout(steps: Vec<RolloutStep>, moves: u64) -> RolloutRecord {
        RolloutRecord {
            started: t(10),
            ended: t(40),
            completed: true,
            steps,
            moves,
            shards: 16,
            left_draining: Vec::new(),
            leader: None,
        }
    }

    fn hand_over(needed: i64, acted: i64, gap: f64, unowned: f64) -> HandOver {
        HandOver {
            shard: 1,
            from: "w-1".into(),
            to: Some("w-0".into()),
            last_write: t(needed),
            needed_from: Some(t(needed)),
            acted_at: t(acted),
            gap_seconds: gap,
            unowned_seconds: unowned,
            after_loss: false,
            bound: Duration::from_secs(5),
        }
    }

    fn all_goals() -> Goals {
        Goals {
            rollout_gap_p99: Some(crate::scenario::Span(Duration::from_millis(250))),
            rollout_unowned_per_move: Some(crate::scenario::Span(Duration::from_millis(250))),
            rollout_moves_per_shard: Some(2.2),
            rollout_finished_p99_ratio: Some(1.5),
            ..Goals::default()
        }
    }

    fn passed(outcomes: &[Outcome]) -> BTreeMap<&str, bool> {
        outcomes.iter().map(|o| (o.name.as_str(), o.passed)).collect()
    }

    #[test]
    fn statefulset_order_goes_from_the_highest_ordinal_down() {
        let order = statefulset_order(["w-2", "w-10", "w-0", "w-1"].into_iter());
        assert_eq!(order, ["w-10", "w-2", "w-1", "w-0"]);
    }

    #[test]
    fn a_graceful_rollout_within_its_bounds_passes_every_goal() {
        let r = rollout(vec![step("w-1", vec![], None), step("w-0", vec![], None)], 30);
        // One hand-over before the rollout does not count; two during it do.
        let hand_overs =
            [hand_over(2, 3, 4.0, 4.0), hand_over(12, 12, 0.1, 0.1), hand_over(20, 20, 0.2, 0.2)];
        let latencies = FinishedLatencies { baseline: vec![1.0, 2.0], during: vec![1.5, 2.9] };
        let (report, outcomes) = goals(&all_goals(), &r, &hand_overs, &latencies);
        assert_eq!(report.hand_overs, 2);
        assert_eq!(report.gap_seconds.p99, 0.2);
        assert!(outcomes.iter().all(|o| o.passed), "{outcomes:#?}");
        assert_eq!(outcomes.len(), 6);
    }

    #[test]
    fn a_shard_left_at_exit_a_slow_gap_too_many_moves_or_slower_jobs_fail_their_goal() {
        let r = rollout(vec![step("w-1", vec![3], None), step("w-0", vec![], None)], 40);
        let hand_overs = [hand_over(12, 13, 0.9, 0.9), hand_over(20, 20, 0.1, 0.1)];
        let latencies = FinishedLatencies { baseline: vec![1.0], during: vec![1.6] };
        let (_, outcomes) = goals(&all_goals(), &r, &hand_overs, &latencies);
        let by_name = passed(&outcomes);
        assert!(by_name["rollout-completed"]);
        assert!(!by_name["rollout-moves-graceful"], "{outcomes:#?}");
        assert!(!by_name["rollout-hand-over-gap-p99"]);
        assert!(by_name["rollout-unowned-seconds"], "1.0 s < 0.25 s × 40");
        assert!(!by_name["rollout-moves"], "40 > 2.2 × 16");
        assert!(!by_name["rollout-finished-p99-ratio"], "1.6 > 1.5 × 1.0");
        let graceful = outcomes.iter().find(|o| o.name == "rollout-moves-graceful").expect("there");
        assert!(graceful.violations[0].starts_with("w-1 exited owning shards [3]"), "{graceful:?}");
    }

    #[test]
    fn a_move_the_leader_ended_by_lease_expiry_fails_and_its_gaps_are_shown_beside() {
        let mut r = rollout(vec![step("w-0", vec![], None)], 30);
        let leader = |unowned_moves: u64, p99: Option<f64>, unowned_seconds: f64| LeaderFigures {
            coordinator: "coordinator-0".into(),
            moves: [("done".to_string(), 30), ("unowned".to_string(), unowned_moves)].into(),
            gaps: 30,
            gap_mean_seconds: 0.02,
            gap_p99_at_most_seconds: p99,
            unowned_seconds,
        };
        let hand_overs = [hand_over(12, 12, 0.1, 0.1)];
        let latencies = FinishedLatencies { baseline: vec![1.0], during: vec![1.0] };
        r.leader = Some(leader(0, Some(0.1), 1.0));
        let (_, outcomes) = goals(&all_goals(), &r, &hand_overs, &latencies);
        assert!(outcomes.iter().all(|o| o.passed), "{outcomes:#?}");
        let gap = outcomes.iter().find(|o| o.name == "rollout-hand-over-gap-p99").expect("there");
        assert!(gap.measured.contains("the leader (coordinator-0): p99 ≤ 0.1 s of 30"), "{gap:?}");
        r.leader = Some(leader(2, None, 8.0));
        let (_, outcomes) = goals(&all_goals(), &r, &hand_overs, &latencies);
        let by_name = passed(&outcomes);
        assert!(!by_name["rollout-moves-graceful"], "{outcomes:#?}");
        let graceful = outcomes.iter().find(|o| o.name == "rollout-moves-graceful").expect("there");
        assert!(
            graceful.violations[0].contains("ended 2 moves by the old owner's lease expiry"),
            "{graceful:?}"
        );
        // The gap and unowned goals are the audit log's; the leader's figures are shown.
        assert!(by_name["rollout-hand-over-gap-p99"] && by_name["rollout-unowned-seconds"], "{outcomes:#?}");
        let gap = outcomes.iter().find(|o| o.name == "rollout-hand-over-gap-p99").expect("there");
        assert!(gap.measured.contains("beyond the histogram's last bucket"), "{gap:?}");
    }

    #[test]
    fn a_step_that_failed_a_drain_left_behind_or_no_sample_fails() {
        let mut r = rollout(vec![step("w-1", vec![], Some("did not exit"))], 0);
        r.completed = false;
        let (_, outcomes) = goals(&all_goals(), &r, &[], &FinishedLatencies::default());
        let by_name = passed(&outcomes);
        assert!(!by_name["rollout-completed"]);
        let mut drained = rollout(vec![step("w-0", vec![], None)], 8);
        drained.left_draining = vec!["w-0".into()];
        let (_, outcomes) = goals(&Goals::default(), &drained, &[], &FinishedLatencies::default());
        let completed = outcomes.iter().find(|o| o.name == "rollout-completed").expect("there");
        assert!(!completed.passed && completed.violations[0].contains("still draining"), "{completed:?}");
        assert!(!by_name["rollout-hand-over-gap-p99"], "no gap measured is no pass");
        assert!(!by_name["rollout-finished-p99-ratio"], "no Job measured is no pass");
    }

    #[test]
    fn jobs_split_into_the_baseline_and_those_alive_during_the_rollout() {
        let r = rollout(vec![], 0);
        // (created, finished) in seconds; the rollout runs from 10 s to 40 s.
        let jobs = [(1, 3), (6, 7), (7, 9), (8, 11), (12, 13), (40, 42), (41, 43)];
        let split = FinishedLatencies::split(jobs.into_iter().map(|(c, f)| (t(c), t(f))), t(0), &r);
        assert_eq!(split.baseline, [1.0, 2.0], "from 5 s after the start, finished before the rollout");
        assert_eq!(split.during, [3.0, 1.0, 2.0], "alive during the rollout");
    }
}
