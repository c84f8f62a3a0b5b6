//! `watch`: follows the event stream of a run started elsewhere and shows where it is; read
//! only (docs/cli.md, "`watch`"). The run followed is the one whose handler holds the plan
//! workspace's lock (a pid alone could be reused), else the next to start. The stream is read
//! with bounded memory ([`Follower`]), every text from it is made printable, and a closed
//! stdout ends the watch quietly.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::args::WatchArgs;
use crate::domain::display::printable;
use crate::domain::exit_code::ExitCode;
use crate::domain::state::AttemptStatus;
use crate::domain::token_usage::summary::UsageSummary;
use crate::invocation::locate_for_report;
use crate::platform::event_log::{FollowError, Follower};
use crate::platform::locate::PlanLocation;
use crate::platform::locks::lock_holder;
use crate::platform::proc;
use crate::report::{self, LiveAttempt, Output};

/// How often the stream is polled for new lines.
const POLL: Duration = Duration::from_millis(100);
/// How often the followed run's handler is checked for life while its stream is quiet.
const LIVENESS_CHECK: Duration = Duration::from_secs(1);
/// How long an attempt may go without a line on the screen before its status line is shown
/// again: a silent agent writes no output progress, and the elapsed time should still move.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// After the handler let go of the plan workspace, how long its last records (`run-finished`
/// is queued before the lock is released, and written by a thread of its own) may take to
/// reach the stream before the run counts as gone without finishing.
const LAST_WORDS: Duration = Duration::from_secs(3);

/// Stdout was closed (`watch … | head -1`): nobody reads any more.
struct StdoutClosed;

pub(super) fn run(args: &WatchArgs) -> ExitCode {
    let location = match locate_for_report(args.plan.path()) {
        Ok(location) => location,
        Err(error) => {
            Output::error(error.to_string()).print();
            return error.exit_code();
        }
    };
    // Ended as SIGPIPE would end it, without a panic or a backtrace.
    watch(args.json, args.follow, &location).unwrap_or(ExitCode::Signal(nix::libc::SIGPIPE))
}

/// The line of a watch waiting for a run (first, or with `--follow` after one ended).
const WAITING: &str = "waiting for a run of this plan to start";

fn watch(json: bool, follow: bool, location: &PlanLocation) -> Result<ExitCode, StdoutClosed> {
    let path = PathBuf::from(&location.layout.dir).join("events.jsonl");
    let mut follower = Follower::new(path.clone());
    let mut watch = Watch::default();
    // What is already in the stream, and who holds the lock, decide whether a run is in
    // progress.
    let mut history = History::default();
    if let Err(error) = follower.catch_up(|line| history.read(line)) {
        return Ok(fail_stream(&path, &error));
    }
    let holder = workspace_holder(location, &history);
    if holder.is_none() {
        // Started after a run ended: how it did is the first thing the watcher wants.
        for line in history.last_run_ended() {
            say(json, &line)?;
        }
    }
    match history.in_progress(holder) {
        None => say(json, WAITING)?,
        Some(found) => {
            if found.started.is_none() {
                say(
                    json,
                    &format!(
                        "following the run in progress (handler pid {}); its start is no longer in the event stream",
                        pid_text(holder.flatten())
                    ),
                )?;
            }
            watch.followed = Some(found.followed(holder.flatten()));
            for line in found.lines {
                if let Some(end) = watch.show(json, &line)? {
                    if !follow {
                        return Ok(end);
                    }
                    watch.next_run(json)?;
                }
            }
        }
    }
    let mut last_check = Instant::now();
    let mut released_at: Option<Instant> = None;
    loop {
        std::thread::sleep(POLL);
        let lines = match follower.read_new_lines() {
            Ok(lines) => lines,
            Err(error) => return Ok(fail_stream(&path, &error)),
        };
        let quiet = lines.is_empty();
        for line in lines {
            if let Some(end) = watch.show(json, &line)? {
                if !follow {
                    return Ok(end);
                }
                watch.next_run(json)?;
            }
        }
        if quiet && !json {
            watch.heartbeat()?;
        }
        if quiet && last_check.elapsed() >= LIVENESS_CHECK {
            last_check = Instant::now();
            let Some(run) = watch.followed.as_ref() else {
                continue;
            };
            if handler_runs(location, run.pid) {
                released_at = None;
                continue;
            }
            // Its last records may still be on their way.
            let since = *released_at.get_or_insert_with(Instant::now);
            if since.elapsed() < LAST_WORDS {
                continue;
            }
            let mut line = format!(
                "the run's handler (pid {}) is gone without finishing",
                pid_text(run.pid)
            );
            if let Some(stopped) = &watch.watchdog_stopped {
                line.push_str("; ");
                line.push_str(stopped);
            }
            say(json, &line)?;
            if !follow {
                return Ok(ExitCode::AgentFailed);
            }
            released_at = None;
            watch.next_run(json)?;
        }
    }
}

