//! Liveness (issue 18): whether an attempt is really stuck, and what it says it is doing.
//!
//! An attempt shows a **sign of life** ([`SignOfLife`]) when
//!
//! - it writes output on either stream;
//! - one of its processes sends an accepted notification ([`crate::domain::notify`]);
//! - its processes are visibly working while it is silent ([`activity`]): CPU, I/O, or bytes
//!   arriving on their TCP sockets (a model streaming into a CLI that prints nothing).
//!
//! The idle timeout stops an attempt after `--idle-timeout` seconds without one ([`idle`]);
//! `EXTEND_TIMEOUT_USEC` moves that deadline. What the agent says it is doing (`STATUS=`),
//! and when to publish it, is [`status`]. The deadline timer of a running attempt steps all of
//! them, with the wall-clock `--timeout`, as one machine ([`clock`]). docs/liveness.md has the
//! rules and the measurements behind the activity thresholds.

pub mod activity;
pub mod clock;
pub mod idle;
pub mod membership;
pub mod socket_diag;
pub mod status;

/// What the last sign of life was (`output`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum SignOfLife {
    /// Bytes on stdout or stderr.
    Output,
    /// An accepted notification datagram.
    Notification,
    /// Visible work of the attempt's processes.
    Activity,
}

impl SignOfLife {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}
