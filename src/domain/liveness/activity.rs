//! The activity rule: from two samples of an attempt's processes, whether they did visible
//! work in between — CPU, I/O, or bytes received on their TCP sockets, which is how a model
//! streaming into a CLI that prints nothing shows (docs/liveness.md, "The activity rule", has
//! the counters and the measurements behind the thresholds).

use std::collections::HashMap;
use std::time::Duration;

use crate::domain::identity::ProcStat;

/// Counters of one process at one sample.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessCounters {
    /// Its pid and start time identify the process across samples (a reused pid is a new
    /// process); its tick counters keep the time of threads that ended and of reaped children
    /// (where the CPU of a build's short compiler processes ends up).
    pub stat: ProcStat,
    /// Per thread id, from `schedstat`: the CPU of a CLI streaming tokens is a few
    /// milliseconds a second, below the tick counters' resolution.
    pub thread_cpu_ns: Vec<(u32, u64)>,
    /// `rchar + wchar`.
    pub chars: u64,
    pub socket_inodes: Vec<u64>,
}

/// Counters of one TCP socket ([`super::socket_diag`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketCounters {
    pub inode: u64,
    pub bytes_received: u64,
    pub last_data_received_ms: u32,
}

/// One sample of an attempt's processes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActivitySample {
    pub at: Duration,
    pub processes: Vec<ProcessCounters>,
    /// `None` when the sockets could not be read: no socket counters are then judged.
    pub sockets: Option<Vec<SocketCounters>>,
    /// The length of a clock tick.
    pub tick: Duration,
}

/// When work counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    pub cpu_per_second: Duration,
    pub chars_per_second: u64,
    pub received_bytes: u64,
}

/// The calibrated thresholds (docs/liveness.md, "Why these counters, and these thresholds").
pub const THRESHOLDS: Thresholds = Thresholds {
    cpu_per_second: Duration::from_millis(100),
    chars_per_second: 1024 * 1024,
    received_bytes: 1,
};

/// A quarter of the idle limit, between 0.25 s and 1 s: activity is seen well inside the
/// limit and the cost stays low.
pub fn sample_interval(idle_limit: Duration) -> Duration {
    (idle_limit / 4).clamp(Duration::from_millis(250), Duration::from_secs(1))
}

/// What happened between two samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Evidence {
    pub window: Duration,
    pub cpu: Duration,
    pub chars: u64,
    pub received_bytes: u64,
    pub processes: usize,
}

