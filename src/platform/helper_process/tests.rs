//! Tests of `platform::helper_process` with real processes.
//!
//! A test that sweeps escaped descendants makes the test process a child subreaper and kills
//! children of it that started after its helper — which, in the shared test process, could be
//! another test's. Those tests run in a process of their own ([`isolated`]).

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;
use crate::platform::tests::{alive, isolated, pid_in};

fn sh(script: &str) -> Vec<String> {
    vec!["/bin/sh".to_owned(), "-c".to_owned(), script.to_owned()]
}

struct Output {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

fn run(
    argv: &[String],
    cwd: &Path,
    time_limit: Option<Duration>,
    escapees: EscapeeSweep<'_>,
    stop: &StopSwitch,
) -> (io::Result<HelperRun>, Output) {
    let mut output = Output {
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    let result = run_helper(
        HelperCommand {
            argv,
            cwd,
            env_set: &[],
            stdin: None,
            time_limit,
            escapees,
        },
        &mut |stream, bytes| match stream {
            OutputStream::Stdout => output.stdout.extend_from_slice(bytes),
            OutputStream::Stderr => output.stderr.extend_from_slice(bytes),
        },
        stop,
    );
    (result, output)
}

fn wait_until_gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

#[test]
fn output_reaches_the_sink_by_stream_and_the_exit_code_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let stop = StopSwitch::new().unwrap();
    let (run, output) = run(
        &sh("echo out; echo err >&2; pwd; exit 3"),
        dir.path(),
        Some(Duration::from_secs(60)),
        EscapeeSweep::Later,
        &stop,
    );
    let run = run.unwrap();
    assert_eq!(
        run.exit,
        ChildExit {
            code: Some(3),
            signal: None
        }
    );
    assert!(!run.succeeded() && !run.timed_out && !run.interrupted);
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("out\n{}\n", cwd.display())
    );
    assert_eq!(output.stderr, b"err\n");
    assert_eq!(run.stdout_bytes, output.stdout.len() as u64);
    assert_eq!(run.stderr_bytes, 4);
    assert!(run.started_ticks.is_some());
}

#[test]
fn stdin_is_the_given_file_and_the_environment_is_changed_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.json");
    std::fs::write(&input, "{\"event\":\"x\"}").unwrap();
    let removed = "AISH_HELPER_TEST_REMOVED";
    let stop = StopSwitch::new().unwrap();
    let mut output = Vec::new();
    let run = run_helper(
        HelperCommand {
            argv: &sh(&format!(
                "cat; echo; echo \"${{AISH_SET}}|${{{removed}-unset}}\""
            )),
            cwd: dir.path(),
            env_set: &[("AISH_SET".to_owned(), "a value".to_owned())],
            stdin: Some(File::open(&input).unwrap()),
            time_limit: None,
            escapees: EscapeeSweep::Later,
        },
        &mut |_, bytes| output.extend_from_slice(bytes),
        &stop,
    )
    .unwrap();
    assert!(run.succeeded(), "{run:?}");
    assert_eq!(
        String::from_utf8_lossy(&output),
        "{\"event\":\"x\"}\na value|unset\n"
    );
}

#[test]
fn without_a_file_stdin_is_the_null_device() {
    let dir = tempfile::tempdir().unwrap();
    let stop = StopSwitch::new().unwrap();
    let (run, output) = run(
        &sh("wc -c; readlink /proc/self/fd/0"),
        dir.path(),
        None,
        EscapeeSweep::Later,
        &stop,
    );
    assert!(run.unwrap().succeeded());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.starts_with('0'), "{text}");
    assert!(text.contains("/dev/null"), "{text}");
}

#[test]
fn a_missing_program_is_a_not_found_error() {
    let dir = tempfile::tempdir().unwrap();
    let stop = StopSwitch::new().unwrap();
    let (run, _) = run(
        &["./no-such-program".to_owned()],
        dir.path(),
        None,
        EscapeeSweep::Later,
        &stop,
    );
    assert_eq!(run.unwrap_err().kind(), io::ErrorKind::NotFound);
}

#[test]
fn it_leads_its_own_session_and_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let stop = StopSwitch::new().unwrap();
    // Fields 5 and 6 of /proc/self/stat: pgrp and session; the pid is field 1.
    let (run, output) = run(
        &sh("read -r pid _ _ _ pgrp session _ < /proc/self/stat; echo $pid $pgrp $session"),
        dir.path(),
        None,
        EscapeeSweep::Later,
        &stop,
    );
    assert!(run.unwrap().succeeded());
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let ids: Vec<&str> = text.split(' ').collect();
    assert_eq!(ids.len(), 3, "{text}");
    assert!(ids[0] == ids[1] && ids[1] == ids[2], "{text}");
}

