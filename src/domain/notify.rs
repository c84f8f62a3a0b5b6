//! sd_notify datagrams from a worker (docs/worker-protocol.md, "Notifications"): what one
//! datagram says, and the tally of what was accepted and dropped. A datagram is read as a
//! whole: anything malformed is dropped, counted, and is no sign of life (garbage must not keep
//! a stuck agent alive); a well-formed one is accepted and is a sign of life, whatever its keys.

use std::collections::HashMap;
use std::time::Duration;

use super::status_text::sanitize_status;
use super::token_usage::report::{UsageReport, UsageReportError, excerpt, parse_usage_report};

/// The log target of every record of what an agent told the handler on its notification
/// socket (its status, an announced silence, its usage, a dropped notification), so that
/// `--log-level ai_session_handler::agent=info` shows them all and nothing else.
pub(crate) const AGENT_LOG_TARGET: &str = "ai_session_handler::agent";

/// Datagrams longer than this are dropped unread (the receiver's buffer is this large and
/// reads with `MSG_TRUNC`, so it learns the real length). Generous for sd_notify (systemd's own
/// limit is 4 KiB) and for a usage report naming a few dozen models.
pub const MAX_DATAGRAM_BYTES: usize = 16 * 1024;

/// What an accepted datagram asks for. When a key repeats, the last assignment wins.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Notification {
    pub status: Option<StatusChange>,
    /// `WATCHDOG=1`: a sign of life and nothing else (as every accepted datagram is).
    pub watchdog: bool,
    /// `EXTEND_TIMEOUT_USEC=`: how long the agent will be silent on purpose.
    pub extend_timeout: Option<Duration>,
    /// `X_AISH_USAGE=`: a usage report, or why it was ignored.
    pub usage: Option<Result<UsageReport, UsageReportError>>,
    /// Known keys whose value did not parse (an invalid usage report included); the rest of
    /// the datagram still applies.
    pub invalid_values: Vec<InvalidValue>,
    /// Assignments of keys the runner does not honour (`READY`, `MAINPID`, `X_…`).
    pub ignored_assignments: usize,
}

/// A `STATUS=` assignment, made one printable, bounded line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatusChange {
    Set(String),
    /// `STATUS=` with nothing printable: no current status.
    Cleared,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidValue {
    pub key: &'static str,
    /// For the one warning line: `expected microseconds as a non-negative integer`.
    pub problem: String,
}

/// Why a datagram was dropped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// `len` is its real length.
    #[error("a datagram of {len} bytes is longer than {MAX_DATAGRAM_BYTES}")]
    Oversized { len: usize },
    #[error("a datagram is not valid UTF-8")]
    NotUtf8,
    /// Nothing but line ends (or nothing at all).
    #[error("a datagram is empty")]
    Empty,
    #[error("line {line} of a datagram is not a KEY=VALUE assignment")]
    Malformed { line: usize },
}

/// Reads one datagram of `len` bytes, of which `bytes` were received (`len` may be larger
/// when the datagram did not fit the buffer).
pub fn parse_datagram(bytes: &[u8], len: usize) -> Result<Notification, Rejection> {
    if len > MAX_DATAGRAM_BYTES || bytes.len() < len {
        return Err(Rejection::Oversized { len });
    }
    let text = std::str::from_utf8(&bytes[..len]).map_err(|_| Rejection::NotUtf8)?;
    let mut notification = Notification::default();
    let mut assignments = 0;
    for (index, line) in text.split('\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once('=').filter(|(key, _)| is_key(key)) else {
            return Err(Rejection::Malformed { line: index + 1 });
        };
        assignments += 1;
        notification.assign(key, value);
    }
    if assignments == 0 {
        return Err(Rejection::Empty);
    }
    Ok(notification)
}

