//! Unit tests of the Codex wrapper (src/wrapper/codex/mod.rs): the `codex-lean exec` command
//! line and how a run's output becomes the response, a failure or a rate limit.

use crate::wrapper::diagnostics::StreamTranslator;

use super::*;

#[test]
fn launches_codex_exec_json_uncolored_with_high_effort() {
    let launcher = codex_launcher(None, PathBuf::from("/tmp/x/final-message.txt"));
    assert_eq!(
        launcher,
        Launcher {
            program: "codex-lean",
            args: [
                "exec",
                "--json",
                "--color",
                "never",
                "--output-last-message",
                "/tmp/x/final-message.txt"
            ]
            .map(OsString::from)
            .to_vec(),
            env: vec![("CODEX_REASONING_EFFORT", OsString::from("high"))],
        }
    );
}

#[test]
fn a_model_is_passed_as_codex_model() {
    let launcher = codex_launcher(Some("gpt-5.5"), PathBuf::from("f"));
    assert_eq!(
        launcher.env,
        vec![
            ("CODEX_REASONING_EFFORT", OsString::from("high")),
            ("CODEX_MODEL", OsString::from("gpt-5.5")),
        ]
    );
}

fn run_output(stdout: &[u8], stderr: &[u8]) -> (JsonEvents<ExecEvents>, CodexStderr) {
    let mut events = JsonEvents::<ExecEvents>::default();
    let mut errors = CodexStderr::new(b"prompt");
    let mut sink = Vec::new();
    events.translate(stdout, &mut sink);
    events.finish(&mut sink);
    errors.translate(stderr, &mut sink);
    errors.finish(&mut sink);
    (events, errors)
}

#[test]
fn the_final_message_file_is_the_response() {
    let mut codex = Codex {
        model: None,
        scratch: None,
    };
    let launcher = codex.launcher().expect("temp dir");
    let path = PathBuf::from(launcher.args.last().expect("path argument"));
    let (stdout, stderr) = run_output(b"", b"");
    assert_eq!(
        codex.final_response(stdout, stderr),
        FinalResponse::Unavailable(
            "codex-lean wrote no final message (--output-last-message)".to_owned()
        )
    );
    fs::write(&path, "<phase-complete>ok</phase-complete>\n").expect("write");
    let (stdout, stderr) = run_output(b"", b"");
    assert_eq!(
        codex.final_response(stdout, stderr),
        FinalResponse::Text(b"<phase-complete>ok</phase-complete>\n".to_vec())
    );
    drop(codex);
    assert!(!path.exists(), "the temporary directory is removed");
}

#[test]
fn a_failed_turn_is_no_result_and_a_rate_limit_is_told_apart() {
    let mut codex = Codex {
        model: None,
        scratch: None,
    };
    let launcher = codex.launcher().expect("temp dir");
    fs::write(PathBuf::from(launcher.args.last().expect("path")), "").expect("write");
    let cases: [(&[u8], &[u8], FinalResponse); 4] = [
        (
            b"{\"type\":\"error\",\"message\":\"exceeded retry limit, last status: 429 Too Many Requests\"}\n\
              {\"type\":\"turn.failed\",\"error\":{\"message\":\"exceeded retry limit, last status: 429 Too Many Requests\"}}\n",
            b"",
            FinalResponse::RateLimited("rate limited (the error above)".to_owned()),
        ),
        (
            b"{\"type\":\"turn.failed\",\"error\":{\"message\":\"unexpected status 401 Unauthorized\"}}\n",
            b"",
            FinalResponse::Unavailable("codex-lean's turn failed (the error above)".to_owned()),
        ),
        (
            b"",
            b"ERROR: You've hit your usage limit. Try again at 3:05 PM.\n",
            FinalResponse::RateLimited("rate limited (the error above)".to_owned()),
        ),
        (
            b"",
            b"ERROR: stream disconnected\n",
            FinalResponse::Unavailable("codex-lean failed (the error above)".to_owned()),
        ),
    ];
    for (stdout, stderr, expected) in cases {
        let (stdout, stderr) = run_output(stdout, stderr);
        assert_eq!(codex.final_response(stdout, stderr), expected);
    }
}
