//! The largest inputs a command reads. Each is far beyond any real file of its kind, and
//! small enough that a runaway file (a sparse plan claiming gigabytes, a device behind a
//! symlink) is refused by its size before a byte is read (docs/decisions.md).

/// A plan: Markdown written by people (the largest real plans are tens of KiB).
pub const MAX_PLAN_BYTES: u64 = 16 * 1024 * 1024;
/// The config: a handful of keys.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// `state.json`: about 300 bytes per committed outcome, so room for 200,000 of them.
pub const MAX_STATE_BYTES: u64 = 64 * 1024 * 1024;
/// An outcome record: its summary is a result body (at most 16 MiB) or a diagnostic.
pub const MAX_OUTCOME_BYTES: u64 = 32 * 1024 * 1024;
