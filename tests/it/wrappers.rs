//! Black-box tests of the provider wrappers (docs/providers.md): the real handler runs the real wrapper
//! binaries, which find fake `codex-lean` / `claude-lean` shell scripts first on PATH.

use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::*;
use serde_json::json;

pub(crate) const CODEX: &str = env!("CARGO_BIN_EXE_ai-session-handler-codex-high");
pub(crate) const CLAUDE_HIGH: &str = env!("CARGO_BIN_EXE_ai-session-handler-claude-high");
const CLAUDE_MEDIUM: &str = env!("CARGO_BIN_EXE_ai-session-handler-claude-medium");

/// PATH with the sandbox's `bin/` (where fake launchers live) first.
pub(crate) fn path_with_fakes(sandbox: &Sandbox) -> OsString {
    let mut path = sandbox.path("bin").into_os_string();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()));
    path
}

/// `run --plan plan.md --agent-cmd '<wrapper> <wrapper args…>' <handler args…>` on a one-phase
/// plan, with the fake launchers on PATH and no model variables inherited from the caller.
pub(crate) fn run_wrapped(
    sandbox: &Sandbox,
    wrapper: &str,
    wrapper_args: &[&str],
    handler_args: &[&str],
    env: &[(&str, &str)],
) -> Run {
    sandbox.write("plan.md", plan_with_phases(1));
    let agent_cmd = shell_words::join(std::iter::once(wrapper).chain(wrapper_args.iter().copied()));
    let mut command = sandbox.command();
    command
        .env("PATH", path_with_fakes(sandbox))
        .env_remove("CODEX_MODEL")
        .env_remove("ANTHROPIC_MODEL")
        .envs(env.iter().copied())
        .args(["run", "--plan", "plan.md", "--agent-cmd", &agent_cmd])
        .args(handler_args);
    finished(command.output().expect("run handler"))
}

pub(crate) fn finished(output: Output) -> Run {
    Run::from_output(output)
}

pub(crate) fn transcript(sandbox: &Sandbox) -> String {
    let transcripts = sandbox.artifacts("plan.md", "transcripts");
    assert_eq!(transcripts.len(), 1, "{transcripts:?}");
    fs::read_to_string(&transcripts[0]).expect("transcript")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[track_caller]
pub(crate) fn assert_contains(haystack: &str, needle: &str) {
    assert!(
        haystack.contains(needle),
        "missing {needle:?} in:\n{haystack}"
    );
}

#[track_caller]
fn assert_marker_failure(sandbox: &Sandbox, run: &Run, status: &str) {
    run.assert_code(4);
    assert_contains(&run.stderr, &format!("{status}: "));
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!([]));
    assert_eq!(state["last_run"]["status"], status);
}

/// What a fake `codex-lean` prints, writes as its final message, and exits with.
#[derive(Clone, Copy, Default)]
struct FakeCodex<'a> {
    stdout: &'a str,
    stderr: &'a str,
    /// Written to the `--output-last-message` file; `None` writes no file.
    final_message: Option<&'a str>,
    exit_code: i32,
}

/// Installs a fake `codex-lean` that records its argv, environment and prompt under `record/`.
fn fake_codex(sandbox: &Sandbox, fake: FakeCodex) {
    let record = sandbox.path("record");
    fs::create_dir_all(&record).expect("record dir");
    let stdout = sandbox.write("fixture/stdout", fake.stdout);
    let stderr = sandbox.write("fixture/stderr", fake.stderr);
    let write_final = match fake.final_message {
        Some(message) => {
            let message = sandbox.write("fixture/final-message", message);
            format!("cat '{}' > \"$out\"", message.display())
        }
        None => String::new(),
    };
    sandbox.script(
        "codex-lean",
        &format!(
            "out=''; prev=''\n\
             for arg in \"$@\"; do [ \"$prev\" = --output-last-message ] && out=$arg; prev=$arg; done\n\
             echo \"$*\" > '{record}/argv'\n\
             echo \"effort=$CODEX_REASONING_EFFORT model=${{CODEX_MODEL-unset}}\" > '{record}/env'\n\
             cat > '{record}/prompt'\n\
             cat '{stdout}'\n\
             cat '{stderr}' >&2\n\
             {write_final}\n\
             exit {exit_code}\n",
            record = record.display(),
            stdout = stdout.display(),
            stderr = stderr.display(),
            exit_code = fake.exit_code,
        ),
    );
}

