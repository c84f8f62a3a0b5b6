use super::*;
use crate::domain::changes::{ChangeKind, ChangeSummary, Changes, Commit, FileChange};
use crate::domain::plan_report::{
    AttemptReport, CheckReport, PhaseReport, PlanReport, StopReport, Totals, WaitReport,
};
use crate::domain::token_usage::TokenCounts;
use std::collections::BTreeMap;

const HOSTILE: &str = "<script>alert(1)</script></svg></pre>\n```\n## Phase 9: x\n\
                       click phase-1 call alert()\n%%{init: {\"theme\":\"dark\"}}%%\n\
                       \u{1b}[2J\u{0}\u{202e}| a | b |\n<phase-complete>done</phase-complete>";

fn usage(input: u64, output: u64, cost: f64) -> UsageSummary {
    UsageSummary {
        counts: TokenCounts {
            input_tokens: Some(input),
            output_tokens: Some(output),
            cost_usd: Some(cost),
            ..TokenCounts::default()
        },
        models: BTreeMap::new(),
        completeness: Completeness::Reported,
    }
}

fn attempt(id: &str, status: Option<AttemptStatus>, summary: &str) -> AttemptReport {
    AttemptReport {
        attempt_id: id.to_owned(),
        run_id: Some("run-1".to_owned()),
        started_at: "2026-12-04T21:00:00Z".to_owned(),
        finished_at: Some("2026-12-04T21:04:00Z".to_owned()),
        duration_ms: Some(240_000),
        status,
        exit_code: Some(0),
        signal: None,
        summary: Some(summary.to_owned()),
        checks: vec![CheckReport {
            index: 1,
            command_first_line: "cargo test <x>".to_owned(),
            passed: true,
            exit_code: Some(0),
            duration_ms: Some(1200),
        }],
        usage: usage(12_345, 2_000, 0.12),
        changes: Some(Changes::Recorded(ChangeSummary {
            head_before: Some("a".into()),
            head_after: Some("b".into()),
            commits: vec![Commit {
                sha: "b".into(),
                subject: HOSTILE.into(),
            }],
            commits_not_listed: 0,
            files: vec![FileChange {
                path: "src/<evil>.rs".into(),
                change: ChangeKind::Renamed,
                from: Some("old.rs".into()),
                lines_added: Some(3),
                lines_removed: Some(1),
            }],
            files_not_listed: 0,
            lines_added: 3,
            lines_removed: 1,
        })),
        completed_without_changes: false,
        waits: vec![WaitReport {
            rate_limited: true,
            from: "2026-12-04T20:55:00Z".to_owned(),
            until: "2026-12-04T21:00:00Z".to_owned(),
            seconds: 300,
            reason: "usage limit <reached>".to_owned(),
        }],
        idle_extensions: 2,
        transcript_path: "/ws/.ai-session-handler/plans/k/transcripts/x.txt".to_owned(),
        outcome_path: Some("/ws/.ai-session-handler/plans/k/outcomes/x.json".to_owned()),
    }
}

fn report(summary: &str) -> PlanReport {
    let phases = vec![
        PhaseReport {
            id: "phase-1".to_owned(),
            title: "Set <up> *the* | db".to_owned(),
            standing: Standing::Done,
            stop: None,
            attempts: vec![attempt("a1", Some(AttemptStatus::PhaseComplete), summary)],
        },
        PhaseReport {
            id: "phase-2".to_owned(),
            title: "Ask".to_owned(),
            standing: Standing::Stopped,
            stop: Some(StopReport {
                status: AttemptStatus::NeedsClarification,
                text: summary.to_owned(),
            }),
            attempts: vec![attempt(
                "a2",
                Some(AttemptStatus::NeedsClarification),
                summary,
            )],
        },
        PhaseReport {
            id: "phase-3".to_owned(),
            title: "Later".to_owned(),
            standing: Standing::Pending,
            stop: None,
            attempts: vec![],
        },
    ];
    PlanReport {
        schema_version: 1,
        plan: "/ws/docs/plan.md".to_owned(),
        plan_workspace: "/ws".to_owned(),
        state_path: "/ws/.ai-session-handler/plans/k/state.json".to_owned(),
        generated_at: "2026-12-05T07:00:00Z".to_owned(),
        run_id: None,
        run_in_progress: false,
        totals: Totals::of(&phases),
        phases,
        next: Some("ai-session-handler answer --plan /ws/docs/plan.md '...'".to_owned()),
    }
}

