//! The worker's session with the leading coordinator: register (reporting the shards it holds),
//! heartbeat per-shard load, and carry out the command stream's PREPARE, REVOKE, ACTIVATE and
//! DROP on the shard runtime, acknowledging each. When the stream breaks the worker registers
//! again with whichever coordinator leads; its shards keep running meanwhile.

use std::sync::Arc;
use std::time::{Duration, Instant};

use batchfleet_proto::v1 as pb;
use batchfleet_proto::v1::fleet_session_client::FleetSessionClient;
use batchfleet_tls::client::ClientTransport;
use parking_lot::Mutex;
use tokio::sync::watch;
use tonic::transport::{Channel, Endpoint};

use super::barrier_read::BarrierRead;
use super::load::LoadMeter;
use crate::retry::RetryBackoff;
use crate::runtime::protocol::ShardRuntime;
use crate::runtime::shard::{ShardError, ShardPhase};

#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Every coordinator's address; the leader is whichever accepts the registration.
    pub coordinators: Vec<String>,
    pub worker_id: String,
    /// Where the worker can be reached (its metrics address), for operators.
    pub address: String,
    pub heartbeat: Duration,
    /// TLS with the worker's certificate, or plaintext under `--insecure`.
    pub transport: ClientTransport,
    /// The largest gRPC message read or written (`--grpc-max-message-size`).
    pub max_message_size: usize,
}

/// tonic's default limit on a gRPC message, and the coordinator's.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 * 1024 * 1024;

/// How fast a shard's measured load forgets a burst; placement should follow sustained load.
const LOAD_HALF_LIFE: Duration = Duration::from_secs(30);

