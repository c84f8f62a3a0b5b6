//! The rules of the per-run watchdog (docs/architecture.md, "The watchdog"): the messages the
//! handler and its process groups send it, which processes it stops once the handler is gone
//! without having released them — every unreleased group and its escapees, found three ways
//! because none alone sees them all, and every process carrying a token it was ever told —
//! and what the handler does when it loses its watchdog.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::{Duration, Instant};

use super::attempt_id::is_safe_file_stem;
use super::identity::ProcStat;

/// The environment variable every worker gets: its attempt id. Descendants inherit it, so a
/// process that left the worker's group is still found by it (docs/worker-protocol.md).
pub(crate) const ATTEMPT_ENV: &str = "AI_SESSION_HANDLER_ATTEMPT_ID";

/// One message on the watchdog socket (one packet each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WatchdogMessage<'a> {
    /// A process group — a worker's or a helper's — is the handler's to stop; `attempt` is
    /// the token its processes carry in [`ATTEMPT_ENV`].
    Watch { pgid: u32, attempt: &'a str },
    /// The handler stopped that group itself.
    Release(u32),
    /// A person suspended the run (Ctrl-Z): the handler's stop that follows is theirs.
    Suspend,
    /// The run goes on after a suspension.
    Resume,
    /// The handler is about to close the socket at the end of its run: the end of file that
    /// follows is not its death.
    Finish,
}

/// The longest message: `watch `, a 10-digit pid, a space and an attempt id of up to 200
/// bytes (a timestamp, the phase id and a UUID).
pub(crate) const MAX_MESSAGE: usize = 224;

impl<'a> WatchdogMessage<'a> {
    /// Writes the message into `buffer` without allocating — a child sends it between
    /// `fork` and `exec`, where only async-signal-safe work is allowed — and returns its
    /// length. An attempt id that does not fit, or is not a safe file stem, is left out: the
    /// group is still watched, only the token search is lost.
    pub(crate) fn encode(self, buffer: &mut [u8; MAX_MESSAGE]) -> usize {
        // Formatting into a slice allocates nothing, and the longest word and pid fit.
        let mut rest = &mut buffer[..];
        let _ = match self {
            Self::Watch { pgid, .. } => write!(rest, "watch {pgid}"),
            Self::Release(pgid) => write!(rest, "release {pgid}"),
            Self::Suspend => write!(rest, "suspend"),
            Self::Resume => write!(rest, "resume"),
            Self::Finish => write!(rest, "finish"),
        };
        if let Self::Watch { attempt, .. } = self
            && rest.len() > attempt.len()
            && is_safe_file_stem(attempt)
        {
            let _ = write!(rest, " {attempt}");
        }
        MAX_MESSAGE - rest.len()
    }

    /// Reads one packet; anything else is ignored by the watchdog.
    pub(crate) fn parse(packet: &'a [u8]) -> Option<Self> {
        let text = std::str::from_utf8(packet).ok()?;
        match text {
            "suspend" => return Some(Self::Suspend),
            "resume" => return Some(Self::Resume),
            "finish" => return Some(Self::Finish),
            _ => {}
        }
        let mut words = text.split(' ');
        let word = words.next()?;
        let pgid = words.next()?.parse().ok()?;
        let attempt = words.next().unwrap_or("");
        if words.next().is_some() || (!attempt.is_empty() && !is_safe_file_stem(attempt)) {
            return None;
        }
        match word {
            "watch" => Some(Self::Watch { pgid, attempt }),
            "release" if attempt.is_empty() => Some(Self::Release(pgid)),
            _ => None,
        }
    }
}

/// One registered group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Watched {
    pub attempt: Option<String>,
    /// Read when the registration arrived; `None` if the leader was gone.
    pub leader_started_ticks: Option<u64>,
    /// The group no longer exists: it is never signalled again (its pgid could be reused),
    /// but its escapees may still live, so it stays until released.
    pub gone: bool,
}

/// The process groups the watchdog would stop now, and the escapees it noted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Registry {
    watched: BTreeMap<u32, Watched>,
    /// Groups the watchdog must never signal: its own and the handler's.
    never: [u32; 2],
    /// The handler's children that could be a worker's escapee: pid → start time.
    adoptees: BTreeMap<u32, u64>,
    /// A person suspended the run and it was not resumed yet.
    suspended: bool,
    /// The handler said it ends its run: an end of file is not its death.
    finishing: bool,
    /// Every token a registration carried, kept after its group is released: a hook's escaped
    /// descendants are swept only once the run has ended, so until the handler exits a process
    /// carrying a released group's token may still be the run's.
    told: BTreeSet<String>,
}

