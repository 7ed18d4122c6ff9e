use super::*;
use crate::handover::Barrier;
use crate::store::ShardRecord;

pub(super) fn w(name: &str) -> WorkerId {
    WorkerId(name.into())
}

pub(super) fn map(shards: u32, owners: &[(u32, &str, u64)]) -> ShardMapRecord {
    ShardMapRecord {
        shard_count: shards,
        shards: owners
            .iter()
            .map(|(s, o, e)| (*s, ShardRecord { owner: Some(o.to_string()), epoch: *e, moving_to: None }))
            .collect(),
        ..ShardMapRecord::default()
    }
}

fn input(now: Instant, workers: &[(&str, WorkerHealth)]) -> StepInput {
    StepInput {
        now: Some(now),
        workers: workers.iter().map(|(n, h)| (w(n), *h)).collect(),
        ..StepInput::default()
    }
}

fn ack(worker: &str, shard: u32, epoch: u64, step: Step, last: Option<&str>) -> Ack {
    Ack { worker: w(worker), shard: ShardId(shard), epoch, step, last_write: last.map(str::to_string) }
}

fn registered(
    state: &mut FleetState,
    now: Instant,
    workers: &[(&str, WorkerHealth)],
    held: &[(&str, Vec<HeldShard>)],
) -> StepOutput {
    let mut i = input(now, workers);
    i.registrations = held.iter().map(|(n, h)| (w(n), h.clone())).collect();
    state.step(&i)
}

fn held(shard: u32, epoch: u64, phase: HeldPhase) -> HeldShard {
    HeldShard { shard: ShardId(shard), epoch, phase }
}

const LIVE: WorkerHealth = WorkerHealth::Live;

#[test]
fn a_new_fleet_places_every_shard_once_its_workers_registered() {
    let now = Instant::now();
    let mut state = FleetState::new(map(4, &[]), FleetConfig::default(), now);
    let out = registered(&mut state, now, &[("a", LIVE), ("b", LIVE)], &[("a", vec![]), ("b", vec![])]);
    assert!(out.store, "moves are recorded before any worker hears of them");
    let prepares: Vec<_> = out.sends.iter().filter(|(_, c)| matches!(c, Command::Prepare { .. })).collect();
    assert_eq!(prepares.len(), 4, "{out:?}");
    // A shard nobody owned activates after PREPARE alone, on a consistent list.
    let (to, Command::Prepare { shard, epoch }) = prepares[0].clone() else { unreachable!() };
    let mut i = input(now, &[("a", LIVE), ("b", LIVE)]);
    i.acks = vec![ack(&to.0, shard.0, epoch, Step::Prepared, None)];
    let out = state.step(&i);
    assert!(out.store);
    assert!(
        out.sends
            .contains(&(to.clone(), Command::Activate { shard, epoch, barrier: Barrier::ConsistentList }))
    );
    assert_eq!(state.owner(shard), Some(to.0.as_str()));
}

#[test]
fn a_fail_over_moves_nothing_while_workers_register() {
    let now = Instant::now();
    let mut state = FleetState::new(
        map(4, &[(0, "a", 1), (1, "a", 1), (2, "b", 1), (3, "b", 1)]),
        FleetConfig::default(),
        now,
    );
    // Only a has registered so far: b's shards must not move to a.
    let out = registered(
        &mut state,
        now,
        &[("a", LIVE), ("b", LIVE)],
        &[("a", vec![held(0, 1, HeldPhase::Active), held(1, 1, HeldPhase::Active)])],
    );
    assert!(out.sends.is_empty() && !out.store, "{out:?}");
    let out = registered(
        &mut state,
        now,
        &[("a", LIVE), ("b", LIVE)],
        &[("b", vec![held(2, 1, HeldPhase::Active), held(3, 1, HeldPhase::Active)])],
    );
    assert!(out.sends.is_empty() && !out.store, "a settled map stays: {out:?}");
}

