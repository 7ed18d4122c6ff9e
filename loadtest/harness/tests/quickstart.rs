//! `loadtest up`, the README's main command, as a user runs it: the sim cluster and the fleet (a
//! coordinator and three workers as processes), or with `--standalone` one worker that owns
//! every shard; a short run of mixed work with a worker drained and another killed, then the
//! report. Checked from the outside: the cluster's objects (every Job ended as its label says,
//! the shard map), the sim's audit log (who wrote where), and the printed commands, run as
//! printed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use batchfleet_sim::audit::AuditEvent;
use batchfleet_sim::testing::wait_until;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const EXPECT_LABEL: &str = "demo.batchfleet.io/expect";
const NAMESPACES: [&str; 8] =
    ["demo", "analytics", "billing", "ingest", "media", "ml-training", "reports", "search"];

/// `loadtest up`, running, and what it printed so far.
struct Up {
    printed: Vec<String>,
    /// Interrupted when dropped.
    process: Child,
    dir: PathBuf,
}

impl Up {
    /// Starts `loadtest up FLAGS` on a free port with its files in `dir`.
    fn start(dir: &Path, flags: &[&str]) -> (Self, tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) {
        let port = batchfleet_sim::testing::free_port();
        let mut process = Command::new(env!("CARGO_BIN_EXE_loadtest"))
            .arg("up")
            .args(flags)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--kubeconfig"])
            .arg(dir.join("kubeconfig"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("loadtest up starts");
        let lines = BufReader::new(process.stdout.take().expect("stdout")).lines();
        (Self { printed: Vec::new(), process, dir: dir.to_path_buf() }, lines)
    }

    /// Reads what it prints until `last` says so (or it closes stdout), within `timeout`.
    async fn read_until(
        &mut self,
        lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
        timeout: Duration,
        last: impl Fn(&str) -> bool,
    ) -> bool {
        let printed = &mut self.printed;
        let reached = tokio::time::timeout(timeout, async {
            while let Ok(Some(line)) = lines.next_line().await {
                let done = last(&line);
                printed.push(line);
                if done {
                    return true;
                }
            }
            false
        })
        .await;
        reached == Ok(true)
    }

    /// The printed line after `prefix`.
    fn line(&self, prefix: &str) -> Option<String> {
        self.printed.iter().find_map(|l| l.trim().strip_prefix(prefix).map(str::to_string))
    }

    fn report(&self) -> serde_json::Value {
        let path =
            self.line("report: ").unwrap_or_else(|| panic!("no report line:\n{}", self.printed.join("\n")));
        serde_json::from_slice(&std::fs::read(&path).expect("report readable")).expect("report is JSON")
    }

    /// The printed commands under "look around:", in order.
    fn commands(&self) -> Vec<String> {
        self.printed
            .iter()
            .skip_while(|l| *l != "look around:")
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(|l| l.trim().to_string())
            .collect()
    }

    /// A client of the sim `up` runs, through the kubeconfig it wrote.
    async fn client(&self) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(self.dir.join("kubeconfig")).expect("kubeconfig");
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.expect("config");
        kube::Client::try_from(config).expect("client")
    }

    /// The processes `up` started (its children), from /proc.
    fn children(&self) -> Vec<u32> {
        let Some(pid) = self.process.id() else { return Vec::new() };
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|child| {
                parent_and_state(*child).is_some_and(|(parent, state)| parent == pid && state != 'Z')
            })
            .collect()
    }

    /// Ctrl-C, as a user stops it; whether it exited within the deadline.
    fn interrupt(&mut self) -> bool {
        self.signal("INT")
    }

