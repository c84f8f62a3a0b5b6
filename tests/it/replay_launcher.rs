//! Fake `codex-lean` / `claude-lean` launchers that replay recordings of the real CLIs.
//!
//! The recordings under `tests/fixtures/replay/` are the raw stdout and stderr bytes the real
//! Claude Code and Codex CLIs wrote, read by read, with the delay before each read, made by
//! `scripts/e2e-real-clis.sh --record` (format: `tests/fixtures/replay/README.md`). A replay
//! is a generated shell script that reads the prompt, then writes every chunk with its own
//! `cat` (one write each, so the chunking survives) after a scaled-down `sleep`, writes
//! Codex's final-message file, and exits with the recorded code.
//!
//! Like the real CLIs, a replay answers according to its arguments: the current wrappers'
//! arguments (`codex exec --json`, `claude … --include-partial-messages`) get the recording
//! made with them, the pre-issue-13 arguments get the one made with those ("human", "whole").
//! So a test run against the old wrapper saw what the real CLI would have printed for it.
//!
//! Tests steer a replay without changing its bytes: a *gate* holds it after a chunk until the
//! test creates a file (so a test can observe what the wrapper showed while the CLI was
//! still busy), and a *hook* runs a shell command before a chunk (to start a stand-in for a
//! tool process at the moment the CLI started its tool).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::common::Sandbox;

/// Where the recordings live.
fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/replay")
}

/// Which pipe a chunk was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pipe {
    Stdout,
    Stderr,
}

/// Part of a recorded chunk: bytes, or the prompt the launcher was given (Codex echoes it).
#[derive(Clone, Debug)]
pub(crate) enum Part {
    Bytes(Vec<u8>),
    Prompt,
}

#[derive(Clone, Debug)]
pub(crate) struct Chunk {
    pub delay: Duration,
    pub pipe: Pipe,
    pub parts: Vec<Part>,
}

impl Chunk {
    /// The chunk's bytes as text, with the prompt left out (for finding chunks by content).
    fn text(&self) -> String {
        self.parts
            .iter()
            .map(|part| match part {
                Part::Bytes(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                Part::Prompt => String::new(),
            })
            .collect()
    }
}

/// One recorded run of a CLI.
#[derive(Clone, Debug)]
pub(crate) struct Recording {
    pub name: String,
    pub chunks: Vec<Chunk>,
    /// The exit code, or `None` when a signal ended the run.
    pub exit: Option<i32>,
    pub signal: Option<i32>,
    /// What Codex wrote to `--output-last-message`, if anything.
    pub final_message: Option<Vec<u8>>,
}

impl Recording {
    /// Loads `tests/fixtures/replay/<relative>.json`, e.g. `codex/json/ok`.
    pub(crate) fn load(relative: &str) -> Self {
        let path = fixtures_dir().join(format!("{relative}.json"));
        let text =
            fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let json: Value = serde_json::from_str(&text)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        Self::from_json(relative, &json).unwrap_or_else(|problem| {
            panic!("{}: {problem}", path.display());
        })
    }

    /// Loads a recording only if it exists (not every scenario has an old-arguments one).
    fn load_if_present(relative: &str) -> Option<Self> {
        fixtures_dir()
            .join(format!("{relative}.json"))
            .exists()
            .then(|| Self::load(relative))
    }

    fn from_json(name: &str, json: &Value) -> Result<Self, String> {
        let chunks = json["chunks"]
            .as_array()
            .ok_or("no chunks")?
            .iter()
            .map(chunk_from_json)
            .collect::<Result<_, _>>()?;
        let final_message = match &json["final_message"] {
            Value::Null => None,
            data => Some(bytes_from_json(data)?),
        };
        let code = |key: &str| json[key].as_i64().and_then(|code| i32::try_from(code).ok());
        Ok(Self {
            name: name.to_owned(),
            chunks,
            exit: code("exit"),
            signal: code("signal"),
            final_message,
        })
    }