#[test]
fn registration_reconciles_what_a_worker_holds_with_the_map() {
    let now = Instant::now();
    let mut state = FleetState::new(
        map(4, &[(0, "a", 3), (1, "a", 3), (2, "a", 3), (3, "a", 3)]),
        FleetConfig::default(),
        now,
    );
    let out = registered(
        &mut state,
        now,
        &[("a", LIVE)],
        &[(
            "a",
            vec![
                held(0, 3, HeldPhase::Active),
                // Revoking for a move the previous leader did not finish: it takes no work, but
                // may still be finishing some.
                held(1, 3, HeldPhase::Revoking),
                // Recorded as owner, not yet told to act.
                held(2, 3, HeldPhase::Preparing),
                // Newer than the map's epoch, which is stored before any worker hears of it:
                // not this map's assignment.
                held(3, 4, HeldPhase::Active),
            ],
        )],
    );
    assert!(out.sends.contains(&(w("a"), Command::Revoke { shard: ShardId(1), epoch: 4 })), "{out:?}");
    assert!(!out.sends.iter().any(|(_, c)| matches!(c, Command::Drop { shard: ShardId(1), .. })));
    assert_eq!(state.stored_map().shards[&1].epoch, 4, "the REVOKE's epoch is stored before it is sent");
    assert!(out.store);
    assert!(out.sends.contains(&(
        w("a"),
        Command::Activate { shard: ShardId(2), epoch: 3, barrier: Barrier::ConsistentList }
    )));
    assert!(out.sends.contains(&(w("a"), Command::Drop { shard: ShardId(3), epoch: 4 })));
    assert!(!out.sends.iter().any(|(_, c)| matches!(c, Command::Drop { shard: ShardId(0), .. })));
    // Shard 3, unowned now, is placed again; shard 1 only once a has finished revoking it.
    assert!(out.sends.contains(&(w("a"), Command::Prepare { shard: ShardId(3), epoch: 4 })), "{out:?}");
    assert!(!out.sends.iter().any(|(_, c)| matches!(c, Command::Prepare { shard: ShardId(1), .. })));
    assert_eq!(state.shard_state(ShardId(1)), ShardState::Revoking);
    let out = state.step(&input(now + Duration::from_secs(3), &[("a", LIVE)]));
    assert!(
        out.sends.contains(&(w("a"), Command::Revoke { shard: ShardId(1), epoch: 4 })),
        "resent: {out:?}"
    );
    let mut i = input(now + Duration::from_secs(4), &[("a", LIVE)]);
    i.acks = vec![ack("a", 1, 4, Step::Revoked, Some("77"))];
    let out = state.step(&i);
    assert!(out.sends.contains(&(w("a"), Command::Prepare { shard: ShardId(1), epoch: 5 })), "{out:?}");
}

/// After a fail-over, an owner that reports a shard Revoking and then dies is waited out by its
/// lease, like any owner: nobody else acts for the shard before that.
#[test]
fn a_revoking_owner_that_dies_is_waited_out_by_its_lease() {
    let now = Instant::now();
    let config = FleetConfig { registration_grace: Duration::ZERO, ..FleetConfig::default() };
    let mut state = FleetState::new(map(1, &[(0, "a", 3)]), config, now);
    let out = registered(
        &mut state,
        now,
        &[("a", LIVE), ("b", LIVE)],
        &[("a", vec![held(0, 3, HeldPhase::Revoking)]), ("b", vec![])],
    );
    assert!(!out.sends.iter().any(|(to, _)| *to == w("b")), "{out:?}");
    let out = state.step(&input(now, &[("a", WorkerHealth::Expiring), ("b", LIVE)]));
    assert!(!out.sends.iter().any(|(to, _)| *to == w("b")), "{out:?}");
    let out = state.step(&input(now, &[("a", WorkerHealth::Gone), ("b", LIVE)]));
    assert!(out.sends.contains(&(w("b"), Command::Prepare { shard: ShardId(0), epoch: 5 })), "{out:?}");
}

