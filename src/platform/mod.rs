//! The thin I/O layer shared by the commands and the actors: durable file writes, `/proc`
//! reads, directory locks and workspace discovery. Decisions stay in `domain`; this layer only
//! touches the operating system and reports what it found.

pub mod console;
pub mod durable;
pub mod locate;
pub mod locks;
pub mod proc;
pub mod process_group;
pub mod spawn;
