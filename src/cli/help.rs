//! What `--help` and `man` say beyond the flags clap derives: each command's synopsis
//! (generated from the parser's own definition), the global options under a heading of their
//! own, and the EXIT STATUS and EXAMPLES sections. `--help` is wrapped to the terminal (at most
//! [`MAX_HELP_WIDTH`] columns). [`command`] is the definition the parser, `completions` and
//! `man` all use.

use clap::{Arg, ArgAction, Command, CommandFactory};
use nix::libc::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};

use super::args::Cli;
use crate::domain::exit_code::ExitCode;

/// The help heading of the logging options, which every command accepts.
pub(super) const GLOBAL_HEADING: &str = "Global options";

/// The program's name as installed.
const PROGRAM: &str = "ai-session-handler";

/// The widest `--help` gets, however wide the terminal: longer lines are hard to read.
const MAX_HELP_WIDTH: usize = 100;

/// How far a wrapped synopsis line is indented under `Usage: `.
const USAGE_INDENT: usize = "Usage: ".len() + 4;

/// The command-line definition with synopses and the extra help sections applied, wrapped to
/// the terminal `--help` is printed on.
pub(super) fn command() -> Command {
    command_for(Some(help_width()))
}

/// The definition with the synopses unwrapped, one form a line: the manual page's (the
/// formatter wraps them itself).
pub(super) fn command_unwrapped() -> Command {
    command_for(None)
}

fn command_for(width: Option<usize>) -> Command {
    let text_width = width.unwrap_or(MAX_HELP_WIDTH);
    let mut root = Cli::command().term_width(text_width);
    let names: Vec<String> = root
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    for name in names {
        root = root.mut_subcommand(&name, |sub| {
            let usage = usage(&format!("{PROGRAM} {name}"), &sub, width);
            let sub = sub.override_usage(usage).term_width(text_width);
            match name.as_str() {
                "run" => sub.after_help(sections_text(
                    &run_exit_status(),
                    &run_examples(),
                    text_width,
                )),
                _ => sub,
            }
        });
    }
    let usage = format!("{PROGRAM} [GLOBAL OPTIONS] <COMMAND>");
    root.override_usage(usage).after_long_help(sections_text(
        &run_exit_status(),
        &main_examples(),
        text_width,
    ))
}

/// The width `--help` is wrapped to: the terminal's (stdout's), else `COLUMNS`, else 100 — what
/// clap itself would pick — and at most [`MAX_HELP_WIDTH`].
fn help_width() -> usize {
    let terminal = console::Term::stdout()
        .size_checked()
        .map(|(_, columns)| usize::from(columns));
    let columns = terminal.or_else(|| std::env::var("COLUMNS").ok()?.trim().parse::<usize>().ok());
    columns
        .filter(|columns| *columns > 0)
        .unwrap_or(MAX_HELP_WIDTH)
        .min(MAX_HELP_WIDTH)
}

/// The `Usage:` text: the synopsis ([`synopsis_items`]), then, for a command that takes a plan, the form with
/// the plan alone; wrapped to `width` (less `Usage: `) with the continuation lines indented,
/// or one form a line when `width` is `None`.
fn usage(name: &str, command: &Command, width: Option<usize>) -> String {
    let mut forms = vec![synopsis_items(name, command)];
    if command
        .get_arguments()
        .any(|arg| arg.get_id() == PLAN_POSITIONAL)
    {
        forms.push(vec![
            name.to_owned(),
            "<PLAN>".to_owned(),
            "[OPTIONS]".to_owned(),
        ]);
    }
    let Some(width) = width else {
        return forms
            .iter()
            .map(|form| form.join(" "))
            .collect::<Vec<_>>()
            .join("\n");
    };
    let indent = " ".repeat(USAGE_INDENT);
    let mut lines = Vec::new();
    for (index, form) in forms.iter().enumerate() {
        // The first line follows `Usage: `; a later form starts under the first.
        let first_indent = if index == 0 {
            String::new()
        } else {
            " ".repeat(7)
        };
        let wrapped = wrap(
            form,
            width.saturating_sub(7),
            width.saturating_sub(USAGE_INDENT),
        );
        for (line_index, line) in wrapped.into_iter().enumerate() {
            let lead = if line_index == 0 {
                &first_indent
            } else {
                &indent
            };
            lines.push(format!("{lead}{line}"));
        }
    }
    lines.join("\n")
}

