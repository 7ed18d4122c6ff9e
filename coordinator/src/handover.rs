//! One shard's warm hand-over from one worker to another, as a pure state machine (DESIGN.md,
//! "Ownership protocol"): PREPARE on the new owner while the old one still acts, REVOKE on the old
//! owner until it acknowledges with its last write's resourceVersion, then ACTIVATE on the new
//! owner with that resourceVersion as its barrier. The coordinator feeds it what happened —
//! acknowledgements and lease expiries — and carries out the actions it returns.
//!
//! Why the shard never has two acting owners: ACTIVATE is sent only after the old owner
//! acknowledged REVOKE (it has stopped and finished its in-flight work) or after its lease expired
//! plus the margin (it has fenced itself by its own clock). Nothing else opens that gate.

use crate::ids::{ShardId, WorkerId};

/// Where the new owner's caches must have caught up to before it acts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Barrier {
    /// The resourceVersion of the old owner's last write (a bookmark or event at or past it).
    ResourceVersion(String),
    /// No last write is known (the old owner died, or there was none): a consistent LIST of the
    /// shard, served at the current resourceVersion.
    ConsistentList,
}

/// What the coordinator learnt about this move. Acknowledgements carry the epoch they answer;
/// one for another epoch (a stale answer to an earlier move) is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The new owner has started the shard's watches and filled its caches.
    Prepared { epoch: u64 },
    /// The old owner stopped taking work, finished in-flight reconciles and wrote last at this
    /// resourceVersion (`None`: it wrote nothing for the shard).
    Revoked { epoch: u64, last_write: Option<String> },
    /// The new owner acts for the shard.
    Activated { epoch: u64 },
    /// The old owner's lease expired, plus the margin: it has stopped by its own clock.
    OldOwnerExpired,
    /// The new owner's lease expired, plus the margin.
    NewOwnerExpired,
    /// An operator or a deadline gave up on the move. Honoured only before REVOKE, while the old
    /// owner still acts; afterwards the move can only end by the protocol's steps.
    Cancel,
}

/// What the coordinator must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Persist in the shard map that the shard moves to `to` under `epoch`, before any worker
    /// hears of the epoch, so a coordinator fail-over never issues it twice.
    RecordMove {
        shard: ShardId,
        to: WorkerId,
        epoch: u64,
    },
    SendPrepare {
        to: WorkerId,
        shard: ShardId,
        epoch: u64,
    },
    SendRevoke {
        to: WorkerId,
        shard: ShardId,
        epoch: u64,
    },
    /// Persist the new owner before telling it to act.
    RecordOwner {
        shard: ShardId,
        owner: WorkerId,
        epoch: u64,
    },
    SendActivate {
        to: WorkerId,
        shard: ShardId,
        epoch: u64,
        barrier: Barrier,
    },
    /// Tell a worker that prepared the shard to drop its caches: the move will not happen.
    SendDrop {
        to: WorkerId,
        shard: ShardId,
        epoch: u64,
    },
    /// Persist that nobody acts for the shard; the coordinator places it again, and the next
    /// move starts from `barrier`.
    RecordUnowned {
        shard: ShardId,
        epoch: u64,
        barrier: Barrier,
    },
}

/// Where the move stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    Preparing,
    /// A standby move: the new owner is warm, and activates once the old owner's lease runs out;
    /// no REVOKE is sent (the old owner lost its session and cannot answer one). Cancelled if
    /// the old owner comes back.
    Standby,
    Revoking,
    Activating {
        barrier: Barrier,
    },
    /// The new owner acts.
    Done,
    /// The old owner still acts; the move did not happen.
    Cancelled,
    /// Nobody acts; the shard must be placed again.
    Unowned {
        barrier: Barrier,
    },
}

/// One move of one shard.
#[derive(Debug, Clone)]
pub struct Handover {
    pub shard: ShardId,
    /// The acting owner when the move started, while it may still act.
    pub from: Option<WorkerId>,
    pub to: WorkerId,
    /// The shard's new epoch: greater than every epoch it had.
    pub epoch: u64,
    phase: Phase,
    /// The new owner's lease expired while the old owner was revoking.
    new_owner_gone: bool,
    /// Started while the old owner was suspected lost ([`Handover::start_standby`]).
    standby: bool,
}

impl Handover {
    /// Starts a move; `from` is the acting owner (`None` when nobody acts, as for a new shard or
    /// one whose owner's lease already expired).
    pub fn start(shard: ShardId, from: Option<WorkerId>, to: WorkerId, epoch: u64) -> (Self, Vec<Action>) {
        let actions = vec![
            Action::RecordMove { shard, to: to.clone(), epoch },
            Action::SendPrepare { to: to.clone(), shard, epoch },
        ];
        (
            Self { shard, from, to, epoch, phase: Phase::Preparing, new_owner_gone: false, standby: false },
            actions,
        )
    }