#[test]
fn a_term_ignoring_helper_and_grandchild_are_killed_at_the_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    // The leader waits for the grandchild to be set up, so the limit always catches both.
    let script = format!(
        "trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > {0}; exec sleep 600' & \
         while [ ! -s {0} ]; do sleep 0.01; done; exec sleep 600",
        pidfile.display()
    );
    let stop = StopSwitch::new().unwrap();
    let (run, _) = run(
        &sh(&script),
        dir.path(),
        Some(Duration::from_secs(3)),
        EscapeeSweep::Later,
        &stop,
    );
    let run = run.unwrap();
    assert!(run.timed_out, "{run:?}");
    assert!(!run.interrupted);
    assert!(!run.succeeded());
    assert_eq!(
        run.exit,
        ChildExit {
            code: None,
            signal: Some(9)
        },
        "SIGTERM was ignored"
    );
    assert!(run.group.survivors.is_empty(), "{run:?}");
    let grandchild = pid_in(&pidfile);
    assert!(
        wait_until_gone(grandchild),
        "the grandchild {grandchild} survived"
    );
}

#[test]
fn a_thrown_switch_stops_the_helper_and_a_second_throw_skips_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let stop = StopSwitch::new().unwrap();
    let thrower = {
        let stop = stop.clone();
        let ready = dir.path().join("ready");
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !ready.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            stop.stop();
            stop.stop();
        })
    };
    let (run, output) = run(
        &sh(&format!(
            // `started` is in the pipe before the thrower can see `ready`.
            "trap '' TERM; echo started; touch {}; exec sleep 600",
            dir.path().join("ready").display()
        )),
        dir.path(),
        None,
        EscapeeSweep::Later,
        &stop,
    );
    thrower.join().unwrap();
    let run = run.unwrap();
    assert!(run.interrupted && !run.timed_out, "{run:?}");
    assert_eq!(
        run.exit,
        ChildExit {
            code: None,
            signal: Some(9)
        }
    );
    assert_eq!(output.stdout, b"started\n");
    assert_eq!(stop.throws(), 2);
}

#[test]
fn descendants_left_in_the_group_after_a_normal_exit_are_leaks_and_are_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("leak.pid");
    let stop = StopSwitch::new().unwrap();
    let (run, output) = run(
        &sh(&format!(
            "sh -c 'echo $$ > {0}; exec sleep 600' >/dev/null 2>&1 & \
             while [ ! -s {0} ]; do sleep 0.01; done; echo done",
            pidfile.display()
        )),
        dir.path(),
        None,
        EscapeeSweep::Later,
        &stop,
    );
    let run = run.unwrap();
    assert!(run.succeeded(), "{run:?}");
    assert_eq!(output.stdout, b"done\n");
    let leak = pid_in(&pidfile);
    assert_eq!(run.group.leaked, [leak]);
    assert!(wait_until_gone(leak));
}

#[test]
fn a_pipe_held_by_a_process_outside_the_group_is_abandoned_not_waited_for() {
    isolated(
        "platform::helper_process::tests::a_pipe_held_by_a_process_outside_the_group_is_abandoned_not_waited_for",
        || {
            process_group::become_child_subreaper().unwrap();
            let inherited = ChildSnapshot::take();
            let dir = tempfile::tempdir().unwrap();
            let pidfile = dir.path().join("escapee.pid");
            let stop = StopSwitch::new().unwrap();
            // The escapee keeps stdout open in a session of its own: the sweep kills it.
            let (run, _) = run(
                &sh(&format!(
                    "setsid sh -c 'echo $$ > {0}; exec sleep 600' & \
                     while [ ! -s {0} ]; do sleep 0.01; done; echo done",
                    pidfile.display()
                )),
                dir.path(),
                None,
                EscapeeSweep::Now(&inherited),
                &stop,
            );
            let run = run.unwrap();
            let escapee = pid_in(&pidfile);
            assert!(run.succeeded(), "{run:?}");
            assert!(run.pipes_abandoned, "{run:?}");
            assert_eq!(run.group.escaped, [escapee], "{run:?}");
            assert!(wait_until_gone(escapee));
        },
    );
}

#[test]
fn an_escaped_term_ignoring_grandchild_leaves_no_survivor_after_a_timeout() {
    isolated(
        "platform::helper_process::tests::an_escaped_term_ignoring_grandchild_leaves_no_survivor_after_a_timeout",
        || {
            process_group::become_child_subreaper().unwrap();
            let inherited = ChildSnapshot::take();
            let dir = tempfile::tempdir().unwrap();
            let pidfile = dir.path().join("escapee.pid");
            let script = write_script(
                dir.path(),
                "escape.sh",
                &format!(
                    "trap '' TERM\nsetsid sh -c 'trap \"\" TERM; echo $$ > {0}; exec sleep 600' </dev/null >/dev/null 2>&1 &\nwhile [ ! -s {0} ]; do sleep 0.01; done\nexec sleep 600\n",
                    pidfile.display()
                ),
            );
            let stop = StopSwitch::new().unwrap();
            let (run, _) = run(
                &[script.display().to_string()],
                dir.path(),
                Some(Duration::from_secs(3)),
                EscapeeSweep::Now(&inherited),
                &stop,
            );
            let run = run.unwrap();
            let escapee = pid_in(&pidfile);
            assert!(run.timed_out, "{run:?}");
            assert_eq!(run.group.escaped, [escapee], "{run:?}");
            assert!(run.group.survivors.is_empty(), "{run:?}");
            assert!(!alive(escapee), "the escapee survived");
        },
    );
}

fn write_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    let mut file = File::create(&path).unwrap();
    write!(file, "#!/bin/sh\n{body}").unwrap();
    drop(file);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}
