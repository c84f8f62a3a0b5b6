//! The wrappers' command line; a usage error is one diagnostic line, like every other message
//! of the wrapper.

use std::io::{self, Write};

use super::diagnostics::render_message;
use crate::usage::one_line;

/// A usage error of the wrapper's own command line (clap's default code; the runner records
/// any nonzero exit as `agent-failed`).
pub const EXIT_USAGE: i32 = 2;

/// Parses the wrapper's arguments with `command`; exits 0 after `--help` / `--version` and
/// [`EXIT_USAGE`] after a usage error.
pub fn parse_args<A: clap::FromArgMatches>(prefix: &'static str, command: clap::Command) -> A {
    match command
        .try_get_matches()
        .and_then(|matches| A::from_arg_matches(&matches))
    {
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
            let _ = io::stderr().write_all(&render_message(prefix, &line));
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
