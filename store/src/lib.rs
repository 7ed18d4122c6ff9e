//! The coordination store: leadership, worker liveness and the shard map, behind one interface
//! with two implementations — the Kubernetes API (`coordination.k8s.io/v1` Leases and a
//! ConfigMap, the embedded default) and etcd. The same conformance tests run on both
//! (`coordinator/tests/store_conformance.rs`).
//!
//! Nothing here judges time across machines: a lease record carries a value that changes with
//! every renewal, and [`observer::LivenessObserver`] decides expiry by when *it* last saw that
//! value change, as client-go's leader election does.

pub mod cli;
pub mod etcd;
pub mod ids;
pub mod kubernetes;
pub mod observer;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ids::WorkerId;

/// An opaque version of the shard map: a resourceVersion or an etcd mod revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision(pub String);

/// The shard map as it is stored: the authoritative owner and epoch of every shard.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardMapRecord {
    /// Fixed when the fleet is first created.
    pub shard_count: u32,
    /// By shard index; a shard nobody ever owned may be absent.
    #[serde(default)]
    pub shards: BTreeMap<u32, ShardRecord>,
    /// Operator pins: shard → worker id.
    #[serde(default)]
    pub pins: BTreeMap<u32, String>,
    /// Workers being drained (by an operator, or on their own SIGTERM): stored so that a new
    /// leader goes on moving their shards off and gives them none, as the old one did.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub draining: BTreeSet<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Only grows; every assignment of the shard carries a larger one.
    pub epoch: u64,
    /// The worker a move in progress hands the shard to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moving_to: Option<String>,
}

/// Who campaigns for leadership: its identity and the address it serves workers and operators
/// on, which a standby hands out so that clients find the leader through any coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Candidate {
    pub id: String,
    /// Empty when not advertised.
    pub address: String,
}

impl From<&str> for Candidate {
    fn from(id: &str) -> Self {
        Self { id: id.to_string(), address: String::new() }
    }
}

/// Who leads after a campaign attempt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Leadership {
    /// The current holder, if anyone holds the lease.
    pub holder: Option<String>,
    /// The address the holder advertised, if any.
    pub holder_address: Option<String>,
    /// Whether the caller holds it.
    pub is_leader: bool,
}

impl Leadership {
    /// `candidate` leads.
    pub fn ours(candidate: &Candidate) -> Self {
        Self {
            holder: Some(candidate.id.clone()),
            holder_address: Some(candidate.address.clone()).filter(|a| !a.is_empty()),
            is_leader: true,
        }
    }
}

/// A worker's liveness record, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerLease {
    pub worker: WorkerId,
    /// Changes with every renewal (a resourceVersion or mod revision).
    pub renewal: String,
    /// How long the worker promises to stop within if it cannot renew.
    pub ttl: Duration,
    /// The store itself removes the record once the worker stops renewing (an etcd lease), so
    /// the record's presence is what says the worker is alive; otherwise (a Kubernetes Lease,
    /// which nothing expires) the observer judges expiry by the record no longer changing.
    pub expires_in_store: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A conditional write lost to another writer.
    #[error("conflict: the stored record changed since it was read")]
    Conflict,
    /// The worker's liveness record is gone while it renewed its lease: the coordinator may
    /// already judge it stopped, so it must stop acting at once.
    #[error("the worker's liveness record vanished from the store")]
    RecordLost,
    /// The store could not be reached or refused the request.
    #[error("coordination store: {0}")]
    Backend(String),
    /// A stored record could not be read back.
    #[error("coordination store holds an unreadable record {what}: {reason}")]
    Corrupt { what: String, reason: String },
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The operations the coordinator and the workers need from a store.
pub trait CoordinationStore: Send + Sync {
    /// `kubernetes` or `etcd`, as `fleetctl status` reports it.
    fn kind(&self) -> &'static str;

    /// One attempt to acquire or renew the leadership lease for `candidate` (client-go's
    /// tryAcquireOrRenew): it is taken over only when the holder has not renewed it for
    /// `lease_duration` as this store's observer measures.
    fn campaign(
        &self,
        candidate: &Candidate,
        lease_duration: Duration,
    ) -> impl Future<Output = Result<Leadership>> + Send;

    /// Gives up leadership at once if `candidate` holds it, so a standby need not wait out the lease.
    fn resign(&self, candidate: &str) -> impl Future<Output = Result<()>> + Send;

    /// Creates or renews `worker`'s liveness record.
    fn renew_worker(&self, worker: &WorkerId, ttl: Duration) -> impl Future<Output = Result<()>> + Send;

    /// Removes `worker`'s liveness record (a worker that exits after being drained).
    fn remove_worker(&self, worker: &WorkerId) -> impl Future<Output = Result<()>> + Send;

    /// Every worker's liveness record, by worker id.
    fn workers(&self) -> impl Future<Output = Result<Vec<WorkerLease>>> + Send;

    /// The shard map and its revision; `None` before the fleet's first start.
    fn load_shard_map(&self) -> impl Future<Output = Result<Option<(ShardMapRecord, Revision)>>> + Send;

    /// Writes the shard map if it is still at `expected` (`None`: only if there is none yet);
    /// otherwise [`StoreError::Conflict`].
    fn store_shard_map(
        &self,
        map: &ShardMapRecord,
        expected: Option<&Revision>,
    ) -> impl Future<Output = Result<Revision>> + Send;
}

fn encode_map(map: &ShardMapRecord) -> Result<String> {
    serde_json::to_string(map).map_err(|e| StoreError::Backend(format!("encoding the shard map: {e}")))
}

fn decode_map(json: &str) -> Result<ShardMapRecord> {
    serde_json::from_str(json)
        .map_err(|e| StoreError::Corrupt { what: "shard map".into(), reason: e.to_string() })
}
