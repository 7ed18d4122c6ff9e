//! One watch of Jobs for every controller of a worker. The Job, CronJob and TTL-after-finished
//! controllers all react to Jobs; a shared informer decodes each Job event once and holds one
//! watch on the API server instead of three.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use kube::runtime::watcher;

use crate::job::cache::ObjectKey;

/// What a controller does with Job events.
pub trait JobHandler: Send + Sync {
    /// A Job was added or changed; `old` is the version this informer saw before, if any.
    fn job_applied(&self, old: Option<&Arc<Job>>, job: &Arc<Job>);
    /// A Job was deleted (seen in the watch, or missing from a relist).
    fn job_deleted(&self, job: &Arc<Job>);
    /// The initial list is complete: the controller may start syncing.
    fn jobs_synced(&self);
}

/// Watches every Job and feeds `handlers`, until the task is dropped.
pub async fn run_job_informer(client: kube::Client, handlers: Vec<Arc<dyn JobHandler>>) {
    let api: Api<Job> = Api::all(client);
    let mut known: HashMap<ObjectKey, Arc<Job>> = HashMap::new();
    let mut seen: Option<std::collections::HashSet<ObjectKey>> = None;
    let mut stream = watcher(api, watcher::Config::default()).boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(job) | watcher::Event::InitApply(job)) => {
                let key = ObjectKey::of(&job.metadata);
                if let Some(s) = seen.as_mut() {
                    s.insert(key.clone());
                }
                let job = Arc::new(job);
                let old = known.insert(key, job.clone());
                for h in &handlers {
                    h.job_applied(old.as_ref(), &job);
                }
            }
            Ok(watcher::Event::Delete(job)) => {
                let key = ObjectKey::of(&job.metadata);
                let job = known.remove(&key).unwrap_or_else(|| Arc::new(job));
                for h in &handlers {
                    h.job_deleted(&job);
                }
            }
            Ok(watcher::Event::Init) => seen = Some(Default::default()),
            Ok(watcher::Event::InitDone) => {
                // Jobs deleted while the watch was down never sent a DELETED event.
                if let Some(s) = seen.take() {
                    let gone: Vec<ObjectKey> = known.keys().filter(|k| !s.contains(*k)).cloned().collect();
                    for key in gone {
                        if let Some(job) = known.remove(&key) {
                            for h in &handlers {
                                h.job_deleted(&job);
                            }
                        }
                    }
                }
                for h in &handlers {
                    h.jobs_synced();
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "Job watch failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
