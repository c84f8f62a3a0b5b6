//! Logging setup: `tracing` events for every lifecycle step, off except warnings by default,
//! enabled by `--log-level` or `RUST_LOG`, written to stderr or `--log-file`, as text or
//! JSON. Never to stdout, which belongs to results.
//!
//! Level policy: whatever the final report already tells the user (refusals, failed writes,
//! failed launches) is logged at `info`, so default stderr carries only the report; `warn` and
//! `error` are for what the user would not otherwise learn.

use std::fs::OpenOptions;
use std::io::IsTerminal;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

use super::args::{LogFormat, LoggingArgs};

/// Keeps logging alive for the process lifetime (nothing to flush: writes are unbuffered).
pub struct LoggingGuard;

pub fn init(args: &LoggingArgs) -> Result<LoggingGuard, String> {
    let filter = match &args.log_level {
        Some(level) => {
            EnvFilter::try_new(level).map_err(|error| format!("--log-level {level}: {error}"))?
        }
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(FmtSpan::NONE)
        .with_target(true);
    let result = match (&args.log_file, args.log_format) {
        (Some(path), format) => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|error| format!("--log-file {}: {error}", path.display()))?;
            let builder = builder.with_ansi(false).with_writer(Mutex::new(file));
            match format {
                LogFormat::Text => builder.try_init(),
                LogFormat::Json => builder
                    .json()
                    .with_current_span(true)
                    .with_span_list(true)
                    .try_init(),
            }
        }
        (None, LogFormat::Text) => builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .try_init(),
        (None, LogFormat::Json) => builder
            .with_ansi(false)
            .with_writer(std::io::stderr)
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .try_init(),
    };
    result.map_err(|error| format!("cannot set up logging: {error}"))?;
    Ok(LoggingGuard)
}
