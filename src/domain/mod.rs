//! Pure domain logic: no file, process or clock access happens in here. Callers pass in bytes,
//! paths and timestamps; these modules decide. That keeps every rule unit-testable and lets the
//! actors stay thin.

pub(crate) mod attempt_id;
pub(crate) mod attempt_status;
pub mod budget;
pub mod changes;
pub(crate) mod config;
pub(crate) mod decision;
pub(crate) mod display;
pub(crate) mod escalation;
pub(crate) mod events;
pub(crate) mod exit_code;
pub(crate) mod failure;
pub(crate) mod fence;
pub(crate) mod hooks;
pub mod identity;
pub(crate) mod launch;
pub(crate) mod lifecycle;
pub mod liveness;
pub mod marker;
pub mod notify;
pub mod outcome;
pub mod output_stream;
pub mod plan;
pub mod plan_key;
pub mod plan_report;
pub(crate) mod process_tree;
pub(crate) mod prompt;
pub(crate) mod rate_limit;
pub(crate) mod recovery;
pub(crate) mod retry;
pub(crate) mod seconds;
pub(crate) mod selection;
pub mod state;
pub(crate) mod status_text;
pub mod stop_regex;
pub(crate) mod strict_json;
pub(crate) mod suggest;
pub mod tally;
pub mod template;
pub mod timestamp;
pub mod token_usage;
pub(crate) mod transcript;
pub(crate) mod verification;
pub(crate) mod watchdog;
