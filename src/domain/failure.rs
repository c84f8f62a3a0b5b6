//! Why the attempt's own machinery failed — not the agent — named by where it failed. An
//! attempt stopped by one of these is recorded as `execution-io-failed`, with the failure's
//! words in its summary; decisions are taken by variant, never by the words.

use super::output_stream::OutputStream;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExecutionFailure {
    /// The prompt, the transcript header or the transcript thread could not be set up; the
    /// worker never ran. `detail` names the file.
    #[error("{detail}")]
    Setup { detail: String },
    /// Nothing more may be written for the attempt, so it stays unresolved.
    #[error("could not record running attempt: {detail}")]
    RunningRecord { detail: String },
    #[error("failed reading agent {}: {detail}", .stream.name())]
    PipeRead {
        stream: OutputStream,
        detail: String,
    },
    #[error("could not start the {} reader: {detail}", .stream.name())]
    ReaderStart {
        stream: OutputStream,
        detail: String,
    },
    /// The transcript could not be written while the worker ran.
    #[error("{detail}")]
    Output { detail: String },
    /// The transcript trailer could not be written while recording.
    #[error("{detail}")]
    Trailer { detail: String },
    /// A bug; the attempt is still stopped and recorded.
    #[error("internal error: an attempt actor failed: {detail}")]
    ActorFailed { detail: String },
    /// The run's watchdog was lost and none took over: nothing would stop the worker if the
    /// handler died now.
    #[error("{detail}")]
    Unprotected { detail: String },
}

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
