//! Shared harness for the black-box tests: a temporary plan workspace, fake agents written as
//! shell scripts, the real binary, and condition-based waiting (never fixed sleeps).
//!
//! Every handler started here gets a unique `ASH_TEST_TOKEN` in its environment. Workers and
//! all their descendants inherit it, so "no process survives" is checked by scanning
//! `/proc/*/environ` for the token.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Generous deadline for conditions on a loaded 2-core machine.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_ai-session-handler");

/// A temporary plan workspace (it holds `AGENTS.md`, so it is also a valid execution
/// workspace).
pub(crate) struct Sandbox {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub token: String,
}

/// What a finished handler did.
#[derive(Debug)]
pub(crate) struct Run {
    pub code: i32,
    pub stdout: String,
    /// Stderr without the runner's progress lines (phase banners, phase end lines, the summary
    /// table): the agent's live stderr and the runner's report, as most tests compare them.
    /// The progress lines themselves are tested in `observability`, on `raw_stderr`.
    pub stderr: String,
    pub raw_stderr: String,
}

/// Whether `line` is one of the runner's progress lines (see `Run::stderr`).
pub(crate) fn is_progress_line(line: &str) -> bool {
    static PROGRESS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(concat!(
            r"^(?:phase-\S+ \(\d+/\d+\) .* · attempt \d+(?: of \d+| \(\d+ of \d+ in this run\))?",
            r"|phase-\S+ \S+ in [0-9.hms]+ · [0-9.]+ (?:B|KiB|MiB|GiB|TiB) output",
            r"|phase +status +duration +output",
            r"|phase-\S+ +[a-z-]+ +[0-9.hms]+ +[0-9.]+ (?:B|KiB|MiB|GiB|TiB))$"
        ))
        .expect("progress pattern")
    });
    PROGRESS.is_match(line)
}

/// `text` without the runner's progress lines.
pub(crate) fn without_progress(text: &str) -> String {
    text.split_inclusive('\n')
        .filter(|line| !is_progress_line(line.trim_end_matches(['\n', '\r'])))
        .collect()
}

impl Run {
    pub(crate) fn from_output(output: Output) -> Self {
        use std::os::unix::process::ExitStatusExt;
        Run {
            code: output
                .status
                .code()
                .unwrap_or_else(|| 128 + output.status.signal().unwrap_or(0)),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: without_progress(&String::from_utf8_lossy(&output.stderr)),
            raw_stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    #[track_caller]
    pub(crate) fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "unexpected exit code\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Sandbox {
    pub(crate) fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("ash-test-")
            .tempdir()
            .expect("temp dir");
        let root = fs::canonicalize(dir.path()).expect("canonical temp dir");
        fs::write(root.join("AGENTS.md"), "# test workspace\n").expect("AGENTS.md");
        Sandbox {
            _dir: dir,
            root,
            token: uuid::Uuid::new_v4().to_string(),
        }
    }

    pub(crate) fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    pub(crate) fn write(&self, relative: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("parent dirs");
        }
        fs::write(&path, contents).expect("write file");
        path
    }

    /// Writes an executable `#!/bin/sh` script and returns its absolute path.
    pub(crate) fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.write(&format!("bin/{name}"), format!("#!/bin/sh\n{body}"));
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    /// The binary with the sandbox as working directory and the survivor token set.
    pub(crate) fn command(&self) -> Command {
        self.command_for(BIN)
    }

    /// `program` with the sandbox as working directory and the survivor token set.
    pub(crate) fn command_for(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(&self.root)
            .env("ASH_TEST_TOKEN", &self.token)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        command
    }

    pub(crate) fn run(&self, args: &[&str]) -> Run {
        let output = self.command().args(args).output().expect("run handler");
        Run::from_output(output)
    }

    /// Starts the handler without waiting (for signal and concurrency tests).
    pub(crate) fn spawn(&self, args: &[&str]) -> Child {
        self.command()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn handler")
    }