/// The run to follow that the stream already holds, read line by line at the start: only the
/// latest run's lines are kept, and of its output progress only the latest (memory does not
/// grow with the stream).
#[derive(Default)]
struct History {
    /// The latest `run-started`'s run, with its lines.
    latest: Option<Found>,
    /// The run id of the latest record of any run, with its lines since that run's first
    /// record seen (for a run whose `run-started` was rotated away).
    unstarted: Option<Found>,
}

/// One run's lines in the stream.
struct Found {
    run_id: String,
    started: Option<Value>,
    finished: bool,
    lines: Vec<String>,
    /// Where the latest output-progress line sits in `lines`.
    progress_at: Option<usize>,
}

impl Found {
    fn new(run_id: String, started: Option<Value>) -> Self {
        Self {
            run_id,
            started,
            finished: false,
            lines: Vec::new(),
            progress_at: None,
        }
    }

    fn push(&mut self, kind: &str, line: String) {
        if kind == "output-progress" {
            // Only the latest figures matter for a replay.
            if let Some(at) = self.progress_at {
                self.lines.remove(at);
            }
            self.progress_at = Some(self.lines.len());
        }
        self.lines.push(line);
        if kind == "run-finished" {
            self.finished = true;
        }
    }

    /// The handler pid its `run-started` names.
    fn pid(&self) -> Option<u32> {
        self.started
            .as_ref()
            .map(|event| number(event, "pid") as u32)
    }

    /// The run as followed; its handler is the lock holder when `run-started` is gone.
    fn followed(&self, holder: Option<u32>) -> Followed {
        match &self.started {
            Some(event) => started(event),
            None => Followed {
                run_id: self.run_id.clone(),
                pid: holder,
                ..Followed::default()
            },
        }
    }
}

impl History {
    fn read(&mut self, line: String) {
        let Ok(event) = serde_json::from_str::<Value>(&line) else {
            return;
        };
        let kind = kind(&event).to_owned();
        let Some(run_id) = event["run_id"].as_str().map(str::to_owned) else {
            return;
        };
        if kind == "run-started" {
            let mut found = Found::new(run_id, Some(event));
            found.push(&kind, line);
            self.latest = Some(found);
            self.unstarted = None;
            return;
        }
        match self.latest.as_mut() {
            Some(found) if found.run_id == run_id => found.push(&kind, line),
            _ => {
                let unstarted = self
                    .unstarted
                    .get_or_insert_with(|| Found::new(run_id.clone(), None));
                if unstarted.run_id != run_id {
                    *unstarted = Found::new(run_id, None);
                }
                unstarted.push(&kind, line);
            }
        }
    }

    /// How the latest run ended, for a watch started when no run holds the plan workspace:
    /// its exit (or that its handler went away without finishing) and its last phase end,
    /// with a stop's question or reason. Nothing when the stream holds no run.
    fn last_run_ended(&self) -> Vec<String> {
        let Some(found) = self.latest.as_ref().or(self.unstarted.as_ref()) else {
            return Vec::new();
        };
        let events: Vec<Value> = found
            .lines
            .iter()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        let of_kind = |wanted: &str| events.iter().rev().find(|event| kind(event) == wanted);
        let handler = found.started.as_ref().map_or(String::new(), |event| {
            format!(
                " (handler pid {}, started {})",
                number(event, "pid"),
                text(event, "at")
            )
        });
        let mut lines = vec![match of_kind("run-finished") {
            Some(finished) => format!(
                "the last run{handler} ended at {}: exit {}",
                text(finished, "at"),
                number(finished, "exit_code")
            ),
            None => format!("the last run{handler} ended without finishing: its handler is gone"),
        }];
        lines.extend(of_kind("outcome-committed").and_then(phase_end));
        lines
    }

