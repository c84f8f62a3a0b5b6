//! The way forward after a run stops (docs/cli.md, "The `next:` line"): the stopped
//! invocation again — its plan as typed and every option it was given — with the recovery
//! flags the situation asks for, what to do before running it, and what kind of step it is
//! (`action`), so a caller can act on it without reading the `why` text.

use super::budget::CapReached;
use super::selection::RecoveryFlags;
use super::state::AttemptStatus;
use super::template::shell_join;

/// The program a `next:` line names: the name `cargo install` puts on PATH.
pub(crate) const PROGRAM: &str = "ai-session-handler";

/// What a `next:` line holds in place of the answer in the `answer` command it shows.
pub(crate) const ANSWER_PLACEHOLDER: &str = "TEXT";

/// How the stopped `run` was invoked, as far as the continuing command repeats it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Invocation {
    /// `--plan` as typed.
    pub plan: String,
    /// The other options, as argv words in a fixed order, without the recovery flags.
    pub carried: Vec<String>,
    /// The budget caps given (`--max-tokens`, `--max-cost`), each with the index in `carried`
    /// of its value: a step after a budget stop puts a placeholder there.
    pub cap_values: Vec<(&'static str, usize)>,
    pub flags: RecoveryFlags,
    /// The running binary's absolute path (empty: [`PROGRAM`]); `next.argv[0]`, so a caller
    /// runs the same binary from anywhere.
    pub program: String,
    /// The directory the invocation was started in, where `argv` is to be run (its `--plan`
    /// and other paths may be relative to it); empty when unknown.
    pub cwd: String,
}

/// What kind of step continues the run (`next.action`, `AISH_NEXT_ACTION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub(crate) enum NextAction {
    /// A question waits for a person: `answer` holds the command that writes the answer into
    /// the plan (append the text); then `argv`.
    Answer,
    /// `argv` as it is, once the `why` is looked at: nothing needs fixing first.
    Retry,
    /// `argv` after `until`: a scheduled retry (a rate-limit wait, a backoff) resumes then.
    WaitUntil,
    /// Something must change first (`why` says what): then `argv`.
    FixAndRetry,
    /// The plan was edited: review the edit, then `argv` (which accepts it).
    AcceptPlanChange,
    /// `argv` goes on with the phases left (a phase limit, an interruption between phases).
    Continue,
    /// Nothing is known to continue: `argv` shows the plan's state (`status`).
    Inspect,
    /// Another handler holds the plan workspace: `argv` once it has ended.
    WaitForHandler,
}

