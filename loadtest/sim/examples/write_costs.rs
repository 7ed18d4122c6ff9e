//! What one write costs the sim's apiserver layer, step by step, in one thread without HTTP: a
//! pod create (as `loadtest bench-sim` sends it) and a merge patch of one label, each with and
//! without a field manager (managedFields tracking), and the steps they are made of. Prints
//! thread CPU time per operation, which other processes on the machine disturb less than wall
//! time. `cargo run --release -p batchfleet-sim --example write_costs`
//!
//! It runs on mimalloc, as the sim process (`loadtest sim`) does: under glibc's allocator a
//! write's costs include page faults from heap trimming that the sim never pays, and they
//! hid where its time goes (figures before 2026-11-28 05:30 UTC were taken with glibc's).

use std::sync::Arc;
use std::time::Instant;

use batchfleet_sim::apiserver::{ApiServer, Subresource, WriteOptions, decode};
use batchfleet_sim::fields::{self, FieldValidation};
use batchfleet_sim::patch::{self, PatchType, SchemaKind};
use batchfleet_sim::store::{HistoryConfig, Store};
use serde_json::{Value, json};

/// The allocator of the sim process (`loadtest/harness/src/main.rs`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const OPERATIONS: usize = 20_000;

fn pod_body(i: usize) -> Vec<u8> {
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:07}"), "labels": {"app": "bench", "batch.kubernetes.io/job-name": format!("job-{}", i / 100)}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}]}
    }))
    .expect("static pod");
    serde_json::to_vec(&pod).expect("encodes")
}

/// This thread's CPU time in seconds: the scheduler's count in nanoseconds
/// (`/proc/thread-self/schedstat`), else utime + stime in clock ticks of 10 ms, too coarse to
/// tell changes of half a microsecond per operation apart.
fn thread_cpu_seconds() -> f64 {
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    if let Some(ns) = schedstat.split(' ').next().and_then(|n| n.parse::<f64>().ok()) {
        return ns / 1e9;
    }
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split(' ').collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(12) + ticks(13)) / 100.0
}

fn time(name: &str, mut op: impl FnMut(usize)) {
    let (wall, cpu) = (Instant::now(), thread_cpu_seconds());
    for i in 0..OPERATIONS {
        op(i);
    }
    let per_op = |seconds: f64| seconds * 1e6 / OPERATIONS as f64;
    println!(
        "| {name} | {:.2} | {:.2} |",
        per_op(thread_cpu_seconds() - cpu),
        per_op(wall.elapsed().as_secs_f64())
    );
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let _entered = runtime.enter();
    let (api, _gc) = ApiServer::new(Arc::new(Store::new(HistoryConfig::default())));
    let namespaces = api.builtin("", "v1", "namespaces");
    api.create(&namespaces, "", json!({"metadata": {"name": "bench"}}), &WriteOptions::default())
        .expect("namespace");
    let pods = api.builtin("", "v1", "pods");
    let bodies: Vec<Vec<u8>> = (0..OPERATIONS).map(pod_body).collect();
    let parsed: Vec<(Value, Vec<fields::KeyEvent>)> =
        bodies.iter().map(|b| fields::json_keys::parse(b).expect("parses")).collect();
    let checked: Vec<Value> = parsed
        .iter()
        .map(|(v, events)| {
            let mut v = v.clone();
            decode::check_body(&pods.rt, &mut v, Some(events), FieldValidation::Warn).expect("valid");
            v
        })
        .collect();
    let tracked = WriteOptions { manager: Some("bench".into()), ..WriteOptions::default() };
    let untracked = WriteOptions::default();
    let label_patch = |i: usize| format!(r#"{{"metadata":{{"labels":{{"bench/updated":"{i}"}}}}}}"#);

    println!("| operation ({OPERATIONS} each) | CPU µs per op | wall µs per op |\n|---|---|---|");
    time("create body: parse with key events", |i| {
        std::hint::black_box(fields::json_keys::parse(&bodies[i]).ok());
    });
    time("create body: unknown fields and omitempty (check_body)", |i| {
        let (mut v, events) = parsed[i].clone();
        std::hint::black_box(decode::check_body(&pods.rt, &mut v, Some(&events), FieldValidation::Warn).ok());
    });
    time("create: defaults and validation (admit_create)", |i| {
        let mut v = checked[i].clone();
        std::hint::black_box(batchfleet_sim::admission::admit_create("v1", "Pod", &mut v).ok());
    });
    time("create, with managedFields", |i| {
        std::hint::black_box(api.create(&pods, "bench", checked[i].clone(), &tracked).ok());
    });
    time("create, without managedFields", |i| {
        let mut v = checked[i].clone();
        v["metadata"]["name"] = json!(format!("untracked-{i}"));
        std::hint::black_box(api.create(&pods, "bench", v, &untracked).ok());
    });
    time("merge patch, with managedFields", |i| {
        let name = format!("pod-{i:07}");
        let body = label_patch(i);
        std::hint::black_box(
            api.patch(&pods, "bench", &name, PatchType::Merge, body.as_bytes(), Subresource::Main, &tracked)
                .ok(),
        );
    });
    time("merge patch, without managedFields", |i| {
        let name = format!("untracked-{i}");
        let body = label_patch(i);
        std::hint::black_box(
            api.patch(
                &pods,
                "bench",
                &name,
                PatchType::Merge,
                body.as_bytes(),
                Subresource::Main,
                &untracked,
            )
            .ok(),
        );
    });
    let live: Vec<Value> = (0..OPERATIONS)
        .filter_map(|i| api.get(&pods, "bench", &format!("pod-{i:07}")).ok())
        .map(|o| o.value())
        .collect();
    time("patch: the live pod parsed", |i| {
        std::hint::black_box(api.get(&pods, "bench", &format!("pod-{i:07}")).ok().map(|o| o.value()));
    });
    time("patch: the live pod parsed by serde_json's own visitor", |i| {
        let live = api.get(&pods, "bench", &format!("pod-{i:07}")).ok();
        std::hint::black_box(live.map(|o| serde_json::from_slice::<Value>(&o.bytes).ok()));
    });
    time("patch: the patched pod checked (check_patched)", |i| {
        let mut v = live[i].clone();
        std::hint::black_box(
            decode::check_patched(
                &pods.rt,
                &mut v,
                Vec::new(),
                |_| String::new(),
                FieldValidation::Warn,
                true,
            )
            .ok(),
        );
    });
    let label_patch = json!({"metadata": {"labels": {"bench/updated": "true"}}});
    time("patch: the patch checked instead (patch_leaves_nothing_to_drop)", |_| {
        std::hint::black_box(decode::patch_leaves_nothing_to_drop(&pods.rt, &label_patch));
    });
    time("patch: the typed round trip alone", |i| {
        std::hint::black_box(
            fields::typed::round_trip_for("v1", "Pod").map(|round_trip| round_trip(&live[i])),
        );
    });
    let schema = SchemaKind::for_kind("v1", "Pod");
    time("patch: managedFields of a label added (track_update)", |i| {
        let mut v = live[i].clone();
        v["metadata"]["labels"]["added"] = json!("x");
        let who = patch::Identity { manager: "bench", api_version: "v1", subresource: "", now: "t" };
        patch::track_update(Some(&live[i]), &mut v, schema.as_ref(), patch::Part::Main, &who);
        std::hint::black_box(v);
    });
    time("a pod cloned (counted in the two steps above)", |i| {
        std::hint::black_box(live[i].clone());
    });
}
