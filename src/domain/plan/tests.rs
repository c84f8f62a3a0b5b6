//! Unit and property tests of `domain::plan`.

use super::*;
use crate::domain::verification::Interpreter;
use proptest::prelude::*;

fn parse(text: &str) -> ParsedPlan {
    match parse_plan(text.as_bytes()) {
        Ok(plan) => plan,
        Err(error) => panic!("{}", error.with_source("plan.md")),
    }
}

/// The error rendered as the CLI shows it.
fn error(text: &str) -> String {
    error_bytes(text.as_bytes())
}

fn error_bytes(bytes: &[u8]) -> String {
    match parse_plan(bytes) {
        Ok(plan) => panic!("expected an error, parsed {plan:?}"),
        Err(error) => error.with_source("plan.md"),
    }
}

/// A minimal valid workspace section.
const WS: &str = "### Workspace\n.\n";

// original test suite: test_phases.py 1
#[test]
fn parses_phases_with_preamble_fences_and_workspaces() {
    let phase_1_body = "\n### Workspace\n.\n\n### Goal\nParse plans.\n\n### Validation\n```bash\ncargo test\n```\n";
    let phase_2_body = "\n### Workspace\n`../state-store`\n\n### Goal\nImplement state.\n";
    let preamble = "# Plan\n\nIntro text is not part of any phase.\n\n";
    let text = format!(
        "{preamble}## Phase 1: Parse Plans\n{phase_1_body}## Phase 2: State Store\n{phase_2_body}"
    );
    assert_eq!(
        parse(&text),
        ParsedPlan {
            preamble: preamble.to_owned(),
            phases: vec![
                Phase {
                    number: 1,
                    id: "phase-1".into(),
                    title: "Parse Plans".into(),
                    body: phase_1_body.into(),
                    heading_line: 5,
                    end_line: 16,
                    workspace: ".".into(),
                    workspace_line: 8,
                    verify: Vec::new(),
                },
                Phase {
                    number: 2,
                    id: "phase-2".into(),
                    title: "State Store".into(),
                    body: phase_2_body.into(),
                    heading_line: 17,
                    end_line: 23,
                    workspace: "../state-store".into(),
                    workspace_line: 20,
                    verify: Vec::new(),
                },
            ],
        }
    );
}

// test_phases.py 2
#[test]
fn every_heading_level_from_one_to_six_is_a_phase() {
    let text = format!("# Phase 1: One\n{WS}### Phase 2: Two\n{WS}###### Phase 3: Three\n{WS}");
    let plan = parse(&text);
    let titles: Vec<_> = plan
        .phases
        .iter()
        .map(|p| (p.id.as_str(), p.title.as_str()))
        .collect();
    assert_eq!(
        titles,
        [("phase-1", "One"), ("phase-2", "Two"), ("phase-3", "Three")]
    );
    assert!(plan.phases.iter().all(|phase| phase.body == WS));
}

#[test]
fn seven_hashes_are_not_a_phase() {
    let plan = parse(&format!("####### Phase 1: x\n## Phase 2: Real\n{WS}"));
    assert_eq!(plan.preamble, "####### Phase 1: x\n");
    assert_eq!(plan.phases.len(), 1);
    assert_eq!(plan.phases[0].id, "phase-2");
}

// test_phases.py 3, 4
#[test]
fn crlf_is_preserved_and_a_final_newline_is_optional() {
    let text = "Intro\r\n## Phase 1: Crlf\r\n### Workspace\r\n.\r\n### Goal\r\nLast line";
    let plan = parse(text);
    assert_eq!(plan.preamble, "Intro\r\n");
    let phase = &plan.phases[0];
    assert_eq!(phase.title, "Crlf");
    assert_eq!(phase.body, "### Workspace\r\n.\r\n### Goal\r\nLast line");
    assert_eq!(phase.workspace, ".");
    assert_eq!(
        (phase.heading_line, phase.workspace_line, phase.end_line),
        (2, 4, 6)
    );
}

#[test]
fn near_miss_headings_are_found_outside_fences_only() {
    let text = "# Plan\n\
            ##  Phase 1: Two spaces\n\
            ## Phase 1: Real\n\
            ### Workspace\n.\n\
            \x20 ## Phase 2: Indented\n\
            ## phase 3: lower case\n\
            ## Phase 4:   \n\
            ## Phase 5 : spaced colon ##\n\
            ```\n## phase 6: in a fence\n```\n\
            ## Phases of the moon\n\
            ## Phase 7 without a colon\n\
            Phase 8: not a heading\n";
    let found: Vec<(usize, &str)> = near_miss_headings(text.as_bytes())
        .iter()
        .map(|miss| (miss.line, text.lines().nth(miss.line - 1).unwrap()))
        .collect();
    assert_eq!(
        found,
        [
            (2, "##  Phase 1: Two spaces"),
            (6, "  ## Phase 2: Indented"),
            (7, "## phase 3: lower case"),
            (8, "## Phase 4:   "),
            (9, "## Phase 5 : spaced colon ##"),
        ]
    );
    assert!(near_miss_headings(b"## Phase 1: A\n### Workspace\n.\n").is_empty());
    assert!(near_miss_headings(b"\xff## phase 1: x").is_empty());
}

#[test]
fn a_blank_title_is_no_phase_heading() {
    let plan = parse(&format!(
        "## Phase 1: A\n{WS}## Phase 2:   \n## Phase 3: C\n{WS}"
    ));
    let ids: Vec<&str> = plan.phases.iter().map(|phase| phase.id.as_str()).collect();
    assert_eq!(ids, ["phase-1", "phase-3"]);
}

