//! What recording gathers once the worker's output ended — the marker parser's verdict, the
//! stop scanner's last word, the trailer the transcript writer wrote — each reported on its
//! own; the three together are the lifecycle's [`AttemptEvent::Gathered`].

use ractor::ActorCell;

use super::crew::Crew;
use super::transcript_writer::OutputError;
use crate::domain::changes::Changes;
use crate::domain::lifecycle::attempt::{AttemptEvent, Gathered};
use crate::domain::marker::MarkerVerdict;
use crate::domain::outcome::OutputBytes;
use crate::domain::stop_regex::StopMatch;

/// The findings so far; each is taken once all three are in.
#[derive(Default)]
pub(crate) struct Findings {
    /// Recording started: the trailer was asked for.
    recording: bool,
    verdict: Option<MarkerVerdict>,
    final_match: Option<Option<StopMatch>>,
    trailer_error: Option<Option<String>>,
    /// What the agent wrote, once the trailer is written.
    pub(super) output: OutputBytes,
    /// What the attempt changed in its git work tree, once compared (`Some(None)`: not
    /// recorded).
    changes: Option<Option<Changes>>,
}

impl Findings {
    /// Without stop patterns there is no scanner, and no match to wait for.
    pub(crate) fn no_scanner(&mut self) {
        self.final_match = Some(None);
    }

    /// The writer is asked for the trailer.
    pub(crate) fn start(&mut self) -> Option<AttemptEvent> {
        self.recording = true;
        self.gathered()
    }

    pub(crate) fn verdict(&mut self, verdict: MarkerVerdict) -> Option<AttemptEvent> {
        self.verdict = Some(verdict);
        self.gathered()
    }

    pub(crate) fn final_match(&mut self, found: Option<StopMatch>) -> Option<AttemptEvent> {
        self.final_match = Some(found);
        self.gathered()
    }

    pub(crate) fn trailer(
        &mut self,
        error: Option<String>,
        output: OutputBytes,
    ) -> Option<AttemptEvent> {
        self.trailer_error = Some(error);
        self.output = output;
        self.gathered()
    }

    pub(crate) fn changes(&mut self, changes: Option<Changes>) -> Option<AttemptEvent> {
        self.changes = Some(changes);
        self.gathered()
    }

    /// The changes for the outcome (taken once).
    pub(crate) fn take_changes(&mut self) -> Option<Changes> {
        self.changes.take().flatten()
    }

    /// A consumer of the output failed: it will report nothing, so its finding is what its
    /// absence means.
    pub(crate) fn consumer_failed(&mut self, crew: &Crew, who: &ActorCell) -> Option<AttemptEvent> {
        let id = who.get_id();
        if id == crew.marker.get_id() && self.verdict.is_none() {
            self.verdict = Some(MarkerVerdict::Invalid("marker parser stopped".into()));
        } else if crew
            .scanner
            .as_ref()
            .is_some_and(|scanner| scanner.get_id() == id)
            && self.final_match.is_none()
        {
            self.final_match = Some(None);
        } else if id == crew.writer.get_id() && self.trailer_error.is_none() {
            self.trailer_error = Some(Some(OutputError::WriterStopped.to_string()));
        } else {
            return None;
        }
        self.gathered()
    }

    /// All three findings, once recording started and they are in (and only once).
    fn gathered(&mut self) -> Option<AttemptEvent> {
        if !self.recording
            || self.verdict.is_none()
            || self.final_match.is_none()
            || self.trailer_error.is_none()
            || self.changes.is_none()
        {
            return None;
        }
        Some(AttemptEvent::Gathered(Gathered {
            trailer_error: self.trailer_error.take().flatten(),
            final_match: self.final_match.take().flatten(),
            verdict: self.verdict.take()?,
        }))
    }
}
