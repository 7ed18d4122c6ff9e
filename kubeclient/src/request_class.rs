//! Which [`Ticket`] a request gets, read from its method, its path and, for a pod create, the
//! owning Job's uid in its body: the controllers call kube's `Api` unchanged, and the client
//! alone decides the order their requests go in.

use crate::fair_queue::{RequestClass, Ticket};

/// The label the Job controller puts on its pods (upstream's `batch.kubernetes.io/controller-uid`).
const CONTROLLER_UID: &[u8] = br#""batch.kubernetes.io/controller-uid":""#;

/// The parts of an API path: `/api/v1/namespaces/{ns}/{resource}[/{name}[/{subresource}]]` or
/// `/apis/{group}/{version}/namespaces/{ns}/...`; cluster-scoped paths have no namespace.
#[derive(Debug, Default, PartialEq, Eq)]
struct PathParts<'a> {
    namespace: &'a str,
    resource: &'a str,
    name: Option<&'a str>,
    subresource: Option<&'a str>,
}

fn parts(path: &str) -> PathParts<'_> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segments.first() {
        Some(&"api") => segments.get(2..),
        Some(&"apis") => segments.get(3..),
        _ => None,
    }
    .unwrap_or_default();
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (*ns, rest),
        _ => ("", rest),
    };
    PathParts {
        namespace,
        resource: rest.first().copied().unwrap_or_default(),
        name: rest.get(1).copied(),
        subresource: rest.get(2).copied(),
    }
}

/// The owning Job's uid as the pod's labels carry it, if the body has one.
fn controller_uid(body: &[u8]) -> Option<&str> {
    let start = body.windows(CONTROLLER_UID.len()).position(|w| w == CONTROLLER_UID)? + CONTROLLER_UID.len();
    let len = body[start..].iter().position(|b| *b == b'"')?;
    std::str::from_utf8(&body[start..start + len]).ok()
}

/// The ticket of a request with `method` to `path`; `body` is read only for pod creates.
pub fn ticket(method: &http::Method, path: &str, body: Option<&[u8]>) -> Ticket {
    let p = parts(path);
    let class = match (method.as_str(), p.resource, p.name, p.subresource) {
        ("PUT" | "PATCH", _, Some(_), Some("status")) => RequestClass::Finish,
        ("PATCH", "pods", Some(_), None) => RequestClass::Finish,
        ("POST", "pods", None, None) => RequestClass::Create,
        _ => RequestClass::Other,
    };
    let flow = match class {
        RequestClass::Create => body.and_then(controller_uid).unwrap_or_default().to_string(),
        _ => String::new(),
    };
    Ticket { class, namespace: p.namespace.to_string(), flow }
}

#[cfg(test)]
mod tests {
    use http::Method;

    use super::*;

    /// Name, method, path, body; the class, namespace and flow expected.
    type Case<'a> = (&'a str, Method, &'a str, Option<&'a [u8]>, RequestClass, &'a str, &'a str);

    #[test]
    fn requests_are_classed_by_what_they_write() {
        let pod = br#"{"metadata":{"generateName":"big-","labels":{"batch.kubernetes.io/controller-uid":"u-1","batch.kubernetes.io/job-name":"big"}}}"#;
        let cases: &[Case] = &[
            (
                "pod create",
                Method::POST,
                "/api/v1/namespaces/a/pods",
                Some(pod),
                RequestClass::Create,
                "a",
                "u-1",
            ),
            (
                "pod create without a Job",
                Method::POST,
                "/api/v1/namespaces/a/pods",
                Some(b"{}"),
                RequestClass::Create,
                "a",
                "",
            ),
            (
                "Job status update",
                Method::PUT,
                "/apis/batch/v1/namespaces/b/jobs/j/status",
                None,
                RequestClass::Finish,
                "b",
                "",
            ),
            (
                "CronJob status patch",
                Method::PATCH,
                "/apis/batch/v1/namespaces/b/cronjobs/c/status?fieldManager=x",
                None,
                RequestClass::Finish,
                "b",
                "",
            ),
            (
                "finalizer removal",
                Method::PATCH,
                "/api/v1/namespaces/c/pods/p-1",
                None,
                RequestClass::Finish,
                "c",
                "",
            ),
            (
                "pod delete",
                Method::DELETE,
                "/api/v1/namespaces/c/pods/p-1",
                None,
                RequestClass::Other,
                "c",
                "",
            ),
            (
                "Job create",
                Method::POST,
                "/apis/batch/v1/namespaces/d/jobs",
                None,
                RequestClass::Other,
                "d",
                "",
            ),
            (
                "Event",
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/e/events",
                None,
                RequestClass::Other,
                "e",
                "",
            ),
            ("cluster-scoped read", Method::GET, "/api/v1/nodes/n", None, RequestClass::Other, "", ""),
            ("namespace read", Method::GET, "/api/v1/namespaces/f", None, RequestClass::Other, "", ""),
            ("not an API path", Method::GET, "/version", None, RequestClass::Other, "", ""),
        ];
        for (name, method, path, body, class, namespace, flow) in cases {
            let path = path.split('?').next().unwrap();
            let t = ticket(method, path, *body);
            assert_eq!(
                (t.class, t.namespace.as_str(), t.flow.as_str()),
                (*class, *namespace, *flow),
                "{name}"
            );
        }
    }
}
