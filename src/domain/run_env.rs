//! The `AISH_*` variables that tell an agent (the worker) and a hook where they stand
//! (docs/worker-protocol.md, "Environment"; docs/cli.md, "What a hook gets"): one list of
//! names for both, so a script written for one reads the other. What is absent is the empty
//! string, so `"$AISH_…"` always expands.

/// The canonical plan path.
pub(crate) const PLAN: &str = "AISH_PLAN";
/// The plan workspace (the directory the plan's relative workspaces start from).
pub(crate) const PLAN_WORKSPACE: &str = "AISH_PLAN_WORKSPACE";
/// The plan's `state.json`.
pub(crate) const STATE_FILE: &str = "AISH_STATE_FILE";
/// The invocation of `run` (`run_id` in `events.jsonl` and the logs).
pub(crate) const RUN_ID: &str = "AISH_RUN_ID";
/// The attempt (the agent template's and the prompt's `{run_id}`).
pub(crate) const ATTEMPT_ID: &str = "AISH_ATTEMPT_ID";
pub(crate) const PHASE_ID: &str = "AISH_PHASE_ID";
pub(crate) const PHASE_TITLE: &str = "AISH_PHASE_TITLE";
/// The phase's execution workspace: the worker's working directory.
pub(crate) const WORKSPACE: &str = "AISH_WORKSPACE";

/// Where a worker or a hook stands in a run; empty strings for what does not apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RunFacts<'a> {
    pub plan: &'a str,
    pub plan_workspace: &'a str,
    pub state_file: &'a str,
    pub run_id: &'a str,
    pub attempt_id: &'a str,
    pub phase_id: &'a str,
    pub phase_title: &'a str,
    pub execution_workspace: &'a str,
}

impl RunFacts<'_> {
    /// The variables, in the order the docs list them.
    pub(crate) fn environment(&self) -> Vec<(String, String)> {
        [
            (PLAN, self.plan),
            (PLAN_WORKSPACE, self.plan_workspace),
            (STATE_FILE, self.state_file),
            (RUN_ID, self.run_id),
            (ATTEMPT_ID, self.attempt_id),
            (PHASE_ID, self.phase_id),
            (PHASE_TITLE, self.phase_title),
            (WORKSPACE, self.execution_workspace),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fact_is_set_and_an_absent_one_is_empty() {
        let facts = RunFacts {
            plan: "/ws/plan.md",
            phase_id: "phase-1",
            ..RunFacts::default()
        };
        let environment = facts.environment();
        assert_eq!(environment.len(), 8);
        assert!(environment.contains(&(PLAN.to_owned(), "/ws/plan.md".to_owned())));
        assert!(environment.contains(&(PHASE_ID.to_owned(), "phase-1".to_owned())));
        assert!(environment.contains(&(ATTEMPT_ID.to_owned(), String::new())));
    }
}
