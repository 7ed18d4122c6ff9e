//! Every process's log is free of panics and ERROR lines.

use std::path::Path;

use crate::Outcome;

/// The text of a line without ANSI colour sequences (tracing colours its level).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters… final byte in @..~
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether a log line is a panic or logged at ERROR (tracing's fmt: `TIME  LEVEL target: …`).
pub fn is_error_line(line: &str) -> bool {
    let line = plain(line);
    line.contains("panicked at") || line.split_whitespace().take(3).any(|w| w == "ERROR")
}

/// An ERROR line a fault makes a process write on purpose (a paused worker's lease lapses, a
/// client logs the 5xx the sim injects).
#[derive(Debug, Clone)]
pub struct ExpectedError {
    /// The process that writes it; `None` for any.
    pub process: Option<String>,
    /// Text the line contains.
    pub contains: String,
}

/// The panic and ERROR lines of each `(process name, log file)`, except those `expected`; an
/// unreadable log is one too.
pub fn no_errors_logged<'a>(
    logs: impl IntoIterator<Item = (&'a str, &'a Path)>,
    expected: &[ExpectedError],
) -> Outcome {
    let mut violations = Vec::new();
    let mut checked = 0;
    let mut excused = 0;
    for (process, path) in logs {
        checked += 1;
        match std::fs::read(path) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                for (i, line) in text.lines().enumerate().filter(|(_, l)| is_error_line(l)) {
                    let line = plain(line);
                    if expected.iter().any(|e| {
                        e.process.as_deref().is_none_or(|p| p == process) && line.contains(&e.contains)
                    }) {
                        excused += 1;
                        continue;
                    }
                    violations.push(format!("{process} ({}:{}): {line}", path.display(), i + 1));
                }
            }
            Err(e) => violations.push(format!("{process}: cannot read {}: {e}", path.display())),
        }
    }
    let mut outcome = Outcome::from_violations(
        "no-panic-or-error-logged",
        "no panic or ERROR line in any process log, but those a fault causes",
        checked,
        "process logs",
        violations,
    );
    outcome.measured.push_str(&format!(" ({excused} expected after faults)"));
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_and_error_lines_fail_and_warnings_pass() {
        assert!(is_error_line("2026-11-26T10:00:00.1Z \u{1b}[31mERROR\u{1b}[0m worker: boom"));
        assert!(is_error_line("thread 'main' panicked at worker/src/x.rs:1:1:"));
        assert!(!is_error_line("2026-11-26T10:00:00.1Z  WARN worker: reconnecting"));
        assert!(!is_error_line("2026-11-26T10:00:00.1Z  INFO worker: job ERRORS-1 done"));
        let dir = std::env::temp_dir().join(format!("audits-logs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (good, bad) = (dir.join("good.log"), dir.join("bad.log"));
        std::fs::write(&good, "2026-11-26T10:00:00Z  INFO started\n").expect("write");
        std::fs::write(&bad, "2026-11-26T10:00:00Z  INFO started\n2026-11-26T10:00:01Z ERROR lost\n")
            .expect("write");
        assert!(no_errors_logged([("w-0", good.as_path())], &[]).passed);
        let outcome = no_errors_logged([("w-0", good.as_path()), ("w-1", bad.as_path())], &[]);
        let lapse = |process: &str| ExpectedError { process: Some(process.into()), contains: "lost".into() };
        let excused = no_errors_logged([("w-1", bad.as_path())], &[lapse("w-1")]);
        let elsewhere = no_errors_logged([("w-1", bad.as_path())], &[lapse("w-0")]);
        let anywhere = ExpectedError { process: None, contains: "lost".into() };
        let excused_anywhere = no_errors_logged([("w-1", bad.as_path())], &[anywhere]);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(!outcome.passed);
        assert!(outcome.violations[0].starts_with("w-1 ("), "{outcome:?}");
        assert!(excused.passed && excused.measured.ends_with("(1 expected after faults)"), "{excused:?}");
        assert!(!elsewhere.passed, "{elsewhere:?}");
        assert!(excused_anywhere.passed, "{excused_anywhere:?}");
    }
}
