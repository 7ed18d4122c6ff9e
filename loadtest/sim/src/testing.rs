//! Helpers for tests that run against the sim: the sim's own and the controllers'.

use std::future::Future;
use std::time::Duration;

/// Polls `check` until it returns `Some`, failing the test after `deadline`: a wait on a
/// condition, never a sleep-and-hope.
pub async fn wait_until<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let end = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > end {
            panic!("timed out after {deadline:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A port nobody listens on now, and not handed out before by this process: the kernel may give
/// the same port to two binds in a row once the first is dropped, and a test that picks two
/// listen ports before starting either process then had both bind one (`Address already in use`).
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        if HANDED_OUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(port) {
            return port;
        }
    }
}

/// The workspace's root (the sim is `loadtest/sim` in it).
pub fn workspace_root() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// A binary of any package of the workspace, for tests that run it as a process: the one in the
/// running test's target directory (`target/debug`, beside `deps/`). `cargo nextest run -p X`
/// builds only X's binaries, so another package's is built here when it is missing or older than
/// a source file of the workspace: a stale one would test old code. (A fresh one is left alone:
/// building one package alone unifies features differently from a workspace build and would
/// compile its dependencies again.)
pub fn workspace_binary(package: &str, name: &str) -> std::path::PathBuf {
    static CHECKED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let exe = std::env::current_exe().expect("the test's path");
    // target/debug/deps/<test> → target/debug/<name>
    let dir = exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>/deps");
    let path = dir.join(name);
    let mut checked = CHECKED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if checked.iter().any(|c| c == name) {
        return path;
    }
    let built = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
    if built.is_none_or(|built| newest_source(&workspace_root()).is_some_and(|newest| newest > built)) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "--quiet", "-p", package, "--bin", name])
            .status()
            .expect("cargo build runs");
        assert!(status.success(), "building {name}");
    }
    checked.push(name.to_string());
    path
}

/// When a source file of the workspace (Rust, proto, a manifest) last changed.
fn newest_source(dir: &std::path::Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') || name == "target" {
            continue;
        }
        let found = if path.is_dir() {
            newest_source(&path)
        } else if path.extension().is_some_and(|e| e == "rs" || e == "proto" || e == "toml") {
            entry.metadata().and_then(|m| m.modified()).ok()
        } else {
            None
        };
        newest = newest.max(found);
    }
    newest
}
