//! The fleet while this coordinator leads: worker sessions, the shard map and its moves, and the
//! admin API.

pub mod admin_service;
pub mod controller;
pub mod hub;
pub mod metrics;
pub mod owner_gaps;
pub mod session_service;
pub mod state;

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;

use crate::ids::WorkerId;
use crate::leader::Leadership;
use state::{FleetState, WorkerHealth};

/// A worker as the last step saw it, for the admin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerSeen {
    pub health: WorkerHealth,
    /// Until its lease expires, if it is renewed.
    pub expires_in: Option<Duration>,
}

/// What the controller, the session service and the admin service share.
pub struct FleetShared {
    pub id: String,
    pub store_kind: &'static str,
    pub leadership: Leadership,
    pub hub: hub::SessionHub,
    /// `None` while this coordinator does not lead.
    pub state: Mutex<Option<FleetState>>,
    pub workers: Mutex<BTreeMap<WorkerId, WorkerSeen>>,
    /// The lease margin, reported to workers at registration.
    pub lease_margin: Duration,
}

impl FleetShared {
    pub fn new(
        id: String,
        store_kind: &'static str,
        leadership: Leadership,
        lease_margin: Duration,
        command_queue: usize,
    ) -> Self {
        Self {
            id,
            store_kind,
            leadership,
            hub: hub::SessionHub::with_command_queue(command_queue),
            state: Mutex::new(None),
            workers: Mutex::new(BTreeMap::new()),
            lease_margin,
        }
    }
}

/// The answer a standby gives to calls only the leader serves, naming the leader when it knows it.
pub(crate) fn not_leader(leadership: &Leadership) -> tonic::Status {
    let state = leadership.state();
    let leader = state.holder_address.filter(|_| !state.is_leader);
    let message = match (&state.holder, &leader) {
        (Some(holder), Some(address)) => {
            format!("this coordinator is not the leader; {holder} leads at {address}")
        }
        _ => "this coordinator is not the leader".to_string(),
    };
    let mut status = tonic::Status::failed_precondition(message);
    if let Some(value) = leader.and_then(|a| a.parse().ok()) {
        status.metadata_mut().insert(batchfleet_proto::LEADER_HINT, value);
    }
    status
}
