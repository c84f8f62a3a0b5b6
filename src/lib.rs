//! ai-session-handler: run a Markdown plan of numbered phases, one fresh agent process per
//! phase, with durable crash-safe state, transcripts and strict result-block validation.
//!
//! # Layout
//!
//! - [`domain`]: pure rules with no I/O — plan parsing, config, command templates, result-block
//!   framing, stop-regex scanning, the state and outcome schemas and their transitions, prompt
//!   rendering, process identity comparison. Everything here is unit-tested in place.
//! - [`actors`]: the ractor supervision tree that executes `run` (see `docs/architecture.md`).
//! - [`cli`]: argument parsing and the `run`, `status`, `check` and `init` commands.
//! - [`platform`]: the thin I/O layer the commands and actors share — durable file writes,
//!   `/proc` reads, directory locks, workspace discovery.
//! - [`wrapper`]: the library half of the provider wrapper binaries (`src/bin/`).

pub mod actors;
pub mod cli;
pub mod domain;
pub mod invocation;
pub mod platform;
pub mod report;
pub mod wrapper;
