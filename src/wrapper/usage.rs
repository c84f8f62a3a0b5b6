//! The wrappers' command line: parsing, and usage errors as one diagnostic line.
//!
//! A wrapper's stderr is read by the runner as diagnostics, line by line, so a usage error is
//! folded into one line by the shared leaf `crate::usage` and rendered like every other
//! message of the wrapper (prefixed, `<` escaped). `--help` and `--version` print as usual.

use std::io::{self, Write};

use super::diagnostics::DiagnosticRenderer;
use crate::usage::one_line;

/// A usage error of the wrapper's own command line (clap's default code; the runner records
/// any nonzero exit as `agent-failed`).
pub const EXIT_USAGE: i32 = 2;

/// Parses the wrapper's arguments; exits 0 after `--help` / `--version` and [`EXIT_USAGE`]
/// after a usage error.
pub fn parse_args<A: clap::Parser>(prefix: &'static str) -> A {
    match A::try_parse() {
        Ok(args) => args,
        Err(error) => {
            use clap::error::ErrorKind;
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) {
                let _ = error.print();
                std::process::exit(0);
            }
            let line = one_line(&error.render().to_string());
            let _ = io::stderr().write_all(&DiagnosticRenderer::message(prefix, &line));
            std::process::exit(EXIT_USAGE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unexpected_argument_with_a_tip_is_one_line() {
        let rendered = "error: unexpected argument '--modle' found\n\n  tip: a similar argument exists: '--model'\n\nUsage: ai-session-handler-codex-high --model <MODEL>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "error: unexpected argument '--modle' found; tip: a similar argument exists: '--model'; see 'ai-session-handler-codex-high --help'"
        );
    }

    #[test]
    fn a_missing_value_keeps_the_option_name() {
        let rendered = "error: a value is required for '--model <MODEL>' but none was supplied\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "error: a value is required for '--model <MODEL>' but none was supplied; see --help"
        );
    }
}
