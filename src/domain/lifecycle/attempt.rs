//! The attempt lifecycle as a pure state machine: [`AttemptLifecycle::handle`] maps (stage,
//! event) to (stage, effects), which the attempt supervisor executes in order. Every rule on
//! causes, signals, verification and cleanup order lives here (docs/architecture.md, "Attempt
//! lifecycle"; every transition in docs/lifecycle-tables.md).

use std::time::Duration;

use super::GroupReport;
use crate::domain::budget::{BudgetCaps, Spent, unenforceable_message};
use crate::domain::decision::{ChildExit, Decision, IdleStop, StopCause, decide};
use crate::domain::failure::ExecutionFailure;
use crate::domain::marker::MarkerVerdict;
use crate::domain::output_stream::OutputStream;
use crate::domain::state::AttemptStatus;
use crate::domain::stop_regex::{PatternKind, StopMatch};
use crate::domain::token_usage::report::{UsageReport, UsageReportError};
use crate::domain::token_usage::summary::{AttemptUsage, Completeness, ReportEffect, UsageSummary};
use crate::domain::verification::{
    CheckOutcome, Verification, VerifyCheck, VerifyPlan, interrupted_summary, next_check,
    verification_of,
};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum AttemptEvent {
    /// Nothing was launched, nothing changed.
    PreparedRecordFailed,
    /// The worker never ran; `detail` names what could not be set up.
    SetupFailed { detail: String },
    /// exec failed; the transcript notes why.
    LaunchFailed { summary: String },
    /// The worker runs in its own process group; pipes, timers and killer are in place.
    Launched,
    /// The `running` record (pid, pgid, boot id, start time) is durable.
    RunningRecorded,
    /// The worker is stopped and, since nothing more may be written, stays unresolved.
    RunningRecordFailed { detail: String },
    /// The group leader exited on its own and was reaped.
    LeaderExited(ChildExit),
    /// One pipe reached EOF, or reading it failed (`error`).
    StreamEnded {
        stream: OutputStream,
        error: Option<String>,
    },
    /// A stop regex or a rate-limit pattern (its kind says which) matched the output.
    StopRegexMatched(StopMatch),
    /// The limits the deadline timer found passed at the same check.
    DeadlinesPassed {
        timeout: Option<f64>,
        idle: Option<IdleStop>,
    },
    /// A valid `X_AISH_USAGE` report from a process of the attempt.
    UsageReported(UsageReport),
    /// An invalid usage report: ignored and counted, never a failure.
    UsageRejected(UsageReportError),
    /// The notification socket was read to its end and closed, after the group emptied.
    NotificationsDrained,
    /// A stopping signal reached the attempt.
    Interrupt { signal: i32 },
    /// The run's watchdog was lost and none took over.
    Unprotected { detail: String },
    /// The attempt's machinery failed while the worker ran (transcript, reader, an actor).
    Failed(ExecutionFailure),
    /// The killer found the group empty (and swept escaped descendants).
    GroupEmptied(GroupReport),
    /// A timer from [`AttemptEffect::StartTimer`] elapsed.
    TimerElapsed(AttemptTimer),
    /// What [`AttemptEffect::Gather`] found.
    Gathered(Gathered),
    /// The running check ended (passed, failed, timed out, stopped, or could not start).
    CheckEnded(CheckOutcome),
}

/// What recording found once the worker's output ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Gathered {
    pub trailer_error: Option<String>,
    /// A pattern that matched at the real end of input (`$`, `\z`, a trailing `\b`).
    pub final_match: Option<StopMatch>,
    pub verdict: MarkerVerdict,
}

