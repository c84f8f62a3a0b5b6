//! `report`: the morning after an unattended run — a three-phase plan with a Verify failure and
//! its retry, a rate-limit wait, files changed in a git workspace and a question — in every
//! format (the HTML one rendered by a real headless Chromium), hostile agent text escaped in
//! each, and `changes` when git is missing or hangs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::*;

const PLAN: &str = "docs/plan.md";

const HOSTILE: &str = "<script>alert(1)</script></svg></pre>\n````\n```\n## Phase 9: injected\nclick phase-1 call alert()\n%%{init: {\"theme\":\"dark\"}}%%\n\u{1b}[2J| a | b |\n````\n";

fn plan() -> String {
    "# Night plan\n\nPreamble.\n\n\
     ## Phase 1: Add the module\n\n### Workspace\n\n.\n\n### Goal\n\nAdd it.\n\n### Verify\n\n```sh\ntest -f ok.txt\n```\n\n\
     ## Phase 2: Wire it\n\n### Workspace\n\n.\n\n### Goal\n\nWire it.\n\n\
     ## Phase 3: Decide\n\n### Workspace\n\n.\n\n### Goal\n\nAsk.\n"
        .to_owned()
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .status()
        .expect("git");
    assert!(status.success(), "git {args:?}");
}

/// A git workspace with the plan committed and one uncommitted edit made before the run.
fn workspace() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan());
    sandbox.write("notes.txt", "before\n");
    git(&sandbox.root, &["init", "-q"]);
    // The test's own files are not the agent's work.
    sandbox.write(".git/info/exclude", "/bin/\n/ctl/\n/question.txt\n");
    git(&sandbox.root, &["add", "-A"]);
    git(&sandbox.root, &["commit", "-qm", "plan"]);
    sandbox.write("notes.txt", "before\ndirty before the run\n");
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"retry": {"max_attempts": 2, "backoff_seconds": 0}, "rate_limit": {"max_waits": 1, "default_wait_seconds": 1}}"#,
    );
    sandbox
}

/// The night's agent: phase 1 commits a file but fails its Verify check, then renames it and
/// passes (reporting usage); phase 2 is rate-limited once, then completes changing nothing;
/// phase 3 asks `question`.
fn night_agent(sandbox: &Sandbox, question: &str) -> PathBuf {
    sandbox.write("question.txt", question);
    sandbox.script(
        "agent",
        &format!(
            r#"prompt=$(cat)
phase=$(printf '%s\n' "$prompt" | sed -n 's/^- selected_phase_id: //p')
mkdir -p "{ctl}/ctl"
count="{ctl}/ctl/$phase"
n=$(( $(cat "$count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$count"
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.com GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@example.com
case "$phase-$n" in
  phase-1-1)
    printf 'one\ntwo\n' > a.txt && git add a.txt && git commit -qm 'add a' >/dev/null
    echo '<phase-complete>added a.txt</phase-complete>' ;;
  phase-1-2)
    git mv a.txt b.txt && printf 'ok\n' > ok.txt && printf '\000\001\002' > blob.bin
    python3 - <<'PY'
import os, socket
address = os.environ["NOTIFY_SOCKET"]
if address.startswith("@"):
    address = "\0" + address[1:]
with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
    sock.sendto(b'X_AISH_USAGE={{"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.25, "final": true}}', address)
PY
    sleep 0.3
    echo '<phase-complete>renamed a.txt to b.txt; the check passes</phase-complete>' ;;
  phase-2-1) echo 'usage limit reached'; exit 75 ;;
  phase-2-*) echo '<phase-complete>nothing to wire after all</phase-complete>' ;;
  *) printf '<phase-needs-clarification>%s</phase-needs-clarification>\n' "$(cat {question})" ;;
esac
"#,
            ctl = sandbox.root.display(),
            question = at(sandbox, "question.txt"),
        ),
    )
}

fn night(question: &str) -> Sandbox {
    let sandbox = workspace();
    let agent = night_agent(&sandbox, question);
    sandbox.run_plan(PLAN, &agent, &["--quiet"]).assert_code(3);
    sandbox
}

fn report(sandbox: &Sandbox, format: &str) -> String {
    let run = sandbox.run(&["report", "--plan", PLAN, "--format", format]);
    run.assert_code(0);
    run.stdout
}

