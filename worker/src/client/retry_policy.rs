//! kube-client's retry of throttled and unavailable answers (`RetryPolicy::server_retry`: 429,
//! 503 and 504, from 5 ms doubling, 15 times, or after the server's `Retry-After`), with the
//! copy of each request it keeps for a second try made in one step.
//!
//! kube's policy copies a request before every first try, so every write pays for it: it moves
//! the headers into a new, empty map one by one (hashing each name again) after cloning them.
//! Here the map is cloned whole. When and how long it waits, and what it sends again, are kube's.

use http::{Request, Response};
use kube::client::Body;
use kube::client::retry::RetryPolicy;
use tower::BoxError;
use tower::retry::Policy;

/// [`RetryPolicy::server_retry`], copying requests whole.
#[derive(Clone)]
pub(super) struct ServerRetry(RetryPolicy);

impl ServerRetry {
    pub(super) fn new() -> Self {
        Self(RetryPolicy::server_retry())
    }
}

impl<Res> Policy<Request<Body>, Response<Res>, BoxError> for ServerRetry {
    type Future = <RetryPolicy as Policy<Request<Body>, Response<Res>, BoxError>>::Future;

    fn retry(
        &mut self,
        req: &mut Request<Body>,
        result: &mut Result<Response<Res>, BoxError>,
    ) -> Option<Self::Future> {
        self.0.retry(req, result)
    }

    fn clone_request(&mut self, req: &Request<Body>) -> Option<Request<Body>> {
        // As kube's: a streamed body cannot be sent twice, so such a request is not retried.
        let mut copy = Request::new(req.body().try_clone()?);
        *copy.method_mut() = req.method().clone();
        *copy.uri_mut() = req.uri().clone();
        *copy.version_mut() = req.version();
        *copy.headers_mut() = req.headers().clone();
        *copy.extensions_mut() = req.extensions().clone();
        Some(copy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request<Body> {
        let mut request = Request::patch("http://api:6443/api/v1/namespaces/a/pods/p?fieldManager=m")
            .version(http::Version::HTTP_11)
            .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
            .header("x-two", "1")
            .header("x-two", "2")
            .body(Body::from(b"{\"a\":1}".to_vec()))
            .unwrap();
        request.extensions_mut().insert(7u8);
        request
    }

    fn parts(request: &Request<Body>) -> String {
        format!(
            "{} {} {:?} {:?} {:?}",
            request.method(),
            request.uri(),
            request.version(),
            request.headers(),
            request.extensions().get::<u8>()
        )
    }

    /// The copy is the one kube's policy makes: the same method, URI, version, headers (a name
    /// sent twice, twice, in order), extensions and body.
    #[tokio::test]
    async fn a_copy_is_the_request_as_kubes_policy_copies_it() {
        let original = request();
        type Copying = dyn Policy<Request<Body>, Response<()>, BoxError, Future = tokio::time::Sleep>;
        let copy = |policy: &mut Copying| policy.clone_request(&original).expect("a copy");
        let ours = copy(&mut ServerRetry::new());
        let kubes = copy(&mut RetryPolicy::server_retry());
        assert_eq!(parts(&ours), parts(&kubes));
        assert_eq!(parts(&ours), parts(&original));
        let body = |r: Request<Body>| async move { r.into_body().collect_bytes().await.unwrap() };
        assert_eq!(body(ours).await, body(kubes).await);
    }

    /// A throttled answer is tried again after its Retry-After, as kube's policy does; a success
    /// and any other refusal are not.
    #[tokio::test(start_paused = true)]
    async fn a_throttled_answer_is_tried_again_and_others_are_not() {
        let mut policy = ServerRetry::new();
        let answer = |status: u16, retry_after: Option<&str>| {
            let mut response = Response::builder().status(status);
            if let Some(seconds) = retry_after {
                response = response.header("retry-after", seconds);
            }
            Ok::<_, BoxError>(response.body(()).unwrap())
        };
        let mut req = request();
        let wait = policy.retry(&mut req, &mut answer(429, Some("2"))).expect("a 429 is tried again");
        assert_eq!(wait.deadline() - tokio::time::Instant::now(), std::time::Duration::from_secs(2));
        for status in [503, 504] {
            assert!(policy.retry(&mut req, &mut answer(status, None)).is_some(), "{status}");
        }
        for status in [200, 201, 404, 409, 500] {
            assert!(policy.retry(&mut req, &mut answer(status, None)).is_none(), "{status}");
        }
    }
}
