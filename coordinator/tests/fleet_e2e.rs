//! The fleet as separate processes against the sim cluster: one `fleet-coordinator` and two
//! `fleet-worker`s. Shards are placed on both workers; Jobs in namespaces across the key space
//! complete; a drain moves every shard off a worker by the hand-over; a worker killed with
//! SIGKILL has its shards reassigned after its lease expires; Jobs keep completing throughout.
//! From the sim's audit log: per namespace, the writing worker changes at most as often as its
//! shard changed owner (the shard's epoch), so no two workers wrote for it in overlapping tenures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use batchfleet_proto::v1 as pb;
use batchfleet_proto::v1::fleet_admin_client::FleetAdminClient;
use batchfleet_sim::audit::read_log;
use batchfleet_sim::testing::wait_until;
use batchfleet_sim::{SimCluster, SimConfig};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::process::{Child, Command};

const SHARDS: u32 = 16;
const NAMESPACES: usize = 8;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// The worker binary sits next to the coordinator's; built here when a `-p` run did not build it.
fn worker_binary() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_fleet-coordinator")).with_file_name("fleet-worker");
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-p", "batchfleet-worker", "--bin", "fleet-worker"])
            .status()
            .expect("cargo build runs");
        assert!(status.success(), "building fleet-worker");
    }
    path
}

