//! What `--help` and `man` say beyond the flags clap derives: each command's synopsis
//! (generated from the parser's own definition), the global options under a heading of their
//! own, and the EXIT STATUS and EXAMPLES sections. [`command`] is the definition the parser,
//! `completions` and `man` all use.

use clap::{Arg, ArgAction, Command, CommandFactory};
use nix::libc::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};

use super::args::Cli;
use crate::domain::exit_code::ExitCode;

/// The help heading of the logging options, which every command accepts.
pub(super) const GLOBAL_HEADING: &str = "Global options";

/// The program's name as installed.
const PROGRAM: &str = "ai-session-handler";

/// The command-line definition with synopses and the extra help sections applied.
pub(super) fn command() -> Command {
    let mut root = Cli::command();
    let names: Vec<String> = root
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    for name in names {
        root = root.mut_subcommand(&name, |sub| {
            let usage = synopsis(&format!("{PROGRAM} {name}"), &sub);
            let sub = sub.override_usage(usage);
            match name.as_str() {
                "run" => sub.after_long_help(sections_text(&run_exit_status(), &run_examples())),
                _ => sub,
            }
        });
    }
    let usage = format!("{PROGRAM} [GLOBAL OPTIONS] <COMMAND>");
    root.override_usage(usage)
        .after_long_help(sections_text(&run_exit_status(), &main_examples()))
}

/// `ai-session-handler run --plan <PATH> [--agent-cmd <TEMPLATE>] … [GLOBAL OPTIONS]`: the
/// required options first, then the others in their order, positionals last.
pub(super) fn synopsis(name: &str, command: &Command) -> String {
    let own: Vec<&Arg> = command
        .get_arguments()
        .filter(|arg| {
            !arg.is_hide_set()
                && !arg.is_global_set()
                && arg.get_help_heading() != Some(GLOBAL_HEADING)
                && !matches!(arg.get_action(), ArgAction::Help | ArgAction::Version)
        })
        .collect();
    let mut words = vec![name.to_owned()];
    let options = own.iter().filter(|arg| !arg.is_positional());
    let (required, optional): (Vec<&&Arg>, Vec<&&Arg>) =
        options.partition(|arg| arg.is_required_set());
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
    words.join(" ")
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

/// The two sections as `--help` text.
fn sections_text(exit_status: &[ExitRow], examples: &[Example]) -> String {
    let width = exit_status
        .iter()
        .map(|row| row.code.len())
        .max()
        .unwrap_or(0);
    let mut text = String::from("Exit status:\n");
    for row in exit_status {
        text.push_str(&format!("  {:<width$}  {}\n", row.code, row.meaning));
    }
    text.push_str("\nExamples:\n");
    for example in examples {
        text.push_str(&format!("  {}:\n    {}\n", example.what, example.command));
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
        let command = command();
        command
            .find_subcommand(name)
            .and_then(|sub| sub.get_overridden_usage().map(ToString::to_string))
            .unwrap()
    }

    #[test]
    fn synopses_put_the_plan_first_and_show_every_value() {
        assert_eq!(
            usage_of("run"),
            "ai-session-handler run --plan <PATH> [--agent-cmd <TEMPLATE>] [--max-phases <N>] \
             [--timeout <SECONDS>] [--idle-timeout <SECONDS>] [--stop-on-regex <REGEX>...] \
             [--quiet] [--retry-stopped] [--accept-plan-change] [--retries <N>] [--wait] \
             [--max-tokens <N>] [--max-cost <USD>] [--json] [--hook <EVENT=COMMAND>...] [--no-verify] [--verify-timeout <SECONDS>] [GLOBAL OPTIONS]"
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
    fn every_exit_code_is_in_the_exit_status_section() {
        let codes: Vec<String> = run_exit_status().into_iter().map(|row| row.code).collect();
        assert_eq!(codes, ["0", "2", "3", "4", "5", "130/143/129/131"]);
    }

    #[test]
    fn the_parser_definition_is_valid() {
        command().debug_assert();
    }
}
