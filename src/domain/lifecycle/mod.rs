//! The lifecycles the actors execute, as pure state machines: one attempt
//! ([`attempt::AttemptLifecycle`]) and the phase loop of a run ([`run::RunLoop`]).

pub(crate) mod attempt;
pub(crate) mod run;

#[cfg(test)]
mod published_tables;

/// What stopping a process group found and did: the group killer's, reported once the
/// worker's group is empty, and a helper's (a Verify check's, a hook's).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct GroupReport {
    /// Pids still alive in the group after the leader had exited on its own (killed).
    pub leaked: Vec<u32>,
    /// Descendants that had left the group and were found by the escapee sweep (killed).
    pub escaped: Vec<u32>,
    /// Pids that survived every SIGKILL round.
    pub survivors: Vec<u32>,
}
