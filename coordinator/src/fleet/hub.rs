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

#[derive(Debug)]
struct Session {
    id: u64,
    stream: Option<mpsc::UnboundedSender<pb::Command>>,
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
}

/// Registrations and acknowledgements received since the last step.
#[derive(Debug, Default)]
pub struct Inbox {
    pub registrations: Vec<(WorkerId, Vec<HeldShard>)>,
    pub acks: Vec<Ack>,
}

#[derive(Debug, Default)]
pub struct SessionHub {
    inner: Mutex<Inner>,
    /// Wakes the controller when something arrived.
    pub arrived: Notify,
}

impl SessionHub {
    /// A (re)registration: a new session replaces the worker's old one, whose stream ends.
    pub fn register(&self, worker: WorkerId, held: Vec<HeldShard>, loads: &[pb::ShardLoad]) -> u64 {
        let mut inner = self.inner.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        let session = Session { id, stream: None, loads: weights(loads) };
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
    pub fn open_stream(&self, session: u64) -> Option<mpsc::UnboundedReceiver<pb::Command>> {
        let mut inner = self.inner.lock();
        let worker = inner.by_id.get(&session)?.clone();
        let (tx, rx) = mpsc::unbounded_channel();
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

    /// The latest weight of every shard, as its holders report it.
    pub fn loads(&self) -> BTreeMap<ShardId, f64> {
        let inner = self.inner.lock();
        let mut out = BTreeMap::new();
        for s in inner.sessions.values() {
            for (shard, weight) in &s.loads {
                out.insert(ShardId(*shard), *weight);
            }
        }
        out
    }

    /// Queues a command on the worker's stream; `false` when it has none open (the controller
    /// sends again later).
    pub fn send(&self, worker: &WorkerId, command: pb::Command) -> bool {
        let inner = self.inner.lock();
        inner.sessions.get(worker).and_then(|s| s.stream.as_ref()).is_some_and(|tx| tx.send(command).is_ok())
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