/// Installs a fake `claude-lean` that records its argv, environment and prompt under
/// `record/`, then prints `stdout` in pieces cut at `cuts` (byte offsets), pausing between
/// them so the wrapper reads each piece separately.
fn fake_claude(sandbox: &Sandbox, stdout: &[u8], cuts: &[usize]) {
    let record = sandbox.path("record");
    fs::create_dir_all(&record).expect("record dir");
    let mut printing = String::new();
    let mut start = 0;
    for (index, end) in cuts.iter().copied().chain([stdout.len()]).enumerate() {
        let piece = sandbox.write(&format!("fixture/piece-{index}"), &stdout[start..end]);
        printing.push_str(&format!("cat '{}'\nsleep 0.02\n", piece.display()));
        start = end;
    }
    sandbox.script(
        "claude-lean",
        &format!(
            "echo \"$*\" > '{record}/argv'\n\
             echo \"model=${{ANTHROPIC_MODEL-unset}}\" > '{record}/env'\n\
             cat > '{record}/prompt'\n\
             {printing}",
            record = record.display(),
        ),
    );
}

// --- Codex --------------------------------------------------------------------------------

#[test]
fn codex_valid_final_message_completes_the_phase() {
    let sandbox = Sandbox::new();
    fake_codex(
        &sandbox,
        FakeCodex {
            stdout: "live <phase-complete>live claim</phase-complete>\n\
                     review: <phase-blocked > is malformed\r\n",
            stderr: "```python\nprint('unfinished fence')",
            final_message: Some("done\n<phase-complete>Implemented.</phase-complete>\n"),
            ..FakeCodex::default()
        },
    );
    let run = run_wrapped(&sandbox, CODEX, &[], &["--quiet"], &[]);
    run.assert_code(0);
    assert_eq!(run.stdout, "runner-complete: all phases complete\n");
    assert_eq!(run.stderr, "");
    let state = sandbox.state("plan.md");
    assert_eq!(state["completed_phase_ids"], json!(["phase-1"]));
    assert_eq!(state["last_run"]["summary"], "Implemented.");

    let transcript = transcript(&sandbox);
    assert_contains(&transcript, "[codex] live \n");
    assert_contains(
        &transcript,
        "[codex] review: &lt;phase-blocked > is malformed\r\n",
    );
    // The wrapper writes whole lines; the transcript interleaves the two streams by arrival,
    // line by line. The unterminated last stderr line is ended by the wrapper.
    assert_has_line(&transcript, "[codex] ```python");
    assert_has_line(&transcript, "[codex] print('unfinished fence')");
    assert_contains(&transcript, "<phase-complete>Implemented.</phase-complete>");
    assert!(!transcript.contains("live claim"), "{transcript}");
    assert_eq!(
        transcript.matches("<phase-complete>").count(),
        1,
        "{transcript}"
    );

    let argv = read(&sandbox.path("record/argv"));
    assert!(
        argv.starts_with("exec --json --color never --output-last-message /")
            && argv.ends_with("/final-message.txt\n"),
        "{argv}"
    );
    assert_eq!(
        read(&sandbox.path("record/env")),
        "effort=high model=unset\n"
    );
    let prompts = sandbox.artifacts("plan.md", "prompts");
    assert_eq!(read(&sandbox.path("record/prompt")), read(&prompts[0]));
    sandbox.assert_no_survivors();
}

