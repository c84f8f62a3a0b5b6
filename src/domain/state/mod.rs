//! The `state.json` schema: one plan's durable progress, its strict reader and writer, its
//! invariants (checked on read and before every write) and the pure transitions of the attempt
//! lifecycle (docs/state-and-recovery.md, docs/session-lifecycle.md).

mod error;
mod excerpt;
mod schema;
mod transitions;
mod validation;

pub use crate::domain::attempt_status::AttemptStatus;
pub use error::{CommitError, Invariant, Refusal, StateError, StateWriteError, Transition};
pub use excerpt::{MAX_STATE_BYTES, STATE_TEXT_LIMIT, excerpt};
pub use schema::{
    AbandonedRef, ActiveAttempt, ActiveStatus, LastRun, OutcomeRef, PhaseRef, PlanRecord,
    SnapshotRef, State, Stop,
};
pub use transitions::ABANDONED_SUMMARY;

/// Where one plan's artifacts live: `<plan workspace>/.ai-session-handler/plans/<key>/`. Paths
/// are absolute, `/`-separated UTF-8 strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateLayout {
    /// No trailing slash.
    pub dir: String,
}

impl StateLayout {
    pub fn state_path(&self) -> String {
        format!("{}/state.json", self.dir)
    }
    pub fn prompts_dir(&self) -> String {
        format!("{}/prompts", self.dir)
    }
    pub fn transcripts_dir(&self) -> String {
        format!("{}/transcripts", self.dir)
    }
    pub fn outcomes_dir(&self) -> String {
        format!("{}/outcomes", self.dir)
    }
    pub fn prompt_path(&self, attempt_id: &str) -> String {
        format!("{}/prompts/{attempt_id}.txt", self.dir)
    }
    pub fn transcript_path(&self, attempt_id: &str) -> String {
        format!("{}/transcripts/{attempt_id}.txt", self.dir)
    }
    pub fn outcome_path(&self, attempt_id: &str) -> String {
        format!("{}/outcomes/{attempt_id}.json", self.dir)
    }

    /// Whether `path` is [`StateLayout::outcome_path`] of `attempt_id`, without building it:
    /// every state write checks this for every committed outcome.
    pub fn is_outcome_path(&self, path: &str, attempt_id: &str) -> bool {
        path.strip_prefix(self.dir.as_str())
            .and_then(|rest| rest.strip_prefix("/outcomes/"))
            .and_then(|rest| rest.strip_prefix(attempt_id))
            .is_some_and(|rest| rest == ".json")
    }
}

#[cfg(test)]
mod tests;