    /// Index of the first chunk whose text contains `needle`.
    pub(crate) fn find(&self, needle: &str) -> Option<usize> {
        self.chunks
            .iter()
            .position(|chunk| chunk.text().contains(needle))
    }
}

fn chunk_from_json(json: &Value) -> Result<Chunk, String> {
    let fields = json.as_array().ok_or("a chunk is not an array")?;
    let [delay, pipe, data] = fields.as_slice() else {
        return Err(format!("a chunk has {} fields, not 3", fields.len()));
    };
    let delay = Duration::from_millis(delay.as_u64().ok_or("a delay is not a number")?);
    let pipe = match pipe.as_str() {
        Some("out") => Pipe::Stdout,
        Some("err") => Pipe::Stderr,
        other => return Err(format!("unknown stream {other:?}")),
    };
    let parts = match data {
        Value::Array(parts) => parts.iter().map(part_from_json).collect::<Result<_, _>>()?,
        single => vec![part_from_json(single)?],
    };
    Ok(Chunk { delay, pipe, parts })
}

fn part_from_json(json: &Value) -> Result<Part, String> {
    if json.get("prompt").and_then(Value::as_bool) == Some(true) {
        return Ok(Part::Prompt);
    }
    bytes_from_json(json).map(Part::Bytes)
}

fn bytes_from_json(json: &Value) -> Result<Vec<u8>, String> {
    if let Some(text) = json.as_str() {
        return Ok(text.as_bytes().to_vec());
    }
    let hex = json["hex"].as_str().ok_or("data is neither text nor hex")?;
    (0..hex.len())
        .step_by(2)
        .map(|at| {
            hex.get(at..at + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| format!("bad hex at {at}"))
        })
        .collect()
}

/// A test's steering of a replay, attached to the first chunk containing one of `needles`.
#[derive(Clone, Debug)]
enum Steering {
    /// Before the chunk, run this shell command.
    Before {
        needles: Vec<String>,
        command: String,
    },
    /// After the chunk, wait until the test creates `gate-<name>`.
    GateAfter { needles: Vec<String>, name: String },
    /// After the chunk, wait for gate `gates.0`; then write the stdout chunks of the run of
    /// zero-delay chunks that follows before its stderr chunks, and wait for gate `gates.1`
    /// between the two.
    StdoutFirst {
        needles: Vec<String>,
        gates: (String, String),
    },
    /// At the recorded moment `at` (since launch), wait for gate `name`: after every chunk
    /// read by then, before every later one.
    GateAtTime { at: Duration, name: String },
}

impl Steering {
    fn needles(&self) -> &[String] {
        match self {
            Self::Before { needles, .. }
            | Self::GateAfter { needles, .. }
            | Self::StdoutFirst { needles, .. } => needles,
            Self::GateAtTime { .. } => &[],
        }
    }
}

/// A fake launcher built from recordings; install it into a sandbox's `bin/`.
#[derive(Clone, Debug)]
pub(crate) struct Replay {
    launcher: &'static str,
    /// The argument whose presence selects `current` rather than `legacy`.
    selector: &'static str,
    current: Option<Recording>,
    legacy: Option<Recording>,
    /// Replays `legacy` whatever the arguments: a launcher that drops the selector.
    ignore_arguments: bool,
    /// Recorded delays are multiplied by this, then capped at `max_delay`.
    scale: f64,
    max_delay: Duration,
    steering: Vec<Steering>,
}

impl Replay {
    /// `codex-lean`: `codex/json/<scenario>` for `exec --json`, else `codex/human/<scenario>`.
    pub(crate) fn codex(scenario: &str) -> Self {
        Self::new("codex-lean", "--json", "codex", ["json", "human"], scenario)
    }

    /// `claude-lean`: `claude/partial/<scenario>` with `--include-partial-messages`, else
    /// `claude/whole/<scenario>`.
    pub(crate) fn claude(scenario: &str) -> Self {
        Self::new(
            "claude-lean",
            "--include-partial-messages",
            "claude",
            ["partial", "whole"],
            scenario,
        )
    }

    fn new(
        launcher: &'static str,
        selector: &'static str,
        cli: &str,
        [current, legacy]: [&str; 2],
        scenario: &str,
    ) -> Self {
        let replay = Self {
            launcher,
            selector,
            current: Recording::load_if_present(&format!("{cli}/{current}/{scenario}")),
            legacy: Recording::load_if_present(&format!("{cli}/{legacy}/{scenario}")),
            ignore_arguments: false,
            scale: 0.1,
            max_delay: Duration::from_millis(100),
            steering: Vec::new(),
        };
        assert!(
            replay.current.is_some() || replay.legacy.is_some(),
            "no recording of {cli} {scenario}"
        );
        replay
    }

