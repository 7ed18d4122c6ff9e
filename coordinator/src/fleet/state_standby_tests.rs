//! Standby moves: the shards of a worker that lost its session are warmed elsewhere while its
//! lease runs, act once it ran out, and stay where they are if it comes back.

use super::tests::{map, w};
use super::*;
use crate::handover::Barrier;

const LIVE: WorkerHealth = WorkerHealth::Live;
const AWAY: WorkerHealth = WorkerHealth::Disconnected;

fn input(now: Instant, workers: &[(&str, WorkerHealth)]) -> StepInput {
    StepInput {
        now: Some(now),
        workers: workers.iter().map(|(n, h)| (w(n), *h)).collect(),
        ..StepInput::default()
    }
}

fn held(shards: &[u32], epoch: u64) -> Vec<HeldShard> {
    shards.iter().map(|s| HeldShard { shard: ShardId(*s), epoch, phase: HeldPhase::Active }).collect()
}

/// a holds 0 and 1, b holds 2 and 3, both registered with this leader.
fn settled_fleet(now: Instant) -> FleetState {
    let config = FleetConfig { registration_grace: Duration::ZERO, ..FleetConfig::default() };
    let mut state =
        FleetState::new(map(4, &[(0, "a", 1), (1, "a", 1), (2, "b", 1), (3, "b", 1)]), config, now);
    let mut i = input(now, &[("a", LIVE), ("b", LIVE)]);
    i.registrations = vec![(w("a"), held(&[0, 1], 1)), (w("b"), held(&[2, 3], 1))];
    let out = state.step(&i);
    assert!(out.sends.is_empty(), "{out:?}");
    state
}

fn prepares(out: &StepOutput) -> Vec<(WorkerId, u32, u64)> {
    out.sends
        .iter()
        .filter_map(|(to, c)| match c {
            Command::Prepare { shard, epoch } => Some((to.clone(), shard.0, *epoch)),
            _ => None,
        })
        .collect()
}

fn prepared(
    state: &mut FleetState,
    now: Instant,
    workers: &[(&str, WorkerHealth)],
    shards: &[u32],
) -> StepOutput {
    let mut i = input(now, workers);
    i.acks = shards
        .iter()
        .map(|s| Ack { worker: w("a"), shard: ShardId(*s), epoch: 2, step: Step::Prepared, last_write: None })
        .collect();
    state.step(&i)
}

#[test]
fn a_lost_session_warms_the_shards_elsewhere_and_they_act_once_the_lease_ran_out() {
    let t0 = Instant::now();
    let mut state = settled_fleet(t0);
    // b's session dropped: nothing moves before `standby_after`.
    let out = state.step(&input(t0, &[("a", LIVE), ("b", AWAY)]));
    assert!(out.sends.is_empty() && !out.store, "{out:?}");
    let almost = t0 + FleetConfig::default().standby_after - Duration::from_millis(1);
    let out = state.step(&input(almost, &[("a", LIVE), ("b", AWAY)]));
    assert!(out.sends.is_empty() && !out.store, "{out:?}");
    let t1 = t0 + FleetConfig::default().standby_after;
    let out = state.step(&input(t1, &[("a", LIVE), ("b", AWAY)]));
    assert!(out.store, "the standby epochs are stored before any worker hears of them");
    assert_eq!(prepares(&out), [(w("a"), 2, 2), (w("a"), 3, 2)]);
    assert_eq!(state.owner(ShardId(2)), Some("b"), "b still owns them: its lease runs");
    // a is warm; still nothing is revoked or activated while b's lease runs, or is expiring.
    for (at, b) in [(t1, AWAY), (t1 + Duration::from_secs(2), WorkerHealth::Expiring)] {
        let out = prepared(&mut state, at, &[("a", LIVE), ("b", b)], &[2, 3]);
        assert!(
            !out.sends.iter().any(|(_, c)| matches!(c, Command::Revoke { .. } | Command::Activate { .. })),
            "{out:?}"
        );
    }
    // b's lease ran out (plus the margin): a acts at once, on a consistent list.
    let out = state.step(&input(t1 + Duration::from_secs(6), &[("a", LIVE), ("b", WorkerHealth::Gone)]));
    for shard in [2, 3] {
        assert!(out.sends.contains(&(
            w("a"),
            Command::Activate { shard: ShardId(shard), epoch: 2, barrier: Barrier::ConsistentList }
        )));
        assert_eq!(state.owner(ShardId(shard)), Some("a"));
    }
    assert!(prepares(&out).is_empty(), "no second warm-up: {out:?}");
}

