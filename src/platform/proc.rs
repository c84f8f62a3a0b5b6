//! Reads of `/proc`: the boot id, stat lines, children lists, environments and our own
//! descriptors. Parsing and comparison live in [`crate::domain::identity`].

use std::fs;
use std::io;
use std::sync::OnceLock;

use crate::domain::identity::{ProcStat, ProcessIdentity, parse_proc_stat};

const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// The running kernel's boot id, trimmed. Read once: it cannot change while this process
/// lives.
pub(crate) fn boot_id() -> io::Result<String> {
    static BOOT_ID: OnceLock<String> = OnceLock::new();
    if let Some(id) = BOOT_ID.get() {
        return Ok(id.clone());
    }
    let id = fs::read_to_string(BOOT_ID_PATH)?.trim().to_owned();
    Ok(BOOT_ID.get_or_init(|| id).clone())
}

/// When the kernel booted, in seconds since the epoch (`btime` in `/proc/stat`).
pub(crate) fn boot_time() -> io::Result<u64> {
    fs::read_to_string("/proc/stat")?
        .lines()
        .find_map(|line| line.strip_prefix("btime ")?.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no btime line in /proc/stat"))
}

/// Clock ticks per second: the unit of a process's start time in `/proc/<pid>/stat`.
pub(crate) fn ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|ticks| u64::try_from(ticks).ok())
        .filter(|ticks| *ticks > 0)
        .unwrap_or(100)
}

/// `/proc/<pid>/stat` of one process; `Ok(None)` when no such process exists.
pub(crate) fn stat(pid: u32) -> io::Result<Option<ProcStat>> {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(text) => Ok(parse_proc_stat(&text)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        // A process that vanished between listing and reading reports ESRCH.
        Err(error) if error.raw_os_error() == Some(nix::libc::ESRCH) => Ok(None),
        Err(error) => Err(error),
    }
}

/// [`stat`], with a stat line that cannot be read taken as no process.
pub(crate) fn stat_of(pid: u32) -> Option<ProcStat> {
    stat(pid).ok().flatten()
}

/// A process's start time (`/proc/<pid>/stat` field 22, clock ticks since boot).
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    stat_of(pid).map(|stat| stat.start_time_ticks)
}

/// The descriptors this process has open, as `/proc/self/fd` lists them (the listing's own
/// among them, closed by the time this returns).
pub(crate) fn own_descriptors() -> Vec<i32> {
    fs::read_dir("/proc/self/fd")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The command name of a process (`/proc/<pid>/comm`), for messages; `None` when it is gone.
pub(crate) fn command_name(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|name| name.trim_end().to_owned())
}

/// The identity of a just-launched child (a session leader, so its pgid is its pid).
pub(crate) fn identity_of(pid: u32) -> io::Result<ProcessIdentity> {
    let stat = stat(pid)?.ok_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, format!("/proc/{pid}/stat is gone"))
    })?;
    Ok(ProcessIdentity {
        pid,
        process_group_id: stat.pgrp,
        boot_id: boot_id()?,
        start_time_ticks: stat.start_time_ticks,
    })
}

/// Every process whose stat line satisfies `keep`. Processes that vanish mid-scan are skipped.
pub(crate) fn processes_where(
    mut keep: impl FnMut(&ProcStat) -> bool,
) -> io::Result<Vec<ProcStat>> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(Some(stat)) = stat(pid)
            && keep(&stat)
        {
            found.push(stat);
        }
    }
    Ok(found)
}

/// The handler's own children, from every thread's `children` list.
pub(crate) fn own_children() -> io::Result<Vec<u32>> {
    children_in("/proc/self/task")
}

/// The handler's adopted children (zombies included), from the one children list that can
/// hold them: the kernel gives an orphan to its subreaper's first live thread
/// (`find_alive_thread` in kernel/exit.c), the main thread; the others list only what they
/// started themselves.
pub(crate) fn adopted_children() -> io::Result<Vec<u32>> {
    let list = fs::read_to_string(format!("/proc/self/task/{}/children", std::process::id()))?;
    let mut children: Vec<u32> = list
        .split_ascii_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .collect();
    children.sort_unstable();
    Ok(children)
}