    /// Replays the legacy recording whatever the arguments (a launcher that ignores them).
    pub(crate) fn ignoring_arguments(mut self) -> Self {
        assert!(self.legacy.is_some(), "no legacy recording to replay");
        self.ignore_arguments = true;
        self
    }

    /// Runs `command` (shell) before the first chunk containing any of `needles`.
    pub(crate) fn before(mut self, needles: &[&str], command: &str) -> Self {
        self.steering.push(Steering::Before {
            needles: needles.iter().map(|needle| needle.to_string()).collect(),
            command: command.to_owned(),
        });
        self
    }

    /// Holds the replay after the first chunk containing any of `needles` until
    /// [`Replay::open_gate`] is called with `name`.
    pub(crate) fn gate_after(mut self, needles: &[&str], name: &str) -> Self {
        self.steering.push(Steering::GateAfter {
            needles: needles.iter().map(|needle| needle.to_string()).collect(),
            name: name.to_owned(),
        });
        self
    }

    /// Holds the replay at gate `name` at the moment the first chunk containing `needle` was
    /// read in the current-arguments recording, in whichever recording is replayed: what a
    /// wrapper showed by then is what it showed while the CLI was still at work.
    pub(crate) fn gate_at_time_of(mut self, needle: &str, name: &str) -> Self {
        let recording = self
            .current
            .as_ref()
            .expect("a current-arguments recording");
        let index = recording
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} is not in {}", recording.name));
        let at = recording.chunks[..=index]
            .iter()
            .map(|chunk| chunk.delay)
            .sum();
        self.steering.push(Steering::GateAtTime {
            at,
            name: name.to_owned(),
        });
        self
    }

    /// After the first chunk containing any of `needles`, holds the replay at gate `first`,
    /// then writes the stdout chunks among the zero-delay chunks that follow before their
    /// stderr chunks, holding at gate `second` in between. Chunks read 0 ms apart from two
    /// pipes may reach a reader in either order; this picks the order that matters.
    pub(crate) fn stdout_first_after(
        mut self,
        needles: &[&str],
        first: &str,
        second: &str,
    ) -> Self {
        self.steering.push(Steering::StdoutFirst {
            needles: needles.iter().map(|needle| needle.to_string()).collect(),
            gates: (first.to_owned(), second.to_owned()),
        });
        self
    }

    /// Lets a replay held at gate `name` go on.
    pub(crate) fn open_gate(sandbox: &Sandbox, name: &str) {
        sandbox.write(&format!("replay/gate-{name}"), "");
    }

    /// Writes the fake launcher (and its chunk files) into the sandbox's `bin/`.
    pub(crate) fn install(&self, sandbox: &Sandbox) {
        let dir = sandbox.path("replay");
        fs::create_dir_all(&dir).expect("replay dir");
        let mut dispatch = format!(
            "out=''; prev=''\n\
             for arg in \"$@\"; do [ \"$prev\" = --output-last-message ] && out=$arg; prev=$arg; done\n\
             echo \"$*\" > '{dir}/argv'\n\
             cat > '{dir}/prompt'\n",
            dir = dir.display()
        );
        let missing = format!(
            "echo \"replay: no recording of {} for: $*\" >&2; exit 97",
            self.launcher
        );
        let script = |recording: &Option<Recording>, tag: &str| match recording {
            Some(recording) => self.replay_script(sandbox, recording, tag),
            None => missing.clone(),
        };
        if self.ignore_arguments {
            dispatch.push_str(&script(&self.legacy, "legacy"));
        } else {
            let _ = write!(
                dispatch,
                "case \" $* \" in\n*' {selector} '*)\n{current}\n;;\n*)\n{legacy}\n;;\nesac\n",
                selector = self.selector,
                current = script(&self.current, "current"),
                legacy = script(&self.legacy, "legacy"),
            );
        }
        sandbox.script(self.launcher, &dispatch);
    }

