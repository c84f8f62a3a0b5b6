//! The phase loop of one `run` as pure rules: what happens at each checkpoint between
//! attempts, when the loop continues, and which exit code ends it. The run supervisor gathers
//! the facts (the next pending phase, whether the plan file still matches) and executes the
//! answer.
//!
//! - A signal caught while no attempt runs stops the loop before the next launch; one caught
//!   during an attempt is the attempt's business, and the loop then stops after it.
//! - Before every launch after the first, and before reporting completion or the phase limit,
//!   the plan file is re-hashed: an edit stops the run (see docs/state-and-recovery.md).
//! - `--max-phases N` stops after N completed phases, but only while phases remain; a run that
//!   completes the plan reports completion.
//! - The first signal decides the exit code (128 + signal) whatever the attempt recorded. A
//!   signal that arrives after the attempt's outcome was decided (while it is committed) never
//!   rewrites that outcome: it is committed as decided, a retry it scheduled stays scheduled,
//!   and the loop launches nothing more.
//! - A stopped phase whose retry the policy scheduled is waited for (backoff, rate-limit
//!   reset) and run again instead of ending the run; a signal during that wait ends the run
//!   at once, with the state as last committed (the schedule stays in it for a later run).

use crate::domain::exit_code::ExitCode;
use crate::domain::state::AttemptStatus;

/// What to do at a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checkpoint {
    /// A signal arrived while no attempt ran: launch nothing more. `plan_complete` when
    /// nothing was left to launch anyway (the signal came after the last commit).
    Interrupted { signal: i32, plan_complete: bool },
    /// Every phase is complete.
    AllComplete,
    /// The phase limit is reached and phases remain.
    PhaseLimitReached { last_completed: String },
    /// Run this phase next.
    Launch { phase_id: String },
}

/// What follows a concluded attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterAttempt {
    /// The phase completed: go to the next checkpoint.
    Continue,
    /// The retry policy scheduled the phase again: wait until it is due, then the checkpoint.
    AwaitRetry,
    /// The run ends with this exit code.
    Stop(ExitCode),
}

/// How an attempt ended, as far as the loop is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptEnd {
    /// The outcome is durably committed with this status; `retry_scheduled` when the retry
    /// policy scheduled the phase's next attempt in the same write.
    Committed {
        status: AttemptStatus,
        retry_scheduled: bool,
    },
    /// Nothing was prepared, or the outcome could not be committed.
    NotCommitted,
}

/// What a caught signal does now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalAction {
    /// An attempt runs: it decides (see the attempt lifecycle); the loop stops after it.
    ForwardToAttempt,
    /// The loop waits for a scheduled retry: the run ends at once.
    StopNow(ExitCode),
    /// Between steps: the next checkpoint launches nothing.
    StopAtCheckpoint,
}

/// The loop's progress through one invocation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunLoop {
    max_phases: Option<u64>,
    completed_this_run: u64,
    last_completed: Option<String>,
    launched: bool,
    attempt_running: bool,
    waiting_for_retry: bool,
    first_signal: Option<i32>,
}

impl RunLoop {
    pub fn new(max_phases: Option<u64>) -> Self {
        Self {
            max_phases,
            ..Self::default()
        }
    }

    /// Remembers a caught signal (the first one decides the exit code) and says what it does.
    pub fn signal_caught(&mut self, signal: i32) -> SignalAction {
        let first = *self.first_signal.get_or_insert(signal);
        if self.attempt_running {
            SignalAction::ForwardToAttempt
        } else if self.waiting_for_retry {
            SignalAction::StopNow(ExitCode::Signal(first))
        } else {
            SignalAction::StopAtCheckpoint
        }
    }

    /// The loop waits for a scheduled attempt (one just scheduled, or one resumed from state).
    pub fn awaiting_retry(&mut self) {
        self.waiting_for_retry = true;
    }

    /// The scheduled attempt is due: the next checkpoint launches it.
    pub fn retry_due(&mut self) {
        self.waiting_for_retry = false;
    }

    /// Phases completed in this invocation.
    #[cfg(test)]
    pub fn completed_this_run(&self) -> u64 {
        self.completed_this_run
    }

    /// Whether the plan file must be re-hashed before acting on `checkpoint`: the snapshot
    /// serves the first launch; every later launch and every completion report checks that the
    /// file still matches.
    pub fn plan_check_required(&self, checkpoint: &Checkpoint) -> bool {
        self.launched && !matches!(checkpoint, Checkpoint::Interrupted { .. })
    }