/// The most adoptees the registry keeps (a fork bomb must not grow the watchdog without end).
pub(crate) const ADOPTEE_LIMIT: usize = 10_000;
/// The most tokens the registry keeps (one per attempt, hook and check of a run).
pub(crate) const TOKEN_LIMIT: usize = 10_000;

impl Registry {
    pub(crate) fn new(own_pgid: u32, handler_pgid: u32) -> Self {
        Self {
            watched: BTreeMap::new(),
            never: [own_pgid, handler_pgid],
            adoptees: BTreeMap::new(),
            suspended: false,
            finishing: false,
            told: BTreeSet::new(),
        }
    }

    /// Applies a message; `leader_started_ticks` is what `/proc` shows for the group's leader
    /// now (read by the caller only for a `watch`).
    pub(crate) fn apply(
        &mut self,
        message: WatchdogMessage<'_>,
        leader_started_ticks: Option<u64>,
    ) {
        match message {
            // pgid 0 and 1 (and our own groups) are never a worker's: refuse to record them.
            WatchdogMessage::Watch { pgid, attempt } if pgid > 1 && !self.never.contains(&pgid) => {
                let entry = self.watched.entry(pgid).or_insert(Watched {
                    attempt: None,
                    leader_started_ticks,
                    gone: false,
                });
                if !attempt.is_empty() {
                    entry.attempt = Some(attempt.to_owned());
                    if self.told.len() < TOKEN_LIMIT {
                        self.told.insert(attempt.to_owned());
                    }
                }
                entry.leader_started_ticks = entry.leader_started_ticks.or(leader_started_ticks);
            }
            WatchdogMessage::Watch { .. } => {}
            WatchdogMessage::Release(pgid) => {
                self.watched.remove(&pgid);
                if !self.is_watching() {
                    // Everything the handler started is stopped and swept by the handler.
                    self.adoptees.clear();
                }
            }
            WatchdogMessage::Suspend => self.suspended = true,
            WatchdogMessage::Resume => self.suspended = false,
            WatchdogMessage::Finish => self.finishing = true,
        }
    }

    /// A person suspended the run: the handler's stop is theirs to end.
    pub(crate) fn suspended(&self) -> bool {
        self.suspended
    }

    /// Marks the groups that no longer exist: a pgid that is gone could later be reused by an
    /// unrelated group, which must never be signalled.
    pub(crate) fn forget_gone(&mut self, exists: impl Fn(u32) -> bool) {
        for (pgid, watched) in &mut self.watched {
            watched.gone = watched.gone || !exists(*pgid);
        }
    }

    pub(crate) fn is_watching(&self) -> bool {
        !self.watched.is_empty()
    }

    /// The groups to signal once the handler is gone.
    pub(crate) fn unreleased(&self) -> Vec<u32> {
        self.watched
            .iter()
            .filter(|(_, watched)| !watched.gone)
            .map(|(pgid, _)| *pgid)
            .collect()
    }

    /// The token of an unreleased group, if any carries one (what a report names).
    pub(crate) fn watched_token(&self) -> Option<&str> {
        self.watched
            .values()
            .find_map(|watched| watched.attempt.as_deref())
    }

    /// Every token a registration carried, released or not.
    pub(crate) fn tokens(&self) -> Vec<String> {
        self.told.iter().cloned().collect()
    }

    /// Whether anything is left to stop once the socket closed: an unreleased group, or — when
    /// the handler died rather than said it finishes — any process carrying a token (a
    /// finished handler swept its own).
    pub(crate) fn has_work(&self) -> bool {
        self.is_watching() || (!self.finishing && !self.told.is_empty())
    }

    /// Notes one of the handler's children if it could be an escapee of a watched worker.
    pub(crate) fn note_handler_child(&mut self, child: &ProcStat, own_pid: u32) {
        if self.adoptees.len() >= ADOPTEE_LIMIT || self.adoptees.contains_key(&child.pid) {
            return;
        }
        if could_be_escapee(child, own_pid, &self.watched) {
            self.adoptees.insert(child.pid, child.start_time_ticks);
        }
    }

    /// Drops noted adoptees that are gone.
    pub(crate) fn prune_adoptees(&mut self, now: impl Fn(u32) -> Option<ProcStat>) {
        self.adoptees.retain(|pid, started| {
            now(*pid).is_some_and(|stat| stat.start_time_ticks == *started && !stat.is_defunct())
        });
    }

