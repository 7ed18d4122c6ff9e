//! What an operator ships and scrapes, from the real binaries against the sim cluster: two
//! `fleet-coordinator`s and two `fleet-worker`s, Jobs created with kubectl. The JSON log
//! (`--log-format json`, or `FLEET_LOG_FORMAT=json`) is one object per line with its keys, and a
//! sync's and a move's lines carry their spans; the text log written to a file has no colour
//! codes; `/metrics` has client-go's request and leader-election series with real labels, and
//! the process metrics.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use batchfleet_proto::v1 as pb;
use batchfleet_proto::v1::fleet_admin_client::FleetAdminClient;
use batchfleet_sim::testing::{wait_until, workspace_binary, workspace_root};
use batchfleet_sim::{SimCluster, SimConfig};
use serde_json::Value;
use tokio::process::{Child, Command};

mod common;
use common::{free_port, scrape};

const SHARDS: u32 = 4;

/// kubectl 1.37: `$BATCHFLEET_KUBECTL`, else the workspace's `.tools/bin/kubectl` (scripts/setup).
fn kubectl_binary() -> PathBuf {
    std::env::var_os("BATCHFLEET_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".tools/bin/kubectl"))
}

async fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let out = Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .await
        .expect("kubectl runs (scripts/setup installs it)");
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A process whose stderr goes to `log` (a file: no terminal), with `RUST_LOG` and `env`.
fn spawn(binary: &Path, args: &[String], env: &[(&str, &str)], log: &Path) -> Child {
    let stderr = std::fs::File::create(log).expect("log file");
    Command::new(binary)
        .args(args)
        .env_remove("FLEET_LOG_FORMAT")
        .env_remove("NO_COLOR")
        // Each sync's "finished syncing" line is at debug.
        .env("RUST_LOG", "info,batchfleet_worker=debug")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .expect("the binary starts")
}

/// One sample: its metric's name, its labels, its value.
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn parse_samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            let labels = labels
                .split("\",")
                .filter(|p| !p.is_empty())
                .filter_map(|pair| {
                    let (k, v) = pair.split_once("=\"")?;
                    Some((k.to_string(), v.trim_end_matches('"').to_string()))
                })
                .collect();
            Some(Sample { name: name.to_string(), labels, value: value.parse().ok()? })
        })
        .collect()
}

struct Scrape(Vec<Sample>);

impl Scrape {
    /// The value of the series `name` with (at least) `labels`; `None` when there is none.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.0
            .iter()
            .find(|s| {
                s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
    }

    fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.0.iter().map(|s| s.name.as_str()).collect();
        names.dedup();
        names
    }
}

async fn metrics(addr: &str) -> Option<Scrape> {
    Some(Scrape(parse_samples(&scrape(addr).await?)))
}

/// The first scrape of `addr` that `ready` accepts, within `deadline`.
async fn metrics_when(addr: &str, what: &str, ready: impl Fn(&Scrape) -> bool) -> Scrape {
    wait_until(what, Duration::from_secs(60), || async { metrics(addr).await.filter(|m| ready(m)) }).await
}

/// Once both workers own shards, every shard is active and no move is in progress.
async fn settled(url: &str) -> Option<()> {
    let mut rpc = FleetAdminClient::connect(url.to_string()).await.ok()?;
    let status = rpc.status(pb::StatusRequest {}).await.ok()?.into_inner();
    let shards = rpc.shards(pb::ShardsRequest {}).await.ok()?.into_inner().shards;
    let placed = status.moves_in_progress == 0
        && shards.len() == SHARDS as usize
        && shards.iter().all(|s| s.state == "active")
        && ["w-json", "w-text"].iter().all(|w| shards.iter().any(|s| s.owner == *w));
    placed.then_some(())
}

