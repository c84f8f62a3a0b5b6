//! The transcript's runner-written parts: the header and trailer around the child's output,
//! and the footer after each Verify check's (layout in docs/state-and-recovery.md).

use super::decision::{ChildExit, signal_name};
use super::lifecycle::GroupReport;
use super::template::shell_join;
use super::timestamp::Timestamp;
#[cfg(doc)]
use super::verification::VerifyCheck;
use super::verification::{CheckOutcome, ended_how};
use crate::units;

/// What the transcript trailer records.
#[derive(Clone, Debug, Default)]
pub(crate) struct Trailer {
    pub exit: Option<ChildExit>,
    pub finished_at: Option<Timestamp>,
    pub group: GroupReport,
    /// Our read ends were closed while something outside the group still held a pipe open.
    pub pipes_held_open: bool,
    pub launch_error: Option<String>,
    /// Whole `live_output_…: …` lines (a viewer gone, a console dropped).
    pub console_notes: Vec<String>,
    /// Whole `watchdog_lost: …` lines.
    pub watchdog_notes: Vec<String>,
    /// The runner's own lines about the attempt, written just before the trailer separator.
    pub notes: Vec<String>,
    /// [`crate::domain::notify::NotifyTally::describe`]; `None` when no datagram arrived.
    pub notifications: Option<String>,
}

pub(crate) struct TranscriptHeader<'a> {
    pub attempt_id: &'a str,
    pub phase_id: &'a str,
    pub phase_title: &'a str,
    pub plan_path: &'a str,
    pub state_path: &'a str,
    pub plan_workspace: &'a str,
    pub execution_workspace: &'a str,
    pub started_at: Timestamp,
    pub agent_cmd: &'a str,
    pub argv: &'a [String],
}

/// The runner-written lines before the child's output, ending with the `---` separator.
pub(crate) fn render_header(header: &TranscriptHeader<'_>) -> String {
    format!(
        "run_id: {}\nphase: {} {}\nplan: {}\nstate: {}\nplan_workspace_path: {}\nexecution_workspace_path: {}\nstarted_at: {}\nagent_cmd: {}\nargv: {}\n---\n",
        header.attempt_id,
        header.phase_id,
        header.phase_title,
        header.plan_path,
        header.state_path,
        header.plan_workspace,
        header.execution_workspace,
        header.started_at,
        header.agent_cmd,
        shell_join(header.argv),
    )
}

/// The line that starts the trailer, on a line of its own.
pub(crate) const TRAILER_SEPARATOR: &str = "\n--- runner trailer ---\n";

/// The runner-written lines after the child's output.
pub(crate) fn render_trailer(
    trailer: &Trailer,
    bytes_seen: u64,
    ends_with_newline: bool,
) -> String {
    let mut text = String::new();
    let exit_code = trailer.exit.and_then(|exit| exit.code);
    let signal = trailer.exit.and_then(|exit| exit.signal);
    if let Some(error) = &trailer.launch_error {
        text.push_str(&format!("[runner] {error}\n"));
    } else if bytes_seen == 0 {
        let ended = ended_how(false, exit_code, signal);
        text.push_str(&format!(
            "[runner] process {ended} without stdout/stderr output\n"
        ));
    } else if !ends_with_newline {
        // The trailer always starts on its own line.
        text.push('\n');
    }
    for note in &trailer.notes {
        text.push_str(note);
        text.push('\n');
    }
    text.push_str(&TRAILER_SEPARATOR[1..]);
    text.push_str(&format!("exit_code: {}\n", optional(exit_code)));
    text.push_str(&format!(
        "signal: {}\n",
        signal.map_or_else(|| "none".to_owned(), signal_name)
    ));
    text.push_str(&format!("output_bytes: {bytes_seen}\n"));
    if let Some(notifications) = &trailer.notifications {
        text.push_str(&format!("notifications: {notifications}\n"));
    }
    push_pid_lines(&mut text, &trailer.group);
    for note in trailer.console_notes.iter().chain(&trailer.watchdog_notes) {
        text.push_str(note);
        text.push('\n');
    }
    if trailer.pipes_held_open {
        text.push_str("pipes_held_open: a process outside the worker's group kept the output pipes open; they were closed\n");
    }
    let finished_at = optional(trailer.finished_at.as_ref());
    text.push_str(&format!("finished_at: {finished_at}\n"));
    text
}

/// What the transcript says after a Verify check's output, which follows its header
/// ([`VerifyCheck::transcript_header`]): how it ended and what its cleanup found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CheckFooter {
    pub index: usize,
    pub outcome: CheckOutcome,
    pub start_error: Option<String>,
    /// The handler was interrupted (or could not record the output) and stopped it.
    pub stopped: bool,
    pub group: GroupReport,
    /// A pipe held by a process outside its group was closed unread.
    pub pipes_abandoned: bool,
}

