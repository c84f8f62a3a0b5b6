//! Black-box tests: the built binaries against fake agents written as shell scripts, one
//! module per area. One test binary for all of them, so the suite links once.

mod common;

mod cli_basics;
mod crash;
#[cfg(feature = "failpoints")]
mod fault_injection;
mod hardening;
mod invalid_inputs;
mod process_lifecycle;
mod recovery;
mod run_results;
mod run_smoke;
mod soak;
mod wrappers;