#[test]
fn title_is_verbatim_and_id_drops_leading_zeros() {
    let plan = parse(&format!("## Phase 007: Bond:  `x` <y>  \n{WS}"));
    let phase = &plan.phases[0];
    assert_eq!(phase.number, 7);
    assert_eq!(phase.id, "phase-7");
    assert_eq!(phase.title, "Bond:  `x` <y>  ");
}

#[test]
fn the_last_body_ends_at_the_end_of_the_file() {
    let plan = parse("## Phase 1: A\n### Workspace\n.\n## Phase 2: B\n### Workspace\n`svc`");
    assert_eq!(
        (plan.phases[0].heading_line, plan.phases[0].end_line),
        (1, 3)
    );
    assert_eq!(
        (plan.phases[1].heading_line, plan.phases[1].end_line),
        (4, 6)
    );
    assert_eq!(plan.phases[1].body, "### Workspace\n`svc`");
    assert_eq!(plan.phases[1].workspace_line, 6);
    // A heading on the last line has an empty body, which lacks a workspace section.
    assert_eq!(
        error(&format!("## Phase 1: A\n{WS}## Phase 2: Empty")),
        "plan.md:4: phase 2 is missing required '### Workspace' section"
    );
}

#[test]
fn text_after_the_path_needs_a_heading_before_it() {
    assert_eq!(
        error("## Phase 1: A\n### Workspace\n.\nMore prose\n"),
        "plan.md:4: phase 1 workspace declaration must contain exactly one relative path line; after the path on line 3 the section also has line 4 'More prose'; move instructions under a heading of their own after it (e.g. '### Goal')"
    );
}

// test_phases.py 6
#[test]
fn fenced_phase_and_workspace_headings_are_not_structure() {
    for (open, close) in [("```markdown", "```"), ("~~~~", "~~~~")] {
        let body = format!(
            "### Workspace\n.\n\n{open}\n## Phase 100: Nested example\n### Workspace\n../elsewhere\n## Workspace\n{close}\n"
        );
        let plan = parse(&format!("## Phase 1: Real\n{body}"));
        assert_eq!(plan.phases.len(), 1, "{open}");
        assert_eq!(plan.phases[0].body, body);
        assert_eq!(plan.phases[0].workspace, ".");
        assert_eq!(plan.phases[0].end_line, 10);
    }
}

#[test]
fn fenced_headings_in_the_preamble_are_not_phases() {
    let preamble = "```\n## Phase 1: Example\n```\n";
    let plan = parse(&format!("{preamble}## Phase 2: Real\n{WS}"));
    assert_eq!(plan.preamble, preamble);
    assert_eq!(plan.phases[0].heading_line, 4);
}

#[test]
fn fenced_lines_inside_the_workspace_section_are_skipped() {
    let plan = parse("## Phase 1: A\n### Workspace\n```text\n/abs\n```\n\n  `../svc`  \n");
    assert_eq!(plan.phases[0].workspace, "../svc");
    assert_eq!(plan.phases[0].workspace_line, 7);
}

// test_phases.py 7
#[test]
fn invalid_utf8_reports_line_and_byte() {
    assert_eq!(
        error_bytes(b"a\nb\nxy\xff\n"),
        "plan.md:3: plan is not valid UTF-8 at byte 7"
    );
    assert_eq!(
        error_bytes(b"\xc3"),
        "plan.md:1: plan is not valid UTF-8 at byte 1"
    );
}

// test_phases.py 8
#[test]
fn unclosed_fences_report_their_opening_line() {
    assert_eq!(
        error(&format!("## Phase 1: A\n```python\n## Phase 2: B\n{WS}")),
        "plan.md:2: unclosed backtick code fence"
    );
    assert_eq!(
        error(&format!("## Phase 1: A\n{WS}~~~\n```\n")),
        "plan.md:4: unclosed tilde code fence"
    );
    assert_eq!(error("```\n"), "plan.md:1: unclosed backtick code fence");
}

/// The error for a one-phase plan whose body is `body` (body lines start at line 2).
fn body_error(body: &str) -> String {
    error(&format!("## Phase 1: A\n{body}"))
}

// test_phases.py 9: missing, empty and duplicate sections
#[test]
fn each_phase_needs_exactly_one_non_empty_workspace_section() {
    assert_eq!(
        body_error("Body\n"),
        "plan.md:1: phase 1 is missing required '### Workspace' section"
    );
    let empty = "phase 1 has an empty workspace declaration";
    assert_eq!(
        body_error("### Workspace\n\n### Goal\n"),
        format!("plan.md:2: {empty}")
    );
    assert_eq!(
        body_error("### Workspace\n  \n"),
        format!("plan.md:2: {empty}")
    );
    assert_eq!(
        body_error("### Workspace\n``\n"),
        format!("plan.md:3: {empty}")
    );
    assert_eq!(
        body_error("### Workspace\n.\n\n### Goal\n### Workspace\n.\n"),
        "plan.md:6: phase 1 has duplicate '### Workspace' sections"
    );
}

// test_phases.py 9: two path lines
#[test]
fn a_workspace_section_has_one_path_line() {
    assert_eq!(
        body_error("### Workspace\n.\n../other\n"),
        "plan.md:4: phase 1 workspace declaration must contain exactly one relative path line; after the path on line 3 the section also has line 4 '../other'; move instructions under a heading of their own after it (e.g. '### Goal')"
    );
}

