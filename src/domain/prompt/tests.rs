//! Unit and property tests of `domain::prompt`.

use super::*;
use crate::domain::state::{ActiveStatus, AttemptStatus, OutcomeRef, PhaseRef, SnapshotRef};
use crate::domain::timestamp::Timestamp;
use crate::domain::verification::{Interpreter, VerifyCheck};
use proptest::prelude::*;

const DIR: &str = "/plan-repo/.ai-session-handler/plans/plan-key";
const PREAMBLE: &str = "# Example plan\n\nKeep API names stable.\n";
const BODY: &str = "### Goal\nBuild prompts.\n\n### Validation\n```bash\npython -m pytest\n```\n";

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("test timestamp")
}

fn phase(body: &str) -> Phase {
    Phase {
        number: 2,
        id: "phase-2".into(),
        title: "Prompt Builder".into(),
        body: body.into(),
        heading_line: 10,
        end_line: 20,
        workspace: ".".into(),
        workspace_line: 12,
        verify: Vec::new(),
    }
}

fn last_run(summary: &str, outcome_path: Option<&str>) -> LastRun {
    LastRun {
        run_id: "20260705T115000Z-phase-1".into(),
        phase_id: "phase-1".into(),
        status: AttemptStatus::PhaseComplete,
        started_at: at("2026-07-05T11:50:00Z"),
        finished_at: at("2026-07-05T11:55:00Z"),
        exit_code: 0,
        execution_workspace: "/service".into(),
        prompt_path: format!("{DIR}/prompts/20260705T115000Z-phase-1.txt"),
        transcript_path: format!("{DIR}/transcripts/20260705T115000Z-phase-1.txt"),
        outcome_path: outcome_path.map(str::to_owned),
        summary: summary.into(),
    }
}

fn outcome(phase_id: &str, status: AttemptStatus, path: &str) -> OutcomeRef {
    OutcomeRef {
        attempt_id: format!("attempt-{phase_id}-{status}"),
        phase_id: phase_id.into(),
        status,
        path: path.into(),
        duration_ms: None,
        output_bytes: None,
        watchdog_losses: None,
        usage: None,
        changed_nothing: None,
    }
}

/// The state of docs/worker-protocol.md: phase 1 complete, phase 2 about to run.
fn fixture_state() -> State {
    let outcome_path = format!("{DIR}/outcomes/20260705T115000Z-phase-1.json");
    State {
        plan: Some(PlanRecord {
            path: "docs/plans/example.md".into(),
            sha256: "abc123".into(),
            accepted_at: at("2026-07-05T12:00:00Z"),
        }),
        completed_phase_ids: vec!["phase-1".into()],
        committed_outcomes: vec![outcome(
            "phase-1",
            AttemptStatus::PhaseComplete,
            &outcome_path,
        )],
        current_phase: Some(PhaseRef {
            id: "phase-2".into(),
            title: "Prompt Builder".into(),
        }),
        active_attempt: None,
        stop: None,
        last_run: Some(last_run("Completed parser.", Some(&outcome_path))),
        retry_schedule: None,
        abandoned_attempts: Vec::new(),
    }
}

fn render_with(state: &State, preamble: &str, phase: &Phase) -> String {
    render_attempt(state, preamble, phase, None)
}

fn render_attempt(
    state: &State,
    preamble: &str,
    phase: &Phase,
    retry: Option<&RetryNote>,
) -> String {
    let state_path = format!("{DIR}/state.json");
    let transcript_path = format!("{DIR}/transcripts/20260705T120102Z-phase-2.txt");
    render_prompt(&PromptContext {
        plan_workspace_path: "/plan-repo",
        execution_workspace_path: "/service",
        plan_path: "/plan-repo/docs/plans/example.md",
        state_path: &state_path,
        run_id: "20260705T120102Z-phase-2",
        transcript_path: &transcript_path,
        preamble,
        phase,
        state,
        retry,
        verification_failure: None,
    })
}

fn render(state: &State) -> String {
    render_with(state, PREAMBLE, &phase(BODY))
}

/// The text between `<label> START` and `<label> END`.
fn section<'a>(prompt: &'a str, label: &str) -> &'a str {
    let start = format!("{label} START\n");
    let end = format!("{label} END\n");
    let from = prompt.find(&start).expect("section start") + start.len();
    let to = from + prompt[from..].find(&end).expect("section end");
    &prompt[from..to]
}

