//! One shard's side of the ownership protocol on a worker (DESIGN.md, "Ownership protocol"), as
//! a pure state machine: the steps the coordinator sends (PREPARE, ACTIVATE, REVOKE, DROP) and
//! the end of REVOKE's drain go in, and what the worker must do comes out, or the reason the
//! step is refused. No locks and no I/O: the shard table ([`super::ShardTable`]) keeps one of
//! these per shard under its lock and carries out the actions.
//!
//! Why a shard never writes outside its tenure: work starts only while Active, and a write is
//! admitted only under the epoch of the tenure it began in, while Active, or while Revoking for
//! a reconcile that began before REVOKE. Once REVOKE's drain is done (Revoked), and after a DROP,
//! nothing is admitted; an epoch only grows, so a tenure that ended never comes back.

use super::Epoch;

/// Where a held shard is in the ownership protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardPhase {
    /// Watches run and caches fill; nothing is acted on or written.
    Preparing,
    /// Reconciles and writes run.
    Active,
    /// No new work is taken; in-flight reconciles finish, and may still write.
    Revoking,
    /// REVOKE has answered: the in-flight reconciles are done and nothing more is written for
    /// the shard, not even the events they queued.
    Revoked,
}

/// What a fenced write writes: counted apart, because an event queued by a reconcile that
/// finished before REVOKE answered is dropped by design, while a dropped object write means a
/// reconcile outlived its tenure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// A reconcile's create, update, patch or delete.
    Object,
    /// A core/v1 Event from the event recorder.
    Event,
}

/// A refused step of the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("shard {shard} is at epoch {current}; epoch {requested} is stale")]
    StaleEpoch { shard: u32, current: Epoch, requested: Epoch },
    #[error("shard {shard} is not held by this worker")]
    NotHeld { shard: u32 },
    #[error("shard {shard} is {phase:?}, not {expected:?}")]
    WrongPhase { shard: u32, phase: ShardPhase, expected: ShardPhase },
    #[error("shard {shard} is outside the {count} shards of this fleet")]
    OutOfRange { shard: u32, count: u32 },
}

/// A step of the protocol as the worker takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// PREPARE: hold the shard at `epoch`, filling caches without acting.
    Prepare { epoch: Epoch },
    /// ACTIVATE: the shard prepared at `epoch` acts; its caches reflect the hand-over barrier.
    Activate { epoch: Epoch },
    /// REVOKE's first half: take no new work.
    Revoke,
    /// REVOKE's second half: nothing of the tenure at `epoch` is in flight any more.
    Drained { epoch: Epoch },
    /// DROP: forget the shard.
    Drop,
}

/// What the worker must do after a step, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A tenure begins: what it wrote, reconciled and was fed starts from nothing.
    StartTenure,
    /// The tenure is over: forget what was kept about it.
    EndTenure,
    /// Answer REVOKE with the resourceVersion of the tenure's last write, the hand-over barrier.
    AnswerLastWrite,
    /// Wake whoever waits for a phase change (the reconcile loop re-checks).
    NotifyPhaseChange,
    /// Tell the controllers the shard acts: they queue its keys.
    RunActivateHooks,
    /// Tell the controllers the shard is gone: they empty its caches.
    RunDropHooks,
}

/// A held shard's phase and the epoch of its tenure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tenure {
    pub phase: ShardPhase,
    pub epoch: Epoch,
}

/// One shard as this worker knows it: its tenure, if held, and the highest epoch it was ever
/// given here, kept after a DROP so that an epoch never goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardState {
    shard: u32,
    highest_epoch: Epoch,
    tenure: Option<Tenure>,
}

impl ShardState {
    /// A shard never held here.
    pub fn new(shard: u32) -> Self {
        Self { shard, highest_epoch: 0, tenure: None }
    }

    /// A shard Active at `epoch` from the start, with no protocol: `--standalone`.
    pub fn acting(shard: u32, epoch: Epoch) -> Self {
        Self { shard, highest_epoch: epoch, tenure: Some(Tenure { phase: ShardPhase::Active, epoch }) }
    }

    pub fn tenure(&self) -> Option<Tenure> {
        self.tenure
    }

    /// The epoch under which work may start now: only while Active.
    pub fn acting_epoch(&self) -> Option<Epoch> {
        self.tenure.filter(|t| t.phase == ShardPhase::Active).map(|t| t.epoch)
    }