    /// The shell lines that replay `recording`; its chunks go to `replay/<tag>-N`.
    fn replay_script(&self, sandbox: &Sandbox, recording: &Recording, tag: &str) -> String {
        let dir = sandbox.path("replay");
        let dir = dir.display().to_string();
        // Each steering applies at the first chunk that holds one of its needles.
        let at = |steer: &Steering| {
            steer
                .needles()
                .iter()
                .filter_map(|needle| recording.find(needle))
                .min()
        };
        let wait =
            |name: &str| format!("while [ ! -e '{dir}/gate-{name}' ]; do sleep 0.01; done\n");
        let mut order: Vec<usize> = (0..recording.chunks.len()).collect();
        let mut after: Vec<String> = vec![String::new(); recording.chunks.len()];
        let mut before: Vec<String> = vec![String::new(); recording.chunks.len()];
        for steer in &self.steering {
            let Some(index) = at(steer) else { continue };
            match steer {
                Steering::Before { command, .. } => before[index].push_str(&format!("{command}\n")),
                Steering::GateAfter { name, .. } => after[index].push_str(&wait(name)),
                Steering::GateAtTime { .. } => {}
                Steering::StdoutFirst {
                    gates: (first, second),
                    ..
                } => {
                    after[index].push_str(&wait(first));
                    let run_end = (index + 1..recording.chunks.len())
                        .find(|&next| !recording.chunks[next].delay.is_zero())
                        .unwrap_or(recording.chunks.len());
                    let (stdout, stderr): (Vec<usize>, Vec<usize>) = (index + 1..run_end)
                        .partition(|&next| recording.chunks[next].pipe == Pipe::Stdout);
                    if let Some(&last) = stdout.last() {
                        after[last].push_str(&wait(second));
                    }
                    order.splice(index + 1..run_end, stdout.into_iter().chain(stderr));
                }
            }
        }
        let mut lines = String::new();
        for steer in &self.steering {
            if let Steering::GateAtTime { at, name } = steer {
                let mut elapsed = Duration::ZERO;
                let read_by_then = recording.chunks.iter().take_while(|chunk| {
                    elapsed += chunk.delay;
                    elapsed <= *at
                });
                match read_by_then.count().checked_sub(1) {
                    Some(last) => after[last].push_str(&wait(name)),
                    None => lines.push_str(&wait(name)),
                }
            }
        }
        for index in order {
            let chunk = &recording.chunks[index];
            let delay = chunk.delay.mul_f64(self.scale).min(self.max_delay);
            if !delay.is_zero() {
                let _ = writeln!(lines, "sleep {:.3}", delay.as_secs_f64());
            }
            lines.push_str(&before[index]);
            let redirect = match chunk.pipe {
                Pipe::Stdout => "",
                Pipe::Stderr => " >&2",
            };
            let file = |part: usize| format!("{dir}/{tag}-{index}-{part}");
            if let [Part::Bytes(bytes)] = chunk.parts.as_slice() {
                fs::write(file(0), bytes).expect("chunk file");
                let _ = writeln!(lines, "cat '{}'{redirect}", file(0));
            } else {
                // Assembled first, so the chunk is still one write.
                let mut sources = Vec::new();
                for (number, part) in chunk.parts.iter().enumerate() {
                    match part {
                        Part::Bytes(bytes) => {
                            fs::write(file(number), bytes).expect("chunk file");
                            sources.push(format!("'{}'", file(number)));
                        }
                        Part::Prompt => sources.push(format!("'{dir}/prompt'")),
                    }
                }
                let _ = writeln!(
                    lines,
                    "cat {} > '{dir}/assembled'\ncat '{dir}/assembled'{redirect}",
                    sources.join(" ")
                );
            }
            lines.push_str(&after[index]);
        }
        if let Some(message) = &recording.final_message {
            let path = format!("{dir}/{tag}-final-message");
            fs::write(&path, message).expect("final message file");
            let _ = writeln!(lines, "[ -n \"$out\" ] && cat '{path}' > \"$out\"");
        }
        match (recording.exit, recording.signal) {
            (_, Some(signal)) => {
                let _ = writeln!(lines, "kill -{signal} $$");
            }
            (code, None) => {
                let _ = writeln!(lines, "exit {}", code.unwrap_or(0));
            }
        }
        lines
    }
}
