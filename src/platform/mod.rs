//! The thin I/O layer shared by the commands and the actors, and the only code that talks to
//! the operating system: durable file writes, `/proc` reads, directory locks, workspace
//! discovery, spawning, signalling, and the threads that do blocking writes. Decisions stay in
//! `domain`; this layer only touches the operating system and reports what it found.

pub mod activity_sampler;
pub mod console;
pub mod descendant_sweep;
pub mod durable;
pub mod event_log;
pub mod file_tail;
pub mod helper_process;
pub mod helper_registry;
pub mod locate;
pub mod locks;
pub mod no_follow;
pub mod notify_socket;
pub mod proc;
pub mod process_group;
pub mod program;
pub mod regular_file;
pub(crate) mod session_spawn;
pub mod signal_disposition;
pub mod spawn;
#[cfg(test)]
mod test_isolation;
pub mod transcript_file;
pub mod verify_check;
pub mod watchdog;
pub(crate) mod watchdog_process;
pub mod worker_child;
pub mod write_thread;