impl Evidence {
    /// For logs: `12 ms CPU, 0 B I/O, 431 B received in 0.5 s (3 processes)`.
    pub fn describe(&self) -> String {
        format!(
            "{} ms CPU, {} B I/O, {} B received in {:.1} s ({} processes)",
            self.cpu.as_millis(),
            self.chars,
            self.received_bytes,
            self.window.as_secs_f64(),
            self.processes
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivityVerdict {
    /// The first sample after a reset, or one too long after the previous: nothing judged.
    Baseline,
    /// Visible work: a sign of life at the sample's time.
    Working(Evidence),
    Quiet(Evidence),
}

/// Judges successive samples of one attempt.
#[derive(Clone, Debug)]
pub struct ActivityRule {
    thresholds: Thresholds,
    interval: Duration,
    previous: Option<ActivitySample>,
}

impl ActivityRule {
    /// Samples are meant to be `interval` apart ([`sample_interval`]).
    pub fn new(thresholds: Thresholds, interval: Duration) -> Self {
        Self {
            thresholds,
            interval,
            previous: None,
        }
    }

    /// A sign of life other than activity came: the next sample starts a new window.
    pub fn reset(&mut self) {
        self.previous = None;
    }

    pub fn observe(&mut self, sample: ActivitySample) -> ActivityVerdict {
        let Some(previous) = self.previous.replace(sample) else {
            return ActivityVerdict::Baseline;
        };
        let current = self.previous.as_ref().expect("just stored");
        let window = current.at.saturating_sub(previous.at);
        // Counters over a window much longer than the interval (the sampler was late) would
        // include work from before the silence.
        if window.is_zero() || window > self.interval * 3 {
            return ActivityVerdict::Baseline;
        }
        let evidence = evidence(&previous, current, window);
        let per_second = |amount: f64| amount / window.as_secs_f64();
        let working = per_second(evidence.cpu.as_secs_f64())
            >= self.thresholds.cpu_per_second.as_secs_f64()
            || per_second(evidence.chars as f64) >= self.thresholds.chars_per_second as f64
            || evidence.received_bytes >= self.thresholds.received_bytes;
        if working {
            ActivityVerdict::Working(evidence)
        } else {
            ActivityVerdict::Quiet(evidence)
        }
    }
}

fn evidence(previous: &ActivitySample, current: &ActivitySample, window: Duration) -> Evidence {
    let before: HashMap<(u32, u64), &ProcessCounters> = previous
        .processes
        .iter()
        .map(|process| ((process.stat.pid, process.stat.start_time_ticks), process))
        .collect();
    let tick_ns = u64::try_from(current.tick.as_nanos()).unwrap_or(u64::MAX);
    let mut cpu_ns: u64 = 0;
    let mut chars: u64 = 0;
    for process in &current.processes {
        let earlier = before
            .get(&(process.stat.pid, process.stat.start_time_ticks))
            .copied();
        let since = |counter: fn(&ProcessCounters) -> u64| {
            counter(process).saturating_sub(earlier.map_or(0, counter))
        };
        let threads = thread_cpu_since(process, earlier);
        let ticks = since(|counters| counters.stat.cpu_ticks);
        let reaped = since(|counters| counters.stat.reaped_children_ticks);
        cpu_ns = cpu_ns
            .saturating_add(threads.max(ticks.saturating_mul(tick_ns)))
            .saturating_add(reaped.saturating_mul(tick_ns));
        chars = chars.saturating_add(since(|counters| counters.chars));
    }
    Evidence {
        window,
        cpu: Duration::from_nanos(cpu_ns),
        chars,
        received_bytes: received_since(previous, current, window),
        processes: current.processes.len(),
    }
}

/// CPU of the threads seen now: the change for those seen before, all of it for new ones.
fn thread_cpu_since(process: &ProcessCounters, earlier: Option<&ProcessCounters>) -> u64 {
    let before: HashMap<u32, u64> = earlier
        .map(|earlier| earlier.thread_cpu_ns.iter().copied().collect())
        .unwrap_or_default();
    process
        .thread_cpu_ns
        .iter()
        .map(|(tid, ns)| ns.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .fold(0u64, u64::saturating_add)
}

/// The change for sockets seen before; for a connection opened meanwhile, what it received
/// if data came within the window.
fn received_since(previous: &ActivitySample, current: &ActivitySample, window: Duration) -> u64 {
    let Some(sockets) = &current.sockets else {
        return 0;
    };
    let before: HashMap<u64, u64> = previous
        .sockets
        .iter()
        .flatten()
        .map(|socket| (socket.inode, socket.bytes_received))
        .collect();
    let window_ms = window.as_millis();
    sockets
        .iter()
        .map(|socket| match before.get(&socket.inode) {
            Some(earlier) => socket.bytes_received.saturating_sub(*earlier),
            None if u128::from(socket.last_data_received_ms) <= window_ms => socket.bytes_received,
            None => 0,
        })
        .fold(0u64, u64::saturating_add)
}

/// Nanoseconds on CPU: the first field of `/proc/PID/task/TID/schedstat`.
pub fn parse_schedstat_ns(text: &str) -> Option<u64> {
    text.split_ascii_whitespace().next()?.parse().ok()
}

/// `rchar + wchar` from `/proc/PID/io`.
pub fn parse_io_chars(text: &str) -> Option<u64> {
    // The last line with the key counts (`/proc` writes each once).
    let field = |name: &str| {
        let (_, value) = text
            .lines()
            .rev()
            .filter_map(|line| line.split_once(':'))
            .find(|(key, _)| *key == name)?;
        value.trim().parse::<u64>().ok()
    };
    Some(field("rchar")?.saturating_add(field("wchar")?))
}

/// The inode of a socket from the target of a `/proc/PID/fd/N` link (`socket:[12345]`).
pub fn socket_inode(link: &[u8]) -> Option<u64> {
    let inode = link.strip_prefix(b"socket:[")?.strip_suffix(b"]")?;
    std::str::from_utf8(inode).ok()?.parse().ok()
}

#[cfg(test)]
mod tests;
