//! The rules of the per-run watchdog (docs/architecture.md, "The watchdog"): the messages the
//! handler and its process groups send it, which processes it stops when the handler is gone
//! without having released them, and what the handler does when it loses its watchdog.
//!
//! The watchdog is a second process holding one end of a socket whose other end only the
//! handler holds; when the handler dies — even by SIGKILL — the socket reaches end of file.
//! Every group the handler starts (a worker, a hook, a Verify check) registers itself between
//! `fork` and `exec` (`watch <pgid> <token>`, sent by the child on a duplicate of the
//! handler's end, which the child holds until its `exec`: so the registration always arrives
//! before the end of file, and no group ever runs unknown to the watchdog). The handler sends
//! the same `watch` once the spawn returned (a replacement watchdog is told it again), and
//! releases the group (`release <pgid>`) once it has stopped it and swept its escaped
//! descendants.
//!
//! What the watchdog stops once the handler is gone: every registered group not released
//! (SIGTERM, a grace, SIGKILL rounds), and every *escapee* of one — a descendant that left
//! the group. Three ways lead to escapees, because none alone sees them all: the children of
//! group members that are in another group (read before the group is signalled, while their
//! parents still live), the handler's own children that could be a worker's (the handler is a
//! child subreaper, so an orphaned escapee is re-parented to it; the watchdog notes them while
//! the handler lives, since they go to init once it is dead), and every process whose
//! environment carries the group's token ([`ATTEMPT_ENV`], set in every worker and helper).

use std::collections::{BTreeMap, BTreeSet};

use super::attempt_id::is_safe_file_stem;
use super::identity::ProcStat;

/// The environment variable every worker gets: its attempt id. Descendants inherit it, so a
/// process that left the worker's group is still found by it (docs/worker-protocol.md).
pub(crate) const ATTEMPT_ENV: &str = "AI_SESSION_HANDLER_ATTEMPT_ID";

/// One message on the watchdog socket (one packet each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WatchdogMessage<'a> {
    /// A process group (its leader's pid) — a worker's or a helper's — exists and is the
    /// handler's to stop; `attempt` is the token its processes carry in [`ATTEMPT_ENV`].
    Watch { pgid: u32, attempt: &'a str },
    /// The handler stopped that group itself.
    Release(u32),
}

/// The longest message: `watch `, a 10-digit pid, a space and an attempt id of up to 200
/// bytes (a timestamp, the phase id and a UUID).
pub(crate) const MAX_MESSAGE: usize = 224;

impl WatchdogMessage<'_> {
    /// Writes the message into `buffer` without allocating — a child sends it between
    /// `fork` and `exec`, where only async-signal-safe work is allowed — and returns its
    /// length. An attempt id that does not fit, or is not a safe file stem, is left out: the
    /// group is still watched, only the token search is lost.
    pub(crate) fn encode(self, buffer: &mut [u8; MAX_MESSAGE]) -> usize {
        let (word, number, attempt): (&[u8], u32, &str) = match self {
            Self::Watch { pgid, attempt } => (b"watch", pgid, attempt),
            Self::Release(pgid) => (b"release", pgid, ""),
        };
        buffer[..word.len()].copy_from_slice(word);
        let mut length = word.len();
        buffer[length] = b' ';
        length += 1;
        let mut digits = [0u8; 10];
        let mut count = 0;
        let mut rest = number;
        loop {
            digits[count] = b'0' + (rest % 10) as u8;
            count += 1;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        for digit in digits[..count].iter().rev() {
            buffer[length] = *digit;
            length += 1;
        }
        let attempt = attempt.as_bytes();
        if !attempt.is_empty()
            && length + 1 + attempt.len() <= MAX_MESSAGE
            && attempt.iter().all(|byte| is_token_byte(*byte))
        {
            buffer[length] = b' ';
            buffer[length + 1..length + 1 + attempt.len()].copy_from_slice(attempt);
            length += 1 + attempt.len();
        }
        length
    }
}

impl<'a> WatchdogMessage<'a> {
    /// Reads one packet; anything else is ignored by the watchdog.
    pub(crate) fn parse(packet: &'a [u8]) -> Option<Self> {
        let text = std::str::from_utf8(packet).ok()?;
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

/// The bytes an attempt id may hold ([`is_safe_file_stem`]), checked byte by byte so that
/// encoding needs no allocation.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.')
}

/// One registered group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Watched {
    /// The attempt token of its processes; `None` when the registration carried none.
    pub attempt: Option<String>,
    /// The leader's start time, read when the registration arrived; `None` if it was gone.
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
}

/// The most adoptees the registry keeps (a fork bomb must not grow the watchdog without end).
pub(crate) const ADOPTEE_LIMIT: usize = 10_000;

impl Registry {
    pub(crate) fn new(own_pgid: u32, handler_pgid: u32) -> Self {
        Self {
            watched: BTreeMap::new(),
            never: [own_pgid, handler_pgid],
            adoptees: BTreeMap::new(),
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
        }
    }

