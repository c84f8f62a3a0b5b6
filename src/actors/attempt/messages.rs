//! What the attempt supervisor is started with and told, by its tasks, its children and the
//! run supervisor, and what the pipe readers hand the output's consumers. Child actors import
//! this file, never the supervisor's (its own task modules, such as `commit.rs`, may).

use std::sync::Arc;

use ractor::{ActorRef, DerivedActorRef, RpcReplyPort};

use super::prepare::{Launch, SetupFailure};
use crate::actors::observer::Emitter;
use crate::actors::state_store::StoreMsg;
use crate::domain::changes::Changes;
use crate::domain::lifecycle::attempt::AttemptEvent;
use crate::domain::lifecycle::run::{AttemptReport, LaunchOrder};
use crate::domain::marker::MarkerVerdict;
use crate::domain::notify::NotifyTally;
use crate::domain::outcome::OutputBytes;
use crate::domain::output_stream::OutputStream;
use crate::domain::plan::Phase;
use crate::domain::stop_regex::StopMatch;
use crate::domain::verification::{CheckOutcome, VerifyCheck};
use crate::domain::watchdog::WatchdogLoss;
use crate::invocation::{PlanSnapshot, RunSettings};
use crate::platform::console::Console;
use crate::platform::locate::PlanLocation;
use crate::platform::proc::ChildSnapshot;

/// Everything one attempt needs, fixed when the run loop orders the launch.
#[derive(Clone)]
pub(crate) struct AttemptSpec {
    pub(crate) run: DerivedActorRef<Box<AttemptReport>>,
    pub(crate) store: ActorRef<StoreMsg>,
    pub(crate) location: Arc<PlanLocation>,
    pub(crate) snapshot: Arc<PlanSnapshot>,
    pub(crate) settings: Arc<RunSettings>,
    pub(crate) phase: Phase,
    pub(crate) execution_workspace: String,
    pub(crate) order: LaunchOrder,
    /// The handler's children before its first worker: never treated as escaped descendants.
    pub(crate) inherited_children: Arc<ChildSnapshot>,
    /// 1-based, for progress.
    pub(crate) phase_index: usize,
    pub(crate) events: Emitter,
    pub(crate) console: Option<Arc<Console>>,
    pub(crate) span: tracing::Span,
}

pub(crate) enum AttemptMsg {
    /// Something that happened to the attempt, fed to its lifecycle machine as it is.
    Event(AttemptEvent),
    /// The preparation task finished: the worker runs, or why it does not.
    Prepared(Box<Result<Launch, SetupFailure>>),
    /// The notification socket was drained and closed: what became of its datagrams.
    NotificationsDrained(NotifyTally),
    /// Once both streams ended.
    Verdict(MarkerVerdict),
    /// The stop scanner's last word once both streams ended: its match, whether found live
    /// or only at the real end of input (`$`, `\z`, a trailing `\b`).
    FinalMatch(Option<StopMatch>),
    /// The trailer was written (or why it could not), with the output's size.
    TrailerWritten {
        error: Option<String>,
        output: OutputBytes,
    },
    /// What the attempt changed in its git work tree (`None` when changes are not recorded).
    ChangesRecorded(Option<Box<Changes>>),
    /// The Verify check job finished a check.
    CheckEnded(Box<EndedCheck>),
    /// The run's watchdog was lost, and replaced or not.
    WatchdogLost(Box<WatchdogLoss>),
}

impl From<AttemptEvent> for AttemptMsg {
    fn from(event: AttemptEvent) -> Self {
        Self::Event(event)
    }
}

pub(crate) struct EndedCheck {
    pub(crate) check: VerifyCheck,
    pub(crate) outcome: CheckOutcome,
    /// It was stopped by the handler (the attempt's stop switch).
    pub(crate) stopped: bool,
}

/// The worker's output as the pipe readers hand it to each of its consumers.
pub(crate) enum Output {
    /// The next bytes of `stream`, shared by the consumers. Each answers `done` once it is
    /// through with them, and the reader reads on only when all have.
    Chunk {
        stream: OutputStream,
        bytes: Arc<Vec<u8>>,
        done: RpcReplyPort<()>,
    },
    /// No more bytes come from `stream`: end of file, a read error, or our read end closed.
    Ended(OutputStream),
}
