//! The wrappers' command line: parsing, and usage errors as one diagnostic line.
//!
//! clap reports a usage error over several lines (the error, a tip, the usage, a pointer to
//! `--help`). A wrapper's stderr is read by the runner as diagnostics, line by line, so the
//! report is folded into one line — the error, any tip, and the command whose `--help`
//! explains it — and rendered like every other message of the wrapper (prefixed, `<`
//! escaped). `--help` and `--version` print as usual.

use std::io::{self, Write};

use super::diagnostics::DiagnosticRenderer;

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

/// Folds clap's rendered usage error into one line:
/// `error: unexpected argument '--bogus' found; see 'ai-session-handler-codex-high --help'`.
pub fn one_line(rendered: &str) -> String {
    let mut problem = String::new();
    let mut tips = Vec::new();
    let mut command = None;
    for paragraph in rendered.split("\n\n") {
        let text = paragraph
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        if text.is_empty() || text.starts_with("For more information") {
            continue;
        }
        if let Some(usage) = text.strip_prefix("Usage: ") {
            // `ai-session-handler-codex-high [OPTIONS]` → `ai-session-handler-codex-high`
            let words: Vec<&str> = usage
                .split_whitespace()
                .take_while(|word| !word.starts_with(['-', '<', '[']))
                .collect();
            command = Some(words.join(" "));
        } else if problem.is_empty() && !text.starts_with("tip:") {
            problem = text;
        } else {
            tips.push(text);
        }
    }
    let mut line = if problem.starts_with("error:") {
        problem
    } else {
        format!("error: {problem}")
    };
    for tip in tips {
        line.push_str("; ");
        line.push_str(&tip);
    }
    match command {
        Some(command) if !command.is_empty() => line.push_str(&format!("; see '{command} --help'")),
        _ => line.push_str("; see --help"),
    }
    line
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
