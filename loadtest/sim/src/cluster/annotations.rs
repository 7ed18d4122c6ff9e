//! The pod annotations that script the simulated kubelet (DESIGN.md, "The sim cluster").

use std::time::Duration;

use serde_json::Value;

pub const RUN: &str = "sim.batchfleet.io/run";
pub const RUN_BY_INDEX: &str = "sim.batchfleet.io/run-by-index";
pub const EXIT_CODE: &str = "sim.batchfleet.io/exit-code";
pub const EXIT_CODE_BY_INDEX: &str = "sim.batchfleet.io/exit-code-by-index";
pub const FAIL_ATTEMPTS: &str = "sim.batchfleet.io/fail-attempts";
/// Completion indexes whose every attempt fails: `odd`, `even`, or `STEP/OFFSET` (index % STEP ==
/// OFFSET), for pathological index patterns such as every other index failing.
pub const FAIL_INDEXES: &str = "sim.batchfleet.io/fail-indexes";
pub const EVICT_AFTER: &str = "sim.batchfleet.io/evict-after";
pub const READY_AFTER: &str = "sim.batchfleet.io/ready-after";

const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// How long a container runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFor {
    Duration(Duration),
    Forever,
}

/// What the kubelet will do with one pod, read from its annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub run: RunFor,
    pub exit_code: i64,
    pub fail_attempts: u64,
    /// With `fail-indexes` on an indexed pod: whether its index is one that fails. Such a pod's
    /// every attempt fails with `exit-code` (1 if that is 0); any other index exits 0 (or as
    /// `fail-attempts` says).
    pub index_fails: Option<bool>,
    pub evict_after: Option<Duration>,
    pub ready_after: Duration,
    pub index: Option<String>,
}

/// Parses `1500ms`, `2s`, `1m`, `1h`, `0.5s` and `forever`. Bad values are reported, not fatal.
pub fn parse_run(s: &str) -> Result<RunFor, String> {
    if s.trim() == "forever" {
        return Ok(RunFor::Forever);
    }
    parse_duration(s).map(RunFor::Duration)
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, unit) = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|i| s.split_at(i))
        .ok_or_else(|| format!("duration {s:?} has no unit (ms, s, m, h)"))?;
    let n: f64 = number.parse().map_err(|_| format!("invalid duration {s:?}"))?;
    let seconds = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("duration {s:?} has an unknown unit {unit:?}")),
    };
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(format!("invalid duration {s:?}"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `odd`, `even` or `STEP/OFFSET` → (step, offset), with 0 ≤ offset < step.
pub fn parse_index_pattern(s: &str) -> Result<(u64, u64), String> {
    let (step, offset) = match s.trim() {
        "odd" => (2, 1),
        "even" => (2, 0),
        other => {
            let (step, offset) = other
                .split_once('/')
                .ok_or_else(|| format!("index pattern {other:?} is not odd, even or STEP/OFFSET"))?;
            let num =
                |v: &str| v.trim().parse::<u64>().map_err(|_| format!("invalid index pattern {other:?}"));
            (num(step)?, num(offset)?)
        }
    };
    if step == 0 || offset >= step {
        return Err(format!("index pattern {s:?} needs 0 <= OFFSET < STEP"));
    }
    Ok((step, offset))
}

/// `i=value,…` → the value for `index`.
fn by_index<'a>(list: &'a str, index: &str) -> Option<&'a str> {
    list.split(',')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| k.trim() == index)
        .map(|(_, v)| v.trim())
}

