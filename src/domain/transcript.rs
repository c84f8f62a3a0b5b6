//! The transcript's runner-written parts: the header before the child's output and the
//! trailer after it (see docs/state-and-recovery.md for the layout). The bytes between them are
//! the child's, verbatim.

use super::decision::ChildExit;
use super::template::shell_join;
use super::timestamp::Timestamp;

/// What the transcript trailer records.
#[derive(Clone, Debug, Default)]
pub struct Trailer {
    pub exit: Option<ChildExit>,
    pub finished_at: Option<Timestamp>,
    /// Descendants still alive after the leader exited (killed by the sweep).
    pub leaked: Vec<u32>,
    /// Descendants that had left the group (killed after it emptied).
    pub escaped: Vec<u32>,
    /// Pids that survived every SIGKILL round.
    pub survivors: Vec<u32>,
    /// Our read ends were closed while something outside the group still held a pipe open.
    pub pipes_held_open: bool,
    /// Why the worker never ran, when it did not.
    pub launch_error: Option<String>,
    /// What happened to the live output (a viewer gone, a console dropped), as whole
    /// `live_output_…: …` lines.
    pub console_notes: Vec<String>,
    /// The runner's own lines about the attempt (`[runner] ignored an invalid usage report
    /// …`), written just before the trailer separator.
    pub notes: Vec<String>,
    /// What became of the worker's notification datagrams
    /// ([`crate::domain::notify::NotifyTally::describe`]); `None` when none arrived.
    pub notifications: Option<String>,
}

/// What the transcript header shows.
pub struct TranscriptHeader<'a> {
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
pub fn render_header(header: &TranscriptHeader<'_>) -> String {
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
pub const TRAILER_SEPARATOR: &str = "\n--- runner trailer ---\n";

/// The runner-written lines after the child's output.
pub fn render_trailer(trailer: &Trailer, bytes_seen: u64, ends_with_newline: bool) -> String {
    let mut text = String::new();
    let exit_code = trailer.exit.and_then(|exit| exit.code);
    let signal = trailer.exit.and_then(|exit| exit.signal);
    if let Some(error) = &trailer.launch_error {
        text.push_str(&format!("[runner] {error}\n"));
    } else if bytes_seen == 0 {
        let ended = match (exit_code, signal) {
            (Some(code), _) => format!("exited with code {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            (None, None) => "ended with an unknown status".to_owned(),
        };
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
    text.push_str(&format!("signal: {}\n", optional(signal)));
    text.push_str(&format!("output_bytes: {bytes_seen}\n"));
    if let Some(notifications) = &trailer.notifications {
        text.push_str(&format!("notifications: {notifications}\n"));
    }
    if !trailer.leaked.is_empty() {
        text.push_str(&format!(
            "leaked_descendants_killed: {}\n",
            join_pids(&trailer.leaked)
        ));
    }
    if !trailer.escaped.is_empty() {
        text.push_str(&format!(
            "escaped_descendants_killed: {}\n",
            join_pids(&trailer.escaped)
        ));
    }
    if !trailer.survivors.is_empty() {
        text.push_str(&format!(
            "processes_surviving_sigkill: {}\n",
            join_pids(&trailer.survivors)
        ));
    }
    for note in &trailer.console_notes {
        text.push_str(note);
        text.push('\n');
    }
    if trailer.pipes_held_open {
        text.push_str("pipes_held_open: a process outside the worker's group kept the output pipes open; they were closed\n");
    }
    text.push_str(&format!(
        "finished_at: {}\n",
        optional(trailer.finished_at.as_ref())
    ));
    text
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