// test_phases.py 9: absolute paths
#[test]
fn workspace_paths_must_be_relative() {
    for (path, shown) in [
        ("/abs/repo", "/abs/repo"),
        ("C:\\repo", "C:\\repo"),
        ("c:/repo", "c:/repo"),
        ("\\\\server\\share", "\\\\server\\share"),
        ("`/abs`", "/abs"),
    ] {
        assert_eq!(
            body_error(&format!("### Workspace\n{path}\n")),
            format!("plan.md:3: phase 1 workspace path must be relative, got '{shown}'")
        );
    }
    for relative in ["C:", "C:repo", "~/repo", "..\\svc", "a/../../b"] {
        let plan = parse(&format!("## Phase 1: A\n### Workspace\n{relative}\n"));
        assert_eq!(plan.phases[0].workspace, relative);
    }
}

// test_phases.py 9: misspelled headings
#[test]
fn a_workspace_heading_must_be_spelled_exactly() {
    let exact = "phase 1 workspace section must use the exact heading '### Workspace'";
    for heading in [
        "## Workspace",
        "### Workspace: .",
        "### Workspaces",
        "### workspace",
        "#### WORKSPACE",
        " ### Workspace",
        "### Workspace ###",
    ] {
        assert_eq!(
            body_error(&format!("{heading}\n.\n")),
            format!("plan.md:2: {exact}"),
            "{heading:?}"
        );
    }
    // Also after a valid section.
    assert_eq!(
        body_error("### Workspace\n.\n### Workspace notes\n"),
        format!("plan.md:4: {exact}")
    );
}

#[test]
fn workspace_messages_name_the_phase_number() {
    assert_eq!(
        error(&format!("## Phase 1: A\n{WS}## Phase 7: B\nno section\n")),
        "plan.md:4: phase 7 is missing required '### Workspace' section"
    );
}

#[test]
fn workspace_heading_tolerates_trailing_whitespace_and_cr() {
    let plan = parse(
        "## Phase 1: A\r\n### Workspace \t\r\n\r\n   ../svc  \r\n## Phase 2: B\n### Workspace\n`.`",
    );
    assert_eq!(plan.phases[0].workspace, "../svc");
    assert_eq!(plan.phases[0].workspace_line, 4);
    assert_eq!(plan.phases[1].workspace, ".");
}

#[test]
fn any_heading_ends_the_workspace_section() {
    let plan = parse("## Phase 1: A\n### Workspace\n.\n#\nnot a path\n#### Notes\nnor this\n");
    assert_eq!(plan.phases[0].workspace, ".");
    // A `#` without a following space is text, so it would be a second path line.
    assert_eq!(
        error("## Phase 1: A\n### Workspace\n.\n#tag\n"),
        "plan.md:4: phase 1 workspace declaration must contain exactly one relative path line; after the path on line 3 the section also has line 4 '#tag'; move instructions under a heading of their own after it (e.g. '### Goal')"
    );
}

#[test]
fn text_before_the_workspace_section_is_not_a_path() {
    let plan = parse("## Phase 1: A\nIntro\n### Goal\nGoal\n### Workspace\nsvc\n");
    assert_eq!(plan.phases[0].workspace, "svc");
    assert_eq!(plan.phases[0].workspace_line, 6);
}

// test_phases.py 12
#[test]
fn duplicate_numbers_are_rejected() {
    assert_eq!(
        error(&format!("## Phase 1: A\n{WS}## Phase 1: B\n{WS}")),
        "plan.md:4: duplicate phase number 1"
    );
    assert_eq!(
        error(&format!(
            "## Phase 1: A\n{WS}## Phase 2: B\n{WS}## Phase 1: C\n"
        )),
        "plan.md:7: duplicate phase number 1"
    );
}

// test_phases.py 13
#[test]
fn a_plan_without_phase_headings_is_rejected() {
    let expected =
        "plan.md: expected at least one executable phase heading like '## Phase 1: Title'";
    assert_eq!(error("# Plan\n\nNo explicit phases.\n"), expected);
    assert_eq!(error(""), expected);
    assert_eq!(
        error("## Stage 1: Build\n## Workstream 2: Ship\n### Issue 3: Fix\n"),
        expected
    );
    assert_eq!(error("```\n## Phase 1: Fenced\n```\n"), expected);
}

// test_phases.py 14
#[test]
fn near_miss_headings_are_ordinary_text() {
    for heading in [
        "## phase 1: Lowercase",
        "## Phase 1 Missing Colon",
        "## Phase 1: ",
        " ## Phase 1: Indented",
        "##  Phase 1: Two spaces",
        "## Phase one: Words",
        "## Phase -1: Negative",
        "##Phase 1: No space",
    ] {
        let plan = parse(&format!("{heading}\nIgnored body\n## Phase 2: Real\n{WS}"));
        assert_eq!(plan.phases.len(), 1, "{heading:?}");
        assert_eq!(plan.phases[0].id, "phase-2");
        assert_eq!(plan.phases[0].heading_line, 3);
        assert_eq!(plan.phases[0].body, WS);
    }
}

// test_phases.py 15
#[test]
fn numbers_must_increase() {
    assert_eq!(
        error(&format!("## Phase 3: A\n{WS}## Phase 2: B\n{WS}")),
        "plan.md:4: phase number 2 appears after phase 3"
    );
}

#[test]
fn numbering_errors_come_before_workspace_errors() {
    assert_eq!(
        error("## Phase 3: A\n## Phase 2: B\n"),
        "plan.md:2: phase number 2 appears after phase 3"
    );
}

#[test]
fn phase_zero_is_rejected() {
    assert_eq!(
        error(&format!("## Phase 0: A\n{WS}")),
        "plan.md:1: phase number must be positive"
    );
    assert_eq!(
        error(&format!("## Phase 000: A\n{WS}")),
        "plan.md:1: phase number must be positive"
    );
}

