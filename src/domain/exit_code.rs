//! The handler's exit codes (docs/cli.md), defined once: nothing else in the code base spells
//! an exit code as a number.

/// How an invocation ends, as the calling shell or agent sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExitCode {
    /// Every phase is complete, the phase limit was reached, or a read-only command succeeded.
    Success,
    Blocked,
    NeedsClarification,
    /// An agent or execution failure was recorded (or could not be).
    AgentFailed,
    /// Invalid input, a usage error or a refused run: nothing was launched or changed.
    InvalidInput,
    /// The handler caught this signal: 128 + its number, as shells report it.
    Signal(i32),
}

impl ExitCode {
    pub(crate) fn code(self) -> i32 {
        match self {
            Self::Success => 0,
            Self::Blocked => 2,
            Self::NeedsClarification => 3,
            Self::AgentFailed => 4,
            Self::InvalidInput => 5,
            Self::Signal(signal) => 128 + signal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_documented_ones() {
        assert_eq!(ExitCode::Success.code(), 0);
        assert_eq!(ExitCode::Blocked.code(), 2);
        assert_eq!(ExitCode::NeedsClarification.code(), 3);
        assert_eq!(ExitCode::AgentFailed.code(), 4);
        assert_eq!(ExitCode::InvalidInput.code(), 5);
        assert_eq!(ExitCode::Signal(2).code(), 130);
        assert_eq!(ExitCode::Signal(15).code(), 143);
        assert_eq!(ExitCode::Signal(1).code(), 129);
        assert_eq!(ExitCode::Signal(3).code(), 131);
    }
}
