//! The lifecycles the actors execute, as pure state machines: one attempt
//! ([`attempt::AttemptLifecycle`]) and the phase loop of a run ([`run::RunLoop`]).

pub(crate) mod attempt;
pub(crate) mod run;

#[cfg(test)]
mod published_tables;

/// What the group killer found and did, reported once the worker's group is empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct GroupReport {
    /// Pids still alive in the group after the leader had exited on its own (killed).
    pub leaked: Vec<u32>,
    /// Descendants that had left the group and were found, adopted, after it emptied (killed).
    pub escaped: Vec<u32>,
    /// Pids that survived every SIGKILL round.
    pub survivors: Vec<u32>,
}