#[test]
fn a_graceful_move_revokes_the_old_owner_before_the_new_one_acts() {
    let now = Instant::now();
    let mut state = FleetState::new(map(2, &[(0, "a", 5), (1, "b", 5)]), FleetConfig::default(), now);
    let workers = [("a", LIVE), ("b", LIVE)];
    registered(
        &mut state,
        now,
        &workers,
        &[("a", vec![held(0, 5, HeldPhase::Active)]), ("b", vec![held(1, 5, HeldPhase::Active)])],
    );
    state.request_move(ShardId(0), w("b"));
    let out = state.step(&input(now, &workers));
    assert_eq!(out.sends, [(w("b"), Command::Prepare { shard: ShardId(0), epoch: 6 })]);
    assert!(out.store);
    let mut i = input(now, &workers);
    i.acks = vec![ack("b", 0, 6, Step::Prepared, None)];
    let out = state.step(&i);
    assert_eq!(out.sends, [(w("a"), Command::Revoke { shard: ShardId(0), epoch: 6 })]);
    // A stray ACTIVATED from b must not count: a has not stopped.
    i.acks = vec![ack("b", 0, 6, Step::Activated, None)];
    assert!(state.step(&i).sends.is_empty());
    assert_eq!(state.owner(ShardId(0)), Some("a"));
    i.acks = vec![ack("a", 0, 6, Step::Revoked, Some("1200"))];
    let out = state.step(&i);
    assert!(out.store);
    assert_eq!(
        out.sends,
        [(
            w("b"),
            Command::Activate {
                shard: ShardId(0),
                epoch: 6,
                barrier: Barrier::ResourceVersion("1200".into())
            }
        )]
    );
    assert_eq!(state.owner(ShardId(0)), Some("b"));
}

#[test]
fn a_dead_owners_shards_are_placed_only_after_its_lease_expired() {
    let now = Instant::now();
    let mut state = FleetState::new(map(2, &[(0, "a", 1), (1, "b", 1)]), FleetConfig::default(), now);
    registered(
        &mut state,
        now,
        &[("a", LIVE), ("b", LIVE)],
        &[("a", vec![held(0, 1, HeldPhase::Active)]), ("b", vec![held(1, 1, HeldPhase::Active)])],
    );
    // a stops renewing: while its lease runs (Disconnected, Expiring) it keeps acting; b may
    // warm the shard up but is never told to act.
    let mut sends = Vec::new();
    for health in [WorkerHealth::Disconnected, WorkerHealth::Expiring] {
        let out = state.step(&input(now, &[("a", health), ("b", LIVE)]));
        assert!(!out.sends.iter().any(|(_, c)| matches!(c, Command::Activate { .. })), "{out:?}");
        assert_eq!(state.owner(ShardId(0)), Some("a"));
        sends.extend(out.sends);
    }
    assert_eq!(sends, [(w("b"), Command::Prepare { shard: ShardId(0), epoch: 2 })]);
    let workers = [("a", WorkerHealth::Gone), ("b", LIVE)];
    assert!(state.step(&input(now, &workers)).sends.is_empty());
    let mut i = input(now, &workers);
    i.acks = vec![ack("b", 0, 2, Step::Prepared, None)];
    let out = state.step(&i);
    assert_eq!(
        out.sends,
        [(w("b"), Command::Activate { shard: ShardId(0), epoch: 2, barrier: Barrier::ConsistentList })]
    );
}

#[test]
fn a_drained_worker_is_told_once_it_owns_nothing() {
    let now = Instant::now();
    let mut state = FleetState::new(map(1, &[(0, "a", 1)]), FleetConfig::default(), now);
    let workers = [("a", LIVE), ("b", LIVE)];
    registered(&mut state, now, &workers, &[("a", vec![held(0, 1, HeldPhase::Active)]), ("b", vec![])]);
    state.set_draining(&w("a"), true);
    let out = state.step(&input(now, &workers));
    assert_eq!(out.sends, [(w("b"), Command::Prepare { shard: ShardId(0), epoch: 2 })]);
    let mut i = input(now, &workers);
    i.acks = vec![ack("b", 0, 2, Step::Prepared, None)];
    state.step(&i);
    i.acks = vec![ack("a", 0, 2, Step::Revoked, None)];
    let out = state.step(&i);
    assert!(out.sends.contains(&(w("a"), Command::DrainComplete)), "{out:?}");
    assert!(state.drained(&w("a")));
    i.acks = vec![];
    assert!(!state.step(&i).sends.contains(&(w("a"), Command::DrainComplete)), "told once");
}