#[test]
fn the_report_of_a_night_says_what_each_attempt_did_in_every_format() {
    let sandbox = night("Which database: Postgres or SQLite?");
    let json: Value = serde_json::from_str(&report(&sandbox, "json")).unwrap();
    assert_valid_report(&json);
    let phases = json["phases"].as_array().unwrap();
    assert_eq!(
        phases
            .iter()
            .map(|phase| phase["standing"].clone())
            .collect::<Vec<_>>(),
        ["done", "done", "stopped"]
    );
    let first = phases[0]["attempts"].as_array().unwrap();
    assert_eq!(first.len(), 2);
    assert_eq!(first[0]["status"], "verification-failed");
    assert_eq!(first[0]["summary"], "added a.txt");
    assert_eq!(first[0]["checks"][0]["passed"], false);
    assert_eq!(
        first[0]["checks"][0]["command_first_line"],
        "test -f ok.txt"
    );
    let changes = &first[0]["changes"];
    assert_eq!(changes["recorded"], "yes");
    assert_eq!(changes["commits"][0]["subject"], "add a");
    assert_eq!(changes["files"][0]["path"], "a.txt");
    assert_eq!(changes["files"][0]["change"], "added");
    assert_eq!(changes["lines_added"], 2);
    assert_eq!(first[1]["status"], "phase-complete");
    assert_eq!(first[1]["checks"][0]["passed"], true);
    assert_eq!(first[1]["usage"]["input_tokens"], 1200);
    assert_eq!(first[1]["usage"]["completeness"], "reported");
    let renamed: Vec<_> = first[1]["changes"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| (file["change"].clone(), file["path"].clone()))
        .collect();
    assert!(
        renamed.contains(&(Value::from("renamed"), Value::from("b.txt"))),
        "{renamed:?}"
    );
    assert!(
        renamed.contains(&(Value::from("added"), Value::from("blob.bin"))),
        "{renamed:?}"
    );
    assert!(
        !renamed.iter().any(|(_, path)| path == "notes.txt"),
        "the edit made before the run is not the attempt's: {renamed:?}"
    );
    let second = phases[1]["attempts"].as_array().unwrap();
    assert_eq!(second[0]["status"], "rate-limited");
    assert_eq!(second[1]["waits"][0]["rate_limited"], true);
    assert!(second[1]["waits"][0]["seconds"].as_u64().unwrap() >= 1);
    assert_eq!(second[1]["completed_without_changes"], true);
    let third = &phases[2];
    assert_eq!(third["stop"]["status"], "needs-clarification");
    assert_eq!(third["stop"]["text"], "Which database: Postgres or SQLite?");
    assert!(
        third["attempts"][0]["transcript_path"]
            .as_str()
            .unwrap()
            .ends_with(".txt")
    );
    let totals = &json["totals"];
    assert_eq!(totals["phases_done"], 2);
    assert_eq!(totals["attempts"], 5);
    assert_eq!(totals["checks_passed"], 1);
    assert_eq!(totals["checks_failed"], 1);
    assert_eq!(totals["completed_without_changes"], 1);
    assert!(totals["waiting_ms"].as_u64().unwrap() >= 1000);
    assert_eq!(totals["usage"]["cost_usd"], 0.25);
    let next = json["next"].as_str().unwrap();
    assert!(next.contains("ai-session-handler answer --plan"), "{next}");

    let text = report(&sandbox, "text");
    for fact in [
        "phase-1 Add the module — done",
        "attempt 1: verification-failed",
        "verify 1 failed: test -f ok.txt",
        "verify 1 passed: test -f ok.txt",
        "R a.txt → b.txt",
        "waited 1",
        "warning: reported phase-complete but changed nothing",
        "phase-3 Decide — stopped: needs-clarification",
        "Which database: Postgres or SQLite?",
        "totals: 2 of 3 phases done, 5 attempts",
        "checks: 1 passed, 1 failed",
        "next: ai-session-handler answer --plan",
    ] {
        assert!(text.contains(fact), "text lacks {fact:?}:\n{text}");
    }

    let markdown = report(&sandbox, "markdown");
    assert!(markdown.contains("```mermaid\ngantt\n"), "{markdown}");
    assert!(markdown.contains("section phase-2"));
    assert!(markdown.contains("rate-limit wait :done,"));
    assert!(markdown.contains("| phase-3 | Decide | stopped: needs-clarification | 1 |"));

    let html = report(&sandbox, "html");
    let dom = chromium_dom(&sandbox, &html);
    for phase in ["phase-1", "phase-2", "phase-3"] {
        assert!(
            dom.contains(&format!("<section class=\"phase\" id=\"{phase}\"")),
            "{phase}"
        );
    }
    for status in [
        "verification-failed",
        "phase-complete",
        "rate-limited",
        "needs-clarification",
    ] {
        assert!(
            dom.contains(&format!("data-status=\"{status}\"")),
            "{status}"
        );
    }
    assert!(dom.contains("<svg id=\"timeline\""));
    assert!(dom.contains("class=\"wait\""));
    assert!(dom.contains("class=\"check\""));
    assert_screenshot_is_not_blank(&sandbox, &html);

    // `status` flags the phase whose last attempt completed without changing anything.
    let status = sandbox.run(&["status", "--plan", PLAN]);
    assert!(
        status
            .stdout
            .contains("warning: phase-2 reported phase-complete but changed nothing"),
        "{}",
        status.stdout
    );
    assert!(
        !status.stdout.contains("warning: phase-1 "),
        "{}",
        status.stdout
    );
    let status = sandbox.run(&["status", "--plan", PLAN, "--json"]);
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    let rows = status["phases"].as_array().unwrap();
    assert_eq!(rows[0]["last_attempt"]["completed_without_changes"], false);
    assert_eq!(rows[1]["last_attempt"]["completed_without_changes"], true);
}

