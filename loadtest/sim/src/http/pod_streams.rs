//! The pod subresources a kubelet serves: `pods/log` (the simulated container log, plain text,
//! streamed with `follow` until the container's run ends) and `exec`, `attach` and
//! `portforward`, which the sim refuses with a clear message: its containers run no processes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use serde_json::Value;
use tokio::sync::mpsc;

use super::query::Query;
use super::{Reply, Shared};
use crate::apiserver::{ApiError, Target};
use crate::cluster::container_log::{self, ContainerRun, LogLine, LogOptions};
use crate::field_error::FieldError;

/// How often a followed log looks at its pod again.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

const UNSUPPORTED: &[&str] = &["exec", "attach", "portforward"];

/// Whether `sub` of `target` is handled here.
pub fn serves(target: &Target, sub: &str) -> bool {
    target.rt.is("", "pods") && (sub == "log" || UNSUPPORTED.contains(&sub))
}

pub async fn handle(
    shared: &Arc<Shared>,
    method: &Method,
    namespace: &str,
    name: &str,
    sub: &str,
    q: &Query,
) -> Result<Reply, ApiError> {
    let pods = shared.api.builtin("", "v1", "pods");
    if UNSUPPORTED.contains(&sub) {
        // The pod must exist first, as for the real connect handlers.
        shared.api.get(&pods, namespace, name)?;
        return Err(ApiError::bad_request(format!(
            "pods/{sub} is not supported by the sim cluster: its containers are simulated and run no processes (kubectl logs works)"
        )));
    }
    if method != Method::GET {
        return Err(ApiError::method_not_supported(&pods.rt, &method.as_str().to_lowercase()));
    }
    let opts = log_options(q, name)?;
    let pod = shared.api.get(&pods, namespace, name)?.value();
    let container = container_name(&pod, name, opts.container.as_deref())?;
    if pod.pointer("/spec/nodeName").and_then(Value::as_str).is_none_or(str::is_empty) {
        // Not scheduled: no kubelet to ask, an empty log.
        return Ok(Reply::bytes_of(Bytes::new(), "text/plain"));
    }
    let run =
        container_log::select_run(&pod, name, &container, opts.previous).map_err(ApiError::bad_request)?;
    let lines = container_log::run_lines(&pod, &container, &run);
    let mut limit = Limit::new(opts.limit_bytes);
    let first = limit.take(container_log::render(&lines, &opts));
    if !opts.follow || run.exited.is_some() || limit.reached() {
        return Ok(Reply::bytes_of(Bytes::from(first), "text/plain"));
    }
    let (tx, rx) = mpsc::channel(4);
    let shared = shared.clone();
    let (namespace, name) = (namespace.to_string(), name.to_string());
    tokio::spawn(async move {
        if tx.send(Bytes::from(first)).await.is_err() {
            return;
        }
        let uid = pod.pointer("/metadata/uid").cloned();
        let exit =
            wait_for_exit(&shared, &pods, &namespace, &name, uid.as_ref(), &container, &run, &tx).await;
        if let Some(line) = exit {
            let opts = LogOptions { tail_lines: None, since: None, ..opts };
            let _ = tx.send(Bytes::from(limit.take(container_log::render(&[line], &opts)))).await;
        }
    });
    Ok(Reply::stream_of(rx, "text/plain"))
}

/// Waits until the followed run ends (its exit line), the pod is gone (`None`), or the client
/// hung up (`None`).
#[allow(clippy::too_many_arguments)]
async fn wait_for_exit(
    shared: &Shared,
    pods: &Target,
    namespace: &str,
    name: &str,
    uid: Option<&Value>,
    container: &str,
    run: &ContainerRun,
    tx: &mpsc::Sender<Bytes>,
) -> Option<LogLine> {
    loop {
        tokio::time::sleep(FOLLOW_POLL).await;
        if tx.is_closed() {
            return None;
        }
        let pod = shared.api.store().get(pods.rid, namespace, name)?.value();
        if pod.pointer("/metadata/uid") != uid {
            return None;
        }
        let status = pod
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)?
            .iter()
            .find(|s| s.get("name").and_then(Value::as_str) == Some(container))?
            .clone();
        let same_run = status.get("containerID").and_then(Value::as_str) == Some(run.container_id.as_str());
        if same_run && status.pointer("/state/running").is_some() {
            continue;
        }
        let ended =
            status.pointer("/state/terminated").or_else(|| status.pointer("/lastState/terminated"))?;
        let at = ended.get("finishedAt").and_then(Value::as_str).and_then(|s| s.parse().ok())?;
        let code = ended.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
        return Some(LogLine { at, text: format!("sim: exiting with code {code}") });
    }
}

/// `limitBytes` across the whole response.
struct Limit(Option<usize>);

impl Limit {
    fn new(limit: Option<i64>) -> Self {
        Self(limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)))
    }

    fn take(&mut self, mut text: String) -> String {
        if let Some(left) = self.0.as_mut() {
            let mut cut = text.len().min(*left);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            *left -= cut;
        }
        text
    }

    fn reached(&self) -> bool {
        self.0 == Some(0)
    }
}

