//! `answer`: a person's answer written into the plan of a stopped phase, every refusal writing
//! nothing, and `answer --run` through to completion.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use crate::common::*;

const PLAN: &str = "plan.md";

/// An agent that asks its question in phase 1 until its prompt holds an answer section, and
/// completes every other phase.
fn asking_agent(sandbox: &Sandbox) -> std::path::PathBuf {
    sandbox.script(
        "agent",
        "if grep -q -e '^The answer:' -e 'selected_phase_id: phase-[2-9]' ; then echo '<phase-complete>used the answer</phase-complete>'; \
         else echo '<phase-needs-clarification>Which database: Postgres or SQLite?</phase-needs-clarification>'; fi",
    )
}

/// A stopped plan: `plan` written, run once with the asking agent (exit 3).
fn stopped(plan: &str) -> (Sandbox, std::path::PathBuf) {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan);
    let agent = asking_agent(&sandbox);
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(3);
    (sandbox, agent)
}

/// What `answer` inserted at byte `at` of the plan, checking that every other byte is kept.
fn inserted(before: &[u8], after: &[u8], at: usize) -> String {
    let added = after.len() - before.len();
    assert_eq!(&after[..at], &before[..at], "every byte before is kept");
    assert_eq!(
        &after[at + added..],
        &before[at..],
        "every byte after is kept"
    );
    String::from_utf8(after[at..at + added].to_vec()).unwrap()
}

#[test]
fn an_answer_goes_into_the_stopped_phase_and_the_next_line_continues() {
    let plan = plan_with_phases(2).replace('\n', "\r\n");
    let (sandbox, _agent) = stopped(&plan);
    fs::set_permissions(sandbox.path(PLAN), fs::Permissions::from_mode(0o640)).unwrap();
    let state_before = sandbox.state_bytes(PLAN).unwrap();
    let run = sandbox.run(&["answer", "--plan", PLAN, "Use SQLite; see docs/db.md."]);
    run.assert_code(0);
    let after = fs::read(sandbox.path(PLAN)).unwrap();
    let phase_two = plan.find("## Phase 2").unwrap();
    let section = inserted(plan.as_bytes(), &after, phase_two);
    assert!(section.starts_with("### Answer ("), "{section:?}");
    assert!(section.contains(
        "\r\n\r\nThe agent of phase-1 asked:\r\n\r\n> Which database: Postgres or SQLite?\r\n"
    ));
    assert!(section.ends_with("The answer:\r\n\r\nUse SQLite; see docs/db.md.\r\n\r\n"));
    assert!(
        !section.replace("\r\n", "").contains('\n'),
        "CRLF throughout"
    );
    assert_eq!(
        fs::metadata(sandbox.path(PLAN))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o640
    );
    assert_eq!(
        sandbox.state_bytes(PLAN).unwrap(),
        state_before,
        "state untouched"
    );
    assert!(run.stdout.contains("answered: wrote into phase-1 of"));
    assert!(run.stdout.contains("  Use SQLite; see docs/db.md."));
    let next = run.stderr.lines().last().unwrap();
    let absolute = sandbox.path(PLAN).display().to_string();
    assert!(
        next.starts_with(&format!(
            "next: ai-session-handler run --plan {absolute} --agent-cmd "
        )),
        "{next}"
    );
    assert!(
        next.ends_with(" --quiet --retry-stopped --accept-plan-change"),
        "{next}"
    );
}