    /// Sends `loadtest up` alone (not its children) the signal named; whether it exited within
    /// the deadline.
    fn signal(&mut self, name: &str) -> bool {
        let Some(pid) = self.process.id() else { return true };
        let _ = std::process::Command::new("kill").args([&format!("-{name}"), &pid.to_string()]).status();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if !matches!(self.process.try_wait(), Ok(None)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Up {
    /// A SIGKILL (`kill_on_drop`) alone would leave the coordinator and workers `up` started
    /// running without it; Ctrl-C makes it stop them.
    fn drop(&mut self) {
        if !self.interrupt() {
            eprintln!("loadtest up did not stop within 30s of SIGINT; killing it");
        }
    }
}

/// A process's parent and state letter (`Z` for a zombie), from /proc/PID/stat.
fn parent_and_state(pid: u32) -> Option<(u32, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
    let mut rest = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    Some((rest.next()?.parse().ok()?, state))
}

/// Ctrl-C (`INT`), or `TERM` as `kill`, `timeout` and service managers send it to `up` alone,
/// stops `up` and every process it started.
async fn assert_signal_stops_everything(mut up: Up, started: usize, signal: &str) {
    let children = up.children();
    assert_eq!(children.len(), started, "processes started by loadtest up: {children:?}");
    assert!(up.signal(signal), "loadtest up stops on SIG{signal}");
    let status = up.process.try_wait().expect("exit status").expect("exited");
    assert!(status.success(), "loadtest up exited with {status} on SIG{signal}");
    wait_until("the processes loadtest up started are gone", Duration::from_secs(30), || async {
        let alive = children.iter().any(|p| parent_and_state(*p).is_some_and(|(_, state)| state != 'Z'));
        (!alive).then_some(())
    })
    .await;
}

/// The audit log as far as it is written (the sim may still run, so the last line may be torn).
fn audit_events(path: &Path) -> Vec<AuditEvent> {
    let text = std::fs::read_to_string(path).expect("audit log readable");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut events = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str(line) {
            Ok(event) => events.push(event),
            Err(_) if i + 1 == lines.len() => {}
            Err(e) => panic!("{}:{}: {e}", path.display(), i + 1),
        }
    }
    events
}

/// The worker id of a `fleet-worker/VERSION (ID)` User-Agent.
fn worker_of(agent: &str) -> Option<&str> {
    agent.strip_prefix("fleet-worker/")?.split_once(" (")?.1.strip_suffix(')')
}

/// Per workload namespace, each worker's last write (received time, as the log sorts).
fn last_writes(events: &[AuditEvent]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.is_write()) {
        let (Some(worker), Some(o)) = (worker_of(&e.user_agent), e.object_ref.as_ref()) else { continue };
        if NAMESPACES.contains(&o.namespace.as_str()) {
            let last = out.entry(o.namespace.clone()).or_default().entry(worker.to_string()).or_default();
            if e.request_received_timestamp > *last {
                last.clone_from(&e.request_received_timestamp);
            }
        }
    }
    out
}

/// Every Job left in the cluster ended with the condition its label names; answers how many.
async fn assert_jobs_ended_as_labelled(client: &kube::Client) -> usize {
    let jobs: Api<Job> = Api::all(client.clone());
    let list = jobs.list(&ListParams::default().labels(EXPECT_LABEL)).await.expect("list Jobs");
    for job in &list.items {
        let expect = &job.metadata.labels.as_ref().expect("labels")[EXPECT_LABEL];
        let ended: Vec<&str> = job
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .filter(|c| c.status == "True" && (c.type_ == "Complete" || c.type_ == "Failed"))
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(ended, vec![expect.as_str()], "{:?}/{:?}", job.metadata.namespace, job.metadata.name);
    }
    list.items.len()
}

/// fleetctl beside loadtest, so that `up` prints its path (it is a package of its own, which
/// this test's build does not build).
fn fleetctl_built() {
    batchfleet_sim::testing::workspace_binary("batchfleet-fleetctl", "fleetctl");
}

/// A printed command line, run by the shell after the printed `export KUBECONFIG=…`.
async fn run_printed(commands: &[String], command: &str) -> std::process::Output {
    let export = commands.iter().find(|c| c.starts_with("export KUBECONFIG=")).expect("an export line");
    Command::new("sh").arg("-c").arg(format!("{export}; {command}")).output().await.expect("sh runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadtest_up_hands_the_drained_and_killed_workers_shards_over_and_every_job_ends_as_expected() {
    let dir = tempfile::tempdir().expect("tempdir");
    fleetctl_built();
    let (mut up, mut lines) = Up::start(dir.path(), &["--duration", "20s", "--keep"]);
    // The fleet places 256 shards first; the demo's flaky Job needs its two back-offs (10 s,
    // 20 s); both are slow in a debug build on a loaded machine.
    let kept = up
        .read_until(&mut lines, Duration::from_secs(420), |l| l.starts_with("everything keeps running"))
        .await;
    assert!(kept, "loadtest up printed:\n{}", up.printed.join("\n"));
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let report = up.report();
    assert_eq!(report["passed"], true, "{}", up.printed.join("\n"));
    assert_eq!(report["jobs"]["unfinished"], serde_json::json!([]), "{report:#}");

    // The drain and the kill happened, to two different workers.
    let target = |action: &str| -> String {
        let faults = report["faults"].as_array().expect("faults");
        let fault = faults
            .iter()
            .find(|f| f["action"] == action)
            .unwrap_or_else(|| panic!("no {action}: {report:#}"));
        assert!(!fault["result"].as_str().unwrap_or("failed").starts_with("failed"), "{fault}");
        fault["target"].as_str().expect("target").to_string()
    };
    let (drained, killed) = (target("drain-worker"), target("kill-worker"));
    assert_ne!(drained, killed);

    // The cluster's shard map: every shard has an owner, neither of them.
    let client = up.client().await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let map = maps.get("batchfleet-shard-map").await.expect("the shard map");
    let map: serde_json::Value = serde_json::from_str(&map.data.expect("data")["shards.json"]).expect("JSON");
    let owners: Vec<&str> =
        map["shards"].as_object().expect("shards").values().filter_map(|s| s["owner"].as_str()).collect();
    assert_eq!(owners.len(), 256, "every shard has an owner");
    assert!(
        owners.iter().all(|o| *o != drained && *o != killed),
        "owners: {:?}",
        BTreeSet::from_iter(owners)
    );

    // Every Job left ended as its label says (the TTL'd ones are gone, as they should be).
    let left = assert_jobs_ended_as_labelled(&client).await;
    assert!(left >= 15, "{left} Jobs left");

    // The audit log: in every namespace a lost worker wrote in, another worker wrote after it.
    let writes = last_writes(&audit_events(&dir.path().join("audit.log")));
    let mut taken_over = 0;
    for (ns, by_worker) in &writes {
        for victim in [&drained, &killed] {
            let Some(victim_last) = by_worker.get(victim.as_str()) else { continue };
            let later = by_worker.iter().any(|(w, last)| w != victim && last > victim_last);
            assert!(later, "nobody wrote in {ns} after {victim} did: {by_worker:?}");
            taken_over += 1;
        }
    }
    assert!(taken_over > 0, "the victims wrote in no workload namespace: {writes:?}");

    // The printed commands work as printed.
    let commands = up.commands();
    let get_jobs = commands.iter().find(|c| c.contains(" get cronjobs,jobs -A")).expect("a kubectl get line");
    let out = run_printed(&commands, get_jobs).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{get_jobs}: {}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("EXPECT") && stdout.contains("flaky") && stdout.contains("cronjob.batch/ticker"),
        "{stdout}"
    );
    let workers = commands.iter().find(|c| c.ends_with(" workers")).expect("a fleetctl workers line");
    let out = run_printed(&commands, &format!("{workers} -o json")).await;
    assert!(out.status.success(), "{workers}: {}", String::from_utf8_lossy(&out.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(listed.as_array().expect("list").iter().any(|w| w["name"] == drained.as_str()), "{listed}");

    // The coordinator and the two workers left.
    assert_signal_stops_everything(up, 3, "INT").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadtest_up_standalone_runs_one_worker_reports_and_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut up, mut lines) = Up::start(dir.path(), &["--standalone", "--duration", "10s"]);
    let ended = up.read_until(&mut lines, Duration::from_secs(300), |_| false).await;
    assert!(!ended, "stdout closed");
    let status = tokio::time::timeout(Duration::from_secs(30), up.process.wait())
        .await
        .expect("exits")
        .expect("status");
    assert!(status.success(), "loadtest up exited {status}:\n{}", up.printed.join("\n"));
    let seen = &up.printed;
    assert!(seen.iter().any(|l| l.starts_with("standalone worker: every shard")), "{seen:#?}");
    assert!(!seen.iter().any(|l| l.contains("fleetctl") || l.starts_with("fleet:")), "no fleet: {seen:#?}");
    assert!(
        !seen.iter().any(|l| l.starts_with("everything keeps running")),
        "ends without --keep: {seen:#?}"
    );
    let report = up.report();
    assert_eq!(report["passed"], true, "{report:#}");
    assert_eq!(report["faults"], serde_json::json!([]));

    // One process did the work.
    let events = audit_events(&dir.path().join("audit.log"));
    let writers: BTreeSet<&str> = events
        .iter()
        .filter(|e| {
            e.is_write() && e.object_ref.as_ref().is_some_and(|o| NAMESPACES.contains(&o.namespace.as_str()))
        })
        .filter(|e| e.user_agent.starts_with("fleet-"))
        .map(|e| e.user_agent.as_str())
        .collect();
    assert_eq!(
        writers,
        BTreeSet::from([format!("fleet-worker/{} (standalone)", env!("CARGO_PKG_VERSION")).as_str()])
    );
}

/// `loadtest up --tls`: the fleet runs over TLS with a throwaway CA, and the fleetctl command
/// line it prints works as printed, while plaintext is refused. A SIGTERM to `up` alone stops
/// the coordinator and the two workers left after the drain and the kill too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadtest_up_tls_prints_a_fleetctl_command_line_that_works() {
    let dir = tempfile::tempdir().expect("tempdir");
    fleetctl_built();
    let (mut up, mut lines) = Up::start(dir.path(), &["--tls", "--duration", "6s", "--keep"]);
    let kept = up
        .read_until(&mut lines, Duration::from_secs(420), |l| l.starts_with("everything keeps running"))
        .await;
    assert!(kept, "loadtest up printed:\n{}", up.printed.join("\n"));
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let commands = up.commands();
    let workers = commands.iter().find(|c| c.ends_with(" workers")).expect("a fleetctl workers line");
    assert!(workers.contains("--tls-cert") && workers.contains("--admin https://127.0.0.1:"), "{workers}");
    let out = run_printed(&commands, &format!("{workers} -o json")).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let names: BTreeSet<&str> =
        listed.as_array().expect("list").iter().filter_map(|w| w["name"].as_str()).collect();
    assert!(names.len() >= 2 && names.is_subset(&BTreeSet::from(["w-0", "w-1", "w-2"])), "{names:?}");

    let args: Vec<&str> = workers.split_whitespace().collect();
    let admin = args.iter().skip_while(|a| **a != "--admin").nth(1).expect("--admin URL");
    let plaintext = admin.replace("https://", "http://");
    let out = Command::new(args[0])
        .args(["--insecure", "--admin", &plaintext, "status"])
        .output()
        .await
        .expect("runs");
    assert!(!out.status.success(), "a plaintext fleetctl is refused");

    assert_signal_stops_everything(up, 3, "TERM").await;
}
