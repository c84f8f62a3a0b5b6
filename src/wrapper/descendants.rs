//! Stopping what the launcher leaves behind when no handler will: a wrapper run by hand (not
//! leading its own session, as every worker the handler starts does) becomes a child
//! subreaper and sweeps the launcher's adopted descendants once it has exited, as the
//! handler's group killer does (docs/providers.md, "Processes and signals").

use std::io;
use std::time::Duration;

use crate::platform::descendant_sweep;
use crate::platform::proc::{self, ChildSnapshot};
use crate::platform::process_group;

/// How long adopted descendants are killed and waited for before the wrapper gives up.
const SWEEP_LIMIT: Duration = Duration::from_secs(2);

/// Who stops the launcher's descendants: the handler, which started the wrapper as a session
/// leader, or the wrapper itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Supervision {
    Handler,
    ByHand,
}

impl Supervision {
    pub fn detect() -> Self {
        if process_group::leads_own_session() {
            Self::Handler
        } else {
            Self::ByHand
        }
    }
}

/// A process the wrapper stopped, with its command name (`?` when unreadable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leftover {
    pub pid: u32,
    pub name: String,
}

/// Adopts and stops the launcher's descendants (by hand only).
#[derive(Debug)]
pub struct Reaper {
    /// The wrapper's children before the launch (inherited across `exec`): never touched.
    inherited: ChildSnapshot,
    launcher_pid: Option<u32>,
    /// The launcher's start time: a child that started earlier cannot descend from it.
    launcher_started_ticks: Option<u64>,
}

impl Reaper {
    /// Registers the wrapper as a child subreaper; call before the launch.
    pub fn prepare() -> io::Result<Self> {
        process_group::become_child_subreaper()?;
        Ok(Self {
            inherited: ChildSnapshot::take(),
            launcher_pid: None,
            launcher_started_ticks: None,
        })
    }

    pub fn launched(&mut self, pid: Option<u32>) {
        self.launcher_pid = pid;
        self.launcher_started_ticks = pid
            .and_then(|pid| proc::stat(pid).ok().flatten())
            .map(|stat| stat.start_time_ticks);
    }

    /// Reaps adopted children that have exited, so a long session whose tools leave orphans
    /// behind does not collect zombies until its end.
    pub fn reap_zombies(&self) {
        for pid in proc::own_children().unwrap_or_default() {
            if Some(pid) != self.launcher_pid
                && proc::stat(pid).is_ok_and(|stat| stat.is_some_and(|stat| stat.is_defunct()))
            {
                process_group::reap_child(pid);
            }
        }
    }

    /// Kills every adopted descendant of the launcher until the sweep finds nothing more (or
    /// gives up after `SWEEP_LIMIT`); returns what it stopped.
    pub async fn sweep(&self) -> Vec<Leftover> {
        let leader = self.launcher_pid.unwrap_or(0);
        let started = self.launcher_started_ticks;
        let inherited = self.inherited.clone();
        let sweep = move || {
            let mut stopped = Vec::new();
            descendant_sweep::sweep_within(leader, started, &inherited, SWEEP_LIMIT, |pid| {
                let name = proc::command_name(pid).unwrap_or_else(|| "?".to_owned());
                tracing::info!(pid, %name, "stopped a leftover descendant");
                stopped.push(Leftover { pid, name });
            });
            stopped
        };
        tokio::task::spawn_blocking(sweep).await.unwrap_or_default()
    }
}

/// `stopped 2 leftover processes of codex-lean: 123 sleep, 456 node`.
pub fn describe(launcher: &str, stopped: &[Leftover]) -> String {
    let list = stopped
        .iter()
        .map(|leftover| format!("{} {}", leftover.pid, leftover.name))
        .collect::<Vec<_>>()
        .join(", ");
    let noun = if stopped.len() == 1 {
        "process"
    } else {
        "processes"
    };
    format!(
        "stopped {} leftover {noun} of {launcher}: {list}",
        stopped.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_are_named() {
        let stopped = [
            Leftover {
                pid: 12,
                name: "sleep".to_owned(),
            },
            Leftover {
                pid: 34,
                name: "node".to_owned(),
            },
        ];
        assert_eq!(
            describe("codex-lean", &stopped[..1]),
            "stopped 1 leftover process of codex-lean: 12 sleep"
        );
        assert_eq!(
            describe("claude-lean", &stopped),
            "stopped 2 leftover processes of claude-lean: 12 sleep, 34 node"
        );
    }
}