#[test]
fn codex_model_is_passed_as_codex_model_and_otherwise_inherited() {
    let valid = FakeCodex {
        final_message: Some("<phase-complete>ok</phase-complete>"),
        ..FakeCodex::default()
    };
    let sandbox = Sandbox::new();
    fake_codex(&sandbox, valid);
    run_wrapped(&sandbox, CODEX, &["--model", "gpt-5.5"], &["--quiet"], &[]).assert_code(0);
    assert_eq!(
        read(&sandbox.path("record/env")),
        "effort=high model=gpt-5.5\n"
    );

    let sandbox = Sandbox::new();
    fake_codex(&sandbox, valid);
    let env = [("CODEX_MODEL", "from-env")];
    run_wrapped(&sandbox, CODEX, &[], &["--quiet"], &env).assert_code(0);
    assert_eq!(
        read(&sandbox.path("record/env")),
        "effort=high model=from-env\n"
    );
}

#[test]
fn codex_tag_text_in_diagnostics_is_never_a_result() {
    let sandbox = Sandbox::new();
    fake_codex(
        &sandbox,
        FakeCodex {
            stdout: "<phase-complete>live only</phase-complete>\n",
            stderr: "quoted </phase-complete> and <phase-blocked >\n",
            ..FakeCodex::default()
        },
    );
    let run = run_wrapped(&sandbox, CODEX, &[], &[], &[]);
    assert_marker_failure(&sandbox, &run, "missing-marker");
    let transcript = transcript(&sandbox);
    assert_contains(
        &transcript,
        "[codex] quoted &lt;/phase-complete> and &lt;phase-blocked >\n",
    );
    assert_contains(
        &transcript,
        "[codex] no result reported: codex-lean wrote no final message (--output-last-message)\n",
    );
    assert!(!transcript.contains("live only"), "{transcript}");
}

#[test]
fn codex_invalid_or_empty_final_message_is_a_marker_failure() {
    let cases = [
        (
            "<phase-complete>fixture result</phase-complete>\nRuntimeError: failed\n",
            "[codex] &lt;phase-complete>fixture result&lt;/phase-complete>\n\
             [codex] RuntimeError: failed\n",
        ),
        (
            "I ran out of time.\n",
            "[codex] no result reported: the final message is not one well-framed result \
             block: it has no result block\n",
        ),
        (
            "",
            "[codex] no result reported: the final message is empty\n",
        ),
        (
            "<phase-complete>a</phase-complete>\n<phase-blocked>b</phase-blocked>\n",
            "multiple terminal markers in stdout\n",
        ),
    ];
    for (final_message, shown) in cases {
        let sandbox = Sandbox::new();
        fake_codex(
            &sandbox,
            FakeCodex {
                stdout: "<phase-complete>live claim</phase-complete>\n",
                final_message: Some(final_message),
                ..FakeCodex::default()
            },
        );
        let run = run_wrapped(&sandbox, CODEX, &[], &[], &[]);
        assert_marker_failure(&sandbox, &run, "missing-marker");
        let transcript = transcript(&sandbox);
        assert_contains(&transcript, shown);
        assert!(!transcript.contains("live claim"), "{transcript}");
    }
}

#[test]
fn codex_nonzero_exit_with_a_valid_result_is_agent_failed() {
    let sandbox = Sandbox::new();
    fake_codex(
        &sandbox,
        FakeCodex {
            final_message: Some("<phase-complete>Implemented.</phase-complete>\n"),
            exit_code: 9,
            ..FakeCodex::default()
        },
    );
    let run = run_wrapped(&sandbox, CODEX, &[], &[], &[]);
    assert_marker_failure(&sandbox, &run, "agent-failed");
    assert_contains(&run.stderr, "agent command exited with code 9");
    // The wrapper still reports the result; the runner's precedence rejects it.
    assert_contains(
        &transcript(&sandbox),
        "<phase-complete>Implemented.</phase-complete>\n",
    );
}