/// Runs sessions until `stop`; `drained` turns true when the coordinator says every shard left.
pub async fn run(
    config: SessionConfig,
    runtime: Arc<ShardRuntime>,
    client: kube::Client,
    mut lease: watch::Receiver<super::lease::LeaseState>,
    drained: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
    health: crate::health::Health,
) {
    let mut next = 0usize;
    // The leader a standby named: tried next, once.
    let mut following: Option<String> = None;
    let meter = Arc::new(Mutex::new(LoadMeter::new(LOAD_HALF_LIFE)));
    // Capped at 1 s (2 s with jitter): after a coordinator fail-over every session must be back
    // within seconds, and the tries before the new leader is elected must not have pushed the
    // next one far out.
    let mut backoff = RetryBackoff::new(Duration::from_millis(100), Duration::from_secs(1));
    loop {
        // Registering before the lease is renewed would let the coordinator judge us gone.
        tokio::select! {
            _ = lease.wait_for(|l| l.renewed) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let lapses = lease.borrow().lapses;
        let url = match following.take() {
            Some(leader) => leader,
            None => {
                next += 1;
                config.coordinators[(next - 1) % config.coordinators.len().max(1)].clone()
            }
        };
        let session = tokio::select! {
            r = session(&url, &config, &runtime, &meter, &client, &drained, &health) => r,
            // The lease lapsed and every shard was dropped: register again, reporting none, or
            // the coordinator would go on counting them as this worker's (a lapse it did not see
            // expire, within its margin) and nobody would act for them.
            _ = lease.wait_for(|l| l.lapses != lapses) => Err(anyhow::anyhow!("the worker lease lapsed")),
            _ = stop.wait_for(|s| *s) => return,
        };
        if health.session_established() {
            // It registered and served: the next try is not a retry of a failing one.
            backoff.reset();
        }
        health.set_session(false);
        if let Err(e) = session {
            following = leader_hint(&e).filter(|leader| *leader != url);
            if refused(&e) {
                // Retrying will not help until the certificate or the admin policy changes: an
                // operator has to see this one.
                tracing::warn!(coordinator = %url, error = %e, "session refused");
            } else {
                tracing::debug!(coordinator = %url, error = %e, leader = ?following, "session ended");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff.next_delay()) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

async fn session(
    url: &str,
    config: &SessionConfig,
    runtime: &Arc<ShardRuntime>,
    meter: &Arc<Mutex<LoadMeter>>,
    client: &kube::Client,
    drained: &watch::Sender<bool>,
    health: &crate::health::Health,
) -> anyhow::Result<()> {
    let channel = config
        .transport
        .connect(Endpoint::from_shared(url.to_string())?.connect_timeout(Duration::from_secs(2)))
        .await?;
    let mut rpc = FleetSessionClient::new(channel)
        .max_decoding_message_size(config.max_message_size)
        .max_encoding_message_size(config.max_message_size);
    let loads = loads(&meter.lock());
    let registered = rpc
        .register(pb::RegisterRequest {
            worker_id: config.worker_id.clone(),
            address: config.address.clone(),
            held: held(runtime),
            loads,
        })
        .await?
        .into_inner();
    let session_id = registered.session_id;
    if registered.shard_count != runtime.table().space().count() {
        anyhow::bail!(
            "the fleet has {} shards and this worker was started with --shards {}",
            registered.shard_count,
            runtime.table().space().count()
        );
    }
    tracing::info!(coordinator = %url, session_id, "registered with the leading coordinator");
    let mut commands = rpc.commands(pb::CommandStreamRequest { session_id }).await?.into_inner();
    let heartbeats =
        tokio::spawn(heartbeat(rpc.clone(), session_id, runtime.clone(), meter.clone(), config.heartbeat));
    let _stop_heartbeats = AbortOnDrop(heartbeats);
    let barrier_read = Arc::new(BarrierRead::new(client.clone()));
    health.set_session(true);
    while let Some(command) = commands.message().await? {
        let Some(kind) = command.kind else { continue };
        let (runtime, barrier_read, mut rpc, drained) =
            (runtime.clone(), barrier_read.clone(), rpc.clone(), drained.clone());
        // Commands for different shards run side by side; the coordinator sends one at a time per shard.
        tokio::spawn(async move {
            if let Some(ack) = carry_out(kind, &runtime, &barrier_read, &drained).await {
                let ack = pb::Ack { session_id, ..ack };
                if let Err(e) = rpc.acknowledge(ack).await {
                    tracing::debug!(error = %e, "acknowledgement not delivered; the coordinator will ask again");
                }
            }
        });
    }
    Ok(())
}

/// The leader's address a standby coordinator answered with (the light workers of `loadtest run
/// fleet-scale` follow it as this session does).
pub fn leader_hint(error: &anyhow::Error) -> Option<String> {
    let status = error.downcast_ref::<tonic::Status>()?;
    let hint = status.metadata().get(batchfleet_proto::LEADER_HINT)?.to_str().ok()?;
    Some(hint.to_string()).filter(|h| !h.is_empty())
}

/// Whether the coordinator refused this worker's certificate for its worker id.
fn refused(error: &anyhow::Error) -> bool {
    error.downcast_ref::<tonic::Status>().is_some_and(|s| s.code() == tonic::Code::PermissionDenied)
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn held(runtime: &ShardRuntime) -> Vec<pb::HeldShard> {
    let table = runtime.table();
    table
        .held()
        .into_iter()
        .filter_map(|shard| {
            let status = table.status(shard)?;
            let phase = match status.phase {
                ShardPhase::Preparing => "preparing",
                ShardPhase::Active => "active",
                // Stopped for a move either way: the coordinator places it again.
                ShardPhase::Revoking | ShardPhase::Revoked => "revoking",
            };
            Some(pb::HeldShard { shard, epoch: status.epoch, phase: phase.into() })
        })
        .collect()
}

async fn heartbeat(
    mut rpc: FleetSessionClient<Channel>,
    session_id: u64,
    runtime: Arc<ShardRuntime>,
    meter: Arc<Mutex<LoadMeter>>,
    period: Duration,
) {
    loop {
        tokio::time::sleep(period).await;
        let table = runtime.table();
        let counts: Vec<(u32, u64)> = table
            .held()
            .into_iter()
            .filter_map(|shard| Some((shard, table.status(shard)?.reconciles)))
            .collect();
        let loads = {
            let mut meter = meter.lock();
            meter.record(counts, Instant::now());
            loads(&meter)
        };
        if rpc.heartbeat(pb::HeartbeatRequest { session_id, loads }).await.is_err() {
            return;
        }
    }
}

fn loads(meter: &LoadMeter) -> Vec<pb::ShardLoad> {
    meter
        .rates()
        .into_iter()
        .map(|(shard, rate)| pb::ShardLoad { shard, objects: 0, reconciles_per_second: rate })
        .collect()
}

fn ack(assignment: pb::ShardAssignment, step: pb::Step, last_write: u64) -> pb::Ack {
    pb::Ack {
        session_id: 0,
        assignment: Some(assignment),
        last_write_resource_version: if last_write == 0 { String::new() } else { last_write.to_string() },
        step: step.into(),
        activate_micros: None,
        held_epoch: None,
    }
}

/// Carries out one command; the acknowledgement to send, if any. Every command is idempotent:
/// the coordinator repeats a command it got no answer to.
async fn carry_out(
    kind: pb::command::Kind,
    runtime: &ShardRuntime,
    barrier_read: &BarrierRead,
    drained: &watch::Sender<bool>,
) -> Option<pb::Ack> {
    use pb::command::Kind;
    match kind {
        Kind::Prepare(a) => {
            match runtime.prepare(a.shard, a.epoch) {
                Ok(()) => {}
                // A repeat of a PREPARE under way.
                Err(ShardError::StaleEpoch { current, .. }) if current == a.epoch => {}
                // Refused, not ignored: the coordinator would otherwise resend it for ever.
                Err(e) => {
                    tracing::warn!(shard = a.shard, epoch = a.epoch, error = %e, "PREPARE refused");
                    let held_epoch = match e {
                        ShardError::StaleEpoch { current, .. } => Some(current),
                        _ => None,
                    };
                    return Some(pb::Ack { held_epoch, ..ack(a, pb::Step::Refused, 0) });
                }
            }
            runtime.warmed(a.shard).await;
            Some(ack(a, pb::Step::Prepared, 0))
        }
        Kind::Revoke(a) => {
            let status = runtime.table().status(a.shard);
            // A delayed REVOKE of an older move must not stop a newer tenure.
            if status.as_ref().is_some_and(|s| s.epoch >= a.epoch) {
                return None;
            }
            let last_write = match runtime.revoke(a.shard).await {
                Ok(rv) => rv,
                // Already gone (a repeat), or never activated: nothing of ours acts.
                Err(ShardError::NotHeld { .. } | ShardError::WrongPhase { .. }) => 0,
                Err(e) => {
                    tracing::warn!(shard = a.shard, error = %e, "REVOKE failed");
                    return None;
                }
            };
            runtime.drop_shard(a.shard);
            Some(ack(a, pb::Step::Revoked, last_write))
        }
        Kind::Activate(activate) => {
            let received = Instant::now();
            let a = activate.assignment?;
            if runtime
                .table()
                .status(a.shard)
                .is_some_and(|s| s.epoch == a.epoch && s.phase == ShardPhase::Active)
            {
                return Some(ack(a, pb::Step::Activated, 0));
            }
            let barrier = match activate.min_resource_version.parse::<u64>() {
                Ok(rv) => rv,
                // No last write is known: wait for what a consistent read sees now.
                Err(_) => barrier_read.served_after(received).await?,
            };
            let active_now = |runtime: &ShardRuntime| {
                runtime
                    .table()
                    .status(a.shard)
                    .is_some_and(|s| s.epoch == a.epoch && s.phase == ShardPhase::Active)
            };
            // A tenure the coordinator gives after any lapse of the lease: writes may go out
            // again (those queued before the lapse went, refused, long before an ACTIVATE).
            runtime.table().release_writes();
            match runtime.activate(a.shard, a.epoch, barrier).await {
                // The part of the hand-over gap only the worker sees: the coordinator reports it.
                Ok(()) => Some(pb::Ack {
                    activate_micros: Some(u64::try_from(received.elapsed().as_micros()).unwrap_or(u64::MAX)),
                    ..ack(a, pb::Step::Activated, 0)
                }),
                // A repeated ACTIVATE that waited alongside the first one.
                Err(_) if active_now(runtime) => Some(ack(a, pb::Step::Activated, 0)),
                Err(e) => {
                    tracing::warn!(shard = a.shard, epoch = a.epoch, error = %e, "ACTIVATE refused");
                    None
                }
            }
        }
        Kind::Drop(a) => {
            if runtime.table().status(a.shard).is_some_and(|s| s.epoch <= a.epoch) {
                runtime.drop_shard(a.shard);
            }
            Some(ack(a, pb::Step::Dropped, 0))
        }
        Kind::DrainComplete(_) => {
            tracing::info!("drained: every shard has moved to other workers");
            drained.send_replace(true);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::Informers;
    use crate::runtime::list_watch::ContentType;
    use crate::runtime::shard::ShardTable;
    use crate::runtime::watch::ShardFiltering;
    use crate::shards::ShardSpace;

    /// A worker with no shard held; its client reaches nothing, and nothing here calls it.
    fn idle_worker() -> (ShardRuntime, kube::Client) {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("static url"));
        let client = kube::Client::try_from(config).expect("a client");
        let table = ShardTable::new(ShardSpace::new(4).expect("four shards"));
        let informers = Informers::new(table.clone());
        let runtime = ShardRuntime::start(
            client.clone(),
            table,
            ShardFiltering::Client,
            ContentType::default(),
            informers,
        );
        (runtime, client)
    }

    /// A PREPARE at or below an epoch the worker held the shard at is refused out loud, naming
    /// that epoch, so the coordinator cancels the move instead of resending it for ever.
    #[tokio::test]
    async fn a_prepare_below_a_held_epoch_is_refused_with_that_epoch() {
        let (runtime, client) = idle_worker();
        let client = BarrierRead::new(client);
        runtime.table().prepare(2, 7).expect("held at 7");
        runtime.drop_shard(2);
        let (drained, _) = watch::channel(false);
        let prepare = |epoch| pb::command::Kind::Prepare(pb::ShardAssignment { shard: 2, epoch });
        let ack = carry_out(prepare(5), &runtime, &client, &drained).await.expect("an answer");
        assert_eq!(pb::Step::try_from(ack.step), Ok(pb::Step::Refused));
        assert_eq!(ack.held_epoch, Some(7));
        assert_eq!(ack.assignment, Some(pb::ShardAssignment { shard: 2, epoch: 5 }));
        assert!(runtime.table().status(2).is_none(), "nothing is held after a refusal");

        let out_of_range = pb::command::Kind::Prepare(pb::ShardAssignment { shard: 9, epoch: 1 });
        let ack = carry_out(out_of_range, &runtime, &client, &drained).await.expect("an answer");
        assert_eq!((pb::Step::try_from(ack.step), ack.held_epoch), (Ok(pb::Step::Refused), None));
    }
}