impl NextAction {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One step that continues a stopped run (`next` in `run --json` and `status --json`, the
/// hooks' `next` and `recovery`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct NextStep {
    /// Program first: the running binary's absolute path.
    pub argv: Vec<String>,
    /// The recovery flags `argv` holds.
    pub flags: Vec<&'static str>,
    /// What to do before running it.
    pub why: Option<String>,
    pub action: NextAction,
    /// For `wait-until`: when the scheduled retry is due (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// For a stop a person answers: the `answer` command without its text (append the answer,
    /// `--file F` or `-`; `--run` also runs `argv`'s continuation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<Vec<String>>,
    /// Where `argv` is run from (its relative paths are relative to it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

impl NextStep {
    /// `run` again with `flags`.
    pub(crate) fn run(
        invocation: &Invocation,
        flags: RecoveryFlags,
        action: NextAction,
        why: Option<String>,
    ) -> Self {
        let named: Vec<&'static str> = [
            (flags.retry_stopped, "--retry-stopped"),
            (flags.accept_plan_change, "--accept-plan-change"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect();
        let mut step = Self::command(invocation, "run", action, why);
        step.argv.extend(invocation.carried.iter().cloned());
        step.argv
            .extend(named.iter().map(|flag| (*flag).to_owned()));
        step.flags = named;
        step
    }

    /// Another command of the program on the same plan (`status`, `watch`), with no recovery
    /// flag.
    pub(crate) fn command(
        invocation: &Invocation,
        command: &str,
        action: NextAction,
        why: Option<String>,
    ) -> Self {
        Self {
            argv: plan_command(invocation, command),
            flags: Vec::new(),
            why,
            action,
            until: None,
            answer: None,
            cwd: (!invocation.cwd.is_empty()).then(|| invocation.cwd.clone()),
        }
    }

    /// The same step, due at `until` (a scheduled retry).
    pub(crate) fn waiting_until(mut self, until: String) -> Self {
        self.action = NextAction::WaitUntil;
        self.until = Some(until);
        self
    }

    /// `cd <cwd> && <command>`, shell-quoted, to run from the directory the stopped run was
    /// started in: hooks hand it on (`recovery`), so a person reading a notification can paste
    /// it. The same step as the object: its `cwd` and `argv`.
    pub(crate) fn run_from(&self) -> String {
        let command = shell_join(&self.argv);
        match &self.cwd {
            Some(cwd) => format!("cd {} && {command}", shell_join(std::slice::from_ref(cwd))),
            None => command,
        }
    }

    /// The command a person runs, shell-quoted, the program by its name on PATH: for a stop a
    /// person answers, the `answer` command that writes the answer and continues; else `argv`.
    pub(crate) fn command_line(&self) -> String {
        match &self.answer {
            Some(answer) => {
                let mut words = by_name(answer);
                words.extend([ANSWER_PLACEHOLDER.to_owned(), "--run".to_owned()]);
                shell_join(&words)
            }
            None => shell_join(&by_name(&self.argv)),
        }
    }

    /// The `next:` line a person reads: `next: <why>, then <command>` (or `next: <command>`),
    /// shell-quoted, the program by its name on PATH. For a question, the `answer` command
    /// that writes the answer and continues (`… answer --plan P TEXT --run`).
    pub(crate) fn line(&self) -> String {
        if self.action == NextAction::Answer && self.answer.is_some() {
            return format!("next: {}", self.command_line());
        }
        let command = shell_join(&by_name(&self.argv));
        match &self.why {
            Some(why) => format!("next: {why}, then {command}"),
            None => format!("next: {command}"),
        }
    }
}

/// `argv` with the program as its name on PATH.
fn by_name(argv: &[String]) -> Vec<String> {
    let mut words = argv.to_vec();
    if let Some(program) = words.first_mut() {
        *program = PROGRAM.to_owned();
    }
    words
}

/// `<program> <command> --plan <plan>`.
fn plan_command(invocation: &Invocation, command: &str) -> Vec<String> {
    let program = match invocation.program.as_str() {
        "" => PROGRAM,
        program => program,
    };
    vec![
        program.to_owned(),
        command.to_owned(),
        "--plan".to_owned(),
        invocation.plan.clone(),
    ]
}

/// `--retry-stopped`, and for a clarification also `--accept-plan-change`: the answer usually
/// goes into the plan (an unchanged plan makes that flag a no-op).
pub(crate) fn flags_after_stop(clarification: bool) -> RecoveryFlags {
    RecoveryFlags {
        retry_stopped: true,
        accept_plan_change: clarification,
    }
}

/// The step after a phase stopped with `status` (and no retry scheduled), with at least
/// `given` of the recovery flags: what to do first and which flags it needs, from
/// [`AttemptStatus::recovery`]; for a stop a person answers, the `answer` command too.
pub(crate) fn after_stop(
    invocation: &Invocation,
    status: AttemptStatus,
    given: RecoveryFlags,
) -> NextStep {
    let Some((why, edits_plan)) = status.recovery() else {
        return NextStep::run(invocation, given, NextAction::Continue, None);
    };
    let needed = flags_after_stop(edits_plan);
    let flags = RecoveryFlags {
        retry_stopped: given.retry_stopped || needed.retry_stopped,
        accept_plan_change: given.accept_plan_change || needed.accept_plan_change,
    };
    let action = match status {
        AttemptStatus::NeedsClarification => NextAction::Answer,
        AttemptStatus::Interrupted => NextAction::Retry,
        AttemptStatus::PhaseComplete
        | AttemptStatus::Blocked
        | AttemptStatus::AgentFailed
        | AttemptStatus::LaunchFailed
        | AttemptStatus::MissingMarker
        | AttemptStatus::InvalidMarker
        | AttemptStatus::MultipleMarkers
        | AttemptStatus::Timeout
        | AttemptStatus::StopRegex
        | AttemptStatus::ExecutionIoFailed
        | AttemptStatus::RateLimited
        | AttemptStatus::VerificationFailed
        | AttemptStatus::BudgetExceeded => NextAction::FixAndRetry,
    };
    let mut step = NextStep::run(invocation, flags, action, Some(why.to_owned()));
    if status.is_answerable() {
        step.answer = Some(plan_command(invocation, "answer"));
    }
    step
}

/// `run` again once the cap the plan has reached is raised: the cap's flag with a placeholder
/// (`--max-tokens N`) where the exhausted value was (or added, for a cap from the config: the
/// flag wins), and `why` saying to choose a value above what the plan has spent. Run as it
/// is, the step fails on the placeholder before anything is written, rather than meet the
/// same cap again.
pub(crate) fn raising_cap(
    invocation: &Invocation,
    flags: RecoveryFlags,
    reached: &CapReached,
) -> NextStep {
    let mut raised = invocation.clone();
    let placeholder = reached.placeholder().to_owned();
    match raised
        .cap_values
        .iter()
        .find(|(flag, _)| *flag == reached.flag())
    {
        Some(&(_, index)) if index < raised.carried.len() => raised.carried[index] = placeholder,
        _ => raised
            .carried
            .extend([reached.flag().to_owned(), placeholder]),
    }
    NextStep::run(
        &raised,
        flags,
        NextAction::FixAndRetry,
        Some(reached.raise_advice()),
    )
}

/// `step` (a `run` step) when the plan's recorded attempts have reached a cap: the same step,
/// its `why` followed by [`raising_cap`]'s, the cap's value a placeholder. A `budget-exceeded`
/// stop's own advice ("raise the budget cap") is replaced, not repeated. A step that waits for
/// another handler, writes an answer or is not `run` is kept.
pub(crate) fn with_cap_raised(
    step: NextStep,
    invocation: &Invocation,
    stopped: Option<AttemptStatus>,
    reached: &CapReached,
) -> NextStep {
    let runs = step.argv.get(1).is_some_and(|command| command == "run");
    if !runs || matches!(step.action, NextAction::WaitForHandler | NextAction::Answer) {
        return step;
    }
    let flags = RecoveryFlags {
        retry_stopped: step.flags.contains(&"--retry-stopped"),
        accept_plan_change: step.flags.contains(&"--accept-plan-change"),
    };
    let mut raised = raising_cap(invocation, flags, reached);
    // A blocker can still be answered in the plan first.
    raised.answer = step.answer;
    if let Some(first) = step.why
        && stopped != Some(AttemptStatus::BudgetExceeded)
    {
        raised.why = raised.why.map(|advice| format!("{first}; {advice}"));
    }
    raised
}

/// What a plan's durable state says about how it continues (`status`, `report`, `answer`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Standing {
    /// A handler holds the plan workspace: its pid when visible.
    pub run_in_progress: Option<Option<u32>>,
    /// The abandoned attempt's id, and whether the watchdog of its dead handler stopped every
    /// process of it.
    pub abandoned: Option<(String, bool)>,
    /// The stopped phase's status.
    pub stop: Option<AttemptStatus>,
    /// When the scheduled retry a plain run resumes is due (a schedule that fits the policy).
    pub retry_due: Option<String>,
    /// The plan's bytes differ from the accepted ones.
    pub plan_changed: bool,
    /// A phase is left to run.
    pub pending: bool,
}

/// The step that continues a plan standing as `standing`, run as `invocation` — the same
/// steps a `run` ending there names (docs/cli.md, "The `next:` line"); `None` when every phase
/// is complete.
pub(crate) fn from_standing(invocation: &Invocation, standing: &Standing) -> Option<NextStep> {
    let accept = RecoveryFlags {
        retry_stopped: false,
        accept_plan_change: standing.plan_changed,
    };
    if let Some(holder) = standing.run_in_progress {
        let holder = match holder {
            Some(pid) => format!("handler pid {pid}"),
            None => "the other invocation".to_owned(),
        };
        return Some(NextStep::run(
            invocation,
            invocation.flags,
            NextAction::WaitForHandler,
            Some(format!("wait for {holder} to end")),
        ));
    }
    if let Some((attempt_id, stopped_by_watchdog)) = &standing.abandoned {
        let why = if *stopped_by_watchdog {
            "inspect its partial changes".to_owned()
        } else {
            format!(
                "make sure no worker of attempt {attempt_id} is still running (status shows it) and inspect its partial changes"
            )
        };
        return Some(NextStep::run(
            invocation,
            RecoveryFlags {
                retry_stopped: true,
                ..accept
            },
            NextAction::Retry,
            Some(why),
        ));
    }
    if let Some(status) = standing.stop {
        return Some(match &standing.retry_due {
            Some(due) => NextStep::run(invocation, accept, NextAction::Continue, None)
                .waiting_until(due.clone()),
            None => after_stop(invocation, status, accept),
        });
    }
    if standing.plan_changed {
        return Some(NextStep::run(
            invocation,
            accept,
            NextAction::AcceptPlanChange,
            Some("review the edit (every completed phase id must still exist)".to_owned()),
        ));
    }
    standing
        .pending
        .then(|| NextStep::run(invocation, accept, NextAction::Continue, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invocation() -> Invocation {
        Invocation {
            plan: "docs/plans/x.md".into(),
            carried: vec!["--agent-cmd".into(), "codex exec".into(), "--json".into()],
            ..Invocation::default()
        }
    }

    fn retry(invocation: &Invocation, why: Option<String>) -> NextStep {
        NextStep::run(
            invocation,
            flags_after_stop(false),
            NextAction::FixAndRetry,
            why,
        )
    }

    #[test]
    fn the_command_from_its_directory_is_quoted() {
        let invocation = Invocation {
            program: "/opt/bin/ai-session-handler".into(),
            cwd: "/tmp/my dir".into(),
            ..invocation()
        };
        let step = retry(&invocation, None);
        assert_eq!(
            step.run_from(),
            "cd '/tmp/my dir' && /opt/bin/ai-session-handler run --plan docs/plans/x.md --agent-cmd 'codex exec' --json --retry-stopped"
        );
        assert_eq!(step.argv[0], "/opt/bin/ai-session-handler");
        assert_eq!(step.cwd.as_deref(), Some("/tmp/my dir"));
        // A person reads the program by its name.
        assert!(step.line().starts_with("next: ai-session-handler run "));
    }

    #[test]
    fn a_clarification_points_at_answer_and_continues_with_both_flags() {
        let step = after_stop(
            &Invocation {
                carried: Vec::new(),
                ..invocation()
            },
            AttemptStatus::NeedsClarification,
            RecoveryFlags::default(),
        );
        assert_eq!(step.action, NextAction::Answer);
        assert_eq!(
            step.line(),
            "next: ai-session-handler answer --plan docs/plans/x.md TEXT --run"
        );
        assert_eq!(
            step.answer.as_deref(),
            Some(
                &["ai-session-handler", "answer", "--plan", "docs/plans/x.md"].map(String::from)[..]
            )
        );
        assert_eq!(step.flags, ["--retry-stopped", "--accept-plan-change"]);
        assert_eq!(
            step.why.as_deref(),
            Some("answer in the plan or the repository")
        );
    }

    #[test]
    fn every_stop_has_its_action() {
        let action = |status| after_stop(&invocation(), status, RecoveryFlags::default()).action;
        assert_eq!(action(AttemptStatus::Interrupted), NextAction::Retry);
        assert_eq!(action(AttemptStatus::Blocked), NextAction::FixAndRetry);
        assert_eq!(action(AttemptStatus::AgentFailed), NextAction::FixAndRetry);
        assert_eq!(action(AttemptStatus::PhaseComplete), NextAction::Continue);
        let blocked = after_stop(
            &invocation(),
            AttemptStatus::Blocked,
            RecoveryFlags::default(),
        );
        assert!(blocked.answer.is_some(), "a blocker can be answered too");
        assert_eq!(
            blocked.line(),
            "next: resolve the blocker, then ai-session-handler run --plan docs/plans/x.md --agent-cmd 'codex exec' --json --retry-stopped"
        );
        let waiting = NextStep::run(
            &invocation(),
            RecoveryFlags::default(),
            NextAction::Continue,
            None,
        )
        .waiting_until("2026-12-05T01:00:00Z".into());
        assert_eq!(waiting.action, NextAction::WaitUntil);
        let json = serde_json::to_value(&waiting).unwrap();
        assert_eq!(json["action"], "wait-until");
        assert_eq!(json["until"], "2026-12-05T01:00:00Z");
        assert!(json.get("answer").is_none());
    }

    #[test]
    fn the_durable_standing_gives_the_same_steps_as_a_run() {
        let next = |standing: Standing| from_standing(&invocation(), &standing);
        assert_eq!(next(Standing::default()), None, "all complete");
        let pending = next(Standing {
            pending: true,
            ..Standing::default()
        })
        .unwrap();
        assert_eq!(pending.action, NextAction::Continue);
        assert!(pending.flags.is_empty());
        let question = next(Standing {
            stop: Some(AttemptStatus::NeedsClarification),
            pending: true,
            ..Standing::default()
        })
        .unwrap();
        assert_eq!(question.action, NextAction::Answer);
        assert_eq!(question.flags, ["--retry-stopped", "--accept-plan-change"]);
        let waiting = next(Standing {
            stop: Some(AttemptStatus::RateLimited),
            retry_due: Some("2026-12-05T03:00:00Z".into()),
            ..Standing::default()
        })
        .unwrap();
        assert_eq!(waiting.action, NextAction::WaitUntil);
        assert!(waiting.flags.is_empty());
        let edited = next(Standing {
            stop: Some(AttemptStatus::AgentFailed),
            plan_changed: true,
            ..Standing::default()
        })
        .unwrap();
        assert_eq!(edited.flags, ["--retry-stopped", "--accept-plan-change"]);
        let held = next(Standing {
            run_in_progress: Some(Some(42)),
            stop: Some(AttemptStatus::Blocked),
            ..Standing::default()
        })
        .unwrap();
        assert_eq!(held.action, NextAction::WaitForHandler);
        assert_eq!(held.why.as_deref(), Some("wait for handler pid 42 to end"));
        let abandoned = next(Standing {
            abandoned: Some(("a-1".into(), true)),
            ..Standing::default()
        })
        .unwrap();
        assert_eq!(abandoned.action, NextAction::Retry);
        assert_eq!(
            abandoned.why.as_deref(),
            Some("inspect its partial changes")
        );
    }

    #[test]
    fn the_invocation_options_are_kept_and_quoted() {
        let step = retry(&invocation(), None);
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
        let step = NextStep::run(
            &invocation(),
            RecoveryFlags::default(),
            NextAction::Continue,
            None,
        );
        assert!(step.flags.is_empty());
        assert_eq!(step.argv.last().map(String::as_str), Some("--json"));
        let status = NextStep::command(&invocation(), "status", NextAction::Inspect, None);
        assert_eq!(
            status.argv,
            ["ai-session-handler", "status", "--plan", "docs/plans/x.md"]
        );
    }

    /// After a cap is reached the step puts a placeholder where the exhausted value was (or
    /// adds the flag for a cap from the config), keeps a blocker's own advice and `answer`, and
    /// leaves a step that waits for another handler alone.
    #[test]
    fn a_reached_cap_is_raised_not_repeated() {
        use crate::domain::budget::{BudgetCaps, BudgetConfig, Spent};
        let given = Invocation {
            carried: vec!["--max-tokens".into(), "400".into(), "--quiet".into()],
            cap_values: vec![("--max-tokens", 1)],
            ..invocation()
        };
        let spent = Spent {
            tokens: 450,
            cost_micros: 0,
        };
        let reached = BudgetCaps::effective(Some(400), None, &BudgetConfig::default())
            .reached(spent)
            .expect("reached");
        let step = raising_cap(&given, RecoveryFlags::default(), &reached);
        assert_eq!(step.action, NextAction::FixAndRetry);
        assert_eq!(
            step.line(),
            "next: raise the cap: give --max-tokens N a value above the 450 tokens (input + \
             output) this plan has spent (the cap was 400, --max-tokens), then \
             ai-session-handler run --plan docs/plans/x.md --max-tokens N --quiet"
        );
        let blocked = after_stop(&given, AttemptStatus::Blocked, RecoveryFlags::default());
        let raised = with_cap_raised(blocked, &given, Some(AttemptStatus::Blocked), &reached);
        assert!(
            raised
                .why
                .as_deref()
                .is_some_and(|why| why.starts_with("resolve the blocker; raise the cap: ")),
            "{raised:?}"
        );
        assert!(raised.answer.is_some());
        assert_eq!(raised.flags, ["--retry-stopped"]);
        let exceeded = after_stop(
            &given,
            AttemptStatus::BudgetExceeded,
            RecoveryFlags::default(),
        );
        let raised = with_cap_raised(
            exceeded,
            &given,
            Some(AttemptStatus::BudgetExceeded),
            &reached,
        );
        assert!(
            raised
                .why
                .as_deref()
                .is_some_and(|why| why.starts_with("raise the cap: ")),
            "{raised:?}"
        );
        let from_config = BudgetCaps::effective(
            None,
            None,
            &BudgetConfig {
                max_tokens: Some(400),
                max_cost_usd: None,
            },
        )
        .reached(spent)
        .expect("reached");
        let step = raising_cap(&invocation(), RecoveryFlags::default(), &from_config);
        assert_eq!(step.argv[step.argv.len() - 2..], ["--max-tokens", "N"]);
        let waiting = NextStep::run(
            &given,
            RecoveryFlags::default(),
            NextAction::WaitForHandler,
            Some("wait".into()),
        );
        assert_eq!(
            with_cap_raised(waiting.clone(), &given, None, &reached),
            waiting
        );
    }
}