    /// Whether a write of `kind` begun under `epoch` may go out now, as far as the protocol goes
    /// (the lease is the fence's business). In-flight reconciles finish their object writes while
    /// Revoking; the event recorder starts none then: its queue may hold many of the shard's
    /// events, and REVOKE must not wait for them all.
    pub fn admits(&self, epoch: Epoch, kind: WriteKind) -> bool {
        let writable = match kind {
            WriteKind::Object => &[ShardPhase::Active, ShardPhase::Revoking][..],
            WriteKind::Event => &[ShardPhase::Active][..],
        };
        self.tenure.is_some_and(|t| t.epoch == epoch && writable.contains(&t.phase))
    }

    /// Takes one step; what to do, or why the step is refused (and nothing changed).
    pub fn on(&mut self, event: Event) -> Result<Vec<Action>, ShardError> {
        let shard = self.shard;
        match (self.tenure.as_mut(), event) {
            (_, Event::Prepare { epoch }) => {
                if epoch <= self.highest_epoch {
                    return Err(ShardError::StaleEpoch {
                        shard,
                        current: self.highest_epoch,
                        requested: epoch,
                    });
                }
                self.highest_epoch = epoch;
                self.tenure = Some(Tenure { phase: ShardPhase::Preparing, epoch });
                Ok(vec![Action::StartTenure, Action::NotifyPhaseChange])
            }
            (None, Event::Activate { .. } | Event::Revoke) => Err(ShardError::NotHeld { shard }),
            (Some(t), Event::Activate { epoch }) => {
                if t.epoch != epoch {
                    return Err(ShardError::StaleEpoch { shard, current: t.epoch, requested: epoch });
                }
                if t.phase != ShardPhase::Preparing {
                    return Err(ShardError::WrongPhase {
                        shard,
                        phase: t.phase,
                        expected: ShardPhase::Preparing,
                    });
                }
                t.phase = ShardPhase::Active;
                Ok(vec![Action::NotifyPhaseChange, Action::RunActivateHooks])
            }
            (Some(t), Event::Revoke) => match t.phase {
                ShardPhase::Preparing => {
                    Err(ShardError::WrongPhase { shard, phase: t.phase, expected: ShardPhase::Active })
                }
                ShardPhase::Active => {
                    t.phase = ShardPhase::Revoking;
                    Ok(vec![Action::NotifyPhaseChange])
                }
                // A repeated REVOKE changes nothing.
                ShardPhase::Revoking | ShardPhase::Revoked => Ok(vec![Action::NotifyPhaseChange]),
            },
            (Some(t), Event::Drained { epoch })
                if t.epoch == epoch && matches!(t.phase, ShardPhase::Revoking | ShardPhase::Revoked) =>
            {
                t.phase = ShardPhase::Revoked;
                Ok(vec![Action::AnswerLastWrite, Action::NotifyPhaseChange])
            }
            // Dropped (or moved on) while draining: nothing of that tenure writes any more. And
            // only a REVOKE's drain seals a tenure.
            (_, Event::Drained { .. }) => Ok(Vec::new()),
            (Some(_), Event::Drop) => {
                self.tenure = None;
                Ok(vec![Action::EndTenure, Action::NotifyPhaseChange, Action::RunDropHooks])
            }
            (None, Event::Drop) => Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::*;
    use ShardPhase::*;

    const S: u32 = 3;

    /// A shard in `phase` at epoch 5 (`None`: dropped after holding epoch 5).
    fn at(phase: Option<ShardPhase>) -> ShardState {
        let mut state = ShardState::new(S);
        state.on(Event::Prepare { epoch: 5 }).unwrap();
        let steps: &[Event] = match phase {
            None => &[Event::Drop],
            Some(Preparing) => &[],
            Some(Active) => &[Event::Activate { epoch: 5 }],
            Some(Revoking) => &[Event::Activate { epoch: 5 }, Event::Revoke],
            Some(Revoked) => &[Event::Activate { epoch: 5 }, Event::Revoke, Event::Drained { epoch: 5 }],
        };
        for step in steps {
            state.on(*step).unwrap();
        }
        assert_eq!(state.tenure().map(|t| t.phase), phase, "set-up");
        state
    }

    fn stale(current: Epoch, requested: Epoch) -> ShardError {
        ShardError::StaleEpoch { shard: S, current, requested }
    }

    fn wrong(phase: ShardPhase, expected: ShardPhase) -> ShardError {
        ShardError::WrongPhase { shard: S, phase, expected }
    }

    /// From (`None`: not held), step, to, what the worker does, the rule.
    type Allowed = (Option<ShardPhase>, Event, Option<(ShardPhase, Epoch)>, &'static [Action], &'static str);

    /// Every step the protocol allows, from every phase: the phase (and epoch) it leads to and
    /// what the worker does. Each row cites the rule of DESIGN.md it carries out.
    #[test]
    fn the_steps_the_protocol_allows() {
        #[rustfmt::skip]
        let rows: &[Allowed] = &[
            (None, Event::Prepare { epoch: 6 }, Some((Preparing, 6)), &[StartTenure, NotifyPhaseChange],
             "PREPARE: the new owner starts the shard's watches and fills its caches; a later epoch may hold it again"),
            (Some(Preparing), Event::Prepare { epoch: 6 }, Some((Preparing, 6)), &[StartTenure, NotifyPhaseChange],
             "a move under a greater epoch replaces the one under way"),
            (Some(Active), Event::Prepare { epoch: 6 }, Some((Preparing, 6)), &[StartTenure, NotifyPhaseChange],
             "a greater epoch starts a new tenure; the old one's writes are stale from now on"),
            (Some(Revoking), Event::Prepare { epoch: 6 }, Some((Preparing, 6)), &[StartTenure, NotifyPhaseChange],
             "a greater epoch starts a new tenure even while the old one drains; its writes are stale"),
            (Some(Revoked), Event::Prepare { epoch: 6 }, Some((Preparing, 6)), &[StartTenure, NotifyPhaseChange],
             "a shard handed away may come back under a greater epoch"),
            (Some(Preparing), Event::Activate { epoch: 5 }, Some((Active, 5)), &[NotifyPhaseChange, RunActivateHooks],
             "ACTIVATE: the new owner acts once its caches reflect the barrier"),
            (Some(Active), Event::Revoke, Some((Revoking, 5)), &[NotifyPhaseChange],
             "REVOKE: the old owner stops taking work for the shard and finishes in-flight reconciles"),
            (Some(Revoking), Event::Revoke, Some((Revoking, 5)), &[NotifyPhaseChange],
             "commands are repeated until answered: a repeated REVOKE changes nothing"),
            (Some(Revoked), Event::Revoke, Some((Revoked, 5)), &[NotifyPhaseChange],
             "a REVOKE repeated after the answer changes nothing"),
            (Some(Revoking), Event::Drained { epoch: 5 }, Some((Revoked, 5)), &[AnswerLastWrite, NotifyPhaseChange],
             "REVOKE acknowledges with the resourceVersion of its last write once in-flight reconciles finished"),
            (Some(Revoked), Event::Drained { epoch: 5 }, Some((Revoked, 5)), &[AnswerLastWrite, NotifyPhaseChange],
             "a repeated REVOKE, drained alongside the first, gets the same answer"),
            (Some(Revoking), Event::Drained { epoch: 4 }, Some((Revoking, 5)), &[],
             "the drain of an earlier tenure answers nothing for this one"),
            (Some(Active), Event::Drained { epoch: 5 }, Some((Active, 5)), &[],
             "only REVOKE stops an acting owner"),
            (None, Event::Drained { epoch: 5 }, None, &[],
             "dropped while draining: nothing of that tenure writes any more"),
            (Some(Preparing), Event::Drop, None, &[EndTenure, NotifyPhaseChange, RunDropHooks],
             "DROP: a prepared move that will not happen empties its caches"),
            (Some(Active), Event::Drop, None, &[EndTenure, NotifyPhaseChange, RunDropHooks],
             "DROP forgets the shard; any later write under its epoch is fenced"),
            (Some(Revoking), Event::Drop, None, &[EndTenure, NotifyPhaseChange, RunDropHooks],
             "DROP while draining: the in-flight reconciles' writes are fenced from now on"),
            (Some(Revoked), Event::Drop, None, &[EndTenure, NotifyPhaseChange, RunDropHooks],
             "DROP after REVOKE answered: the move is done"),
            (None, Event::Drop, None, &[], "a repeated DROP changes nothing"),
        ];
        for (from, event, to, actions, rule) in rows {
            let mut state = at(*from);
            let done = state.on(*event);
            assert_eq!(done.as_deref(), Ok(*actions), "{from:?} + {event:?}: {rule}");
            assert_eq!(state.tenure().map(|t| (t.phase, t.epoch)), *to, "{from:?} + {event:?}: {rule}");
        }
    }

    /// Every step the protocol refuses: the reason, and nothing changed.
    #[test]
    fn the_steps_the_protocol_refuses() {
        #[rustfmt::skip]
        let rows: &[(Option<ShardPhase>, Event, ShardError, &str)] = &[
            (Some(Active), Event::Prepare { epoch: 5 }, stale(5, 5),
             "an epoch only grows per shard: the same epoch again is a repeat, not a new tenure"),
            (Some(Active), Event::Prepare { epoch: 4 }, stale(5, 4), "an epoch only grows per shard"),
            (None, Event::Prepare { epoch: 5 }, stale(5, 5), "an epoch only grows, even across a DROP"),
            (None, Event::Activate { epoch: 5 }, ShardError::NotHeld { shard: S },
             "ACTIVATE follows PREPARE on the same worker"),
            (Some(Preparing), Event::Activate { epoch: 4 }, stale(5, 4),
             "stale work is dropped: an ACTIVATE of an earlier move"),
            (Some(Preparing), Event::Activate { epoch: 6 }, stale(5, 6),
             "ACTIVATE carries the epoch the shard was prepared under"),
            (Some(Active), Event::Activate { epoch: 5 }, wrong(Active, Preparing),
             "ACTIVATE acts on a prepared shard only"),
            (Some(Revoking), Event::Activate { epoch: 5 }, wrong(Revoking, Preparing),
             "a revoked tenure never acts again: at most one owner writes for a shard"),
            (Some(Revoked), Event::Activate { epoch: 5 }, wrong(Revoked, Preparing),
             "a revoked tenure never acts again: at most one owner writes for a shard"),
            (None, Event::Revoke, ShardError::NotHeld { shard: S }, "REVOKE goes to the old owner"),
            (Some(Preparing), Event::Revoke, wrong(Preparing, Active),
             "REVOKE stops an acting owner; a prepared shard never acted here"),
        ];
        for (from, event, error, rule) in rows {
            let mut state = at(*from);
            let before = state;
            assert_eq!(state.on(*event).as_ref(), Err(error), "{from:?} + {event:?}: {rule}");
            assert_eq!(state, before, "{from:?} + {event:?}: a refused step changes nothing");
        }
    }

    /// Which writes each phase lets out, by kind and epoch.
    #[test]
    fn writes_go_out_only_within_the_tenure_they_began_in() {
        #[rustfmt::skip]
        let rows: &[(Option<ShardPhase>, Epoch, WriteKind, bool, &str)] = &[
            (Some(Preparing), 5, WriteKind::Object, false, "PREPARE fills caches while the old owner still acts"),
            (Some(Preparing), 5, WriteKind::Event, false, "PREPARE fills caches while the old owner still acts"),
            (Some(Active), 5, WriteKind::Object, true, "the acting owner writes"),
            (Some(Active), 5, WriteKind::Event, true, "the acting owner writes"),
            (Some(Active), 4, WriteKind::Object, false, "every reconcile checks its epoch before each write"),
            (Some(Active), 4, WriteKind::Event, false, "every reconcile checks its epoch before each write"),
            (Some(Revoking), 5, WriteKind::Object, true, "REVOKE finishes in-flight reconciles, writes and all"),
            (Some(Revoking), 5, WriteKind::Event, false,
             "REVOKE does not wait for the event queue: no event write starts while revoking"),
            (Some(Revoked), 5, WriteKind::Object, false, "nothing is written once REVOKE answered"),
            (Some(Revoked), 5, WriteKind::Event, false, "nothing is written once REVOKE answered"),
            (None, 5, WriteKind::Object, false, "DROP: any later write under its epoch is fenced"),
            (None, 5, WriteKind::Event, false, "DROP: any later write under its epoch is fenced"),
        ];
        for (phase, epoch, kind, admitted, rule) in rows {
            assert_eq!(
                at(*phase).admits(*epoch, *kind),
                *admitted,
                "{phase:?}, epoch {epoch}, {kind:?}: {rule}"
            );
        }
    }

    #[test]
    fn work_starts_only_while_active() {
        for phase in [None, Some(Preparing), Some(Active), Some(Revoking), Some(Revoked)] {
            let expected = (phase == Some(Active)).then_some(5);
            assert_eq!(at(phase).acting_epoch(), expected, "{phase:?}");
        }
    }

    /// A write begun under an old tenure stays fenced after the shard comes back here.
    #[test]
    fn a_tenure_that_ended_never_comes_back() {
        let mut state = at(Some(Active));
        for step in [Event::Revoke, Event::Drained { epoch: 5 }, Event::Drop, Event::Prepare { epoch: 6 }] {
            state.on(step).unwrap();
        }
        state.on(Event::Activate { epoch: 6 }).unwrap();
        assert!(!state.admits(5, WriteKind::Object));
        assert!(state.admits(6, WriteKind::Object));
        assert_eq!(state.on(Event::Drained { epoch: 5 }), Ok(Vec::new()), "the old drain seals nothing");
        assert_eq!(state.acting_epoch(), Some(6));
    }
}
