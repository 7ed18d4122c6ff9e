//! What a cached pod and a cached Job cost in a worker's memory, before and after the informer
//! layer (one store per kind, pods trimmed to what the Job controller reads). Deterministic and
//! seconds long, so it runs on a shared machine where `loadtest run million`'s peak RSS cannot be
//! measured; the RSS figure itself is measured on a quiet machine.
//!
//! The objects are the sim's: a Job of the `million` scenario's shape (10 completions, 10 at a
//! time, the sim's `run` annotation, a TTL) is run to completion by a real worker against the
//! sim, and its pods and the Job, as a LIST returns them (managedFields and all), are copied N
//! times under other names and uids. A counting global allocator then measures the live bytes
//! after decoding the copies into
//! - "before": the maps the worker kept until this change, rebuilt here as they were (the watch
//!   loop's `known` map, the Job controller's Jobs by key and uid and pods by controlling Job, the
//!   CronJob controller's Jobs by namespace, the TTL controller's Jobs), objects trimmed of
//!   managedFields only;
//! - "after": the worker's stores ([`batchfleet_worker::informer::Informers`]).
//!
//! Run: `cargo nextest run -p batchfleet-worker --test store_memory --run-ignored only --no-capture`

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use batchfleet_worker::informer::{Informers, ObjectKey, controlling_job_uid};
use batchfleet_worker::runtime::shard::ShardTable;
use batchfleet_worker::shards::ShardSpace;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// Live heap bytes of the whole test process.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: every call is forwarded to `System` unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const PODS: usize = 20_000;
const JOBS: usize = 2_000;
const NAMESPACES: usize = 1_000;
const PODS_PER_JOB: usize = 10;

/// A finished `million`-shaped Job and its pods, as the sim lists them.
async fn sim_objects() -> (Value, Vec<Value>) {
    let env = common::start().await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "bulk-0", "labels": {"loadtest.batchfleet.io/run": "million-1764324000"}},
        "spec": {
            "completions": PODS_PER_JOB, "parallelism": PODS_PER_JOB, "completionMode": "NonIndexed",
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"annotations": {"sim.batchfleet.io/run": "1000ms"},
                             "labels": {"loadtest.batchfleet.io/run": "million-1764324000"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
            }
        }
    }))
    .expect("a job");
    jobs.create(&PostParams::default(), &job).await.expect("job created");
    common::wait_condition(&jobs, "bulk-0", "Complete", Duration::from_secs(60)).await;
    let list = |path: &'static str| {
        let client = env.client.clone();
        async move {
            let request = http::Request::get(path).body(Vec::new()).expect("a request");
            client.request::<Value>(request).await.expect("a list")
        }
    };
    let job_list = list("/apis/batch/v1/namespaces/default/jobs").await;
    let pod_list = list("/api/v1/namespaces/default/pods").await;
    let job = job_list["items"][0].clone();
    let pods = pod_list["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(pods.len(), PODS_PER_JOB, "the Job's pods, finished and kept");
    (job, pods)
}

fn uid(kind: char, i: usize) -> String {
    format!("{kind}{i:07x}-0000-4000-8000-{i:012x}")
}

/// `PODS` pods of `JOBS` Jobs over `NAMESPACES` namespaces, each as the wire's bytes.
fn copies(job: &Value, pods: &[Value]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut job_bytes = Vec::new();
    let mut pod_bytes = Vec::new();
    for j in 0..JOBS {
        let namespace = format!("million-{}", j % NAMESPACES);
        let mut job = job.clone();
        job["metadata"]["name"] = json!(format!("bulk-{j}"));
        job["metadata"]["namespace"] = json!(namespace);
        job["metadata"]["uid"] = json!(uid('j', j));
        job_bytes.push(serde_json::to_vec(&job).expect("json"));
        for (k, template) in pods.iter().enumerate().take(PODS / JOBS) {
            let mut pod = template.clone();
            let suffix: String = uid('p', j * PODS_PER_JOB + k).chars().rev().take(5).collect();
            pod["metadata"]["name"] = json!(format!("bulk-{j}-{suffix}"));
            pod["metadata"]["namespace"] = json!(namespace);
            pod["metadata"]["uid"] = json!(uid('p', j * PODS_PER_JOB + k));
            pod["metadata"]["ownerReferences"][0]["uid"] = json!(uid('j', j));
            pod["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = json!(uid('j', j));
            pod["metadata"]["labels"]["controller-uid"] = json!(uid('j', j));
            pod_bytes.push(serde_json::to_vec(&pod).expect("json"));
        }
    }
    (job_bytes, pod_bytes)
}

fn without_managed_fields<K: kube::Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj
}

/// The live bytes `fill` leaves behind, per object; what it returns is kept alive until counted.
fn bytes_per_object<T>(objects: usize, fill: impl FnOnce() -> T) -> f64 {
    let before = LIVE.load(Ordering::Relaxed);
    let kept = fill();
    let after = LIVE.load(Ordering::Relaxed);
    drop(kept);
    (after - before) as f64 / objects as f64
}