/// The children of process `pid` (a few small reads, no scan of `/proc`). Reliable for a
/// stopped process, which cannot fork meanwhile.
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    children_in(&format!("/proc/{pid}/task")).unwrap_or_default()
}

fn children_in(tasks: &str) -> io::Result<Vec<u32>> {
    let mut children = Vec::new();
    for task in fs::read_dir(tasks)? {
        let Ok(task) = task else { continue };
        let Ok(list) = fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        children.extend(
            list.split_ascii_whitespace()
                .filter_map(|pid| pid.parse::<u32>().ok()),
        );
    }
    children.sort_unstable();
    children.dedup();
    Ok(children)
}

/// The handler's children at one moment, with their start times. Taken before the first
/// worker starts, it names the children the handler inherited across `exec` (a shell's
/// background jobs): never the worker's, so never signalled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ChildSnapshot(Vec<(u32, u64)>);

impl ChildSnapshot {
    pub(crate) fn take() -> Self {
        let children = own_children().unwrap_or_default();
        Self(
            children
                .into_iter()
                .filter_map(stat_of)
                .map(|child| (child.pid, child.start_time_ticks))
                .collect(),
        )
    }

    /// Whether `child` is one of the snapshot's (same pid and start time, so a reused pid
    /// does not match).
    pub(crate) fn contains(&self, child: &ProcStat) -> bool {
        self.0.contains(&(child.pid, child.start_time_ticks))
    }
}

/// Every process's stat line (the escaped-descendant sweep walks parent links through it).
pub(crate) fn process_table() -> io::Result<Vec<ProcStat>> {
    processes_where(|_| true)
}

/// Every live process that started from `started_from_ticks` on (0: any) whose environment
/// holds one of `assignments` (`NAME=value`) exactly; an unreadable environment is skipped.
pub(crate) fn processes_with_env(
    assignments: &[String],
    started_from_ticks: u64,
) -> io::Result<Vec<ProcStat>> {
    let own = std::process::id();
    // The start time first: if the pid is reused before the environment is read, the later
    // pidfd check against this start time refuses the new process.
    let candidates = processes_where(|stat| {
        stat.pid != own && !stat.is_defunct() && stat.start_time_ticks >= started_from_ticks
    })?;
    Ok(candidates
        .into_iter()
        .filter(|stat| {
            fs::read(format!("/proc/{}/environ", stat.pid)).is_ok_and(|environ| {
                environ
                    .split(|byte| *byte == 0)
                    .any(|entry| assignments.iter().any(|wanted| entry == wanted.as_bytes()))
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_identity() {
        let me = std::process::id();
        let stat = stat(me).unwrap().expect("own stat");
        assert_eq!(stat.pid, me);
        assert!(stat.start_time_ticks > 0);
        assert!(!boot_id().unwrap().is_empty());
    }

    #[test]
    fn reads_own_command_name() {
        let name = command_name(std::process::id()).expect("own comm");
        assert!(!name.is_empty() && !name.ends_with('\n'), "{name:?}");
        assert_eq!(command_name(4_294_967_000), None);
    }

    #[test]
    fn finds_a_child_by_an_environment_entry() {
        let token = format!("ASH_PROC_TEST={}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("ASH_PROC_TEST", std::process::id().to_string())
            .spawn()
            .expect("spawn");
        // Until the child has exec'd, its environment is still a copy of ours.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut found = Vec::new();
        while found.is_empty() && std::time::Instant::now() < deadline {
            found = processes_with_env(std::slice::from_ref(&token), 0).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            found.iter().map(|stat| stat.pid).collect::<Vec<_>>(),
            [child.id()]
        );
        assert!(
            processes_with_env(&["ASH_PROC_TEST=nobody".to_owned()], 0)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn missing_pid_is_none() {
        // Above the default pid_max of 4194304.
        assert_eq!(stat(4_294_967_000).unwrap(), None);
    }
}
