//! The moments a hook can run at (docs/cli.md, "Notifications"), by the names the `hooks`
//! config key and `--hook` spell them. A file of its own so the config error can carry
//! [`UnknownHookEvent`] without importing the hooks module, which reads its entries with it.

use strum::{Display, EnumIter, EnumString, IntoStaticStr, VariantNames};

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Display, EnumString, IntoStaticStr, VariantNames, EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
pub enum HookEvent {
    RunFinished,
    PhaseStopped,
    PhaseComplete,
    WaitStarted,
    WaitFinished,
    Interrupted,
}

impl HookEvent {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(name: &str) -> Result<Self, UnknownHookEvent> {
        name.parse().map_err(|_| UnknownHookEvent {
            name: name.to_owned(),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown hook event '{name}'; known events: {}", HookEvent::VARIANTS.join(", "))]
pub struct UnknownHookEvent {
    pub name: String,
}