// --- Claude -------------------------------------------------------------------------------

fn assistant_text(text: &str) -> String {
    json!({"type": "assistant", "message": {"role": "assistant",
        "content": [{"type": "text", "text": text}]}})
    .to_string()
}

fn result_event(subtype: &str, is_error: bool, text: &str) -> String {
    json!({"type": "result", "subtype": subtype, "is_error": is_error, "result": text}).to_string()
}

#[test]
fn claude_stream_json_split_at_odd_boundaries_completes_the_phase() {
    let sandbox = Sandbox::new();
    let tool_use = json!({"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls -la"}}]}});
    let session = [
        json!({"type": "system", "subtype": "init"}).to_string(),
        assistant_text("Looking at <phase-blocked > in caf\u{e9}.txt\nsecond line"),
        tool_use.to_string(),
        "not json <here>".to_owned(),
        assistant_text("Done.\n<phase-complete>Built it.</phase-complete>"),
        result_event(
            "success",
            false,
            "Done.\n<phase-complete>Built it.</phase-complete>",
        ),
    ]
    .join("\n");
    let at = |needle: &str, offset: usize| session.find(needle).expect(needle) + offset;
    let cuts = [
        at("pe\":\"assistant", 0),     // inside a key
        at("caf\u{e9}", 4),            // inside the two bytes of `é`
        at("\\nsecond", 1),            // between a backslash and its escape
        at("not json", 0),             // right after a line end
        at("</phase-complete>\"}", 5), // inside a tag in the live text
        at("\"result\":", 3),          // inside the result event
    ];
    fake_claude(&sandbox, session.as_bytes(), &cuts);
    let run = run_wrapped(&sandbox, CLAUDE_HIGH, &[], &["--quiet"], &[]);
    run.assert_code(0);
    assert_eq!(run.stdout, "runner-complete: all phases complete\n");
    assert_eq!(run.stderr, "");
    assert_eq!(sandbox.state("plan.md")["last_run"]["summary"], "Built it.");
    assert_eq!(
        read(&sandbox.path("record/argv")),
        "--effort high -p --output-format stream-json --verbose --include-partial-messages\n"
    );
    let prompts = sandbox.artifacts("plan.md", "prompts");
    assert_eq!(read(&sandbox.path("record/prompt")), read(&prompts[0]));

    let transcript = transcript(&sandbox);
    assert_contains(
        &transcript,
        "[claude] Looking at &lt;phase-blocked > in caf\u{e9}.txt\n\
         [claude] second line\n\
         [claude] tool: Bash ls -la\n\
         [claude] not json &lt;here>\n\
         [claude] Done.\n\
         <phase-complete>Built it.</phase-complete>\n",
    );
    assert_eq!(
        transcript.matches("<phase-complete>").count(),
        1,
        "{transcript}"
    );
    sandbox.assert_no_survivors();
}

#[test]
fn claude_model_flag_and_effort_are_passed_through() {
    let result = result_event("success", false, "<phase-complete>ok</phase-complete>");
    let env = [("ANTHROPIC_MODEL", "from-env")];

    let sandbox = Sandbox::new();
    fake_claude(&sandbox, result.as_bytes(), &[]);
    run_wrapped(
        &sandbox,
        CLAUDE_MEDIUM,
        &["--model", "opus"],
        &["--quiet"],
        &env,
    )
    .assert_code(0);
    assert_eq!(
        read(&sandbox.path("record/argv")),
        "--effort medium -p --output-format stream-json --verbose --include-partial-messages --model opus\n"
    );

    let sandbox = Sandbox::new();
    fake_claude(&sandbox, result.as_bytes(), &[]);
    run_wrapped(&sandbox, CLAUDE_HIGH, &[], &["--quiet"], &env).assert_code(0);
    assert_eq!(
        read(&sandbox.path("record/argv")),
        "--effort high -p --output-format stream-json --verbose --include-partial-messages\n"
    );
    assert_eq!(read(&sandbox.path("record/env")), "model=from-env\n");
}

