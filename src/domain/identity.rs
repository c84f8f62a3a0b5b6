//! Process identity: whether a recorded worker is still the same live process. A pid alone can
//! be reused; pid + process group + boot id + start time (clock ticks since boot, field 22 of
//! `/proc/<pid>/stat`) cannot.

use serde::{Deserialize, Serialize};

use super::strict_json::positive;

/// The identity recorded for a running attempt (`active_attempt.process` in `state.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessIdentity {
    #[serde(deserialize_with = "positive")]
    pub(crate) pid: u32,
    #[serde(deserialize_with = "positive")]
    pub(crate) process_group_id: u32,
    pub(crate) boot_id: String,
    #[serde(deserialize_with = "positive")]
    pub start_time_ticks: u64,
}

/// The fields of one `/proc/<pid>/stat` line that identity, group sweeps and activity need.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcStat {
    pub(crate) pid: u32,
    /// One-letter state (`R`, `S`, `Z`, `X`, …).
    pub(crate) state: char,
    /// The parent's pid (field 4): what the escaped-descendant sweep walks.
    pub(crate) ppid: u32,
    pub pgrp: u32,
    pub start_time_ticks: u64,
    /// `utime + stime` (fields 14 and 15) and `cutime + cstime` (16 and 17), for the
    /// activity rule.
    pub(crate) cpu_ticks: u64,
    pub(crate) reaped_children_ticks: u64,
}

impl ProcStat {
    /// Zombies and dead tasks hold a pid but run nothing.
    pub(crate) fn is_defunct(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }

    /// Stopped by a signal (or by a tracer): it cannot fork until it is continued.
    pub(crate) fn is_stopped(&self) -> bool {
        matches!(self.state, 'T' | 't')
    }
}

/// Parses the text of `/proc/<pid>/stat`. The command name is parenthesised and may itself
/// contain spaces and parentheses, so fields are counted from the last `)`.
pub fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    if close < open {
        return None;
    }
    let pid = text[..open].trim().parse().ok()?;
    // Fields after the command name start at field 3 (state).
    let rest: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).copied();
    let ticks = |n: usize| field(n)?.parse::<u64>().ok();
    let mut state_chars = field(3)?.chars();
    let state = state_chars.next()?;
    if state_chars.next().is_some() {
        return None;
    }
    Some(ProcStat {
        pid,
        state,
        ppid: field(4)?.parse().ok()?,
        pgrp: field(5)?.parse().ok()?,
        start_time_ticks: ticks(22)?,
        // The CPU fields only feed the activity rule: a process is identified without them.
        cpu_ticks: ticks(14)
            .unwrap_or(0)
            .saturating_add(ticks(15).unwrap_or(0)),
        reaped_children_ticks: ticks(16)
            .unwrap_or(0)
            .saturating_add(ticks(17).unwrap_or(0)),
    })
}

/// Whether the recorded worker is still the same process, alive and not a zombie, by what
/// `/proc` says now (`observed` is `None` when the pid does not exist); a reused pid, another
/// boot or a defunct process is gone.
pub(crate) fn is_alive(
    recorded: &ProcessIdentity,
    current_boot_id: &str,
    observed: Option<&ProcStat>,
) -> bool {
    observed.is_some_and(|stat| {
        recorded.boot_id.trim() == current_boot_id.trim()
            && stat.pid == recorded.pid
            && stat.pgrp == recorded.process_group_id
            && stat.start_time_ticks == recorded.start_time_ticks
            && !stat.is_defunct()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";

    #[test]
    fn parses_fields_after_parenthesised_name() {
        let stat = parse_proc_stat(SAMPLE).unwrap();
        assert_eq!(stat.pid, 4242);
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.pgrp, 4242);
        assert_eq!(stat.start_time_ticks, 987654);
        assert!(!stat.is_defunct());
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "12", "12 (x", "x (y) S 1 2", "12 (x) SS 1 2 3"] {
            assert_eq!(parse_proc_stat(bad), None, "{bad:?}");
        }
    }

    fn recorded() -> ProcessIdentity {
        ProcessIdentity {
            pid: 4242,
            process_group_id: 4242,
            boot_id: "boot-a".into(),
            start_time_ticks: 987654,
        }
    }

    #[test]
    fn same_identity_is_alive() {
        let stat = parse_proc_stat(SAMPLE).unwrap();
        assert!(is_alive(&recorded(), "boot-a\n", Some(&stat)));
    }

    #[test]
    fn any_mismatch_is_gone() {
        let stat = parse_proc_stat(SAMPLE).unwrap();
        assert!(!is_alive(&recorded(), "boot-b", Some(&stat)));
        assert!(!is_alive(&recorded(), "boot-a", None));
        let reused = ProcStat {
            start_time_ticks: 1,
            ..stat.clone()
        };
        assert!(!is_alive(&recorded(), "boot-a", Some(&reused)));
        let other_group = ProcStat {
            pgrp: 1,
            ..stat.clone()
        };
        assert!(!is_alive(&recorded(), "boot-a", Some(&other_group)));
        let zombie = ProcStat { state: 'Z', ..stat };
        assert!(!is_alive(&recorded(), "boot-a", Some(&zombie)));
    }
}
