//! The watchdog's own life (docs/architecture.md, "The watchdog"; the handler's side is
//! [`super::watchdog`], the rules [`crate::domain::watchdog`]): deaf to the stopping signals in
//! a session of its own, it reads registrations until the handler is gone, then stops every
//! unreleased group and escapee and says what it did.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{self, IsTerminal, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::libc;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigHandler, Signal, signal};
use nix::sys::socket::{MsgFlags, recv};
use nix::unistd::{getpgrp, getpid, getppid};

use super::descendant_sweep::{self, PASS_INTERVAL, SURVIVOR_WAIT, SWEEP_LIMIT};
use super::no_follow;
use super::proc;
use super::process_group;
use crate::domain::escalation::Escalation;
use crate::domain::process_tree::{Killed, SweepNext, SweepRounds};
use crate::domain::watchdog::{
    ATTEMPT_ENV, HandlerStops, LogIds, Registry, STOP_LIMIT, StopReport, WatchdogMessage,
};

/// The hidden first argument that makes the binary a (re-executed) watchdog.
pub(crate) const WATCHDOG_ARG: &str = "__ai-session-handler-watchdog";
/// The watchdog's process name (`/proc/<pid>/comm`, what `ps -e` and `pstree` show).
pub(crate) const WATCHDOG_NAME: &str = "ash-watchdog";

/// How often, with nothing watched, the watchdog looks at its registry.
const IDLE_INTERVAL: Duration = Duration::from_millis(500);
/// How often, while a group is watched, it forgets gone groups and notes the handler's
/// children: an orphaned escapee is missed only if the handler dies within this long of its
/// adoption and it also cleared its environment.
const WATCH_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Clone, Debug, Default)]
pub(crate) struct WatchdogConfig {
    pub handler_pid: u32,
    pub handler_pgid: u32,
    pub events_path: Option<PathBuf>,
    /// The invocation's id, for the records of what it stopped.
    pub run_id: String,
    /// The handler's `--log-file`, when its records of this level go there.
    pub log: Option<WatchdogLog>,
}

/// The handler's log file and its format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WatchdogLog {
    pub path: PathBuf,
    pub json: bool,
}

impl WatchdogConfig {
    /// `<handler pid> <handler pgid> <events path> <run id> <log path> <text|json>`, an absent
    /// path as an empty argument.
    pub(crate) fn to_args(&self) -> Vec<OsString> {
        let path = |path: Option<&PathBuf>| path.map_or_else(OsString::new, |path| path.into());
        vec![
            WATCHDOG_ARG.into(),
            self.handler_pid.to_string().into(),
            self.handler_pgid.to_string().into(),
            path(self.events_path.as_ref()),
            self.run_id.clone().into(),
            path(self.log.as_ref().map(|log| &log.path)),
            if self.log.as_ref().is_some_and(|log| log.json) {
                "json".into()
            } else {
                "text".into()
            },
        ]
    }

    fn from_args(mut args: impl Iterator<Item = OsString>) -> Option<Self> {
        let mut number = || args.next()?.to_str()?.parse::<u32>().ok();
        let handler_pid = number()?;
        let handler_pgid = number()?;
        let mut path = || args.next().filter(|arg| !arg.is_empty()).map(PathBuf::from);
        let events_path = path();
        let run_id = args.next()?.into_string().ok()?;
        let log_path = args.next().filter(|arg| !arg.is_empty()).map(PathBuf::from);
        let json = args.next().is_some_and(|format| format == "json");
        Some(Self {
            handler_pid,
            handler_pgid,
            events_path,
            run_id,
            log: log_path.map(|path| WatchdogLog { path, json }),
        })
    }
}

/// If this process was started as a watchdog (`<exe> __ai-session-handler-watchdog <handler
/// pid> <handler pgid> [<events path>]`), runs it and returns its exit code.
pub(crate) fn main_if_watchdog() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != WATCHDOG_ARG {
        return None;
    }
    let Some(config) = WatchdogConfig::from_args(args) else {
        return Some(2);
    };
    if adopt_descriptors().is_err() {
        return Some(1);
    }
    Some(life(&config))
}

/// Leaves the watchdog holding the socket as stdin, `/dev/null` as stdout and stderr unless
/// that is no terminal (on one, its line would land after the shell's prompt), and nothing
/// else.
fn adopt_descriptors() -> io::Result<()> {
    let null = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    nix::unistd::dup2_stdout(&null)?;
    if io::stderr().is_terminal() {
        nix::unistd::dup2_stderr(&null)?;
    }
    drop(null);
    for fd in proc::own_descriptors().into_iter().filter(|fd| *fd > 2) {
        // One that is not open (the listing's own) fails with EBADF.
        let _ = nix::unistd::close(fd);
    }
    Ok(())
}

