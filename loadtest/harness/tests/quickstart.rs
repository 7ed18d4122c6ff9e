//! `loadtest up`, the README's main command, as a user runs it: the sim cluster, a coordinator and
//! three workers as processes, every shard placed, and every demo Job finished.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadtest_up_runs_the_fleet_and_finishes_every_demo_job() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let mut up = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args(["up", "--listen", &format!("127.0.0.1:{port}"), "--kubeconfig"])
        .arg(dir.path().join("kubeconfig"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("loadtest up starts");
    let mut lines = BufReader::new(up.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    let finished = tokio::time::timeout(Duration::from_secs(240), async {
        while let Some(line) = lines.next_line().await.expect("stdout readable") {
            let done = line.starts_with("every demo Job finished");
            seen.push(line);
            if done {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(finished, Ok(true), "loadtest up printed:\n{}", seen.join("\n"));
    // The three workers and the fleetctl commands to look at them were printed.
    let workers = seen.iter().filter(|l| l.trim_start().starts_with("w-") && l.ends_with(" shards")).count();
    assert_eq!(workers, 3, "{seen:#?}");
    assert!(seen.iter().any(|l| l.contains("fleetctl --admin http://127.0.0.1:")), "{seen:#?}");
}