#[test]
fn overflowing_numbers_are_an_error_not_a_panic() {
    assert_eq!(
        error(&format!("intro\n## Phase 18446744073709551616: A\n{WS}")),
        "plan.md:2: phase number is too large (the maximum is 18446744073709551615)"
    );
    let plan = parse(&format!("## Phase 18446744073709551615: Max\n{WS}"));
    assert_eq!(plan.phases[0].id, "phase-18446744073709551615");
}

#[test]
fn phases_are_found_by_id() {
    let plan = parse(&format!("## Phase 1: A\n{WS}## Phase 4: B\n{WS}"));
    assert_eq!(plan.phase("phase-4").map(|phase| phase.number), Some(4));
    assert_eq!(plan.phase("phase-2"), None);
}

#[test]
fn error_renders_with_and_without_a_line() {
    let located = PlanError {
        line: Some(3),
        message: "bad".into(),
    };
    let unlocated = PlanError {
        line: None,
        message: "bad".into(),
    };
    assert_eq!(located.with_source("p.md"), "p.md:3: bad");
    assert_eq!(unlocated.with_source("p.md"), "p.md: bad");
}

#[test]
fn large_plans_parse() {
    let mut text = String::from("# Big plan\n");
    for number in 1..=2_000 {
        text.push_str(&format!(
            "## Phase {number}: Step {number}\n### Workspace\n.\n### Goal\n"
        ));
        for _ in 0..200 {
            text.push_str("Some ordinary body text of moderate length.\n");
        }
    }
    let plan = parse(&text);
    assert_eq!(plan.phases.len(), 2_000);
    assert_eq!(plan.phases[1_999].end_line, 1 + 2_000 * 204);
}

// ---- property tests -------------------------------------------------------------------

/// Lines that are headings but never phase or workspace headings.
const HEADINGS: &[&str] = &[
    "# Plan",
    "### Goal",
    "## Notes",
    "#### Phase notes",
    "## Stage 2: Staging",
    "## Workstream 1: Ops",
    "## Issue 9: Bug",
    "## phase 3: Lowercase",
    "## Phase 4 No colon",
    " ## Phase 5: Indented",
    "## Phase 7: ",
    "#",
];

/// Lines that are text inside a fence and could be mistaken for structure outside one.
const FENCED_LINES: &[&str] = &[
    "## Phase 1: Fake",
    "# Phase 999: Nested example",
    "### Workspace",
    "### Workspace: nope",
    "## Workspace",
    "/abs/path",
    "~~~",
    "",
];

#[derive(Clone, Debug)]
enum Block {
    Text(String),
    Blank(String),
    Heading(&'static str),
    Fence {
        opener: &'static str,
        closer: &'static str,
        lines: Vec<String>,
    },
}

impl Block {
    fn lines(&self) -> Vec<String> {
        match self {
            Block::Text(text) | Block::Blank(text) => vec![text.clone()],
            Block::Heading(heading) => vec![(*heading).to_owned()],
            Block::Fence {
                opener,
                closer,
                lines,
            } => {
                let mut all = vec![(*opener).to_owned()];
                all.extend(lines.iter().cloned());
                all.push((*closer).to_owned());
                all
            }
        }
    }
}

fn text_line() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z][A-Za-z0-9 .,:;!?()#`~<>/-]{0,30}",
        "    ## Phase [0-9]: indented code",
        " {1,3}[a-z]{1,10}",
    ]
}

fn blank_line() -> impl Strategy<Value = String> {
    "[ \t]{0,3}"
}

fn fence_block() -> impl Strategy<Value = Block> {
    let fences = prop::sample::select(vec![
        ("```", "```"),
        ("```markdown", "```"),
        ("````text", "`````"),
        ("~~~~", "~~~~"),
        ("  ~~~~~ info", "~~~~~"),
    ]);
    let line = prop_oneof![
        prop::sample::select(FENCED_LINES).prop_map(str::to_owned),
        text_line(),
    ];
    (fences, prop::collection::vec(line, 0..4)).prop_map(|((opener, closer), lines)| Block::Fence {
        opener,
        closer,
        lines,
    })
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        text_line().prop_map(Block::Text),
        blank_line().prop_map(Block::Blank),
        prop::sample::select(HEADINGS).prop_map(Block::Heading),
        fence_block(),
    ]
}

/// What may sit between `### Workspace` and its path line: blanks and fenced blocks.
fn filler() -> impl Strategy<Value = Block> {
    prop_oneof![blank_line().prop_map(Block::Blank), fence_block()]
}

/// Blocks, each with its line ending (`true` for CRLF).
fn blocks(
    block: impl Strategy<Value = Block>,
    max: usize,
) -> impl Strategy<Value = Vec<(Block, bool)>> {
    prop::collection::vec((block, any::<bool>()), 0..max)
}

#[derive(Clone, Debug)]
struct PhaseRecipe {
    gap: u64,
    level: usize,
    title: String,
    heading_crlf: bool,
    before: Vec<(Block, bool)>,
    before_path: Vec<(Block, bool)>,
    path: String,
    backticked: bool,
    after_path: Vec<(Block, bool)>,
    after: Vec<(Block, bool)>,
    /// A verify section at the end of the body.
    verify: Option<VerifyRecipe>,
}

/// A generated verify section: how much deeper than the phase heading, commentary, checks.
#[derive(Clone, Debug)]
struct VerifyRecipe {
    deeper: usize,
    crlf: bool,
    commentary: Vec<String>,
    checks: Vec<CheckRecipe>,
}

