//! The running attempt's processes: who belongs to it ([`AttemptProcesses::is_member`], the
//! notification socket's membership predicate) and what they are doing
//! ([`ActivitySampler::sample`]: `/proc` reads down the children lists from the leader and the
//! adopted escapees, and one `sock_diag` dump per address family). The rules are the domain's
//! (docs/liveness.md). Everything here blocks: call it off the runtime threads.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::socket::{
    self, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, sockopt,
};
use nix::sys::time::TimeVal;

use super::descendant_sweep;
use super::proc::{self, ChildSnapshot};
use crate::domain::identity::ProcStat;
use crate::domain::liveness::activity::{
    ActivitySample, ProcessCounters, SocketCounters, parse_io_chars, parse_schedstat_ns,
    socket_inode,
};
use crate::domain::liveness::membership::{Verdict, belongs};
use crate::domain::liveness::socket_diag::{DumpError, DumpProgress, dump_request, parse_replies};
use crate::domain::process_tree::{ChildVerdict, SweepScope, judge_child};

/// At most this many processes are sampled (a fork bomb must not make sampling unbounded).
pub(crate) const MAX_PROCESSES: usize = 1_024;

const REMEMBERED: usize = 4_096;

/// How long a `sock_diag` dump may take before the sample goes without socket counters.
const DIAG_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(crate) struct AttemptProcesses {
    leader: u32,
    worker_started_ticks: Option<u64>,
    handler: u32,
    inherited: Arc<ChildSnapshot>,
    remembered: Mutex<Remembered>,
}

/// Members seen so far (for senders that exit before their datagram is read), oldest first
/// out.
#[derive(Debug, Default)]
struct Remembered {
    start_times: HashMap<u32, u64>,
    order: VecDeque<u32>,
}

impl Remembered {
    fn insert(&mut self, pid: u32, start_time_ticks: u64) {
        if self.start_times.insert(pid, start_time_ticks).is_none() {
            self.order.push_back(pid);
            if self.order.len() > REMEMBERED
                && let Some(oldest) = self.order.pop_front()
            {
                self.start_times.remove(&oldest);
            }
        }
    }
}

impl AttemptProcesses {
    /// The attempt whose worker leads group `leader`, in a handler that had the children
    /// `inherited` before its first worker.
    pub(crate) fn new(
        leader: u32,
        worker_started_ticks: Option<u64>,
        inherited: Arc<ChildSnapshot>,
    ) -> Self {
        let processes = Self {
            leader,
            worker_started_ticks,
            handler: std::process::id(),
            inherited,
            remembered: Mutex::new(Remembered::default()),
        };
        if let Some(started) = worker_started_ticks {
            processes.remember(leader, started);
        }
        processes
    }

    fn remember(&self, pid: u32, start_time_ticks: u64) {
        if let Ok(mut remembered) = self.remembered.lock() {
            remembered.insert(pid, start_time_ticks);
        }
    }

    fn remembered(&self, pid: u32) -> Option<u64> {
        self.remembered
            .lock()
            .ok()
            .and_then(|remembered| remembered.start_times.get(&pid).copied())
    }

    fn with_scope<T>(&self, use_scope: impl FnOnce(&SweepScope<'_>) -> T) -> T {
        let (leader, started) = (self.leader, self.worker_started_ticks);
        descendant_sweep::in_scope(self.handler, leader, started, &self.inherited, use_scope)
    }

    /// Whether `pid` (a notification's sender) belongs to the attempt (a few `/proc` reads).
    pub(crate) fn is_member(&self, pid: u32) -> bool {
        let verdict =
            self.with_scope(|scope| belongs(pid, scope, |pid| self.remembered(pid), proc::stat_of));
        match verdict {
            Verdict::Member { start_time_ticks } => {
                self.remember(pid, start_time_ticks);
                true
            }
            Verdict::Outsider => false,
        }
    }

    /// The live processes of the attempt now: the leader's tree and the adopted escapees'
    /// (`handler` 0: none adopted).
    fn walk(&self) -> Vec<ProcStat> {
        let mut roots = vec![self.leader];
        let children = if self.handler == 0 {
            Vec::new()
        } else {
            proc::adopted_children().unwrap_or_default()
        };
        let adoptees: Vec<u32> = children
            .into_iter()
            .filter(|&child| child != self.leader)
            .filter_map(proc::stat_of)
            .filter(|child| {
                self.with_scope(|scope| judge_child(scope, child)) == ChildVerdict::Stop
            })
            .map(|child| child.pid)
            .collect();
        roots.extend(adoptees);
        let mut seen = HashSet::new();
        let mut found = Vec::new();
        while let Some(pid) = roots.pop() {
            if found.len() >= MAX_PROCESSES || !seen.insert(pid) {
                continue;
            }
            let Some(stat) = proc::stat_of(pid) else {
                continue;
            };
            if stat.is_defunct() {
                continue;
            }
            self.remember(pid, stat.start_time_ticks);
            roots.extend(proc::children_of(pid));
            found.push(stat);
        }
        found
    }
}

#[derive(Debug)]
pub(crate) struct ActivitySampler {
    processes: Arc<AttemptProcesses>,
    launched: Instant,
    tick: Duration,
    diag: Option<OwnedFd>,
    sequence: u32,
    /// The socket counters could not be read; said once.
    diag_failed: bool,
}

impl ActivitySampler {
    /// `launched` is the launch time the samples' offsets count from.
    pub(crate) fn new(processes: Arc<AttemptProcesses>, launched: Instant) -> Self {
        Self {
            processes,
            launched,
            tick: Duration::from_secs(1) / u32::try_from(proc::ticks_per_second()).unwrap_or(100),
            diag: None,
            sequence: 0,
            diag_failed: false,
        }
    }