    /// Marks the groups that no longer exist: a pgid that is gone could later be reused by an
    /// unrelated group, which must never be signalled.
    pub(crate) fn forget_gone(&mut self, exists: impl Fn(u32) -> bool) {
        for (pgid, watched) in &mut self.watched {
            if !watched.gone && !exists(*pgid) {
                watched.gone = true;
            }
        }
    }

    /// Whether any group is registered and not released.
    pub(crate) fn is_watching(&self) -> bool {
        !self.watched.is_empty()
    }

    /// The groups to signal once the handler is gone: unreleased and still existing.
    pub(crate) fn unreleased(&self) -> Vec<u32> {
        self.watched
            .iter()
            .filter(|(_, watched)| !watched.gone)
            .map(|(pgid, _)| *pgid)
            .collect()
    }

    /// The tokens of every unreleased group, gone or not.
    pub(crate) fn tokens(&self) -> Vec<String> {
        let tokens: BTreeSet<&String> = self
            .watched
            .values()
            .filter_map(|watched| watched.attempt.as_ref())
            .collect();
        tokens.into_iter().cloned().collect()
    }

    /// Notes one of the handler's children, as `/proc` shows it, if it could be an escapee of
    /// a watched worker ([`could_be_escapee`]).
    pub(crate) fn note_handler_child(&mut self, child: &ProcStat, own_pid: u32) {
        if self.adoptees.len() >= ADOPTEE_LIMIT || self.adoptees.contains_key(&child.pid) {
            return;
        }
        if could_be_escapee(child, own_pid, &self.watched) {
            self.adoptees.insert(child.pid, child.start_time_ticks);
        }
    }

    /// Drops noted adoptees that are gone (`now` is what `/proc` shows for a pid).
    pub(crate) fn prune_adoptees(&mut self, now: impl Fn(u32) -> Option<ProcStat>) {
        self.adoptees.retain(|pid, started| {
            now(*pid).is_some_and(|stat| stat.start_time_ticks == *started && !stat.is_defunct())
        });
    }

    /// The noted adoptees: (pid, start time).
    pub(crate) fn adoptees(&self) -> Vec<(u32, u64)> {
        self.adoptees
            .iter()
            .map(|(pid, started)| (*pid, *started))
            .collect()
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

/// How the handler's watchdog process was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LossCause {
    /// It exited on its own (only end of file makes it exit, so something broke it).
    Exited(i32),
    /// A signal killed it (an agent's `kill -9`).
    Killed(i32),
    /// A signal stopped it (SIGSTOP): it can protect nothing while stopped, so the handler
    /// killed it.
    Stopped(i32),
}

/// What the handler did about a lost watchdog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Replacement {
    /// A new watchdog runs (its pid) and knows every group the handler still watches.
    Started(u32),
    /// No new watchdog could be started.
    Failed(String),
    /// The run lost its watchdog too often: no new one is started ([`LossBudget`]).
    GaveUp { losses: u32 },
}

/// One loss of the watchdog, as the handler noticed and handled it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WatchdogLoss {
    /// The lost watchdog's pid.
    pub pid: u32,
    pub cause: LossCause,
    pub replacement: Replacement,
    /// Names of signals, for the words.
    pub signal_name: Option<&'static str>,
}

/// What the running attempt does about a loss.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LossReaction {
    /// A new watchdog protects the rest of the attempt: go on, and say so.
    Continue,
    /// Nothing would stop the worker if the handler died now: stop the attempt, with this
    /// reason (it becomes the attempt's `execution-io-failed` summary).
    StopAttempt(String),
}

impl WatchdogLoss {
    /// What the running attempt does about it.
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

    /// The transcript trailer line.
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
    /// Escaped descendants it killed (gone afterwards).
    pub escaped: Vec<u32>,
    /// Processes still alive after everything (not zombies).
    pub survivors: Vec<u32>,
}

impl StopReport {
    /// Whether there is anything to say.
    pub(crate) fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.escaped.is_empty() && self.survivors.is_empty()
    }

    /// The one line the watchdog writes (on a stderr that is not a terminal).
    pub(crate) fn message(&self, handler_pid: u32) -> String {
        let list = |pids: &[u32]| {
            pids.iter()
                .take(20)
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
                + if pids.len() > 20 { ", …" } else { "" }
        };
        let mut text = format!(
            "[ai-session-handler watchdog] the handler (pid {handler_pid}) ended without stopping its workers;"
        );
        if !self.groups.is_empty() {
            text.push_str(&format!(" stopped process group {}", list(&self.groups)));
        }
        if !self.escaped.is_empty() {
            if !self.groups.is_empty() {
                text.push(',');
            }
            text.push_str(&format!(
                " killed {} escaped descendant(s): {}",
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
}

#[cfg(test)]
mod tests;