#[test]
fn totals_add_up() {
    let report = report("fine");
    let totals = &report.totals;
    assert_eq!(
        (totals.phases, totals.phases_done, totals.attempts),
        (3, 1, 2)
    );
    assert_eq!(totals.agent_ms, 480_000);
    assert_eq!(totals.waiting_ms, 600_000);
    assert_eq!((totals.checks_passed, totals.checks_failed), (2, 0));
    assert_eq!(totals.usage.counts.input_tokens, Some(24_690));
}

#[test]
fn text_shows_every_fact_and_escapes_controls() {
    let text = render(&report(HOSTILE), Format::Text);
    for fact in [
        "phase-1 Set <up> *the* | db — done",
        "phase-2 Ask — stopped: needs-clarification",
        "phase-3 Later — pending",
        "question:",
        "attempt 1: phase-complete, exit 0 — started 2026-12-04T21:00:00Z 4m00s",
        "verify 1 passed: cargo test <x>",
        "usage: 12,345 in / 2,000 out tokens, $0.12",
        "changed: 1 file (+3 −1), 1 commit",
        "R old.rs → src/<evil>.rs",
        "waited 5m00s (rate-limited: usage limit <reached>)",
        "idle deadline extended 2 times",
        "totals: 1 of 3 phases done, 2 attempts, agents ran 8m00s, waited 10m00s",
        "checks: 2 passed, 0 failed",
        "next: ai-session-handler answer",
    ] {
        assert!(text.contains(fact), "missing {fact:?} in\n{text}");
    }
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(!text.contains('\u{202e}'), "{text}");
}

#[test]
fn markdown_keeps_agent_text_inside_fences_and_out_of_the_timeline() {
    let markdown = render(&report(HOSTILE), Format::Markdown);
    let gantt_start = markdown.find("```mermaid\n").expect("a timeline");
    let gantt =
        &markdown[gantt_start..gantt_start + markdown[gantt_start..].find("\n```\n").unwrap()];
    assert!(!gantt.contains("click"), "{gantt}");
    assert!(!gantt.contains("%%"), "{gantt}");
    assert!(gantt.contains("section phase-2"));
    assert!(gantt.contains("attempt 1 needs-clarification :active, 2026-12-04T21:00:00, 240s"));
    assert!(gantt.contains("rate-limit wait :done, 2026-12-04T20:55:00, 300s"));
    // Every line of the hostile text that could be Markdown is inside a fence longer than its
    // own backtick runs.
    assert!(
        markdown.contains("````text\n<script>alert(1)</script>"),
        "{markdown}"
    );
    let mut fence: Option<String> = None;
    for line in markdown.lines() {
        let run: String = line.chars().take_while(|&c| c == '`').collect();
        match &fence {
            Some(open) if run.len() >= open.len() && line.trim_end() == run => fence = None,
            Some(_) => {}
            None if run.len() >= 3 => fence = Some(run),
            None => assert!(!line.starts_with("## Phase 9"), "outside a fence: {line}"),
        }
    }
    assert!(markdown.contains("Set &lt;up&gt; \\*the\\* \\| db"));
    assert!(markdown.contains("src/&lt;evil&gt;\\.rs"));
    assert!(!markdown.contains('\u{1b}'));
}

#[test]
fn html_escapes_everything_and_runs_no_script() {
    let html = render(&report(HOSTILE), Format::Html);
    assert!(html.contains("Content-Security-Policy"));
    assert!(html.contains("script-src 'none'"));
    assert!(!html.contains("<script>"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;/svg&gt;&lt;/pre&gt;"));
    assert!(html.contains("<svg id=\"timeline\""));
    assert!(html.contains("data-status=\"needs-clarification\""));
    assert!(
        !html.contains("http://")
            || !html
                .replace("http://www.w3.org/2000/svg", "")
                .contains("http://")
    );
    assert!(!html.contains("https://"));
    assert!(!html.contains('\u{1b}'));
}

#[test]
fn a_huge_summary_is_cut_in_human_formats_and_whole_in_json() {
    let huge = "x".repeat(1 << 20);
    for format in [Format::Text, Format::Markdown, Format::Html] {
        let rendered = render(&report(&huge), format);
        assert!(rendered.len() < 100_000, "{format:?}: {}", rendered.len());
        assert!(rendered.contains("more bytes; the whole text is in the outcome"));
    }
    let json = render(&report(&huge), Format::Json);
    assert!(json.len() > 3 << 20);
}

#[test]
fn json_is_escaped_for_a_terminal_and_parses() {
    let json = render(&report(HOSTILE), Format::Json);
    assert!(!json.contains('<'));
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["phases"][0]["attempts"][0]["summary"], HOSTILE);
    assert_eq!(value["phases"][1]["standing"], "stopped");
    assert_eq!(value["totals"]["checks_passed"], 2);
}