#[test]
fn answers_from_standard_input_and_from_a_file() {
    let (sandbox, _agent) = stopped(&plan_with_phases(1));
    let mut child = sandbox
        .command()
        .args(["answer", "--plan", PLAN, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all("Ünïcode — from stdin\n".as_bytes())
        .unwrap();
    let run = Run::from_output(child.wait_with_output().unwrap());
    run.assert_code(0);
    sandbox.write("answer.txt", "line one\n\n```sh\nmake db\n```\n");
    sandbox
        .run(&["answer", "--plan", PLAN, "--file", "answer.txt"])
        .assert_code(0);
    let plan = fs::read_to_string(sandbox.path(PLAN)).unwrap();
    assert!(
        plan.contains("The answer:\n\nÜnïcode — from stdin\n"),
        "{plan}"
    );
    assert!(
        plan.contains("The answer:\n\nline one\n\n```sh\nmake db\n```\n"),
        "{plan}"
    );
}

#[test]
fn every_refusal_exits_5_and_writes_nothing() {
    let (sandbox, _agent) = stopped(&plan_with_phases(2));
    let plan = fs::read(sandbox.path(PLAN)).unwrap();
    let state = sandbox.state_bytes(PLAN).unwrap();
    for (args, words) in [
        (
            vec!["## Phase 7: Sneaky\n\n### Workspace\n\n."],
            "phase number 2 appears after phase 7",
        ),
        (vec!["```\nnever closed"], "unclosed"),
        (vec!["### Workspace\n\n../elsewhere"], "Workspace"),
        (vec!["  \n\t"], "the answer is empty"),
        (vec![], "the answer is missing"),
        (vec!["text", "--file", "answer.txt"], "cannot be used with"),
    ] {
        let mut command = vec!["answer", "--plan", PLAN];
        command.extend(args.iter().copied());
        let run = sandbox.run(&command);
        run.assert_code(5);
        assert!(run.stderr.contains(words), "{words}: {}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "one line: {}", run.stderr);
        assert_eq!(fs::read(sandbox.path(PLAN)).unwrap(), plan, "{words}");
        assert_eq!(sandbox.state_bytes(PLAN).unwrap(), state, "{words}");
    }
}

#[test]
fn only_a_question_or_a_blocker_can_be_answered() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let run = sandbox.run(&["answer", "--plan", PLAN, "x"]);
    run.assert_code(5);
    assert!(run.stderr.contains("no phase of"), "{}", run.stderr);
    let failing = agent(&sandbox, "exit 1");
    sandbox
        .run_plan(PLAN, &failing, &["--quiet"])
        .assert_code(4);
    let before = fs::read(sandbox.path(PLAN)).unwrap();
    let run = sandbox.run(&["answer", "--plan", PLAN, "x"]);
    run.assert_code(5);
    assert!(
        run.stderr
            .contains("phase phase-1 is stopped: agent-failed, not on a question or a blocker"),
        "{}",
        run.stderr
    );
    assert_eq!(fs::read(sandbox.path(PLAN)).unwrap(), before);
}

#[test]
fn a_blocker_is_answered_like_a_question() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let blocked = agent(
        &sandbox,
        "echo '<phase-blocked>needs the staging password</phase-blocked>'",
    );
    sandbox
        .run_plan(PLAN, &blocked, &["--quiet"])
        .assert_code(2);
    sandbox
        .run(&["answer", "--plan", PLAN, "It is in the vault."])
        .assert_code(0);
    let plan = fs::read_to_string(sandbox.path(PLAN)).unwrap();
    assert!(plan.contains(
        "The agent of phase-1 reported it was blocked:\n\n> needs the staging password\n"
    ));
}

#[test]
fn the_preamble_and_a_plan_without_a_final_line_break() {
    let plan = plan_with_phases(1);
    let (sandbox, _agent) = stopped(plan.trim_end());
    sandbox
        .run(&[
            "answer",
            "--plan",
            PLAN,
            "--preamble",
            "Applies to every phase.",
        ])
        .assert_code(0);
    let after = fs::read_to_string(sandbox.path(PLAN)).unwrap();
    let first = after.find("## Phase 1").unwrap();
    assert!(after[..first].contains("Applies to every phase."));
    assert!(
        after.ends_with("Do step 1."),
        "no final line break added: {after:?}"
    );
}

#[test]
fn answering_is_refused_while_a_run_holds_the_plan() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let asking = asking_agent(&sandbox);
    sandbox.run_plan(PLAN, &asking, &["--quiet"]).assert_code(3);
    let before = fs::read(sandbox.path(PLAN)).unwrap();
    let waiting = sandbox.script(
        "waiting",
        &format!("cat >/dev/null; touch {}; sleep 30", at(&sandbox, "ready")),
    );
    let waiting = waiting.to_str().unwrap().to_owned();
    let child = sandbox.spawn(&[
        "run",
        "--plan",
        PLAN,
        "--agent-cmd",
        &waiting,
        "--quiet",
        "--retry-stopped",
    ]);
    wait_running(&sandbox, PLAN, "ready");
    let run = sandbox.run(&["answer", "--plan", PLAN, "too late"]);
    run.assert_code(5);
    assert!(
        run.stderr
            .contains("is already owned by another ai-session-handler invocation"),
        "{}",
        run.stderr
    );
    assert_eq!(fs::read(sandbox.path(PLAN)).unwrap(), before);
    send_signal(&child, nix::sys::signal::Signal::SIGTERM);
    wait_for_exit(child, PATIENCE);
    sandbox.assert_no_survivors();
}

