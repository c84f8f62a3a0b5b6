//! Liveness: whether an attempt is really stuck (no output, accepted notification or visible
//! activity for `--idle-timeout`), and what it says it is doing. docs/liveness.md has the
//! rules and the measurements behind the activity thresholds; [`clock`] steps them all, with
//! the wall-clock `--timeout`, as the one machine the deadline timer drives.

pub mod activity;
pub mod clock;
pub mod idle;
pub mod membership;
pub mod socket_diag;
pub mod status;
