//! TTL smoothing and the TTL of bare pods, end to end against the sim cluster: a wave of
//! finished Jobs expiring at the same instant is deleted under `--ttl-max-deletions-per-second`
//! (the peak read from the sim's audit log, as an operator would read kube-apiserver's), and bare
//! pods started with `kubectl run … --annotations=batchfleet.io/ttl-seconds-after-finished=N`
//! are deleted N seconds after they finished; a bad value gets a Warning Event and the pod stays.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use batchfleet_sim::audit::{AuditEvent, Stage, read_log};
use batchfleet_sim::{SimCluster, SimConfig};
use batchfleet_worker::client::ClientLimits;
use batchfleet_worker::start::{self, WorkerOptions};
use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// CI size: 200 Jobs at 20 deletions per second, a 10 s spread.
const JOBS: usize = 200;
const RATE: f64 = 20.0;
const TTL_SECONDS: i64 = 8;

struct Env {
    sim: SimCluster,
    worker: start::Worker,
    client: kube::Client,
    audit: PathBuf,
    _dir: tempfile::TempDir,
}

async fn start_smoothed() -> Env {
    let _ = tracing_subscriber::fmt().with_test_writer().with_env_filter("warn").try_init();
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.log");
    let sim =
        SimCluster::start(SimConfig { nodes: 3, audit_log: Some(audit.clone()), ..SimConfig::default() })
            .await
            .expect("sim starts");
    let config = kube::Config::new(sim.url().parse().expect("url"));
    let worker_client =
        batchfleet_worker::client::from_config(config.clone(), ClientLimits::UNLIMITED).expect("client");
    let opts = WorkerOptions {
        metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        ttl_max_deletions_per_second: RATE,
        concurrent_ttl_syncs: 5,
        ..WorkerOptions::default()
    };
    let worker = start::start_with_client(worker_client, opts).await.expect("worker starts");
    let client = kube::Client::try_from(config).expect("client");
    Env { sim, worker, client, audit, _dir: dir }
}

fn audit_time(t: &str) -> Timestamp {
    t.parse().unwrap_or_else(|e| panic!("audit timestamp {t:?}: {e}"))
}

/// The sim's answered DELETEs of `resource` in `namespace`, by name: when each was received.
fn deletes(audit: &Path, resource: &str, namespace: &str) -> BTreeMap<String, Timestamp> {
    let events: Vec<AuditEvent> = read_log(audit).unwrap_or_default();
    events
        .iter()
        .filter(|e| e.stage == Stage::ResponseComplete && e.verb == "delete")
        .filter(|e| e.response_status.as_ref().is_some_and(|s| s.code < 300))
        .filter_map(|e| {
            let o = e.object_ref.as_ref()?;
            (o.resource == resource && o.namespace == namespace && o.subresource.is_empty())
                .then(|| (o.name.clone(), audit_time(&e.request_received_timestamp)))
        })
        .collect()
}