fn spawn_coordinator(kubeconfig: &Path, id: &str, listen: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_fleet-coordinator"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--coordinator-id", id, "--listen", listen, "--metrics-addr", "127.0.0.1:0"])
        .args(["--shards", &SHARDS.to_string(), "--worker-lease-margin", "1s"])
        .args(["--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms"])
        .args(["--leader-elect-retry-period", "200ms"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("fleet-coordinator starts")
}

fn spawn_worker(binary: &Path, kubeconfig: &Path, coordinator: &str, id: &str) -> Child {
    Command::new(binary)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--coordinator", coordinator, "--worker-id", id, "--metrics-addr", "127.0.0.1:0"])
        .args(["--shards", &SHARDS.to_string(), "--lease-duration", "5s"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("fleet-worker starts")
}

async fn admin(url: &str) -> Option<FleetAdminClient<tonic::transport::Channel>> {
    FleetAdminClient::connect(url.to_string()).await.ok()
}

async fn shards(url: &str) -> Option<Vec<pb::ShardInfo>> {
    Some(admin(url).await?.shards(pb::ShardsRequest {}).await.ok()?.into_inner().shards)
}

/// Owners of every shard once all are active, else `None`.
async fn settled_owners(url: &str) -> Option<BTreeMap<u32, String>> {
    let shards = shards(url).await?;
    let settled =
        shards.len() == SHARDS as usize && shards.iter().all(|s| s.state == "active" && !s.owner.is_empty());
    settled.then(|| shards.into_iter().map(|s| (s.shard, s.owner)).collect())
}

async fn run_jobs(client: &kube::Client, round: &str) {
    for i in 0..NAMESPACES {
        let ns = format!("team-{i}");
        let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": format!("{round}-{i}")},
            "spec": {"completions": 2, "parallelism": 1, "template": {
                "metadata": {"annotations": {"sim.batchfleet.io/run": "100ms"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
        }))
        .expect("job");
        jobs.create(&PostParams::default(), &job).await.expect("create job");
    }
    for i in 0..NAMESPACES {
        let jobs: Api<Job> = Api::namespaced(client.clone(), &format!("team-{i}"));
        let name = format!("{round}-{i}");
        wait_until(&format!("job {name} in team-{i} completes"), Duration::from_secs(60), || {
            let (jobs, name) = (jobs.clone(), name.clone());
            async move { jobs.get(&name).await.ok()?.status?.succeeded.filter(|s| *s == 2) }
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_are_placed_drained_and_reassigned_and_jobs_keep_completing() {
    let fleet = Fleet::start().await;
    let (kubeconfig, audit, client) = (fleet.kubeconfig(), fleet.audit(), fleet.client.clone());
    let listen = format!("127.0.0.1:{}", free_port());
    let url = format!("http://{listen}");
    let _coordinator = spawn_coordinator(&kubeconfig, "coordinator-0", &listen);
    let binary = worker_binary();
    let _w0 = spawn_worker(&binary, &kubeconfig, &url, "w-0");
    let mut w1 = spawn_worker(&binary, &kubeconfig, &url, "w-1");

    let owners =
        wait_until("every shard active on a worker", Duration::from_secs(60), || settled_owners(&url)).await;
    for worker in ["w-0", "w-1"] {
        assert!(owners.values().any(|o| o == worker), "{worker} got no shard: {owners:?}");
    }
    run_jobs(&client, "first").await;

    // Drain w-0: every shard ends on w-1 and w-0 is told it is drained.
    let mut rpc = admin(&url).await.expect("admin API");
    rpc.drain(pb::WorkerRequest { worker: "w-0".into() }).await.expect("drain");
    wait_until("w-0 drained", Duration::from_secs(60), || async {
        let owners = settled_owners(&url).await?;
        let workers = admin(&url).await?.workers(pb::WorkersRequest {}).await.ok()?.into_inner().workers;
        let drained = workers.iter().any(|w| w.name == "w-0" && w.state == "drained");
        (drained && owners.values().all(|o| o == "w-1")).then_some(())
    })
    .await;
    run_jobs(&client, "drained").await;

    // Undrain w-0, then kill w-1: its shards come to w-0 once its lease (5 s + 1 s margin) lapses.
    rpc.undrain(pb::WorkerRequest { worker: "w-0".into() }).await.expect("undrain");
    w1.start_kill().expect("kill -9");
    w1.wait().await.expect("reaped");
    wait_until("every shard on w-0", Duration::from_secs(60), || async {
        settled_owners(&url).await.filter(|o| o.values().all(|o| o == "w-0"))
    })
    .await;
    run_jobs(&client, "after-kill").await;

    assert_tenures_never_overlap(&url, &audit).await;
}

/// From the audit log: per namespace, the writing worker changed at most as often as the
/// namespace's shard changed owner (its epoch counts the moves).
async fn assert_tenures_never_overlap(admin_url: &str, audit: &Path) {
    let epochs: BTreeMap<u32, u64> =
        shards(admin_url).await.expect("shards").into_iter().map(|s| (s.shard, s.epoch)).collect();
    let events = read_log(audit).expect("audit log");
    let mut writers: BTreeMap<String, Vec<(String, String, String)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.is_write() && e.user_agent.starts_with("fleet-worker/")) {
        let Some(ns) =
            e.object_ref.as_ref().map(|o| o.namespace.clone()).filter(|ns| ns.starts_with("team-"))
        else {
            continue;
        };
        let what =
            format!("{} {}", e.verb, e.object_ref.as_ref().map(|o| o.resource.as_str()).unwrap_or_default());
        writers.entry(ns).or_default().push((
            e.request_received_timestamp.clone(),
            e.user_agent.clone(),
            what,
        ));
    }
    assert_eq!(writers.len(), NAMESPACES, "every namespace was written: {:?}", writers.keys());
    for (ns, mut writes) in writers {
        writes.sort();
        let switches = writes.windows(2).filter(|w| w[0].1 != w[1].1).count() as u64;
        let shard = (batchfleet_sim::selector::shard::fnv1a64(ns.as_bytes())
            / (u64::MAX / u64::from(SHARDS) + 1)) as u32;
        let moves = epochs[&shard].saturating_sub(1);
        assert!(
            switches <= moves,
            "{ns} (shard {shard}): writers switched {switches} times over {moves} moves: {writes:#?}"
        );
    }
}

struct Fleet {
    _sim: SimCluster,
    dir: tempfile::TempDir,
    client: kube::Client,
}

impl Fleet {
    async fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let sim = SimCluster::start(SimConfig {
            nodes: 2,
            audit_log: Some(dir.path().join("audit.log")),
            ..SimConfig::default()
        })
        .await
        .expect("sim");
        sim.write_kubeconfig(&dir.path().join("kubeconfig")).expect("kubeconfig");
        let client =
            kube::Client::try_from(kube::Config::new(sim.url().parse().expect("url"))).expect("client");
        let nss: Api<Namespace> = Api::all(client.clone());
        for i in 0..NAMESPACES {
            let ns: Namespace =
                serde_json::from_value(json!({"metadata": {"name": format!("team-{i}")}})).expect("ns");
            nss.create(&PostParams::default(), &ns).await.expect("namespace");
        }
        Self { _sim: sim, dir, client }
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    fn audit(&self) -> PathBuf {
        self.dir.path().join("audit.log")
    }
}

/// Every shard's (owner, epoch) once placement has settled: every shard active, no move in
/// progress, and the same answer twice a second apart (placement settles after workers join).
async fn settled_placement(url: &str) -> BTreeMap<u32, (String, u64)> {
    let snapshot = || async {
        let status = admin(url).await?.status(pb::StatusRequest {}).await.ok()?.into_inner();
        let s = shards(url).await?;
        (status.moves_in_progress == 0 && s.iter().all(|s| s.state == "active"))
            .then(|| s.into_iter().map(|s| (s.shard, (s.owner, s.epoch))).collect::<BTreeMap<_, _>>())
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut last = None;
    loop {
        let now = snapshot().await;
        if now.is_some() && now == last {
            return now.unwrap_or_default();
        }
        assert!(tokio::time::Instant::now() < deadline, "placement did not settle in 60s: {now:?}");
        last = now;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn leader(urls: &[String]) -> Option<(usize, String)> {
    for (i, url) in urls.iter().enumerate() {
        if let Some(mut rpc) = admin(url).await
            && let Ok(status) = rpc.status(pb::StatusRequest {}).await
        {
            return Some((i, status.into_inner().leader));
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_fail_over_moves_no_shard() {
    let fleet = Fleet::start().await;
    let listens: Vec<String> = (0..2).map(|_| format!("127.0.0.1:{}", free_port())).collect();
    let urls: Vec<String> = listens.iter().map(|l| format!("http://{l}")).collect();
    let mut coordinators: Vec<Child> = listens
        .iter()
        .enumerate()
        .map(|(i, l)| spawn_coordinator(&fleet.kubeconfig(), &format!("coordinator-{i}"), l))
        .collect();
    let binary = worker_binary();
    let all = urls.join(",");
    let _workers: Vec<Child> =
        (0..2).map(|i| spawn_worker(&binary, &fleet.kubeconfig(), &all, &format!("w-{i}"))).collect();
    let (leading, _) = wait_until("a leader", Duration::from_secs(30), || leader(&urls)).await;
    run_jobs(&fleet.client, "before").await;
    // The leader is killed right after placement is seen settled: a move it started in between
    // (the Jobs' load may still shift shards) would show as a difference below.
    let before = settled_placement(&urls[leading]).await;

    coordinators[leading].start_kill().expect("kill -9 the leader");
    coordinators[leading].wait().await.expect("reaped");
    let standby = 1 - leading;
    let after = settled_placement(&urls[standby]).await;
    assert_eq!(after, before, "a fail-over moved shards");
    run_jobs(&fleet.client, "after").await;
    assert_tenures_never_overlap(&urls[standby], &fleet.audit()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_worker_loses_its_shards_and_writes_nothing_for_them_when_it_resumes() {
    let fleet = Fleet::start().await;
    let listen = format!("127.0.0.1:{}", free_port());
    let url = format!("http://{listen}");
    let _coordinator = spawn_coordinator(&fleet.kubeconfig(), "coordinator-0", &listen);
    let binary = worker_binary();
    let _w0 = spawn_worker(&binary, &fleet.kubeconfig(), &url, "w-0");
    let w1 = spawn_worker(&binary, &fleet.kubeconfig(), &url, "w-1");
    let owners =
        wait_until("every shard active on a worker", Duration::from_secs(60), || settled_owners(&url)).await;
    assert!(owners.values().any(|o| o == "w-1"), "{owners:?}");
    let pid = w1.id().expect("pid").to_string();
    let signal =
        |sig: &str| std::process::Command::new("kill").args([sig, &pid]).status().expect("kill runs");
    assert!(signal("-STOP").success());
    // Jobs created while w-1 is paused: its namespaces wait for the lease (5 s + 1 s margin).
    wait_until("every shard on w-0", Duration::from_secs(60), || async {
        settled_owners(&url).await.filter(|o| o.values().all(|o| o == "w-0"))
    })
    .await;
    run_jobs(&fleet.client, "paused").await;
    assert!(signal("-CONT").success());
    // Back, w-1 registers again and may be given shards anew; whatever it writes is under them.
    run_jobs(&fleet.client, "resumed").await;
    assert_tenures_never_overlap(&url, &fleet.audit()).await;
}

/// What a client that reached the standby learns: the leader's address in `x-fleet-leader`.
async fn leader_hint_from(url: &str) -> Option<String> {
    let refused = admin(url).await?.status(pb::StatusRequest {}).await.err()?;
    (refused.code() == tonic::Code::FailedPrecondition)
        .then(|| refused.metadata().get(batchfleet_proto::LEADER_HINT)?.to_str().ok().map(str::to_string))
        .flatten()
}

async fn reflected_services(url: &str) -> Option<Vec<String>> {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};
    let channel = tonic::transport::Endpoint::from_shared(url.to_string()).ok()?.connect().await.ok()?;
    let mut client = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers = client.server_reflection_info(tokio_stream::iter([request])).await.ok()?.into_inner();
    let ServerReflectionResponse { message_response, .. } = answers.message().await.ok()??;
    match message_response? {
        MessageResponse::ListServicesResponse(list) => {
            Some(list.service.into_iter().map(|s| s.name).collect())
        }
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_given_only_the_standby_follows_it_to_the_leader_and_both_serve_health_and_reflection() {
    let fleet = Fleet::start().await;
    let listens: Vec<String> = (0..2).map(|_| format!("127.0.0.1:{}", free_port())).collect();
    let urls: Vec<String> = listens.iter().map(|l| format!("http://{l}")).collect();
    let _leader = spawn_coordinator(&fleet.kubeconfig(), "coordinator-0", &listens[0]);
    wait_until("coordinator-0 leads", Duration::from_secs(30), || leader(&urls[..1])).await;
    let _standby = spawn_coordinator(&fleet.kubeconfig(), "coordinator-1", &listens[1]);
    let hint =
        wait_until("the standby names the leader", Duration::from_secs(30), || leader_hint_from(&urls[1]))
            .await;
    assert_eq!(hint, urls[0], "the standby's hint is the leader's advertised address");

    let binary = worker_binary();
    let _worker = spawn_worker(&binary, &fleet.kubeconfig(), &urls[1], "w-0");
    let owners =
        wait_until("every shard active on w-0", Duration::from_secs(60), || settled_owners(&urls[0])).await;
    assert!(owners.values().all(|o| o == "w-0"), "{owners:?}");

    for url in &urls {
        let channel = tonic::transport::Endpoint::from_shared(url.clone())
            .expect("url")
            .connect()
            .await
            .expect("connect");
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
        for service in ["batchfleet.v1.FleetAdmin", "batchfleet.v1.FleetSession"] {
            let answer = health
                .check(tonic_health::pb::HealthCheckRequest { service: service.into() })
                .await
                .expect("health check")
                .into_inner();
            assert_eq!(
                answer.status(),
                tonic_health::pb::health_check_response::ServingStatus::Serving,
                "{service}"
            );
        }
        let services =
            wait_until("reflection answers", Duration::from_secs(10), || reflected_services(url)).await;
        for service in ["batchfleet.v1.FleetAdmin", "batchfleet.v1.FleetSession", "grpc.health.v1.Health"] {
            assert!(services.iter().any(|s| s == service), "{url} reflects {services:?}");
        }
    }
}
