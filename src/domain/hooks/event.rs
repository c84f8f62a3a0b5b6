//! The moments a hook can run at, by the names the `hooks` config key and the `--hook` flag
//! spell them, and the error for a name that is none of them.
//!
//! A file of its own so the config error ([`crate::domain::config::rules`]) can carry
//! [`UnknownHookEvent`] without importing the hooks module, which reads its config entries
//! with that error.

use strum::VariantNames;

/// The moments a hook can be run at, by name (`run-finished`).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
    strum::EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
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
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The event spelled `name`, or an error listing the known names.
    pub fn parse(name: &str) -> Result<Self, UnknownHookEvent> {
        name.parse().map_err(|_| UnknownHookEvent {
            name: name.to_owned(),
        })
    }
}

/// A name that is no [`HookEvent`]; the message lists the ones there are.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown hook event '{name}'; known events: {}", HookEvent::VARIANTS.join(", "))]
pub struct UnknownHookEvent {
    pub name: String,
}
