//! fleetctl's admin commands as operators run them, against an admin API served on a free port by
//! a scripted fleet: table and JSON output, exit 2 with the reason on bad input, and following the
//! leader from a standby.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;

use batchfleet_proto::v1::fleet_admin_server::{FleetAdmin, FleetAdminServer};
use batchfleet_proto::v1::*;
use serde_json::Value;
use tonic::{Request, Response, Status};

/// A two-worker, four-shard fleet whose commands change its state as the real one would.
#[derive(Default)]
struct ScriptedFleet {
    owners: Mutex<BTreeMap<u32, String>>,
    pins: Mutex<BTreeMap<u32, String>>,
    draining: Mutex<Vec<String>>,
}

const WORKERS: [&str; 2] = ["worker-0", "worker-1"];
const SHARDS: u32 = 4;

impl ScriptedFleet {
    fn new() -> Self {
        let fleet = Self::default();
        *fleet.owners.lock().unwrap() = (0..SHARDS).map(|s| (s, "worker-0".to_string())).collect();
        fleet
    }

    fn check_worker(w: &str) -> Result<(), Status> {
        if WORKERS.contains(&w) {
            Ok(())
        } else {
            Err(Status::invalid_argument(format!("unknown worker {w:?}")))
        }
    }

    fn check_shard(s: u32) -> Result<(), Status> {
        if s < SHARDS {
            Ok(())
        } else {
            Err(Status::invalid_argument(format!(
                "shard {s} is out of range: the fleet has {SHARDS} shards (0-{})",
                SHARDS - 1
            )))
        }
    }

    /// Even split: shards 2 and 3 belong on worker-1.
    fn plan(&self) -> Vec<PlannedMove> {
        let owners = self.owners.lock().unwrap();
        (0..SHARDS)
            .filter_map(|s| {
                let want = if s < 2 { "worker-0" } else { "worker-1" };
                (owners[&s] != want).then(|| PlannedMove {
                    shard: s,
                    from: owners[&s].clone(),
                    to: want.into(),
                })
            })
            .collect()
    }
}

#[tonic::async_trait]
impl FleetAdmin for ScriptedFleet {
    async fn status(&self, _: Request<StatusRequest>) -> Result<Response<StatusResponse>, Status> {
        Ok(Response::new(StatusResponse {
            leader: "coordinator-a".into(),
            shard_count: SHARDS,
            workers: 2,
            store: "kubernetes".into(),
            shards_by_state: [("active".to_string(), SHARDS)].into(),
            moves_in_progress: 0,
        }))
    }

    async fn workers(&self, _: Request<WorkersRequest>) -> Result<Response<WorkersResponse>, Status> {
        let owners = self.owners.lock().unwrap();
        let draining = self.draining.lock().unwrap();
        let workers = WORKERS
            .iter()
            .map(|w| WorkerInfo {
                name: w.to_string(),
                state: if draining.iter().any(|d| d == w) { "draining".into() } else { "active".into() },
                shards: owners.values().filter(|o| o == w).count() as u32,
                load: 2.5,
                lease_expires_in_ms: 9000,
            })
            .collect();
        Ok(Response::new(WorkersResponse { workers }))
    }

    async fn shards(&self, _: Request<ShardsRequest>) -> Result<Response<ShardsResponse>, Status> {
        let owners = self.owners.lock().unwrap();
        let pins = self.pins.lock().unwrap();
        let shards = owners
            .iter()
            .map(|(s, o)| ShardInfo {
                shard: *s,
                owner: o.clone(),
                epoch: 1,
                state: "active".into(),
                load: 1.0,
                pinned: pins.contains_key(s),
            })
            .collect();
        Ok(Response::new(ShardsResponse { shards }))
    }

    async fn drain(&self, r: Request<WorkerRequest>) -> Result<Response<AdminReply>, Status> {
        let w = r.into_inner().worker;
        Self::check_worker(&w)?;
        self.draining.lock().unwrap().push(w.clone());
        Ok(Response::new(AdminReply { message: format!("draining {w}") }))
    }

    async fn undrain(&self, r: Request<WorkerRequest>) -> Result<Response<AdminReply>, Status> {
        let w = r.into_inner().worker;
        Self::check_worker(&w)?;
        self.draining.lock().unwrap().retain(|d| *d != w);
        Ok(Response::new(AdminReply { message: format!("{w} takes shards again") }))
    }