#[test]
fn claude_error_or_missing_result_is_a_marker_failure() {
    let live = assistant_text("<phase-complete>live claim</phase-complete>");
    let cases = [
        (
            result_event(
                "error_during_execution",
                true,
                "<phase-complete>not trusted</phase-complete>",
            ),
            "[claude] no result reported: claude-lean reported an error result \
             (subtype error_during_execution): &lt;phase-complete>not trusted&lt;/phase-complete>\n",
        ),
        (
            String::new(),
            "[claude] no result reported: claude-lean produced no result event\n",
        ),
        (
            result_event("success", false, "I stopped."),
            "[claude] I stopped.\n",
        ),
    ];
    for (result, shown) in cases {
        let sandbox = Sandbox::new();
        fake_claude(&sandbox, format!("{live}\n{result}").as_bytes(), &[]);
        let run = run_wrapped(&sandbox, CLAUDE_HIGH, &[], &[], &[]);
        assert_marker_failure(&sandbox, &run, "missing-marker");
        let transcript = transcript(&sandbox);
        assert_contains(&transcript, shown);
        assert!(!transcript.contains("live claim"), "{transcript}");
    }
}

// --- Lifecycle ----------------------------------------------------------------------------

#[test]
fn handler_timeout_stops_wrapper_and_term_ignoring_launcher() {
    for (wrapper, launcher) in [(CODEX, "codex-lean"), (CLAUDE_HIGH, "claude-lean")] {
        let sandbox = Sandbox::new();
        sandbox.script(
            launcher,
            "trap '' TERM\ncat >/dev/null\necho started\nwhile true; do sleep 1; done\n",
        );
        let run = run_wrapped(&sandbox, wrapper, &[], &["--timeout", "1"], &[]);
        run.assert_code(4);
        assert_contains(&run.stderr, "timeout: ");
        assert_eq!(sandbox.state("plan.md")["last_run"]["status"], "timeout");
        sandbox.assert_no_survivors();
    }
}

/// The Codex scratch directory is private while the launcher runs, and removed even when the
/// handler's timeout has to stop a launcher that ignores SIGTERM: the wrapper's grace ends
/// before the handler's, so it kills its launcher and cleans up first.
#[test]
fn codex_scratch_directory_is_private_and_removed_after_a_timeout() {
    let sandbox = Sandbox::new();
    let record = sandbox.path("record");
    fs::create_dir_all(&record).expect("record dir");
    sandbox.script(
        "codex-lean",
        &format!(
            "out=''; prev=''\n\
             for arg in \"$@\"; do [ \"$prev\" = --output-last-message ] && out=$arg; prev=$arg; done\n\
             dir=$(dirname \"$out\")\n\
             echo \"$dir\" > '{record}/dir'\n\
             stat -c %a \"$dir\" > '{record}/mode'\n\
             trap '' TERM\ncat >/dev/null\nwhile true; do sleep 1; done\n",
            record = record.display()
        ),
    );
    let run = run_wrapped(&sandbox, CODEX, &[], &["--timeout", "1"], &[]);
    run.assert_code(4);
    assert_eq!(read(&record.join("mode")), "700\n");
    let scratch = read(&record.join("dir"));
    assert!(
        !Path::new(scratch.trim_end()).exists(),
        "scratch directory left behind: {scratch}"
    );
    sandbox.assert_no_survivors();
}