/// A generated check block and the commentary after it.
#[derive(Clone, Debug)]
struct CheckRecipe {
    opener: &'static str,
    closer: &'static str,
    interpreter: Interpreter,
    indent: usize,
    lines: Vec<String>,
    after: Vec<String>,
}

/// Fence openers of check blocks: the text, its interpreter, its indentation, its closer.
const CHECK_OPENERS: &[(&str, Interpreter, usize, &str)] = &[
    ("```", Interpreter::Sh, 0, "```"),
    ("```sh", Interpreter::Sh, 0, "```"),
    ("~~~ bash title=x", Interpreter::Bash, 0, "~~~"),
    ("````python3", Interpreter::Python3, 0, "`````"),
    ("  ```sh", Interpreter::Sh, 2, "```"),
    (" ~~~~ perl", Interpreter::Perl, 1, "~~~~"),
];

fn verify_recipe() -> impl Strategy<Value = VerifyRecipe> {
    let commentary = prop::collection::vec(prop_oneof![text_line(), blank_line()], 0..3);
    let content = prop::collection::vec(
        prop_oneof![text_line(), blank_line(), "  [a-z]{1,6} [a-z]{0,6}"],
        0..4,
    )
    .prop_flat_map(|lines| {
        // At least one line that is not blank.
        (
            "[a-z]{1,8}( [a-z-]{1,6}){0,2}",
            Just(lines),
            any::<prop::sample::Index>(),
        )
            .prop_map(|(command, mut lines, at)| {
                let at = at.index(lines.len() + 1);
                lines.insert(at, command);
                lines
            })
    });
    let check = (
        prop::sample::select(CHECK_OPENERS.to_vec()),
        content,
        prop::collection::vec(prop_oneof![text_line(), blank_line()], 0..2),
    )
        .prop_map(
            |((opener, interpreter, indent, closer), lines, after)| CheckRecipe {
                opener,
                closer,
                interpreter,
                indent,
                lines,
                after,
            },
        );
    (
        1usize..=2,
        any::<bool>(),
        commentary,
        prop::collection::vec(check, 1..4),
    )
        .prop_map(|(deeper, crlf, commentary, checks)| VerifyRecipe {
            deeper,
            crlf,
            commentary,
            checks,
        })
}

fn phase_recipe() -> impl Strategy<Value = PhaseRecipe> {
    (
        (
            1u64..1000,
            1usize..=6,
            "[A-Za-z0-9][A-Za-z0-9 :#`<>.-]{0,20}",
            any::<bool>(),
        ),
        (blocks(block(), 4), blocks(filler(), 3)),
        ("[a-z.][a-z0-9./_-]{0,15}", any::<bool>()),
        (blocks(filler(), 3), blocks(block(), 4)),
        prop::option::of(verify_recipe()),
    )
        .prop_map(
            |(
                (gap, level, title, heading_crlf),
                (before, before_path),
                (path, backticked),
                (after_path, after),
                verify,
            )| {
                PhaseRecipe {
                    gap,
                    level,
                    title,
                    heading_crlf,
                    before,
                    before_path,
                    path,
                    backticked,
                    after_path,
                    after,
                    // Level 6 phases have no deeper heading level.
                    verify: verify.filter(|recipe| level + recipe.deeper <= 6),
                }
            },
        )
}

/// Plan text being generated, with the line number of the next line.
struct Writer {
    text: String,
    next_line: usize,
}

impl Writer {
    fn line(&mut self, content: &str, crlf: bool) -> usize {
        self.text.push_str(content);
        self.text.push_str(if crlf { "\r\n" } else { "\n" });
        self.next_line += 1;
        self.next_line - 1
    }

    fn blocks(&mut self, blocks: &[(Block, bool)]) {
        for (block, crlf) in blocks {
            for line in block.lines() {
                self.line(&line, *crlf);
            }
        }
    }
}

/// A valid plan, the parse it must produce, and its heading lines (ending included).
fn generated_plan() -> impl Strategy<Value = (String, ParsedPlan, Vec<String>)> {
    (
        blocks(block(), 6),
        prop::collection::vec(phase_recipe(), 1..5),
        prop::option::of(text_line()),
    )
        .prop_map(|(preamble, recipes, last_line)| {
            let mut writer = Writer {
                text: String::new(),
                next_line: 1,
            };
            writer.blocks(&preamble);
            let preamble = writer.text.clone();
            let mut phases = Vec::new();
            let mut headings = Vec::new();
            let mut number = 0;
            for (index, recipe) in recipes.iter().enumerate() {
                number += recipe.gap;
                let heading = format!(
                    "{} Phase {number}: {}",
                    "#".repeat(recipe.level),
                    recipe.title
                );
                let heading_start = writer.text.len();
                let heading_line = writer.line(&heading, recipe.heading_crlf);
                headings.push(writer.text[heading_start..].to_owned());
                let body_start = writer.text.len();
                writer.blocks(&recipe.before);
                writer.line(WORKSPACE_HEADING, recipe.heading_crlf);
                writer.blocks(&recipe.before_path);
                let path_line = if recipe.backticked {
                    format!(" `{}`", recipe.path)
                } else {
                    recipe.path.clone()
                };
                let workspace_line = writer.line(&path_line, recipe.heading_crlf);
                writer.blocks(&recipe.after_path);
                writer.line("### Notes", recipe.heading_crlf);
                writer.blocks(&recipe.after);
                let mut verify = Vec::new();
                if let Some(section) = &recipe.verify {
                    let crlf = section.crlf;
                    writer.line(
                        &format!("{} Verify", "#".repeat(recipe.level + section.deeper)),
                        crlf,
                    );
                    for line in &section.commentary {
                        writer.line(line, crlf);
                    }
                    for check in &section.checks {
                        let line = writer.line(check.opener, crlf);
                        let mut script = String::new();
                        for content in &check.lines {
                            writer.line(content, crlf);
                            let removed = content
                                .bytes()
                                .take(check.indent)
                                .take_while(|&byte| byte == b' ' || byte == b'\t')
                                .count();
                            script.push_str(&content[removed..]);
                            script.push('\n');
                        }
                        writer.line(check.closer, crlf);
                        for text in &check.after {
                            writer.line(text, crlf);
                        }
                        verify.push(VerifyCheck {
                            index: verify.len() + 1,
                            interpreter: check.interpreter,
                            script,
                            line,
                        });
                    }
                }
                if let Some(last) = last_line.as_ref().filter(|_| index + 1 == recipes.len()) {
                    // The plan may end without a newline.
                    writer.text.push_str(last);
                    writer.next_line += 1;
                }
                phases.push(Phase {
                    number,
                    id: format!("phase-{number}"),
                    title: recipe.title.clone(),
                    body: writer.text[body_start..].to_owned(),
                    heading_line,
                    end_line: writer.next_line - 1,
                    workspace: recipe.path.clone(),
                    workspace_line,
                    verify,
                });
            }
            (writer.text, ParsedPlan { preamble, phases }, headings)
        })
}

