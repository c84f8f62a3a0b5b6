//! Logging setup: `tracing` events for every lifecycle step, off except warnings by default,
//! enabled by `--log-level` or `RUST_LOG`, written to stderr or `--log-file`, as text or
//! JSON. Never to stdout, which belongs to results.
//!
//! Level policy: whatever the final report already tells the user (refusals, failed writes,
//! failed launches) is logged at `info`, so default stderr carries only the report; `warn` and
//! `error` are for what the user would not otherwise learn.

use std::io::IsTerminal;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

use super::args::{LogFormat, LoggingArgs};
use crate::platform::regular_file;

/// Why logging could not be set up as asked.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoggingError {
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
pub fn init(args: &LoggingArgs) -> Result<(), LoggingError> {
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
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(FmtSpan::NONE)
        .with_target(true);
    let result = match (&args.log_file, args.log_format) {
        (Some(path), format) => {
            // A FIFO or a terminal as the log file would block the open, then every logged
            // line: only a regular file (or the null device) is accepted.
            let file =
                regular_file::open_for_append(path).map_err(|error| LoggingError::LogFile {
                    path: path.display().to_string(),
                    message: error.to_string(),
                })?;
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
    result.map_err(|error| LoggingError::Setup(error.to_string()))
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
}