    async fn rebalance(&self, r: Request<RebalanceRequest>) -> Result<Response<RebalanceResponse>, Status> {
        let moves = self.plan();
        if !r.into_inner().dry_run {
            let mut owners = self.owners.lock().unwrap();
            for m in &moves {
                owners.insert(m.shard, m.to.clone());
            }
        }
        Ok(Response::new(RebalanceResponse { moves }))
    }

    async fn r#move(&self, r: Request<ShardToWorkerRequest>) -> Result<Response<AdminReply>, Status> {
        let r = r.into_inner();
        Self::check_shard(r.shard)?;
        Self::check_worker(&r.worker)?;
        self.owners.lock().unwrap().insert(r.shard, r.worker.clone());
        Ok(Response::new(AdminReply { message: format!("shard {} moves to {}", r.shard, r.worker) }))
    }

    async fn pin(&self, r: Request<ShardToWorkerRequest>) -> Result<Response<AdminReply>, Status> {
        let r = r.into_inner();
        Self::check_shard(r.shard)?;
        Self::check_worker(&r.worker)?;
        self.pins.lock().unwrap().insert(r.shard, r.worker.clone());
        Ok(Response::new(AdminReply { message: format!("shard {} pinned to {}", r.shard, r.worker) }))
    }

    async fn unpin(&self, r: Request<ShardRequest>) -> Result<Response<AdminReply>, Status> {
        let shard = r.into_inner().shard;
        Self::check_shard(shard)?;
        self.pins.lock().unwrap().remove(&shard);
        Ok(Response::new(AdminReply { message: format!("shard {shard} unpinned") }))
    }
}

/// A standby: every call answers FAILED_PRECONDITION naming the leader.
struct Standby {
    leader: String,
}

impl Standby {
    fn refuse(&self) -> Status {
        let mut s = Status::failed_precondition("not the leader");
        if let Ok(v) = self.leader.parse() {
            s.metadata_mut().insert("x-fleet-leader", v);
        }
        s
    }
}

#[tonic::async_trait]
impl FleetAdmin for Standby {
    async fn status(&self, _: Request<StatusRequest>) -> Result<Response<StatusResponse>, Status> {
        Err(self.refuse())
    }
    async fn workers(&self, _: Request<WorkersRequest>) -> Result<Response<WorkersResponse>, Status> {
        Err(self.refuse())
    }
    async fn shards(&self, _: Request<ShardsRequest>) -> Result<Response<ShardsResponse>, Status> {
        Err(self.refuse())
    }
    async fn drain(&self, _: Request<WorkerRequest>) -> Result<Response<AdminReply>, Status> {
        Err(self.refuse())
    }
    async fn undrain(&self, _: Request<WorkerRequest>) -> Result<Response<AdminReply>, Status> {
        Err(self.refuse())
    }
    async fn rebalance(&self, _: Request<RebalanceRequest>) -> Result<Response<RebalanceResponse>, Status> {
        Err(self.refuse())
    }
    async fn r#move(&self, _: Request<ShardToWorkerRequest>) -> Result<Response<AdminReply>, Status> {
        Err(self.refuse())
    }
    async fn pin(&self, _: Request<ShardToWorkerRequest>) -> Result<Response<AdminReply>, Status> {
        Err(self.refuse())
    }
    async fn unpin(&self, _: Request<ShardRequest>) -> Result<Response<AdminReply>, Status> {
        Err(self.refuse())
    }
}

