//! The workers' gRPC sessions as the leader holds them: who registered, their command streams,
//! the loads they report, and the registrations and acknowledgements waiting for the next step.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use batchfleet_proto::v1 as pb;
use parking_lot::Mutex;
use tokio::sync::{Notify, mpsc};

use super::state::{Ack, HeldShard};
use crate::ids::{ShardId, WorkerId};
use crate::placement::shard_weight;

/// Commands queued on one session's stream before it is cut (`--session-command-queue`).
pub const DEFAULT_COMMAND_QUEUE: usize = 1024;

#[derive(Debug)]
struct Session {
    id: u64,
    stream: Option<mpsc::Sender<pb::Command>>,
    loads: BTreeMap<u32, f64>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    by_id: HashMap<u64, WorkerId>,
    sessions: BTreeMap<WorkerId, Session>,
    registrations: Vec<(WorkerId, Vec<HeldShard>)>,
    acks: Vec<Ack>,
    activate_times: Vec<Duration>,
    /// The last weight reported for each shard by anyone. A shard's load belongs to the shard,
    /// not to the session that reported it: when its holder restarts (registering holding
    /// nothing) the shard is placed again at that weight, not as an idle one, which would make
    /// the restarted worker look underloaded and have placement fill it from everyone else.
    last_loads: BTreeMap<u32, f64>,
}

/// Registrations and acknowledgements received since the last step.
#[derive(Debug, Default)]
pub struct Inbox {
    pub registrations: Vec<(WorkerId, Vec<HeldShard>)>,
    pub acks: Vec<Ack>,
}

#[derive(Debug)]
pub struct SessionHub {
    inner: Mutex<Inner>,
    /// Wakes the controller when something arrived.
    pub arrived: Notify,
    command_queue: usize,
}

impl Default for SessionHub {
    fn default() -> Self {
        Self::with_command_queue(DEFAULT_COMMAND_QUEUE)
    }
}

/// What became of a command given to [`SessionHub::send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Queued,
    /// The worker has no stream open; the controller sends again later.
    NoStream,
    /// The worker's stream had `command_queue` commands it had not read: the stream was cut, so
    /// the worker registers again and the controller sends again what is still due.
    Overflowed,
}

impl SessionHub {
    /// A hub whose sessions each queue at most `command_queue` unread commands.
    pub fn with_command_queue(command_queue: usize) -> Self {
        Self { inner: Mutex::default(), arrived: Notify::new(), command_queue: command_queue.max(1) }
    }

    /// A (re)registration: a new session replaces the worker's old one, whose stream ends.
    pub fn register(&self, worker: WorkerId, held: Vec<HeldShard>, loads: &[pb::ShardLoad]) -> u64 {
        let mut inner = self.inner.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        let session = Session { id, stream: None, loads: weights(loads) };
        inner.last_loads.extend(&session.loads);
        if let Some(old) = inner.sessions.insert(worker.clone(), session) {
            inner.by_id.remove(&old.id);
        }
        inner.by_id.insert(id, worker.clone());
        inner.registrations.push((worker, held));
        drop(inner);
        self.arrived.notify_one();
        id
    }

    pub fn worker_of(&self, session: u64) -> Option<WorkerId> {
        self.inner.lock().by_id.get(&session).cloned()
    }

    /// Opens the session's command stream (a second open replaces the first).
    pub fn open_stream(&self, session: u64) -> Option<mpsc::Receiver<pb::Command>> {
        let mut inner = self.inner.lock();
        let worker = inner.by_id.get(&session)?.clone();
        let (tx, rx) = mpsc::channel(self.command_queue);
        inner.sessions.get_mut(&worker)?.stream = Some(tx);
        drop(inner);
        self.arrived.notify_one();
        Some(rx)
    }

    pub fn heartbeat(&self, session: u64, loads: &[pb::ShardLoad]) -> bool {
        let mut inner = self.inner.lock();
        let Some(worker) = inner.by_id.get(&session).cloned() else { return false };
        let Some(s) = inner.sessions.get_mut(&worker) else { return false };
        s.loads = weights(loads);
        let reported = s.loads.clone();
        inner.last_loads.extend(reported);
        true
    }

    pub fn ack(&self, ack: Ack) {
        self.inner.lock().acks.push(ack);
        self.arrived.notify_one();
    }

    /// How long a worker took to act on ACTIVATE, as it measured and reported it.
    pub fn activated_in(&self, took: Duration) {
        self.inner.lock().activate_times.push(took);
    }

    /// The ACTIVATE times reported since the last call, for the metrics.
    pub fn take_activate_times(&self) -> Vec<Duration> {
        std::mem::take(&mut self.inner.lock().activate_times)
    }

    pub fn take_inbox(&self) -> Inbox {
        let mut inner = self.inner.lock();
        Inbox {
            registrations: std::mem::take(&mut inner.registrations),
            acks: std::mem::take(&mut inner.acks),
        }
    }

    /// Workers whose command stream is open.
    pub fn connected(&self) -> BTreeSet<WorkerId> {
        self.inner
            .lock()
            .sessions
            .iter()
            .filter(|(_, s)| s.stream.as_ref().is_some_and(|tx| !tx.is_closed()))
            .map(|(w, _)| w.clone())
            .collect()
    }