    /// The run in progress, given the pid holding the plan workspace (`None`: no run). A run
    /// whose `run-started` names that pid and that has not finished is it; without one, the
    /// latest records' run is (its start was rotated away).
    fn in_progress(self, holder: Option<Option<u32>>) -> Option<Found> {
        let holder = holder?;
        let holders = self
            .latest
            .filter(|found| !found.finished && (holder.is_none() || found.pid() == holder));
        holders.or(self.unstarted.filter(|found| !found.finished))
    }
}

/// The pid holding the plan workspace's lock: `None` when no run holds it, `Some(None)` when
/// one does whose pid is not visible from here. When the lock table cannot be read, the
/// latest started run's handler counts if its pid is alive (as before the lock probe).
fn workspace_holder(location: &PlanLocation, history: &History) -> Option<Option<u32>> {
    match lock_holder(Path::new(&location.workspace)) {
        Ok(holder) => holder.map(|holder| holder.pid),
        Err(error) => {
            tracing::debug!(%error, "cannot read the lock table");
            history
                .latest
                .as_ref()
                .and_then(Found::pid)
                .filter(|pid| pid_alive(*pid))
                .map(Some)
        }
    }
}

fn pid_alive(pid: u32) -> bool {
    matches!(proc::stat(pid), Ok(Some(stat)) if !stat.is_defunct())
}

/// Whether the followed run's handler still runs: it holds the plan workspace's lock (a
/// reused pid holds no lock). When the lock table cannot be read, its pid is looked at.
fn handler_runs(location: &PlanLocation, pid: Option<u32>) -> bool {
    match lock_holder(Path::new(&location.workspace)) {
        Ok(Some(holder)) => holder.pid.is_none() || pid.is_none() || holder.pid == pid,
        Ok(None) => false,
        Err(_) => pid.is_some_and(pid_alive),
    }
}

/// The run being followed.
#[derive(Clone, Debug, Default)]
struct Followed {
    run_id: String,
    /// Its handler's pid; `None` when its start was not seen and the lock table hid it.
    pid: Option<u32>,
    phases: usize,
    /// The attempt in progress, from its latest output progress and `activity`.
    attempt: Option<LiveAttempt>,
}

#[derive(Default)]
struct Watch {
    followed: Option<Followed>,
    /// When the last line was shown (text mode).
    last_shown: Option<Instant>,
    /// What the followed run's watchdog said it stopped, once its handler was gone.
    watchdog_stopped: Option<String>,
}