const GOLDEN: &str = r#"AI SESSION HANDLER WORKER PROTOCOL

CONTEXT
- plan_workspace_path: /plan-repo
- execution_workspace_path: /service
- plan_path: /plan-repo/docs/plans/example.md
- state_path: /plan-repo/.ai-session-handler/plans/plan-key/state.json
- run_id: 20260705T120102Z-phase-2
- transcript_path: /plan-repo/.ai-session-handler/plans/plan-key/transcripts/20260705T120102Z-phase-2.txt
- selected_phase_id: phase-2
- selected_phase_title: Prompt Builder

INSTRUCTIONS
- Read the repository instructions first, starting with the AGENTS.md at the root of execution_workspace_path, and follow the instructions it points to.
- Inspect the current repository state before editing anything.
- GLOBAL PLAN INTENT and SELECTED PHASE BODY below are exact copies from this invocation's accepted immutable plan snapshot; use them for ordinary phase startup instead of rereading the complete source plan.
- Read the global intent and the durable handoff context before deciding how to proceed. Inspect an indexed outcome only when its concrete decision, validation evidence, limitation or recovery history affects this phase.
- Treat complete transcripts as diagnostic evidence and do not replay them by default. You may inspect source plan bytes to diagnose a mismatch or repository contradiction, and read outcome records or transcripts when a concrete question needs them.
- Implement exactly selected phase phase-2: Prompt Builder.
- Do not proceed to later phases, even if this phase finishes early.
- Restrict your work to execution_workspace_path and the selected phase; do not work in any other repository.
- Follow the selected phase body as written unless the repository contradicts it; when it does, say so in your result.
- Run the validation commands the phase names and make them pass before reporting completion.
- Do not run git commit, push, checkout, reset, clean, stash, branch creation, or automatic worktree operations.
- Change only the files the selected phase requires.
- Treat state_path and outcome records as runner-owned and read-only: do not create, edit, replace or delete them, and report the phase outcome only through the terminal marker.
- When later phases will rely on a design decision, record it in ordinary repository documentation.
- Do not make design-changing guesses: if the phase needs a product, architecture, schema, API or workflow decision that the plan does not make, stop with `<phase-needs-clarification>` and ask a specific question.
- Asking for clarification is a first-class stop state, not a failure.
- End exactly one output stream with exactly one terminal marker from the grammar below: the opening tag must begin at a line boundary, the result must not be empty, and only whitespace may follow the closing tag on that stream.
- Never emit a recognized tag anywhere else, including examples, quoted text, fenced blocks, progress, or diagnostics. Do not emit a result on both stdout and stderr.

FAILURE MODES
- If the phase needs external action such as credentials, access or an unavailable service, end with `<phase-blocked>` and say exactly what is needed.
- If the phase needs a specific user decision, end with `<phase-needs-clarification>` and ask one specific question.
- End with `<phase-complete>` only after the implementation is done and its validation passed.
- Every terminal result should summarize changed artifacts, validation commands and results, decisions, remaining limitations, and relevant handoff references, concisely but with enough detail for a fresh worker to continue.

GLOBAL PLAN INTENT START
# Example plan

Keep API names stable.
GLOBAL PLAN INTENT END

PREVIOUS STATE SUMMARY START
plan:
  path: docs/plans/example.md
  sha256: abc123
  accepted_at: 2026-07-05T12:00:00Z
completed_phase_ids: phase-1
committed_outcome_count: 1
current_phase:
  id: phase-2
  title: Prompt Builder
stop: none
active_attempt: none
last_run:
  run_id: 20260705T115000Z-phase-1
  phase_id: phase-1
  status: phase-complete
  started_at: 2026-07-05T11:50:00Z
  finished_at: 2026-07-05T11:55:00Z
  exit_code: 0
  execution_workspace: /service
  prompt_path: /plan-repo/.ai-session-handler/plans/plan-key/prompts/20260705T115000Z-phase-1.txt
  transcript_path: /plan-repo/.ai-session-handler/plans/plan-key/transcripts/20260705T115000Z-phase-1.txt
  outcome_path: /plan-repo/.ai-session-handler/plans/plan-key/outcomes/20260705T115000Z-phase-1.json
PREVIOUS STATE SUMMARY END