fn life(config: &WatchdogConfig) -> i32 {
    for stopping in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGPIPE,
        Signal::SIGTSTP,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
    ] {
        // SAFETY: installing SIG_IGN runs no handler code.
        unsafe {
            let _ = signal(stopping, SigHandler::SigIgn);
        }
    }
    let _ = nix::sys::prctl::set_name(c"ash-watchdog");
    let own_pid = getpid().as_raw() as u32;
    let mut registry = Registry::new(getpgrp().as_raw() as u32, config.handler_pgid);
    // The socket (adopt_descriptors), open for the whole process life.
    let stdin = io::stdin();
    let socket = stdin.as_fd();
    let mut packet = [0u8; 512];
    let mut looked = Instant::now();
    let handler = Handler::open(config.handler_pid);
    let mut stops = HandlerStops::default();
    loop {
        let interval = if registry.is_watching() {
            WATCH_INTERVAL
        } else {
            IDLE_INTERVAL
        };
        let wait = interval.saturating_sub(looked.elapsed());
        let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) | Err(Errno::EINTR) => {}
            Ok(_) => match recv(socket.as_raw_fd(), &mut packet, MsgFlags::empty()) {
                // End of file: the handler is gone.
                Ok(0) => break,
                Ok(length) => {
                    if let Some(message) = WatchdogMessage::parse(&packet[..length]) {
                        let leader_started = match message {
                            WatchdogMessage::Watch { pgid, .. } => proc::start_time(pgid),
                            _ => None,
                        };
                        registry.apply(message, leader_started);
                    }
                }
                Err(Errno::EINTR | Errno::EAGAIN) => {}
                Err(_) => break,
            },
            Err(_) => break,
        }
        if looked.elapsed() >= interval {
            look_around(&mut registry, config.handler_pid, own_pid);
            looked = Instant::now();
        }
        if let Some(handler) = &handler {
            let stopped = proc::stat_of(config.handler_pid).is_some_and(|stat| stat.state == 'T');
            if stops.look(stopped, registry.suspended(), Instant::now()) {
                handler.continue_it(config);
            }
        }
    }
    registry.forget_gone(process_group::group_exists);
    if !registry.has_work() {
        return 0;
    }
    let report = stop_everything(&mut registry, own_pid);
    if !report.is_empty() {
        tell(config, &registry, &report);
    }
    0
}

/// The handler, through a pidfd opened while it was our parent: a signal never reaches a
/// process that reused its pid.
struct Handler(OwnedFd);

impl Handler {
    /// `None` when the handler is gone already or pidfds are unavailable (Linux < 5.3): then
    /// a stopped handler stays stopped.
    fn open(handler_pid: u32) -> Option<Self> {
        let pidfd = process_group::pidfd_open(handler_pid)?;
        (getppid().as_raw() as u32 == handler_pid).then_some(Self(pidfd))
    }

    /// Sends SIGCONT to a handler something stopped, and records that in its event stream.
    fn continue_it(&self, config: &WatchdogConfig) {
        if rustix::process::pidfd_send_signal(&self.0, rustix::process::Signal::CONT).is_err() {
            return;
        }
        let record = serde_json::json!({
            "at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "run_id": run_id_of(config),
            "attempt_id": null,
            "event": "handler-continued",
            "handler_pid": config.handler_pid,
            "limit_seconds": STOP_LIMIT.as_secs_f64(),
        });
        append_record(config, &record);
    }
}

/// The periodic look: forget gone groups; while watching, note the handler's children that
/// could be escapees and drop noted ones that are gone.
fn look_around(registry: &mut Registry, handler_pid: u32, own_pid: u32) {
    registry.forget_gone(process_group::group_exists);
    if !registry.is_watching() {
        return;
    }
    for child in proc::children_of(handler_pid) {
        if let Some(stat) = proc::stat_of(child) {
            registry.note_handler_child(&stat, own_pid);
        }
    }
    registry.prune_adoptees(proc::stat_of);
}

