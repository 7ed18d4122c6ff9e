//! Helpers shared by the coordinator's integration tests: a real etcd process on free ports, and
//! the workload the fleet tests run and check from the outside (the audit log, the objects), and
//! the small network helpers every process test needs.
#![allow(dead_code)]

pub mod etcd;
pub mod workload;

pub use batchfleet_sim::testing::free_port;

/// `/metrics` as text, or `None` while it does not answer with 200.
pub async fn scrape(addr: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}