    /// (pid, start time).
    pub(crate) fn adoptees(&self) -> Vec<(u32, u64)> {
        self.adoptees.clone().into_iter().collect()
    }
}

/// Whether a child of the handler could descend from a watched worker: alive, not the
/// watchdog itself, not a group's leader (the handler reaps those), and started no earlier
/// than the earliest watched leader — a child that started in an earlier clock tick was the
/// handler's before any worker (inherited across `exec`, or a watchdog).
pub(crate) fn could_be_escapee(
    child: &ProcStat,
    own_pid: u32,
    watched: &BTreeMap<u32, Watched>,
) -> bool {
    if child.is_defunct() || child.pid == own_pid || watched.contains_key(&child.pid) {
        return false;
    }
    let earliest = watched
        .values()
        .filter_map(|watched| watched.leader_started_ticks)
        .min();
    earliest.is_some_and(|started| child.start_time_ticks >= started)
}

/// How long the handler may stay stopped by anything but a person's Ctrl-Z (a `kill -STOP`
/// by its agent, a hook or a check; a stop for terminal I/O) before the watchdog continues
/// it: a stopped handler enforces no deadline and holds its lock.
pub(crate) const STOP_LIMIT: Duration = Duration::from_secs(1);

/// The watchdog's view of the handler's stops, one look at a time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct HandlerStops {
    /// When a look first found the handler stopped without a suspension.
    since: Option<Instant>,
}

impl HandlerStops {
    /// One look at the handler at `now`: `stopped` (`T` in `/proc`), `suspended` (a person
    /// suspended the run). True when the watchdog must continue it now.
    pub(crate) fn look(&mut self, stopped: bool, suspended: bool, now: Instant) -> bool {
        if !stopped || suspended {
            self.since = None;
            return false;
        }
        let since = *self.since.get_or_insert(now);
        let overdue = now.saturating_duration_since(since) >= STOP_LIMIT;
        if overdue {
            self.since = None;
        }
        overdue
    }
}

/// How the handler's watchdog process was lost (a signal number each but for the exit code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LossCause {
    /// Only end of file makes it exit, so something broke it.
    Exited(i32),
    Killed(i32),
    /// It can protect nothing while stopped, so the handler killed it.
    Stopped(i32),
}

/// What the handler did about a lost watchdog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Replacement {
    /// A new watchdog (its pid) knows every group the handler still watches.
    Started(u32),
    /// No new watchdog could be started.
    Failed(String),
    /// The run lost its watchdog too often ([`LossBudget`]).
    GaveUp { losses: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WatchdogLoss {
    /// The lost watchdog's pid.
    pub pid: u32,
    pub cause: LossCause,
    pub replacement: Replacement,
    pub signal_name: Option<&'static str>,
}

/// What the running attempt does about a loss.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LossReaction {
    Continue,
    /// Nothing would stop the worker if the handler died now: stop the attempt, with this
    /// reason (its `execution-io-failed` summary).
    StopAttempt(String),
}

impl WatchdogLoss {
    pub(crate) fn reaction(&self) -> LossReaction {
        match &self.replacement {
            Replacement::Started(_) => LossReaction::Continue,
            Replacement::Failed(_) | Replacement::GaveUp { .. } => {
                LossReaction::StopAttempt(format!(
                    "no watchdog protects the worker any more: {}",
                    self.describe()
                ))
            }
        }
    }

    /// `the watchdog (pid 12) was killed by SIGKILL; a new watchdog (pid 40) took over`.
    pub(crate) fn describe(&self) -> String {
        let signal = |number: i32| {
            self.signal_name
                .map_or_else(|| format!("signal {number}"), str::to_owned)
        };
        let how = match self.cause {
            LossCause::Exited(code) => format!("exited with code {code}"),
            LossCause::Killed(number) => format!("was killed by {}", signal(number)),
            LossCause::Stopped(number) => {
                format!("was stopped by {} (the handler killed it)", signal(number))
            }
        };
        let then = match &self.replacement {
            Replacement::Started(pid) => format!("a new watchdog (pid {pid}) took over"),
            Replacement::Failed(error) => format!("no new watchdog could be started: {error}"),
            Replacement::GaveUp { losses } => {
                format!("it was lost {losses} times in this run, so no new one was started")
            }
        };
        format!("the watchdog (pid {}) {how}; {then}", self.pid)
    }