DURABLE HANDOFF CONTEXT START
latest_relevant_summary:
  attempt_id: 20260705T115000Z-phase-1
  phase_id: phase-1
  status: phase-complete
  outcome_path: /plan-repo/.ai-session-handler/plans/plan-key/outcomes/20260705T115000Z-phase-1.json
  summary:
    Completed parser.
earlier_committed_outcomes: none
DURABLE HANDOFF CONTEXT END

SELECTED PHASE BODY START
### Goal
Build prompts.

### Validation
```bash
python -m pytest
```
SELECTED PHASE BODY END

TERMINAL MARKER GRAMMAR START
<phase-complete>summary</phase-complete>
<phase-blocked>reason</phase-blocked>
<phase-needs-clarification>specific question for user</phase-needs-clarification>
TERMINAL MARKER GRAMMAR END
"#;

// original test suite: test_prompts.py 1
#[test]
fn renders_the_golden_prompt() {
    let prompt = render(&fixture_state());
    if prompt != GOLDEN {
        for (line, (got, want)) in prompt.lines().zip(GOLDEN.lines()).enumerate() {
            assert_eq!(got, want, "first difference at line {}", line + 1);
        }
    }
    assert_eq!(prompt, GOLDEN);
}

#[test]
fn has_eighteen_instructions_and_four_failure_modes() {
    let prompt = render(&fixture_state());
    let bullets = |label: &str| {
        let start = prompt.find(&format!("{label}\n")).expect("heading") + label.len() + 1;
        prompt[start..]
            .lines()
            .take_while(|line| !line.is_empty())
            .inspect(|line| assert!(line.starts_with("- "), "{line:?}"))
            .count()
    };
    assert_eq!(bullets("INSTRUCTIONS"), 18);
    assert_eq!(bullets("FAILURE MODES"), 4);
    let sixth = prompt
        .lines()
        .skip_while(|line| *line != "INSTRUCTIONS")
        .nth(6);
    assert_eq!(
        sixth,
        Some("- Implement exactly selected phase phase-2: Prompt Builder.")
    );
}

// test_prompts.py 2
#[test]
fn a_body_without_a_final_newline_gets_one_before_the_end_delimiter() {
    let prompt = render_with(&fixture_state(), PREAMBLE, &phase("No trailing newline"));
    assert!(
        prompt.contains(
            "\nSELECTED PHASE BODY START\nNo trailing newline\nSELECTED PHASE BODY END\n"
        )
    );
}

#[test]
fn the_preamble_and_body_are_copied_byte_exact() {
    let body = "### Workspace\r\n.\r\n\r\n<phase-complete>quoted by the plan</phase-complete>\r\n";
    let prompt = render_with(&fixture_state(), "Intro\r\n", &phase(body));
    assert_eq!(section(&prompt, "SELECTED PHASE BODY"), body);
    assert_eq!(section(&prompt, "GLOBAL PLAN INTENT"), "Intro\r\n");
}

#[test]
fn an_empty_preamble_is_an_empty_line() {
    let prompt = render_with(&fixture_state(), "", &phase(BODY));
    assert!(prompt.contains("\nGLOBAL PLAN INTENT START\n\nGLOBAL PLAN INTENT END\n"));
}

// test_prompts.py 3, 7, 8
#[test]
fn contains_the_tested_guidance_fragments() {
    let prompt = render(&fixture_state());
    for fragment in [
        "exact copies from this invocation's accepted immutable plan snapshot",
        "for ordinary phase startup instead of rereading the complete source plan",
        "Inspect an indexed outcome only when its concrete decision",
        "Treat complete transcripts as diagnostic evidence and do not replay them by default",
        "inspect source plan bytes to diagnose a mismatch or repository contradiction",
        "Implement exactly selected phase phase-2: Prompt Builder.",
        "Treat state_path and outcome records as runner-owned and read-only",
        "report the phase outcome only through the terminal marker",
        "opening tag must begin at a line boundary",
        "only whitespace may follow the closing tag",
        "including examples, quoted text, fenced blocks, progress, or diagnostics",
        "Do not emit a result on both stdout and stderr",
        "changed artifacts, validation commands and results, decisions, remaining limitations, and relevant handoff references",
        "`<phase-blocked>`",
        "`<phase-needs-clarification>`",
        "`<phase-complete>`",
    ] {
        assert!(prompt.contains(fragment), "missing {fragment:?}");
    }
}

