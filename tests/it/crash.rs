//! Crash safety (docs/session-lifecycle.md, docs/state-and-recovery.md, docs/reliability.md): the handler is SIGKILLed at pseudo-random moments of a
//! three-phase run. After every kill no worker or grandchild survives (the watchdog stops the
//! group), `state.json` parses, never claims a completion it did not commit, an unresolved
//! attempt is reported by `status` (as abandoned, its worker dead) and refused by a plain
//! `run`, and `run --retry-stopped` finishes the plan.
//!
//! `ASH_CRASH_ITERATIONS` (default 50) sets the number of kills and `ASH_CRASH_SEED` the seed;
//! `scripts/crash-soak.sh N` runs the same test for N iterations in a release build. Design and
//! results: docs/reliability.md.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

const PLAN: &str = "plan.md";
const PHASES: [&str; 3] = ["phase-1", "phase-2", "phase-3"];
const DEFAULT_ITERATIONS: u64 = 50;
const DEFAULT_SEED: u64 = 20_261_129;

#[test]
fn sigkill_at_random_points_never_corrupts_state_or_fakes_a_completion() {
    let iterations = env_number("ASH_CRASH_ITERATIONS").unwrap_or(DEFAULT_ITERATIONS);
    let seed = env_number("ASH_CRASH_SEED").unwrap_or(DEFAULT_SEED);
    println!("crash test: {iterations} iterations, seed {seed} (ASH_CRASH_SEED)");
    let mut rng = SplitMix64(seed);
    let mut tally = Tally::default();
    let run_time = time_an_uninterrupted_run();
    println!("crash test: an uninterrupted run takes {run_time:?}; kill points scale with it");
    let started = Instant::now();
    for iteration in 0..iterations {
        let kill_point = KillPoint::draw(&mut rng, run_time);
        crash_and_recover(iteration, kill_point, &mut tally);
    }
    println!(
        "crash test: {iterations} kills in {:.1} s, seed {seed}\n{tally}",
        started.elapsed().as_secs_f64()
    );
}

/// Where a kill lands, drawn from three schedules so every stage of the run gets hit, not
/// only the startup that a plain random delay favours. Delays are fractions of the time an
/// uninterrupted run takes on this machine and build, so a fast release build is hit as
/// evenly as a slow debug build under load; the seed fixes the fractions.
#[derive(Clone, Copy, Debug)]
enum KillPoint {
    /// A delay after spawning the handler.
    Timed(Duration),
    /// A delay after `state.json` first appears.
    OnStateFile(Duration),
    /// A delay after the `n`-th transcript appears.
    OnTranscript(usize, Duration),
}

impl KillPoint {
    fn draw(rng: &mut SplitMix64, run_time: Duration) -> Self {
        // Up to 110 % of a whole run, or up to about one phase after a landmark.
        let fraction = |rng: &mut SplitMix64, per_mille: u64| {
            run_time.mul_f64(rng.below(per_mille) as f64 / 1000.0)
        };
        match rng.below(3) {
            0 => Self::Timed(fraction(rng, 1100)),
            1 => Self::OnStateFile(fraction(rng, 400)),
            _ => Self::OnTranscript(1 + rng.below(3) as usize, fraction(rng, 400)),
        }
    }
}

/// The median wall time of three uninterrupted runs of the crash test's plan and agent.
fn time_an_uninterrupted_run() -> Duration {
    let mut times: Vec<Duration> = (0..3)
        .map(|_| {
            let sandbox = Sandbox::new();
            sandbox.write(PLAN, plan_with_phases(3));
            let agent = sandbox.script("agent", AGENT);
            let started = Instant::now();
            // Blocking on the exit (not polling) keeps the measurement exact; the output is
            // a few lines, so the pipes cannot fill.
            let output = spawn_run(&sandbox, &agent, &[])
                .wait_with_output()
                .expect("uninterrupted run");
            let elapsed = started.elapsed();
            Run::from_output(output).assert_code(0);
            elapsed
        })
        .collect();
    times.sort();
    times[1]
}

/// A grandchild in the worker's group that ignores SIGTERM and holds no pipe (it would outlive
/// a SIGKILLed handler if nothing stopped the group), output on both streams, then a complete
/// block.
const AGENT: &str = "(trap '' TERM; exec sleep 600) >/dev/null 2>&1 &\ncat >/dev/null\necho 'step one'\necho 'step two' >&2\necho 'step three'\necho '<phase-complete>done</phase-complete>'\n";

