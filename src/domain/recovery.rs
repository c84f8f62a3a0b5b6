//! The way forward after a run stops (docs/cli.md, "The `next:` line"): the stopped
//! invocation again — its plan as typed and every option it was given — with the recovery
//! flags the situation asks for, and what to do before running it.

use super::selection::RecoveryFlags;
use super::template::shell_join;

/// The program a `next:` command names: the name `cargo install` puts on PATH.
pub(crate) const PROGRAM: &str = "ai-session-handler";

/// How the stopped `run` was invoked, as far as the continuing command repeats it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Invocation {
    /// `--plan` as typed.
    pub plan: String,
    /// The other options, as argv words in a fixed order, without the recovery flags.
    pub carried: Vec<String>,
    pub flags: RecoveryFlags,
}

/// One step that continues a stopped run (`next` in `run --json`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct NextStep {
    /// Program first.
    pub argv: Vec<String>,
    /// The recovery flags `argv` holds.
    pub flags: Vec<&'static str>,
    /// What to do before running it.
    pub why: Option<String>,
}

impl NextStep {
    /// `run` again with `flags`.
    pub(crate) fn run(invocation: &Invocation, flags: RecoveryFlags, why: Option<String>) -> Self {
        let named: Vec<&'static str> = [
            (flags.retry_stopped, "--retry-stopped"),
            (flags.accept_plan_change, "--accept-plan-change"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect();
        let mut step = Self::command(invocation, "run", why);
        step.argv.extend(invocation.carried.iter().cloned());
        step.argv
            .extend(named.iter().map(|flag| (*flag).to_owned()));
        step.flags = named;
        step
    }

    /// Another command of the program on the same plan (`status`), with no recovery flag.
    pub(crate) fn command(invocation: &Invocation, command: &str, why: Option<String>) -> Self {
        Self {
            argv: vec![
                PROGRAM.to_owned(),
                command.to_owned(),
                "--plan".to_owned(),
                invocation.plan.clone(),
            ],
            flags: Vec::new(),
            why,
        }
    }

    /// `cd <cwd> && <command>`, shell-quoted, to run from the directory the stopped run was
    /// started in: hooks hand it on, so a person reading a notification can paste it.
    pub(crate) fn run_from(&self, cwd: &str) -> String {
        let (cwd, command) = (shell_join(&[cwd.to_owned()]), shell_join(&self.argv));
        format!("cd {cwd} && {command}")
    }

    /// `next: <why>, then <command>` (or `next: <command>`), shell-quoted.
    pub(crate) fn line(&self) -> String {
        let command = shell_join(&self.argv);
        match &self.why {
            Some(why) => format!("next: {why}, then {command}"),
            None => format!("next: {command}"),
        }
    }
}

/// `--retry-stopped`, and for a clarification also `--accept-plan-change`: the answer usually
/// goes into the plan (an unchanged plan makes that flag a no-op).
pub(crate) fn flags_after_stop(clarification: bool) -> RecoveryFlags {
    RecoveryFlags {
        retry_stopped: true,
        accept_plan_change: clarification,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_from_its_directory_is_quoted() {
        let step = NextStep::run(&invocation(), flags_after_stop(false), None);
        assert_eq!(
            step.run_from("/tmp/my dir"),
            "cd '/tmp/my dir' && ai-session-handler run --plan docs/plans/x.md --agent-cmd 'codex exec' --json --retry-stopped"
        );
    }

    fn invocation() -> Invocation {
        Invocation {
            plan: "docs/plans/x.md".into(),
            carried: vec!["--agent-cmd".into(), "codex exec".into(), "--json".into()],
            flags: RecoveryFlags::default(),
        }
    }

    #[test]
    fn a_clarification_continues_with_both_flags_after_the_answer() {
        let step = NextStep::run(
            &Invocation {
                carried: Vec::new(),
                ..invocation()
            },
            flags_after_stop(true),
            Some("answer in the plan or the repository".into()),
        );
        assert_eq!(
            step.line(),
            "next: answer in the plan or the repository, then ai-session-handler run --plan docs/plans/x.md --retry-stopped --accept-plan-change"
        );
        assert_eq!(step.flags, ["--retry-stopped", "--accept-plan-change"]);
    }

    #[test]
    fn the_invocation_options_are_kept_and_quoted() {
        let step = NextStep::run(&invocation(), flags_after_stop(false), None);
        assert_eq!(
            step.argv,
            [
                "ai-session-handler",
                "run",
                "--plan",
                "docs/plans/x.md",
                "--agent-cmd",
                "codex exec",
                "--json",
                "--retry-stopped"
            ]
        );
        assert_eq!(
            step.line(),
            "next: ai-session-handler run --plan docs/plans/x.md --agent-cmd 'codex exec' --json --retry-stopped"
        );
    }

    #[test]
    fn a_plain_continuation_has_no_flags() {
        let step = NextStep::run(&invocation(), RecoveryFlags::default(), None);
        assert!(step.flags.is_empty());
        assert_eq!(step.argv.last().map(String::as_str), Some("--json"));
        let status = NextStep::command(&invocation(), "status", None);
        assert_eq!(
            status.argv,
            ["ai-session-handler", "status", "--plan", "docs/plans/x.md"]
        );
    }
}
