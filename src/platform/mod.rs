//! The thin I/O layer shared by the commands and the actors, and the only code that talks to
//! the operating system: durable file writes, `/proc` reads, directory locks, workspace
//! discovery, spawning, signalling, and the threads that do blocking writes. Decisions stay in
//! `domain`; this layer only touches the operating system and reports what it found.

pub(crate) mod activity_sampler;
pub(crate) mod console;
pub(crate) mod descendant_sweep;
pub(crate) mod durable;
pub(crate) mod event_log;
pub(crate) mod git;
pub(crate) mod helper_process;
pub(crate) mod helper_registry;
pub(crate) mod job_control;
pub(crate) mod locate;
pub(crate) mod locks;
pub(crate) mod no_follow;
pub(crate) mod notify_socket;
pub(crate) mod pager;
pub(crate) mod proc;
pub(crate) mod process_group;
pub(crate) mod program;
pub(crate) mod regular_file;
pub(crate) mod signal_disposition;
#[cfg(test)]
pub(crate) mod tests;
pub(crate) mod watchdog;
pub(crate) mod watchdog_process;
