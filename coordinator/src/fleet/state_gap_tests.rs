//! What the fleet state reports for the hand-over gap and unowned-time metrics, case by case:
//! when a shard's acting owner stops and when a new one acts, as the leader sees it.

use super::tests::{map, w};
use super::*;
use crate::handover::Barrier;

const LIVE: WorkerHealth = WorkerHealth::Live;
const GONE: WorkerHealth = WorkerHealth::Gone;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A fleet state driven by steps at given milliseconds after its start.
struct Run {
    state: FleetState,
    t0: Instant,
}

impl Run {
    /// A leader starting on a map of `shards` shards with these `(shard, owner, epoch)`.
    fn new(shards: u32, owners: &[(u32, &str, u64)]) -> Self {
        let map = map(shards, owners);
        let t0 = Instant::now();
        // Placement of unowned shards starts at once: these cases are about the gap, not the
        // registration grace.
        let config = FleetConfig { registration_grace: Duration::ZERO, ..FleetConfig::default() };
        Self { state: FleetState::new(map, config, t0), t0 }
    }

    fn step(
        &mut self,
        at: u64,
        workers: &[(&str, WorkerHealth)],
        registrations: Vec<(&str, Vec<HeldShard>)>,
        acks: Vec<Ack>,
    ) -> StepOutput {
        let input = StepInput {
            now: Some(self.t0 + ms(at)),
            workers: workers.iter().map(|(n, h)| (w(n), *h)).collect(),
            registrations: registrations.into_iter().map(|(n, h)| (w(n), h)).collect(),
            acks,
            ..StepInput::default()
        };
        self.state.step(&input)
    }

    /// Gaps observed (ms) and unowned time (ms) since the last call.
    fn taken(&mut self) -> (Vec<u64>, u64) {
        let seen = self.state.take_gap_observations();
        (seen.handover_gaps.iter().map(|d| d.as_millis() as u64).collect(), seen.unowned.as_millis() as u64)
    }
}

fn ack(worker: &str, shard: u32, epoch: u64, step: Step) -> Ack {
    Ack { worker: w(worker), shard: ShardId(shard), epoch, step, last_write: None }
}

fn held(shard: u32, epoch: u64, phase: HeldPhase) -> HeldShard {
    HeldShard { shard: ShardId(shard), epoch, phase }
}

#[test]
fn a_graceful_move_reports_the_gap_from_revoked_to_activated() {
    let mut run = Run::new(1, &[(0, "a", 5)]);
    let both = [("a", LIVE), ("b", LIVE)];
    run.step(0, &both, vec![("a", vec![held(0, 5, HeldPhase::Active)]), ("b", vec![])], vec![]);
    run.state.request_move(ShardId(0), w("b"));
    run.step(10, &both, vec![], vec![]);
    run.step(50, &both, vec![], vec![ack("b", 0, 6, Step::Prepared)]);
    assert_eq!(run.state.shards_without_acting_owner(), 0, "the old owner acts until REVOKED");
    run.step(100, &both, vec![], vec![ack("a", 0, 6, Step::Revoked)]);
    assert_eq!(run.state.shards_without_acting_owner(), 1);
    run.step(130, &both, vec![], vec![ack("b", 0, 6, Step::Activated)]);
    assert_eq!(run.state.shards_without_acting_owner(), 0);
    assert_eq!(run.taken(), (vec![30], 30));
}

#[test]
fn a_dead_owners_shard_is_unowned_from_when_it_was_judged_gone() {
    let mut run = Run::new(1, &[(0, "a", 1)]);
    run.step(
        0,
        &[("a", LIVE), ("b", LIVE)],
        vec![("a", vec![held(0, 1, HeldPhase::Active)]), ("b", vec![])],
        vec![],
    );
    // Its session dropped but its lease runs: it may still act, and keeps the shard.
    let out = run.step(500, &[("a", WorkerHealth::Disconnected), ("b", LIVE)], vec![], vec![]);
    assert!(out.sends.is_empty(), "{out:?}");
    assert_eq!(run.state.shards_without_acting_owner(), 0);
    // Gone at 1000 ms (lease plus margin); placement starts the move in the same step.
    let out = run.step(1000, &[("a", GONE), ("b", LIVE)], vec![], vec![]);
    assert!(out.sends.contains(&(w("b"), Command::Prepare { shard: ShardId(0), epoch: 2 })), "{out:?}");
    run.step(1200, &[("a", GONE), ("b", LIVE)], vec![], vec![ack("b", 0, 2, Step::Prepared)]);
    run.step(1500, &[("a", GONE), ("b", LIVE)], vec![], vec![ack("b", 0, 2, Step::Activated)]);
    assert_eq!(run.taken(), (vec![500], 500));
}

#[test]
fn an_old_owner_that_dies_during_prepare_is_counted_from_its_expiry_not_from_activate() {
    let mut run = Run::new(1, &[(0, "a", 1)]);
    let both = [("a", LIVE), ("b", LIVE)];
    run.step(0, &both, vec![("a", vec![held(0, 1, HeldPhase::Active)]), ("b", vec![])], vec![]);
    run.state.request_move(ShardId(0), w("b"));
    run.step(10, &both, vec![], vec![]);
    run.step(300, &[("a", GONE), ("b", LIVE)], vec![], vec![]);
    assert_eq!(run.state.shards_without_acting_owner(), 1);
    run.step(700, &[("a", GONE), ("b", LIVE)], vec![], vec![ack("b", 0, 2, Step::Prepared)]);
    run.step(900, &[("a", GONE), ("b", LIVE)], vec![], vec![ack("b", 0, 2, Step::Activated)]);
    assert_eq!(run.taken(), (vec![600], 600));
}

