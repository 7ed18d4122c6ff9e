//! The barrier of an ACTIVATE that names no last write (the old owner died, or wrote nothing):
//! the resourceVersion a consistent read is served at, which every write committed before it is
//! at or below.
//!
//! A worker that takes over a dead worker's shards gets one ACTIVATE per shard at once. Each
//! needs a read sent after the ACTIVATE arrived (the old owner had stopped before the leader sent
//! it); one read serves every ACTIVATE that arrived before that read was sent. Without that, a
//! worker taking over 70 shards read 70 times on a client limited to 20 requests a second, and
//! the last shard waited seconds for reads the first had already made.

use std::time::Instant;

/// One consistent read at a time, shared by the ACTIVATEs it can serve.
pub struct BarrierRead {
    client: kube::Client,
    /// When the last read was sent, and the resourceVersion it was served at.
    last: tokio::sync::Mutex<Option<(Instant, u64)>>,
}

impl BarrierRead {
    pub fn new(client: kube::Client) -> Self {
        Self { client, last: tokio::sync::Mutex::new(None) }
    }

    /// A resourceVersion read by a consistent LIST sent at or after `arrived`; `None` when the
    /// read failed (the caller leaves the ACTIVATE unanswered, and the leader sends it again).
    pub async fn served_after(&self, arrived: Instant) -> Option<u64> {
        let mut last = self.last.lock().await;
        if let Some((sent, rv)) = *last
            && sent >= arrived
        {
            return Some(rv);
        }
        let sent = Instant::now();
        let rv = current_resource_version(&self.client).await?;
        *last = Some((sent, rv));
        Some(rv)
    }
}

/// The resourceVersion a consistent LIST is served at: every write before it is in it.
async fn current_resource_version(client: &kube::Client) -> Option<u64> {
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> = kube::Api::all(client.clone());
    match jobs.list_metadata(&kube::api::ListParams::default().limit(1)).await {
        Ok(list) => list.metadata.resource_version.and_then(|rv| rv.parse().ok()),
        Err(e) => {
            tracing::warn!(error = %e, "reading the current resourceVersion for ACTIVATE");
            None
        }
    }
}
