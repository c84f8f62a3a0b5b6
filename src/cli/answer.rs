//! `ai-session-handler answer`: a person's answer to a phase stopped on `needs-clarification`
//! or `blocked`, written durably into the plan (docs/cli.md, "answer"), and with `--run` the
//! stopped run continued at once.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;

use super::next::stopped_invocation;
use crate::cli::args::AnswerArgs;
use crate::domain::exit_code::ExitCode;
use crate::domain::plan::answer::{Answer, AnswerPlace, AnsweredStop, insert_answer};
use crate::domain::recovery::{NextAction, NextStep, flags_after_stop};
use crate::domain::state::{AttemptStatus, State};
use crate::domain::template::shell_join;
use crate::domain::timestamp::Timestamp;
use crate::invocation::{locate, read_state};
use crate::platform::durable::replace_keeping_mode;
use crate::platform::locate::PlanLocation;
use crate::platform::locks::{LockScope, try_lock_dir};
use crate::platform::regular_file::read_regular_file;
use crate::report::Output;

/// An answer longer than this is refused: it belongs in a file of the repository.
const MAX_ANSWER_BYTES: u64 = 1 << 20;
/// The plan is read up to this size (as `run` reads it).
const MAX_PLAN_BYTES: u64 = 64 << 20;

pub(super) fn run(args: &AnswerArgs) -> ExitCode {
    match answer(args) {
        Ok(next) if args.run => continue_run(&next),
        Ok(_) => ExitCode::Success,
        Err(message) => {
            Output::error(message).print();
            ExitCode::InvalidInput
        }
    }
}

/// Writes the answer and prints it; returns the command that continues the run.
fn answer(args: &AnswerArgs) -> Result<NextStep, String> {
    let location = locate(&args.plan).map_err(|error| error.to_string())?;
    // Held until the answer is written: a run of this plan cannot start meanwhile, and the
    // answer is refused while one runs.
    let _lock = try_lock_dir(Path::new(&location.workspace), LockScope::PlanWorkspace).map_err(
        |error| {
            format!("{error}; answer once that run has ended (the plan may not change under it)")
        },
    )?;
    let state = read_state(&location.layout).map_err(|error| error.to_string())?;
    let (stop, question) = answerable_stop(&state, &location)?;
    let text = answer_text(args)?;
    let plan_path = Path::new(&location.plan_path);
    let plan = read_regular_file(plan_path, MAX_PLAN_BYTES)
        .map_err(|error| format!("cannot read the plan: {error}"))?;
    let answered_at = Timestamp::from_datetime(chrono::Utc::now()).to_string();
    let place = if args.preamble {
        AnswerPlace::Preamble
    } else {
        AnswerPlace::Phase(&stop.phase_id)
    };
    let answered = insert_answer(
        &plan,
        place,
        &Answer {
            stop: stop.kind,
            phase_id: &stop.phase_id,
            question: &question,
            text: &text,
            answered_at: &answered_at,
        },
    )
    .map_err(|refusal| format!("{}: {refusal}", location.plan_path))?;
    replace_keeping_mode(plan_path, &answered.plan, "plan-answer")
        .map_err(|error| format!("could not write the plan {}: {error}", location.plan_path))?;

    let place = if args.preamble {
        "the preamble".to_owned()
    } else {
        stop.phase_id.clone()
    };
    let mut output = Output::stdout(vec![format!(
        "answered: wrote into {place} of {}:",
        location.plan_path
    )]);
    output.stdout.extend(
        answered
            .section
            .trim_matches(['\r', '\n'])
            .lines()
            .map(|line| format!("  {}", line.trim_end_matches('\r'))),
    );
    let (next, own_arguments) = next_step(&location, &stop);
    if !own_arguments {
        output.err_line(
            "warning: the stopped run's options are no longer in events.jsonl; the command \
             below has only the plan and the recovery flags",
        );
    }
    output.err_line(next.line()).print();
    Ok(next)
}

/// The stop being answered.
struct StopToAnswer {
    phase_id: String,
    kind: AnsweredStop,
    /// The attempt that stopped (its invocation's arguments are reused by `--run`).
    attempt_id: Option<String>,
}

/// The stop, when it is one a person answers, with its question or reason.
fn answerable_stop(
    state: &State,
    location: &PlanLocation,
) -> Result<(StopToAnswer, String), String> {
    let Some(stop) = &state.stop else {
        return Err(format!(
            "no phase of {} is stopped; `answer` continues a phase stopped on needs-clarification or blocked",
            location.plan_path
        ));
    };
    let kind = if stop.reason == AttemptStatus::NeedsClarification {
        AnsweredStop::NeedsClarification
    } else if stop.reason == AttemptStatus::Blocked {
        AnsweredStop::Blocked
    } else {
        return Err(format!(
            "phase {} is stopped: {}, not on a question or a blocker; there is nothing to answer \
             (inspect its transcript, then run again with --retry-stopped)",
            stop.phase_id, stop.reason
        ));
    };
    let question = stop
        .clarification_request
        .clone()
        .or_else(|| stop.message.clone())
        .unwrap_or_default();
    let attempt_id = state
        .last_run
        .as_ref()
        .filter(|last| last.phase_id == stop.phase_id)
        .map(|last| last.run_id.clone());
    Ok((
        StopToAnswer {
            phase_id: stop.phase_id.clone(),
            kind,
            attempt_id,
        },
        question,
    ))
}

/// The answer from the argument, `--file` or standard input (`-`).
fn answer_text(args: &AnswerArgs) -> Result<String, String> {
    let bytes = match (&args.text, &args.file) {
        (Some(text), None) if text == "-" => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .take(MAX_ANSWER_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|error| format!("cannot read the answer from standard input: {error}"))?;
            bytes
        }
        (Some(text), None) => text.clone().into_bytes(),
        (None, Some(file)) => read_regular_file(file, MAX_ANSWER_BYTES + 1)
            .map_err(|error| format!("--file {}: {error}", file.display()))?,
        (None, None) => {
            return Err(
                "the answer is missing: give it as an argument, with --file F, or as - to read standard input"
                    .to_owned(),
            );
        }
        (Some(_), Some(_)) => {
            return Err("give the answer once: as an argument or with --file, not both".to_owned());
        }
    };
    if bytes.len() as u64 > MAX_ANSWER_BYTES {
        return Err(format!(
            "the answer is over {MAX_ANSWER_BYTES} bytes; put it in a file of the repository and answer with a line pointing to it"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "the answer is not valid UTF-8".to_owned())
}

/// The stopped invocation again (its own arguments when events.jsonl still has them), with the
/// plan as an absolute path and `--retry-stopped --accept-plan-change`; and whether its own
/// arguments were found.
fn next_step(location: &PlanLocation, stop: &StopToAnswer) -> (NextStep, bool) {
    let (invocation, found) = stopped_invocation(location, stop.attempt_id.as_deref());
    (
        NextStep::run(&invocation, flags_after_stop(true), NextAction::Retry, None),
        found,
    )
}

/// `--run`: prints the command, then becomes it.
fn continue_run(next: &NextStep) -> ExitCode {
    eprintln!("running: {}", shell_join(&next.argv));
    let program =
        std::env::current_exe().unwrap_or_else(|_| crate::domain::recovery::PROGRAM.into());
    let error = std::process::Command::new(program)
        .args(&next.argv[1..])
        .exec();
    Output::error(format!("could not run {}: {error}", shell_join(&next.argv))).print();
    ExitCode::InvalidInput
}
