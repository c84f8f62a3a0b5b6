//! Tests of running a Verify check with real check processes. Every check sweeps escaped
//! descendants, so each test runs in a process of its own ([`isolated`]).

use std::path::PathBuf;
use std::time::Instant;

use super::*;
use crate::domain::verification::Interpreter;
use crate::platform::process_group;
use crate::platform::tests::{alive, isolated, pid_in};

fn check(interpreter: Interpreter, script: &str) -> VerifyCheck {
    VerifyCheck {
        index: 1,
        interpreter,
        script: script.to_owned(),
        line: 10,
    }
}

/// Output by stream, as the sink got it.
#[derive(Default)]
struct Seen {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    chunks: usize,
}

fn run_one(
    check: &VerifyCheck,
    cwd: &Path,
    time_limit: Option<Duration>,
    stop: &StopSwitch,
) -> ((CheckOutcome, HelperRun), Seen) {
    let inherited = ChildSnapshot::take();
    let mut seen = Seen::default();
    let run = run_check(
        check,
        cwd,
        time_limit,
        &inherited,
        &mut |stream, bytes| {
            seen.chunks += 1;
            match stream {
                OutputStream::Stdout => seen.stdout.extend_from_slice(bytes),
                OutputStream::Stderr => seen.stderr.extend_from_slice(bytes),
            }
        },
        stop,
    )
    .expect("the check starts");
    (run, seen)
}

#[test]
fn a_sh_check_runs_with_dash_e_in_the_given_directory_without_notify_socket() {
    isolated(
        "actors::attempt::verify::tests::a_sh_check_runs_with_dash_e_in_the_given_directory_without_notify_socket",
        || {
            process_group::become_child_subreaper().unwrap();
            // SAFETY: this process runs this one test on one thread; nothing reads the
            // environment concurrently.
            unsafe {
                std::env::set_var("NOTIFY_SOCKET", "/run/systemd/notify");
                // The attempt's environment is the handler's.
                std::env::set_var("AISH_CHECK_VAR", "from the attempt");
            }
            let dir = tempfile::tempdir().unwrap();
            let stop = StopSwitch::new().unwrap();
            let passing = check(
                Interpreter::Sh,
                "pwd\necho \"$AISH_CHECK_VAR|${NOTIFY_SOCKET-unset}|$0\"\necho diagnostics >&2\nwc -c\n",
            );
            let ((outcome, run), seen) = run_one(&passing, dir.path(), None, &stop);
            assert!(outcome.passed(), "{run:?}");
            assert!(!run.interrupted);
            let cwd = std::fs::canonicalize(dir.path()).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&seen.stdout),
                format!("{}\nfrom the attempt|unset|verify-1\n0\n", cwd.display())
            );
            assert_eq!(seen.stderr, b"diagnostics\n");
            assert_eq!(
                outcome.output_bytes,
                (seen.stdout.len() + seen.stderr.len()) as u64
            );
            // Both streams in arrival order: which pipe is read first is the kernel's choice.
            let tail: Vec<&str> = outcome.output_tail.lines().collect();
            assert!(
                tail.ends_with(&["0", "diagnostics"]) || tail.ends_with(&["diagnostics", "0"]),
                "{run:?}"
            );

            // -e: the first failing command ends the script with its status.
            let failing = check(Interpreter::Sh, "echo before\nfalse\necho after\n");
            let ((outcome, _), seen) = run_one(&failing, dir.path(), None, &stop);
            assert_eq!(outcome.exit_code, Some(1));
            assert!(!outcome.passed());
            assert_eq!(seen.stdout, b"before\n");
            assert_eq!(outcome.output_tail, "before");
            let failure = outcome.failure(&failing).unwrap();
            assert_eq!(
                failure.describe(),
                "verify check 1 (echo before) exited with code 1"
            );
        },
    );
}

#[test]
fn a_python3_check_runs_its_script_and_reports_its_exit_code() {
    isolated(
        "actors::attempt::verify::tests::a_python3_check_runs_its_script_and_reports_its_exit_code",
        || {
            process_group::become_child_subreaper().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let stop = StopSwitch::new().unwrap();
            let script =
                "import sys\nprint('from python', sys.argv[0])\nif True:\n    sys.exit(3)\n";
            let ((outcome, run), seen) = run_one(
                &check(Interpreter::Python3, script),
                dir.path(),
                None,
                &stop,
            );
            assert_eq!(outcome.exit_code, Some(3), "{run:?}");
            assert_eq!(seen.stdout, b"from python -c\n");
        },
    );
}

#[test]
fn a_check_past_its_limit_is_stopped_with_its_term_ignoring_descendants() {
    isolated(
        "actors::attempt::verify::tests::a_check_past_its_limit_is_stopped_with_its_term_ignoring_descendants",
        || {
            process_group::become_child_subreaper().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let in_group = dir.path().join("in-group.pid");
            let escaped = dir.path().join("escaped.pid");
            let script = format!(
                "trap '' TERM\n\
                 sh -c 'trap \"\" TERM; echo $$ > {0}; exec sleep 600' &\n\
                 setsid sh -c 'trap \"\" TERM; echo $$ > {1}; exec sleep 600' </dev/null >/dev/null 2>&1 &\n\
                 while [ ! -s {0} ] || [ ! -s {1} ]; do sleep 0.01; done\n\
                 echo set up\n\
                 exec sleep 600\n",
                in_group.display(),
                escaped.display()
            );
            let stop = StopSwitch::new().unwrap();
            let ((outcome, run), seen) = run_one(
                &check(Interpreter::Sh, &script),
                dir.path(),
                Some(Duration::from_secs(3)),
                &stop,
            );
            assert!(outcome.timed_out, "{run:?}");
            assert!(!outcome.passed());
            assert_eq!(outcome.signal, Some(9), "SIGTERM was ignored");
            assert_eq!(seen.stdout, b"set up\n");
            let (in_group, escaped) = (pid_in(&in_group), pid_in(&escaped));
            assert_eq!(run.group.escaped, [escaped], "{run:?}");
            assert!(run.group.survivors.is_empty(), "{run:?}");
            for pid in [in_group, escaped] {
                assert!(!alive(pid), "{pid} survived");
            }
            assert_eq!(
                outcome
                    .failure(&check(Interpreter::Sh, &script))
                    .map(|failure| failure.timed_out),
                Some(true)
            );
        },
    );
}

#[test]
fn a_thrown_switch_interrupts_the_check() {
    isolated(
        "actors::attempt::verify::tests::a_thrown_switch_interrupts_the_check",
        || {
            process_group::become_child_subreaper().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let ready: PathBuf = dir.path().join("ready");
            let stop = StopSwitch::new().unwrap();
            let thrower = {
                let (stop, ready) = (stop.clone(), ready.clone());
                std::thread::spawn(move || {
                    let deadline = Instant::now() + Duration::from_secs(30);
                    while !ready.exists() && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    stop.stop();
                })
            };
            let script = format!("touch {}\nexec sleep 600\n", ready.display());
            let ((outcome, run), _) =
                run_one(&check(Interpreter::Sh, &script), dir.path(), None, &stop);
            thrower.join().unwrap();
            assert!(run.interrupted, "{run:?}");
            assert!(!outcome.timed_out);
            assert_eq!(outcome.signal, Some(15));
        },
    );
}