#[test]
fn an_unanswered_command_is_sent_again() {
    let now = Instant::now();
    let config = FleetConfig { resend_after: Duration::from_secs(3), ..FleetConfig::default() };
    let mut state = FleetState::new(map(1, &[]), config, now);
    let out = registered(&mut state, now, &[("a", LIVE)], &[("a", vec![])]);
    assert_eq!(out.sends, [(w("a"), Command::Prepare { shard: ShardId(0), epoch: 1 })]);
    assert!(state.step(&input(now + Duration::from_secs(1), &[("a", LIVE)])).sends.is_empty());
    let out = state.step(&input(now + Duration::from_secs(4), &[("a", LIVE)]));
    assert_eq!(out.sends, [(w("a"), Command::Prepare { shard: ShardId(0), epoch: 1 })]);
    assert!(!out.store, "a resend records nothing new");
}

#[test]
fn an_operators_move_is_not_undone_by_placement_within_the_interval() {
    let now = Instant::now();
    let mut state = FleetState::new(map(2, &[(0, "a", 1), (1, "b", 1)]), FleetConfig::default(), now);
    let workers = [("a", LIVE), ("b", LIVE)];
    registered(
        &mut state,
        now,
        &workers,
        &[("a", vec![held(0, 1, HeldPhase::Active)]), ("b", vec![held(1, 1, HeldPhase::Active)])],
    );
    state.request_move(ShardId(0), w("b"));
    let out = state.step(&input(now, &workers));
    assert_eq!(out.sends, [(w("b"), Command::Prepare { shard: ShardId(0), epoch: 2 })]);
    let mut i = input(now, &workers);
    i.acks = vec![ack("b", 0, 2, Step::Prepared, None)];
    state.step(&i);
    i.acks = vec![ack("a", 0, 2, Step::Revoked, None)];
    state.step(&i);
    i.acks = vec![ack("b", 0, 2, Step::Activated, None)];
    state.step(&i);
    assert_eq!(state.owner(ShardId(0)), Some("b"));
    // b now carries both shards; balance would send one back, but not this soon.
    let out = state.step(&input(now + Duration::from_secs(5), &workers));
    assert!(
        !out.sends.iter().any(|(_, c)| matches!(c, Command::Prepare { shard: ShardId(0), .. })),
        "{out:?}"
    );
    let later = now + FleetConfig::default().min_move_interval + Duration::from_secs(1);
    let out = state.step(&input(later, &workers));
    assert!(out.sends.iter().any(|(to, c)| *to == w("a") && matches!(c, Command::Prepare { .. })), "{out:?}");
}

/// The paused-worker test (fleet_e2e) once waited a minute for its resumed worker to get a
/// shard: the shards placement chose to fill it with had all moved within `min_move_interval`,
/// so the step skipped every one of them. Placement now fills a newcomer from the shards that
/// may move.
#[test]
fn a_newcomer_is_filled_with_shards_that_may_move_now() {
    let now = Instant::now();
    let owners: Vec<(u32, &str, u64)> = (0..12).map(|s| (s, if s < 6 { "a" } else { "b" }, 1)).collect();
    let mut state = FleetState::new(map(12, &owners), FleetConfig::default(), now);
    let workers = [("a", LIVE), ("b", LIVE), ("c", LIVE)];
    let holding = |from: u32| (from..from + 6).map(|s| held(s, 1, HeldPhase::Active)).collect::<Vec<_>>();
    registered(&mut state, now, &[("a", LIVE), ("b", LIVE)], &[("a", holding(0)), ("b", holding(6))]);
    // Every shard of a has just moved there, to balance the fleet.
    for s in 0..6 {
        state.balancing.moved(ShardId(s), now, MoveCause::Balance);
    }
    let out = registered(&mut state, now + Duration::from_secs(1), &workers, &[("c", vec![])]);
    let to_c: Vec<u32> = out
        .sends
        .iter()
        .filter_map(|(to, c)| match c {
            Command::Prepare { shard, .. } if *to == w("c") => Some(shard.0),
            _ => None,
        })
        .collect();
    assert!(to_c.iter().all(|s| *s >= 6), "only b's shards may move now: {to_c:?}");
    assert!(to_c.len() >= 3, "c is filled towards the average of 4: {to_c:?}");
}