impl Notification {
    fn assign(&mut self, key: &str, value: &str) {
        match key {
            "STATUS" => self.status = Some(status_change(value)),
            "WATCHDOG" if value == "1" => self.watchdog = true,
            "EXTEND_TIMEOUT_USEC" => match parse_microseconds(value) {
                Some(extension) => self.extend_timeout = Some(extension),
                None => self.invalid(
                    "EXTEND_TIMEOUT_USEC",
                    format!(
                        "expected microseconds as a non-negative integer, got '{}'",
                        excerpt(value)
                    ),
                ),
            },
            "X_AISH_USAGE" => {
                let report = parse_usage_report(value);
                if let Err(error) = &report {
                    self.invalid("X_AISH_USAGE", error.to_string());
                }
                self.usage = Some(report);
            }
            _ => self.ignored_assignments += 1,
        }
    }

    fn invalid(&mut self, key: &'static str, problem: String) {
        self.invalid_values.push(InvalidValue { key, problem });
    }
}

/// `[A-Z_][A-Z0-9_]*`: what sd_notify keys look like.
fn is_key(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes
        .next()
        .is_some_and(|first| first.is_ascii_uppercase() || first == b'_')
        && bytes.all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit() || byte == b'_')
}

/// Decimal microseconds, as systemd parses them (no sign, no unit). Values beyond what a
/// `Duration` holds saturate: the idle rule caps extensions anyway.
fn parse_microseconds(value: &str) -> Option<Duration> {
    if value.is_empty() || !value.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let micros = value.parse::<u64>().unwrap_or(u64::MAX);
    Some(Duration::from_micros(micros))
}

fn status_change(value: &str) -> StatusChange {
    let text = sanitize_status(value);
    if text.is_empty() {
        StatusChange::Cleared
    } else {
        StatusChange::Set(text)
    }
}

/// Bounds the receiver's work under a flood (a legitimate agent sends a few datagrams a
/// second): beyond the parse rate datagrams are read and dropped unparsed, counted as flooded;
/// beyond the read rate the receiver pauses, the socket's queue fills, and the flooding
/// sender's own sends fail or wait. Times are offsets from any fixed origin.
#[derive(Clone, Debug, PartialEq)]
pub struct FloodGuard {
    parse: TokenBucket,
    read: TokenBucket,
}

pub const PARSE_BURST: u32 = 1_000;
pub const PARSE_PER_SECOND: u32 = 500;
pub const READ_BURST: u32 = 20_000;
pub const READ_PER_SECOND: u32 = 20_000;

impl Default for FloodGuard {
    fn default() -> Self {
        Self {
            parse: TokenBucket::full(PARSE_BURST, PARSE_PER_SECOND),
            read: TokenBucket::full(READ_BURST, READ_PER_SECOND),
        }
    }
}

impl FloodGuard {
    /// Before reading a datagram: `None` to read it, or how long to pause first.
    pub fn before_read(&mut self, at: Duration) -> Option<Duration> {
        (!self.read.take(at)).then(|| self.read.time_to_next())
    }

    /// Whether a datagram just read may be parsed (else it is dropped as flooded).
    pub fn may_parse(&mut self, at: Duration) -> bool {
        self.parse.take(at)
    }
}

#[derive(Clone, Debug, PartialEq)]
struct TokenBucket {
    capacity: f64,
    per_second: f64,
    tokens: f64,
    last: Duration,
}

impl TokenBucket {
    fn full(capacity: u32, per_second: u32) -> Self {
        Self {
            capacity: f64::from(capacity),
            per_second: f64::from(per_second),
            tokens: f64::from(capacity),
            last: Duration::ZERO,
        }
    }

    fn take(&mut self, at: Duration) -> bool {
        if at > self.last {
            let earned = (at - self.last).as_secs_f64() * self.per_second;
            self.tokens = (self.tokens + earned).min(self.capacity);
            self.last = at;
        }
        let available = self.tokens >= 1.0;
        if available {
            self.tokens -= 1.0;
        }
        available
    }

    fn time_to_next(&self) -> Duration {
        let missing = (1.0 - self.tokens).max(0.0);
        Duration::from_secs_f64(missing / self.per_second).max(Duration::from_millis(1))
    }
}

