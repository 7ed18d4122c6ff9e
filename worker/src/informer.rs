//! Watches that fill caches and feed controllers, with relist handling in one place: objects
//! missing from a relist are reported deleted. The Job, CronJob and TTL-after-finished
//! controllers share one Job informer, so each Job event is decoded once and the API server
//! holds one watch instead of three.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

use crate::job::cache::ObjectKey;

/// What a controller does with the events of one kind.
pub trait Handler<K>: Send + Sync {
    /// An object was added or changed; `old` is the version this informer saw before, if any.
    fn applied(&self, old: Option<&Arc<K>>, obj: &Arc<K>);
    /// An object was deleted (seen in the watch, or missing from a relist).
    fn deleted(&self, obj: &Arc<K>);
    /// The initial list is complete: the controller may start syncing.
    fn synced(&self);
}

/// A handler of Job events.
pub type JobHandler = dyn Handler<Job>;

/// Watches every object of `api` and feeds `handlers`, until the task is dropped.
pub async fn run<K>(api: Api<K>, handlers: Vec<Arc<dyn Handler<K>>>)
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let kind = K::kind(&()).to_string();
    let mut known: HashMap<ObjectKey, Arc<K>> = HashMap::new();
    let mut seen: Option<std::collections::HashSet<ObjectKey>> = None;
    let mut stream = watcher(api, watcher::Config::default()).boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                let key = ObjectKey::of(obj.meta());
                if let Some(s) = seen.as_mut() {
                    s.insert(key.clone());
                }
                let obj = Arc::new(obj);
                let old = known.insert(key, obj.clone());
                for h in &handlers {
                    h.applied(old.as_ref(), &obj);
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                let key = ObjectKey::of(obj.meta());
                let obj = known.remove(&key).unwrap_or_else(|| Arc::new(obj));
                for h in &handlers {
                    h.deleted(&obj);
                }
            }
            Ok(watcher::Event::Init) => seen = Some(Default::default()),
            Ok(watcher::Event::InitDone) => {
                // Objects deleted while the watch was down never sent a DELETED event.
                if let Some(s) = seen.take() {
                    let gone: Vec<ObjectKey> = known.keys().filter(|k| !s.contains(*k)).cloned().collect();
                    for key in gone {
                        if let Some(obj) = known.remove(&key) {
                            for h in &handlers {
                                h.deleted(&obj);
                            }
                        }
                    }
                }
                for h in &handlers {
                    h.synced();
                }
            }
            Err(e) => {
                tracing::warn!(kind = %kind, error = %e, "watch failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