    pub(crate) fn trailer_line(&self) -> String {
        format!("watchdog_lost: {}", self.describe())
    }
}

/// How many times a run replaces a lost watchdog. An agent that keeps killing it is hostile
/// (each replacement re-executes the handler's binary): past this, the attempt is stopped.
pub(crate) const REPLACEMENT_LIMIT: u32 = 3;

/// Counts a run's watchdog losses and says whether to replace the next one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LossBudget {
    losses: u32,
}

impl LossBudget {
    /// Records a loss; `true` when a new watchdog should be started.
    pub(crate) fn replace_after_loss(&mut self) -> bool {
        self.losses = self.losses.saturating_add(1);
        self.losses <= REPLACEMENT_LIMIT
    }

    pub(crate) fn losses(&self) -> u32 {
        self.losses
    }
}

/// What the watchdog did once the handler was gone, for its report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StopReport {
    /// The unreleased groups it signalled.
    pub groups: Vec<u32>,
    /// Escaped descendants it killed.
    pub escaped: Vec<u32>,
    /// Processes still alive after everything (not zombies).
    pub survivors: Vec<u32>,
}

impl StopReport {
    pub(crate) fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.escaped.is_empty() && self.survivors.is_empty()
    }

    /// The one line the watchdog writes.
    pub(crate) fn message(&self, handler_pid: u32) -> String {
        format!(
            "[ai-session-handler watchdog] the handler (pid {handler_pid}) ended without stopping its workers; {}",
            self.what_it_did()
        )
    }

    /// `stopped process group 4242, killed 2 escaped descendant(s): 51, 52; still alive after
    /// SIGKILL: 53` (each part only when it applies).
    pub(crate) fn what_it_did(&self) -> String {
        let list = crate::units::pids;
        let mut text = String::new();
        if !self.groups.is_empty() {
            text.push_str(&format!("stopped process group {}", list(&self.groups)));
        }
        if !self.escaped.is_empty() {
            if !self.groups.is_empty() {
                text.push_str(", ");
            }
            text.push_str(&format!(
                "killed {} escaped descendant(s): {}",
                self.escaped.len(),
                list(&self.escaped)
            ));
        }
        if !self.survivors.is_empty() {
            text.push_str(&format!(
                "; still alive after SIGKILL: {}",
                list(&self.survivors)
            ));
        }
        text
    }

    /// The watchdog's record for the handler's log file, shaped as the handler's own records
    /// (`--log-format text` or `json`, docs/cli.md): a `WARN` of target
    /// [`WATCHDOG_LOG_TARGET`] in the spans of the invocation (`run_id`) and of the attempt
    /// it stopped (`attempt_id`), so a reader of the log finds it with the rest of the run.
    pub(crate) fn log_record(&self, ids: &LogIds<'_>, json: bool) -> String {
        let message = self.message(ids.handler_pid);
        if json {
            let mut spans = vec![serde_json::json!({"name": "run", "run_id": ids.run_id})];
            if let Some(attempt_id) = ids.attempt_id {
                spans.push(serde_json::json!({"name": "attempt", "attempt_id": attempt_id}));
            }
            let record = serde_json::json!({
                "timestamp": ids.at,
                "level": "WARN",
                "fields": {
                    "message": message,
                    "handler_pid": ids.handler_pid,
                    "groups": self.groups,
                    "escaped": self.escaped,
                    "survivors": self.survivors,
                },
                "target": WATCHDOG_LOG_TARGET,
                "span": spans.last(),
                "spans": spans,
            });
            return format!("{record}\n");
        }
        let attempt = ids
            .attempt_id
            .map(|id| format!(":attempt{{attempt_id={id:?}}}"))
            .unwrap_or_default();
        format!(
            "{}  WARN run{{run_id={}}}{attempt}: {WATCHDOG_LOG_TARGET}: {message} handler_pid={} groups={:?} escaped={:?} survivors={:?}\n",
            ids.at, ids.run_id, ids.handler_pid, self.groups, self.escaped, self.survivors
        )
    }
}

/// The target of the watchdog's log record.
pub(crate) const WATCHDOG_LOG_TARGET: &str = "ai_session_handler::watchdog";

/// Who the watchdog's log record is about, and when it was written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LogIds<'a> {
    /// RFC 3339, microseconds, `Z`: as the handler's own records.
    pub at: &'a str,
    pub run_id: &'a str,
    pub attempt_id: Option<&'a str>,
    pub handler_pid: u32,
}

#[cfg(test)]
mod tests;