    /// Decides the checkpoint, given the next pending phase (`None`: every phase is complete).
    pub fn checkpoint(&self, next_pending: Option<&str>) -> Checkpoint {
        if let Some(signal) = self.first_signal {
            return Checkpoint::Interrupted {
                signal,
                plan_complete: next_pending.is_none(),
            };
        }
        let Some(phase_id) = next_pending else {
            return Checkpoint::AllComplete;
        };
        if let (Some(limit), Some(last)) = (self.max_phases, &self.last_completed)
            && self.completed_this_run >= limit
        {
            return Checkpoint::PhaseLimitReached {
                last_completed: last.clone(),
            };
        }
        Checkpoint::Launch {
            phase_id: phase_id.to_owned(),
        }
    }

    /// An attempt was started.
    pub fn attempt_started(&mut self) {
        self.launched = true;
        self.attempt_running = true;
    }

    /// Books a concluded attempt and decides whether the loop goes on.
    pub fn attempt_concluded(&mut self, phase_id: &str, end: AttemptEnd) -> AfterAttempt {
        self.attempt_running = false;
        match end {
            AttemptEnd::Committed {
                status: AttemptStatus::PhaseComplete,
                ..
            } => {
                self.completed_this_run += 1;
                self.last_completed = Some(phase_id.to_owned());
                // A signal caught meanwhile stops the loop at the next checkpoint.
                AfterAttempt::Continue
            }
            // The schedule is durable: a signal ends the run now, and a later run resumes it.
            AttemptEnd::Committed {
                retry_scheduled: true,
                ..
            } if self.first_signal.is_none() => {
                self.waiting_for_retry = true;
                AfterAttempt::AwaitRetry
            }
            AttemptEnd::Committed { status, .. } => AfterAttempt::Stop(self.exit_code(status)),
            AttemptEnd::NotCommitted => {
                AfterAttempt::Stop(self.exit_code(AttemptStatus::ExecutionIoFailed))
            }
        }
    }

    /// The signal that ends the run although the committed attempt was not interrupted: it
    /// arrived after the attempt's outcome was decided (an interrupt before that decides the
    /// outcome as `interrupted`). The outcome stands as decided; the loop stops with
    /// 128 + the signal.
    pub fn signal_after_decision(&self, status: AttemptStatus) -> Option<i32> {
        self.first_signal
            .filter(|_| status != AttemptStatus::Interrupted)
    }

