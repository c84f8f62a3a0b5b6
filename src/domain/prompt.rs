//! The worker prompt (SPEC §13; reference §8): plain text with delimited sections, rendered
//! from the invocation's immutable plan snapshot and the state as just prepared.

use super::plan::Phase;
use super::state::State;

/// Everything the prompt shows. Paths are absolute.
#[derive(Clone, Debug)]
pub struct PromptContext<'a> {
    pub plan_workspace_path: &'a str,
    pub execution_workspace_path: &'a str,
    pub plan_path: &'a str,
    pub state_path: &'a str,
    pub run_id: &'a str,
    pub transcript_path: &'a str,
    /// The exact global preamble of the accepted snapshot.
    pub preamble: &'a str,
    pub phase: &'a Phase,
    /// The state as durably recorded for this attempt (active attempt prepared).
    pub state: &'a State,
}

/// Renders the prompt text (ends with a newline).
pub fn render_prompt(context: &PromptContext<'_>) -> String {
    let _ = context;
    todo!()
}