#[test]
fn a_new_fleets_shards_count_as_unowned_but_their_first_placement_is_no_hand_over() {
    let mut run = Run::new(2, &[]);
    assert_eq!(run.state.shards_without_acting_owner(), 2);
    let out = run.step(100, &[("a", LIVE)], vec![("a", vec![])], vec![]);
    assert_eq!(out.sends.len(), 2, "{out:?}");
    run.step(
        200,
        &[("a", LIVE)],
        vec![],
        vec![ack("a", 0, 1, Step::Prepared), ack("a", 1, 1, Step::Prepared)],
    );
    run.step(250, &[("a", LIVE)], vec![], vec![ack("a", 0, 1, Step::Activated)]);
    assert_eq!(run.state.shards_without_acting_owner(), 1);
    run.step(400, &[("a", LIVE)], vec![], vec![]);
    assert_eq!(run.taken(), (vec![], 250 + 400), "shard 0 until 250 ms, shard 1 still unowned at 400 ms");
    run.step(450, &[("a", LIVE)], vec![], vec![ack("a", 1, 1, Step::Activated)]);
    assert_eq!(run.taken(), (vec![], 50));
    assert_eq!(run.state.shards_without_acting_owner(), 0);
}

#[test]
fn a_cancelled_move_leaves_the_old_owner_acting_and_reports_nothing() {
    let mut run = Run::new(1, &[(0, "a", 1)]);
    let both = [("a", LIVE), ("b", LIVE)];
    run.step(0, &both, vec![("a", vec![held(0, 1, HeldPhase::Active)]), ("b", vec![])], vec![]);
    run.state.request_move(ShardId(0), w("b"));
    run.step(10, &both, vec![], vec![]);
    // The new owner dies before it prepared: the move is cancelled, a keeps acting.
    run.step(500, &[("a", LIVE), ("b", GONE)], vec![], vec![]);
    assert_eq!(run.state.owner(ShardId(0)), Some("a"));
    assert_eq!(run.state.shards_without_acting_owner(), 0);
    assert_eq!(run.taken(), (vec![], 0));
}

#[test]
fn a_move_that_ends_unowned_is_one_gap_with_the_move_that_activates_next() {
    let mut run = Run::new(1, &[(0, "a", 1)]);
    let all = [("a", LIVE), ("b", LIVE), ("c", LIVE)];
    run.step(0, &all, vec![("a", vec![held(0, 1, HeldPhase::Active)]), ("b", vec![]), ("c", vec![])], vec![]);
    run.state.request_move(ShardId(0), w("b"));
    run.step(10, &all, vec![], vec![]);
    run.step(20, &all, vec![], vec![ack("b", 0, 2, Step::Prepared)]);
    run.step(100, &all, vec![], vec![ack("a", 0, 2, Step::Revoked)]);
    // b dies before it acts: the shard is unowned, and placed again (on a or c).
    let dead_b = [("a", LIVE), ("b", GONE), ("c", LIVE)];
    let out = run.step(1100, &dead_b, vec![], vec![]);
    let (to, epoch) = out
        .sends
        .iter()
        .find_map(|(to, c)| match c {
            Command::Prepare { shard: ShardId(0), epoch } => Some((to.0.clone(), *epoch)),
            _ => None,
        })
        .expect("placed again");
    run.step(1200, &dead_b, vec![], vec![ack(&to, 0, epoch, Step::Prepared)]);
    run.step(1400, &dead_b, vec![], vec![ack(&to, 0, epoch, Step::Activated)]);
    assert_eq!(run.taken(), (vec![1300], 1300), "from a's REVOKED to the next owner's ACTIVATED");
}

#[test]
fn after_a_fail_over_a_stopped_or_missing_shard_is_a_gap_and_a_half_done_activate_is_not() {
    // The previous leader's map: a owns 0, 1 and 2 at epoch 3.
    let mut run = Run::new(3, &[(0, "a", 3), (1, "a", 3), (2, "a", 3)]);
    assert_eq!(
        run.state.shards_without_acting_owner(),
        0,
        "the stored owners are trusted until they register"
    );
    let a = [("a", LIVE)];
    // a reports 0 stopped for a move the old leader did not finish, 1 told to act but not yet
    // acting, and 2 missing (it restarted).
    let out = run.step(
        100,
        &a,
        vec![("a", vec![held(0, 3, HeldPhase::Revoking), held(1, 3, HeldPhase::Preparing)])],
        vec![],
    );
    assert!(out.sends.contains(&(
        w("a"),
        Command::Activate { shard: ShardId(1), epoch: 3, barrier: Barrier::ConsistentList }
    )));
    assert_eq!(run.state.shards_without_acting_owner(), 3);
    run.step(150, &a, vec![], vec![ack("a", 1, 3, Step::Activated)]);
    assert_eq!(run.taken(), (vec![], 50 + 50 + 50), "the re-activated shard's gap began before this leader");
    // 0 is placed again once a answered the REVOKE sent at registration (epoch 4); 2 at once.
    run.step(160, &a, vec![], vec![ack("a", 0, 4, Step::Revoked)]);
    run.step(200, &a, vec![], vec![ack("a", 0, 5, Step::Prepared), ack("a", 2, 4, Step::Prepared)]);
    run.step(300, &a, vec![], vec![ack("a", 0, 5, Step::Activated), ack("a", 2, 4, Step::Activated)]);
    assert_eq!(run.taken(), (vec![200, 200], 300));
    assert_eq!(run.state.shards_without_acting_owner(), 0);
}
