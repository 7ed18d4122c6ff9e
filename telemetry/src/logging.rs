//! The log every binary writes to stderr: human-readable text, or one JSON object per line for
//! log shippers (`--log-format`, `FLEET_LOG_FORMAT`). `RUST_LOG` filters either, as before.

use std::ffi::OsString;
use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{DefaultFields, Format, Full, Json, JsonFields};
use tracing_subscriber::fmt::{MakeWriter, SubscriberBuilder};

/// `--log-format`: `text`, one human-readable line per event; or `json`, one JSON object per line
/// (timestamp, level, target, message, the event's fields, and the spans it happened in: `span`,
/// `spans`).
// The variants have no doc comments: clap would print them under the flag and lay out every
// flag's help on lines of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Whether text lines may carry ANSI colour: only on a terminal, and never when `NO_COLOR` is
/// set to anything but the empty string (no-color.org). A container's stderr is no terminal, so
/// its shipped log has no escape codes.
pub fn colour_wanted(stderr_is_terminal: bool, no_color: Option<OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Sets the process's log to stderr in `format`, filtered by `RUST_LOG`, else by
/// `default_filter` (an `EnvFilter` directive such as `info,hyper=warn`).
pub fn init_logging(format: LogFormat, default_filter: &str) {
    let colour = colour_wanted(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR"));
    init_logging_to(format, default_filter, std::io::stderr, colour);
}

/// [`init_logging`] to `writer`, with colour as `colour` says (a file never wants it).
pub fn init_logging_to<W>(format: LogFormat, default_filter: &str, writer: W, colour: bool)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer);
    let result = match format {
        LogFormat::Text => builder.with_ansi(colour).try_init(),
        LogFormat::Json => json_lines(builder).try_init(),
    };
    // Only a second set-up in one process fails; the first one stays.
    if let Err(e) = result {
        eprintln!("the log was already set up: {e}");
    }
}

/// The last line of a binary that gives up once its log is set up: `PROGRAM: message` in text,
/// as before; an error event in JSON, so that a log shipper reads it like every other line.
pub fn log_exit(format: LogFormat, program: &str, message: impl std::fmt::Display) {
    match format {
        LogFormat::Text => eprintln!("{program}: {message}"),
        LogFormat::Json => tracing::error!("{message}"),
    }
}

/// The JSON shape: the event's fields beside timestamp, level and target (not under `fields`),
/// and the spans it happened in, so a line names the reconcile or the move it belongs to.
fn json_lines<F, W>(
    builder: SubscriberBuilder<DefaultFields, Format<Full>, F, W>,
) -> SubscriberBuilder<JsonFields, Format<Json>, F, W> {
    builder.json().flatten_event(true).with_current_span(true).with_span_list(true)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour_wanted(true, None));
        assert!(colour_wanted(true, Some(OsString::new())), "an empty NO_COLOR does not count");
        assert!(!colour_wanted(true, Some(OsString::from("1"))));
        assert!(!colour_wanted(false, None));
    }

    #[test]
    fn a_json_line_has_the_event_fields_flat_and_the_spans_it_is_in() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = json_lines(tracing_subscriber::fmt().with_writer(move || writer.clone()))
            .with_max_level(tracing::Level::INFO)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                "reconcile",
                controller = "job",
                key = "ns/a",
                shard = 7u32,
                epoch = 3u64
            );
            let _entered = span.enter();
            tracing::info!(attempt = 2, "synced");
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["message"], "synced");
        assert_eq!(line["attempt"], 2);
        assert!(line["timestamp"].is_string());
        assert!(line["target"].as_str().unwrap().starts_with("batchfleet_telemetry"));
        assert_eq!(line["span"]["name"], "reconcile");
        assert_eq!(line["span"]["key"], "ns/a");
        assert_eq!(line["span"]["shard"], 7);
        assert_eq!(line["spans"][0]["epoch"], 3);
    }
}