    pub(crate) fn sample(&mut self) -> ActivitySample {
        let at = self.launched.elapsed();
        let processes: Vec<ProcessCounters> =
            self.processes.walk().into_iter().map(counters).collect();
        let inodes: HashSet<u64> = processes
            .iter()
            .flat_map(|process| process.socket_inodes.iter().copied())
            .collect();
        let sockets = if inodes.is_empty() {
            Some(Vec::new())
        } else {
            self.tcp_sockets().map(|sockets| {
                sockets
                    .into_iter()
                    .filter(|socket| inodes.contains(&socket.inode))
                    .collect()
            })
        };
        ActivitySample {
            at,
            processes,
            sockets,
            tick: self.tick,
        }
    }

    /// Every TCP socket's counters, or `None` when the kernel would not say.
    fn tcp_sockets(&mut self) -> Option<Vec<SocketCounters>> {
        match self.dump_all() {
            Ok(sockets) => Some(sockets),
            Err(error) => {
                self.diag = None;
                if !std::mem::replace(&mut self.diag_failed, true) {
                    tracing::info!(%error, "cannot read TCP socket counters (sock_diag); activity is judged by CPU and I/O only");
                }
                None
            }
        }
    }

    fn dump_all(&mut self) -> io::Result<Vec<SocketCounters>> {
        if self.diag.is_none() {
            self.diag = Some(open_diag()?);
        }
        let fd = self.diag.as_ref().expect("just opened");
        let mut sockets = Vec::new();
        let mut buffer = vec![0u8; 64 * 1024];
        for family in [nix::libc::AF_INET as u8, nix::libc::AF_INET6 as u8] {
            self.sequence = self.sequence.wrapping_add(1);
            let sequence = self.sequence;
            let request = dump_request(family, sequence);
            socket::sendto(
                fd.as_raw_fd(),
                &request,
                &NetlinkAddr::new(0, 0),
                MsgFlags::empty(),
            )?;
            let deadline = Instant::now() + DIAG_TIMEOUT;
            loop {
                if Instant::now() > deadline {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "sock_diag dump"));
                }
                let len = socket::recv(fd.as_raw_fd(), &mut buffer, MsgFlags::empty())?;
                match parse_replies(&buffer[..len], sequence, &mut sockets) {
                    Ok(DumpProgress::Done) => break,
                    Ok(DumpProgress::More) => {}
                    // No IPv6 in this kernel: nothing to count there.
                    Err(DumpError::Kernel(errno))
                        if family == nix::libc::AF_INET6 as u8
                            && errno == nix::libc::EAFNOSUPPORT =>
                    {
                        break;
                    }
                    Err(DumpError::Kernel(errno)) => {
                        return Err(io::Error::from_raw_os_error(errno));
                    }
                    Err(DumpError::Malformed) => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "malformed sock_diag reply",
                        ));
                    }
                }
            }
        }
        Ok(sockets)
    }
}

fn open_diag() -> io::Result<OwnedFd> {
    let fd = socket::socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )?;
    // A reply that never comes must not hold the sampler.
    let timeout = TimeVal::new(
        DIAG_TIMEOUT.as_secs() as _,
        DIAG_TIMEOUT.subsec_micros() as _,
    );
    socket::setsockopt(&fd, sockopt::ReceiveTimeout, &timeout)?;
    Ok(fd)
}

/// One process's counters; what cannot be read (it exited meanwhile) stays 0 or empty.
fn counters(stat: ProcStat) -> ProcessCounters {
    let pid = stat.pid;
    let thread_cpu_ns = fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| {
            let tid = task.file_name().to_str()?.parse::<u32>().ok()?;
            let text = fs::read_to_string(task.path().join("schedstat")).ok()?;
            Some((tid, parse_schedstat_ns(&text)?))
        })
        .collect();
    let chars = fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|text| parse_io_chars(&text))
        .unwrap_or(0);
    let socket_inodes = fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| {
            let target = fs::read_link(fd.path()).ok()?;
            socket_inode(target.as_os_str().as_bytes())
        })
        .collect();
    ProcessCounters {
        stat,
        thread_cpu_ns,
        chars,
        socket_inodes,
    }
}

#[cfg(test)]
mod tests;
