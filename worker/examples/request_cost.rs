//! CPU per write request, one at a time, as the worker's Event sink sends them: the worker's
//! client (`lean_writes::create` on the worker's layers, HTTP/1.1), the same through kube's
//! `Client` (its queue, as the worker wrote before cut 14), and a bare hyper client sending the
//! same bytes, all to a canned server on another thread that answers every request with a pod.
//! The figure is the client thread's CPU (it runs the connections' tasks too), so the difference
//! is what the worker's request path adds; the rest is what any client pays per round trip (the
//! socket writes, the wake-ups). docs/benchmarks.md.
//!
//!     cargo run --release -p batchfleet-worker --example request_cost -- 20000

use std::time::Duration;

use batchfleet_worker::client::{
    self, ApiProtocol, ApiWrites, ClientLimits, LeaseDeadline, TokenOrder, lean_writes,
};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;

/// The worker's allocator, as `fleet-worker` runs on it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// The server's answer to every request: a pod as the API server returns one.
fn answer() -> bytes::Bytes {
    let pod = serde_json::json!({"kind":"Pod","apiVersion":"v1","metadata":{"name":"p-abcde","namespace":"ns","uid":"0b1c","resourceVersion":"123456",
      "labels":{"a":"b","batch.kubernetes.io/job-name":"j"},"finalizers":["batch.kubernetes.io/job-tracking"],
      "managedFields":[{"manager":"job-controller","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:a":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{}}}}}}]},
      "spec":{"containers":[{"name":"c","image":"busybox","command":["sleep","1"],"resources":{}}],"restartPolicy":"Never"},
      "status":{"phase":"Pending","qosClass":"BestEffort"}});
    serde_json::to_vec(&pod).unwrap().into()
}

/// Answers every request on every connection with [`answer`], over HTTP/1.1.
async fn serve(listener: tokio::net::TcpListener) {
    let answer = answer();
    loop {
        let (tcp, _) = listener.accept().await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let answer = answer.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |_: http::Request<hyper::body::Incoming>| {
                let response = http::Response::builder()
                    .status(201)
                    .header("content-type", "application/json")
                    .body(http_body_util::Full::new(answer.clone()))
                    .unwrap();
                async { Ok::<_, std::convert::Infallible>(response) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                .await;
        });
    }
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|v| v.parse().ok()).unwrap_or(20000);
    let server_rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let listener = server_rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || server_rt.block_on(serve(listener)));

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let pod: Pod = serde_json::from_value(serde_json::json!({"metadata":{"generateName":"p-","labels":{"a":"b"}},
        "spec":{"containers":[{"name":"c","image":"busybox","command":["sleep","1"]}],"restartPolicy":"Never"}}))
    .unwrap();
    rt.block_on(async {
        for round in 0..3 {
            // the worker's client, and the same through kube's `Client`
            let config = kube::Config::new(url.parse().unwrap());
            let kc = client::ordered_clients(
                config,
                ClientLimits::UNLIMITED,
                Some(LeaseDeadline::default()),
                &TokenOrder::Arrival,
                ApiProtocol::Http1,
            )
            .unwrap();
            let queued = ApiWrites::through(kc.kube.clone());
            let pp = kube::api::PostParams::default();
            let mut per_request = Vec::new();
            for writes in [&kc.writes, &queued] {
                for _ in 0..200 {
                    lean_writes::create(writes, "ns", &pp, &pod).await.unwrap();
                }
                let t = thread_cpu_ns();
                let w = std::time::Instant::now();
                for _ in 0..n {
                    lean_writes::create(writes, "ns", &pp, &pod).await.unwrap();
                }
                per_request.push((
                    (thread_cpu_ns() - t) as f64 / n as f64 / 1000.0,
                    w.elapsed().as_secs_f64() * 1e6 / n as f64,
                ));
            }
            let [(worker, worker_wall), (queued, queued_wall)] = per_request[..] else { unreachable!() };

            // raw hyper
            let raw: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                    .build(hyper_util::client::legacy::connect::HttpConnector::new());
            let uri: http::Uri = format!("{url}/api/v1/namespaces/ns/pods?").parse().unwrap();
            let body = bytes::Bytes::from(serde_json::to_vec(&pod).unwrap());
            let t = thread_cpu_ns();
            let w = std::time::Instant::now();
            for _ in 0..n {
                let req = http::Request::post(uri.clone())
                    .header("content-type", "application/json")
                    .body(http_body_util::Full::new(body.clone()))
                    .unwrap();
                let resp = raw.request(req).await.unwrap();
                let _ = resp.into_body().collect().await.unwrap().to_bytes();
            }
            let hyper = (thread_cpu_ns() - t) as f64 / n as f64 / 1000.0;
            let hyper_wall = w.elapsed().as_secs_f64() * 1e6 / n as f64;
            println!(
                "round {round}: worker client {worker:.1} µs CPU ({worker_wall:.1} wall), through kube's Client {queued:.1} ({queued_wall:.1}), raw hyper {hyper:.1} µs CPU ({hyper_wall:.1} wall) per request"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}
