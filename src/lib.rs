//! ai-session-handler: run a Markdown plan of numbered phases, one fresh agent process per
//! phase, with durable crash-safe state, transcripts and strict result-block validation.
//!
//! # Layout
//!
//! - [`domain`]: pure rules with no I/O — plan parsing, config, command templates, result-block
//!   framing, stop-regex scanning, the state and outcome schemas and their transitions, the
//!   attempt and run lifecycles, prompt rendering, process identity comparison.
//! - `actors`: the ractor supervision tree that executes `run` (docs/architecture.md).
//! - [`cli`]: argument parsing and the `run`, `status`, `check`, `init`, `completions` and
//!   `man` commands, with `report` holding every line a command prints.
//! - `invocation`: loading and validating a command's inputs, shared by the commands.
//! - `platform`: the only code that touches the operating system — durable file writes,
//!   `/proc` reads, directory locks, workspace discovery, spawning, signalling.
//! - [`wrapper`]: the library half of the provider wrapper binaries (`src/bin/`).
//!
//! Only what the binaries, benchmarks, fuzz targets and integration tests use is public.

pub(crate) mod actors;
pub mod cli;
pub mod domain;
pub(crate) mod invocation;
pub(crate) mod platform;
pub(crate) mod report;
pub(crate) mod units;
pub(crate) mod usage;
pub mod wrapper;
