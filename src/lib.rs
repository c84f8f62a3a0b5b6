//! ai-session-handler: run a Markdown plan of numbered phases, one fresh agent process per
//! phase, with durable crash-safe state, transcripts and strict result-block validation. The
//! layout of the modules is in docs/architecture.md; only what the binaries, benchmarks, fuzz
//! targets and integration tests use is public.

pub(crate) mod actors;
pub mod cli;
pub mod domain;
pub(crate) mod invocation;
pub(crate) mod platform;
pub(crate) mod report;
pub(crate) mod units;
pub(crate) mod usage;
pub mod wrapper;
