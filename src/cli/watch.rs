//! `watch`: follows the event stream of a run started elsewhere and shows where it is. Read
//! only: it takes no lock and writes nothing, so it never gets in a run's way.
//!
//! Which run: the one in progress when `watch` starts (its `run-started` has no `run-finished`
//! and its handler is alive), else the next one to start. It ends when that run finishes, when
//! its handler is gone without finishing, or on Ctrl-C. With `--json` the followed run's event
//! lines are passed through as they are (the agent's `activity` and `idle-deadline-extended`
//! among them); the text shows the agent's latest status on its own line when it changes and
//! in the status line with its age, and each attempt's tokens and cost when it ends.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::args::WatchArgs;
use crate::domain::exit_code::ExitCode;
use crate::domain::token_usage::summary::UsageSummary;
use crate::invocation::{InputError, locate_for_report};
use crate::platform::event_log::Follower;
use crate::platform::proc;
use crate::report::{self, Output};

/// How often the stream is polled for new lines.
const POLL: Duration = Duration::from_millis(100);
/// How often the followed run's handler is checked for life while its stream is quiet.
const LIVENESS_CHECK: Duration = Duration::from_secs(1);
/// How long an attempt may go without a line on the screen before its status line is shown
/// again: a silent agent writes no output progress, and the elapsed time should still move.
const HEARTBEAT: Duration = Duration::from_secs(5);

pub fn run(args: &WatchArgs) -> ExitCode {
    let location = match locate_for_report(&args.plan) {
        Ok(location) => location,
        Err(error) => return fail(&error),
    };
    let path = PathBuf::from(&location.layout.dir).join("events.jsonl");
    let mut follower = Follower::new(path);
    let mut watch = Watch::default();
    // What is already in the stream decides whether a run is in progress.
    match follower.read_new_lines() {
        Ok(lines) => watch.catch_up(&lines),
        Err(error) => return fail_io(&location.layout.dir, &error),
    }
    if watch.replay.is_empty() {
        say(args.json, "waiting for a run of this plan to start");
    }
    for line in watch.replay.drain(..).collect::<Vec<_>>() {
        if let Some(end) = watch.show(args.json, &line) {
            return end;
        }
    }
    let mut last_check = Instant::now();
    loop {
        std::thread::sleep(POLL);
        let lines = match follower.read_new_lines() {
            Ok(lines) => lines,
            Err(error) => return fail_io(&location.layout.dir, &error),
        };
        let quiet = lines.is_empty();
        for line in lines {
            if let Some(end) = watch.show(args.json, &line) {
                return end;
            }
        }
        if quiet && !args.json {
            watch.heartbeat();
        }
        if quiet && last_check.elapsed() >= LIVENESS_CHECK {
            last_check = Instant::now();
            if let Some(pid) = watch.followed.as_ref().map(|run| run.pid)
                && !handler_alive(pid)
            {
                say(
                    args.json,
                    &format!("the run's handler (pid {pid}) is gone without finishing"),
                );
                return ExitCode::AgentFailed;
            }
        }
    }
}

/// The run being followed.
#[derive(Clone, Debug)]
struct Followed {
    run_id: String,
    pid: u32,
    phases: usize,
    /// The attempt in progress: its banner fields and when it started (as observed).
    attempt: Option<(String, usize, Instant)>,
    /// The attempt's output so far and its last line, from its latest output progress.
    output_bytes: u64,
    last_line: Option<String>,
    /// The agent's latest status and when it was set, from its latest `activity`.
    status: Option<(String, DateTime<Utc>)>,
}

#[derive(Default)]
struct Watch {
    followed: Option<Followed>,
    /// The followed run's lines already in the stream when `watch` started.
    replay: Vec<String>,
    /// When the last line was shown (text mode).
    last_shown: Option<Instant>,
}

impl Watch {
    /// Reads what the stream held when `watch` started: a run in progress is followed from
    /// its start (its lines are shown first); a finished one is history.
    fn catch_up(&mut self, lines: &[String]) {
        let mut current: Option<(Followed, Vec<String>)> = None;
        for line in lines {
            let Ok(event) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            match kind(&event) {
                "run-started" => current = Some((started(&event), vec![line.clone()])),
                "run-finished" => {
                    if current
                        .as_ref()
                        .is_some_and(|(run, _)| run.run_id == text(&event, "run_id"))
                    {
                        current = None;
                    }
                }
                _ => {
                    if let Some((run, held)) = current.as_mut()
                        && run.run_id == text(&event, "run_id")
                    {
                        held.push(line.clone());
                    }
                }
            }
        }
        if let Some((run, held)) = current
            && handler_alive(run.pid)
        {
            self.replay = held;
        }
    }