fn crash_and_recover(iteration: u64, kill_point: KillPoint, tally: &mut Tally) {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(3));
    let agent = sandbox.script("agent", AGENT);
    let context = format!("iteration {iteration}, {kill_point:?}");

    let mut handler = spawn_run(&sandbox, &agent, &[]);
    // The delays place the kill; nothing here waits for the handler to reach a state.
    match kill_point {
        KillPoint::Timed(delay) => std::thread::sleep(delay),
        KillPoint::OnStateFile(delay) => {
            poll_until(|| sandbox.state_path(PLAN).exists());
            std::thread::sleep(delay);
        }
        KillPoint::OnTranscript(count, delay) => {
            poll_until(|| sandbox.artifacts(PLAN, "transcripts").len() >= count);
            std::thread::sleep(delay);
        }
    }
    let exited_first = matches!(handler.try_wait(), Ok(Some(_)));
    let _ = handler.kill();
    let _ = handler.wait();
    if exited_first {
        tally.finished_before_kill += 1;
    }
    // Whatever the handler was doing, its watchdog stops the worker's group (the worker and
    // the grandchild) and exits: nothing of the run survives.
    if workers_alive(&sandbox) {
        tally.stopped_by_watchdog += 1;
    }
    let gone = wait_until(PATIENCE, || sandbox.survivors().is_empty());
    assert!(
        gone,
        "{context}: processes survived the SIGKILL of the handler: {:?}",
        sandbox.survivors()
    );

    let shape = check_invariants(&sandbox, &context);
    *tally.shapes.entry(shape).or_default() += 1;
    tally.temp_files += leftover_temp_files(&sandbox);
    tally.orphan_outcomes += orphan_outcomes(&sandbox);

    recover(&sandbox, &agent, &context);
    tally.iterations += 1;
}

/// Asserts what must hold after any kill; returns a label for where the kill landed.
fn check_invariants(sandbox: &Sandbox, context: &str) -> &'static str {
    let Some(bytes) = sandbox.state_bytes(PLAN) else {
        let status = sandbox.run(&["status", "--plan", PLAN]);
        assert_eq!(status.code, 0, "{context}: {status:?}");
        return "no state yet";
    };
    let state: Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|error| panic!("{context}: state.json does not parse: {error}"));
    let status = sandbox.run(&["status", "--plan", PLAN]);
    assert_eq!(
        status.code, 0,
        "{context}: the strict reader rejects the state: {status:?}"
    );

    let completed: Vec<&str> = strings(&state["completed_phase_ids"]);
    let committed = state["committed_outcomes"]
        .as_array()
        .expect("committed_outcomes");
    for entry in committed {
        let path = entry["path"].as_str().unwrap();
        let record: Value = serde_json::from_slice(&fs::read(path).unwrap_or_else(|error| {
            panic!("{context}: committed outcome {path} is unreadable: {error}")
        }))
        .unwrap_or_else(|error| panic!("{context}: outcome {path} does not parse: {error}"));
        assert_eq!(record["status"], entry["status"], "{context}: {path}");
        assert_eq!(
            record["phase"]["id"], entry["phase_id"],
            "{context}: {path}"
        );
        if entry["status"] == "phase-complete" {
            assert!(
                completed.contains(&entry["phase_id"].as_str().unwrap()),
                "{context}: a committed completion of {} is not in completed_phase_ids",
                entry["phase_id"]
            );
        }
    }
    for phase in &completed {
        let found = committed
            .iter()
            .any(|entry| entry["phase_id"] == *phase && entry["status"] == "phase-complete");
        assert!(
            found,
            "{context}: {phase} is completed without a committed phase-complete outcome"
        );
    }
    assert!(
        state["stop"].is_null(),
        "{context}: a kill never records a stop: {state:#}"
    );

    let attempt = &state["active_attempt"];
    if attempt.is_null() {
        return match completed.len() {
            3 => "all complete",
            0 => "accepted, nothing prepared",
            _ => "between phases",
        };
    }
    let line = format!(
        "abandoned: {} ({}, attempt {})",
        attempt["phase"]["id"].as_str().unwrap(),
        attempt["status"].as_str().unwrap(),
        attempt["id"].as_str().unwrap()
    );
    assert!(
        status.stdout.lines().any(|candidate| candidate == line),
        "{context}: status does not show {line:?}:\n{}",
        status.stdout
    );
    if !attempt["process"].is_null() {
        assert!(
            status
                .stdout
                .lines()
                .any(|candidate| candidate == "worker process: not running"),
            "{context}: status does not see the worker dead:\n{}",
            status.stdout
        );
    }
    // The recorded worker is dead: `check` notes the abandoned attempt (no "still alive").
    let check = sandbox.run(&["check", "--plan", PLAN, "--agent-cmd", "/bin/false"]);
    assert_eq!(check.code, 0, "{context}: {check:?}");
    assert!(
        check.stdout.contains(&format!(
            "note: phase {} has an abandoned {} attempt {}",
            attempt["phase"]["id"].as_str().unwrap(),
            attempt["status"].as_str().unwrap(),
            attempt["id"].as_str().unwrap()
        )),
        "{context}: {check:?}"
    );
    let plain = sandbox.run(&["run", "--plan", PLAN, "--agent-cmd", "/bin/false"]);
    assert_eq!(plain.code, 5, "{context}: {plain:?}");
    assert!(
        plain.stderr.contains(&format!(
            "has an abandoned {} attempt",
            attempt["status"].as_str().unwrap()
        )),
        "{context}: {}",
        plain.stderr
    );
    assert_eq!(
        sandbox.state_bytes(PLAN).as_deref(),
        Some(&bytes[..]),
        "{context}: a refused run changed the state"
    );
    if attempt["status"] == "prepared" {
        "prepared attempt"
    } else {
        "running attempt"
    }
}