/// The handler is gone with groups not released: stop them and every escapee.
fn stop_everything(registry: &mut Registry, own_pid: u32) -> StopReport {
    registry.prune_adoptees(proc::stat_of);
    let mut groups = registry.unreleased();
    let signalled = groups.clone();
    let tokens: Vec<String> = registry
        .tokens()
        .into_iter()
        .map(|token| format!("{ATTEMPT_ENV}={token}"))
        .collect();
    // Escapees by (pid → start time), noted before anything is signalled.
    let mut escapees: BTreeMap<u32, u64> = registry.adoptees().into_iter().collect();
    note_token_carriers(&tokens, own_pid, &groups, &mut escapees);
    look_at_groups(&signalled, &mut escapees);
    // The group killer's escalation, for all the groups at once; every look notes escapees.
    process_group::escalate(
        &mut groups,
        Escalation::terminate(),
        &|| false,
        |_| look_at_groups(&signalled, &mut escapees),
        &mut std::thread::sleep,
    );
    let killed = sweep_escapees(escapees, &tokens, own_pid);
    let mut survivors = descendant_sweep::still_alive(&killed, SURVIVOR_WAIT);
    for pgid in &signalled {
        survivors.extend(process_group::live_members(*pgid));
    }
    survivors.sort_unstable();
    survivors.dedup();
    let escaped = killed
        .iter()
        .map(|process| process.pid)
        .filter(|pid| !survivors.contains(pid))
        .collect();
    StopReport {
        groups: signalled,
        escaped,
        survivors,
    }
}

/// One look at the process table: notes every child of a live group member that is in no
/// watched group (it left the group while its parent still lives), and says whether any
/// group member lives.
fn look_at_groups(groups: &[u32], escapees: &mut BTreeMap<u32, u64>) -> bool {
    let Ok(table) = proc::process_table() else {
        return false;
    };
    let members: std::collections::HashSet<u32> = table
        .iter()
        .filter(|process| groups.contains(&process.pgrp) && !process.is_defunct())
        .map(|process| process.pid)
        .collect();
    for process in &table {
        if members.contains(&process.ppid)
            && !groups.contains(&process.pgrp)
            && !process.is_defunct()
        {
            escapees
                .entry(process.pid)
                .or_insert(process.start_time_ticks);
        }
    }
    !members.is_empty()
}

/// Notes every live process carrying one of `tokens` that is not in a watched group (those
/// are stopped with their group) and is not the watchdog.
fn note_token_carriers(
    tokens: &[String],
    own_pid: u32,
    groups: &[u32],
    escapees: &mut BTreeMap<u32, u64>,
) {
    if tokens.is_empty() {
        return;
    }
    for process in proc::processes_with_env(tokens, 0).unwrap_or_default() {
        if process.pid != own_pid && !groups.contains(&process.pgrp) {
            escapees
                .entry(process.pid)
                .or_insert(process.start_time_ticks);
        }
    }
}

/// Freezes and kills the noted escapees with their lineages, pass after pass, looking for
/// the tokens again each time, until two passes in a row find nothing or [`SWEEP_LIMIT`].
fn sweep_escapees(
    mut escapees: BTreeMap<u32, u64>,
    tokens: &[String],
    own_pid: u32,
) -> Vec<Killed> {
    let deadline = Instant::now() + SWEEP_LIMIT;
    let mut rounds = SweepRounds::default();
    let mut killed: Vec<Killed> = Vec::new();
    loop {
        let roots: Vec<Killed> = std::mem::take(&mut escapees)
            .into_iter()
            .map(|(pid, start_time_ticks)| Killed {
                pid,
                start_time_ticks,
            })
            .filter(|root| !killed.contains(root))
            .collect();
        let new: Vec<Killed> = descendant_sweep::freeze_and_kill(&roots, own_pid)
            .into_iter()
            .filter(|process| !killed.contains(process))
            .collect();
        let found = new.len();
        killed.extend(new);
        if rounds.after_pass(found, 0) == SweepNext::Done || Instant::now() >= deadline {
            return killed;
        }
        // A SIGKILL takes effect asynchronously: a killed process still shows its
        // environment for a moment.
        std::thread::sleep(PASS_INTERVAL);
        note_token_carriers(tokens, own_pid, &[], &mut escapees);
        escapees.retain(|pid, started| {
            !killed.contains(&Killed {
                pid: *pid,
                start_time_ticks: *started,
            })
        });
    }
}

