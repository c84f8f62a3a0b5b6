//! Why a worker could not be launched, in words that name what to fix. `execve` reports
//! little (a missing `#!` interpreter is ENOENT like a missing script, a directory EACCES), so
//! the platform gathers what it sees of the program and these rules word it.

/// What is known about the program that could not be executed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProgramFacts {
    /// `argv[0]` as the template rendered it.
    pub program: String,
    /// The OS error of the launch, without its `(os error N)` suffix.
    pub os_message: String,
    /// The launch failed because a file was not found (ENOENT).
    pub not_found: bool,
    pub is_directory: bool,
    /// The first bytes of the program file, when it is a readable regular file.
    pub head: Option<Vec<u8>>,
    /// Whether the interpreter named on the `#!` line exists (`None`: not checked).
    pub interpreter_exists: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LaunchProblem {
    #[error("{program}: is a directory, not an executable")]
    IsADirectory { program: String },
    #[error(
        "{program}: interpreter {interpreter} named on its #! line was not found (the script itself exists)"
    )]
    InterpreterNotFound {
        program: String,
        interpreter: String,
    },
    #[error("{program}: {message}")]
    Os { program: String, message: String },
}

/// The interpreter a script's `#!` line names: the first word after `#!` (the kernel's rule:
/// leading blanks skipped, the path ends at a blank or the line end).
pub(crate) fn shebang_interpreter(head: &[u8]) -> Option<String> {
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..memchr::memchr(b'\n', line).unwrap_or(line.len())];
    let start = line
        .iter()
        .position(|&byte| byte != b' ' && byte != b'\t')?;
    let rest = &line[start..];
    let end = rest
        .iter()
        .position(|&byte| matches!(byte, b' ' | b'\t' | b'\r'))
        .unwrap_or(rest.len());
    String::from_utf8(rest[..end].to_vec()).ok()
}

/// Decides what to tell the user about a failed launch.
pub(crate) fn explain(facts: &ProgramFacts) -> LaunchProblem {
    let program = facts.program.clone();
    if facts.is_directory {
        return LaunchProblem::IsADirectory { program };
    }
    if facts.not_found
        && facts.interpreter_exists == Some(false)
        && let Some(interpreter) = facts.head.as_deref().and_then(shebang_interpreter)
    {
        return LaunchProblem::InterpreterNotFound {
            program,
            interpreter,
        };
    }
    LaunchProblem::Os {
        program,
        message: facts.os_message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(program: &str) -> ProgramFacts {
        ProgramFacts {
            program: program.to_owned(),
            os_message: "No such file or directory".to_owned(),
            not_found: true,
            is_directory: false,
            head: None,
            interpreter_exists: None,
        }
    }

    #[test]
    fn reads_the_interpreter_the_way_the_kernel_does() {
        assert_eq!(
            shebang_interpreter(b"#!/usr/bin/env python3\nprint()"),
            Some("/usr/bin/env".to_owned())
        );
        assert_eq!(
            shebang_interpreter(b"#!  /opt/x/bin/sh\r\n"),
            Some("/opt/x/bin/sh".to_owned())
        );
        assert_eq!(shebang_interpreter(b"#!\n"), None);
        assert_eq!(shebang_interpreter(b"echo hi\n"), None);
    }

    #[test]
    fn a_missing_interpreter_is_named_instead_of_the_script() {
        let mut missing = facts("/w/agent.sh");
        missing.head = Some(b"#!/nonexistent/bash -e\necho\n".to_vec());
        missing.interpreter_exists = Some(false);
        assert_eq!(
            explain(&missing).to_string(),
            "/w/agent.sh: interpreter /nonexistent/bash named on its #! line was not found (the script itself exists)"
        );
        // The interpreter exists: the OS error stands.
        missing.interpreter_exists = Some(true);
        assert_eq!(
            explain(&missing).to_string(),
            "/w/agent.sh: No such file or directory"
        );
    }

    #[test]
    fn a_directory_is_named_as_one() {
        let mut directory = facts("/w/tools");
        directory.not_found = false;
        directory.os_message = "Permission denied".to_owned();
        directory.is_directory = true;
        assert_eq!(
            explain(&directory).to_string(),
            "/w/tools: is a directory, not an executable"
        );
    }

    #[test]
    fn anything_else_is_the_os_error() {
        assert_eq!(
            explain(&facts("agent")).to_string(),
            "agent: No such file or directory"
        );
    }
}