/// The value of the series `name` (with its labels, as exposed) in the worker's /metrics.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wave_of_jobs_expiring_together_is_deleted_under_the_rate() {
    let env = start_smoothed().await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    // Finished at one whole second, so every TTL falls in the same instant.
    let finished_at = Timestamp::from_second(Timestamp::now().as_second()).expect("valid");
    let expire_at = finished_at + SignedDuration::from_secs(TTL_SECONDS);
    // Managed by no controller here, so they stay as written; finished through /status.
    futures::stream::iter(0..JOBS)
        .for_each_concurrent(16, |i| {
            let jobs = jobs.clone();
            async move {
                let name = format!("done-{i}");
                let job: Job = serde_json::from_value(json!({
                    "metadata": {"name": name},
                    "spec": {"managedBy": "test.batchfleet.io/none", "ttlSecondsAfterFinished": TTL_SECONDS,
                             "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}
                }))
                .expect("a job");
                jobs.create(&PostParams::default(), &job).await.expect("create");
                let t = finished_at.to_string();
                let cond = |kind: &str| json!({"type": kind, "status": "True", "reason": "CompletionsReached", "lastTransitionTime": t, "lastProbeTime": t});
                let status = json!({"status": {"startTime": t, "completionTime": t, "succeeded": 1,
                    "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}});
                jobs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.expect("status");
            }
        })
        .await;
    assert!(Timestamp::now() < expire_at, "creating the Jobs took longer than their TTL");
    let spread = SignedDuration::from_secs_f64(JOBS as f64 / RATE);
    let bound = spread + SignedDuration::from_secs(2);
    let wait = Duration::from_secs((TTL_SECONDS + 60) as u64) + spread.unsigned_abs();
    let deleted = common::wait_until("every Job's DELETE in the audit log", wait, || async {
        let d = deletes(&env.audit, "jobs", "default");
        (d.len() == JOBS).then_some(d)
    })
    .await;
    let mut per_second: BTreeMap<i64, usize> = BTreeMap::new();
    for (name, at) in &deleted {
        assert!(*at >= expire_at, "{name} deleted at {at}, before its expiry {expire_at}");
        assert!(*at <= expire_at + bound, "{name} deleted at {at}, later than expiry + count/rate + 2 s");
        *per_second.entry(at.as_second()).or_default() += 1;
    }
    let peak = per_second.values().copied().max().unwrap_or_default();
    assert!(peak as f64 <= RATE, "peak {peak} deletions in a second, above {RATE}: {per_second:?}");
    // The lag metric shows the spread: all observed, most of them long after their expiry.
    let text = common::wait_until("the lag metric counts every delete", Duration::from_secs(10), || async {
        let text = metrics(&env).await;
        let count = metric(&text, "ttl_after_finished_controller_job_deletion_duration_seconds_count")?;
        (count as usize == JOBS).then_some(text)
    })
    .await;
    let within = |le: &str| {
        metric(
            &text,
            &format!("ttl_after_finished_controller_job_deletion_duration_seconds_bucket{{le=\"{le}\"}}"),
        )
        .unwrap_or_default()
    };
    assert!(within("1.6") < JOBS as f64 / 4.0, "under a quarter deleted within 1.6 s: {}", within("1.6"));
    assert!(within("12.8") >= JOBS as f64, "all within 12.8 s: {}", within("12.8"));
    drop(env.worker);
    drop(env.sim);
}

async fn metrics(env: &Env) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(env.worker.metrics_addr).await.expect("metrics connect");
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").await.expect("write");
    let mut out = String::new();
    stream.read_to_string(&mut out).await.expect("read");
    out
}

fn kubectl(env: &Env, args: &[&str]) -> std::process::Output {
    let path = std::env::var_os("BATCHFLEET_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/bin/kubectl"));
    assert!(path.exists(), "kubectl not found at {}: run scripts/setup", path.display());
    let dir = env._dir.path();
    env.sim.write_kubeconfig(&dir.join("kubeconfig")).expect("kubeconfig");
    let out = std::process::Command::new(&path)
        .args(args)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env("KUBECACHEDIR", dir.join("cache"))
        .env("HOME", dir)
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_pods_are_deleted_their_ttl_after_they_finished() {
    let env = start_smoothed().await;
    let ttl = "batchfleet.io/ttl-seconds-after-finished";
    for (name, value, exit) in
        [("quick", "2", "0"), ("failed", "3", "1"), ("bad", "soon", "0"), ("kept", "", "0")]
    {
        let mut args = vec!["run", name, "--image=busybox", "--restart=Never"];
        let annotations = [
            format!("--annotations={ttl}={value}"),
            format!("--annotations=sim.batchfleet.io/exit-code={exit}"),
        ];
        if !value.is_empty() {
            args.push(&annotations[0]);
        }
        args.extend(["--annotations=sim.batchfleet.io/run=300ms", &annotations[1]]);
        kubectl(&env, &args);
    }
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    // When each finished, as the controller judges it: its container's finishedAt.
    let finished = |p: &Pod| -> Option<Timestamp> {
        let s = p.status.as_ref()?;
        matches!(s.phase.as_deref(), Some("Succeeded" | "Failed")).then_some(())?;
        s.container_statuses
            .as_ref()?
            .iter()
            .find_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
            .map(|t| t.0)
    };
    let finish_times = common::wait_until("every pod finished", Duration::from_secs(60), || async {
        let list = pods.list(&ListParams::default()).await.ok()?.items;
        let times: BTreeMap<String, Timestamp> =
            list.iter().filter_map(|p| Some((p.metadata.name.clone()?, finished(p)?))).collect();
        (times.len() == 4).then_some(times)
    })
    .await;
    let deleted = common::wait_until("the annotated pods deleted", Duration::from_secs(60), || async {
        let d = deletes(&env.audit, "pods", "default");
        (d.contains_key("quick") && d.contains_key("failed")).then_some(d)
    })
    .await;
    for (name, ttl) in [("quick", 2), ("failed", 3)] {
        let due = finish_times[name] + SignedDuration::from_secs(ttl);
        let at = deleted[name];
        assert!(at >= due, "{name} deleted at {at}, before {due}");
        assert!(
            at <= due + SignedDuration::from_secs(2),
            "{name} deleted at {at}, more than 2 s after {due}"
        );
    }
    let reasons = common::wait_until("the bad value's Warning Event", Duration::from_secs(30), || async {
        let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
        let lp = ListParams::default().fields("involvedObject.name=bad,involvedObject.kind=Pod");
        let list = events.list(&lp).await.ok()?.items;
        let found =
            list.into_iter().find(|e| e.reason.as_deref() == Some("InvalidTTLSecondsAfterFinished"))?;
        Some(found)
    })
    .await;
    assert_eq!(reasons.type_.as_deref(), Some("Warning"));
    assert!(
        reasons.message.as_deref().unwrap_or_default().contains("\"soon\" is not a whole number of seconds")
    );
    // The bad value and the pod without the annotation stay, past the others' TTLs (they
    // finished together).
    let left: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(left, vec!["bad".to_string(), "kept".to_string()]);
    assert!(!deletes(&env.audit, "pods", "default").contains_key("bad"));
}