/// Says what the watchdog did: one line on stderr, one record in the run's event stream and
/// one in the handler's log file, if it has one.
fn tell(config: &WatchdogConfig, registry: &Registry, report: &StopReport) {
    let mut line = report.message(config.handler_pid);
    line.push('\n');
    write_without_blocking(2, line.as_bytes());
    let attempt_id = registry.watched_token();
    let now = chrono::Utc::now();
    if let Some(log) = &config.log {
        let at = now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let ids = LogIds {
            at: &at,
            run_id: &config.run_id,
            attempt_id,
            handler_pid: config.handler_pid,
        };
        append_to(&log.path, report.log_record(&ids, log.json));
    }
    let record = serde_json::json!({
        "at": now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "run_id": run_id_of(config),
        "attempt_id": attempt_id,
        "event": "watchdog-stopped",
        "handler_pid": config.handler_pid,
        "groups": report.groups,
        "escaped": report.escaped,
        "survivors": report.survivors,
    });
    append_record(config, &record);
}

/// The invocation's id for a record (`null` when the handler did not say it).
fn run_id_of(config: &WatchdogConfig) -> Option<&str> {
    Some(config.run_id.as_str()).filter(|id| !id.is_empty())
}

/// Appends `record` to the run's `events.jsonl` as one line.
fn append_record(config: &WatchdogConfig, record: &serde_json::Value) {
    if let Some(path) = &config.events_path {
        let mut text = record.to_string();
        text.push('\n');
        append_to(path, text);
    }
}

/// Appends `text` to the regular file at `path` in one write, never through a symbolic link,
/// never onto a torn last line.
fn append_to(path: &std::path::Path, mut text: String) {
    let opened = no_follow::split(path)
        .and_then(|(dir, name)| no_follow::open_append_in(&no_follow::open_dir(dir)?, name));
    if let Ok(mut file) = opened
        && file.metadata().is_ok_and(|meta| meta.is_file())
    {
        if !super::event_log::ends_a_line(&file) {
            text.insert(0, '\n');
        }
        let _ = file.write_all(text.as_bytes());
    }
}

/// One write of `bytes` to descriptor `fd` that never blocks: through a new, non-blocking
/// open file description of the same pipe or file (`/proc/self/fd/N`), or a non-blocking
/// `send` on a socket. What does not fit is dropped: a full pipe nobody reads must not keep
/// the watchdog alive.
fn write_without_blocking(fd: RawFd, bytes: &[u8]) {
    let reopened = OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{fd}"));
    match reopened {
        Ok(mut file) => {
            let _ = file.write(bytes);
        }
        // A socket cannot be reopened (and a non-socket fails with ENOTSOCK).
        Err(_) => {
            let _ =
                nix::sys::socket::send(fd, bytes, MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_re_executed_watchdog_reads_back_its_arguments() {
        let config = WatchdogConfig {
            handler_pid: 42,
            handler_pgid: 40,
            events_path: Some(PathBuf::from("/state/events.jsonl")),
            run_id: "run-1".to_owned(),
            log: Some(WatchdogLog {
                path: PathBuf::from("/logs/handler.log"),
                json: true,
            }),
        };
        let args = config.to_args();
        assert_eq!(args[0], WATCHDOG_ARG);
        let back = WatchdogConfig::from_args(args.into_iter().skip(1)).expect("parses");
        assert_eq!((back.handler_pid, back.handler_pgid), (42, 40));
        assert_eq!(back.events_path, config.events_path);
        assert_eq!(back.run_id, "run-1");
        assert_eq!(back.log, config.log);
        let bare = WatchdogConfig {
            handler_pid: 42,
            handler_pgid: 40,
            ..WatchdogConfig::default()
        };
        let back = WatchdogConfig::from_args(bare.to_args().into_iter().skip(1)).expect("parses");
        assert_eq!((back.events_path, back.log), (None, None));
        assert!(WatchdogConfig::from_args(["x".into()].into_iter()).is_none());
    }

    #[test]
    fn a_write_to_a_full_pipe_returns_at_once() {
        let (read, write) = nix::unistd::pipe().expect("pipe");
        // Fill the pipe (non-blocking), then write once more through the helper.
        nix::fcntl::fcntl(
            &write,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .expect("non-blocking");
        let chunk = [b'x'; 4096];
        while nix::unistd::write(&write, &chunk).is_ok() {}
        nix::fcntl::fcntl(
            &write,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
        )
        .expect("blocking again");
        // The descriptor itself is blocking now: only a new non-blocking description keeps
        // this from hanging.
        write_without_blocking(write.as_raw_fd(), b"one more line\n");
        drop(read);
    }
}
