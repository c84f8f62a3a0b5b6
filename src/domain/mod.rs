//! Pure domain logic: no file, process or clock access happens in here. Callers pass in bytes,
//! paths and timestamps; these modules decide. That keeps every rule unit-testable and lets the
//! actors stay thin.

pub mod attempt_id;
pub mod config;
pub mod decision;
pub mod fence;
pub mod identity;
pub mod marker;
pub mod outcome;
pub mod plan;
pub mod plan_key;
pub mod prompt;
pub mod rate_limit;
pub mod retry;
pub mod selection;
pub mod state;
pub mod stop_regex;
pub mod strict_json;
pub mod template;
pub mod timestamp;