/// Lines of plan-like text: headings, fences, workspace sections and paths in any order.
fn plan_like_text() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        "#{0,8} ?Phase [0-9]{1,3}: ?[a-z]{0,3}",
        "#{1,3} Phase 99999999999999999999999: x",
        "#{1,4} [Ww]orkspace[s:]?",
        "[ `~]{0,5}[a-z]{0,3}",
        "[./\\\\C:a-z`]{0,8}",
        ".{0,10}",
    ];
    (prop::collection::vec((line, "\r?\n|"), 0..40))
        .prop_map(|lines| lines.into_iter().map(|(line, end)| line + &end).collect())
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_plan(&bytes);
        let _ = near_miss_headings(&bytes);
    }

    #[test]
    fn plan_like_text_never_panics_and_keeps_every_byte(text in plan_like_text()) {
        // A near miss is never also a phase heading.
        let misses = near_miss_headings(text.as_bytes());
        prop_assert!(misses.iter().all(|miss| match_phase_heading(&miss.text).is_none()));
        match parse_plan(text.as_bytes()) {
            Ok(plan) => {
                let copied = plan.preamble.len()
                    + plan.phases.iter().map(|phase| phase.body.len()).sum::<usize>();
                prop_assert!(copied < text.len());
                prop_assert!(plan.phases.windows(2).all(|pair| pair[0].number < pair[1].number));
            }
            Err(error) => {
                prop_assert!(!error.message.is_empty());
                prop_assert!(error.line.is_none_or(|line| line >= 1 && line <= text.len() + 1));
            }
        }
    }

    #[test]
    fn generated_plans_parse_exactly((text, expected, headings) in generated_plan()) {
        let plan = parse_plan(text.as_bytes()).map_err(|error| {
            TestCaseError::fail(error.with_source("generated"))
        })?;
        prop_assert_eq!(&plan, &expected);
        let mut reassembled = plan.preamble.clone();
        for (heading, phase) in headings.iter().zip(&plan.phases) {
            reassembled.push_str(heading);
            reassembled.push_str(&phase.body);
        }
        prop_assert_eq!(reassembled, text);
    }
}

#[test]
fn instructions_left_in_the_workspace_section_are_quoted_with_a_way_out() {
    let long = "Run the migration script with every flag the operator listed in the ticket";
    let plan = format!(
        "## Phase 1: A\n### Workspace\n\n`svc`\n\nRead AGENTS.md first.\n{long}\n```\nfenced\n```\nThen test.\nAnd commit nothing.\n### Goal\nx\n"
    );
    assert_eq!(
        error(&plan),
        "plan.md:6: phase 1 workspace declaration must contain exactly one relative path line; \
         after the path on line 4 the section also has line 6 'Read AGENTS.md first.', line 7 \
         'Run the migration script with every flag the operator listed…', line 11 'Then test.', \
         and 1 more; move instructions under a heading of their own after it (e.g. '### Goal')"
    );
}

/// Issue 14: a byte order mark before the first heading (some editors write one) hid every
/// phase heading on the first line, and a fence opening there.
#[test]
fn a_byte_order_mark_hides_no_heading_and_no_fence() {
    let plan = parse(&format!(
        "\u{feff}## Phase 1: First\n{WS}## Phase 2: Second\n{WS}"
    ));
    let ids: Vec<&str> = plan.phases.iter().map(|phase| phase.id.as_str()).collect();
    assert_eq!(ids, ["phase-1", "phase-2"]);
    assert_eq!(plan.phases[0].title, "First");
    assert_eq!(plan.preamble, "");

    // Before a preamble, the mark stays in its bytes.
    let plan = parse(&format!("\u{feff}# Plan\n\n## Phase 1: First\n{WS}"));
    assert_eq!(plan.preamble, "\u{feff}# Plan\n\n");
    assert_eq!(plan.phases.len(), 1);

    // A fence opened on the first line still hides the example heading in it.
    let plan = parse(&format!(
        "\u{feff}```\n## Phase 9: Example\n```\n## Phase 1: Real\n{WS}"
    ));
    let ids: Vec<&str> = plan.phases.iter().map(|phase| phase.id.as_str()).collect();
    assert_eq!(ids, ["phase-1"]);
}