#[test]
fn a_worker_that_comes_back_keeps_its_shards_and_the_warm_caches_are_dropped() {
    let t0 = Instant::now();
    let mut state = settled_fleet(t0);
    state.step(&input(t0, &[("a", LIVE), ("b", AWAY)]));
    let t1 = t0 + FleetConfig::default().standby_after;
    state.step(&input(t1, &[("a", LIVE), ("b", AWAY)]));
    prepared(&mut state, t1, &[("a", LIVE), ("b", AWAY)], &[2]);
    // b registers again holding both (a blip of its session; its lease never lapsed).
    let mut i = input(t1 + Duration::from_secs(1), &[("a", LIVE), ("b", LIVE)]);
    i.registrations = vec![(w("b"), held(&[2, 3], 1))];
    let out = state.step(&i);
    for shard in [2, 3] {
        assert!(out.sends.contains(&(w("a"), Command::Drop { shard: ShardId(shard), epoch: 2 })), "{out:?}");
        assert_eq!(state.owner(ShardId(shard)), Some("b"));
    }
    assert!(!out.sends.iter().any(|(to, _)| *to == w("b")), "nothing is asked of b: {out:?}");
    let out = state.step(&input(t1 + Duration::from_secs(2), &[("a", LIVE), ("b", LIVE)]));
    assert!(out.sends.is_empty(), "and nothing moves afterwards: {out:?}");
}

/// A StatefulSet recreates a killed pod under the same name: its new process renews the same
/// lease and registers holding nothing, which proves the old process gone.
#[test]
fn a_worker_restarted_under_its_id_releases_the_standby_moves_at_once() {
    let t0 = Instant::now();
    let mut state = settled_fleet(t0);
    state.step(&input(t0, &[("a", LIVE), ("b", AWAY)]));
    let t1 = t0 + FleetConfig::default().standby_after;
    state.step(&input(t1, &[("a", LIVE), ("b", AWAY)]));
    prepared(&mut state, t1, &[("a", LIVE), ("b", AWAY)], &[2, 3]);
    let mut i = input(t1 + Duration::from_secs(1), &[("a", LIVE), ("b", LIVE)]);
    i.registrations = vec![(w("b"), Vec::new())];
    let out = state.step(&i);
    for shard in [2, 3] {
        assert!(out.sends.contains(&(
            w("a"),
            Command::Activate { shard: ShardId(shard), epoch: 2, barrier: Barrier::ConsistentList }
        )));
    }
}

/// After a fail-over every worker is without a session until it registers with the new leader:
/// that is not a reason to warm anything.
#[test]
fn a_new_leader_starts_no_standby_for_workers_not_yet_registered() {
    let t0 = Instant::now();
    let config = FleetConfig { registration_grace: Duration::ZERO, ..FleetConfig::default() };
    let mut state =
        FleetState::new(map(4, &[(0, "a", 1), (1, "a", 1), (2, "b", 1), (3, "b", 1)]), config, t0);
    let mut i = input(t0, &[("a", LIVE), ("b", AWAY)]);
    i.registrations = vec![(w("a"), held(&[0, 1], 1))];
    state.step(&i);
    let out = state.step(&input(t0 + Duration::from_secs(5), &[("a", LIVE), ("b", AWAY)]));
    assert!(out.sends.is_empty() && !out.store, "{out:?}");
}

/// `max_moves_in_flight` paces moves between live workers; the shards of a lost worker are
/// moved all at once, or they would wait behind each other with nobody acting for them.
#[test]
fn moves_off_a_lost_worker_are_not_held_back_by_the_cap_on_moves_in_flight() {
    let t0 = Instant::now();
    let owners: Vec<(u32, &str, u64)> = (0..8).map(|s| (s, if s < 2 { "a" } else { "b" }, 1)).collect();
    let config =
        FleetConfig { registration_grace: Duration::ZERO, max_moves_in_flight: 1, ..FleetConfig::default() };
    let mut state = FleetState::new(map(8, &owners), config, t0);
    let mut i = input(t0, &[("a", LIVE), ("b", LIVE)]);
    i.registrations = vec![(w("a"), held(&[0, 1], 1)), (w("b"), held(&[2, 3, 4, 5, 6, 7], 1))];
    let out = state.step(&i);
    assert!(prepares(&out).len() <= 1, "balance moves are paced: {out:?}");
    let out = state.step(&input(t0 + Duration::from_secs(20), &[("a", LIVE), ("b", WorkerHealth::Gone)]));
    assert_eq!(state.moves_in_flight(), 6, "every shard of b moves at once: {out:?}");
}
