//! Logging setup (docs/cli.md, "Global options"): warnings only by default, to stderr or
//! `--log-file`, never to stdout. What the final report already tells the user is logged at
//! `info`; `warn` and `error` are for what the user would not otherwise learn.
//!
//! The JSON lines have `tracing-subscriber`'s shape but come from [`JsonLines`] and
//! [`JsonFieldValues`]: the built-in formatter writes a Debug-recorded pid list as the string
//! `"[1, 2]"`; here a value that reads as a JSON array or object is written as one.

use std::fmt;
use std::sync::Mutex;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::{FmtSpan, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use super::args::{LogFormat, LoggingArgs};
use crate::platform::regular_file;

/// Why logging could not be set up as asked.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum LoggingError {
    #[error(
        "--log-level {directives}: unknown level '{directive}'; use {} or target=level directives",
        LEVELS.join(", ")
    )]
    UnknownLevel {
        directives: String,
        directive: String,
    },
    #[error("--log-level {directives}: {message}")]
    BadDirective { directives: String, message: String },
    #[error("--log-file {path}: {message}")]
    LogFile { path: String, message: String },
    #[error("cannot set up logging: {0}")]
    Setup(String),
}

/// Level names `--log-level` takes on their own.
const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// `tracing` reads a bare word as a target name, so a mistyped level (`--log-level inof`)
/// would silently log nothing. A bare directive must therefore be a level; targets are
/// given as `target=level`.
fn check_directives(directives: &str) -> Result<(), LoggingError> {
    for directive in directives.split(',').map(str::trim) {
        let bare = !directive.contains(['=', '[']);
        if bare
            && !LEVELS
                .iter()
                .any(|level| level.eq_ignore_ascii_case(directive))
        {
            return Err(LoggingError::UnknownLevel {
                directives: directives.to_owned(),
                directive: directive.to_owned(),
            });
        }
    }
    Ok(())
}