// test_prompts.py 4
#[test]
fn the_latest_outcome_is_summarized_not_indexed() {
    let prompt = render(&fixture_state());
    assert!(prompt.contains("  status: phase-complete\n"));
    assert!(prompt.contains("    Completed parser.\n"));
    assert!(!prompt.contains("phase-1 | phase-complete"));
}

// test_prompts.py 5
#[test]
fn a_multiline_summary_appears_once_indented_in_the_handoff() {
    let outcome_path = format!("{DIR}/outcomes/20260705T115000Z-phase-1.json");
    let state = State {
        last_run: Some(last_run(
            "Implemented parser.\nAll tests pass.\n",
            Some(&outcome_path),
        )),
        ..fixture_state()
    };
    let prompt = render(&state);
    for line in ["Implemented parser.", "All tests pass."] {
        assert_eq!(
            prompt.lines().filter(|l| l.contains(line)).count(),
            1,
            "{line}"
        );
        assert_eq!(
            prompt
                .lines()
                .filter(|l| *l == format!("    {line}"))
                .count(),
            1
        );
    }
    assert!(
        section(&prompt, "DURABLE HANDOFF CONTEXT")
            .contains("  summary:\n    Implemented parser.\n    All tests pass.\n")
    );
    assert!(!section(&prompt, "PREVIOUS STATE SUMMARY").contains("Implemented parser."));
}

// test_prompts.py 6
#[test]
fn the_index_lists_earlier_outcomes_with_their_statuses() {
    let latest = "/outcomes/latest.json";
    let state = State {
        committed_outcomes: vec![
            outcome(
                "phase-1",
                AttemptStatus::PhaseComplete,
                "/outcomes/complete.json",
            ),
            outcome("phase-2", AttemptStatus::Blocked, "/outcomes/blocked.json"),
            outcome(
                "phase-2",
                AttemptStatus::NeedsClarification,
                "/outcomes/clarify.json",
            ),
            outcome(
                "phase-2",
                AttemptStatus::AgentFailed,
                "/outcomes/failed.json",
            ),
            outcome("phase-2", AttemptStatus::Timeout, latest),
        ],
        last_run: Some(LastRun {
            phase_id: "phase-2".into(),
            status: AttemptStatus::Timeout,
            exit_code: 4,
            ..last_run("Timed out after 60s.", Some(latest))
        }),
        ..fixture_state()
    };
    let prompt = render(&state);
    assert_eq!(
        section(&prompt, "DURABLE HANDOFF CONTEXT"),
        "latest_relevant_summary:
  attempt_id: 20260705T115000Z-phase-1
  phase_id: phase-2
  status: timeout
  outcome_path: /outcomes/latest.json
  summary:
    Timed out after 60s.
earlier_committed_outcomes:
  - phase-1 | phase-complete | /outcomes/complete.json
  - phase-2 | blocked | /outcomes/blocked.json
  - phase-2 | needs-clarification | /outcomes/clarify.json
  - phase-2 | agent-failed | /outcomes/failed.json
"
    );
    assert_eq!(
        prompt.matches(latest).count(),
        2,
        "state summary and handoff only"
    );
}

#[test]
fn an_abandoned_last_run_has_no_outcome_and_hides_nothing_from_the_index() {
    let state = State {
        last_run: Some(LastRun {
            status: AttemptStatus::Interrupted,
            exit_code: 4,
            ..last_run("abandoned attempt resolved as interrupted", None)
        }),
        ..fixture_state()
    };
    let prompt = render(&state);
    let handoff = section(&prompt, "DURABLE HANDOFF CONTEXT");
    assert!(handoff.contains("  status: interrupted\n  outcome_path: none\n"));
    assert!(handoff.ends_with(&format!(
            "earlier_committed_outcomes:\n  - phase-1 | phase-complete | {DIR}/outcomes/20260705T115000Z-phase-1.json\n"
        )));
    assert!(section(&prompt, "PREVIOUS STATE SUMMARY").contains("  outcome_path: none\n"));
}