impl Watch {
    /// Shows one line of the stream; `Some` ends the watch.
    fn show(&mut self, json: bool, line: &str) -> Result<Option<ExitCode>, StdoutClosed> {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            return Ok(None);
        };
        if kind(&event) == "watchdog-stopped" {
            self.note_watchdog(&event);
            if json && self.watchdog_is_ours(&event) {
                print_json(line)?;
            }
            return Ok(None);
        }
        let run_id = text(&event, "run_id");
        match (&self.followed, kind(&event)) {
            (None, "run-started") => self.followed = Some(started(&event)),
            (Some(run), _) if run.run_id == run_id => {}
            // Another run's line (an earlier one's tail, or a refused contender's).
            _ => return Ok(None),
        }
        if json {
            // Printable even if the stream was written by a version that did not escape.
            print_json(line)?;
        } else if let Some(text) = self.render(&event) {
            say(false, &text)?;
            self.last_shown = Some(Instant::now());
        }
        Ok((kind(&event) == "run-finished").then_some(ExitCode::Success))
    }

    fn watchdog_is_ours(&self, event: &Value) -> bool {
        let pid = event["handler_pid"].as_u64().map(|pid| pid as u32);
        self.followed
            .as_ref()
            .is_some_and(|run| run.pid.is_some() && run.pid == pid)
    }

    /// A `watchdog-stopped` record of the followed run's handler: kept for the last line.
    fn note_watchdog(&mut self, event: &Value) {
        if !self.watchdog_is_ours(event) {
            return;
        }
        let count = |key: &str| event[key].as_array().map_or(0, Vec::len);
        self.watchdog_stopped = Some(format!(
            "its watchdog stopped {} process group(s) and killed {} escaped descendant(s){}",
            count("groups"),
            count("escaped"),
            match count("survivors") {
                0 => String::new(),
                alive => format!("; {alive} still alive after SIGKILL"),
            }
        ));
    }

    fn render(&mut self, event: &Value) -> Option<String> {
        let run = self.followed.as_mut()?;
        Some(match kind(event) {
            "run-started" => format!(
                "run started: {} (handler pid {}), {} of {} phases complete",
                text(event, "plan"),
                number(event, "pid"),
                number(event, "completed"),
                number(event, "phases")
            ),
            "attempt-prepared" => {
                let phase_id = text(event, "phase_id");
                let index = number(event, "phase_index") as usize;
                if run.phases == 0 {
                    run.phases = number(event, "phases") as usize;
                }
                run.attempt = Some(LiveAttempt::new(phase_id.clone(), index, run.phases));
                let in_run = number(event, "attempt") as u32;
                report::phase_banner(
                    &phase_id,
                    index,
                    run.phases,
                    &text(event, "title"),
                    report::AttemptNumber {
                        // A stream written before `phase_attempt` existed: the run's count.
                        of_phase: event["phase_attempt"]
                            .as_u64()
                            .map_or(in_run, |number| number as u32),
                        in_run,
                        of: number(event, "of") as u32,
                    },
                )
            }
            "worker-spawned" => format!("worker started: pid {}", number(event, "pid")),
            "output-progress" => {
                let attempt = run.attempt.as_mut()?;
                attempt.output_bytes =
                    number(event, "stdout_bytes").saturating_add(number(event, "stderr_bytes"));
                // A result block is never shown as the last line (live output hides it; a
                // stream written before the runner dropped it may still carry one).
                if let Some(line) = event["last_line"].as_str()
                    && !crate::domain::marker::mentions_result_tag(line.as_bytes())
                {
                    attempt.last_line = Some(line.to_owned());
                }
                attempt.status_line()
            }
            "activity" => {
                let status = event["text"].as_str().map(str::to_owned);
                let since = event["since"]
                    .as_str()
                    .and_then(|since| DateTime::parse_from_rfc3339(since).ok())
                    .map_or_else(Utc::now, |since| since.with_timezone(&Utc));
                let phase_id = match run.attempt.as_mut() {
                    Some(attempt) => {
                        attempt.status = status.clone().map(|text| (text, since));
                        attempt.phase_id.as_str()
                    }
                    None => "",
                };
                report::status_change(phase_id, status.as_deref())
            }
            "idle-deadline-extended" => format!(
                "the agent announced a silence: idle deadline extended by {} s, until {}",
                crate::domain::seconds::format_tenths(
                    event["seconds"].as_f64().unwrap_or_default()
                ),
                text(event, "until")
            ),
            "budget-unenforceable" => format!("warning: {}", text(event, "message")),
            "stop-requested" => format!(
                "stopping the attempt: {} ({})",
                text(event, "cause"),
                text(event, "detail")
            ),
            "watchdog-lost" => format!("warning: {}", text(event, "detail")),
            "group-stopped" => {
                let leftovers: Vec<String> = ["leaked", "escaped", "survivors"]
                    .iter()
                    .filter_map(|key| {
                        let pids = event[*key].as_array()?;
                        (!pids.is_empty()).then(|| format!("{key} {}", pids.len()))
                    })
                    .collect();
                if leftovers.is_empty() {
                    return None;
                }
                format!("process group stopped: {}", leftovers.join(", "))
            }
            "outcome-committed" => {
                run.attempt = None;
                phase_end(event)?
            }
            "retry-scheduled" => format!(
                "{} scheduled again (attempt {}) not before {}: {}",
                text(&event["schedule"], "phase_id"),
                number(&event["schedule"], "attempt"),
                text(&event["schedule"], "not_before"),
                text(&event["schedule"], "reason")
            ),
            "retry-due" => format!(
                "{} runs again (attempt {})",
                text(event, "phase_id"),
                number(event, "attempt")
            ),
            "verify-started" => format!(
                "{} verify {} of {}: {}",
                text(event, "phase_id"),
                number(event, "index"),
                number(event, "of"),
                text(event, "command_first_line")
            ),
            "verify-finished" => {
                let how = if event["stopped"].as_bool() == Some(true) {
                    "stopped by the handler".to_owned()
                } else if event["timed_out"].as_bool() == Some(true) {
                    "timed out".to_owned()
                } else {
                    match event["exit_code"].as_i64() {
                        Some(code) => format!("exited with code {code}"),
                        None => "was killed".to_owned(),
                    }
                };
                let verdict = if event["passed"].as_bool() == Some(true) {
                    "passed"
                } else {
                    "failed"
                };
                format!(
                    "{} verify {} {verdict}: {how}",
                    text(event, "phase_id"),
                    number(event, "index")
                )
            }
            "run-finished" => format!("run finished: exit {}", number(event, "exit_code")),
            _ => return None,
        })
    }

    /// With `--follow`, after the followed run ended: wait for the next one.
    fn next_run(&mut self, json: bool) -> Result<(), StdoutClosed> {
        *self = Self::default();
        say(json, WAITING)
    }

    /// Shows the attempt's status line again when nothing was shown for [`HEARTBEAT`].
    fn heartbeat(&mut self) -> Result<(), StdoutClosed> {
        if self
            .last_shown
            .is_some_and(|shown| shown.elapsed() < HEARTBEAT)
        {
            return Ok(());
        }
        if let Some(line) = self
            .followed
            .as_ref()
            .and_then(|run| run.attempt.as_ref())
            .map(LiveAttempt::status_line)
        {
            say(false, &line)?;
            self.last_shown = Some(Instant::now());
        }
        Ok(())
    }
}