/// Installs the global subscriber for the process lifetime (writes are unbuffered, so there
/// is nothing to flush at exit).
pub(super) fn init(args: &LoggingArgs) -> Result<(), LoggingError> {
    let filter = match &args.log_level {
        Some(level) => {
            check_directives(level)?;
            EnvFilter::try_new(level).map_err(|error| LoggingError::BadDirective {
                directives: level.clone(),
                message: error.to_string(),
            })?
        }
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    let writer = match &args.log_file {
        // A FIFO or a terminal as the log file would block the open, then every logged line:
        // only a regular file (or the null device) is accepted.
        Some(path) => BoxMakeWriter::new(Mutex::new(regular_file::open_for_append(path).map_err(
            |error| LoggingError::LogFile {
                path: path.display().to_string(),
                message: error.to_string(),
            },
        )?)),
        None => BoxMakeWriter::new(std::io::stderr),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(FmtSpan::NONE)
        .with_target(true)
        .with_ansi(
            args.log_file.is_none()
                && crate::report::terminal::colour(crate::report::terminal::Stream::Stderr),
        )
        .with_writer(writer);
    let result = match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .fmt_fields(JsonFieldValues)
            .event_format(JsonLines)
            .try_init(),
    };
    result.map_err(|error| LoggingError::Setup(error.to_string()))
}

/// One JSON object per event: `timestamp`, `level`, `fields`, `target`, and inside a span
/// `span` (the current one) and `spans` (root first), each span's fields with its `name`.
struct JsonLines;

impl<S> FormatEvent<S, JsonFieldValues> for JsonLines
where
    S: Subscriber + for<'lookup> LookupSpan<'lookup>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFieldValues>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        let metadata = event.metadata();
        let mut fields = FieldValues::default();
        event.record(&mut fields);
        let mut line = Map::new();
        line.insert("timestamp".into(), Value::String(timestamp));
        line.insert("level".into(), metadata.level().as_str().into());
        line.insert("fields".into(), Value::Object(fields.0));
        line.insert("target".into(), metadata.target().into());
        let current = event
            .parent()
            .and_then(|id| ctx.span(id))
            .or_else(|| ctx.lookup_current());
        if let Some(current) = current {
            line.insert("span".into(), span_object(&current));
            let spans = current
                .scope()
                .from_root()
                .map(|span| span_object(&span))
                .collect();
            line.insert("spans".into(), Value::Array(spans));
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// A span's recorded fields (kept as a JSON object by [`JsonFieldValues`]) and its `name`.
fn span_object<S>(span: &SpanRef<'_, S>) -> Value
where
    S: for<'lookup> LookupSpan<'lookup>,
{
    let mut object = span
        .extensions()
        .get::<FormattedFields<JsonFieldValues>>()
        .and_then(|fields| serde_json::from_str::<Map<String, Value>>(fields).ok())
        .unwrap_or_default();
    object.insert("name".into(), span.metadata().name().into());
    Value::Object(object)
}

/// Formats span fields as a JSON object, with [`FieldValues`]' rules.
struct JsonFieldValues;

impl<'writer> FormatFields<'writer> for JsonFieldValues {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut values = FieldValues::default();
        fields.record(&mut values);
        write!(writer, "{}", Value::Object(values.0))
    }

    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let mut values = FieldValues(serde_json::from_str(current).unwrap_or_default());
        fields.record(&mut values);
        current.fields = Value::Object(values.0).to_string();
        Ok(())
    }
}

/// Recorded fields as JSON values: numbers, booleans and strings as themselves; a Debug or
/// Display value (`?pids`, `%id`) as its text, unless that text is a JSON array or object
/// (`[1, 2]`), which is written as such. The message is always text.
#[derive(Default)]
struct FieldValues(Map<String, Value>);

impl Visit for FieldValues {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        let structured = field.name() != "message" && text.starts_with(['[', '{']);
        let value = structured
            .then(|| serde_json::from_str::<Value>(&text).ok())
            .flatten()
            .unwrap_or(Value::String(text));
        self.0.insert(field.name().into(), value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        let value = i64::try_from(value).map_or_else(|_| value.to_string().into(), Value::from);
        self.0.insert(field.name().into(), value);
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        let value = u64::try_from(value).map_or_else(|_| value.to_string().into(), Value::from);
        self.0.insert(field.name().into(), value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // NaN and infinities have no JSON number: their text.
        let value = serde_json::Number::from_f64(value)
            .map_or_else(|| value.to_string().into(), Value::Number);
        self.0.insert(field.name().into(), value);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().into(), value.to_string().into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_directives_must_be_levels() {
        for good in [
            "info",
            "DEBUG",
            "off",
            "warn,ai_session_handler=trace",
            "ai_session_handler::actors=debug",
        ] {
            assert_eq!(check_directives(good), Ok(()), "{good}");
        }
        assert_eq!(
            check_directives("inof").unwrap_err().to_string(),
            "--log-level inof: unknown level 'inof'; use off, error, warn, info, debug, trace or target=level directives"
        );
        assert!(check_directives("info,ai_session_handler").is_err());
    }

    #[test]
    fn a_json_log_line_keeps_lists_as_lists_and_text_as_text() {
        use std::sync::Arc;
        use tracing_subscriber::fmt::MakeWriter;

        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        impl<'a> MakeWriter<'a> for Buffer {
            type Writer = Buffer;
            fn make_writer(&'a self) -> Buffer {
                self.clone()
            }
        }

        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(buffer.clone())
            .fmt_fields(JsonFieldValues)
            .event_format(JsonLines)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let run = tracing::info_span!("run", run_id = "r-1");
            let _run = run.enter();
            let attempt = tracing::info_span!("attempt", attempt_id = tracing::field::Empty);
            attempt.record("attempt_id", "a-1");
            let _attempt = attempt.enter();
            let leaked: Vec<u32> = vec![12, 34];
            let nothing: Vec<u32> = Vec::new();
            tracing::info!(
                leaked = ?leaked,
                escaped = ?nothing,
                odd = ?["\u{1b}"],
                id = %"0.7",
                seconds = 1.5,
                pid = 42u32,
                "[1] looks like a list"
            );
        });
        let bytes = buffer.0.lock().unwrap().clone();
        let line: Value = serde_json::from_slice(&bytes).unwrap();
        let fields = &line["fields"];
        assert_eq!(fields["leaked"], serde_json::json!([12, 34]));
        assert_eq!(fields["escaped"], serde_json::json!([]));
        // Debug text that only looks like JSON stays text.
        assert_eq!(fields["odd"], "[\"\\u{1b}\"]");
        assert_eq!(fields["id"], "0.7");
        assert_eq!(fields["seconds"], 1.5);
        assert_eq!(fields["pid"], 42);
        assert_eq!(fields["message"], "[1] looks like a list");
        assert_eq!(line["level"], "INFO");
        assert!(line["timestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(
            line["span"],
            serde_json::json!({"attempt_id": "a-1", "name": "attempt"})
        );
        assert_eq!(
            line["spans"],
            serde_json::json!([
                {"run_id": "r-1", "name": "run"},
                {"attempt_id": "a-1", "name": "attempt"}
            ])
        );
    }
}
