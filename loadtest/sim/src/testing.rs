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