async fn serve<S: FleetAdmin>(service: S) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(FleetAdminServer::new(service))
            .serve_with_incoming(incoming),
    );
    addr
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn fleetctl(admin: &str, args: &[&str]) -> Run {
    let mut all = vec!["--insecure".to_string(), "--admin".to_string(), admin.to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    let out =
        tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetctl")).args(&all).output().await.expect("runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn json(run: &Run) -> Value {
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", run.stdout))
}

#[tokio::test]
async fn status_workers_and_shards_print_the_documented_fields() {
    let leader = serve(ScriptedFleet::new()).await.to_string();
    let status = json(&fleetctl(&leader, &["status", "-o", "json"]).await);
    let keys: Vec<&str> = status.as_object().expect("object").keys().map(String::as_str).collect();
    assert_eq!(keys, ["leader", "store", "shard_count", "workers", "shards_by_state", "moves_in_progress"]);
    assert_eq!(status["leader"], "coordinator-a");
    assert_eq!(status["shards_by_state"]["active"], 4);

    let workers = json(&fleetctl(&leader, &["workers", "-o", "json"]).await);
    let first = workers[0].as_object().expect("object");
    assert_eq!(
        first.keys().map(String::as_str).collect::<Vec<_>>(),
        ["name", "state", "shards", "load", "lease_expires_in_ms"]
    );
    assert_eq!(workers[0]["shards"], 4);

    let shards = json(&fleetctl(&leader, &["shards", "-o", "json"]).await);
    assert_eq!(shards.as_array().map(Vec::len), Some(4));
    assert_eq!(
        shards[0].as_object().expect("object").keys().map(String::as_str).collect::<Vec<_>>(),
        ["shard", "owner", "epoch", "state", "load", "pinned"]
    );

    let table = fleetctl(&leader, &["workers"]).await;
    assert_eq!(table.code, 0);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", table.stdout);
    assert!(lines[0].starts_with("NAME       STATE    SHARDS"), "{}", table.stdout);
    assert!(lines[1].starts_with("worker-0   active   4"), "{}", table.stdout);
}

#[tokio::test]
async fn rebalance_dry_run_prints_exactly_the_moves_rebalance_makes() {
    let leader = serve(ScriptedFleet::new()).await.to_string();
    let planned = json(&fleetctl(&leader, &["rebalance", "--dry-run", "-o", "json"]).await);
    let before = json(&fleetctl(&leader, &["shards", "-o", "json"]).await);
    assert!(
        before.as_array().expect("list").iter().all(|s| s["owner"] == "worker-0"),
        "a dry run changes nothing"
    );
    let made = json(&fleetctl(&leader, &["rebalance", "-o", "json"]).await);
    assert_eq!(planned, made);
    assert_eq!(planned.as_array().map(Vec::len), Some(2));
    let after = json(&fleetctl(&leader, &["shards", "-o", "json"]).await);
    for m in planned.as_array().expect("moves") {
        let shard = m["shard"].as_u64().expect("shard") as usize;
        assert_eq!(after[shard]["owner"], m["to"]);
    }
    let again = fleetctl(&leader, &["rebalance", "--dry-run"]).await;
    assert_eq!(again.stdout, "no moves: the placement is balanced\n");
}

#[tokio::test]
async fn bad_input_exits_2_with_the_reason_and_changes_nothing() {
    let leader = serve(ScriptedFleet::new()).await.to_string();
    let unknown = fleetctl(&leader, &["drain", "worker-9"]).await;
    assert_eq!(unknown.code, 2);
    assert!(unknown.stderr.contains("unknown worker \"worker-9\""), "{}", unknown.stderr);
    let out_of_range = fleetctl(&leader, &["move", "17", "worker-1"]).await;
    assert_eq!(out_of_range.code, 2);
    assert!(out_of_range.stderr.contains("shard 17 is out of range"), "{}", out_of_range.stderr);
    let shards = json(&fleetctl(&leader, &["shards", "-o", "json"]).await);
    assert!(shards.as_array().expect("list").iter().all(|s| s["owner"] == "worker-0"));

    let not_a_number = fleetctl(&leader, &["pin", "first", "worker-1"]).await;
    assert_eq!(not_a_number.code, 2, "clap rejects it: {}", not_a_number.stderr);
    let bad_format = fleetctl(&leader, &["status", "-o", "yaml"]).await;
    assert_eq!(bad_format.code, 2);
}

#[tokio::test]
async fn commands_reach_the_leader_through_a_standby_or_a_dead_address() {
    let leader = serve(ScriptedFleet::new()).await;
    let standby = serve(Standby { leader: format!("http://{leader}") }).await;
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };

    let via_hint = json(&fleetctl(&standby.to_string(), &["status", "-o", "json"]).await);
    assert_eq!(via_hint["leader"], "coordinator-a", "the standby's hint is followed");
    let list = format!("http://{dead},http://{standby}");
    let pinned = fleetctl(&list, &["pin", "2", "worker-1"]).await;
    assert_eq!(pinned.code, 0, "{}", pinned.stderr);
    assert_eq!(pinned.stdout, "shard 2 pinned to worker-1\n");

    let nobody = fleetctl(&format!("http://{dead}"), &["status"]).await;
    assert_eq!(nobody.code, 2);
    assert!(nobody.stderr.contains("no leader reachable"), "{}", nobody.stderr);
    let lone_standby = serve(Standby { leader: String::new() }).await;
    let refused = fleetctl(&lone_standby.to_string(), &["status"]).await;
    assert_eq!(refused.code, 2);
    assert!(refused.stderr.contains("not the leader"), "{}", refused.stderr);
}