#[test]
fn shards_go_only_to_workers_with_a_session() {
    let now = Instant::now();
    let mut state = FleetState::new(
        map(2, &[]),
        FleetConfig { registration_grace: Duration::ZERO, ..FleetConfig::default() },
        now,
    );
    // b's lease runs but it has no session (dead, or not yet reconnected): nothing goes to it.
    let out =
        registered(&mut state, now, &[("a", LIVE), ("b", WorkerHealth::Disconnected)], &[("a", vec![])]);
    assert!(out.sends.iter().all(|(to, _)| *to == w("a")), "{out:?}");
}

#[test]
fn an_owner_whose_move_away_was_cut_short_keeps_acting_after_a_fail_over() {
    // The previous leader recorded a move of shard 0 from a to b at epoch 6, then died.
    let mut stored = map(1, &[(0, "a", 6)]);
    stored.shards.get_mut(&0).expect("record").moving_to = Some("b".into());
    let now = Instant::now();
    let mut state = FleetState::new(stored, FleetConfig::default(), now);
    let workers = [("a", LIVE), ("b", LIVE)];
    let out = registered(
        &mut state,
        now,
        &workers,
        &[("a", vec![held(0, 5, HeldPhase::Active)]), ("b", vec![held(0, 6, HeldPhase::Preparing)])],
    );
    assert!(
        !out.sends.contains(&(w("a"), Command::Drop { shard: ShardId(0), epoch: 5 })),
        "a still acts: {out:?}"
    );
    assert!(out.sends.contains(&(w("b"), Command::Drop { shard: ShardId(0), epoch: 6 })), "{out:?}");
    assert_eq!(state.owner(ShardId(0)), Some("a"));
}

/// A worker that knows the shard at a higher epoch than the map (the map was restored from an
/// older backup) refuses PREPARE: the move is cancelled, not resent for ever, and the shard is
/// placed again above the worker's epoch once the retry delay passed.
#[test]
fn a_refused_prepare_cancels_the_move_and_the_next_epoch_passes_the_workers() {
    let now = Instant::now();
    let config = FleetConfig { registration_grace: Duration::ZERO, ..FleetConfig::default() };
    let mut state = FleetState::new(map(1, &[]), config.clone(), now);
    let out = registered(&mut state, now, &[("a", LIVE)], &[("a", vec![])]);
    assert_eq!(out.sends, [(w("a"), Command::Prepare { shard: ShardId(0), epoch: 1 })]);

    let mut i = input(now, &[("a", LIVE)]);
    i.acks = vec![ack("a", 0, 1, Step::Refused { held_epoch: Some(9) }, None)];
    let out = state.step(&i);
    assert!(out.store, "the cancelled move and the raised epoch are stored");
    assert_eq!(state.moves_in_flight(), 0);
    assert!(
        !out.sends.iter().any(|(_, c)| matches!(c, Command::Prepare { .. })),
        "not straight away: {out:?}"
    );
    assert_eq!(state.stored_map().shards[&0].moving_to, None);
    assert_eq!(state.take_finished().iter().map(|(r, _)| *r).collect::<Vec<_>>(), ["cancelled"]);

    let out = state.step(&input(now + config.resend_after, &[("a", LIVE)]));
    assert_eq!(out.sends, [(w("a"), Command::Prepare { shard: ShardId(0), epoch: 10 })]);
}

