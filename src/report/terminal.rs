//! What a terminal gets beyond plain lines: colour where cargo and nextest use it (the
//! `error:` and `warning:` labels, a phase's end by how it ended, the dim status-change line),
//! and whether transient lines (`\r`, erase-line) may be drawn at all.
//!
//! Colour is decided per stream: `--color always|never` (written once by `main` as the
//! process-wide choice, which clap's own `--help` follows too) wins; under `auto` it is off when
//! `NO_COLOR` is set (not empty), `CLICOLOR=0`, `TERM=dumb` or the stream is not a terminal,
//! and on with `CLICOLOR_FORCE` (docs/cli.md, "Global options"). Unlike anstream's `auto`, a
//! terminal without any `TERM` is coloured, as it always was here.

use std::borrow::Cow;
use std::io::IsTerminal;

use anstream::ColorChoice;
use anstyle::{AnsiColor, Style};

use crate::domain::exit_code::ExitCode;
use crate::domain::state::AttemptStatus;

/// The standard stream a line goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

const ERROR: Style = AnsiColor::Red.on_default().bold();
const WARNING: Style = AnsiColor::Yellow.on_default().bold();
const SUCCESS: Style = AnsiColor::Green.on_default();
const STOPPED: Style = AnsiColor::Yellow.on_default();
const FAILED: Style = AnsiColor::Red.on_default();
const DIM: Style = Style::new().dimmed();

/// Whether lines written to `stream` are coloured.
pub(crate) fn colour(stream: Stream) -> bool {
    match ColorChoice::global() {
        ColorChoice::Always | ColorChoice::AlwaysAnsi => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            let set = |name| std::env::var_os(name).is_some_and(|value| !value.is_empty());
            if set("NO_COLOR") {
                false
            } else if set("CLICOLOR_FORCE") {
                true
            } else {
                std::env::var_os("CLICOLOR").is_none_or(|value| value != "0") && redraws(stream)
            }
        }
    }
}

/// Whether `stream` is a terminal that takes escape sequences (a transient line is rewritten
/// with `\r` and erase-line): a terminal whose `TERM` is not `dumb`, as cargo decides for its
/// progress bar.
pub(crate) fn redraws(stream: Stream) -> bool {
    let terminal = match stream {
        Stream::Stdout => std::io::stdout().is_terminal(),
        Stream::Stderr => std::io::stderr().is_terminal(),
    };
    terminal && std::env::var_os("TERM").is_none_or(|term| term != "dumb")
}

/// `line` with its leading `error:` or `warning:` label coloured when `stream` is.
pub(crate) fn label(line: &str, stream: Stream) -> Cow<'_, str> {
    let (style, label) = if let Some(rest) = line.strip_prefix("error:") {
        (ERROR, (&line[..line.len() - rest.len()], rest))
    } else if let Some(rest) = line.strip_prefix("warning:") {
        (WARNING, (&line[..line.len() - rest.len()], rest))
    } else {
        return Cow::Borrowed(line);
    };
    if !colour(stream) {
        return Cow::Borrowed(line);
    }
    let (label, rest) = label;
    Cow::Owned(format!("{style}{label}{style:#}{rest}"))
}

/// A phase's end line (`phase-2 timeout in 2.0s · …`) in the colour of how the phase ended,
/// when stderr is coloured: green when it completed, yellow when it stopped for a person
/// (blocked, clarification), red for a failure.
pub(crate) fn phase_end(line: &str, status: AttemptStatus) -> Cow<'_, str> {
    let style = match status.exit_code() {
        ExitCode::Success => SUCCESS,
        ExitCode::Blocked | ExitCode::NeedsClarification => STOPPED,
        ExitCode::AgentFailed | ExitCode::InvalidInput | ExitCode::Signal(_) => FAILED,
    };
    if colour(Stream::Stderr) {
        Cow::Owned(format!("{style}{line}{style:#}"))
    } else {
        Cow::Borrowed(line)
    }
}

/// `line` dimmed when stderr is coloured (the agent's words about itself, beside its output).
pub(crate) fn dim(line: &str) -> Cow<'_, str> {
    if colour(Stream::Stderr) {
        Cow::Owned(format!("{DIM}{line}{DIM:#}"))
    } else {
        Cow::Borrowed(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The only test that changes the process-wide choice: no other may depend on it.
    #[test]
    fn labels_and_end_lines_are_coloured_only_when_colour_is_on() {
        let complete = "phase-1 complete in 1s";
        ColorChoice::Never.write_global();
        assert_eq!(label("error: x", Stream::Stderr), "error: x");
        assert_eq!(phase_end(complete, AttemptStatus::PhaseComplete), complete);
        ColorChoice::Always.write_global();
        assert_eq!(
            label("error: x: y", Stream::Stderr),
            "\x1b[1m\x1b[31merror:\x1b[0m x: y"
        );
        assert_eq!(
            label("warning: x", Stream::Stdout),
            "\x1b[1m\x1b[33mwarning:\x1b[0m x"
        );
        assert_eq!(label("note: x", Stream::Stderr), "note: x");
        assert_eq!(
            phase_end(complete, AttemptStatus::PhaseComplete),
            "\x1b[32mphase-1 complete in 1s\x1b[0m"
        );
        assert_eq!(
            phase_end("phase-2 blocked in 1s", AttemptStatus::Blocked),
            "\x1b[33mphase-2 blocked in 1s\x1b[0m"
        );
        assert_eq!(
            phase_end("phase-2 timeout in 1s", AttemptStatus::Timeout),
            "\x1b[31mphase-2 timeout in 1s\x1b[0m"
        );
        ColorChoice::Auto.write_global();
    }
}