#[test]
fn answer_run_continues_with_the_stopped_runs_own_options_from_anywhere() {
    let sandbox = Sandbox::new();
    sandbox.write("docs/plans/x.md", plan_with_phases(2));
    let asking = asking_agent(&sandbox);
    let asking = asking.to_str().unwrap();
    sandbox
        .run(&[
            "run",
            "--plan",
            "docs/plans/x.md",
            "--agent-cmd",
            asking,
            "--quiet",
            "--timeout",
            "60",
        ])
        .assert_code(3);
    // From another directory, with the plan given by its absolute path.
    let elsewhere = tempfile::tempdir().unwrap();
    let plan = sandbox.path("docs/plans/x.md");
    let output = sandbox
        .command()
        .current_dir(elsewhere.path())
        .args(["answer", "--plan"])
        .arg(&plan)
        .args(["Postgres.", "--run"])
        .output()
        .unwrap();
    let run = Run::from_output(output);
    run.assert_code(0);
    assert!(
        run.stdout.contains("runner-complete: all phases complete"),
        "{}",
        run.stdout
    );
    let running = run
        .stderr
        .lines()
        .find(|line| line.starts_with("running: "))
        .expect("the command is printed first");
    assert!(running.contains("--timeout 60"), "{running}");
    assert!(
        running.ends_with("--quiet --retry-stopped --accept-plan-change"),
        "{running}"
    );
    let state = sandbox.state("docs/plans/x.md");
    assert_eq!(
        state["completed_phase_ids"],
        serde_json::json!(["phase-1", "phase-2"])
    );
    // The attempt after the answer read it in its prompt.
    let phase_one: Vec<String> = sandbox
        .artifacts("docs/plans/x.md", "prompts")
        .iter()
        .map(|path| fs::read_to_string(path).unwrap())
        .filter(|prompt| prompt.contains("selected_phase_id: phase-1"))
        .collect();
    assert_eq!(phase_one.len(), 2);
    let answered = phase_one
        .iter()
        .filter(|prompt| prompt.contains("The answer:\n\nPostgres.\n"))
        .count();
    assert_eq!(answered, 1, "the attempt after the answer saw it");
}

#[test]
fn a_fenced_example_heading_is_not_a_phase_for_the_answer_either() {
    let plan = "# Plan\n\n## Phase 1: One\n\n### Workspace\n\n.\n\n### Goal\n\n```md\n## Phase 9: example\n```\n\n## Phase 2: Two\n\n### Workspace\n\n.\n";
    let (sandbox, _agent) = stopped(plan);
    sandbox
        .run(&["answer", "--plan", PLAN, "Yes."])
        .assert_code(0);
    let after = fs::read_to_string(sandbox.path(PLAN)).unwrap();
    let answer = after.find("The answer:").unwrap();
    assert!(after.find("```\n").unwrap() < answer && answer < after.find("## Phase 2").unwrap());
}
