//! The moments a hook can run at, by the names the `hooks` config key and the `--hook` flag
//! spell them, and the error for a name that is none of them.
//!
//! A file of its own so the config error ([`crate::domain::config::section`]) can carry
//! [`UnknownHookEvent`] without importing the hooks module, which reads its config entries
//! with that error.

/// The moments a hook can be run at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookEvent {
    /// Every end of a `run` invocation, with its exit code.
    RunFinished,
    /// The run stopped at a phase and will not continue without a person: blocked, needs
    /// clarification, any failure (every status but `phase-complete` and `interrupted`), or an
    /// attempt that could not be recorded.
    PhaseStopped,
    /// A phase's `phase-complete` was committed.
    PhaseComplete,
    /// A rate-limit wait or retry backoff longer than a minute (`LONG_WAIT_SECONDS`) began.
    WaitStarted,
    /// Such a wait ended: the phase runs again.
    WaitFinished,
    /// The run ended on a caught signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT).
    Interrupted,
}

impl HookEvent {
    pub const ALL: [HookEvent; 6] = [
        Self::RunFinished,
        Self::PhaseStopped,
        Self::PhaseComplete,
        Self::WaitStarted,
        Self::WaitFinished,
        Self::Interrupted,
    ];

    /// The names of [`HookEvent::ALL`], in that order (for the messages that list them).
    pub const NAMES: [&'static str; 6] = {
        let mut names = [""; 6];
        let mut index = 0;
        while index < names.len() {
            names[index] = Self::ALL[index].as_str();
            index += 1;
        }
        names
    };

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::RunFinished => "run-finished",
            Self::PhaseStopped => "phase-stopped",
            Self::PhaseComplete => "phase-complete",
            Self::WaitStarted => "wait-started",
            Self::WaitFinished => "wait-finished",
            Self::Interrupted => "interrupted",
        }
    }

    /// The event spelled `name`, or an error listing the known names.
    pub fn parse(name: &str) -> Result<Self, UnknownHookEvent> {
        Self::ALL
            .into_iter()
            .find(|event| event.as_str() == name)
            .ok_or_else(|| UnknownHookEvent {
                name: name.to_owned(),
            })
    }
}

impl std::fmt::Display for HookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no [`HookEvent`]; the message lists the ones there are.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown hook event '{name}'; known events: {}", HookEvent::NAMES.join(", "))]
pub struct UnknownHookEvent {
    pub name: String,
}
