//! The simulated log of a container run, derived from the pod (its script annotations and its
//! container statuses), and the kubelet's choice of which run `kubectl logs` reads
//! (`validateContainerLogStatus`) with its messages.

use jiff::Timestamp;
use serde_json::Value;

use super::annotations::{RunFor, Script};
use crate::go_fmt::go_duration;

/// One run of a container whose log is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRun {
    pub container_id: String,
    pub started: Option<Timestamp>,
    /// When and with which code it exited; `None` while it runs.
    pub exited: Option<(Timestamp, i64)>,
}

/// One log line and when it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub at: Timestamp,
    pub text: String,
}

/// What the client asked for (`PodLogOptions`), validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub container: Option<String>,
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<i64>,
    pub limit_bytes: Option<i64>,
    pub since: Option<Timestamp>,
}

fn time_at(v: &Value, pointer: &str) -> Option<Timestamp> {
    v.pointer(pointer).and_then(Value::as_str).and_then(|s| s.parse().ok())
}

fn terminated_run(state: &Value) -> Option<ContainerRun> {
    let t = state.get("terminated")?;
    let id = t.get("containerID").and_then(Value::as_str).unwrap_or("").to_string();
    let finished = time_at(t, "/finishedAt").unwrap_or(Timestamp::UNIX_EPOCH);
    Some(ContainerRun {
        container_id: id,
        started: time_at(t, "/startedAt"),
        exited: Some((finished, t.get("exitCode").and_then(Value::as_i64).unwrap_or(0))),
    })
}

/// The run the kubelet would read (`validateContainerLogStatus`): the previous terminated one
/// when asked, else the running one, else the last terminated one; an error with the kubelet's
/// message when there is none.
pub fn select_run(
    pod: &Value,
    pod_name: &str,
    container: &str,
    previous: bool,
) -> Result<ContainerRun, String> {
    let status = ["containerStatuses", "initContainerStatuses"]
        .iter()
        .filter_map(|k| pod.pointer(&format!("/status/{k}")).and_then(Value::as_array))
        .flatten()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(container))
        .ok_or_else(|| format!("container {container:?} in pod {pod_name:?} is not available"))?;
    let empty = Value::Null;
    let state = status.get("state").unwrap_or(&empty);
    let last = status.get("lastState").unwrap_or(&empty);
    let last_run = terminated_run(last).filter(|r| !r.container_id.is_empty());
    if previous {
        return last_run.ok_or_else(|| {
            format!("previous terminated container {container:?} in pod {pod_name:?} not found")
        });
    }
    if let Some(running) = state.get("running") {
        return Ok(ContainerRun {
            container_id: status.get("containerID").and_then(Value::as_str).unwrap_or("").to_string(),
            started: time_at(running, "/startedAt"),
            exited: None,
        });
    }
    if let Some(run) = terminated_run(state) {
        if !run.container_id.is_empty() {
            return Ok(run);
        }
        return last_run.ok_or_else(|| format!("container {container:?} in pod {pod_name:?} is terminated"));
    }
    if let Some(run) = last_run {
        return Ok(run);
    }
    match state.pointer("/waiting/reason").and_then(Value::as_str) {
        Some("ErrImagePull") => Err(format!(
            "container {container:?} in pod {pod_name:?} is waiting to start: image can't be pulled"
        )),
        Some("ImagePullBackOff") => Err(format!(
            "container {container:?} in pod {pod_name:?} is waiting to start: trying and failing to pull image"
        )),
        Some(reason) => {
            Err(format!("container {container:?} in pod {pod_name:?} is waiting to start: {reason}"))
        }
        None => Err(format!("container {container:?} in pod {pod_name:?} is waiting to start - no logs yet")),
    }
}

