//! `FleetAdmin`, the operators' API (`fleetctl`): status, workers and shards as the leader sees
//! them; drain, undrain, rebalance, move, pin and unpin. Changes take effect at the controller's
//! next step, through the same hand-over as any move. Unknown workers and shards out of range
//! are INVALID_ARGUMENT and change nothing. Every call is authorized first (`authz`), and every
//! change is logged with its caller.

use std::collections::BTreeMap;
use std::sync::Arc;

use batchfleet_proto::v1 as pb;
use batchfleet_proto::v1::fleet_admin_server::FleetAdmin;
use tonic::{Request, Response, Status};

use super::controller::is_known;
use super::state::{FleetState, ShardState, StepInput, WorkerHealth};
use super::{FleetShared, not_leader};
use crate::authz::{Access, Authorizer};
use crate::ids::{ShardId, WorkerId};

pub struct AdminService {
    shared: Arc<FleetShared>,
    authorizer: Authorizer,
}

impl AdminService {
    pub fn new(shared: Arc<FleetShared>, authorizer: Authorizer) -> Self {
        Self { shared, authorizer }
    }

    /// Runs `f` on the fleet state, if this coordinator leads and has loaded it.
    fn with_state<T>(&self, f: impl FnOnce(&mut FleetState) -> Result<T, Status>) -> Result<T, Status> {
        if !self.shared.leadership.is_leader() {
            return Err(not_leader(&self.shared.leadership));
        }
        let mut guard = self.shared.state.lock();
        let state =
            guard.as_mut().ok_or_else(|| Status::unavailable("the leader is loading the shard map"))?;
        let result = f(state);
        drop(guard);
        self.shared.hub.arrived.notify_one();
        result
    }

    /// `name` if the leader knows it. A standby knows no worker: it answers as for every call
    /// only the leader serves, naming the leader, so that fleetctl (and a worker asking to be
    /// drained) goes there rather than taking "unknown worker" for the answer.
    fn known_worker(&self, name: &str) -> Result<WorkerId, Status> {
        if !self.shared.leadership.is_leader() {
            return Err(not_leader(&self.shared.leadership));
        }
        let worker = WorkerId(name.to_string());
        if name.is_empty() || !is_known(&self.shared, &worker) {
            return Err(Status::invalid_argument(format!("unknown worker {name:?}")));
        }
        Ok(worker)
    }

    fn shard_in_range(state: &FleetState, shard: u32) -> Result<ShardId, Status> {
        if shard >= state.shard_count() {
            return Err(Status::invalid_argument(format!(
                "shard {shard} is out of range: the fleet has {} shards",
                state.shard_count()
            )));
        }
        Ok(ShardId(shard))
    }

    fn placement_input(&self) -> StepInput {
        StepInput {
            now: None,
            workers: self.shared.workers.lock().iter().map(|(w, s)| (w.clone(), s.health)).collect(),
            loads: self.shared.hub.loads(),
            ..StepInput::default()
        }
    }
}

fn reply(message: String) -> Result<Response<pb::AdminReply>, Status> {
    Ok(Response::new(pb::AdminReply { message }))
}

#[tonic::async_trait]
impl FleetAdmin for AdminService {
    async fn status(
        &self,
        request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        self.authorizer.admin(&request, "status", Access::Read)?;
        let workers = self.shared.workers.lock().values().filter(|s| s.health != WorkerHealth::Gone).count();
        self.with_state(|state| {
            let mut by_state: BTreeMap<String, u32> = BTreeMap::new();
            for shard in 0..state.shard_count() {
                *by_state.entry(state.shard_state(ShardId(shard)).as_str().to_string()).or_default() += 1;
            }
            Ok(Response::new(pb::StatusResponse {
                leader: self.shared.id.clone(),
                shard_count: state.shard_count(),
                workers: u32::try_from(workers).unwrap_or(u32::MAX),
                store: self.shared.store_kind.to_string(),
                shards_by_state: by_state.into_iter().collect(),
                moves_in_progress: u32::try_from(state.moves_in_flight()).unwrap_or(u32::MAX),
            }))
        })
    }

    async fn workers(
        &self,
        request: Request<pb::WorkersRequest>,
    ) -> Result<Response<pb::WorkersResponse>, Status> {
        self.authorizer.admin(&request, "workers", Access::Read)?;
        let seen = self.shared.workers.lock().clone();
        let loads = self.shared.hub.loads();
        self.with_state(|state| {
            let owned = state.shards_by_owner();
            let workers = seen
                .iter()
                .map(|(worker, s)| {
                    let load: f64 = (0..state.shard_count())
                        .map(ShardId)
                        .filter(|shard| state.owner(*shard) == Some(worker.0.as_str()))
                        .map(|shard| loads.get(&shard).copied().unwrap_or(1.0))
                        .sum();
                    let phase = if state.drained(worker) {
                        "drained"
                    } else if state.is_draining(worker) {
                        "draining"
                    } else if s.health == WorkerHealth::Gone {
                        "gone"
                    } else {
                        "active"
                    };
                    pb::WorkerInfo {
                        name: worker.0.clone(),
                        state: phase.to_string(),
                        shards: owned.get(worker).copied().unwrap_or(0),
                        load,
                        lease_expires_in_ms: s
                            .expires_in
                            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
                    }
                })
                .collect();
            Ok(Response::new(pb::WorkersResponse { workers }))
        })
    }

