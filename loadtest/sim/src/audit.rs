//! The audit log: one `audit.k8s.io/v1` Event per line for every request, as kube-apiserver's log
//! backend writes them at level Metadata with `omitStages: [RequestReceived]`. Tests, the load
//! harness and operators read it to check from the server's side who wrote what, and when.
//!
//! Short requests log one `ResponseComplete` event. A watch logs `ResponseStarted` when its
//! headers go out and `ResponseComplete` when its stream ends, as upstream does for long-running
//! requests. Lines are written by a thread of their own, so a request never waits on the disk;
//! the file is flushed whenever the thread has nothing more to write.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use serde::{Deserialize, Serialize};

/// One `audit.k8s.io/v1` Event (the fields written at level Metadata).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub kind: String,
    pub api_version: String,
    pub level: String,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: Stage,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub verb: String,
    pub user: UserInfo,
    #[serde(rename = "sourceIPs", default, skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    /// RFC 3339 with microseconds, UTC.
    pub request_received_timestamp: String,
    /// RFC 3339 with microseconds, UTC.
    pub stage_timestamp: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stage {
    ResponseStarted,
    ResponseComplete,
    Panic,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserInfo {
    pub username: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    pub resource: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// The response's `metav1.Status` as the Metadata level keeps it: the code only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseStatus {
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub code: u16,
}

impl AuditEvent {
    /// Whether the request asked to change state (what "who wrote what" is about).
    pub fn is_write(&self) -> bool {
        matches!(self.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection")
    }

    /// Whether the server answered with a 2xx.
    pub fn succeeded(&self) -> bool {
        self.response_status.as_ref().is_some_and(|s| (200..300).contains(&s.code))
    }
}

/// The audit log's writing end; cheap to clone into every connection.
#[derive(Debug, Clone)]
pub struct AuditLog {
    lines: mpsc::Sender<Vec<u8>>,
}

impl AuditLog {
    /// Creates (truncates) `path` and starts the thread that writes it.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = File::create(path)?;
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let path: PathBuf = path.to_path_buf();
        std::thread::Builder::new().name("sim-audit-log".into()).spawn(move || {
            let mut out = BufWriter::new(file);
            while let Ok(line) = rx.recv() {
                let mut result = out.write_all(&line);
                // Flush once the queue is drained, so readers see every finished request.
                while let Ok(more) = rx.try_recv() {
                    result = result.and_then(|()| out.write_all(&more));
                }
                if let Err(e) = result.and_then(|()| out.flush()) {
                    tracing::warn!(error = %e, path = %path.display(), "writing the audit log failed");
                }
            }
        })?;
        Ok(Self { lines: tx })
    }

    /// Queues one event; never blocks on the disk.
    pub fn record(&self, event: &AuditEvent) {
        match serde_json::to_vec(event) {
            Ok(mut line) => {
                line.push(b'\n');
                // The writer only stops when every sender is gone, so a send cannot fail here.
                let _ = self.lines.send(line);
            }
            Err(e) => tracing::warn!(error = %e, "encoding an audit event failed"),
        }
    }
}

/// Reads an audit log written by [`AuditLog`] (or by kube-apiserver's log backend). A line that
/// is not an audit event, such as a torn last line, is an error naming its line number.
pub fn read_log(path: &Path) -> std::io::Result<Vec<AuditEvent>> {
    let reader = BufReader::new(File::open(path)?);
    let mut events = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let event = serde_json::from_str(&line).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}:{}: {e}", path.display(), i + 1))
        })?;
        events.push(event);
    }
    Ok(events)
}

/// `2026-11-24T15:34:27.123456Z`: the microsecond RFC 3339 form of `metav1.MicroTime`.
pub fn micro_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(verb: &str, code: u16) -> AuditEvent {
        AuditEvent {
            kind: "Event".into(),
            api_version: "audit.k8s.io/v1".into(),
            level: "Metadata".into(),
            audit_id: "4c1b9a7e-0000-4000-8000-000000000001".into(),
            stage: Stage::ResponseComplete,
            request_uri: "/api/v1/namespaces/a/pods".into(),
            verb: verb.into(),
            user: UserInfo { username: "sim".into(), groups: vec!["system:authenticated".into()] },
            source_ips: vec!["127.0.0.1".into()],
            user_agent: "fleet-worker/0.1.0 (w-1)".into(),
            object_ref: Some(ObjectReference {
                resource: "pods".into(),
                namespace: "a".into(),
                api_version: "v1".into(),
                ..ObjectReference::default()
            }),
            response_status: Some(ResponseStatus { metadata: Default::default(), code }),
            request_received_timestamp: "2026-11-24T15:34:27.000001Z".into(),
            stage_timestamp: "2026-11-24T15:34:27.000101Z".into(),
        }
    }

    #[test]
    fn micro_time_keeps_six_fractional_digits() {
        let t: jiff::Timestamp = "2026-11-24T15:34:27.5Z".parse().unwrap();
        assert_eq!(micro_time(t), "2026-11-24T15:34:27.500000Z");
        let t: jiff::Timestamp = "2026-11-24T15:34:27.123456789Z".parse().unwrap();
        assert_eq!(micro_time(t), "2026-11-24T15:34:27.123456Z");
    }

    #[test]
    fn events_serialize_with_upstreams_field_names() {
        let v = serde_json::to_value(event("create", 201)).unwrap();
        for key in [
            "auditID",
            "requestURI",
            "sourceIPs",
            "userAgent",
            "objectRef",
            "responseStatus",
            "requestReceivedTimestamp",
            "stageTimestamp",
        ] {
            assert!(v.get(key).is_some(), "{key} missing in {v}");
        }
        assert_eq!(v["objectRef"]["namespace"], "a");
        assert_eq!(v["stage"], "ResponseComplete");
        assert!(v["objectRef"].get("name").is_none(), "empty fields are omitted: {v}");
    }

    #[test]
    fn written_lines_read_back_in_order_and_classify_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let log = AuditLog::create(&path).unwrap();
        log.record(&event("create", 201));
        log.record(&event("list", 200));
        log.record(&event("patch", 409));
        drop(log);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let events = loop {
            let events = read_log(&path).unwrap();
            if events.len() == 3 || std::time::Instant::now() > deadline {
                break events;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(events.iter().map(|e| e.verb.as_str()).collect::<Vec<_>>(), ["create", "list", "patch"]);
        assert!(events[0].is_write() && events[0].succeeded());
        assert!(!events[1].is_write());
        assert!(events[2].is_write() && !events[2].succeeded());
    }

    #[test]
    fn a_torn_line_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, format!("{}\n{{\"kind\":", serde_json::to_string(&event("get", 200)).unwrap()))
            .unwrap();
        let err = read_log(&path).unwrap_err();
        assert!(err.to_string().contains("audit.log:2"), "{err}");
    }
}