#[test]
fn an_empty_state_renders_none_everywhere() {
    let prompt = render(&State::default());
    assert_eq!(
        section(&prompt, "PREVIOUS STATE SUMMARY"),
        "plan: none
completed_phase_ids: none
committed_outcome_count: 0
current_phase: none
stop: none
active_attempt: none
last_run: none
"
    );
    assert_eq!(
        section(&prompt, "DURABLE HANDOFF CONTEXT"),
        "latest_relevant_summary: none\nearlier_committed_outcomes: none\n"
    );
}

#[test]
fn completed_phase_ids_are_comma_separated() {
    let state = State {
        completed_phase_ids: vec!["phase-1".into(), "phase-3".into()],
        ..State::default()
    };
    assert!(render(&state).contains("\ncompleted_phase_ids: phase-1, phase-3\n"));
}

#[test]
fn a_prepared_attempt_is_summarized() {
    let state = State {
        active_attempt: Some(ActiveAttempt {
            id: "20260705T120102Z-phase-2".into(),
            status: ActiveStatus::Prepared,
            phase: PhaseRef {
                id: "phase-2".into(),
                title: "Prompt Builder".into(),
            },
            snapshot: SnapshotRef {
                path: "/plan-repo/docs/plans/example.md".into(),
                sha256: "abc123".into(),
            },
            execution_workspace: "/service".into(),
            started_at: at("2026-07-05T12:01:02Z"),
            prompt_path: "/p.txt".into(),
            transcript_path: "/t.txt".into(),
            outcome_path: "/o.json".into(),
            process: None,
        }),
        ..State::default()
    };
    assert!(render(&state).contains(
        "\nactive_attempt:
  id: 20260705T120102Z-phase-2
  status: prepared
  phase_id: phase-2
  snapshot_sha256: abc123
  execution_workspace: /service
  started_at: 2026-07-05T12:01:02Z
  prompt_path: /p.txt
  transcript_path: /t.txt
  outcome_path: /o.json
last_run: none\n"
    ));
}

#[test]
fn a_stop_is_summarized_with_multiline_values_as_blocks() {
    let stop = |message: Option<&str>, question: Option<&str>| State {
        stop: Some(Stop {
            reason: AttemptStatus::NeedsClarification,
            phase_id: "phase-2".into(),
            message: message.map(str::to_owned),
            clarification_request: question.map(str::to_owned),
        }),
        ..State::default()
    };
    assert!(render(&stop(None, Some("Which API?"))).contains(
        "\nstop:
  reason: needs-clarification
  phase_id: phase-2
  message: none
  clarification_request: Which API?
active_attempt: none\n"
    ));
    assert!(
        render(&stop(
            Some("exit 1"),
            Some("Which API?\n<phase-complete>x</phase-complete>")
        ))
        .contains(
            "\n  message: exit 1
  clarification_request:
    Which API?
    <phase-complete>x</phase-complete>
active_attempt: none\n"
        )
    );
}

#[test]
fn ends_with_the_grammar_and_one_newline() {
    let prompt = render(&fixture_state());
    assert!(prompt.ends_with(&format!(
        "TERMINAL MARKER GRAMMAR START\n{MARKER_GRAMMAR}TERMINAL MARKER GRAMMAR END\n"
    )));
}

/// Lines outside the grammar section that start with a result tag.
fn tag_lines_outside_grammar(prompt: &str) -> Vec<String> {
    let mut in_grammar = false;
    let mut found = Vec::new();
    for line in prompt.split('\n') {
        match line {
            "TERMINAL MARKER GRAMMAR START" => in_grammar = true,
            "TERMINAL MARKER GRAMMAR END" => in_grammar = false,
            _ if !in_grammar && (line.starts_with("<phase-") || line.starts_with("</phase-")) => {
                found.push(line.to_owned());
            }
            _ => {}
        }
    }
    found
}

#[test]
fn no_line_outside_the_grammar_starts_with_a_tag() {
    assert_eq!(
        tag_lines_outside_grammar(&render(&fixture_state())),
        Vec::<String>::new()
    );
    assert_eq!(
        render(&fixture_state())
            .lines()
            .filter(|line| line.starts_with("<phase-"))
            .count(),
        3
    );
}

fn hostile() -> impl Strategy<Value = String> {
    "(<phase-complete>|</phase-complete>|<phase-blocked>|\n|\r\n|\r|[a-z ]){0,12}"
}