    /// Shows one line of the stream; `Some` ends the watch.
    fn show(&mut self, json: bool, line: &str) -> Option<ExitCode> {
        let event: Value = serde_json::from_str(line).ok()?;
        let run_id = text(&event, "run_id");
        match (&self.followed, kind(&event)) {
            (None, "run-started") => self.followed = Some(started(&event)),
            (Some(run), _) if run.run_id == run_id => {}
            // Another run's line (an earlier one's tail, or a refused contender's).
            _ => return None,
        }
        if json {
            // Printable even if the stream was written by a version that did not escape.
            Output::print_json(line);
        } else if let Some(text) = self.render(&event) {
            say(false, &text);
            self.last_shown = Some(Instant::now());
        }
        (kind(&event) == "run-finished").then_some(ExitCode::Success)
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
                run.attempt = Some((phase_id.clone(), index, Instant::now()));
                run.output_bytes = 0;
                run.last_line = None;
                run.status = None;
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
                run.output_bytes =
                    number(event, "stdout_bytes").saturating_add(number(event, "stderr_bytes"));
                run.last_line = event["last_line"].as_str().map(str::to_owned);
                run.status_line()?
            }
            "activity" => {
                let status = event["text"].as_str().map(str::to_owned);
                let since = event["since"]
                    .as_str()
                    .and_then(|since| DateTime::parse_from_rfc3339(since).ok())
                    .map_or_else(Utc::now, |since| since.with_timezone(&Utc));
                run.status = status.clone().map(|text| (text, since));
                let phase_id = run.attempt.as_ref().map_or("", |(id, _, _)| id.as_str());
                report::status_change(phase_id, status.as_deref())
            }
            "idle-deadline-extended" => format!(
                "the agent announced a silence: idle deadline extended by {} s, until {}",
                crate::domain::config::format_seconds(
                    (event["seconds"].as_f64().unwrap_or_default() * 10.0).round() / 10.0
                ),
                text(event, "until")
            ),
            "budget-unenforceable" => format!("warning: {}", text(event, "message")),
            "stop-requested" => format!(
                "stopping the attempt: {} ({})",
                text(event, "cause"),
                text(event, "detail")
            ),
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
                let status = event["status"]
                    .as_str()
                    .and_then(crate::domain::state::AttemptStatus::parse)?;
                // A stream written before usage was recorded has none.
                let usage = UsageSummary::from_json(&event["usage"], "usage").ok();
                report::phase_ended(
                    &text(event, "phase_id"),
                    status,
                    number(event, "duration_ms"),
                    number(event, "stdout_bytes").saturating_add(number(event, "stderr_bytes")),
                    usage.as_ref(),
                )
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
            "run-finished" => format!("run finished: exit {}", number(event, "exit_code")),
            _ => return None,
        })
    }
}

impl Watch {
    /// Shows the attempt's status line again when nothing was shown for [`HEARTBEAT`].
    fn heartbeat(&mut self) {
        if self
            .last_shown
            .is_some_and(|shown| shown.elapsed() < HEARTBEAT)
        {
            return;
        }
        if let Some(line) = self.followed.as_ref().and_then(Followed::status_line) {
            say(false, &line);
            self.last_shown = Some(Instant::now());
        }
    }
}

impl Followed {
    /// `phase-2 (2/5) 1m20s · 3.1 KiB · last line` while an attempt is in progress.
    fn status_line(&self) -> Option<String> {
        let (phase_id, index, since) = self.attempt.as_ref()?;
        Some(report::status_line(
            phase_id,
            *index,
            self.phases,
            since.elapsed(),
            self.output_bytes,
            self.status.as_ref().map(|(text, since)| {
                (
                    text.as_str(),
                    (Utc::now() - *since).to_std().unwrap_or_default(),
                )
            }),
            self.last_line.as_deref(),
        ))
    }
}

fn started(event: &Value) -> Followed {
    Followed {
        run_id: text(event, "run_id"),
        pid: number(event, "pid") as u32,
        phases: number(event, "phases") as usize,
        attempt: None,
        output_bytes: 0,
        last_line: None,
        status: None,
    }
}

fn kind(event: &Value) -> &str {
    event["event"].as_str().unwrap_or_default()
}

fn text(event: &Value, key: &str) -> String {
    event[key].as_str().unwrap_or_default().to_owned()
}

fn number(event: &Value, key: &str) -> u64 {
    event[key].as_u64().unwrap_or_default()
}

/// Whether the handler `pid` still exists (and is not a zombie).
fn handler_alive(pid: u32) -> bool {
    matches!(proc::stat(pid), Ok(Some(stat)) if !stat.is_defunct())
}

/// A line for the person watching (on stderr with `--json`, which keeps stdout for events).
fn say(json: bool, line: &str) {
    if json {
        eprintln!("{line}");
    } else {
        println!("{line}");
        let _ = std::io::stdout().flush();
    }
}

fn fail(error: &InputError) -> ExitCode {
    Output::error(error.to_string()).print();
    error.exit_code()
}

fn fail_io(dir: &str, error: &std::io::Error) -> ExitCode {
    Output::error(format!(
        "{dir}/events.jsonl: cannot read the event stream: {error}"
    ))
    .print();
    ExitCode::InvalidInput
}
