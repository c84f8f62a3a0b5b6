//! Deterministic inputs shared by the criterion benches: agent-like output, a large plan and a
//! state with many committed outcomes. Everything is generated from a fixed seed so two runs
//! measure the same bytes.

#![allow(dead_code)] // each bench uses a different subset

/// xorshift64*: enough randomness for realistic line lengths, no extra dependency.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

const WORDS: &[&str] = &[
    "compiling",
    "src/domain/plan.rs",
    "warning:",
    "error[E0308]:",
    "test",
    "ok",
    "running",
    "<div class=\"x\">",
    "</div>",
    "<p>",
    "a < b",
    "Vec<u8>",
    "→",
    "écrit",
    "0x7fff",
    "FATAL",
    "panicked",
    "  ",
];

/// Plan prose: no word may open a fence or a heading at a line start.
const PROSE: &[&str] = &[
    "the",
    "worker",
    "reads",
    "AGENTS.md",
    "first",
    "and",
    "runs",
    "`cargo test`",
    "→",
    "écrit",
    "<br>",
    "Phase",
    "1:",
    "state.json",
    "must",
    "not",
    "change",
];

/// At least `len` bytes of agent-like output: lines of 1..200 bytes made of log words, markup (`<`
/// followed by `p`, `/`, letters: the framer's slow paths), non-ASCII text, closed code fences,
/// the occasional 64 KiB line, and no result tag.
pub(crate) fn agent_output(len: usize, seed: u64) -> Vec<u8> {
    output_from(WORDS, len, seed)
}

/// Like [`agent_output`] but plain log text: no `<` at all, so it measures the per-line cost
/// (fence tracking) without the per-`<` cost (tag candidates).
pub(crate) fn plain_output(len: usize, seed: u64) -> Vec<u8> {
    output_from(PLAIN_WORDS, len, seed)
}

const PLAIN_WORDS: &[&str] = &[
    "compiling",
    "src/domain/plan.rs",
    "warning:",
    "error[E0308]:",
    "test",
    "ok",
    "running",
    "→",
    "écrit",
    "0x7fff",
    "FATAL",
    "panicked",
    "  ",
    "let",
    "x",
    "=",
    "vec![];",
];

fn output_from(words: &[&str], len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(len + 70_000);
    while out.len() < len {
        let line_len = if rng.below(1000) == 0 {
            64 * 1024
        } else {
            1 + rng.below(200) as usize
        };
        if rng.below(50) == 0 {
            // A closed fence: the framer tracks fences in output too.
            out.extend_from_slice(b"```rust\nfn main() { let v: Vec<u8> = vec![]; }\n```\n");
        }
        let start = out.len();
        while out.len() - start < line_len {
            let word = words[rng.below(words.len() as u64) as usize];
            out.extend_from_slice(word.as_bytes());
            out.push(b' ');
        }
        out.push(b'\n');
    }
    // Not truncated: the output ends at a line end with every fence closed.
    out
}

/// A plan of roughly `target_len` bytes with `phases` phases: a preamble, and per phase the
/// canonical sections, prose, lists, and fenced examples that contain phase-like headings.
pub(crate) fn plan(phases: usize, target_len: usize) -> Vec<u8> {
    let mut rng = Rng::new(7);
    let per_phase = target_len / phases;
    let mut out = String::with_capacity(target_len + 4096);
    out.push_str("# Generated plan\n\nGlobal preamble: constraints shared by every phase.\n\n");
    for number in 1..=phases {
        let start = out.len();
        out.push_str(&format!(
            "## Phase {number}: Step {number} of the rollout\n\n"
        ));
        out.push_str("### Workspace\n\n`.`\n\n### Goal\n\nDo one bounded thing.\n\n");
        while out.len() - start < per_phase {
            match rng.below(6) {
                0 => out.push_str(
                    "```markdown\n## Phase 99: not a phase (fenced example)\n### Workspace\n/abs\n```\n\n",
                ),
                1 => out.push_str("~~~~\ncode with ``` inside\n~~~~\n\n"),
                2 => out.push_str("- a list item with `inline code` and a [link](x.md)\n"),
                3 => out.push_str("### Validation\n\nRun `cargo test` and read the output.\n\n"),
                _ => {
                    for _ in 0..(5 + rng.below(20)) {
                        out.push_str(PROSE[rng.below(PROSE.len() as u64) as usize]);
                        out.push(' ');
                    }
                    out.push('\n');
                }
            }
        }
    }
    out.into_bytes()
}