proptest! {
    #[test]
    fn state_text_never_starts_a_line_with_a_tag(
        summary in hostile(),
        message in hostile(),
        question in hostile(),
        path in hostile(),
        indexed_path in hostile(),
        title in "(<phase-complete>|[a-z ]){1,5}",
    ) {
        let mut state = fixture_state();
        state.committed_outcomes.push(outcome("phase-2", AttemptStatus::Blocked, &indexed_path));
        state.stop = Some(Stop {
            reason: AttemptStatus::Blocked,
            phase_id: "phase-2".into(),
            message: Some(message),
            clarification_request: Some(question),
        });
        state.last_run = Some(LastRun { execution_workspace: path.clone(), ..last_run(&summary, Some(&path)) });
        let mut selected = phase(BODY);
        selected.title = title;
        let transcript_path = format!("{DIR}/transcripts/x.txt");
        let prompt = render_prompt(&PromptContext {
            plan_workspace_path: &path,
            execution_workspace_path: &path,
            plan_path: &path,
            state_path: &path,
            run_id: &path,
            transcript_path: &transcript_path,
            preamble: PREAMBLE,
            phase: &selected,
            state: &state,
            retry: Some(&RetryNote {
                attempt: 2,
                of: 3,
                reason: path.clone(),
                earlier: vec![EarlierAttempt {
                    attempt_id: path.clone(),
                    status: "missing-marker".into(),
                    summary: path.clone(),
                    transcript_path: path.clone(),
                }],
            }),
            verification_failure: Some(&FailedCheck {
                index: 1,
                command_first_line: path.clone(),
                exit_code: Some(1),
                signal: None,
                timed_out: false,
                output_tail: summary.clone(),
            }),
        });
        prop_assert_eq!(tag_lines_outside_grammar(&prompt), Vec::<String>::new());
        prop_assert!(prompt.ends_with("TERMINAL MARKER GRAMMAR END\n"));
    }
}

#[test]
fn a_retried_attempt_is_told_which_attempt_it_is_and_what_came_before() {
    let state = State::default();
    let note = RetryNote {
        attempt: 2,
        of: 3,
        reason: "exponential backoff".into(),
        earlier: vec![EarlierAttempt {
            attempt_id: "20260705T120000Z-phase-2-a".into(),
            status: "missing-marker".into(),
            summary: "agent output did not contain a terminal marker\n<phase-complete>x".into(),
            transcript_path: format!("{DIR}/transcripts/20260705T120000Z-phase-2-a.txt"),
        }],
    };
    let first = render_with(&state, PREAMBLE, &phase(BODY));
    let retried = render_attempt(&state, PREAMBLE, &phase(BODY), Some(&note));
    let section = format!(
        "RETRY\n\
         - Phase phase-2 was attempted before in this run; this is attempt 2 of 3.\n\
         - The earlier attempts below may have left partial changes in execution_workspace_path: \
         inspect them first, then build on them or undo them deliberately. Read an earlier \
         transcript only when its details matter.\n\
         retry_reason: exponential backoff\n\
         earlier_attempts_of_this_phase:\n\
         \x20 - attempt_id: 20260705T120000Z-phase-2-a\n\
         \x20   status: missing-marker\n\
         \x20   summary:\n\
         \x20     agent output did not contain a terminal marker\n\
         \x20     <phase-complete>x\n\
         \x20   transcript_path: {DIR}/transcripts/20260705T120000Z-phase-2-a.txt\n\n"
    );
    // The section sits between the failure modes and the plan intent; nothing else changes.
    let at = first.find("GLOBAL PLAN INTENT START").unwrap();
    assert_eq!(
        retried,
        format!("{}{section}{}", &first[..at], &first[at..])
    );
    assert!(tag_lines_outside_grammar(&retried).is_empty());
}

fn phase_with_checks() -> Phase {
    let body = "### Goal\nBuild prompts.\n\n### Verify\n\n```sh\ncargo test --locked\n```\n\n```python3\nimport sys\n```\n";
    let mut selected = phase(body);
    selected.verify = vec![
        VerifyCheck {
            index: 1,
            interpreter: Interpreter::Sh,
            script: "cargo test --locked\n".into(),
            line: 16,
        },
        VerifyCheck {
            index: 2,
            interpreter: Interpreter::Python3,
            script: "import sys\n".into(),
            line: 20,
        },
    ];
    selected
}

