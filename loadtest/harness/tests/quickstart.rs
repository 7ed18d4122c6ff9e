//! `loadtest up`, the README's main command, as a user runs it: the sim cluster and the fleet (a
//! coordinator and three workers as processes), or with `--standalone` one worker that owns every
//! shard; every demo Job finished, and the sim's audit log shows which processes wrote them.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use batchfleet_sim::audit::AuditEvent;
use batchfleet_sim::testing::wait_until;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// `loadtest up`, running, and what it printed until it reported every demo Job finished.
struct Up {
    printed: Vec<String>,
    /// Kept running while the test reads its audit log; interrupted when dropped.
    process: tokio::process::Child,
}

impl Up {
    /// The processes `up` started (its children), from /proc.
    fn children(&self) -> Vec<u32> {
        let Some(pid) = self.process.id() else { return Vec::new() };
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|child| parent_and_state(*child).is_some_and(|(parent, _)| parent == pid))
            .collect()
    }

    /// Ctrl-C, as a user stops it; whether it exited within the deadline.
    fn interrupt(&mut self) -> bool {
        let Some(pid) = self.process.id() else { return true };
        let _ = std::process::Command::new("kill").args(["-INT", &pid.to_string()]).status();
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

/// Runs `loadtest up` with `flags` until every demo Job finished (or the deadline passed).
async fn up_until_every_demo_job_finished(dir: &Path, flags: &[&str]) -> Up {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let process = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .arg("up")
        .args(flags)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--kubeconfig"])
        .arg(dir.join("kubeconfig"))
        .arg("--audit-log")
        .arg(dir.join("audit.log"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("loadtest up starts");
    // Interrupted on every way out of this function, the failed assertion below included.
    let mut up = Up { printed: Vec::new(), process };
    let mut lines = BufReader::new(up.process.stdout.take().expect("stdout")).lines();
    // The flaky Job alone needs its two back-offs (10 s, 20 s); the fleet places 256 shards
    // first. Both are slow in a debug build on a loaded machine.
    let printed = &mut up.printed;
    let finished = tokio::time::timeout(Duration::from_secs(420), async {
        while let Some(line) = lines.next_line().await.expect("stdout readable") {
            let done = line.starts_with("every demo Job finished");
            printed.push(line);
            if done {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(finished, Ok(true), "loadtest up printed:\n{}", up.printed.join("\n"));
    // Whatever it prints later ("stopping") must find its stdout open.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    up
}

/// Ctrl-C stops `up` and every process it started.
async fn assert_interrupt_stops_everything(mut up: Up, started: usize) {
    let children = up.children();
    assert_eq!(children.len(), started, "processes started by loadtest up: {children:?}");
    assert!(up.interrupt(), "loadtest up stops on Ctrl-C");
    let status = up.process.try_wait().expect("exit status").expect("exited");
    assert!(status.success(), "loadtest up exited with {status} on Ctrl-C");
    wait_until("the processes loadtest up started are gone", Duration::from_secs(30), || async {
        let alive = children.iter().any(|p| parent_and_state(*p).is_some_and(|(_, state)| state != 'Z'));
        (!alive).then_some(())
    })
    .await;
}

/// The audit log as far as it is written (the sim still runs, so the last line may be torn).
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

/// The User-Agents of the fleet's processes (fleet-worker, fleet-coordinator) that wrote in the
/// demo namespace, and of those that sent anything at all.
fn fleet_agents(events: &[AuditEvent]) -> (BTreeSet<String>, BTreeSet<String>) {
    let fleet = |e: &&AuditEvent| e.user_agent.starts_with("fleet-");
    let demo_writers = events
        .iter()
        .filter(fleet)
        .filter(|e| e.is_write() && e.object_ref.as_ref().is_some_and(|o| o.namespace == "demo"))
        .map(|e| e.user_agent.clone())
        .collect();
    let all = events.iter().filter(fleet).map(|e| e.user_agent.clone()).collect();
    (demo_writers, all)
}

/// The User-Agent `fleet-worker --worker-id ID` sends (the workspace shares one version).
fn worker_agent(id: &str) -> String {
    format!("fleet-worker/{} ({id})", env!("CARGO_PKG_VERSION"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadtest_up_runs_the_fleet_and_finishes_every_demo_job() {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = up_until_every_demo_job_finished(dir.path(), &[]).await;
    let seen = &up.printed;
    // The three workers and the fleetctl commands to look at them were printed.
    let workers = seen.iter().filter(|l| l.trim_start().starts_with("w-") && l.ends_with(" shards")).count();
    assert_eq!(workers, 3, "{seen:#?}");
    assert!(seen.iter().any(|l| l.contains("fleetctl --insecure --admin http://127.0.0.1:")), "{seen:#?}");
    assert!(seen.iter().any(|l| l.contains("kubectl -n demo get")), "{seen:#?}");

    let (demo_writers, all) = fleet_agents(&audit_events(&dir.path().join("audit.log")));
    assert!(!demo_writers.is_empty(), "the fleet's workers wrote the demo Jobs' pods and status");
    let fleet_workers: BTreeSet<String> = (0..3).map(|i| worker_agent(&format!("w-{i}"))).collect();
    assert!(demo_writers.is_subset(&fleet_workers), "{demo_writers:?}");
    assert!(fleet_workers.is_subset(&all), "every worker renews its lease: {all:?}");
    assert!(all.iter().any(|a| a.starts_with("fleet-coordinator/")), "{all:?}");
    assert_interrupt_stops_everything(up, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadtest_up_standalone_runs_one_worker_and_finishes_every_demo_job() {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = up_until_every_demo_job_finished(dir.path(), &["--standalone"]).await;
    let seen = &up.printed;
    assert!(seen.iter().any(|l| l.starts_with("standalone worker: every shard")), "{seen:#?}");
    assert!(!seen.iter().any(|l| l.contains("fleetctl") || l.starts_with("fleet:")), "no fleet: {seen:#?}");
    assert!(seen.iter().any(|l| l.contains("kubectl -n demo get")), "{seen:#?}");

    // One process did the work, and no coordinator ran.
    let (demo_writers, all) = fleet_agents(&audit_events(&dir.path().join("audit.log")));
    let standalone = BTreeSet::from([worker_agent("standalone")]);
    assert_eq!(demo_writers, standalone);
    assert_eq!(all, standalone);
    assert_interrupt_stops_everything(up, 1).await;
}

/// `loadtest up --tls`: the fleet runs over TLS with a throwaway CA, and the fleetctl command
/// line it prints works as printed, while plaintext is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadtest_up_tls_prints_a_fleetctl_command_line_that_works() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let process = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args(["up", "--tls", "--listen", &format!("127.0.0.1:{port}"), "--kubeconfig"])
        .arg(dir.path().join("kubeconfig"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("loadtest up starts");
    let mut up = Up { printed: Vec::new(), process };
    let mut lines = BufReader::new(up.process.stdout.take().expect("stdout")).lines();
    let printed = &mut up.printed;
    let command = tokio::time::timeout(Duration::from_secs(300), async {
        while let Some(line) = lines.next_line().await.expect("stdout readable") {
            printed.push(line.clone());
            if let Some(command) = line.trim().strip_prefix("fleetctl ") {
                return Some(command.split(" workers |").next().unwrap_or_default().to_string());
            }
        }
        None
    })
    .await;
    let command =
        command.ok().flatten().unwrap_or_else(|| panic!("no fleetctl line:\n{}", up.printed.join("\n")));
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    assert!(command.contains("--tls-cert") && command.contains("--admin https://127.0.0.1:"), "{command}");

    let fleetctl = batchfleet_sim::testing::workspace_binary("batchfleet-fleetctl", "fleetctl");
    let args: Vec<&str> = command.split_whitespace().collect();
    let out =
        Command::new(&fleetctl).args(&args).args(["workers", "-o", "json"]).output().await.expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let workers: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let names: BTreeSet<&str> =
        workers.as_array().expect("list").iter().filter_map(|w| w["name"].as_str()).collect();
    assert_eq!(names, BTreeSet::from(["w-0", "w-1", "w-2"]));

    let admin = args.iter().skip_while(|a| **a != "--admin").nth(1).expect("--admin URL");
    let plaintext = admin.replace("https://", "http://");
    let out = Command::new(&fleetctl)
        .args(["--insecure", "--admin", &plaintext, "status"])
        .output()
        .await
        .expect("runs");
    assert!(!out.status.success(), "a plaintext fleetctl is refused");
}