/// A launcher that leaves behind a process writing to its stderr every 50 ms does not keep
/// the wrapper (the handler's group leader) open: the phase completes at once instead of
/// running into the handler's timeout.
#[test]
fn a_chatty_leftover_process_does_not_hold_the_wrapper_open() {
    let ticker = "(while true; do echo tick >&2; sleep 0.05; done) &\n";
    let sandbox = Sandbox::new();
    sandbox.script(
        "codex-lean",
        &format!(
            "out=''; prev=''\n\
             for arg in \"$@\"; do [ \"$prev\" = --output-last-message ] && out=$arg; prev=$arg; done\n\
             cat >/dev/null\n\
             echo '<phase-complete>done</phase-complete>' > \"$out\"\n{ticker}"
        ),
    );
    let run = run_wrapped(&sandbox, CODEX, &[], &["--timeout", "30"], &[]);
    run.assert_code(0);
    assert_contains(&run.stdout, "runner-complete: all phases complete");
    sandbox.assert_no_survivors();

    let sandbox = Sandbox::new();
    let result = result_event("success", false, "<phase-complete>done</phase-complete>");
    let fixture = sandbox.write("fixture/stdout", format!("{result}\n"));
    sandbox.script(
        "claude-lean",
        &format!("cat >/dev/null\ncat '{}'\n{ticker}", fixture.display()),
    );
    let run = run_wrapped(&sandbox, CLAUDE_HIGH, &[], &["--timeout", "30"], &[]);
    run.assert_code(0);
    assert_contains(&run.stdout, "runner-complete: all phases complete");
    sandbox.assert_no_survivors();
}

/// Starts a wrapper directly (no handler) with the fake launchers on PATH.
pub(crate) fn spawn_wrapper(sandbox: &Sandbox, wrapper: &str) -> std::process::Child {
    Command::new(wrapper)
        .current_dir(&sandbox.root)
        .env("PATH", path_with_fakes(sandbox))
        .env("ASH_TEST_TOKEN", &sandbox.token)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wrapper")
}

#[test]
fn sigterm_is_forwarded_and_a_lingering_launcher_is_killed() {
    let sandbox = Sandbox::new();
    let seen = sandbox.path("seen-signals");
    sandbox.script(
        "codex-lean",
        &format!(
            "trap 'echo TERM >> {seen}' TERM\ncat >/dev/null\ntouch {started}\n\
             while true; do sleep 0.05; done\n",
            seen = seen.display(),
            started = sandbox.path("started").display(),
        ),
    );
    let child = spawn_wrapper(&sandbox, CODEX);
    assert!(wait_until(PATIENCE, || sandbox.path("started").exists()));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal wrapper");
    let run = wait_for_exit(child, PATIENCE);
    run.assert_code(143);
    // Run by hand, the wrapper also stops what the killed launcher left behind (its loop's
    // `sleep`, if one was running), and says so.
    let lines: Vec<&str> = run.stderr.lines().collect();
    let (last, earlier) = lines.split_last().expect("a message");
    assert_eq!(
        *last,
        "[codex] interrupted by SIGTERM; codex-lean was stopped and no result is reported"
    );
    for line in earlier {
        assert!(
            line.starts_with("[codex] stopped 1 leftover process of codex-lean: "),
            "{}",
            run.stderr
        );
    }
    assert!(wait_until(PATIENCE, || seen.exists()));
    assert_eq!(read(&seen), "TERM\n");
    sandbox.assert_no_survivors();
}

#[test]
fn a_broken_output_stops_the_launcher_and_fails_the_wrapper() {
    let sandbox = Sandbox::new();
    // Deaf to SIGTERM and SIGPIPE, so only the wrapper's SIGKILL after the grace stops it.
    sandbox.script(
        "codex-lean",
        "trap '' TERM PIPE\ncat >/dev/null\nwhile true; do echo chatter; sleep 0.01; done\n",
    );
    let mut child = spawn_wrapper(&sandbox, CODEX);
    drop(child.stdout.take());
    let run = wait_for_exit(child, PATIENCE);
    run.assert_code(1);
    assert_contains(
        &run.stderr,
        "[codex] error: failed streaming codex-lean stdout to the wrapper's output: Broken pipe",
    );
    sandbox.assert_no_survivors();
}

