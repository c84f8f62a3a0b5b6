//! Shell completion by the binary itself (clap_complete's `CompleteEnv`): `completions <SHELL>`
//! prints a script that calls this binary with [`COMPLETE_VAR`] set; [`complete_if_asked`]
//! answers from the clap definition the parser uses, with paths, `man` topics, `--hook` events
//! and `check --phase`'s ids read from the plan on the same command line.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::PathBuf;

use clap_complete::engine::CompletionCandidate;
use clap_complete::env::{CompleteEnv, Shells};

use super::args::CompletionsArgs;
use super::help;
use crate::domain::exit_code::ExitCode;
use crate::domain::hooks::HookEvent;
use crate::invocation::{locate, read_plan_snapshot};
use crate::report::Output;
use strum::VariantNames;

/// The binary name the script completes (the one `cargo install` puts on PATH).
const BIN_NAME: &str = "ai-session-handler";

/// The environment variable that turns an invocation into a completion request. Not clap's
/// default `COMPLETE`: a `run` started from an environment that happens to export that name
/// must still run.
const COMPLETE_VAR: &str = "AI_SESSION_HANDLER_COMPLETE";

pub(super) fn run(args: &CompletionsArgs) -> ExitCode {
    let name = args.shell.to_string();
    let shells = Shells::builtins();
    let Some(shell) = shells.completer(&name) else {
        Output::error(format!("completions: no completion support for {name}")).print();
        return ExitCode::InvalidInput;
    };
    let mut script = Vec::new();
    let written = shell
        .write_registration(
            COMPLETE_VAR,
            BIN_NAME,
            BIN_NAME,
            &completer().to_string_lossy(),
            &mut script,
        )
        .and_then(|()| {
            let mut out = std::io::stdout().lock();
            out.write_all(&script).and_then(|()| out.flush())
        });
    match written {
        Ok(()) => ExitCode::Success,
        Err(error) => {
            Output::error(format!("cannot write the completion script: {error}")).print();
            ExitCode::InvalidInput
        }
    }
}

/// The program the script calls: this binary as it was invoked — a name found in `PATH`
/// stays a name (a reinstalled binary keeps completing), a relative path becomes absolute.
fn completer() -> PathBuf {
    let invoked = PathBuf::from(std::env::args_os().next().unwrap_or_default());
    if invoked.components().count() > 1
        && let Ok(cwd) = std::env::current_dir()
    {
        return cwd.join(invoked);
    }
    invoked
}

/// Answers a completion request (the script's call: [`COMPLETE_VAR`] set), returning the exit
/// code; `None` for an ordinary invocation.
pub(super) fn complete_if_asked() -> Option<ExitCode> {
    std::env::var_os(COMPLETE_VAR)?;
    let current_dir = std::env::current_dir().ok();
    match CompleteEnv::with_factory(help::command)
        .var(COMPLETE_VAR)
        .bin(BIN_NAME)
        .try_complete(std::env::args_os(), current_dir.as_deref())
    {
        Ok(true) => Some(ExitCode::Success),
        Ok(false) => None,
        Err(error) => {
            Output::error(crate::usage::one_line(&error.render().to_string())).print();
            Some(ExitCode::InvalidInput)
        }
    }
}

/// `man`'s topics: the commands with a page of their own.
pub(super) fn man_topics() -> Vec<CompletionCandidate> {
    help::command()
        .get_subcommands()
        .filter(|command| command.get_name() != "help")
        .map(|command| {
            CompletionCandidate::new(command.get_name())
                .help(command.get_about().map(|about| about.to_owned()))
        })
        .collect()
}

/// `--hook`'s events, each with the `=` that the command follows.
pub(super) fn hook_events() -> Vec<CompletionCandidate> {
    HookEvent::VARIANTS
        .iter()
        .map(|event| CompletionCandidate::new(format!("{event}=")))
        .collect()
}

/// `--phase`'s ids: the phases of the plan given on the command line being completed (with
/// their titles, for the shells that show them); none while that plan is missing or invalid.
pub(super) fn phase_ids(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(plan) = plan_on_command_line() else {
        return Vec::new();
    };
    let Ok(snapshot) = locate(&plan).and_then(|location| read_plan_snapshot(&location)) else {
        return Vec::new();
    };
    let typed = current.to_string_lossy();
    snapshot
        .plan
        .phases
        .into_iter()
        .filter(|phase| phase.id.starts_with(typed.as_ref()))
        .map(|phase| CompletionCandidate::new(phase.id).help(Some(phase.title.into())))
        .collect()
}

/// The plan on the command line being completed (`--plan PATH` or the path alone). The
/// request is this binary called with `--` and the words typed so far; clap reads them as far
/// as they parse.
fn plan_on_command_line() -> Option<PathBuf> {
    let words: Vec<OsString> = std::env::args_os()
        .skip_while(|word| word != "--")
        .skip(1)
        .collect();
    plan_in(words)
}

fn plan_in(words: Vec<OsString>) -> Option<PathBuf> {
    let matches = help::command()
        .ignore_errors(true)
        .try_get_matches_from(words)
        .ok()?;
    let (_, command) = matches.subcommand()?;
    ["plan", "plan-path"]
        .into_iter()
        .find_map(|id| command.try_get_one::<PathBuf>(id).ok().flatten().cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(line: &str) -> Option<PathBuf> {
        plan_in(line.split(' ').map(OsString::from).collect())
    }

    #[test]
    fn the_plan_is_read_from_either_spelling_even_mid_word() {
        let expected = Some(PathBuf::from("docs/x.md"));
        assert_eq!(
            plan("ai-session-handler check --plan docs/x.md --prompt --phase ph"),
            expected
        );
        assert_eq!(
            plan("ai-session-handler check docs/x.md --prompt --phase "),
            expected
        );
        assert_eq!(
            plan("ai-session-handler --color never check --prompt --phase p docs/x.md"),
            expected
        );
        assert_eq!(plan("ai-session-handler check --prompt --phase "), None);
        assert_eq!(plan("ai-session-handler man "), None);
    }

    #[test]
    fn every_hook_event_is_offered_with_its_equals_sign() {
        let offered: Vec<String> = hook_events()
            .iter()
            .map(|candidate| candidate.get_value().to_string_lossy().into_owned())
            .collect();
        assert_eq!(offered.len(), HookEvent::VARIANTS.len());
        assert!(
            offered.contains(&"phase-stopped=".to_owned()),
            "{offered:?}"
        );
    }

    #[test]
    fn man_topics_are_the_commands() {
        let topics: Vec<String> = man_topics()
            .iter()
            .map(|candidate| candidate.get_value().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            topics,
            [
                "run",
                "status",
                "check",
                "init",
                "answer",
                "report",
                "watch",
                "completions",
                "man"
            ]
        );
    }
}