/// `--- verify 2 failed: exited with code 101 after 1.2s, 345 B output ---` on a line of its
/// own, then what the check's cleanup killed or left, as in the worker's trailer.
pub(crate) fn render_check_footer(footer: &CheckFooter, ends_with_newline: bool) -> String {
    let mut text = String::new();
    if !ends_with_newline {
        text.push('\n');
    }
    let outcome = &footer.outcome;
    let verdict = if footer.stopped {
        "stopped by the handler"
    } else if outcome.passed() {
        "passed"
    } else {
        "failed"
    };
    let how = match &footer.start_error {
        Some(error) => format!("could not be started: {error}"),
        None => format!(
            "{} after {}, {} output",
            outcome.how(),
            units::duration(outcome.duration_ms),
            units::bytes(outcome.output_bytes)
        ),
    };
    let index = footer.index;
    text.push_str(&format!("--- verify {index} {verdict}: {how} ---\n"));
    push_pid_lines(&mut text, &footer.group);
    if footer.pipes_abandoned {
        text.push_str("pipes_held_open: a process outside the check's group kept its output pipes open; they were closed\n");
    }
    text
}

/// What a cleanup killed or left, one `key: pids` line each, none for an empty list.
fn push_pid_lines(text: &mut String, group: &GroupReport) {
    for (key, pids) in [
        ("leaked_descendants_killed", &group.leaked),
        ("escaped_descendants_killed", &group.escaped),
        ("processes_surviving_sigkill", &group.survivors),
    ] {
        if !pids.is_empty() {
            text.push_str(&format!("{key}: {}\n", join_pids(pids)));
        }
    }
}

fn optional(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "none".to_owned(), |value| value.to_string())
}

/// How many pids a trailer line lists (a self-respawning daemon can leave thousands).
const LISTED_PIDS: usize = 100;

fn join_pids(pids: &[u32]) -> String {
    let listed = pids
        .iter()
        .take(LISTED_PIDS)
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    match pids.len().checked_sub(LISTED_PIDS) {
        Some(more) if more > 0 => format!("{listed} (and {more} more)"),
        _ => listed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_pid_lists_are_cut() {
        let pids: Vec<u32> = (1..=103).collect();
        let text = join_pids(&pids);
        assert!(text.starts_with("1, 2, 3, "), "{text}");
        assert!(text.ends_with("99, 100 (and 3 more)"), "{text}");
        assert_eq!(join_pids(&[7, 8]), "7, 8");
    }

    #[test]
    fn a_check_footer_says_how_it_ended_on_a_line_of_its_own() {
        let outcome = |exit_code, signal, timed_out| CheckOutcome {
            exit_code,
            signal,
            timed_out,
            duration_ms: 1_234,
            output_bytes: 345,
            output_tail: String::new(),
        };
        let footer = |outcome| CheckFooter {
            index: 2,
            outcome,
            start_error: None,
            stopped: false,
            group: GroupReport::default(),
            pipes_abandoned: false,
        };
        assert_eq!(
            render_check_footer(&footer(outcome(Some(0), None, false)), true),
            "--- verify 2 passed: exited with code 0 after 1.2s, 345 B output ---\n"
        );
        assert_eq!(
            render_check_footer(&footer(outcome(Some(101), None, false)), false),
            "\n--- verify 2 failed: exited with code 101 after 1.2s, 345 B output ---\n"
        );
        let timed_out = CheckFooter {
            group: GroupReport {
                escaped: vec![41, 42],
                ..GroupReport::default()
            },
            pipes_abandoned: true,
            ..footer(outcome(None, Some(9), true))
        };
        assert_eq!(
            render_check_footer(&timed_out, true),
            "--- verify 2 failed: timed out and was stopped after 1.2s, 345 B output ---\n\
             escaped_descendants_killed: 41, 42\n\
             pipes_held_open: a process outside the check's group kept its output pipes open; they were closed\n"
        );
        let stopped = CheckFooter {
            stopped: true,
            ..footer(outcome(None, Some(15), false))
        };
        assert_eq!(
            render_check_footer(&stopped, true),
            "--- verify 2 stopped by the handler: was killed by SIGTERM after 1.2s, 345 B output ---\n"
        );
        let unstarted = CheckFooter {
            start_error: Some("python3: No such file or directory".into()),
            ..footer(CheckOutcome::unstarted("x".into()))
        };
        assert_eq!(
            render_check_footer(&unstarted, true),
            "--- verify 2 failed: could not be started: python3: No such file or directory ---\n"
        );
    }

    #[test]
    fn console_notes_are_trailer_lines() {
        let trailer = Trailer {
            console_notes: vec!["live_output_stopped: stdout: Broken pipe".to_owned()],
            ..Trailer::default()
        };
        let text = render_trailer(&trailer, 10, true);
        assert!(
            text.contains("\nlive_output_stopped: stdout: Broken pipe\n"),
            "{text}"
        );
    }

    #[test]
    fn runner_notes_precede_the_separator_and_notifications_are_counted_after_it() {
        let trailer = Trailer {
            notes: vec!["[runner] ignored an invalid usage report (X_AISH_USAGE): x".to_owned()],
            notifications: Some("3 accepted; 1 dropped (1 malformed)".to_owned()),
            ..Trailer::default()
        };
        let text = render_trailer(&trailer, 4, false);
        assert!(
            text.starts_with(
                "\n[runner] ignored an invalid usage report (X_AISH_USAGE): x\n--- runner trailer ---\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "\noutput_bytes: 4\nnotifications: 3 accepted; 1 dropped (1 malformed)\n"
            ),
            "{text}"
        );
        let quiet = render_trailer(&Trailer::default(), 4, true);
        assert!(!quiet.contains("notifications:"), "{quiet}");
    }
}