/// `validateContainer` of the pod log REST: a named container must exist; without a name a
/// pod with one container uses it.
fn container_name(pod: &Value, pod_name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let names: Vec<&str> = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .filter_map(|k| pod.pointer(&format!("/spec/{k}")).and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    match asked {
        Some(c) if names.contains(&c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::bad_request(format!("container {c} is not valid for pod {pod_name}"))),
        None => {
            let main: Vec<&str> = pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map(|cs| cs.iter().filter_map(|c| c.get("name").and_then(Value::as_str)).collect())
                .unwrap_or_default();
            match main.as_slice() {
                [one] => Ok(one.to_string()),
                [] => Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {pod_name}"
                ))),
                _ => Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                    names.join(" ")
                ))),
            }
        }
    }
}

/// PodLogOptions from the query, with `ValidatePodLogOptions`' checks (422 Invalid).
fn log_options(q: &Query, name: &str) -> Result<LogOptions, ApiError> {
    let int = |key: &str| q.int(key).map_err(ApiError::bad_request);
    let tail_lines = int("tailLines")?;
    let limit_bytes = int("limitBytes")?;
    let since_seconds = int("sinceSeconds")?;
    let since_time = match q.non_empty("sinceTime") {
        None => None,
        Some(t) => Some(
            t.parse::<jiff::Timestamp>()
                .map_err(|e| ApiError::bad_request(format!("invalid value for sinceTime: {t:?}: {e}")))?,
        ),
    };
    let mut errs = Vec::new();
    if let Some(n) = tail_lines.filter(|n| *n < 0) {
        errs.push(FieldError::invalid("tailLines", &n.into(), "must be greater than or equal to 0"));
    }
    if let Some(n) = limit_bytes.filter(|n| *n < 1) {
        errs.push(FieldError::invalid("limitBytes", &n.into(), "must be greater than 0"));
    }
    match (since_seconds, since_time) {
        (Some(_), Some(_)) => errs
            .push(FieldError::forbidden("", "at most one of `sinceTime` or `sinceSeconds` may be specified")),
        (Some(n), None) if n < 1 => {
            errs.push(FieldError::invalid("sinceSeconds", &n.into(), "must be greater than 0"))
        }
        _ => {}
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid_kind("", "PodLogOptions", name, &errs));
    }
    let since = match (since_seconds, since_time) {
        (Some(s), _) => jiff::Timestamp::now().checked_sub(jiff::SignedDuration::from_secs(s)).ok(),
        (None, t) => t,
    };
    Ok(LogOptions {
        container: q.non_empty("container").map(str::to_string),
        follow: q.flag("follow"),
        previous: q.flag("previous"),
        timestamps: q.flag("timestamps"),
        tail_lines,
        limit_bytes,
        since,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// ValidatePodLogOptions' messages, as NewInvalid renders them for PodLogOptions.
    #[test]
    fn invalid_log_options_are_rejected_as_upstream() {
        let cases = [
            (
                "tailLines=-1",
                r#"PodLogOptions "p" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"#,
            ),
            (
                "limitBytes=0",
                r#"PodLogOptions "p" is invalid: limitBytes: Invalid value: 0: must be greater than 0"#,
            ),
            (
                "sinceSeconds=0",
                r#"PodLogOptions "p" is invalid: sinceSeconds: Invalid value: 0: must be greater than 0"#,
            ),
            (
                "sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z",
                r#"PodLogOptions "p" is invalid: : Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"#,
            ),
        ];
        for (query, want) in cases {
            let e = log_options(&Query::parse(Some(query)), "p").expect_err(query);
            assert_eq!((e.code, e.message.as_str()), (422, want), "{query}");
        }
        let ok = log_options(&Query::parse(Some("container=c&follow=true&tailLines=2&timestamps=1")), "p")
            .unwrap();
        assert_eq!(
            (ok.container.as_deref(), ok.follow, ok.tail_lines, ok.timestamps),
            (Some("c"), true, Some(2), true)
        );
        assert_eq!(log_options(&Query::parse(Some("tailLines=x")), "p").unwrap_err().code, 400);
    }

    /// validateContainer's messages (pkg/registry/core/pod/strategy.go).
    #[test]
    fn container_choice_as_the_log_rest() {
        let two = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "i"}]}});
        assert_eq!(container_name(&two, "p", Some("b")).unwrap(), "b");
        assert_eq!(container_name(&two, "p", Some("i")).unwrap(), "i");
        assert_eq!(
            container_name(&two, "p", Some("x")).unwrap_err().message,
            "container x is not valid for pod p"
        );
        assert_eq!(
            container_name(&two, "p", None).unwrap_err().message,
            "a container name must be specified for pod p, choose one of: [i a b]"
        );
        let one = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(container_name(&one, "p", None).unwrap(), "a");
    }

    #[test]
    fn limit_bytes_cuts_across_chunks() {
        let mut l = Limit::new(Some(5));
        assert_eq!(l.take("abc".into()), "abc");
        assert_eq!(l.take("defg".into()), "de");
        assert!(l.reached());
        assert_eq!(Limit::new(None).take("x".into()), "x");
    }
}
