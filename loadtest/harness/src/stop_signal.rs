//! What stops `loadtest sim`, `up` and `run`: Ctrl-C, or SIGTERM as `kill`, `timeout` and
//! service managers send it to the process alone. Either way the caller drops what it runs, and
//! with it every process it started (each is killed on drop), so none outlives it. A SIGKILL
//! cannot be caught, and `PR_SET_PDEATHSIG` would fire when the spawning thread ends (tokio
//! ends idle blocking threads), so after a SIGKILL the children are left running.

use tokio::signal::unix::{SignalKind, signal};

/// Resolves on SIGINT or SIGTERM; its name.
pub(crate) async fn stop_requested() -> std::io::Result<&'static str> {
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map(|()| "SIGINT"),
        _ = terminate.recv() => Ok("SIGTERM"),
    }
}
