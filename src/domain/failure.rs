//! Why the attempt's own machinery failed — not the agent — named by where it failed. An
//! attempt stopped by one of these is recorded as `execution-io-failed`, with the failure's
//! words in its summary. Each variant carries the underlying error's words for that summary;
//! decisions are taken by variant, never by the words.

use std::fmt;

use super::output_stream::OutputStream;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecutionFailure {
    /// The prompt, the transcript header or the transcript thread could not be set up; the
    /// worker never ran. `detail` names the file.
    Setup { detail: String },
    /// The `running` record (pid, pgid, boot id, start time) could not be written. Nothing
    /// more may be written for the attempt, so it stays unresolved.
    RunningRecord { detail: String },
    /// Reading one of the worker's pipes failed.
    PipeRead {
        stream: OutputStream,
        detail: String,
    },
    /// The reader of one of the worker's pipes could not be started.
    ReaderStart {
        stream: OutputStream,
        detail: String,
    },
    /// The transcript could not be written while the worker ran.
    Output { detail: String },
    /// The transcript trailer could not be written while recording.
    Trailer { detail: String },
    /// An actor of the attempt failed (a bug); the attempt is still stopped and recorded.
    ActorFailed { detail: String },
    /// The run's watchdog was lost and no new one took over: nothing would stop the worker
    /// if the handler died now.
    Unprotected { detail: String },
}

impl fmt::Display for ExecutionFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Setup { detail }
            | Self::Output { detail }
            | Self::Trailer { detail }
            | Self::Unprotected { detail } => f.write_str(detail),
            Self::RunningRecord { detail } => {
                write!(f, "could not record running attempt: {detail}")
            }
            Self::PipeRead { stream, detail } => {
                write!(f, "failed reading agent {}: {detail}", stream.name())
            }
            Self::ReaderStart { stream, detail } => {
                write!(f, "could not start the {} reader: {detail}", stream.name())
            }
            Self::ActorFailed { detail } => {
                write!(f, "internal error: an attempt actor failed: {detail}")
            }
        }
    }
}

impl std::error::Error for ExecutionFailure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_says_where_it_happened() {
        let cases = [
            (
                ExecutionFailure::Setup {
                    detail: "/p/prompt.txt: disk full".into(),
                },
                "/p/prompt.txt: disk full",
            ),
            (
                ExecutionFailure::RunningRecord {
                    detail: "disk full".into(),
                },
                "could not record running attempt: disk full",
            ),
            (
                ExecutionFailure::PipeRead {
                    stream: OutputStream::Stderr,
                    detail: "EIO".into(),
                },
                "failed reading agent stderr: EIO",
            ),
            (
                ExecutionFailure::ReaderStart {
                    stream: OutputStream::Stdout,
                    detail: "gone".into(),
                },
                "could not start the stdout reader: gone",
            ),
            (
                ExecutionFailure::ActorFailed {
                    detail: "panic".into(),
                },
                "internal error: an attempt actor failed: panic",
            ),
        ];
        for (failure, words) in cases {
            assert_eq!(failure.to_string(), words);
        }
    }
}