#[test]
fn a_plan_whose_only_heading_is_a_near_miss_names_that_line() {
    let error =
        parse_plan(b"# Plan\n\nIntro.\n\n## phase 1: lower\n### Workspace\n.\n").unwrap_err();
    assert_eq!(error.line, Some(5));
    assert!(
        error.message.starts_with(
            "'## phase 1: lower' is not a phase heading (write exactly '## Phase N: Title'"
        ),
        "{}",
        error.message
    );
    assert!(error.message.ends_with(NO_PHASES), "{}", error.message);
    // Without a near miss the error is the plain one, with no line.
    let plain = parse_plan(b"# Plan\n\n## Stage 1: x\n").unwrap_err();
    assert_eq!(plain.line, None);
    assert_eq!(plain.message, NO_PHASES);
}

// ---- verify sections (issue 20) -------------------------------------------------------------

/// A one-phase plan with `section` after the workspace section.
fn with_verify(section: &str) -> String {
    format!("# Plan\n\n## Phase 1: Build\n\n### Workspace\n.\n\n{section}")
}

#[test]
fn a_verify_section_holds_one_check_per_fenced_block_and_the_body_is_unchanged() {
    let section = "### Verify\n\nThe unit tests must pass:\n\n```sh\ncargo test --locked\n```\n\nAnd the linter, with bash:\n\n~~~bash -x\nset -o pipefail\ncargo clippy | tee lint.txt\n~~~\n\n```python3\nimport sys\nsys.exit(0)\n```\n";
    let text = with_verify(section);
    let plan = parse(&text);
    let phase = &plan.phases[0];
    assert_eq!(phase.body, format!("\n### Workspace\n.\n\n{section}"));
    assert_eq!(
        phase.verify,
        [
            VerifyCheck {
                index: 1,
                interpreter: Interpreter::Sh,
                script: "cargo test --locked\n".into(),
                line: 12,
            },
            VerifyCheck {
                index: 2,
                interpreter: Interpreter::Bash,
                script: "set -o pipefail\ncargo clippy | tee lint.txt\n".into(),
                line: 18,
            },
            VerifyCheck {
                index: 3,
                interpreter: Interpreter::Python3,
                script: "import sys\nsys.exit(0)\n".into(),
                line: 23,
            },
        ]
    );
}

#[test]
fn a_phase_without_a_verify_section_has_no_checks() {
    let plan = parse(&format!(
        "## Phase 1: A\n{WS}### Validation\n```sh\ncargo test\n```\n"
    ));
    assert!(plan.phases[0].verify.is_empty());
}

#[test]
fn any_level_deeper_than_the_phase_heading_is_a_verify_section() {
    for (phase_level, verify_level) in [(2, 3), (2, 4), (1, 2), (5, 6)] {
        let text = format!(
            "{} Phase 1: A\n{WS}{} Verify\n```\ntrue\n```\n",
            "#".repeat(phase_level),
            "#".repeat(verify_level)
        );
        assert_eq!(parse(&text).phases[0].verify.len(), 1, "{text}");
    }
    assert_eq!(
        error(&with_verify("## Verify\n```\ntrue\n```\n")),
        "plan.md:8: phase 1 verify section '## Verify' must be at a heading level deeper than its phase heading (e.g. '### Verify')"
    );
}

#[test]
fn the_section_ends_at_a_heading_of_its_level_and_keeps_deeper_ones_as_commentary() {
    let text = with_verify(
        "### Verify\n#### Unit tests\n```sh\ncargo test\n```\n### Notes\n```sh\nnot a check\n```\n",
    );
    let plan = parse(&text);
    assert_eq!(plan.phases[0].verify.len(), 1);
    assert_eq!(plan.phases[0].verify[0].script, "cargo test\n");
    // A later phase's own section is its own.
    let two = format!(
        "## Phase 1: A\n{WS}### Verify\n```\none\n```\n## Phase 2: B\n{WS}### Verify\n```\ntwo\n```\n"
    );
    let plan = parse(&two);
    assert_eq!(plan.phases[0].verify[0].script, "one\n");
    assert_eq!(plan.phases[1].verify[0].script, "two\n");
    assert_eq!(plan.phases[1].verify[0].index, 1);
}

#[test]
fn a_verify_heading_inside_a_fence_is_an_example() {
    let text = with_verify("### Goal\n````markdown\n### Verify\n```sh\nrm -rf /\n```\n````\n");
    assert!(parse(&text).phases[0].verify.is_empty());
}