/// `words` in lines of at most `first` columns for the first line and `rest` for the others
/// (a longer word stands alone on its line).
fn wrap<S: AsRef<str>>(words: &[S], first: usize, rest: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in words.iter().map(AsRef::as_ref) {
        let limit = if lines.is_empty() { first } else { rest };
        if !line.is_empty() && line.len() + 1 + word.len() > limit {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` split at spaces outside double quotes, so a quoted argument of an example command
/// (`--agent-cmd "codex exec"`) is never cut in two.
fn words(text: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = None;
    let mut quoted = false;
    for (index, c) in text.char_indices() {
        if c == ' ' && !quoted {
            if let Some(begin) = start.take() {
                words.push(&text[begin..index]);
            }
            continue;
        }
        if c == '"' {
            quoted = !quoted;
        }
        start.get_or_insert(index);
    }
    if let Some(begin) = start {
        words.push(&text[begin..]);
    }
    words
}

/// The id of the positional plan argument (`status docs/plans/x.md`).
const PLAN_POSITIONAL: &str = "plan-path";

/// The synopsis, `ai-session-handler run --plan <PATH> [--agent-cmd <TEMPLATE>] … [GLOBAL
/// OPTIONS]`, as the items it is wrapped in (`[--max-tokens <N>]` is one): the required
/// options first (`--plan` counts as one: it or the positional plan is), then the others in
/// their order, positionals last (the positional plan is the other form).
fn synopsis_items(name: &str, command: &Command) -> Vec<String> {
    let own: Vec<&Arg> = command
        .get_arguments()
        .filter(|arg| {
            !arg.is_hide_set()
                && !arg.is_global_set()
                && arg.get_help_heading() != Some(GLOBAL_HEADING)
                && !matches!(arg.get_action(), ArgAction::Help | ArgAction::Version)
                && arg.get_id() != PLAN_POSITIONAL
        })
        .collect();
    let mut words = vec![name.to_owned()];
    let options = own.iter().filter(|arg| !arg.is_positional());
    let (required, optional): (Vec<&&Arg>, Vec<&&Arg>) =
        options.partition(|arg| arg.is_required_set() || arg.get_id() == "plan");
    for arg in required {
        words.push(option_word(arg));
    }
    for arg in optional {
        words.push(format!("[{}]", option_word(arg)));
    }
    for arg in own.iter().filter(|arg| arg.is_positional()) {
        let value = value_name(arg);
        words.push(if arg.is_required_set() {
            format!("<{value}>")
        } else {
            format!("[{value}]")
        });
    }
    words.push("[GLOBAL OPTIONS]".to_owned());
    words
}

/// `--plan <PATH>`, `--quiet`, `--stop-on-regex <REGEX>...`.
fn option_word(arg: &Arg) -> String {
    let long = arg.get_long().unwrap_or_else(|| arg.get_id().as_str());
    let takes_value = arg.get_num_args().is_some_and(|range| range.takes_values())
        || matches!(arg.get_action(), ArgAction::Set | ArgAction::Append);
    let mut word = format!("--{long}");
    if takes_value {
        word.push_str(&format!(" <{}>", value_name(arg)));
    }
    if matches!(arg.get_action(), ArgAction::Append) {
        word.push_str("...");
    }
    word
}

fn value_name(arg: &Arg) -> String {
    arg.get_value_names()
        .and_then(|names| names.first())
        .map_or_else(|| arg.get_id().as_str().to_uppercase(), ToString::to_string)
}

/// One row of an EXIT STATUS section: the code and what it means.
pub(super) struct ExitRow {
    pub code: String,
    pub meaning: &'static str,
}

/// One example: what it does and the command.
pub(super) struct Example {
    pub what: &'static str,
    pub command: &'static str,
}

/// Every exit code `run` can end with (the other commands use 0 and 5).
pub(super) fn run_exit_status() -> Vec<ExitRow> {
    let code = |exit: ExitCode| exit.code().to_string();
    let signals = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
        .map(|signal| code(ExitCode::Signal(signal)))
        .join("/");
    vec![
        ExitRow {
            code: code(ExitCode::Success),
            meaning: "every phase is complete, or the phase limit was reached",
        },
        ExitRow {
            code: code(ExitCode::Blocked),
            meaning: "a phase reported phase-blocked",
        },
        ExitRow {
            code: code(ExitCode::NeedsClarification),
            meaning: "a phase reported phase-needs-clarification",
        },
        ExitRow {
            code: code(ExitCode::AgentFailed),
            meaning: "agent failure: nonzero exit, timeout, stop regex, budget cap, result block, launch, I/O",
        },
        ExitRow {
            code: code(ExitCode::InvalidInput),
            meaning: "invalid input or a refused run: nothing was launched or changed",
        },
        ExitRow {
            code: signals,
            meaning: "interrupted by SIGINT, SIGTERM, SIGHUP or SIGQUIT (128 + signal)",
        },
    ]
}

pub(super) fn run_examples() -> Vec<Example> {
    vec![
        Example {
            what: "Run every remaining phase with Codex",
            command: "ai-session-handler run --plan docs/plans/feature.md --agent-cmd \"codex exec\"",
        },
        Example {
            what: "Run one phase, quietly, for a calling agent that reads the JSON result",
            command: "ai-session-handler run --plan docs/plans/feature.md --max-phases 1 --json --quiet",
        },
        Example {
            what: "Continue after answering a clarification in the plan",
            command: "ai-session-handler run --plan docs/plans/feature.md --retry-stopped --accept-plan-change",
        },
        Example {
            what: "Retry failed attempts twice and wait out rate limits",
            command: "ai-session-handler run --plan docs/plans/feature.md --retries 2 --wait",
        },
    ]
}

fn main_examples() -> Vec<Example> {
    vec![
        Example {
            what: "Make the current directory a plan workspace",
            command: "ai-session-handler init",
        },
        Example {
            what: "Check a plan and its config without running anything",
            command: "ai-session-handler check --plan docs/plans/feature.md",
        },
        Example {
            what: "Run it, then see where it stands",
            command: "ai-session-handler run --plan docs/plans/feature.md && ai-session-handler status --plan docs/plans/feature.md",
        },
    ]
}

/// The two sections as `--help` text, wrapped to `width`: a meaning under its own column, a
/// long example command continued with ` \` on the next line.
fn sections_text(exit_status: &[ExitRow], examples: &[Example], width: usize) -> String {
    let code_width = exit_status
        .iter()
        .map(|row| row.code.len())
        .max()
        .unwrap_or(0);
    let meaning_column = 2 + code_width + 2;
    let mut text = String::from("Exit status:\n");
    for row in exit_status {
        let meaning_width = width.saturating_sub(meaning_column);
        let meaning: Vec<&str> = row.meaning.split(' ').collect();
        for (index, line) in wrap(&meaning, meaning_width, meaning_width)
            .iter()
            .enumerate()
        {
            let code = if index == 0 { row.code.as_str() } else { "" };
            text.push_str(&format!("  {code:<code_width$}  {line}\n"));
        }
    }
    text.push_str("\nExamples:\n");
    for example in examples {
        let what: Vec<&str> = example.what.split(' ').collect();
        let what = wrap(&what, width.saturating_sub(3), width.saturating_sub(4));
        text.push_str(&format!("  {}:\n", what.join("\n  ")));
        // Room for the indent and the ` \` that continues a line.
        let lines = wrap(
            &words(example.command),
            width.saturating_sub(6),
            width.saturating_sub(8),
        );
        let last = lines.len().saturating_sub(1);
        for (index, line) in lines.iter().enumerate() {
            let indent = if index == 0 { "    " } else { "      " };
            let more = if index < last { " \\" } else { "" };
            text.push_str(&format!("{indent}{line}{more}\n"));
        }
    }
    text.trim_end().to_owned()
}

/// The EXIT STATUS and EXAMPLES sections of a manual page, or `None` for a command without
/// them.
pub(super) fn man_sections(command: Option<&str>) -> Option<(Vec<ExitRow>, Vec<Example>)> {
    match command {
        None => Some((run_exit_status(), main_examples())),
        Some("run") => Some((run_exit_status(), run_examples())),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage_of(name: &str) -> String {
        let command = command_unwrapped();
        let sub = command.find_subcommand(name).unwrap();
        synopsis_items(&format!("{PROGRAM} {name}"), sub).join(" ")
    }

    #[test]
    fn synopses_put_the_plan_first_and_show_every_value() {
        assert_eq!(
            usage_of("run"),
            "ai-session-handler run --plan <PATH> [--agent-cmd <TEMPLATE>] [--max-phases <N>] \
             [--timeout <SECONDS>] [--idle-timeout <SECONDS>] [--stop-on-regex <REGEX>...] \
             [--quiet] [--retry-stopped] [--accept-plan-change] [--retries <N>] [--wait] \
             [--max-tokens <N>] [--max-cost <USD>] [--json] [--hook <EVENT=COMMAND>...] [--no-verify] [--verify-timeout <SECONDS>] [--no-record-changes] [GLOBAL OPTIONS]"
        );
        assert_eq!(
            usage_of("completions"),
            "ai-session-handler completions <SHELL> [GLOBAL OPTIONS]"
        );
        assert_eq!(
            usage_of("man"),
            "ai-session-handler man [COMMAND] [GLOBAL OPTIONS]"
        );
        assert_eq!(usage_of("init"), "ai-session-handler init [GLOBAL OPTIONS]");
    }

    #[test]
    fn the_usage_is_wrapped_between_items_and_ends_with_the_plan_alone() {
        let command = command_unwrapped();
        let run = command.find_subcommand("run").unwrap();
        let wrapped = usage("ai-session-handler run", run, Some(80));
        let lines: Vec<&str> = wrapped.lines().collect();
        assert!(lines.len() > 3, "{wrapped}");
        // `Usage: ` comes before the first line; the others carry their indent.
        assert!(lines[0].len() + "Usage: ".len() <= 80, "{wrapped}");
        for line in &lines[1..] {
            assert!(line.len() <= 80, "{line:?}");
        }
        assert!(wrapped.contains("[--max-tokens <N>]"), "{wrapped}");
        assert!(lines[1].starts_with("           ["), "{wrapped}");
        assert_eq!(
            lines.last(),
            Some(&"       ai-session-handler run <PLAN> [OPTIONS]")
        );
        assert_eq!(
            usage(
                "ai-session-handler init",
                command.find_subcommand("init").unwrap(),
                None
            ),
            "ai-session-handler init [GLOBAL OPTIONS]"
        );
    }

    #[test]
    fn sections_keep_their_columns_and_quoted_words_when_wrapped() {
        let text = sections_text(&run_exit_status(), &run_examples(), 60);
        for line in text.lines() {
            assert!(line.len() <= 60, "{line:?}\n{text}");
        }
        // A meaning continues in its own column, under the first line's.
        let exit_status = &text[..text.find("\n\nExamples:").unwrap()];
        for line in exit_status.lines().skip(1) {
            let starts_a_row = line.starts_with("  ") && line[2..].starts_with(char::is_numeric);
            assert!(
                starts_a_row || line.starts_with(&" ".repeat(19)),
                "{line:?}\n{text}"
            );
        }
        assert!(text.contains("\"codex exec\""), "{text}");
    }

    #[test]
    fn every_exit_code_is_in_the_exit_status_section() {
        let codes: Vec<String> = run_exit_status().into_iter().map(|row| row.code).collect();
        assert_eq!(codes, ["0", "2", "3", "4", "5", "130/143/129/131"]);
    }

    #[test]
    fn the_parser_definition_is_valid() {
        command().debug_assert();
    }
}