/// What the supervisor must do, in the order returned.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum AttemptEffect {
    CancelDeadlines,
    /// From now on a console that takes no output within a bounded time is dropped, so
    /// cleanup finishes whatever the terminal does.
    BoundConsole,
    /// SIGTERM the group, then SIGKILL after the grace period while any member lives.
    TerminateGroup,
    /// A second interrupt: skip what is left of the grace period.
    KillNow,
    StartTimer(AttemptTimer),
    /// The leader exited on its own: kill what is left of its group as leaked.
    SweepAfterExit,
    /// Read what is still queued on the notification socket, close it, and report
    /// [`AttemptEvent::NotificationsDrained`] (at once when there is none).
    DrainNotifications,
    /// A process outside the group still holds a pipe: close our read ends.
    CloseReaders,
    /// Write the trailer; report it with the verdicts as [`AttemptEvent::Gathered`].
    Gather(RecordingInput),
    /// Write the outcome and commit it (noting a launch error in the transcript first).
    Commit(Conclusion),
    /// A state write after preparation failed: write nothing more, report the outcome.
    LeaveUnresolved {
        conclusion: Conclusion,
        failure: ExecutionFailure,
        /// The failure is also what decided the outcome (its words are the summary).
        decided: bool,
    },
    ConcludeNotPrepared,
    /// Run this check and report how it ended as [`AttemptEvent::CheckEnded`].
    RunCheck(VerifyCheck),
    /// SIGTERM the check's group, the grace period, then SIGKILL.
    StopCheck,
    KillCheckNow,
    /// Stream the changed usage (a `usage` event, rate-limited by `token_usage::publication`).
    PublishUsage(UsageSummary),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttemptTimer {
    /// After the leader's own exit, how long its pipes may stay open before what is left of
    /// its group is killed as leaked.
    LeakGrace,
    /// Once the group is empty, how long EOF and the notification drain may take before our
    /// read ends are closed anyway (a process that left the group can still hold a pipe).
    DrainLimit,
}

impl AttemptTimer {
    pub(crate) fn duration(self) -> Duration {
        match self {
            Self::LeakGrace => crate::domain::escalation::LEAK_GRACE,
            Self::DrainLimit => crate::domain::escalation::DRAIN_LIMIT,
        }
    }
}

/// What the transcript trailer needs from the worker's end.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RecordingInput {
    /// Unknown when the leader's status never arrived (stuck in an uninterruptible sleep).
    pub exit: ChildExit,
    pub group: GroupReport,
    /// Our read ends were closed while something outside the group still held a pipe.
    pub pipes_held_open: bool,
    /// The runner's own lines about the attempt (an invalid usage report's warning).
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Conclusion {
    pub decision: Decision,
    pub exit: ChildExit,
    pub launch_error: Option<String>,
    /// What the checks came to (or that `--no-verify` skipped them); `None` when none was due.
    pub verification: Option<Verification>,
    pub usage: UsageSummary,
    /// A cap is set and the worker reported no usage ([`unenforceable_message`]).
    pub budget_note: Option<String>,
}

const UNKNOWN_EXIT: ChildExit = ChildExit {
    code: None,
    signal: None,
};

/// Where the attempt is; each stage carries what only it needs.
#[derive(Clone, Debug, PartialEq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub(crate) enum Stage {
    /// Until the group exists, interrupts and the watchdog's loss are held.
    Preparing {
        deferred: Vec<i32>,
        unprotected: Option<String>,
    },
    /// The worker runs; the first trigger decides the cause.
    Running,
    /// The leader exited on its own; waiting for both pipes to close or the leak grace.
    Sweeping {
        exit: ChildExit,
        grace_elapsed: bool,
        sweep_requested: bool,
    },
    /// The killer is stopping the group.
    Stopping { exit: Option<ChildExit> },
    /// The group is empty; waiting for EOF on both pipes, the leader's status and the drain.
    Draining {
        exit: Option<ChildExit>,
        group: GroupReport,
        pipes_held_open: bool,
    },
    /// Trailer and verdicts are being gathered.
    Recording { exit: ChildExit },
    /// The checks run one at a time against the completion `decision`; the last of
    /// `outcomes`' checks is running.
    Verifying {
        exit: ChildExit,
        decision: Decision,
        outcomes: Vec<CheckOutcome>,
        stop_requested: bool,
    },
    /// The outcome is decided (or nothing was prepared).
    Done,
}

impl Default for Stage {
    fn default() -> Self {
        Self::Preparing {
            deferred: Vec::new(),
            unprotected: None,
        }
    }
}