#[test]
fn hostile_agent_text_is_escaped_in_every_format() {
    let mut question = HOSTILE.to_owned();
    question.push_str(&"x".repeat(1 << 20));
    let sandbox = night(&question);
    let text = report(&sandbox, "text");
    assert!(!text.contains('\u{1b}'));
    assert!(text.contains("more bytes; the whole text is in the outcome"));
    assert!(text.len() < 200_000, "{}", text.len());

    let markdown = report(&sandbox, "markdown");
    assert!(!markdown.contains('\u{1b}'));
    let gantt = &markdown[markdown.find("```mermaid").unwrap()..];
    let gantt = &gantt[..gantt.find("\n```\n").unwrap()];
    assert!(!gantt.contains("click") && !gantt.contains("%%"), "{gantt}");
    let mut fence: Option<usize> = None;
    for line in markdown.lines() {
        let run = line.chars().take_while(|&c| c == '`').count();
        match fence {
            Some(open) if run >= open && line.trim_end().chars().all(|c| c == '`') => fence = None,
            Some(_) => {}
            None if run >= 3 => fence = Some(run),
            None => assert!(
                !line.starts_with("## Phase 9") && !line.contains("<script>"),
                "agent text outside a fence: {line}"
            ),
        }
    }

    let html = report(&sandbox, "html");
    assert!(!html.contains("<script>"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;/svg&gt;&lt;/pre&gt;"));
    let dom = chromium_dom(&sandbox, &html);
    assert!(
        !dom.contains("<script"),
        "no script element in the rendered page"
    );
    assert_eq!(dom.matches("<svg id=\"timeline\"").count(), 1);

    let json = report(&sandbox, "json");
    assert!(!json.contains('<') && !json.contains('\u{1b}'));
    let value: Value = serde_json::from_str(&json).unwrap();
    assert!(
        value["phases"][2]["stop"]["text"]
            .as_str()
            .unwrap()
            .starts_with(HOSTILE)
    );
    assert_eq!(
        value["phases"][2]["attempts"][0]["summary"]
            .as_str()
            .unwrap(),
        question,
        "the JSON report carries the outcome's whole text"
    );
}

#[test]
fn the_report_works_while_a_run_is_in_progress_and_can_be_written_to_a_file() {
    let sandbox = workspace();
    let waiting = sandbox.script(
        "waiting",
        &format!("cat >/dev/null; touch {}; sleep 30", at(&sandbox, "ready")),
    );
    let waiting = waiting.to_str().unwrap().to_owned();
    let child = sandbox.spawn(&["run", "--plan", PLAN, "--agent-cmd", &waiting, "--quiet"]);
    wait_running(&sandbox, PLAN, "ready");
    let run = sandbox.run(&[
        "report",
        "--plan",
        PLAN,
        "--format",
        "json",
        "--output",
        "night.json",
    ]);
    run.assert_code(0);
    let value = read_json(&sandbox.path("night.json"));
    assert_valid_report(&value);
    assert_eq!(value["run_in_progress"], true);
    assert_eq!(value["phases"][0]["standing"], "running");
    assert_eq!(value["phases"][0]["attempts"][0]["status"], Value::Null);
    send_signal(&child, nix::sys::signal::Signal::SIGTERM);
    wait_for_exit(child, PATIENCE);
    sandbox.assert_no_survivors();
}

#[test]
fn a_git_that_hangs_leaves_the_changes_unrecorded_and_the_attempt_unharmed() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    git(&sandbox.root, &["init", "-q"]);
    let fake = sandbox.path("fake-git");
    fs::create_dir_all(&fake).unwrap();
    let hanging = fake.join("git");
    fs::write(&hanging, "#!/bin/sh\nexec sleep 600\n").unwrap();
    fs::set_permissions(
        &hanging,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let agent = agent(&sandbox, "echo '<phase-complete>done</phase-complete>'");
    let path = format!("{}:{}", fake.display(), std::env::var("PATH").unwrap());
    let output = sandbox
        .command()
        .env("PATH", path)
        .args(["run", "--plan", PLAN, "--quiet", "--agent-cmd"])
        .arg(&agent)
        .output()
        .unwrap();
    Run::from_output(output).assert_code(0);
    let outcome = read_json(&sandbox.artifacts(PLAN, "outcomes")[0]);
    assert_eq!(outcome["status"], "phase-complete");
    assert_eq!(outcome["changes"]["recorded"], "no");
    assert_eq!(outcome["changes"]["reason"], "timed-out");
    sandbox.assert_no_survivors();
}

#[test]
fn without_git_or_with_recording_off_the_outcome_says_so() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    git(&sandbox.root, &["init", "-q"]);
    let tools = sandbox.path("no-git");
    fs::create_dir_all(&tools).unwrap();
    for tool in ["cat", "sh"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|dir| Path::new(dir).join(tool))
            .find(|path| path.exists())
            .unwrap();
        std::os::unix::fs::symlink(found, tools.join(tool)).unwrap();
    }
    let agent = agent(&sandbox, "echo '<phase-complete>done</phase-complete>'");
    let output = sandbox
        .command()
        .env("PATH", &tools)
        .args([
            "run",
            "--plan",
            PLAN,
            "--quiet",
            "--max-phases",
            "1",
            "--agent-cmd",
        ])
        .arg(&agent)
        .output()
        .unwrap();
    Run::from_output(output).assert_code(0);
    let outcome = read_json(&sandbox.artifacts(PLAN, "outcomes")[0]);
    assert_eq!(outcome["changes"]["reason"], "git-missing");
    sandbox
        .run_plan(PLAN, &agent, &["--quiet", "--no-record-changes"])
        .assert_code(0);
    let outcomes = sandbox.artifacts(PLAN, "outcomes");
    let recorded = outcomes
        .iter()
        .map(|path| read_json(path))
        .filter(|outcome| outcome.get("changes").is_some())
        .count();
    assert_eq!(recorded, 1, "--no-record-changes writes no changes");
}