/// Every line of a JSON log as an object with timestamp, level, target and message.
fn json_lines(log: &Path) -> Vec<serde_json::Map<String, Value>> {
    let text = std::fs::read_to_string(log).expect("the log");
    assert!(!text.is_empty(), "{} is empty", log.display());
    text.lines()
        .map(|line| {
            let value: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
            let Value::Object(object) = value else { panic!("not a JSON object: {line:?}") };
            for key in ["timestamp", "level", "target", "message"] {
                assert!(object.get(key).is_some_and(Value::is_string), "no string {key:?} in {line:?}");
            }
            object
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_their_spans_and_metrics_have_client_gos_series() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = SimCluster::start(SimConfig { nodes: 1, ..SimConfig::default() }).await.expect("sim");
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let host = sim.url().trim_start_matches("http://").trim_end_matches('/').to_string();
    let log = |name: &str| dir.path().join(format!("{name}.log"));

    let (listen, metrics_addr): (Vec<String>, Vec<String>) =
        (0..2).map(|_| (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()))).unzip();
    let urls: Vec<String> = listen.iter().map(|l| format!("http://{l}")).collect();
    let coordinator = |i: usize| -> Vec<String> {
        let mut args: Vec<String> = ["--insecure", "--kubeconfig"].map(String::from).to_vec();
        args.push(kubeconfig.display().to_string());
        args.extend(
            [
                "--coordinator-id",
                &format!("coordinator-{i}"),
                "--listen",
                &listen[i],
                "--metrics-addr",
                &metrics_addr[i],
                "--shards",
                &SHARDS.to_string(),
                "--leader-elect-lease-duration",
                "2s",
                "--leader-elect-renew-deadline",
                "1500ms",
                "--leader-elect-retry-period",
                "200ms",
            ]
            .map(String::from),
        );
        args
    };
    let coordinator_binary = PathBuf::from(env!("CARGO_BIN_EXE_fleet-coordinator"));
    // One asks for JSON by its flag, the other by the environment.
    let mut flagged = coordinator(0);
    flagged.extend(["--log-format", "json"].map(String::from));
    let mut processes = vec![spawn(&coordinator_binary, &flagged, &[], &log("coordinator-0"))];
    // coordinator-0 leads before coordinator-1 starts: the standby is the second.
    metrics_when(&metrics_addr[0], "coordinator-0 leads", |m| {
        m.value("leader_election_master_status", &[("name", "batchfleet-coordinator")]) == Some(1.0)
    })
    .await;
    processes.push(spawn(
        &coordinator_binary,
        &coordinator(1),
        &[("FLEET_LOG_FORMAT", "json")],
        &log("coordinator-1"),
    ));

    let worker_binary = workspace_binary("batchfleet-worker", "fleet-worker");
    let worker_metrics: Vec<String> = (0..2).map(|_| format!("127.0.0.1:{}", free_port())).collect();
    for (i, (id, format)) in [("w-json", "json"), ("w-text", "text")].into_iter().enumerate() {
        let mut args: Vec<String> = ["--insecure", "--kubeconfig"].map(String::from).to_vec();
        args.push(kubeconfig.display().to_string());
        args.extend(
            [
                "--coordinator",
                &urls.join(","),
                "--worker-id",
                id,
                "--metrics-addr",
                &worker_metrics[i],
                "--shards",
                &SHARDS.to_string(),
                "--lease-duration",
                "5s",
            ]
            .map(String::from),
        );
        // The text worker's format is the default.
        if format == "json" {
            args.extend(["--log-format", "json"].map(String::from));
        }
        processes.push(spawn(&worker_binary, &args, &[], &log(id)));
    }
    wait_until("both workers own shards, none moving", Duration::from_secs(90), || settled(&urls[0])).await;

    // A Job in a namespace of every shard, as a user creates it; each worker syncs some.
    let namespaces = common::workload::one_namespace_per_shard(SHARDS);
    for ns in namespaces.values() {
        kubectl(&kubeconfig, &["create", "namespace", ns]).await;
        kubectl(&kubeconfig, &["create", "job", "hello", "--image=busybox", "-n", ns]).await;
    }
    for ns in namespaces.values() {
        kubectl(&kubeconfig, &["wait", "--for=condition=complete", "job/hello", "-n", ns, "--timeout=60s"])
            .await;
    }

    // The leader and the standby, by client-go's gauge.
    let leader = metrics_when(&metrics_addr[0], "the leader's metrics", |m| {
        m.value("rest_client_requests_total", &[("code", "200"), ("method", "PUT"), ("host", &host)])
            .is_some_and(|n| n > 0.0)
    })
    .await;
    assert_eq!(
        leader.value("leader_election_master_status", &[("name", "batchfleet-coordinator")]),
        Some(1.0)
    );
    let standby = metrics(&metrics_addr[1]).await.expect("the standby's /metrics");
    assert_eq!(
        standby.value("leader_election_master_status", &[("name", "batchfleet-coordinator")]),
        Some(0.0),
        "{:?}",
        standby.names()
    );
    for m in [&leader, &standby] {
        assert!(m.value("rest_client_requests_total", &[("method", "GET"), ("host", &host)]).is_some());
        assert!(
            m.value("rest_client_request_duration_seconds_count", &[("verb", "GET"), ("host", &host)])
                .is_some_and(|n| n > 0.0)
        );
    }

    // A worker: its syncs' writes and its watches, in client-go's series; the process metrics.
    let worker = metrics_when(&worker_metrics[0], "the worker's requests", |m| {
        m.value("rest_client_requests_total", &[("code", "201"), ("method", "POST"), ("host", &host)])
            .is_some_and(|n| n > 0.0)
    })
    .await;
    assert!(
        worker
            .value("rest_client_request_duration_seconds_count", &[("verb", "POST"), ("host", &host)])
            .is_some_and(|n| n > 0.0)
    );
    assert!(
        worker
            .value("rest_client_requests_total", &[("code", "200"), ("method", "GET"), ("host", &host)])
            .is_some()
    );
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    for m in [&leader, &standby, &worker] {
        assert!(m.value("process_resident_memory_bytes", &[]).is_some_and(|v| v > 0.0), "{:?}", m.names());
        assert!(m.value("process_open_fds", &[]).is_some_and(|v| v > 0.0));
        assert!(m.value("process_cpu_seconds_total", &[]).is_some());
        let started = m.value("process_start_time_seconds", &[]).expect("process_start_time_seconds");
        assert!(started > now - 600.0 && started <= now, "started {started}, now {now}");
    }

    for process in &mut processes {
        let _ = process.kill().await;
    }

    // Every line of the JSON logs is an object with its keys.
    let leader_log = json_lines(&log("coordinator-0"));
    json_lines(&log("coordinator-1"));
    let worker_log = json_lines(&log("w-json"));
    // A sync's line says which sync it is.
    let synced = worker_log
        .iter()
        .find(|l| l["message"] == "finished syncing" && l["span"]["controller"] == "job")
        .unwrap_or_else(|| panic!("no Job sync's line in the JSON worker's log"));
    let span = &synced["span"];
    assert_eq!(span["name"], "reconcile");
    let key = span["key"].as_str().expect("the key");
    let (ns, name) = key.split_once('/').expect("namespace/name");
    assert!(namespaces.values().any(|n| n == ns) && name == "hello", "{key}");
    assert!(span["shard"].as_u64().is_some_and(|s| s < u64::from(SHARDS)), "{span}");
    assert!(span["epoch"].as_u64().is_some_and(|e| e >= 1), "{span}");
    assert!(synced["spans"].as_array().is_some_and(|s| s.iter().any(|s| s["name"] == "reconcile")));
    // A move's line says which move it is.
    let moved = leader_log
        .iter()
        .find(|l| l["message"] == "move finished" && l["span"]["name"] == "handover")
        .unwrap_or_else(|| panic!("no move's line in the leader's JSON log"));
    let span = &moved["span"];
    assert!(span["shard"].as_u64().is_some_and(|s| s < u64::from(SHARDS)), "{span}");
    assert!(span["epoch"].as_u64().is_some_and(|e| e >= 1), "{span}");
    assert!(span["to"].as_str().is_some_and(|to| to.starts_with("w-")), "{span}");
    assert_eq!(moved["result"], "done");

    // The text log, written to a file, has lines and no colour codes.
    let text = std::fs::read_to_string(log("w-text")).expect("the text log");
    assert!(text.lines().count() > 0 && !text.starts_with('{'), "{text}");
    assert!(!text.contains("\x1b["), "ANSI escape codes in a log that is no terminal: {text}");
    assert!(text.contains("finished syncing"), "the text worker synced too");
}