    /// Every registered worker.
    pub fn registered(&self) -> BTreeSet<WorkerId> {
        self.inner.lock().sessions.keys().cloned().collect()
    }

    /// The latest weight of every shard, as its holders report it; for a shard no session
    /// reports now, the last weight anyone reported.
    pub fn loads(&self) -> BTreeMap<ShardId, f64> {
        let inner = self.inner.lock();
        let mut out: BTreeMap<ShardId, f64> =
            inner.last_loads.iter().map(|(s, w)| (ShardId(*s), *w)).collect();
        for s in inner.sessions.values() {
            for (shard, weight) in &s.loads {
                out.insert(ShardId(*shard), *weight);
            }
        }
        out
    }

    /// Queues a command on the worker's stream. Every command is idempotent and sent again while
    /// it is due, so a worker that does not read its stream (stuck, or a connection that stopped
    /// moving) would grow the queue without end: past `command_queue` the stream is cut instead.
    pub fn send(&self, worker: &WorkerId, command: pb::Command) -> Delivery {
        let mut inner = self.inner.lock();
        let Some(session) = inner.sessions.get_mut(worker) else { return Delivery::NoStream };
        let Some(tx) = &session.stream else { return Delivery::NoStream };
        match tx.try_send(command) {
            Ok(()) => Delivery::Queued,
            Err(mpsc::error::TrySendError::Closed(_)) => Delivery::NoStream,
            Err(mpsc::error::TrySendError::Full(_)) => {
                session.stream = None;
                Delivery::Overflowed
            }
        }
    }

    /// Ends every session (this coordinator stopped leading): streams close and workers register
    /// with the next leader.
    pub fn clear(&self) {
        *self.inner.lock() = Inner::default();
    }
}

fn weights(loads: &[pb::ShardLoad]) -> BTreeMap<u32, f64> {
    loads.iter().map(|l| (l.shard, shard_weight(l.objects, l.reconciles_per_second))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(shard: u32) -> pb::Command {
        let assignment = pb::ShardAssignment { shard, epoch: 1 };
        pb::Command { kind: Some(pb::command::Kind::Prepare(assignment)) }
    }

    fn shard_of(command: Option<pb::Command>) -> Option<u32> {
        match command?.kind? {
            pb::command::Kind::Prepare(a) => Some(a.shard),
            _ => None,
        }
    }

    /// A worker that restarts registers holding nothing: its shards keep the weight last
    /// reported for them until their next holder reports.
    #[test]
    fn a_shards_load_outlives_the_session_that_reported_it() {
        let hub = SessionHub::default();
        let load = |shard, rps| pb::ShardLoad { shard, objects: 0, reconciles_per_second: rps };
        let (a, b) = (WorkerId("a".into()), WorkerId("b".into()));
        let session = hub.register(a.clone(), vec![], &[load(1, 2.0)]);
        assert!(hub.heartbeat(session, &[load(1, 2.0), load(2, 4.0)]));
        hub.register(b.clone(), vec![], &[load(3, 1.0)]);
        hub.register(a, vec![], &[]);
        let loads = hub.loads();
        assert_eq!(loads.get(&ShardId(1)), Some(&3.0));
        assert_eq!(loads.get(&ShardId(2)), Some(&5.0));
        assert_eq!(loads.get(&ShardId(3)), Some(&2.0));
        // The next holder's report replaces it.
        let session = hub.register(b, vec![], &[load(2, 0.0)]);
        assert!(hub.heartbeat(session, &[load(2, 1.0)]));
        assert_eq!(hub.loads().get(&ShardId(2)), Some(&2.0));
        hub.clear();
        assert!(hub.loads().is_empty(), "a new term hears loads afresh");
    }

    /// A worker that stops reading its stream is cut off once `command_queue` commands wait,
    /// rather than queueing the controller's resends without end.
    #[tokio::test]
    async fn a_stream_left_unread_is_cut_once_its_queue_is_full() {
        let hub = SessionHub::with_command_queue(2);
        let worker = WorkerId("w-1".into());
        let session = hub.register(worker.clone(), vec![], &[]);
        let mut stream = hub.open_stream(session).expect("registered");
        assert_eq!(hub.send(&worker, command(0)), Delivery::Queued);
        assert_eq!(hub.send(&worker, command(1)), Delivery::Queued);
        assert!(hub.connected().contains(&worker));
        assert_eq!(hub.send(&worker, command(2)), Delivery::Overflowed);
        assert!(!hub.connected().contains(&worker), "the stream is cut");
        assert_eq!(hub.send(&worker, command(3)), Delivery::NoStream);
        // The worker reads what was queued, then the end of the stream, and registers again.
        assert_eq!(shard_of(stream.recv().await), Some(0));
        assert_eq!(shard_of(stream.recv().await), Some(1));
        assert_eq!(stream.recv().await, None);
        let again = hub.register(worker.clone(), vec![], &[]);
        let _stream = hub.open_stream(again).expect("registered again");
        assert_eq!(hub.send(&worker, command(4)), Delivery::Queued);
    }
}
