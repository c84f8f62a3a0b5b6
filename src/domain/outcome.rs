//! Outcome records (`outcomes/<attempt-id>.json`): the durable, append-only account of one
//! attempt's terminal result. Written and fsynced before `state.json` references it; only a
//! referenced record is authoritative.

use serde::{Deserialize, Serialize};

use super::state::{AttemptStatus, PhaseRef, SnapshotRef};
use super::timestamp::Timestamp;

/// Artifact paths of the attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifacts {
    pub prompt_path: String,
    pub transcript_path: String,
}

/// One attempt's terminal outcome. Field order is the on-disk key order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeRecord {
    pub attempt_id: String,
    pub plan: SnapshotRef,
    pub phase: PhaseRef,
    pub status: AttemptStatus,
    /// The result body for marker outcomes, otherwise the runner's diagnostic.
    pub summary: String,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    pub execution_workspace: String,
    pub artifacts: Artifacts,
    /// The child's exit code; `None` when it was killed by a signal or never ran.
    pub exit_code: Option<i32>,
    /// The signal that terminated the child; `None` when it exited or never ran.
    pub signal: Option<i32>,
}

/// An outcome document that breaks the schema; the message names the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutcomeError(pub String);

impl std::fmt::Display for OutcomeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl OutcomeRecord {
    /// Serializes with 2-space indentation and a trailing newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("outcome serializes");
        text.push('\n');
        text
    }

    /// Reads and strictly validates an outcome document stored as `file_name`.
    pub fn from_json(bytes: &[u8], file_name: &str) -> Result<OutcomeRecord, OutcomeError> {
        let _ = (bytes, file_name);
        todo!()
    }
}