#[test]
fn launcher_exit_codes_and_signal_deaths_are_preserved() {
    for (body, code) in [("exit 0", 0), ("exit 7", 7), ("kill -KILL $$", 137)] {
        let sandbox = Sandbox::new();
        sandbox.script("codex-lean", &format!("cat >/dev/null\n{body}\n"));
        let run = wait_for_exit(spawn_wrapper(&sandbox, CODEX), PATIENCE);
        run.assert_code(code);
    }
}

#[test]
fn missing_launcher_is_a_clear_launch_error() {
    let empty = tempfile::tempdir().expect("empty dir");
    for (wrapper, launcher) in [
        (CODEX, "codex-lean"),
        (CLAUDE_HIGH, "claude-lean"),
        (CLAUDE_MEDIUM, "claude-lean"),
    ] {
        let output = Command::new(wrapper)
            .env("PATH", empty.path())
            .stdin(Stdio::null())
            .output()
            .expect("run wrapper");
        let run = finished(output);
        run.assert_code(127);
        assert_eq!(run.stdout, "");
        assert_contains(
            &run.stderr,
            &format!("error: {launcher} was not found on PATH"),
        );
    }
}

/// `--help` says what the wrapper runs (the arguments it passes, asserted by the library's
/// unit tests) and how it exits, 75 included.
#[test]
fn help_describes_each_wrapper() {
    let claude_facts = |effort: &str| {
        vec![
            format!(
                "claude-lean --effort {effort} -p --output-format stream-json --verbose \
                 --include-partial-messages [--model MODEL]"
            ),
            "tool results (`tool result".to_owned(),
            "API retries (`API error".to_owned(),
        ]
    };
    let codex_facts = vec![
        "codex-lean exec --json --color never --output-last-message DIR/final-message.txt \
         with CODEX_REASONING_EFFORT=high"
            .to_owned(),
        "reconnect retries included".to_owned(),
    ];
    for (wrapper, facts) in [
        (CODEX, codex_facts),
        (CLAUDE_HIGH, claude_facts("high")),
        (CLAUDE_MEDIUM, claude_facts("medium")),
    ] {
        let output = Command::new(wrapper)
            .arg("--help")
            .output()
            .expect("run wrapper");
        let run = finished(output);
        run.assert_code(0);
        // Flowed text: compare with single spaces wherever a line was wrapped.
        let text = run.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
        for fact in &facts {
            let fact = fact.split_whitespace().collect::<Vec<_>>().join(" ");
            assert_contains(&text, &fact);
        }
        assert_contains(&text, "Exit code: ");
        assert_contains(&text, "-lean's own; 75 when ");
        assert_contains(&text, "the handler records `rate-limited`");
        assert_contains(&text, "128 + N when signal N");
        assert_contains(&run.stdout, "--model <MODEL>");
        assert_eq!(run.stderr, "");
    }
    let output = Command::new(CODEX)
        .arg("--bogus")
        .output()
        .expect("run wrapper");
    let run = finished(output);
    run.assert_code(2);
    // One diagnostic line like every other message of the wrapper.
    assert_eq!(
        run.stderr,
        "[codex] error: unexpected argument '--bogus' found; see 'ai-session-handler-codex-high --help'\n"
    );
    let output = Command::new(CLAUDE_MEDIUM)
        .arg("--model")
        .output()
        .expect("run wrapper");
    let run = finished(output);
    run.assert_code(2);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.starts_with("[claude] error: "), "{}", run.stderr);
    assert!(!run.stderr.contains('<'), "{}", run.stderr);
}

// --- Example launchers --------------------------------------------------------------------