impl Script {
    /// The script of a pod; unparseable annotations fall back to the defaults with a warning.
    pub fn of(pod: &Value) -> Script {
        let ann = pod.pointer("/metadata/annotations").and_then(Value::as_object);
        let get = |k: &str| ann.and_then(|a| a.get(k)).and_then(Value::as_str);
        let index = get(COMPLETION_INDEX).map(str::to_string).or_else(|| {
            pod.pointer("/metadata/labels")
                .and_then(|l| l.get(COMPLETION_INDEX))
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        let warn = |what: &str, e: String| {
            let name = pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
            tracing::warn!(pod = name, annotation = what, error = %e, "ignoring a bad sim annotation");
        };
        let indexed = |plain: &str, per_index: &str| -> Option<&str> {
            index.as_deref().and_then(|i| get(per_index).and_then(|l| by_index(l, i))).or_else(|| get(plain))
        };
        let run = match indexed(RUN, RUN_BY_INDEX).map(parse_run) {
            None => RunFor::Duration(Duration::from_secs(1)),
            Some(Ok(r)) => r,
            Some(Err(e)) => {
                warn(RUN, e);
                RunFor::Duration(Duration::from_secs(1))
            }
        };
        let exit_code = match indexed(EXIT_CODE, EXIT_CODE_BY_INDEX).map(|s| s.trim().parse::<i64>()) {
            None => 0,
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                warn(EXIT_CODE, e.to_string());
                0
            }
        };
        let fail_attempts = get(FAIL_ATTEMPTS).and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        let pattern =
            get(FAIL_INDEXES).and_then(|s| parse_index_pattern(s).map_err(|e| warn(FAIL_INDEXES, e)).ok());
        let index_fails = match (pattern, index.as_deref().and_then(|i| i.trim().parse::<u64>().ok())) {
            (Some((step, offset)), Some(ix)) => Some(ix % step == offset),
            _ => None,
        };
        let evict_after =
            get(EVICT_AFTER).and_then(|s| parse_duration(s).map_err(|e| warn(EVICT_AFTER, e)).ok());
        let ready_after = get(READY_AFTER)
            .and_then(|s| parse_duration(s).map_err(|e| warn(READY_AFTER, e)).ok())
            .unwrap_or_default();
        Script { run, exit_code, fail_attempts, index_fails, evict_after, ready_after, index }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_and_forever() {
        assert_eq!(parse_run("1500ms"), Ok(RunFor::Duration(Duration::from_millis(1500))));
        assert_eq!(parse_run("2s"), Ok(RunFor::Duration(Duration::from_secs(2))));
        assert_eq!(parse_run("forever"), Ok(RunFor::Forever));
        assert!(parse_run("12").is_err());
        assert!(parse_run("-1s").is_err());
        assert!(parse_run("1d").is_err());
    }

    #[test]
    fn per_index_annotations_override_the_plain_ones() {
        let pod = json!({"metadata": {"name": "p", "annotations": {
            RUN: "1s", RUN_BY_INDEX: "0=300ms,2=forever",
            EXIT_CODE: "3", EXIT_CODE_BY_INDEX: "1=42,3=0",
            COMPLETION_INDEX: "2", FAIL_ATTEMPTS: "2", READY_AFTER: "250ms"
        }}});
        let s = Script::of(&pod);
        assert_eq!(s.run, RunFor::Forever);
        assert_eq!(s.exit_code, 3);
        assert_eq!(s.fail_attempts, 2);
        assert_eq!(s.ready_after, Duration::from_millis(250));
        let mut pod1 = pod.clone();
        pod1["metadata"]["annotations"][COMPLETION_INDEX] = json!("1");
        assert_eq!(Script::of(&pod1).exit_code, 42);
        assert_eq!(Script::of(&pod1).run, RunFor::Duration(Duration::from_secs(1)));
    }

    #[test]
    fn fail_indexes_picks_every_other_index_or_a_step() {
        let pod = |pattern: &str, ix: &str| json!({"metadata": {"name": "p", "annotations": {FAIL_INDEXES: pattern, COMPLETION_INDEX: ix}}});
        let fails = |pattern: &str| -> Vec<u64> {
            (0..9).filter(|i| Script::of(&pod(pattern, &i.to_string())).index_fails == Some(true)).collect()
        };
        assert_eq!(fails("odd"), vec![1, 3, 5, 7]);
        assert_eq!(fails("even"), vec![0, 2, 4, 6, 8]);
        assert_eq!(fails("3/2"), vec![2, 5, 8]);
        assert_eq!(fails(" 4/0 "), vec![0, 4, 8]);
        for bad in ["", "2", "0/0", "2/2", "x/1", "odd/1", "-1/0"] {
            assert!(parse_index_pattern(bad).is_err(), "{bad:?}");
            assert!(fails(bad).is_empty(), "a bad pattern fails nothing: {bad:?}");
        }
        // No index (a NonIndexed pod): nothing fails.
        let plain = json!({"metadata": {"annotations": {FAIL_INDEXES: "odd"}}});
        assert_eq!(Script::of(&plain).index_fails, None);
    }

    #[test]
    fn defaults_without_annotations_and_bad_values_do_not_panic() {
        let s = Script::of(&json!({"metadata": {"annotations": {RUN: "soon", EXIT_CODE: "x"}}}));
        assert_eq!(s.run, RunFor::Duration(Duration::from_secs(1)));
        assert_eq!(s.exit_code, 0);
        assert_eq!(Script::of(&json!(null)).evict_after, None);
    }
}