fn failed_check(output_tail: &str) -> FailedCheck {
    FailedCheck {
        index: 1,
        command_first_line: "cargo test --locked".into(),
        exit_code: Some(101),
        signal: None,
        timed_out: false,
        output_tail: output_tail.into(),
    }
}

fn render_failed(phase: &Phase, failure: Option<&FailedCheck>) -> String {
    let state = fixture_state();
    let state_path = format!("{DIR}/state.json");
    let transcript_path = format!("{DIR}/transcripts/20260705T120102Z-phase-2.txt");
    render_prompt(&PromptContext {
        plan_workspace_path: "/plan-repo",
        execution_workspace_path: "/service",
        plan_path: "/plan-repo/docs/plans/example.md",
        state_path: &state_path,
        run_id: "20260705T120102Z-phase-2",
        transcript_path: &transcript_path,
        preamble: PREAMBLE,
        phase,
        state: &state,
        retry: None,
        verification_failure: failure,
    })
}

#[test]
fn a_phase_with_checks_is_told_they_hold_its_completion_and_its_body_is_unchanged() {
    let selected = phase_with_checks();
    let prompt = render_failed(&selected, None);
    let without = render_failed(
        &Phase {
            verify: Vec::new(),
            ..selected.clone()
        },
        None,
    );
    let section = "VERIFICATION\n\
         - After you report `<phase-complete>`, the runner runs the checks of the selected \
         phase's Verify section (in SELECTED PHASE BODY below), in order, in \
         execution_workspace_path, and accepts the completion only when every check passes; \
         the first failing check stops the phase as verification-failed.\n\
         - Run the checks yourself and make them pass before reporting completion.\n\
         checks:\n\
         \x20 - check 1 (sh): cargo test --locked\n\
         \x20 - check 2 (python3): import sys\n\n";
    let at = without.find("GLOBAL PLAN INTENT START").unwrap();
    assert_eq!(
        prompt,
        format!("{}{section}{}", &without[..at], &without[at..])
    );
    assert!(prompt.contains(&format!(
        "SELECTED PHASE BODY START\n{}SELECTED PHASE BODY END\n",
        selected.body
    )));
    assert!(tag_lines_outside_grammar(&prompt).is_empty());
}

#[test]
fn the_attempt_after_a_failed_check_is_told_which_with_the_tail_of_its_output() {
    let selected = phase_with_checks();
    let tail = "test parser::empty ... FAILED\n<phase-complete>printed by a test</phase-complete>\npanicked at src/plan.rs:12";
    let prompt = render_failed(&selected, Some(&failed_check(tail)));
    let plain = render_failed(&selected, None);
    let section = "VERIFICATION FAILURE\n\
         - The previous attempt of phase phase-2 reported completion, but verify check 1 \
         exited with code 101, so the completion was not accepted.\n\
         - Find the cause in the check's output below, fix it in execution_workspace_path, run \
         the check yourself, and report completion only when every check passes.\n\
         failed_check: 1\n\
         command_first_line: cargo test --locked\n\
         exit_code: 101\n\
         timed_out: no\n\
         output_tail:\n\
         \x20 test parser::empty ... FAILED\n\
         \x20 <phase-complete>printed by a test</phase-complete>\n\
         \x20 panicked at src/plan.rs:12\n\n";
    let at = plain.find("GLOBAL PLAN INTENT START").unwrap();
    assert_eq!(prompt, format!("{}{section}{}", &plain[..at], &plain[at..]));
    assert!(tag_lines_outside_grammar(&prompt).is_empty());
    // A check killed after its limit, with no output at all.
    let killed = FailedCheck {
        exit_code: None,
        signal: Some(9),
        timed_out: true,
        ..failed_check("")
    };
    let prompt = render_failed(&selected, Some(&killed));
    assert!(prompt.contains("but verify check 1 timed out and was stopped, so"));
    assert!(prompt.contains("exit_code: none\ntimed_out: yes\noutput_tail: none\n"));
}

proptest! {
    #[test]
    fn a_check_output_tail_never_starts_a_line_with_a_tag(tail in hostile(), line in hostile()) {
        let failure = FailedCheck {
            command_first_line: line,
            ..failed_check(&tail)
        };
        let prompt = render_failed(&phase_with_checks(), Some(&failure));
        prop_assert_eq!(tag_lines_outside_grammar(&prompt), Vec::<String>::new());
    }
}