/// A phase's end line from its `outcome-committed` record; a stop that waits for an answer
/// or for a blocker to be removed says the question or the reason on the next line.
fn phase_end(event: &Value) -> Option<String> {
    let status = event["status"]
        .as_str()
        .and_then(|text| text.parse::<AttemptStatus>().ok())?;
    // A stream written before usage was recorded has none.
    let usage = crate::domain::strict_json::from_value::<UsageSummary>(&event["usage"]).ok();
    let mut line = report::phase_ended(
        &text(event, "phase_id"),
        status,
        number(event, "duration_ms"),
        number(event, "stdout_bytes").saturating_add(number(event, "stderr_bytes")),
        usage.as_ref(),
    );
    let label = if status == AttemptStatus::Blocked {
        Some("reason")
    } else if status == AttemptStatus::NeedsClarification {
        Some("question")
    } else {
        None
    };
    if let Some(label) = label {
        // Continuation lines indented, so the agent's text cannot pass for a line of ours.
        let detail = text(event, "summary").replace('\n', "\n  ");
        line.push_str(&format!("\n{label}: {detail}"));
    }
    Some(line)
}

fn started(event: &Value) -> Followed {
    Followed {
        run_id: text(event, "run_id"),
        pid: Some(number(event, "pid") as u32),
        phases: number(event, "phases") as usize,
        ..Followed::default()
    }
}

fn pid_text(pid: Option<u32>) -> String {
    pid.map_or_else(|| "unknown".to_owned(), |pid| pid.to_string())
}

fn kind(event: &Value) -> &str {
    event["event"].as_str().unwrap_or_default()
}

/// A text field of an event, made printable: it decodes to the agent's exact text.
fn text(event: &Value, key: &str) -> String {
    printable(event[key].as_str().unwrap_or_default()).into_owned()
}

fn number(event: &Value, key: &str) -> u64 {
    event[key].as_u64().unwrap_or_default()
}

/// A line for the person watching (on stderr with `--json`, which keeps stdout for events).
/// A closed stdout (`watch … | head -1`) ends the watch, as SIGPIPE would.
fn say(json: bool, line: &str) -> Result<(), StdoutClosed> {
    if json {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "{line}");
        return Ok(());
    }
    write_stdout(line)
}

fn print_json(line: &str) -> Result<(), StdoutClosed> {
    write_stdout(&crate::domain::display::printable_json(line))
}

fn write_stdout(line: &str) -> Result<(), StdoutClosed> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|_| StdoutClosed)
}

fn fail_stream(path: &Path, error: &FollowError) -> ExitCode {
    Output::error(format!(
        "{}: cannot read the event stream: {error}",
        path.display()
    ))
    .print();
    ExitCode::InvalidInput
}