/// The lines a run wrote: what the sim's script makes it do, then its exit.
pub fn run_lines(pod: &Value, container: &str, run: &ContainerRun) -> Vec<LogLine> {
    let started = run.started.unwrap_or(Timestamp::UNIX_EPOCH);
    let script = Script::of(pod);
    let image = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c.get("name").and_then(Value::as_str) == Some(container)))
        .and_then(|c| c.get("image"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    let line = |at: Timestamp, text: String| LogLine { at, text };
    let mut lines =
        vec![line(started, format!("sim: container {container} (image {image}) started on {node}"))];
    if let Some(index) = &script.index {
        lines.push(line(started, format!("sim: completion index {index}")));
    }
    let plan = match script.run {
        RunFor::Forever => "sim: scripted to run until stopped".to_string(),
        RunFor::Duration(d) if script.fail_attempts > 0 => format!(
            "sim: scripted to run {} and fail its first {} attempts",
            go_duration(d),
            script.fail_attempts
        ),
        RunFor::Duration(d) => {
            format!("sim: scripted to run {} and exit with code {}", go_duration(d), script.exit_code)
        }
    };
    lines.push(line(started, plan));
    if let Some((finished, code)) = run.exited {
        lines.push(line(finished, format!("sim: exiting with code {code}")));
    }
    lines
}

/// The kubelet's fixed RFC3339 form with nanoseconds (`RFC3339NanoFixed`).
pub fn format_timestamp(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string()
}

/// Renders lines as the kubelet streams them: since-filtered, the last `tailLines`, with
/// timestamps when asked. `limitBytes` is applied by the caller across the whole stream.
pub fn render(lines: &[LogLine], opts: &LogOptions) -> String {
    let kept: Vec<&LogLine> = lines.iter().filter(|l| opts.since.is_none_or(|s| l.at >= s)).collect();
    let skip = match opts.tail_lines {
        Some(n) if n >= 0 => kept.len().saturating_sub(usize::try_from(n).unwrap_or(usize::MAX)),
        _ => 0,
    };
    let mut out = String::new();
    for l in &kept[skip..] {
        if opts.timestamps {
            out.push_str(&format_timestamp(l.at));
            out.push(' ');
        }
        out.push_str(&l.text);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(statuses: Value) -> Value {
        json!({
            "metadata": {"name": "p", "annotations": {"sim.batchfleet.io/run": "2s", "sim.batchfleet.io/exit-code": "3"}},
            "spec": {"nodeName": "n0", "containers": [{"name": "main", "image": "busybox"}]},
            "status": {"containerStatuses": statuses},
        })
    }

    const T0: &str = "2026-01-02T03:04:05Z";
    const T1: &str = "2026-01-02T03:04:07Z";

    /// The cases of validateContainerLogStatus (kubelet_pods.go), in its order.
    #[test]
    fn which_run_is_read_and_the_kubelets_errors() {
        let running = json!([{"name": "main", "containerID": "sim://a", "state": {"running": {"startedAt": T0}}, "lastState": {}}]);
        let run = select_run(&pod(running.clone()), "p", "main", false).unwrap();
        assert_eq!((run.container_id.as_str(), run.exited), ("sim://a", None));
        assert_eq!(
            select_run(&pod(running.clone()), "p", "main", true),
            Err(r#"previous terminated container "main" in pod "p" not found"#.into())
        );
        assert_eq!(
            select_run(&pod(running), "p", "side", false),
            Err(r#"container "side" in pod "p" is not available"#.into())
        );
        let crash = json!([{"name": "main", "containerID": "sim://b",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"containerID": "sim://b", "exitCode": 1, "startedAt": T0, "finishedAt": T1}}}]);
        let run = select_run(&pod(crash.clone()), "p", "main", false).unwrap();
        assert_eq!(run.exited, Some((T1.parse().unwrap(), 1)));
        assert_eq!(select_run(&pod(crash), "p", "main", true).unwrap().container_id, "sim://b");
        let creating = json!([{"name": "main", "state": {"waiting": {"reason": "ContainerCreating"}}}]);
        assert_eq!(
            select_run(&pod(creating), "p", "main", false),
            Err(r#"container "main" in pod "p" is waiting to start: ContainerCreating"#.into())
        );
        let pulling = json!([{"name": "main", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]);
        assert_eq!(
            select_run(&pod(pulling), "p", "main", false),
            Err(r#"container "main" in pod "p" is waiting to start: trying and failing to pull image"#.into())
        );
        let unknown = json!([{"name": "main", "state": {}}]);
        assert_eq!(
            select_run(&pod(unknown), "p", "main", false),
            Err(r#"container "main" in pod "p" is waiting to start - no logs yet"#.into())
        );
        let done = json!([{"name": "main", "state": {"terminated": {"containerID": "", "exitCode": 0}}}]);
        assert_eq!(
            select_run(&pod(done), "p", "main", false),
            Err(r#"container "main" in pod "p" is terminated"#.into())
        );
    }

    #[test]
    fn lines_follow_the_script_and_the_exit() {
        let p = pod(json!([]));
        let run = ContainerRun {
            container_id: "x".into(),
            started: T0.parse().ok(),
            exited: Some((T1.parse().unwrap(), 3)),
        };
        let text: Vec<String> = run_lines(&p, "main", &run).into_iter().map(|l| l.text).collect();
        assert_eq!(
            text,
            [
                "sim: container main (image busybox) started on n0",
                "sim: scripted to run 2s and exit with code 3",
                "sim: exiting with code 3",
            ]
        );
        let lines = run_lines(&p, "main", &run);
        let all = LogOptions::default();
        assert_eq!(render(&lines, &all).lines().count(), 3);
        let tail = LogOptions { tail_lines: Some(1), timestamps: true, ..Default::default() };
        assert_eq!(render(&lines, &tail), "2026-01-02T03:04:07.000000000Z sim: exiting with code 3\n");
        let since = LogOptions { since: T1.parse().ok(), ..Default::default() };
        assert_eq!(render(&lines, &since), "sim: exiting with code 3\n");
        assert_eq!(render(&lines, &LogOptions { tail_lines: Some(0), ..Default::default() }), "");
    }
}