/// Runs `examples/launchers/<launcher> args…` with a fake CLI (`CODEX_BIN` / `CLAUDE_BIN`)
/// that records its arguments one per line; returns the run and the recorded arguments.
fn run_example_launcher(launcher: &str, args: &[&str], env: &[(&str, &str)]) -> (Run, Vec<String>) {
    let sandbox = Sandbox::new();
    let record = sandbox.path("argv");
    let fake = sandbox.script(
        "fake-cli",
        &format!(
            "for arg in \"$@\"; do printf '%s\\n' \"$arg\"; done > '{}'\n",
            record.display()
        ),
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/launchers")
        .join(launcher);
    let output = Command::new(path)
        .args(args)
        .env("CODEX_BIN", &fake)
        .env("CLAUDE_BIN", &fake)
        .env_remove("CODEX_MODEL")
        .env_remove("CODEX_REASONING_EFFORT")
        .env_remove("CODEX_LEAN_SANDBOX")
        .env_remove("CLAUDE_LEAN_PERMISSION_MODE")
        .env_remove("IS_SANDBOX")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run launcher");
    let argv = fs::read_to_string(&record)
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default();
    (finished(output), argv)
}

#[test]
fn example_codex_launcher_maps_the_wrappers_variables_to_codex_options() {
    let wrapper_args = [
        "exec",
        "--json",
        "--color",
        "never",
        "--output-last-message",
        "/f",
    ];
    let (run, argv) = run_example_launcher(
        "codex-lean",
        &wrapper_args,
        &[
            ("CODEX_MODEL", "gpt-5.5"),
            ("CODEX_REASONING_EFFORT", "high"),
        ],
    );
    run.assert_code(0);
    assert_eq!(
        argv,
        [
            "exec",
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write",
            "-c",
            "approval_policy=\"never\"",
            "-m",
            "gpt-5.5",
            "-c",
            "model_reasoning_effort=\"high\"",
            "--json",
            "--color",
            "never",
            "--output-last-message",
            "/f",
        ]
    );

    let (run, argv) = run_example_launcher(
        "codex-lean",
        &wrapper_args,
        &[("CODEX_LEAN_SANDBOX", "danger")],
    );
    run.assert_code(0);
    assert_eq!(
        argv[..3],
        [
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox"
        ]
    );
    assert!(!argv.iter().any(|arg| arg == "-m"), "{argv:?}");

    let (run, _) = run_example_launcher(
        "codex-lean",
        &wrapper_args,
        &[("CODEX_LEAN_SANDBOX", "bogus")],
    );
    run.assert_code(2);
    assert_contains(&run.stderr, "CODEX_LEAN_SANDBOX must be");
}

#[test]
fn example_claude_launcher_passes_effort_on_and_guards_root() {
    let wrapper_args = ["--effort", "medium", "-p", "--output-format", "stream-json"];
    let (run, argv) = run_example_launcher("claude-lean", &wrapper_args, &[("IS_SANDBOX", "1")]);
    run.assert_code(0);
    assert_eq!(
        argv,
        [
            "--permission-mode",
            "bypassPermissions",
            "--effort",
            "medium",
            "-p",
            "--output-format",
            "stream-json",
        ]
    );
    let (run, argv) = run_example_launcher(
        "claude-lean",
        &wrapper_args,
        &[("CLAUDE_LEAN_PERMISSION_MODE", "acceptEdits")],
    );
    run.assert_code(0);
    assert_eq!(argv[..2], ["--permission-mode", "acceptEdits"]);
    let root = {
        use std::os::unix::fs::MetadataExt;
        fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
    };
    if root {
        // Claude refuses bypassPermissions as root unless IS_SANDBOX=1; the launcher says so
        // rather than declaring a sandbox on the user's behalf.
        let (run, argv) = run_example_launcher("claude-lean", &wrapper_args, &[]);
        run.assert_code(2);
        assert_contains(&run.stderr, "export IS_SANDBOX=1");
        assert!(argv.is_empty(), "{argv:?}");
    }
}
