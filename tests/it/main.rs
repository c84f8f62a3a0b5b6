//! Black-box tests: the built binaries against fake agents written as shell scripts, one
//! module per area. One test binary for all of them, so the suite links once.

mod common;

mod answer;
mod budgets;
mod cli_basics;
mod completions;
mod crash;
#[cfg(feature = "failpoints")]
mod fault_injection;
mod hardening;
mod hook_processes;
mod hooks;
mod hostile;
mod invalid_inputs;
mod liveness;
mod newcomer;
mod next_step;
mod notify_hardening;
mod observability;
mod process_lifecycle;
mod progress_and_events;
mod recovery;
mod replay_launcher;
mod report;
mod run_results;
mod run_smoke;
mod setup;
mod soak;
mod stopped_handler;
mod stream_and_tail_edges;
mod terminal;
mod unattended;
mod verification;
mod wrapper_replay;
mod wrappers;
