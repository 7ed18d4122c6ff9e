//! The order in which a client's waiting requests get their tokens: round robin across
//! namespaces, then by class inside a namespace, then round robin across the flows (Jobs) of a
//! class.
//!
//! client-go serves a client's requests first come, first served behind one token bucket, so a
//! namespace whose Job wants 50,000 pods takes the whole budget until they are created, and a
//! Job that is done waits behind them to write its status and release its pods' finalizers
//! (kubernetes/kubernetes#80397, #128625). This is deficit round robin with a quantum of one
//! request, each request costing one token. Namespaces come first: a namespace's own finishing
//! writes (a large Job's thousands of finalizer removals) must not take the whole budget from
//! the others, which strict priority between classes across namespaces would let them. Inside a
//! namespace a class below is served only while the classes above have nothing waiting, so a
//! Job that is done waits at most a round of the other namespaces, never another Job's creates.
//! Pure: no clock, no I/O.

use std::collections::{HashMap, VecDeque};

/// What a request is for, in the order classes are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestClass {
    /// Writes that finish work: status updates and pod patches (the Job controller's only pod
    /// patch removes its tracking finalizer). A Job that is done must not wait behind another
    /// Job's creates, and finalizers held keep pods in etcd.
    Finish,
    /// Everything else: reads, deletes, Job creates, Events.
    Other,
    /// Pod creates, the bulk of a large Job's requests.
    Create,
}

impl RequestClass {
    pub const ALL: [RequestClass; 3] = [RequestClass::Finish, RequestClass::Other, RequestClass::Create];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Finish => "finish",
            Self::Other => "other",
            Self::Create => "create",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Where a request belongs in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    pub class: RequestClass,
    /// The namespace the request is in ("" for cluster-scoped requests).
    pub namespace: String,
    /// The flow inside the namespace: the owning Job's uid for a pod create, "" otherwise.
    pub flow: String,
}

#[derive(Debug, Default)]
struct Class {
    /// Flows with requests waiting, in their turn order.
    turns: VecDeque<String>,
    waiting: HashMap<String, VecDeque<u64>>,
}

#[derive(Debug, Default)]
struct Namespace {
    classes: [Class; 3],
}

impl Namespace {
    fn is_empty(&self) -> bool {
        self.classes.iter().all(|c| c.turns.is_empty())
    }
}

/// The waiting requests, by id.
#[derive(Debug, Default)]
pub struct FairQueue {
    /// Namespaces with requests waiting, in their turn order.
    turns: VecDeque<String>,
    namespaces: HashMap<String, Namespace>,
    len: usize,
}

impl FairQueue {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Requests of `class` waiting.
    pub fn waiting_in(&self, class: RequestClass) -> usize {
        self.namespaces
            .values()
            .flat_map(|n| n.classes[class.index()].waiting.values())
            .map(VecDeque::len)
            .sum()
    }

    /// Queues request `id`; it is served after the requests of its flow queued before it.
    pub fn push(&mut self, ticket: &Ticket, id: u64) {
        let namespace = self.namespaces.entry(ticket.namespace.clone()).or_insert_with(|| {
            self.turns.push_back(ticket.namespace.clone());
            Namespace::default()
        });
        let class = &mut namespace.classes[ticket.class.index()];
        let flow = class.waiting.entry(ticket.flow.clone()).or_insert_with(|| {
            class.turns.push_back(ticket.flow.clone());
            VecDeque::new()
        });
        flow.push_back(id);
        self.len += 1;
    }