    /// The exit code for an attempt status: a caught signal takes precedence.
    pub fn exit_code(&self, status: AttemptStatus) -> ExitCode {
        match self.first_signal {
            Some(signal) => ExitCode::Signal(signal),
            None => ExitCode::for_status(status),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_loop_launches_the_next_phase_without_a_plan_check() {
        let run = RunLoop::new(None);
        let checkpoint = run.checkpoint(Some("phase-1"));
        assert_eq!(
            checkpoint,
            Checkpoint::Launch {
                phase_id: "phase-1".into()
            }
        );
        assert!(!run.plan_check_required(&checkpoint));
    }

    #[test]
    fn nothing_pending_is_completion() {
        assert_eq!(RunLoop::new(None).checkpoint(None), Checkpoint::AllComplete);
    }

    #[test]
    fn later_checkpoints_re_hash_the_plan() {
        let mut run = RunLoop::new(None);
        run.attempt_started();
        for next in [Some("phase-2"), None] {
            assert!(run.plan_check_required(&run.checkpoint(next)));
        }
    }

    #[test]
    fn a_signal_stops_the_loop_before_any_launch_and_without_a_plan_check() {
        let mut run = RunLoop::new(None);
        run.attempt_started();
        run.attempt_concluded(
            "phase-1",
            AttemptEnd::Committed {
                status: AttemptStatus::PhaseComplete,
                retry_scheduled: false,
            },
        );
        assert_eq!(run.signal_caught(15), SignalAction::StopAtCheckpoint);
        assert_eq!(run.signal_caught(2), SignalAction::StopAtCheckpoint);
        let checkpoint = run.checkpoint(Some("phase-2"));
        assert_eq!(
            checkpoint,
            Checkpoint::Interrupted {
                signal: 15,
                plan_complete: false
            }
        );
        assert!(!run.plan_check_required(&checkpoint));
        assert_eq!(run.exit_code(AttemptStatus::PhaseComplete).code(), 143);
    }

    #[test]
    fn the_phase_limit_stops_only_while_phases_remain() {
        let mut run = RunLoop::new(Some(1));
        run.attempt_started();
        assert_eq!(
            run.attempt_concluded(
                "phase-1",
                AttemptEnd::Committed {
                    status: AttemptStatus::PhaseComplete,
                    retry_scheduled: false
                }
            ),
            AfterAttempt::Continue
        );
        assert_eq!(
            run.checkpoint(Some("phase-2")),
            Checkpoint::PhaseLimitReached {
                last_completed: "phase-1".into()
            }
        );
        assert_eq!(run.checkpoint(None), Checkpoint::AllComplete);
        assert_eq!(run.completed_this_run(), 1);
    }

    #[test]
    fn a_stopped_phase_ends_the_run_with_its_exit_code() {
        for (status, code) in [
            (AttemptStatus::Blocked, 2),
            (AttemptStatus::NeedsClarification, 3),
            (AttemptStatus::Timeout, 4),
        ] {
            let mut run = RunLoop::new(None);
            assert_eq!(
                run.attempt_concluded(
                    "phase-1",
                    AttemptEnd::Committed {
                        status,
                        retry_scheduled: false
                    }
                ),
                AfterAttempt::Stop(ExitCode::for_status(status))
            );
            assert_eq!(ExitCode::for_status(status).code(), code);
        }
        let mut run = RunLoop::new(None);
        assert_eq!(
            run.attempt_concluded("phase-1", AttemptEnd::NotCommitted),
            AfterAttempt::Stop(ExitCode::AgentFailed)
        );
    }

    #[test]
    fn a_signal_decides_the_exit_code_of_a_stopped_phase() {
        let mut run = RunLoop::new(None);
        run.attempt_started();
        assert_eq!(run.signal_caught(2), SignalAction::ForwardToAttempt);
        assert_eq!(
            run.attempt_concluded(
                "phase-1",
                AttemptEnd::Committed {
                    status: AttemptStatus::Blocked,
                    retry_scheduled: false
                }
            ),
            AfterAttempt::Stop(ExitCode::Signal(2))
        );
    }

    #[test]
    fn a_scheduled_retry_is_awaited_and_a_signal_during_the_wait_ends_the_run_at_once() {
        let mut run = RunLoop::new(None);
        run.attempt_started();
        let missing = AttemptEnd::Committed {
            status: AttemptStatus::MissingMarker,
            retry_scheduled: true,
        };
        assert_eq!(
            run.attempt_concluded("phase-1", missing),
            AfterAttempt::AwaitRetry
        );
        assert_eq!(
            run.signal_caught(2),
            SignalAction::StopNow(ExitCode::Signal(2))
        );

        let mut run = RunLoop::new(None);
        run.attempt_started();
        run.attempt_concluded("phase-1", missing);
        run.retry_due();
        assert_eq!(
            run.checkpoint(Some("phase-1")),
            Checkpoint::Launch {
                phase_id: "phase-1".into()
            }
        );
        assert!(run.plan_check_required(&run.checkpoint(Some("phase-1"))));
    }

    #[test]
    fn a_signal_during_the_attempt_wins_over_its_scheduled_retry() {
        let mut run = RunLoop::new(None);
        run.attempt_started();
        run.signal_caught(15);
        let timeout = AttemptEnd::Committed {
            status: AttemptStatus::Timeout,
            retry_scheduled: true,
        };
        assert_eq!(
            run.attempt_concluded("phase-1", timeout),
            AfterAttempt::Stop(ExitCode::Signal(15))
        );
    }

    #[test]
    fn a_signal_after_the_outcome_was_decided_stops_the_loop_and_leaves_the_outcome() {
        // The attempt decided `timeout` and was committing it when the signal came: the
        // attempt machine is done and ignores it, so the committed status is not interrupted.
        let mut run = RunLoop::new(None);
        run.attempt_started();
        assert_eq!(run.signal_caught(15), SignalAction::ForwardToAttempt);
        let timeout = AttemptEnd::Committed {
            status: AttemptStatus::Timeout,
            retry_scheduled: true,
        };
        assert_eq!(
            run.attempt_concluded("phase-1", timeout),
            AfterAttempt::Stop(ExitCode::Signal(15))
        );
        assert_eq!(run.signal_after_decision(AttemptStatus::Timeout), Some(15));
        // An interrupt that came in time decided the outcome itself.
        assert_eq!(run.signal_after_decision(AttemptStatus::Interrupted), None);
        // Without a signal there is nothing to say.
        assert_eq!(
            RunLoop::new(None).signal_after_decision(AttemptStatus::Timeout),
            None
        );
    }

    #[test]
    fn a_signal_after_the_last_commit_says_the_plan_is_complete() {
        let mut run = RunLoop::new(None);
        run.attempt_started();
        run.attempt_concluded(
            "phase-1",
            AttemptEnd::Committed {
                status: AttemptStatus::PhaseComplete,
                retry_scheduled: false,
            },
        );
        run.signal_caught(2);
        let checkpoint = run.checkpoint(None);
        assert_eq!(
            checkpoint,
            Checkpoint::Interrupted {
                signal: 2,
                plan_complete: true
            }
        );
        assert!(!run.plan_check_required(&checkpoint));
    }
}