/// A refusal for another epoch (a late answer to an earlier move) changes nothing.
#[test]
fn a_refusal_of_an_earlier_epoch_is_ignored() {
    let now = Instant::now();
    let config = FleetConfig { registration_grace: Duration::ZERO, ..FleetConfig::default() };
    let mut state = FleetState::new(map(1, &[(0, "a", 3)]), config, now);
    let workers = [("a", LIVE), ("b", LIVE)];
    registered(&mut state, now, &workers, &[("a", vec![held(0, 3, HeldPhase::Active)]), ("b", vec![])]);
    state.request_move(ShardId(0), w("b"));
    let out = state.step(&input(now, &workers));
    assert_eq!(out.sends, [(w("b"), Command::Prepare { shard: ShardId(0), epoch: 4 })]);
    let mut i = input(now, &workers);
    i.acks = vec![ack("b", 0, 2, Step::Refused { held_epoch: None }, None)];
    state.step(&i);
    assert_eq!(state.moves_in_flight(), 1);
    assert_eq!(state.shard_state(ShardId(0)), ShardState::Preparing);
}

/// A new owner that never answers PREPARE (its warm-up hangs) does not hold the shard in a move
/// for ever: past the timeout the move is cancelled and the old owner, which never stopped,
/// keeps the shard; the new owner is told to drop what it prepared.
#[test]
fn a_prepare_unanswered_past_the_timeout_is_cancelled_and_the_owner_keeps_the_shard() {
    let now = Instant::now();
    let config = FleetConfig { prepare_timeout: Duration::from_secs(30), ..FleetConfig::default() };
    let mut state = FleetState::new(map(1, &[(0, "a", 3)]), config, now);
    let workers = [("a", LIVE), ("b", LIVE)];
    registered(&mut state, now, &workers, &[("a", vec![held(0, 3, HeldPhase::Active)]), ("b", vec![])]);
    state.request_move(ShardId(0), w("b"));
    state.step(&input(now, &workers));
    assert_eq!(state.shard_state(ShardId(0)), ShardState::Preparing);

    let out = state.step(&input(now + Duration::from_secs(29), &workers));
    assert_eq!(out.sends, [(w("b"), Command::Prepare { shard: ShardId(0), epoch: 4 })], "resent meanwhile");
    let out = state.step(&input(now + Duration::from_secs(30), &workers));
    assert!(out.sends.contains(&(w("b"), Command::Drop { shard: ShardId(0), epoch: 4 })), "{out:?}");
    assert!(!out.sends.iter().any(|(to, _)| *to == w("a")), "the owner is not disturbed: {out:?}");
    assert!(out.store);
    assert_eq!(state.shard_state(ShardId(0)), ShardState::Active);
    assert_eq!(state.owner(ShardId(0)), Some("a"));
    assert_eq!(state.stored_map().shards[&0].moving_to, None);
}

/// A StatefulSet's rolling restart: w-0 is drained (SIGTERM), exits, and its next pod registers
/// under the same id. The drain ended with the process, so the new one takes shards again; a
/// drained worker that keeps running (an operator's drain) stays drained.
#[test]
fn a_drain_ends_when_the_drained_worker_stops_and_not_before() {
    let now = Instant::now();
    let config = FleetConfig { registration_grace: Duration::ZERO, ..FleetConfig::default() };
    let mut state = FleetState::new(map(2, &[(0, "b", 1), (1, "b", 1)]), config, now);
    let live = [("a", LIVE), ("b", LIVE)];
    state.set_draining(&w("a"), true);
    let out = registered(
        &mut state,
        now,
        &live,
        &[("a", vec![]), ("b", vec![held(0, 1, HeldPhase::Active), held(1, 1, HeldPhase::Active)])],
    );
    assert!(out.sends.contains(&(w("a"), Command::DrainComplete)), "{out:?}");
    // Its session drops and comes back while it runs: still drained.
    state.step(&input(now, &[("a", WorkerHealth::Disconnected), ("b", LIVE)]));
    assert!(state.is_draining(&w("a")));
    // It exits: its lease record is gone (Expiring for the margin), and the drain ends.
    state.step(&input(now, &[("a", WorkerHealth::Expiring), ("b", LIVE)]));
    assert!(!state.is_draining(&w("a")) && !state.drained(&w("a")));
    // The next process under the same id gets a shard for balance.
    let later = now + Duration::from_secs(5);
    let out = registered(&mut state, later, &live, &[("a", vec![])]);
    assert!(out.sends.iter().any(|(to, c)| *to == w("a") && matches!(c, Command::Prepare { .. })), "{out:?}");
}

