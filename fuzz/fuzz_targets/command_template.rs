//! `CommandTemplate::parse` on arbitrary UTF-8: never panics. An accepted template renders a
//! non-empty argv whose program is non-empty, keeps one argv item per shell word whatever the
//! substituted values contain, renders a brace-free template exactly as the shell would split
//! it, and survives `shell_join` (the transcript's `argv:` line) splitting back unchanged.
#![no_main]

use ai_session_handler::domain::template::{CommandTemplate, PlaceholderValues, shell_join};
use libfuzzer_sys::fuzz_target;

const PLAIN: PlaceholderValues<'static> = PlaceholderValues {
    prompt_file: "/ws/.ai-session-handler/plans/k/prompts/a1.txt",
    workspace: "/ws/app",
    run_id: "20260705T120102Z-phase-1-a1",
    transcript_file: "/ws/.ai-session-handler/plans/k/transcripts/a1.txt",
    state_file: "/ws/.ai-session-handler/plans/k/state.json",
};

/// Values a naive implementation would split, requote or re-expand.
const HOSTILE: PlaceholderValues<'static> = PlaceholderValues {
    prompt_file: "/w s/it's \"quoted\" $HOME `x`",
    workspace: "{workspace} {{}}",
    run_id: " ",
    transcript_file: "a\nb\tc",
    state_file: "\\ ; rm -rf /",
};

fuzz_target!(|raw: &str| {
    let Ok(template) = CommandTemplate::parse(raw) else {
        return;
    };
    assert_eq!(template.raw(), raw);

    let argv = template.render(&PLAIN);
    assert!(!argv.is_empty(), "an accepted template renders a command");
    assert!(!argv[0].is_empty(), "the program is never empty");

    let hostile = template.render(&HOSTILE);
    assert_eq!(
        hostile.len(),
        argv.len(),
        "values never split or join argv items"
    );
    assert!(!hostile[0].is_empty());

    if !raw.contains(['{', '}']) {
        let split = shell_words::split(raw).expect("the template was accepted");
        assert_eq!(argv, split);
    }

    for rendered in [&argv, &hostile] {
        let joined = shell_join(rendered);
        let resplit = shell_words::split(&joined).expect("shell_join output splits");
        assert_eq!(&resplit, rendered, "shell_join must round-trip: {joined:?}");
    }
});