use ai_session_handler::domain::state::{
    AttemptStatus, LastRun, OutcomeRef, PhaseRef, PlanRecord, State, StateLayout, Stop,
};
use ai_session_handler::domain::timestamp::Timestamp;
use ai_session_handler::domain::token_usage::TokenCounts;
use ai_session_handler::domain::token_usage::summary::{Completeness, UsageSummary};

pub(crate) const STATE_DIR: &str = "/ws/.ai-session-handler/plans/0123456789abcdef";

/// A reported usage with every count and one model, as a Claude attempt records it.
fn usage(seed: u64) -> UsageSummary {
    let counts = TokenCounts {
        input_tokens: Some(120_000 + seed),
        cached_input_tokens: Some(100_000),
        output_tokens: Some(8_000 + seed),
        reasoning_tokens: Some(2_000),
        cost_usd: Some(0.25),
    };
    UsageSummary {
        models: [("claude-sonnet-4-5".to_owned(), counts.clone())].into(),
        counts,
        completeness: Completeness::Reported,
    }
}

/// A valid state after `outcomes` committed attempts over `phases` phases: every phase but the
/// last failed a few times before completing; the last phase is stopped as `blocked`.
pub(crate) fn state(phases: usize, outcomes: usize) -> (State, StateLayout) {
    let layout = StateLayout {
        dir: STATE_DIR.to_owned(),
    };
    let per_phase = outcomes.div_ceil(phases);
    let at = Timestamp::parse("2026-07-05T12:00:00Z").expect("valid timestamp");
    let mut state = State {
        plan: Some(PlanRecord {
            path: "/ws/docs/plan.md".to_owned(),
            sha256: "ab".repeat(32),
            accepted_at: at,
        }),
        ..State::default()
    };
    for index in 0..outcomes {
        let phase_number = index / per_phase + 1;
        let phase_id = format!("phase-{phase_number}");
        let last_of_phase = (index + 1) % per_phase == 0;
        // With the exit code `last_run` records for it.
        let (status, exit_code) = match (last_of_phase, index + 1 == outcomes) {
            (_, true) => (AttemptStatus::Blocked, 2),
            (true, false) => (AttemptStatus::PhaseComplete, 0),
            (false, false) => (AttemptStatus::AgentFailed, 4),
        };
        let attempt_id = format!("20260705T120000Z-{phase_id}-00000000-0000-4000-8000-{index:012}");
        if status == AttemptStatus::PhaseComplete {
            state.completed_phase_ids.push(phase_id.clone());
        }
        state.committed_outcomes.push(OutcomeRef {
            attempt_id: attempt_id.clone(),
            phase_id: phase_id.clone(),
            status,
            path: layout.outcome_path(&attempt_id),
            // Every entry a current runner commits carries these.
            duration_ms: Some(90_000 + index as u64),
            output_bytes: Some(250_000 + index as u64),
            watchdog_losses: None,
            usage: Some(usage(index as u64)),
            changed_nothing: Some(false),
        });
        state.last_run = Some(LastRun {
            run_id: attempt_id.clone(),
            phase_id: phase_id.clone(),
            status,
            started_at: at,
            finished_at: at,
            exit_code,
            execution_workspace: "/ws".to_owned(),
            prompt_path: layout.prompt_path(&attempt_id),
            transcript_path: layout.transcript_path(&attempt_id),
            outcome_path: Some(layout.outcome_path(&attempt_id)),
            summary: "generated outcome summary".to_owned(),
        });
        if status == AttemptStatus::Blocked {
            state.current_phase = Some(PhaseRef {
                id: phase_id.clone(),
                title: format!("Step {phase_number}"),
            });
            state.stop = Some(Stop {
                reason: status,
                phase_id,
                message: Some("generated outcome summary".to_owned()),
                clarification_request: None,
            });
        }
    }
    (state, layout)
}