/// The maps the worker kept before this change, for pods: the pod watch's `known`, and the Job
/// controller's pods by controlling Job uid and owner by key.
#[allow(clippy::type_complexity)]
fn pods_before(pods: &[Vec<u8>]) -> impl Sized {
    let mut known: HashMap<ObjectKey, Arc<Pod>> = HashMap::new();
    let mut by_owner: HashMap<String, BTreeMap<ObjectKey, Arc<Pod>>> = HashMap::new();
    let mut owner_of: HashMap<ObjectKey, String> = HashMap::new();
    for bytes in pods {
        let pod = Arc::new(without_managed_fields(serde_json::from_slice::<Pod>(bytes).expect("a pod")));
        let key = ObjectKey::of(&pod.metadata);
        let owner = controlling_job_uid(&pod).unwrap_or("").to_string();
        known.insert(key.clone(), pod.clone());
        owner_of.insert(key.clone(), owner.clone());
        by_owner.entry(owner).or_default().insert(key, pod);
    }
    (known, by_owner, owner_of)
}

/// The same for Jobs: the Job watch's `known`, the Job controller's by key and uid, the CronJob
/// controller's by namespace and name, the TTL controller's by key.
#[allow(clippy::type_complexity)]
fn jobs_before(jobs: &[Vec<u8>]) -> impl Sized {
    let mut known: HashMap<ObjectKey, Arc<Job>> = HashMap::new();
    let mut by_key: HashMap<ObjectKey, Arc<Job>> = HashMap::new();
    let mut key_by_uid: HashMap<String, ObjectKey> = HashMap::new();
    let mut by_namespace: HashMap<String, BTreeMap<String, Arc<Job>>> = HashMap::new();
    let mut ttl: HashMap<ObjectKey, Arc<Job>> = HashMap::new();
    for bytes in jobs {
        let job = Arc::new(without_managed_fields(serde_json::from_slice::<Job>(bytes).expect("a job")));
        let key = ObjectKey::of(&job.metadata);
        known.insert(key.clone(), job.clone());
        by_key.insert(key.clone(), job.clone());
        key_by_uid.insert(job.metadata.uid.clone().unwrap_or_default(), key.clone());
        by_namespace.entry(key.namespace.clone()).or_default().insert(key.name.clone(), job.clone());
        ttl.insert(key, job);
    }
    (known, by_key, key_by_uid, by_namespace, ttl)
}

#[test]
#[ignore = "a measurement: run it by name, see the module doc"]
fn bytes_per_cached_pod_and_job_before_and_after_the_informer_layer() {
    let (job, pods) = {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        let objects = runtime.block_on(sim_objects());
        // The sim and the worker stop here, so nothing else allocates while counting.
        runtime.shutdown_timeout(Duration::from_secs(5));
        objects
    };
    let (job_bytes, pod_bytes) = copies(&job, &pods);
    let wire = |b: &[Vec<u8>]| b.iter().map(Vec::len).sum::<usize>() as f64 / b.len() as f64;

    let pods_then = bytes_per_object(PODS, || pods_before(&pod_bytes));
    let jobs_then = bytes_per_object(JOBS, || jobs_before(&job_bytes));
    let table = ShardTable::all_active(ShardSpace::new(64).expect("64 shards"));
    let pods_now = bytes_per_object(PODS, || {
        let informers = Informers::new(table.clone());
        for bytes in &pod_bytes {
            informers.pods.observe(serde_json::from_slice::<Pod>(bytes).expect("a pod"), |_| true);
        }
        informers
    });
    let jobs_now = bytes_per_object(JOBS, || {
        let informers = Informers::new(table.clone());
        for bytes in &job_bytes {
            informers.jobs.observe(serde_json::from_slice::<Job>(bytes).expect("a job"), |_| true);
        }
        informers
    });
    {
        use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodSpec, PodStatus};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        println!(
            "inline sizes: Pod {} = ObjectMeta {} + PodSpec {} + PodStatus {}; ContainerStatus {}, PodCondition {}; Job {}",
            size_of::<Pod>(),
            size_of::<ObjectMeta>(),
            size_of::<PodSpec>(),
            size_of::<PodStatus>(),
            size_of::<ContainerStatus>(),
            size_of::<PodCondition>(),
            size_of::<Job>()
        );
    }
    println!("| object | JSON on the wire | before (bytes) | after (bytes) | after/before |");
    println!("|---|---|---|---|---|");
    println!(
        "| pod | {:.0} | {pods_then:.0} | {pods_now:.0} | {:.2} |",
        wire(&pod_bytes),
        pods_now / pods_then
    );
    println!(
        "| Job | {:.0} | {jobs_then:.0} | {jobs_now:.0} | {:.2} |",
        wire(&job_bytes),
        jobs_now / jobs_then
    );
    assert!(pods_now < pods_then / 2.0, "a cached pod costs at most half what it did");
    assert!(jobs_now < jobs_then, "a cached Job costs less than it did");
}