#[test]
fn every_verify_mistake_names_its_line() {
    assert_eq!(
        error(&with_verify(
            "### Verify\n```\na\n```\n### Verify\n```\nb\n```\n"
        )),
        "plan.md:12: phase 1 has duplicate 'Verify' sections (the first at line 8)"
    );
    assert_eq!(
        error(&with_verify(
            "### Verify\n```\na\n```\n#### Verify\n```\nb\n```\n"
        )),
        "plan.md:12: phase 1 has duplicate 'Verify' sections (the first at line 8)"
    );
    assert_eq!(
        error(&with_verify("### Verify\nRun the tests.\n### Goal\nx\n")),
        "plan.md:8: phase 1 '### Verify' section has no fenced code block; put each check in a fenced block (```sh, then the commands, then ```)"
    );
    assert_eq!(
        error(&with_verify("#### Verify\n")),
        "plan.md:8: phase 1 '#### Verify' section has no fenced code block; put each check in a fenced block (```sh, then the commands, then ```)"
    );
    assert_eq!(
        error(&with_verify(
            "### Verify\n```sh\na\n```\n\n```sh\n  \n\n```\n"
        )),
        "plan.md:13: phase 1 verify block is empty; write the check's commands in it or remove it"
    );
    assert_eq!(
        error(&with_verify("### Verify\n```sh\n```\n")),
        "plan.md:9: phase 1 verify block is empty; write the check's commands in it or remove it"
    );
    assert_eq!(
        error(&with_verify("### Verify\n```sh\ncargo test\n")),
        "plan.md:9: unclosed backtick code fence"
    );
    assert_eq!(
        error(&with_verify("### Verify\n```shell\nls\n```\n")),
        "plan.md:9: phase 1 verify block: unknown verify interpreter 'shell' in the fence's info string; use one of sh, bash, dash, zsh, ksh, python3, python, perl, ruby, node, or no info string for /bin/sh -e"
    );
    for misspelled in ["### verify", "### VERIFY", "### Verify ###"] {
        assert_eq!(
            error(&with_verify(&format!("{misspelled}\n```\na\n```\n"))),
            format!(
                "plan.md:8: phase 1 verify section heading must be spelled exactly 'Verify' (e.g. '### Verify'), got '{misspelled}'"
            ),
        );
    }
    let huge = "x".repeat(MAX_SCRIPT_BYTES);
    assert_eq!(
        error(&with_verify(&format!("### Verify\n```\n{huge}\n```\n"))),
        format!(
            "plan.md:9: phase 1 verify block is {} bytes, more than the {MAX_SCRIPT_BYTES} a check may hold; put a longer script in a file and run that from the block",
            MAX_SCRIPT_BYTES + 1
        )
    );
}

#[test]
fn headings_that_only_start_like_verify_are_ordinary_text() {
    let text = with_verify("### Verification\nRun it by hand.\n### Verify the API\nx\n");
    assert!(parse(&text).phases[0].verify.is_empty());
}

#[test]
fn check_content_loses_the_fence_indentation_and_crlf() {
    let text = with_verify(
        "### Verify\r\n  ```python3\r\n  import sys\r\n  if True:\r\n      sys.exit(0)\r\n  ```\r\n",
    );
    let check = &parse(&text).phases[0].verify[0];
    assert_eq!(check.script, "import sys\nif True:\n    sys.exit(0)\n");
    assert_eq!(check.interpreter, Interpreter::Python3);
}

#[test]
fn verify_errors_come_after_the_phases_workspace_errors() {
    assert_eq!(
        error("## Phase 1: A\n### Verify\n```shell\nx\n```\n"),
        "plan.md:1: phase 1 is missing required '### Workspace' section"
    );
}

/// Every error `check` lists, rendered; the first is `parse_plan`'s.
fn all_errors(text: &str) -> Vec<String> {
    let errors = parse_plan_reporting_all(text.as_bytes()).expect_err("an invalid plan");
    assert_eq!(
        parse_plan(text.as_bytes()).expect_err("an invalid plan"),
        errors.first,
        "the first error is the one run reports"
    );
    std::iter::once(&errors.first)
        .chain(&errors.more)
        .map(|error| error.with_source("plan.md"))
        .collect()
}

#[test]
fn every_phase_s_errors_are_reported_not_only_the_first() {
    let text = format!(
        "## Phase 2: A\nno workspace\n## Phase 1: B\n### Workspace\n/abs\n## Phase 3: C\n{WS}### verify\n```sh\ntrue\n```\n## Phase 4: D\n{WS}### Verify\nno block\n"
    );
    assert_eq!(
        all_errors(&text),
        [
            "plan.md:3: phase number 1 appears after phase 2",
            "plan.md:1: phase 2 is missing required '### Workspace' section",
            "plan.md:5: phase 1 workspace path must be relative, got '/abs'",
            "plan.md:9: phase 3 verify section heading must be spelled exactly 'Verify' (e.g. '### Verify'), got '### verify'",
            "plan.md:16: phase 4 '### Verify' section has no fenced code block; put each check in a fenced block (```sh, then the commands, then ```)",
        ]
    );
}

#[test]
fn a_phase_with_a_bad_workspace_and_a_bad_verify_section_reports_both() {
    let text = "## Phase 1: A\n### Workspace\n\n### Verify\n```sh\n```\n";
    assert_eq!(
        all_errors(text),
        [
            "plan.md:2: phase 1 has an empty workspace declaration",
            "plan.md:5: phase 1 verify block is empty; write the check's commands in it or remove it",
        ]
    );
}

#[test]
fn structure_errors_end_the_scan() {
    // The phases' bodies depend on the fences: an unclosed one is the only error reported.
    let text = format!("## Phase 1: A\nno workspace\n```\n## Phase 2: B\n{WS}");
    assert_eq!(
        all_errors(&text),
        ["plan.md:3: unclosed backtick code fence"]
    );
    let text = format!(
        "## Phase 99999999999999999999: A\n{WS}## Phase 1: B\n## Phase 99999999999999999999: C\n"
    );
    assert_eq!(
        all_errors(&text),
        [
            "plan.md:1: phase number is too large (the maximum is 18446744073709551615)",
            "plan.md:5: phase number is too large (the maximum is 18446744073709551615)",
        ]
    );
}

#[test]
fn repeated_numbers_are_each_named() {
    let text =
        format!("## Phase 1: A\n{WS}## Phase 1: B\n{WS}## Phase 0: C\n{WS}## Phase 1: D\n{WS}");
    assert_eq!(
        all_errors(&text),
        [
            "plan.md:4: duplicate phase number 1",
            "plan.md:7: phase number must be positive",
            "plan.md:10: duplicate phase number 1",
        ]
    );
}