/// `--retry-stopped` until the plan is complete; every invocation must make progress.
fn recover(sandbox: &Sandbox, agent: &Path, context: &str) {
    let mut progress = progress_of(sandbox);
    for _ in 0..PHASES.len() + 1 {
        let run = wait_for_exit(spawn_run(sandbox, agent, &["--retry-stopped"]), PATIENCE);
        sandbox.assert_no_survivors();
        if run.code == 0 {
            assert_eq!(
                run.stdout, "runner-complete: all phases complete\n",
                "{context}"
            );
            let state = sandbox.state(PLAN);
            assert_eq!(
                state["completed_phase_ids"],
                serde_json::json!(PHASES),
                "{context}"
            );
            assert!(state["active_attempt"].is_null(), "{context}");
            assert!(state["stop"].is_null(), "{context}");
            let committed = state["committed_outcomes"].as_array().unwrap();
            let phases: Vec<&str> = committed
                .iter()
                .map(|entry| entry["phase_id"].as_str().unwrap())
                .collect();
            assert_eq!(phases, PHASES, "{context}: one committed outcome per phase");
            assert!(
                committed
                    .iter()
                    .all(|entry| entry["status"] == "phase-complete"),
                "{context}: {committed:?}"
            );
            return;
        }
        let now = progress_of(sandbox);
        assert!(
            now > progress,
            "{context}: a retry made no progress: {run:?}"
        );
        progress = now;
    }
    panic!("{context}: --retry-stopped did not complete the plan");
}

/// Completed phases, then whether no attempt is left unresolved.
fn progress_of(sandbox: &Sandbox) -> (usize, bool) {
    match sandbox.state_bytes(PLAN) {
        None => (0, false),
        Some(_) => {
            let state = sandbox.state(PLAN);
            (
                state["completed_phase_ids"].as_array().unwrap().len(),
                state["active_attempt"].is_null(),
            )
        }
    }
}

fn spawn_run(sandbox: &Sandbox, agent: &Path, extra: &[&str]) -> Child {
    sandbox
        .quiet_run_command(PLAN, agent, extra)
        .spawn()
        .expect("spawn handler")
}

/// Whether a process of the run other than the watchdog is alive (right after the kill).
fn workers_alive(sandbox: &Sandbox) -> bool {
    sandbox
        .survivors()
        .into_iter()
        .any(|pid| fs::metadata(format!("/proc/{pid}")).is_ok() && !is_watchdog(pid))
}

/// Polls every millisecond (the kill point needs finer steps than `wait_until`), giving up
/// after a generous bound: a run that never gets there is killed wherever it is.
fn poll_until(mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Temp files of an interrupted atomic replacement: garbage, never read.
fn leftover_temp_files(sandbox: &Sandbox) -> usize {
    fs::read_dir(sandbox.state_dir(PLAN))
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| entry.file_name().to_string_lossy().ends_with(".tmp"))
                .count()
        })
        .unwrap_or(0)
}

/// Outcome files written before a kill but never committed: evidence, never adopted.
fn orphan_outcomes(sandbox: &Sandbox) -> usize {
    let referenced: Vec<PathBuf> = match sandbox.state_bytes(PLAN) {
        Some(_) => sandbox.state(PLAN)["committed_outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| PathBuf::from(entry["path"].as_str().unwrap()))
            .collect(),
        None => Vec::new(),
    };
    sandbox
        .artifacts(PLAN, "outcomes")
        .into_iter()
        .filter(|path| !referenced.contains(path))
        .count()
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .expect("a list")
        .iter()
        .map(|item| item.as_str().expect("a string"))
        .collect()
}

/// What the kills hit, printed at the end (`--nocapture`) for docs/reliability.md.
#[derive(Default)]
struct Tally {
    iterations: u64,
    shapes: BTreeMap<&'static str, u64>,
    finished_before_kill: u64,
    stopped_by_watchdog: u64,
    temp_files: usize,
    orphan_outcomes: usize,
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "  iterations: {} (violations: 0)", self.iterations)?;
        for (shape, count) in &self.shapes {
            writeln!(f, "  state after the kill: {shape}: {count}")?;
        }
        writeln!(
            f,
            "  handler had already exited: {}",
            self.finished_before_kill
        )?;
        writeln!(
            f,
            "  kills that left a worker running, stopped by the watchdog: {} (survivors: 0)",
            self.stopped_by_watchdog
        )?;
        writeln!(f, "  leftover state temp files: {}", self.temp_files)?;
        write!(
            f,
            "  uncommitted outcome files (evidence): {}",
            self.orphan_outcomes
        )
    }
}