/// Senders judged (a member of the attempt or not) and when: a sender is judged again only
/// after [`REJUDGE_AFTER`], so a flood costs one walk of `/proc` per sender and second, not one
/// per datagram. Membership does not change while a process lives (no process can join the
/// attempt's tree from outside, and a member that leaves it is remembered), so a verdict is
/// wrong only if its pid was reused within that second.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SenderVerdicts {
    /// pid → (member, judged at).
    judged: HashMap<u32, (bool, Duration)>,
}

pub const REJUDGE_AFTER: Duration = Duration::from_secs(1);

/// At most this many senders are remembered (a fork flood must not grow the map for good).
pub const MAX_JUDGED_SENDERS: usize = 4_096;

impl SenderVerdicts {
    /// Whether `pid` belongs to the attempt at `at`: the verdict of the last `judge(pid)` if it
    /// is recent, else a new one. Times are offsets from any fixed origin.
    pub fn judge(&mut self, pid: u32, at: Duration, judge: impl FnOnce(u32) -> bool) -> bool {
        if let Some(&(member, judged_at)) = self.judged.get(&pid)
            && at.saturating_sub(judged_at) < REJUDGE_AFTER
        {
            return member;
        }
        let member = judge(pid);
        if self.judged.len() >= MAX_JUDGED_SENDERS {
            self.judged
                .retain(|_, &mut (_, judged_at)| at.saturating_sub(judged_at) < REJUDGE_AFTER);
            if self.judged.len() >= MAX_JUDGED_SENDERS {
                self.judged.clear();
            }
        }
        self.judged.insert(pid, (member, at));
        member
    }
}

/// What became of the datagrams of one attempt: for the transcript trailer and the logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotifyTally {
    pub accepted: u64,
    /// Sent by a process outside the attempt (or one that could not be identified).
    pub from_outside: u64,
    pub oversized: u64,
    /// Not UTF-8, empty, or not `KEY=VALUE` lines.
    pub malformed: u64,
    /// Read but not parsed: more than the receiver's rate allows.
    pub flooded: u64,
    /// In accepted datagrams.
    pub invalid_values: u64,
    /// Descriptors that came with datagrams (`SCM_RIGHTS`), closed at once.
    pub descriptors_closed: u64,
}

impl NotifyTally {
    pub fn count(&mut self, parsed: &Result<Notification, Rejection>) {
        match parsed {
            Ok(notification) => {
                self.accepted += 1;
                self.invalid_values += notification.invalid_values.len() as u64;
            }
            Err(Rejection::Oversized { .. }) => self.oversized += 1,
            Err(Rejection::NotUtf8 | Rejection::Empty | Rejection::Malformed { .. }) => {
                self.malformed += 1;
            }
        }
    }

    pub fn dropped(&self) -> u64 {
        self.from_outside + self.oversized + self.malformed + self.flooded
    }

    /// One trailer line, or `None` when no datagram arrived:
    /// `12 accepted; 3 dropped (2 from outside the attempt, 1 malformed)`.
    pub fn describe(&self) -> Option<String> {
        if self.accepted == 0 && self.dropped() == 0 && self.descriptors_closed == 0 {
            return None;
        }
        let mut text = format!("{} accepted", self.accepted);
        if self.invalid_values > 0 {
            text.push_str(&format!(
                " ({} with invalid values, ignored)",
                self.invalid_values
            ));
        }
        let reasons: Vec<String> = [
            (self.from_outside, "from outside the attempt"),
            (self.oversized, "oversized"),
            (self.malformed, "malformed"),
            (self.flooded, "over the rate limit"),
        ]
        .into_iter()
        .filter(|(count, _)| *count > 0)
        .map(|(count, why)| format!("{count} {why}"))
        .collect();
        if !reasons.is_empty() {
            text.push_str(&format!(
                "; {} dropped ({})",
                self.dropped(),
                reasons.join(", ")
            ));
        }
        if self.descriptors_closed > 0 {
            text.push_str(&format!(
                "; {} passed descriptors closed",
                self.descriptors_closed
            ));
        }
        Some(text)
    }
}

#[cfg(test)]
mod tests;
