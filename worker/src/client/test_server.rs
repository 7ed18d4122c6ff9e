//! Test HTTP servers for the client's layers.

use std::sync::Arc;

use tokio::io::AsyncReadExt;

/// Reads the next request from `conn` (its head and its content-length body), with `buf`
/// carrying what was read past the previous one; `None` once the connection ends.
async fn next_request(conn: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    async fn read_more(conn: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> Option<()> {
        let mut chunk = [0u8; 1024];
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                Some(())
            }
        }
    }
    let end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        read_more(conn, buf).await?;
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    buf.drain(..end);
    // The body, by its content-length (the client's are small).
    let length = head
        .lines()
        .find_map(|l| l.to_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    while buf.len() < length {
        read_more(conn, buf).await?;
    }
    buf.drain(..length);
    Some(head)
}

/// An HTTP server that holds each request until the test releases it, and counts how many
/// it holds at once.
pub(super) struct HoldingServer {
    pub url: String,
    pub arrived: tokio::sync::watch::Receiver<usize>,
    pub held: Arc<std::sync::atomic::AtomicUsize>,
    pub most_held: Arc<std::sync::atomic::AtomicUsize>,
    pub release: Arc<tokio::sync::Semaphore>,
}

impl HoldingServer {
    pub async fn start() -> Self {
        use std::sync::atomic::Ordering;
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (arrivals, arrived) = tokio::sync::watch::channel(0usize);
        let arrivals = Arc::new(arrivals);
        let held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let most_held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let release = Arc::new(tokio::sync::Semaphore::new(0));
        let (h, m, r) = (held.clone(), most_held.clone(), release.clone());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let (arrivals, held, most_held, release) =
                    (arrivals.clone(), h.clone(), m.clone(), r.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while next_request(&mut conn, &mut buf).await.is_some() {
                        let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                        most_held.fetch_max(now, Ordering::SeqCst);
                        arrivals.send_modify(|n| *n += 1);
                        release.acquire().await.unwrap().forget();
                        held.fetch_sub(1, Ordering::SeqCst);
                        let reply =
                            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok";
                        if conn.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self { url, arrived, held, most_held, release }
    }
}

/// An HTTP server that answers its requests, in order, with `replies` (raw HTTP/1.1 responses;
/// the last one repeats), and records each request's line ("POST /write HTTP/1.1").
pub(super) struct ScriptedServer {
    pub url: String,
    pub requests: tokio::sync::watch::Receiver<Vec<String>>,
}

impl ScriptedServer {
    pub async fn start(replies: Vec<&'static str>) -> Self {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (record, requests) = tokio::sync::watch::channel(Vec::<String>::new());
        let record = Arc::new(record);
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let (record, replies) = (record.clone(), replies.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while let Some(head) = next_request(&mut conn, &mut buf).await {
                        let line = head.lines().next().unwrap_or_default().to_string();
                        let mut seen = 0;
                        record.send_modify(|r| {
                            r.push(line);
                            seen = r.len();
                        });
                        let reply = replies[(seen - 1).min(replies.len() - 1)];
                        if conn.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self { url, requests }
    }
}

/// Lets the lease run out while `write` waits for kube-client's retry, and returns the error
/// the write ends with (a test fails if it does not end within 10 s, or succeeds).
pub(super) async fn lapse_and_await_refusal(
    deadline: &super::LeaseDeadline,
    write: tokio::task::JoinHandle<kube::Result<String>>,
) -> kube::Error {
    deadline.0.write().deadline = Some(std::time::Instant::now());
    tokio::time::timeout(std::time::Duration::from_secs(10), write)
        .await
        .expect("the retry should fail at once")
        .unwrap()
        .expect_err("the retried write is refused")
}