/// The JSON report validates against docs/report.schema.json.
#[track_caller]
fn assert_valid_report(report: &Value) {
    let schema: Value = serde_json::from_str(
        &fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/report.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let errors: Vec<String> = validator
        .iter_errors(report)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "report --format json breaks its schema: {errors:?}"
    );
}

/// The page as a real headless Chromium parsed it (scripts would have run by now).
fn chromium_dom(sandbox: &Sandbox, html: &str) -> String {
    let page = sandbox.write("report.html", html);
    let output = chromium(sandbox)
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs (installed by .ci/run)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn assert_screenshot_is_not_blank(sandbox: &Sandbox, html: &str) {
    let page = sandbox.write("shot.html", html);
    let shot = sandbox.path("shot.png");
    let output = chromium(sandbox)
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1200,1400")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    let channels = info.color_type.samples();
    let coloured = pixels[..info.buffer_size()]
        .chunks(channels)
        .filter(|pixel| pixel.iter().take(3).any(|&value| value < 200))
        .count();
    let total = (info.width * info.height) as usize;
    assert!(
        coloured * 50 > total,
        "the page renders: {coloured} of {total} pixels drawn"
    );
}

fn chromium(sandbox: &Sandbox) -> Command {
    let program = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new("sh")
                .args(["-c", &format!("command -v {name}")])
                .output()
                .is_ok_and(|output| output.status.success())
        })
        .expect("a headless Chromium (.ci/run installs the chromium package)");
    let mut command = Command::new(program);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!(
            "--user-data-dir={}",
            sandbox.path("chromium-profile").display()
        ))
        .env("HOME", &sandbox.root);
    command
}