    /// The request to serve next, taken out of the queue.
    pub fn pop(&mut self) -> Option<u64> {
        let ns_name = self.turns.pop_front()?;
        let namespace = self.namespaces.get_mut(&ns_name)?;
        let class = namespace.classes.iter_mut().find(|c| !c.turns.is_empty())?;
        let flow_name = class.turns.pop_front()?;
        let flow = class.waiting.get_mut(&flow_name)?;
        let id = flow.pop_front()?;
        if flow.is_empty() {
            class.waiting.remove(&flow_name);
        } else {
            class.turns.push_back(flow_name);
        }
        if namespace.is_empty() {
            self.namespaces.remove(&ns_name);
        } else {
            self.turns.push_back(ns_name);
        }
        self.len -= 1;
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(class: RequestClass, namespace: &str, flow: &str) -> Ticket {
        Ticket { class, namespace: namespace.into(), flow: flow.into() }
    }

    fn drain(q: &mut FairQueue) -> Vec<u64> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    /// A namespace with a backlog (k/k#80397: one noisy namespace starves the rest) gets its
    /// turn, no more: the others' requests are served between its own.
    #[test]
    fn namespaces_take_turns_whatever_their_backlog() {
        let mut q = FairQueue::new();
        for id in 0..5 {
            q.push(&ticket(RequestClass::Create, "noisy", "big"), id);
        }
        q.push(&ticket(RequestClass::Create, "quiet-a", "a"), 10);
        q.push(&ticket(RequestClass::Create, "quiet-b", "b"), 20);
        q.push(&ticket(RequestClass::Create, "quiet-a", "a"), 11);
        assert_eq!(drain(&mut q), vec![0, 10, 20, 1, 11, 2, 3, 4]);
        assert!(q.is_empty());
    }

    /// Inside one namespace, a small Job's creates are not queued behind a large Job's.
    #[test]
    fn jobs_inside_a_namespace_take_turns() {
        let mut q = FairQueue::new();
        for id in 0..3 {
            q.push(&ticket(RequestClass::Create, "ns", "large"), id);
        }
        q.push(&ticket(RequestClass::Create, "ns", "small"), 9);
        assert_eq!(drain(&mut q), vec![0, 9, 1, 2]);
    }

    /// k/k#128625: inside a namespace, a finished Job's status write and finalizer removals wait
    /// behind no creates, queued however late.
    #[test]
    fn inside_a_namespace_finishing_writes_go_first_and_creates_last() {
        let mut q = FairQueue::new();
        q.push(&ticket(RequestClass::Create, "a", "j1"), 1);
        q.push(&ticket(RequestClass::Other, "a", ""), 2);
        q.push(&ticket(RequestClass::Create, "a", "j2"), 3);
        q.push(&ticket(RequestClass::Finish, "a", ""), 4);
        assert_eq!(q.waiting_in(RequestClass::Create), 2);
        assert_eq!(q.pop(), Some(4));
        assert_eq!(q.pop(), Some(2));
        q.push(&ticket(RequestClass::Finish, "a", ""), 5);
        assert_eq!(q.pop(), Some(5), "a finishing write queued later still goes first");
        assert_eq!(drain(&mut q), vec![1, 3]);
    }

    /// A namespace's finishing writes (a large Job's finalizer removals) do not take the budget
    /// from another namespace's creates: namespaces take turns whatever their classes.
    #[test]
    fn one_namespaces_finishing_writes_take_turns_with_another_namespaces_creates() {
        let mut q = FairQueue::new();
        for id in 0..3 {
            q.push(&ticket(RequestClass::Finish, "noisy", ""), id);
        }
        q.push(&ticket(RequestClass::Create, "quiet", "small"), 10);
        q.push(&ticket(RequestClass::Create, "quiet", "small"), 11);
        assert_eq!(drain(&mut q), vec![0, 10, 1, 11, 2]);
    }

    /// Within one flow, requests keep their order (a Job's creates in the order it issued them).
    #[test]
    fn one_flow_is_first_in_first_out() {
        let mut q = FairQueue::new();
        for id in [7, 3, 5] {
            q.push(&ticket(RequestClass::Other, "ns", ""), id);
        }
        assert_eq!(drain(&mut q), vec![7, 3, 5]);
        assert_eq!(q.len(), 0);
    }

    /// A namespace that empties and comes back joins the end of the turn order.
    #[test]
    fn a_returning_namespace_queues_at_the_end() {
        let mut q = FairQueue::new();
        q.push(&ticket(RequestClass::Other, "a", ""), 1);
        q.push(&ticket(RequestClass::Other, "b", ""), 2);
        assert_eq!(q.pop(), Some(1));
        q.push(&ticket(RequestClass::Other, "a", ""), 3);
        q.push(&ticket(RequestClass::Other, "c", ""), 4);
        assert_eq!(drain(&mut q), vec![2, 3, 4]);
    }
}