/// An operator drains w-a; the leader dies before the drain completes. The next leader starts
/// from the stored map, so it goes on: it gives w-a nothing, moves w-a's shard off and tells it
/// the drain is complete. Undrain is stored the same way.
#[test]
fn a_drain_is_stored_and_outlives_a_fail_over() {
    let now = Instant::now();
    let config = FleetConfig { registration_grace: Duration::ZERO, ..FleetConfig::default() };
    let mut old_leader = FleetState::new(map(2, &[(0, "a", 1), (1, "b", 1)]), config.clone(), now);
    old_leader.set_draining(&w("a"), true);
    let out = old_leader.step(&input(now, &[("a", LIVE), ("b", LIVE)]));
    assert!(out.store, "a drain is stored at the step after it: {out:?}");
    assert_eq!(old_leader.stored_map().draining, BTreeSet::from(["a".to_string()]));
    // An old map without the field reads as no drains; this one keeps it through the store.
    let stored: ShardMapRecord =
        serde_json::from_value(serde_json::to_value(old_leader.stored_map()).expect("JSON")).expect("a map");
    assert_eq!(&stored, old_leader.stored_map());

    let mut new_leader = FleetState::new(stored, config, now);
    assert!(new_leader.is_draining(&w("a")));
    let live = [("a", LIVE), ("b", LIVE)];
    let out = registered(
        &mut new_leader,
        now,
        &live,
        &[("a", vec![held(0, 1, HeldPhase::Active)]), ("b", vec![held(1, 1, HeldPhase::Active)])],
    );
    let to_a = |c: &Command| matches!(c, Command::Prepare { .. });
    assert!(!out.sends.iter().any(|(to, c)| *to == w("a") && to_a(c)), "{out:?}");
    assert!(
        out.sends
            .iter()
            .any(|(to, c)| *to == w("b")
                && matches!(c, Command::Prepare { shard, .. } if *shard == ShardId(0))),
        "w-a's shard moves to w-b: {out:?}"
    );

    new_leader.set_draining(&w("a"), false);
    let out = new_leader.step(&input(now, &live));
    assert!(out.store && new_leader.stored_map().draining.is_empty(), "{out:?}");
}

/// Found by `scripts/fuzz coordinator_fleet` (docs/security.md#fuzzing; input: a stored map of 50 shards
/// holding a record for shard 1768515945, owner "w1", epoch 7595718147998050665, moving to "w1",
/// then one step with no workers): the record was kept, so 51 of 50 shards counted as without an
/// acting owner. A stored record or pin beyond the shard count is now ignored.
#[test]
fn a_stored_record_beyond_the_shard_count_is_ignored() {
    let now = Instant::now();
    let mut stored = map(50, &[(1_768_515_945, "w1", 7_595_718_147_998_050_665), (3, "w1", 2)]);
    stored.pins.insert(1_768_515_945, "w1".into());
    stored.pins.insert(4, "w1".into());
    let mut state = FleetState::new(stored, FleetConfig::default(), now);
    state.step(&input(now, &[]));
    assert_eq!(state.shards_without_acting_owner(), 50);
    assert_eq!(state.stored_map().shards.keys().copied().collect::<Vec<_>>(), [3]);
    assert_eq!(state.stored_map().pins.keys().copied().collect::<Vec<_>>(), [4]);
}

/// Found by `scripts/fuzz coordinator_fleet` (docs/security.md#fuzzing; input
/// crash-3b260b53…: a stored record at epoch u64::MAX whose owner is gone, and a live worker):
/// starting the move computed `epoch + 1` and overflowed. Such a shard is now left where it is,
/// and a worker reporting it Revoking at that epoch is sent REVOKE without overflowing either.
#[test]
fn a_stored_epoch_that_cannot_grow_does_not_overflow() {
    let now = Instant::now();
    let config = FleetConfig { registration_grace: Duration::ZERO, ..FleetConfig::default() };
    let mut state = FleetState::new(map(2, &[(0, "a", u64::MAX), (1, "b", u64::MAX)]), config, now);
    let out = registered(
        &mut state,
        now,
        &[("a", WorkerHealth::Gone), ("b", LIVE), ("c", LIVE)],
        &[("b", vec![held(1, u64::MAX, HeldPhase::Revoking)]), ("c", vec![])],
    );
    assert!(out.sends.contains(&(w("b"), Command::Revoke { shard: ShardId(1), epoch: u64::MAX })), "{out:?}");
    assert!(
        !out.sends.iter().any(|(_, c)| matches!(c, Command::Prepare { shard: ShardId(0), .. })),
        "{out:?}"
    );
    assert_eq!(state.epoch(ShardId(0)), u64::MAX);
}

