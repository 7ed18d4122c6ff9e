//! The controller runtime the reconcilers share: the shard table, work queues with upstream's
//! metrics and expectations.

pub mod expectations;
pub mod list_watch;
pub mod protocol;
pub mod reconcile;
pub mod shard;
pub mod watch;
pub mod workqueue;
pub mod write;