impl Stage {
    pub(crate) fn name(&self) -> &'static str {
        self.into()
    }

    /// Cleanup has started: a later trigger is only noted.
    fn cleaning_up(&self) -> bool {
        matches!(
            self,
            Self::Sweeping { .. } | Self::Stopping { .. } | Self::Draining { .. }
        )
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct AttemptLifecycle {
    stage: Stage,
    /// What stopped the attempt early (or was found while recording); decides the outcome.
    cause: Option<StopCause>,
    interrupts: u32,
    kill_now_sent: bool,
    /// Which pipes reached EOF (or had our read ends closed), indexed by `OutputStream as usize`.
    closed: [bool; 2],
    /// Recording waits for the `running` record's write to report, because after a failed
    /// state write nothing more may be written for the attempt.
    running_record_settled: bool,
    /// The failure of a state write after preparation; nothing more is written.
    unresolved: Option<ExecutionFailure>,
    verify: VerifyPlan,
    usage: AttemptUsage,
    budget: BudgetCaps,
    spent_before: Spent,
    /// The warnings about the first invalid usage report and the first final one lower than
    /// what was counted, for the transcript.
    usage_notes: Vec<String>,
    notifications_drained: bool,
}

impl AttemptLifecycle {
    pub(crate) fn configured(verify: VerifyPlan, budget: BudgetCaps, spent_before: Spent) -> Self {
        Self {
            verify,
            budget,
            spent_before,
            ..Self::default()
        }
    }

    pub(crate) fn stage(&self) -> &Stage {
        &self.stage
    }

    pub(crate) fn cause(&self) -> Option<&StopCause> {
        self.cause.as_ref()
    }

    /// Applies one event and returns the effects to execute, in order.
    pub(crate) fn handle(&mut self, event: AttemptEvent) -> Vec<AttemptEffect> {
        let mut effects = Vec::new();
        self.apply(event, &mut effects);
        self.advance(&mut effects);
        effects
    }

    fn apply(&mut self, event: AttemptEvent, effects: &mut Vec<AttemptEffect>) {
        if self.stage == Stage::Done {
            return;
        }
        match event {
            AttemptEvent::PreparedRecordFailed => {
                if matches!(self.stage, Stage::Preparing { .. }) {
                    self.stage = Stage::Done;
                    effects.push(AttemptEffect::ConcludeNotPrepared);
                }
            }
            AttemptEvent::SetupFailed { detail } => {
                if let Stage::Preparing { deferred, .. } = &self.stage {
                    let deferred = deferred.clone();
                    self.note_cause(StopCause::ExecutionIo(ExecutionFailure::Setup { detail }));
                    self.conclude_without_worker(deferred, None, effects);
                }
            }
            AttemptEvent::LaunchFailed { summary } => {
                if let Stage::Preparing { deferred, .. } = &self.stage {
                    let deferred = deferred.clone();
                    self.conclude_without_worker(deferred, Some(summary), effects);
                }
            }
            AttemptEvent::Launched => {
                if let Stage::Preparing {
                    deferred,
                    unprotected,
                } = &mut self.stage
                {
                    let deferred = std::mem::take(deferred);
                    let unprotected = unprotected.take();
                    self.stage = Stage::Running;
                    for signal in deferred {
                        self.interrupt(signal, effects);
                    }
                    if let Some(detail) = unprotected {
                        self.fail(ExecutionFailure::Unprotected { detail }, effects);
                    }
                }
            }
            AttemptEvent::RunningRecorded => {
                if self.worker_launched() {
                    self.running_record_settled = true;
                }
            }
            AttemptEvent::RunningRecordFailed { detail } => {
                if self.worker_launched() && !self.running_record_settled {
                    let failure = ExecutionFailure::RunningRecord { detail };
                    self.running_record_settled = true;
                    self.unresolved = Some(failure.clone());
                    self.trigger(StopCause::ExecutionIo(failure), effects);
                }
            }
            AttemptEvent::LeaderExited(exit) => self.leader_exited(exit, effects),
            AttemptEvent::StreamEnded { stream, error } => {
                if !self.worker_launched() {
                    return;
                }
                self.closed[stream as usize] = true;
                if let Some(detail) = error {
                    let failure = ExecutionFailure::PipeRead { stream, detail };
                    self.trigger(StopCause::ExecutionIo(failure), effects);
                }
            }
            AttemptEvent::StopRegexMatched(found) => self.trigger(pattern_cause(found), effects),
            AttemptEvent::DeadlinesPassed { timeout, idle } => {
                // The wall-clock limit wins a tie: it is the one the caller set for the whole
                // attempt, and its message is the stronger statement.
                let cause = match (timeout, idle) {
                    (Some(seconds), _) => StopCause::Timeout { seconds },
                    (None, Some(idle)) => StopCause::IdleTimeout(idle),
                    (None, None) => return,
                };
                self.trigger(cause, effects);
            }
            // Reports come from the worker's processes: only while they may live.
            AttemptEvent::UsageReported(report) => {
                if self.worker_launched() {
                    self.usage_reported(report, effects);
                }
            }
            AttemptEvent::UsageRejected(error) => {
                if self.worker_launched()
                    && let Some(warning) = self.usage.invalid(&error)
                {
                    self.usage_notes.push(warning);
                }
            }
            AttemptEvent::NotificationsDrained => {
                if matches!(self.stage, Stage::Draining { .. }) {
                    self.notifications_drained = true;
                }
            }
            AttemptEvent::Failed(failure) => self.fail(failure, effects),
            AttemptEvent::Interrupt { signal } => match &mut self.stage {
                Stage::Preparing { deferred, .. } => deferred.push(signal),
                Stage::Verifying { .. } => self.interrupt_check(signal, effects),
                _ => self.interrupt(signal, effects),
            },
            AttemptEvent::Unprotected { detail } => match &mut self.stage {
                Stage::Preparing { unprotected, .. } => {
                    unprotected.get_or_insert(detail);
                }
                _ => self.fail(ExecutionFailure::Unprotected { detail }, effects),
            },
            AttemptEvent::GroupEmptied(group) => {
                let exit = match &self.stage {
                    Stage::Stopping { exit } => *exit,
                    Stage::Sweeping {
                        exit,
                        sweep_requested: true,
                        ..
                    } => Some(*exit),
                    // A second interrupt can make the killer stop the group of a leader that
                    // exited before the sweep was asked for.
                    Stage::Sweeping { exit, .. } if self.kill_now_sent => Some(*exit),
                    _ => return,
                };
                self.stage = Stage::Draining {
                    exit,
                    group,
                    pipes_held_open: false,
                };
                effects.push(AttemptEffect::StartTimer(AttemptTimer::DrainLimit));
                effects.push(AttemptEffect::DrainNotifications);
            }
            AttemptEvent::TimerElapsed(AttemptTimer::LeakGrace) => {
                if let Stage::Sweeping { grace_elapsed, .. } = &mut self.stage {
                    *grace_elapsed = true;
                }
            }
            AttemptEvent::TimerElapsed(AttemptTimer::DrainLimit) => {
                if let Stage::Draining {
                    exit,
                    pipes_held_open,
                    ..
                } = &mut self.stage
                {
                    if self.closed != [true; 2] {
                        *pipes_held_open = true;
                        self.closed = [true; 2];
                        effects.push(AttemptEffect::CloseReaders);
                    }
                    // No status can come any more: the leader is stuck (uninterruptible
                    // sleep); it is recorded as unknown.
                    exit.get_or_insert(UNKNOWN_EXIT);
                    // A drain that did not end within the limit is not waited for either.
                    self.notifications_drained = true;
                }
            }
            AttemptEvent::Gathered(gathered) => {
                if let Stage::Recording { exit } = self.stage {
                    self.gathered(exit, gathered, effects);
                }
            }
            AttemptEvent::CheckEnded(outcome) => {
                if let Stage::Verifying {
                    exit,
                    decision,
                    outcomes,
                    ..
                } = &mut self.stage
                {
                    outcomes.push(outcome);
                    let (exit, decision, outcomes) = (*exit, decision.clone(), outcomes.clone());
                    self.check_ended(exit, decision, outcomes, effects);
                }
            }
        }
    }

    /// Moves on when the current stage's conditions are met.
    fn advance(&mut self, effects: &mut Vec<AttemptEffect>) {
        match &mut self.stage {
            Stage::Sweeping {
                grace_elapsed,
                sweep_requested,
                ..
            } if !*sweep_requested && (self.closed == [true; 2] || *grace_elapsed) => {
                *sweep_requested = true;
                effects.push(AttemptEffect::SweepAfterExit);
            }
            Stage::Draining {
                exit: Some(exit),
                group,
                pipes_held_open,
            } if self.closed == [true; 2]
                && self.running_record_settled
                && self.notifications_drained =>
            {
                let input = RecordingInput {
                    exit: *exit,
                    group: std::mem::take(group),
                    pipes_held_open: *pipes_held_open,
                    notes: self.usage_notes.clone(),
                };
                self.stage = Stage::Recording { exit: *exit };
                effects.push(AttemptEffect::Gather(input));
            }
            _ => {}
        }
    }

    /// The worker was launched and its attempt is not being recorded yet.
    fn worker_launched(&self) -> bool {
        !matches!(
            self.stage,
            Stage::Preparing { .. }
                | Stage::Recording { .. }
                | Stage::Verifying { .. }
                | Stage::Done
        )
    }

    /// The first trigger while running becomes the cause and starts stopping the group; during
    /// cleanup a trigger decides the outcome only if nothing did yet.
    fn trigger(&mut self, cause: StopCause, effects: &mut Vec<AttemptEffect>) {
        match &self.stage {
            Stage::Running => {
                self.cause = Some(cause);
                self.stage = Stage::Stopping { exit: None };
                effects.push(AttemptEffect::CancelDeadlines);
                effects.push(AttemptEffect::BoundConsole);
                effects.push(AttemptEffect::TerminateGroup);
            }
            stage if stage.cleaning_up() => self.note_cause(cause),
            _ => {}
        }
    }

    /// An interrupt decides the outcome even while the group is already being stopped for
    /// another cause; cleanup goes on unchanged. A second one skips the grace period.
    fn interrupt(&mut self, signal: i32, effects: &mut Vec<AttemptEffect>) {
        self.interrupts += 1;
        let recording = matches!(self.stage, Stage::Recording { .. });
        match self.cause.take() {
            Some(earlier @ StopCause::Interrupted { .. }) => self.cause = Some(earlier),
            // While recording only an interrupt still decides: the outcome must agree with
            // the exit code the signal implies.
            earlier if recording || (earlier.is_some() && self.stage.cleaning_up()) => {
                self.cause = Some(StopCause::Interrupted {
                    signal,
                    during: earlier.map(Box::new),
                });
            }
            cause => {
                self.cause = cause;
                let interrupted = StopCause::Interrupted {
                    signal,
                    during: None,
                };
                self.trigger(interrupted, effects);
            }
        }
        // Skipping the grace period means something only while the group may have members.
        let group_may_live = matches!(self.stage, Stage::Sweeping { .. } | Stage::Stopping { .. });
        if self.interrupts > 1 && !self.kill_now_sent && group_may_live {
            self.kill_now_sent = true;
            effects.push(AttemptEffect::KillNow);
        }
    }

    fn leader_exited(&mut self, exit: ChildExit, effects: &mut Vec<AttemptEffect>) {
        match &mut self.stage {
            Stage::Running => {
                self.stage = Stage::Sweeping {
                    exit,
                    grace_elapsed: false,
                    sweep_requested: false,
                };
                effects.push(AttemptEffect::CancelDeadlines);
                effects.push(AttemptEffect::BoundConsole);
                effects.push(AttemptEffect::StartTimer(AttemptTimer::LeakGrace));
            }
            Stage::Stopping { exit: known } | Stage::Draining { exit: known, .. } => {
                *known = Some(exit)
            }
            _ => {}
        }
    }

    /// While a check runs, a failure stops the check and decides (the verdict would rest on
    /// a record with a hole, or the check outlive a SIGKILLed handler); else it is a trigger.
    fn fail(&mut self, failure: ExecutionFailure, effects: &mut Vec<AttemptEffect>) {
        let cause = StopCause::ExecutionIo(failure);
        if matches!(self.stage, Stage::Verifying { .. }) {
            self.note_cause(cause);
            self.stop_check(effects);
        } else {
            self.trigger(cause, effects);
        }
    }

    /// A cause found during cleanup or recording decides only if nothing decided before.
    fn note_cause(&mut self, cause: StopCause) {
        if self.cause.is_none() {
            self.cause = Some(cause);
        }
    }

    /// Recording's findings decide what nothing decided before: first a trailer that could
    /// not be written (the record would be incomplete), then a pattern at the end of input.
    fn gathered(&mut self, exit: ChildExit, gathered: Gathered, effects: &mut Vec<AttemptEffect>) {
        if let Some(detail) = gathered.trailer_error {
            self.note_cause(StopCause::ExecutionIo(ExecutionFailure::Trailer { detail }));
        }
        if let Some(found) = gathered.final_match {
            self.note_cause(pattern_cause(found));
        }
        let decision = decide(self.cause.as_ref(), exit, gathered.verdict);
        self.verify_or_conclude(decision, exit, effects);
    }

    /// A completion is held to the phase's checks: the first one runs now. Any other
    /// decision, or a completion whose outcome cannot be committed, concludes at once.
    fn verify_or_conclude(
        &mut self,
        decision: Decision,
        exit: ChildExit,
        effects: &mut Vec<AttemptEffect>,
    ) {
        let completed = decision.status == AttemptStatus::PhaseComplete;
        let verification = match &self.verify {
            VerifyPlan::Run(checks) if completed && self.unresolved.is_none() => {
                if let Some(first) = checks.first() {
                    effects.push(AttemptEffect::RunCheck(first.clone()));
                    self.stage = Stage::Verifying {
                        exit,
                        decision,
                        outcomes: Vec::new(),
                        stop_requested: false,
                    };
                    return;
                }
                None
            }
            VerifyPlan::Skip if completed => Some(Verification::Skipped),
            _ => None,
        };
        self.conclude(decision, exit, None, verification, true, effects);
    }

    /// A check ended: a stop concludes with the checks that ran; else the next check runs, or
    /// the verdict concludes (the first failure makes it `verification-failed`).
    fn check_ended(
        &mut self,
        exit: ChildExit,
        decision: Decision,
        outcomes: Vec<CheckOutcome>,
        effects: &mut Vec<AttemptEffect>,
    ) {
        let checks = self.verify.checks().to_vec();
        if let Some(cause) = self.cause.clone() {
            let records = checks
                .iter()
                .zip(&outcomes)
                .map(|(check, outcome)| outcome.record(check))
                .collect();
            let decision = match (&cause, checks.get(outcomes.len().saturating_sub(1))) {
                (StopCause::Interrupted { signal, .. }, Some(check)) => Decision {
                    status: AttemptStatus::Interrupted,
                    summary: interrupted_summary(*signal, check, &decision.summary),
                },
                _ => decide(Some(&cause), exit, MarkerVerdict::Missing(String::new())),
            };
            let verification = Some(Verification::Stopped(records));
            return self.conclude(decision, exit, None, verification, true, effects);
        }
        if let Some(next) = next_check(&checks, &outcomes) {
            effects.push(AttemptEffect::RunCheck(next.clone()));
            if let Stage::Verifying { stop_requested, .. } = &mut self.stage {
                *stop_requested = false;
            }
            return;
        }
        let verification = verification_of(&checks, &outcomes);
        let decision = match &verification {
            Some(Verification::Failed { .. }) => Decision {
                status: AttemptStatus::VerificationFailed,
                summary: decision.summary,
            },
            _ => decision,
        };
        self.conclude(decision, exit, None, verification, true, effects);
    }

    /// An interrupt while a check runs decides the outcome (keeping an earlier cause in its
    /// record) and stops the check; a second one skips its grace period.
    fn interrupt_check(&mut self, signal: i32, effects: &mut Vec<AttemptEffect>) {
        self.interrupts += 1;
        self.cause = Some(match self.cause.take() {
            Some(earlier @ StopCause::Interrupted { .. }) => earlier,
            earlier => StopCause::Interrupted {
                signal,
                during: earlier.map(Box::new),
            },
        });
        self.stop_check(effects);
    }

    /// Asks the running check to stop once; a second interrupt then skips its grace period.
    fn stop_check(&mut self, effects: &mut Vec<AttemptEffect>) {
        let Stage::Verifying { stop_requested, .. } = &mut self.stage else {
            return;
        };
        if !*stop_requested {
            *stop_requested = true;
            effects.push(AttemptEffect::StopCheck);
        } else if self.interrupts > 1 && !self.kill_now_sent {
            self.kill_now_sent = true;
            effects.push(AttemptEffect::KillCheckNow);
        }
    }

    /// A valid report is folded in and, when it changed the usage, streamed; while the worker
    /// runs, a running one that reaches a cap stops the attempt. A final one never does: its
    /// spending is over and stopping would only throw its result away (the cap stops the run
    /// before the next launch instead).
    fn usage_reported(&mut self, report: UsageReport, effects: &mut Vec<AttemptEffect>) {
        let running = !report.is_final;
        match self.usage.report(report) {
            ReportEffect::Changed => {}
            ReportEffect::Unchanged => return,
            // Counted as before, but it may have made the usage final.
            ReportEffect::LowerFinal(warning) => self.usage_notes.extend(warning),
        }
        effects.push(AttemptEffect::PublishUsage(self.usage.summary()));
        if !running || self.stage != Stage::Running {
            return;
        }
        let spent = match self.usage.live() {
            Some(live) => self.spent_before.plus(live),
            None => return,
        };
        if let Some(reached) = self.budget.reached(spent) {
            self.trigger(StopCause::BudgetExceeded(reached), effects);
        }
    }

    /// The worker never ran: a held interrupt still decides the outcome (the handler exits
    /// 128 + signal), then a setup failure, then the launch error.
    fn conclude_without_worker(
        &mut self,
        deferred: Vec<i32>,
        launch_error: Option<String>,
        effects: &mut Vec<AttemptEffect>,
    ) {
        self.stage = Stage::Recording { exit: UNKNOWN_EXIT };
        for signal in deferred {
            self.interrupt(signal, effects);
        }
        let decision = match (&self.cause, &launch_error) {
            (None, Some(summary)) => Decision {
                status: AttemptStatus::LaunchFailed,
                summary: summary.clone(),
            },
            (cause, _) => decide(
                cause.as_ref(),
                UNKNOWN_EXIT,
                MarkerVerdict::Missing(String::new()),
            ),
        };
        self.conclude(decision, UNKNOWN_EXIT, launch_error, None, false, effects);
    }

    /// Commit the outcome, or leave it unresolved after a failed state write.
    fn conclude(
        &mut self,
        decision: Decision,
        exit: ChildExit,
        launch_error: Option<String>,
        verification: Option<Verification>,
        worker_ran: bool,
        effects: &mut Vec<AttemptEffect>,
    ) {
        self.stage = Stage::Done;
        let usage = self.usage.summary();
        // A worker that never ran spent nothing: there is nothing the cap missed.
        let budget_note = (worker_ran && usage.completeness == Completeness::Unknown)
            .then(|| unenforceable_message(&self.budget))
            .flatten();
        let conclusion = Conclusion {
            decision,
            exit,
            launch_error,
            verification,
            usage,
            budget_note,
        };
        match self.unresolved.take() {
            Some(failure) => {
                let decided = matches!(
                    &self.cause,
                    Some(StopCause::ExecutionIo(
                        ExecutionFailure::RunningRecord { .. }
                    ))
                );
                effects.push(AttemptEffect::LeaveUnresolved {
                    conclusion,
                    failure,
                    decided,
                });
            }
            None => effects.push(AttemptEffect::Commit(conclusion)),
        }
    }
}

fn pattern_cause(found: StopMatch) -> StopCause {
    let pattern = found.pattern;
    match found.kind {
        PatternKind::StopRegex => StopCause::StopRegex { pattern },
        PatternKind::RateLimit => StopCause::RateLimited { pattern },
    }
}

#[cfg(test)]
mod tests;