fn prepares_to(out: &StepOutput, worker: &str) -> Vec<u32> {
    out.sends
        .iter()
        .filter_map(|(to, c)| match c {
            Command::Prepare { shard, .. } if *to == w(worker) => Some(shard.0),
            _ => None,
        })
        .collect()
}

/// A worker that restarts within its lease registers holding nothing: its shards go back to it,
/// rather than to wherever placement would put them now, with the worker then filled from
/// everyone else.
#[test]
fn a_restarted_worker_gets_its_own_shards_back() {
    let now = Instant::now();
    // a carries one shard over the average, c one under: within the bounds, so nothing moves.
    let owner = |s: u32| match s {
        0..5 => "a",
        5..9 => "b",
        _ => "c",
    };
    let owners: Vec<(u32, &str, u64)> = (0..12).map(|s| (s, owner(s), 1)).collect();
    let mut state = FleetState::new(map(12, &owners), FleetConfig::default(), now);
    let workers = [("a", LIVE), ("b", LIVE), ("c", LIVE)];
    let holding = |of: &str| {
        (0..12).filter(|s| owner(*s) == of).map(|s| held(s, 1, HeldPhase::Active)).collect::<Vec<_>>()
    };
    let out = registered(
        &mut state,
        now,
        &workers,
        &[("a", holding("a")), ("b", holding("b")), ("c", holding("c"))],
    );
    assert!(out.sends.is_empty(), "{out:?}");
    let out = registered(&mut state, now + Duration::from_secs(1), &workers, &[("a", vec![])]);
    let mut to_a = prepares_to(&out, "a");
    to_a.sort();
    assert_eq!(to_a, [0, 1, 2, 3, 4], "{out:?}");
    let moved = out.sends.iter().filter(|(_, c)| matches!(c, Command::Prepare { .. })).count();
    assert_eq!(moved, 5, "nothing else moves: {out:?}");
}

/// A new leader does not know which balancing moves the old one was holding back: for
/// `min_move_interval` it moves no shard between two workers that both hold shards, but it
/// fills a newcomer.
#[test]
fn a_new_leader_holds_back_balancing_moves_but_fills_a_newcomer() {
    let now = Instant::now();
    // a carries 8 shards, b 2: placement would even them out.
    let owners: Vec<(u32, &str, u64)> = (0..10).map(|s| (s, if s < 8 { "a" } else { "b" }, 1)).collect();
    let mut state = FleetState::new(map(10, &owners), FleetConfig::default(), now);
    let holding = |from: u32, to: u32| (from..to).map(|s| held(s, 1, HeldPhase::Active)).collect::<Vec<_>>();
    let two = [("a", LIVE), ("b", LIVE)];
    let out = registered(&mut state, now, &two, &[("a", holding(0, 8)), ("b", holding(8, 10))]);
    assert!(out.sends.is_empty() && !out.store, "{out:?}");
    let out = state.step(&input(now + Duration::from_secs(1), &two));
    assert!(out.sends.is_empty(), "a fail-over moves nothing: {out:?}");
    let three = [("a", LIVE), ("b", LIVE), ("c", LIVE)];
    let out = registered(&mut state, now + Duration::from_secs(2), &three, &[("c", vec![])]);
    assert!(!prepares_to(&out, "c").is_empty(), "the newcomer is filled: {out:?}");
    assert!(prepares_to(&out, "b").is_empty(), "{out:?}");
    let later = now + FleetConfig::default().min_move_interval + Duration::from_secs(1);
    let out = state.step(&input(later, &three));
    assert!(!prepares_to(&out, "b").is_empty(), "then the fleet is balanced: {out:?}");
}