    /// Starts a standby move off `from`, a worker that lost its session and is most likely dead:
    /// the new owner warms the shard now, while `from`'s lease runs out, so that it acts as soon
    /// as it may rather than only then starting to list. Nothing is asked of `from`, which keeps
    /// acting while its lease runs: the move activates on [`Event::OldOwnerExpired`], and is
    /// cancelled (the new owner drops its caches) when `from` comes back.
    pub fn start_standby(shard: ShardId, from: WorkerId, to: WorkerId, epoch: u64) -> (Self, Vec<Action>) {
        let (mut handover, actions) = Self::start(shard, Some(from), to, epoch);
        handover.standby = true;
        (handover, actions)
    }

    /// Whether this move waits for its old owner's lease rather than revoking it.
    pub fn is_standby(&self) -> bool {
        self.standby && self.from.is_some()
    }

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// Whether the move has ended, one way or another.
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Done | Phase::Cancelled | Phase::Unowned { .. })
    }

    /// Advances the move; returns what to do. Events that do not apply are ignored.
    pub fn on(&mut self, event: Event) -> Vec<Action> {
        let (shard, epoch) = (self.shard, self.epoch);
        match (&self.phase, event) {
            (Phase::Preparing, Event::Prepared { epoch: e }) if e == epoch => match self.from.clone() {
                Some(_) if self.standby => {
                    self.phase = Phase::Standby;
                    Vec::new()
                }
                Some(old) => {
                    self.phase = Phase::Revoking;
                    vec![Action::SendRevoke { to: old, shard, epoch }]
                }
                None => self.activate(Barrier::ConsistentList),
            },
            (Phase::Preparing, Event::OldOwnerExpired) => {
                self.from = None;
                Vec::new()
            }
            (Phase::Preparing, Event::NewOwnerExpired) => {
                // The old owner never stopped: it keeps the shard.
                self.phase = Phase::Cancelled;
                Vec::new()
            }
            (Phase::Standby, Event::OldOwnerExpired) => {
                self.from = None;
                self.activate(Barrier::ConsistentList)
            }
            (Phase::Standby, Event::NewOwnerExpired) => {
                self.phase = Phase::Cancelled;
                Vec::new()
            }
            (Phase::Preparing | Phase::Standby, Event::Cancel) => {
                self.phase = Phase::Cancelled;
                vec![Action::SendDrop { to: self.to.clone(), shard, epoch }]
            }
            (Phase::Revoking, Event::Revoked { epoch: e, last_write }) if e == epoch => {
                self.from = None;
                let barrier = last_write.map_or(Barrier::ConsistentList, Barrier::ResourceVersion);
                if self.new_owner_gone { self.unowned(barrier) } else { self.activate(barrier) }
            }
            (Phase::Revoking, Event::OldOwnerExpired) => {
                self.from = None;
                if self.new_owner_gone {
                    self.unowned(Barrier::ConsistentList)
                } else {
                    self.activate(Barrier::ConsistentList)
                }
            }
            (Phase::Revoking, Event::NewOwnerExpired) => {
                // The old owner may still be finishing in-flight work: wait for its answer or its
                // lease before calling the shard unowned.
                self.new_owner_gone = true;
                Vec::new()
            }
            (Phase::Activating { .. }, Event::Activated { epoch: e }) if e == epoch => {
                self.phase = Phase::Done;
                Vec::new()
            }
            (Phase::Activating { .. }, Event::NewOwnerExpired) => self.unowned(Barrier::ConsistentList),
            _ => Vec::new(),
        }
    }

    fn activate(&mut self, barrier: Barrier) -> Vec<Action> {
        self.phase = Phase::Activating { barrier: barrier.clone() };
        vec![
            Action::RecordOwner { shard: self.shard, owner: self.to.clone(), epoch: self.epoch },
            Action::SendActivate { to: self.to.clone(), shard: self.shard, epoch: self.epoch, barrier },
        ]
    }

    fn unowned(&mut self, barrier: Barrier) -> Vec<Action> {
        self.phase = Phase::Unowned { barrier: barrier.clone() };
        vec![Action::RecordUnowned { shard: self.shard, epoch: self.epoch, barrier }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: ShardId = ShardId(7);

    fn w(name: &str) -> WorkerId {
        WorkerId(name.into())
    }

    fn rv(v: &str) -> Barrier {
        Barrier::ResourceVersion(v.into())
    }

    fn revoked(epoch: u64, last: Option<&str>) -> Event {
        Event::Revoked { epoch, last_write: last.map(str::to_string) }
    }

    /// Runs a move through `events`; returns every action and the final phase.
    fn run(from: Option<&str>, events: Vec<Event>) -> (Vec<Action>, Phase) {
        let (mut h, mut actions) = Handover::start(S, from.map(w), w("new"), 5);
        for e in events {
            actions.extend(h.on(e));
        }
        (actions, h.phase().clone())
    }

    fn is_activate(a: &Action) -> bool {
        matches!(a, Action::SendActivate { .. })
    }

    #[test]
    fn a_graceful_move_prepares_revokes_then_activates_at_the_last_write() {
        let (actions, phase) = run(
            Some("old"),
            vec![Event::Prepared { epoch: 5 }, revoked(5, Some("1200")), Event::Activated { epoch: 5 }],
        );
        assert_eq!(
            actions,
            [
                Action::RecordMove { shard: S, to: w("new"), epoch: 5 },
                Action::SendPrepare { to: w("new"), shard: S, epoch: 5 },
                Action::SendRevoke { to: w("old"), shard: S, epoch: 5 },
                Action::RecordOwner { shard: S, owner: w("new"), epoch: 5 },
                Action::SendActivate { to: w("new"), shard: S, epoch: 5, barrier: rv("1200") },
            ]
        );
        assert_eq!(phase, Phase::Done);
    }

    /// The invariant: no ACTIVATE before the old owner acknowledged REVOKE or expired.
    #[test]
    fn activate_waits_for_the_old_owner_whatever_else_happens() {
        let noise = vec![
            Event::Prepared { epoch: 5 },
            Event::Prepared { epoch: 5 },
            Event::Activated { epoch: 5 },
            revoked(4, Some("900")),
            Event::Cancel,
            Event::Prepared { epoch: 6 },
        ];
        let (actions, phase) = run(Some("old"), noise);
        assert!(!actions.iter().any(is_activate), "{actions:?}");
        assert_eq!(phase, Phase::Revoking, "a cancel after REVOKE is not honoured");
    }

    #[test]
    fn a_dead_old_owner_is_waited_out_by_its_lease_then_the_new_owner_lists() {
        let (actions, phase) = run(Some("old"), vec![Event::Prepared { epoch: 5 }, Event::OldOwnerExpired]);
        assert_eq!(
            actions.last(),
            Some(&Action::SendActivate {
                to: w("new"),
                shard: S,
                epoch: 5,
                barrier: Barrier::ConsistentList
            })
        );
        assert_eq!(phase, Phase::Activating { barrier: Barrier::ConsistentList });
    }

    #[test]
    fn an_old_owner_that_expired_while_the_new_one_prepared_gets_no_revoke() {
        let (actions, _) = run(Some("old"), vec![Event::OldOwnerExpired, Event::Prepared { epoch: 5 }]);
        assert!(!actions.iter().any(|a| matches!(a, Action::SendRevoke { .. })));
        assert!(actions.iter().any(is_activate));
    }

    fn run_standby(events: Vec<Event>) -> (Vec<Action>, Phase) {
        let (mut h, mut actions) = Handover::start_standby(S, w("old"), w("new"), 5);
        for e in events {
            actions.extend(h.on(e));
        }
        (actions, h.phase().clone())
    }

    /// A standby move never revokes (the old owner cannot answer) and never activates before the
    /// old owner's lease ran out, whatever arrives meanwhile.
    #[test]
    fn a_standby_move_warms_then_waits_for_the_old_owners_lease() {
        let noise = vec![
            Event::Prepared { epoch: 5 },
            Event::Prepared { epoch: 5 },
            Event::Activated { epoch: 5 },
            revoked(5, Some("900")),
        ];
        let (actions, phase) = run_standby(noise);
        assert!(!actions.iter().any(|a| matches!(a, Action::SendRevoke { .. })), "{actions:?}");
        assert!(!actions.iter().any(is_activate), "{actions:?}");
        assert_eq!(phase, Phase::Standby);

        let (actions, phase) = run_standby(vec![Event::Prepared { epoch: 5 }, Event::OldOwnerExpired]);
        assert_eq!(
            actions[2..],
            [
                Action::RecordOwner { shard: S, owner: w("new"), epoch: 5 },
                Action::SendActivate { to: w("new"), shard: S, epoch: 5, barrier: Barrier::ConsistentList },
            ]
        );
        assert_eq!(phase, Phase::Activating { barrier: Barrier::ConsistentList });
    }

    /// The old owner came back (its session, with its lease never lapsed): the warm caches are
    /// dropped and it goes on acting, before or after the new owner finished warming.
    #[test]
    fn a_standby_move_is_cancelled_when_the_old_owner_comes_back() {
        for events in [vec![Event::Cancel], vec![Event::Prepared { epoch: 5 }, Event::Cancel]] {
            let (actions, phase) = run_standby(events);
            assert_eq!(actions.last(), Some(&Action::SendDrop { to: w("new"), shard: S, epoch: 5 }));
            assert_eq!(phase, Phase::Cancelled);
        }
    }

    #[test]
    fn a_standby_move_whose_old_owner_expired_before_warming_activates_once_warm() {
        let (mut h, _) = Handover::start_standby(S, w("old"), w("new"), 5);
        assert!(h.is_standby());
        assert!(h.on(Event::OldOwnerExpired).is_empty());
        assert!(!h.is_standby(), "nobody to wait for any more");
        assert!(h.on(Event::Prepared { epoch: 5 }).iter().any(is_activate));
    }

    #[test]
    fn an_unowned_shard_is_prepared_then_activated_by_a_consistent_list() {
        let (actions, phase) = run(None, vec![Event::Prepared { epoch: 5 }, Event::Activated { epoch: 5 }]);
        assert!(!actions.iter().any(|a| matches!(a, Action::SendRevoke { .. })));
        assert!(actions.contains(&Action::SendActivate {
            to: w("new"),
            shard: S,
            epoch: 5,
            barrier: Barrier::ConsistentList
        }));
        assert_eq!(phase, Phase::Done);
    }

    #[test]
    fn the_old_owner_that_wrote_nothing_gives_a_consistent_list_barrier() {
        let (actions, _) = run(Some("old"), vec![Event::Prepared { epoch: 5 }, revoked(5, None)]);
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, Action::SendActivate { barrier: Barrier::ConsistentList, .. }))
        );
    }

    #[test]
    fn a_new_owner_lost_while_preparing_leaves_the_old_owner_acting() {
        let (actions, phase) = run(Some("old"), vec![Event::NewOwnerExpired, Event::Prepared { epoch: 5 }]);
        assert_eq!(phase, Phase::Cancelled);
        assert!(!actions.iter().any(|a| matches!(a, Action::SendRevoke { .. }) || is_activate(a)));
    }

    #[test]
    fn a_cancel_before_revoke_drops_the_new_owners_caches() {
        let (actions, phase) = run(Some("old"), vec![Event::Cancel]);
        assert_eq!(actions.last(), Some(&Action::SendDrop { to: w("new"), shard: S, epoch: 5 }));
        assert_eq!(phase, Phase::Cancelled);
    }

    #[test]
    fn a_new_owner_lost_while_revoking_waits_for_the_old_owner_then_leaves_the_shard_unowned() {
        let (mut h, _) = Handover::start(S, Some(w("old")), w("new"), 5);
        h.on(Event::Prepared { epoch: 5 });
        assert_eq!(h.on(Event::NewOwnerExpired), Vec::new(), "the old owner may still be writing");
        assert!(!h.is_finished());
        assert_eq!(
            h.on(revoked(5, Some("77"))),
            [Action::RecordUnowned { shard: S, epoch: 5, barrier: rv("77") }]
        );
        assert_eq!(h.phase(), &Phase::Unowned { barrier: rv("77") });
    }

    #[test]
    fn a_new_owner_lost_after_activate_leaves_the_shard_unowned_after_its_lease() {
        let (actions, phase) = run(
            Some("old"),
            vec![Event::Prepared { epoch: 5 }, revoked(5, Some("9")), Event::NewOwnerExpired],
        );
        assert_eq!(
            actions.last(),
            Some(&Action::RecordUnowned { shard: S, epoch: 5, barrier: Barrier::ConsistentList })
        );
        assert_eq!(phase, Phase::Unowned { barrier: Barrier::ConsistentList });
    }

    #[test]
    fn the_owner_is_recorded_before_activate_and_the_move_before_prepare() {
        let (actions, _) = run(Some("old"), vec![Event::Prepared { epoch: 5 }, revoked(5, Some("1"))]);
        let pos = |f: &dyn Fn(&Action) -> bool| actions.iter().position(f).expect("present");
        assert!(
            pos(&|a| matches!(a, Action::RecordMove { .. }))
                < pos(&|a| matches!(a, Action::SendPrepare { .. }))
        );
        assert!(pos(&|a| matches!(a, Action::RecordOwner { .. })) < pos(&is_activate));
    }
}
