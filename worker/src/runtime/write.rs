//! The fenced write path: every API write of a reconcile goes through a [`Fence`], which sends
//! it only while the shard is still held at the epoch the reconcile began under (a stale write
//! is dropped and counted, never sent) and records the highest resourceVersion the shard wrote,
//! the barrier its next owner waits for.

use std::future::Future;

use super::shard::{Epoch, Fenced, ShardTable};
use crate::api_errors;
use crate::client::lean_writes::Written;

/// A failed write, classified once for every caller.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Fenced(#[from] Fenced),
    #[error("{0}")]
    Api(#[from] kube::Error),
}

impl WriteError {
    /// The class upstream branches on; a fenced write is none of the named ones.
    pub fn kind(&self) -> api_errors::ApiErrorKind {
        match self {
            Self::Api(e) => api_errors::kind(e),
            Self::Fenced(_) => api_errors::ApiErrorKind::Other,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Api(e) if api_errors::is_not_found(e))
    }

    pub fn is_namespace_terminating(&self) -> bool {
        matches!(self, Self::Api(e) if api_errors::is_namespace_terminating(e))
    }

    pub fn is_already_exists(&self) -> bool {
        matches!(self, Self::Api(e) if api_errors::is_already_exists(e))
    }

    pub fn message(&self) -> String {
        match self {
            Self::Api(e) => api_errors::message(e),
            Self::Fenced(f) => f.to_string(),
        }
    }
}

/// The right to write for one namespace under one epoch.
#[derive(Clone)]
pub struct Fence {
    shards: ShardTable,
    namespace: String,
    epoch: Epoch,
}

impl Fence {
    pub fn new(shards: ShardTable, namespace: &str, epoch: Epoch) -> Self {
        Self { shards, namespace: namespace.to_string(), epoch }
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Sends `write` (a request future, not yet polled) if the epoch is current, and records the
    /// resourceVersion `rv` reads from the answer.
    pub async fn send<T>(
        &self,
        write: impl Future<Output = Result<T, kube::Error>>,
        rv: impl FnOnce(&T) -> Option<&str>,
    ) -> Result<T, WriteError> {
        self.shards.check_write(&self.namespace, self.epoch)?;
        let answer = write.await?;
        self.shards.record_written(&self.namespace, rv(&answer));
        Ok(answer)
    }

    /// [`Fence::send`] for a write answered with the object written.
    pub async fn send_object<T: kube::Resource>(
        &self,
        write: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, WriteError> {
        self.send(write, |o| o.meta().resource_version.as_deref()).await
    }

    /// [`Fence::send`] for a write answered with what [`Written`] reads of it (a delete's
    /// `Status` carries no resourceVersion).
    pub async fn send_written(
        &self,
        write: impl Future<Output = Result<Written, kube::Error>>,
    ) -> Result<Written, WriteError> {
        self.send(write, Written::resource_version).await
    }

    /// [`Fence::send`] for a delete: the object as the delete left it (graceful deletion or
    /// finalizers) carries the resourceVersion written; a `Status` (gone at once) carries none.
    pub async fn send_delete<T: kube::Resource>(
        &self,
        write: impl Future<Output = Result<either::Either<T, kube::core::Status>, kube::Error>>,
    ) -> Result<either::Either<T, kube::core::Status>, WriteError> {
        self.send(write, |a| a.as_ref().left().and_then(|o| o.meta().resource_version.as_deref())).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::shards::ShardSpace;

    #[tokio::test]
    async fn a_write_with_a_stale_epoch_is_dropped_counted_and_never_sent() {
        let shards = ShardTable::new(ShardSpace::new(4).unwrap());
        let shard = shards.shard_of("alpha");
        shards.prepare(shard, 1).unwrap();
        shards.activate(shard, 1).unwrap();
        let fence = Fence::new(shards.clone(), "alpha", 1);
        let sent = AtomicBool::new(false);
        let write = || async {
            sent.store(true, Ordering::SeqCst);
            Ok::<_, kube::Error>(7u32)
        };
        assert_eq!(fence.send(write(), |_| Some("15")).await.unwrap(), 7);
        assert!(sent.swap(false, Ordering::SeqCst));
        assert_eq!(shards.status(shard).unwrap().written_rv, 15);
        shards.revoke(shard).unwrap();
        shards.drop_shard(shard);
        shards.prepare(shard, 2).unwrap();
        let refused = fence.send(write(), |_| None).await;
        assert!(matches!(refused, Err(WriteError::Fenced(_))));
        assert!(!sent.load(Ordering::SeqCst), "the stale write never left");
        assert_eq!(shards.stale_writes(), 1);
    }
}
