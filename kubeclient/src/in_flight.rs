//! A cap on a client's requests in flight. Unlike tower's `ConcurrencyLimit`, it shows when it
//! bites: how long each request waited for its place, and how many are in flight.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tower::{Layer, Service};

use crate::ClientMetrics;

#[derive(Clone)]
pub struct InFlightLayer {
    places: Arc<Semaphore>,
    host: String,
    metrics: ClientMetrics,
}

impl InFlightLayer {
    /// At most `max` requests to `host` in flight; the rest wait in arrival order.
    pub fn new(max: usize, host: &str, metrics: ClientMetrics) -> Self {
        Self { places: Arc::new(Semaphore::new(max)), host: host.to_string(), metrics }
    }
}

impl<S> Layer<S> for InFlightLayer {
    type Service = InFlight<S>;
    fn layer(&self, inner: S) -> Self::Service {
        InFlight {
            inner,
            places: self.places.clone(),
            host: self.host.clone(),
            metrics: self.metrics.clone(),
            acquiring: None,
            place: None,
        }
    }
}

impl<S: Clone> Clone for InFlight<S> {
    /// A clone waits for a place of its own.
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            places: self.places.clone(),
            host: self.host.clone(),
            metrics: self.metrics.clone(),
            acquiring: None,
            place: None,
        }
    }
}

type Acquiring = Pin<Box<dyn Future<Output = Option<OwnedSemaphorePermit>> + Send + Sync>>;

pub struct InFlight<S> {
    inner: S,
    places: Arc<Semaphore>,
    host: String,
    metrics: ClientMetrics,
    acquiring: Option<(Instant, Acquiring)>,
    /// The next request's place, and how long it waited for it.
    place: Option<(OwnedSemaphorePermit, std::time::Duration)>,
}

impl<S, B> Service<http::Request<B>> for InFlight<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.place.is_none() {
            let (since, acquiring) = self.acquiring.get_or_insert_with(|| {
                let places = self.places.clone();
                (Instant::now(), Box::pin(async move { places.acquire_owned().await.ok() }))
            });
            let Poll::Ready(permit) = acquiring.as_mut().poll(cx) else { return Poll::Pending };
            let waited = since.elapsed();
            self.acquiring = None;
            // The semaphore is never closed; without a permit the request goes uncapped.
            if let Some(permit) = permit {
                self.place = Some((permit, waited));
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let place = self.place.take();
        if let Some((_, waited)) = &place {
            self.metrics
                .in_flight_wait
                .with_label_values(&[req.method().as_str(), &self.host])
                .observe(waited.as_secs_f64());
        }
        let in_flight = self.metrics.in_flight.with_label_values(&[&self.host]);
        in_flight.inc();
        let call = self.inner.call(req);
        Box::pin(async move {
            let response = call.await;
            in_flight.dec();
            // The place is given back as the response's head arrives: a watch does not hold one.
            drop(place);
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tower::ServiceExt;

    use super::*;

    /// With one place, the second request waits for the first to finish, and the metric shows
    /// that wait.
    #[tokio::test(start_paused = true)]
    async fn a_request_beyond_the_cap_waits_and_the_wait_is_measured() {
        let metrics = ClientMetrics::new();
        let layer = InFlightLayer::new(1, "api:6443", metrics.clone());
        let service = layer.layer(tower::service_fn(|_: http::Request<()>| async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok::<_, ()>(())
        }));
        let started = Instant::now();
        let calls = (0..2).map(|_| {
            let service = service.clone();
            async move { service.oneshot(http::Request::get("/x").body(()).unwrap()).await }
        });
        for result in futures::future::join_all(calls).await {
            result.unwrap();
        }
        assert_eq!(started.elapsed(), Duration::from_millis(600), "one after the other");
        let waits = metrics.in_flight_wait.with_label_values(&["GET", "api:6443"]);
        assert_eq!(waits.get_sample_count(), 2);
        assert!(
            (waits.get_sample_sum() - 0.3).abs() < 1e-9,
            "the second waited 300 ms: {}",
            waits.get_sample_sum()
        );
        assert_eq!(metrics.in_flight.with_label_values(&["api:6443"]).get(), 0);
    }
}
