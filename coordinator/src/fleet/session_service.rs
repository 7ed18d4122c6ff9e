//! `FleetSession`: registration, heartbeats with per-shard load, the command stream and
//! acknowledgements. Only the leader serves it; a standby answers FAILED_PRECONDITION so a
//! worker tries its next coordinator address. Each call is authorized for the worker it is
//! for (`authz`): registration by the worker id, later calls by the session's worker.

use std::pin::Pin;
use std::sync::Arc;

use batchfleet_proto::v1 as pb;
use batchfleet_proto::v1::fleet_session_server::FleetSession;
use futures::Stream;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::state::{Ack, HeldPhase, HeldShard, Step};
use super::{FleetShared, not_leader};
use crate::authz::Authorizer;
use crate::ids::{ShardId, WorkerId};

pub struct SessionService {
    shared: Arc<FleetShared>,
    authorizer: Authorizer,
}

impl SessionService {
    pub fn new(shared: Arc<FleetShared>, authorizer: Authorizer) -> Self {
        Self { shared, authorizer }
    }

    /// The worker of `session`, if the caller may act as it.
    fn session_worker<T>(&self, request: &Request<T>, session: u64) -> Result<WorkerId, Status> {
        let worker = self
            .shared
            .hub
            .worker_of(session)
            .ok_or_else(|| Status::not_found("unknown session: register again"))?;
        self.authorizer.worker(request, &worker.0)?;
        Ok(worker)
    }

    fn lead(&self) -> Result<u32, Status> {
        if !self.shared.leadership.is_leader() {
            return Err(not_leader(&self.shared.leadership));
        }
        // The map is loaded a moment after leadership is won.
        self.shared
            .state
            .lock()
            .as_ref()
            .map(|s| s.shard_count())
            .ok_or_else(|| Status::unavailable("the leader is loading the shard map"))
    }
}

type CommandStream = Pin<Box<dyn Stream<Item = Result<pb::Command, Status>> + Send>>;

#[tonic::async_trait]
impl FleetSession for SessionService {
    async fn register(
        &self,
        request: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::RegisterResponse>, Status> {
        let shard_count = self.lead()?;
        if request.get_ref().worker_id.is_empty() {
            return Err(Status::invalid_argument("worker_id is required"));
        }
        let caller = self.authorizer.worker(&request, &request.get_ref().worker_id)?;
        let r = request.into_inner();
        let held = r
            .held
            .iter()
            .filter_map(|h| {
                let phase = match h.phase.as_str() {
                    "preparing" => HeldPhase::Preparing,
                    "active" => HeldPhase::Active,
                    "revoking" => HeldPhase::Revoking,
                    _ => return None,
                };
                Some(HeldShard { shard: ShardId(h.shard), epoch: h.epoch, phase })
            })
            .collect();
        let worker = WorkerId(r.worker_id.clone());
        let session_id = self.shared.hub.register(worker, held, &r.loads);
        tracing::info!(worker = %r.worker_id, %caller, address = %r.address, session_id, held = r.held.len(), "worker registered");
        Ok(Response::new(pb::RegisterResponse {
            session_id,
            shard_count,
            session_ttl_ms: u64::try_from(self.shared.lease_margin.as_millis()).unwrap_or(u64::MAX),
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        self.lead()?;
        self.session_worker(&request, request.get_ref().session_id)?;
        let r = request.into_inner();
        if !self.shared.hub.heartbeat(r.session_id, &r.loads) {
            return Err(Status::not_found("unknown session: register again"));
        }
        Ok(Response::new(pb::HeartbeatResponse {}))
    }

    type CommandsStream = CommandStream;

    async fn commands(
        &self,
        request: Request<pb::CommandStreamRequest>,
    ) -> Result<Response<Self::CommandsStream>, Status> {
        self.lead()?;
        let session = request.get_ref().session_id;
        self.session_worker(&request, session)?;
        let rx = self
            .shared
            .hub
            .open_stream(session)
            .ok_or_else(|| Status::not_found("unknown session: register again"))?;
        let stream = ReceiverStream::new(rx).map(Ok);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn acknowledge(&self, request: Request<pb::Ack>) -> Result<Response<pb::AckResponse>, Status> {
        self.lead()?;
        let worker = self.session_worker(&request, request.get_ref().session_id)?;
        let r = request.into_inner();
        let assignment = r.assignment.ok_or_else(|| Status::invalid_argument("assignment is required"))?;
        let step = match pb::Step::try_from(r.step) {
            Ok(pb::Step::Prepared) => Step::Prepared,
            Ok(pb::Step::Revoked) => Step::Revoked,
            Ok(pb::Step::Activated) => Step::Activated,
            Ok(pb::Step::Dropped) => Step::Dropped,
            Ok(pb::Step::Refused) => Step::Refused { held_epoch: r.held_epoch },
            _ => return Err(Status::invalid_argument("step is required")),
        };
        if let (Step::Activated, Some(micros)) = (step, r.activate_micros) {
            self.shared.hub.activated_in(std::time::Duration::from_micros(micros));
        }
        let last_write = Some(r.last_write_resource_version).filter(|rv| !rv.is_empty());
        self.shared.hub.ack(Ack {
            worker,
            shard: ShardId(assignment.shard),
            epoch: assignment.epoch,
            step,
            last_write,
        });
        Ok(Response::new(pb::AckResponse {}))
    }
}