    /// `run --plan <plan> --agent-cmd <agent> --quiet <extra…>`, output piped, not started.
    /// Starts `run --plan PLAN --agent-cmd AGENT EXTRA…` without waiting for it.
    pub(crate) fn spawn_plan(&self, plan: &str, agent: &Path, extra: &[&str]) -> Child {
        let agent = agent.to_str().expect("a UTF-8 agent path");
        let mut args = vec!["run", "--plan", plan, "--agent-cmd", agent];
        args.extend_from_slice(extra);
        self.spawn(&args)
    }

    pub(crate) fn quiet_run_command(&self, plan: &str, agent: &Path, extra: &[&str]) -> Command {
        let mut command = self.command();
        command
            .args(["run", "--plan", plan, "--agent-cmd"])
            .arg(agent)
            .arg("--quiet")
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// `run --plan <plan> --agent-cmd <agent> <extra…>`.
    pub(crate) fn run_plan(&self, plan: &str, agent: &Path, extra: &[&str]) -> Run {
        let agent = agent.to_str().expect("utf-8 agent path");
        let mut args = vec!["run", "--plan", plan, "--agent-cmd", agent];
        args.extend_from_slice(extra);
        self.run(&args)
    }

    /// The keyed state directory of a plan given relative to the sandbox root.
    pub(crate) fn state_dir(&self, plan: &str) -> PathBuf {
        let key = ai_session_handler::domain::plan_key::plan_key(plan.split('/'));
        self.root.join(".ai-session-handler/plans").join(key)
    }

    pub(crate) fn state_path(&self, plan: &str) -> PathBuf {
        self.state_dir(plan).join("state.json")
    }

    pub(crate) fn state(&self, plan: &str) -> Value {
        let bytes = fs::read(self.state_path(plan)).expect("state.json exists");
        serde_json::from_slice(&bytes).expect("state.json parses")
    }

    pub(crate) fn state_bytes(&self, plan: &str) -> Option<Vec<u8>> {
        fs::read(self.state_path(plan)).ok()
    }

    /// Files in one artifact directory (`prompts`, `transcripts`, `outcomes`), sorted.
    pub(crate) fn artifacts(&self, plan: &str, kind: &str) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = match fs::read_dir(self.state_dir(plan).join(kind)) {
            Ok(entries) => entries.map(|entry| entry.expect("entry").path()).collect(),
            Err(_) => Vec::new(),
        };
        files.sort();
        files
    }

    /// Pids of live processes carrying this sandbox's token (the handler's descendants).
    pub(crate) fn survivors(&self) -> Vec<u32> {
        processes_with_env(&format!("ASH_TEST_TOKEN={}", self.token))
    }

    /// Waits until no process carries the token; panics with the survivors otherwise.
    #[track_caller]
    pub(crate) fn assert_no_survivors(&self) {
        let found = wait_until(PATIENCE, || self.survivors().is_empty());
        assert!(found, "processes survived: {:?}", self.survivors());
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Never leave a stray worker behind, even when a test failed half-way.
        for pid in self.survivors() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Whether `pid` is a handler's watchdog (its process name is `ash-watchdog`).
pub(crate) fn is_watchdog(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|name| name.trim_end() == "ash-watchdog")
}

/// The sandbox's live watchdogs.
pub(crate) fn watchdogs(sandbox: &Sandbox) -> Vec<u32> {
    sandbox
        .survivors()
        .into_iter()
        .filter(|pid| is_watchdog(*pid))
        .collect()
}

/// The parent pid of a process (`/proc/<pid>/stat` field 4).
pub(crate) fn parent_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// Takes the sandbox's running handler out of the picture together with its watchdog, as a
/// `kill -9` of both would: the handler is stopped first (SIGSTOP, so it cannot replace its
/// watchdog), then the watchdog is SIGKILLed; the caller SIGKILLs the (stopped) handler.
/// Nothing then stops the worker.
pub(crate) fn kill_watchdog(sandbox: &Sandbox) {
    for pid in watchdogs(sandbox) {
        if let Some(handler) = parent_of(pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(handler as i32),
                nix::sys::signal::Signal::SIGSTOP,
            );
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        wait_until(PATIENCE, || watchdogs(sandbox).is_empty()),
        "the watchdog survived SIGKILL"
    );
}

/// A plan with `count` phases, each with workspace `.`.
pub(crate) fn plan_with_phases(count: usize) -> String {
    let mut plan = String::from("# Test plan\n\nGlobal intent.\n\n");
    for number in 1..=count {
        plan.push_str(&format!(
            "## Phase {number}: Step {number}\n\n### Workspace\n\n.\n\n### Goal\n\nDo step {number}.\n\n"
        ));
    }
    plan
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes.
pub(crate) fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for a spawned handler to exit (bounded); returns its result.
pub(crate) fn wait_for_exit(mut child: Child, timeout: Duration) -> Run {
    let exited = wait_until(timeout, || matches!(child.try_wait(), Ok(Some(_))));
    if !exited {
        let _ = child.kill();
        panic!("handler did not exit within {timeout:?}");
    }
    Run::from_output(child.wait_with_output().expect("collect output"))
}

/// Pids of live (non-zombie) processes whose environment contains `needle` exactly.
pub(crate) fn processes_with_env(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ
            .split(|byte| *byte == 0)
            .any(|var| var == needle.as_bytes())
        {
            continue;
        }
        let zombie = fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                stat.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
            })
            .unwrap_or(true);
        if !zombie {
            found.push(pid);
        }
    }
    found
}

