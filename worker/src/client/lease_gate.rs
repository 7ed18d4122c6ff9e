//! The worker's lease as its controllers' writes see it: a write is refused once the lease
//! deadline passed, when the request is sent ([`LeaseGateLayer`]) and again as its bytes reach
//! the socket ([`super::fenced_connections`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service};

/// Whether the worker may write, as the shard table keeps it: until its lease deadline (none
/// before the first renewal, or standalone), and not while writes are held after a lapse.
#[derive(Debug, Clone, Default)]
pub struct LeaseDeadline(pub Arc<parking_lot::RwLock<LeaseWindow>>);

#[derive(Debug, Clone, Copy, Default)]
pub struct LeaseWindow {
    pub deadline: Option<std::time::Instant>,
    /// Set when the lease lapsed, cleared at the next ACTIVATE: a write queued before the lapse
    /// must not go out under a lease renewed after it.
    pub held: bool,
}

impl LeaseDeadline {
    /// Whether a write may be sent now.
    pub fn writable(&self) -> bool {
        let w = *self.0.read();
        !w.held && w.deadline.is_none_or(|d| std::time::Instant::now() < d)
    }

    fn passed(&self) -> bool {
        !self.writable()
    }
}

/// Refuses a write (any method but GET) once the worker's lease deadline passed, at the moment
/// the request is sent, after the rate limiter and the cap on requests in flight let it go. The
/// shard table checks the deadline when a sync issues a write; a request that waited in those
/// queues, or whose process was paused (SIGSTOP) between the two, would otherwise go out after
/// the coordinator may have given its shard to another worker.
#[derive(Clone)]
pub struct LeaseGateLayer {
    deadline: LeaseDeadline,
}

impl LeaseGateLayer {
    pub fn new(deadline: LeaseDeadline) -> Self {
        Self { deadline }
    }
}

impl<S> Layer<S> for LeaseGateLayer {
    type Service = LeaseGated<S>;
    fn layer(&self, inner: S) -> Self::Service {
        LeaseGated { inner, deadline: self.deadline.clone() }
    }
}

#[derive(Clone)]
pub struct LeaseGated<S> {
    inner: S,
    deadline: LeaseDeadline,
}

/// The error of a write refused by [`LeaseGateLayer`].
#[derive(Debug, thiserror::Error)]
#[error("the worker lease lapsed: write not sent")]
pub struct LeaseLapsed;

impl<S, B> Service<http::Request<B>> for LeaseGated<S>
where
    S: Service<http::Request<B>>,
    S::Error: Into<tower::BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.method() != http::Method::GET && self.deadline.passed() {
            return Box::pin(std::future::ready(Err(Box::new(LeaseLapsed) as tower::BoxError)));
        }
        let call = self.inner.call(req);
        Box::pin(async move { call.await.map_err(Into::into) })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::test_server::HoldingServer;
    use crate::client::{ClientLimits, fenced_from_config};

    /// A write that waited for its turn (here, behind the cap on requests in flight) while the
    /// lease ran out is not sent; reads still are.
    #[tokio::test]
    async fn a_write_is_not_sent_once_the_lease_deadline_passed() {
        let mut server = HoldingServer::start().await;
        let deadline = LeaseDeadline::default();
        deadline.0.write().deadline = Some(std::time::Instant::now() + Duration::from_secs(60));
        let config = kube::Config::new(server.url.parse().unwrap());
        let limits = ClientLimits { max_in_flight: 1, ..ClientLimits::UNLIMITED };
        let client = fenced_from_config(config, limits, Some(deadline.clone())).unwrap();
        let first = tokio::spawn({
            let client = client.clone();
            async move { client.request_text(http::Request::get("/held").body(Vec::new()).unwrap()).await }
        });
        tokio::time::timeout(Duration::from_secs(10), server.arrived.wait_for(|n| *n >= 1))
            .await
            .unwrap()
            .unwrap();
        // Issued with the lease valid; it waits behind the first request while the lease runs out.
        let write = tokio::spawn({
            let client = client.clone();
            async move { client.request_text(http::Request::post("/write").body(Vec::new()).unwrap()).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        deadline.0.write().deadline = Some(std::time::Instant::now());
        server.release.add_permits(1);
        assert_eq!(first.await.unwrap().unwrap(), "ok");
        let refused = write.await.unwrap().expect_err("the write is refused");
        assert!(refused.to_string().contains("lease lapsed"), "{refused}");
        assert_eq!(*server.arrived.borrow(), 1, "the write never reached the server");
        server.release.add_permits(1);
        let read = client.request_text(http::Request::get("/read").body(Vec::new()).unwrap()).await;
        assert_eq!(read.unwrap(), "ok", "reads go on");
    }
}