    async fn shards(
        &self,
        request: Request<pb::ShardsRequest>,
    ) -> Result<Response<pb::ShardsResponse>, Status> {
        self.authorizer.admin(&request, "shards", Access::Read)?;
        let loads = self.shared.hub.loads();
        self.with_state(|state| {
            let shards = (0..state.shard_count())
                .map(|i| {
                    let shard = ShardId(i);
                    let shard_state = state.shard_state(shard);
                    pb::ShardInfo {
                        shard: i,
                        owner: state.owner(shard).unwrap_or_default().to_string(),
                        epoch: state.epoch(shard),
                        state: shard_state.as_str().to_string(),
                        load: loads.get(&shard).copied().unwrap_or(if shard_state == ShardState::Unowned {
                            0.0
                        } else {
                            1.0
                        }),
                        pinned: state.is_pinned(shard),
                    }
                })
                .collect();
            Ok(Response::new(pb::ShardsResponse { shards }))
        })
    }

    async fn drain(&self, request: Request<pb::WorkerRequest>) -> Result<Response<pb::AdminReply>, Status> {
        let caller = self.authorizer.drain(&request, &request.get_ref().worker)?;
        let worker = self.known_worker(&request.into_inner().worker)?;
        tracing::info!(%caller, %worker, "admin call: drain");
        self.with_state(|state| {
            state.set_draining(&worker, true);
            Ok(())
        })?;
        tracing::info!(%worker, "draining");
        reply(format!("worker {worker} is draining: its shards move to other workers"))
    }

    async fn undrain(&self, request: Request<pb::WorkerRequest>) -> Result<Response<pb::AdminReply>, Status> {
        let caller = self.authorizer.undrain(&request, &request.get_ref().worker)?;
        let worker = self.known_worker(&request.into_inner().worker)?;
        tracing::info!(%caller, %worker, "admin call: undrain");
        self.with_state(|state| {
            state.set_draining(&worker, false);
            Ok(())
        })?;
        reply(format!("worker {worker} takes shards again"))
    }

    async fn rebalance(
        &self,
        request: Request<pb::RebalanceRequest>,
    ) -> Result<Response<pb::RebalanceResponse>, Status> {
        let dry_run = request.get_ref().dry_run;
        // A dry run changes nothing: what a reader may see.
        let access = if dry_run { Access::Read } else { Access::Write };
        let caller = self.authorizer.admin(&request, "rebalance", access)?;
        if !dry_run {
            tracing::info!(%caller, "admin call: rebalance");
        }
        let input = self.placement_input();
        let moves = self.with_state(|state| {
            let planned = state.plan(&input, true);
            if !dry_run {
                for m in &planned {
                    state.request_move(m.shard, m.to.clone());
                }
            }
            Ok(planned)
        })?;
        let moves = moves
            .into_iter()
            .map(|m| pb::PlannedMove {
                shard: m.shard.0,
                from: m.from.map(|w| w.0).unwrap_or_default(),
                to: m.to.0,
            })
            .collect();
        Ok(Response::new(pb::RebalanceResponse { moves }))
    }

    async fn r#move(
        &self,
        request: Request<pb::ShardToWorkerRequest>,
    ) -> Result<Response<pb::AdminReply>, Status> {
        let caller = self.authorizer.admin(&request, "move", Access::Write)?;
        let r = request.into_inner();
        let worker = self.known_worker(&r.worker)?;
        tracing::info!(%caller, shard = r.shard, %worker, "admin call: move");
        let shard = self.with_state(|state| {
            let shard = Self::shard_in_range(state, r.shard)?;
            state.request_move(shard, worker.clone());
            Ok(shard)
        })?;
        reply(format!("shard {shard} moves to {worker}"))
    }

    async fn pin(
        &self,
        request: Request<pb::ShardToWorkerRequest>,
    ) -> Result<Response<pb::AdminReply>, Status> {
        let caller = self.authorizer.admin(&request, "pin", Access::Write)?;
        let r = request.into_inner();
        let worker = self.known_worker(&r.worker)?;
        tracing::info!(%caller, shard = r.shard, %worker, "admin call: pin");
        let shard = self.with_state(|state| {
            let shard = Self::shard_in_range(state, r.shard)?;
            state.pin(shard, Some(&worker));
            Ok(shard)
        })?;
        reply(format!("shard {shard} is pinned to {worker}"))
    }

    async fn unpin(&self, request: Request<pb::ShardRequest>) -> Result<Response<pb::AdminReply>, Status> {
        let caller = self.authorizer.admin(&request, "unpin", Access::Write)?;
        let r = request.into_inner();
        tracing::info!(%caller, shard = r.shard, "admin call: unpin");
        let shard = self.with_state(|state| {
            let shard = Self::shard_in_range(state, r.shard)?;
            state.pin(shard, None);
            Ok(shard)
        })?;
        reply(format!("shard {shard} is unpinned"))
    }
}