/// Every path under `root` (relative) with its bytes; directories map to `<dir>` and symlinks
/// to `<link> target`, so any creation, removal or rewrite shows as a difference.
pub(crate) fn tree_snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("entry").path();
            // The event stream is a live log, not state: a concurrent run appends to it.
            if is_event_stream(&path) {
                continue;
            }
            let relative = path.strip_prefix(root).expect("under root").to_path_buf();
            let meta = fs::symlink_metadata(&path).expect("metadata");
            if meta.file_type().is_symlink() {
                let target = fs::read_link(&path).expect("read link");
                out.insert(
                    relative,
                    format!("<link> {}", target.display()).into_bytes(),
                );
            } else if meta.is_dir() {
                out.insert(relative, b"<dir>".to_vec());
                walk(root, &path, out);
            } else {
                out.insert(relative, fs::read(&path).expect("read file"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// `events.jsonl` or its rotated `events.jsonl.1` in a keyed state directory.
pub(crate) fn is_event_stream(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name == "events.jsonl" || name == "events.jsonl.1")
}

/// Parses a JSON file, panicking with its path when it is missing or malformed.
pub(crate) fn read_json(path: &Path) -> Value {
    let bytes = fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// A numeric environment variable (soak and crash-test knobs); `None` when unset.
pub(crate) fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    Some(
        text.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, got {text:?}")),
    )
}

/// A fake agent steered by files under `ctl/`: `ctl/<phase-id>` holds the mode for that phase
/// (`complete` when absent, `hang`, `block`, `clarify`, `fail`). Every launch appends its phase
/// id to `ctl/launches`. `hang` touches `ctl/ready-<phase-id>` and then sleeps as the same
/// process (so the recorded pid is the sleeper); `clarify` completes once the prompt carries a
/// line starting with `ANSWER: `.
pub(crate) fn control_agent(sandbox: &Sandbox) -> PathBuf {
    let ctl = sandbox.path("ctl");
    fs::create_dir_all(&ctl).unwrap();
    let ctl = ctl.display();
    sandbox.script(
        "agent",
        &format!(
            r#"prompt=$(cat)
phase=$(printf '%s\n' "$prompt" | sed -n 's/^- selected_phase_id: //p')
echo "$phase" >> "{ctl}/launches"
mode=complete
if [ -f "{ctl}/$phase" ]; then mode=$(cat "{ctl}/$phase"); fi
echo "working on $phase"
echo "diagnostics for $phase" >&2
case "$mode" in
  hang) touch "{ctl}/ready-$phase"; exec sleep 600 ;;
  block) echo '<phase-blocked>need an API key</phase-blocked>' ;;
  clarify)
    if printf '%s\n' "$prompt" | grep -q '^ANSWER: '; then
      echo "<phase-complete>answered $phase</phase-complete>"
    else
      echo '<phase-needs-clarification>which database?</phase-needs-clarification>'
    fi ;;
  fail) exit 7 ;;
  *) echo "<phase-complete>done $phase</phase-complete>" ;;
esac
"#
        ),
    )
}

/// Sets the control agent's mode for `phase` (see [`control_agent`]).
pub(crate) fn set_mode(sandbox: &Sandbox, phase: &str, mode: &str) {
    sandbox.write(&format!("ctl/{phase}"), mode);
}

/// Phase ids of every launch so far, in order.
pub(crate) fn launches(sandbox: &Sandbox) -> Vec<String> {
    fs::read_to_string(sandbox.path("ctl/launches"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `lines` appear in `text` as consecutive whole lines.
#[track_caller]
pub(crate) fn assert_has_lines(text: &str, lines: &[&str]) {
    let all: Vec<&str> = text.lines().collect();
    assert!(
        all.windows(lines.len()).any(|window| window == lines),
        "missing lines {lines:#?} in:\n{text}"
    );
}

#[track_caller]
pub(crate) fn assert_has_line(text: &str, line: &str) {
    assert!(
        text.lines().any(|candidate| candidate == line),
        "missing line {line:?} in:\n{text}"
    );
}

/// SplitMix64: a tiny seeded generator, so a failing crash or soak iteration can be replayed.
pub(crate) struct SplitMix64(pub u64);

impl SplitMix64 {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// An agent script (`bin/agent`) that reads its prompt from stdin, then runs `body`.
pub(crate) fn agent(sandbox: &Sandbox, body: &str) -> PathBuf {
    sandbox.script("agent", &format!("cat >/dev/null\n{body}"))
}

/// `sandbox`'s path of `name` as text, for agent scripts.
pub(crate) fn at(sandbox: &Sandbox, name: &str) -> String {
    sandbox.path(name).display().to_string()
}

/// Sends `signal` to the handler `child` alone (not to its process group).
pub(crate) fn send_signal(child: &Child, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal)
        .expect("signal the handler");
}

/// Waits until the agent created `ready` and the state of `plan` records its attempt as
/// running. Every look at the state must parse: a reader never sees a torn file.
#[track_caller]
pub(crate) fn wait_running(sandbox: &Sandbox, plan: &str, ready: &str) {
    assert!(
        wait_until(PATIENCE, || sandbox.path(ready).exists()),
        "the agent never became ready"
    );
    assert!(
        wait_until(PATIENCE, || {
            sandbox.state_bytes(plan).is_some_and(|bytes| {
                let state: Value = serde_json::from_slice(&bytes).expect("state.json parses");
                state["active_attempt"]["status"] == "running"
            })
        }),
        "the running attempt was never recorded"
    );
}

/// The event stream of `plan`, parsed: it must exist and hold one JSON object per line.
pub(crate) fn event_stream(sandbox: &Sandbox, plan: &str) -> Vec<Value> {
    fs::read_to_string(sandbox.state_dir(plan).join("events.jsonl"))
        .expect("event stream")
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect()
}

/// [`event_stream`] without the output-progress records, whose number depends on timing.
pub(crate) fn events_without_progress(sandbox: &Sandbox, plan: &str) -> Vec<Value> {
    event_stream(sandbox, plan)
        .into_iter()
        .filter(|event| event["event"] != "output-progress")
        .collect()
}

/// `bin/notify MESSAGE…`: sends each message as one datagram to `$NOTIFY_SOCKET` (a path, or
/// an abstract `@name`), then stays 0.2 s so that the runner can still tell who sent it.
pub(crate) fn notify_script(sandbox: &Sandbox) -> PathBuf {
    let path = sandbox.write(
        "bin/notify",
        "#!/usr/bin/env python3\n\
         import os, socket, sys, time\n\
         address = os.environ.get('NOTIFY_SOCKET', '')\n\
         if not address:\n    sys.exit(3)\n\
         if address.startswith('@'):\n    address = '\\0' + address[1:]\n\
         sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
         for message in sys.argv[1:]:\n    sock.sendto(message.encode(), address)\n\
         time.sleep(0.2)\n",
    );
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}
