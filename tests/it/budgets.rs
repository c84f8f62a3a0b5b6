//! Budget caps for unattended loops: the caps count what the whole plan has spent (every
//! recorded attempt, across invocations), `status` and `check` show spent against cap, the
//! "cannot be enforced" warning comes once and names the attempt, and after a budget stop the
//! `next:` step raises the cap instead of repeating it (docs/cli.md, "Budget caps").

use std::path::PathBuf;

use serde_json::Value;

use crate::common::*;

/// An agent that records its launch, reports `report` (a usage JSON) and then runs `then`.
fn reporting_agent(sandbox: &Sandbox, report: &str, then: &str) -> PathBuf {
    notify_script(sandbox);
    let launches = sandbox.path("launches");
    sandbox.script(
        "agent",
        &format!(
            "cat >/dev/null\necho \"$AISH_PHASE_ID\" >> '{}'\n\"$(dirname \"$0\")/notify\" 'X_AISH_USAGE={report}'\n{then}",
            launches.display()
        ),
    )
}

fn launch_count(sandbox: &Sandbox) -> usize {
    std::fs::read_to_string(sandbox.path("launches"))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

fn json_of(run: &Run) -> Value {
    serde_json::from_str(run.stdout.trim_end()).expect("one JSON object on stdout")
}

const USAGE_150_FINAL: &str = r#"{"input_tokens": 100, "output_tokens": 50, "final": true}"#;

/// A parent loop reruns `run --retry-stopped` after each rate-limited stop (the agent exits
/// 75): the cap counts what every run spent, so the loop stops at the cap instead of getting
/// a fresh budget each time — and the step it is handed then raises the cap.
#[test]
fn a_loop_rerunning_after_each_exit_75_stops_at_the_cap() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(2));
    let agent = reporting_agent(&sandbox, USAGE_150_FINAL, "exit 75");
    let mut results = Vec::new();
    for round in 0..6 {
        let mut extra = vec!["--quiet", "--max-tokens", "400", "--json"];
        if round > 0 {
            extra.push("--retry-stopped");
        }
        let run = sandbox.run_plan("plan.md", &agent, &extra);
        run.assert_code(4);
        let result = json_of(&run);
        let last = result["result"] == "budget-reached";
        results.push(result);
        if last {
            break;
        }
    }
    // 150 + 150 + 150 = 450 ≥ 400: three launches, the fourth run launches nothing.
    assert_eq!(launch_count(&sandbox), 3, "{results:#?}");
    assert_eq!(results.len(), 4, "{results:#?}");
    for result in &results[..3] {
        assert_eq!(result["status"], "rate-limited", "{result:#}");
    }
    let reached = &results[3];
    assert_eq!(
        reached["message"],
        "budget reached: 450 tokens (input + output) spent of 400 (--max-tokens) by this plan's \
         attempts; phase-1 was not launched; to continue, run again with --max-tokens above 450"
    );
    let next = &reached["next"];
    assert_eq!(next["action"], "fix-and-retry", "{next:#}");
    assert_eq!(
        next["why"],
        "raise the cap: give --max-tokens N a value above the 450 tokens (input + output) this \
         plan has spent (the cap was 400, --max-tokens)"
    );
    let argv: Vec<&str> = next["argv"]
        .as_array()
        .expect("argv")
        .iter()
        .map(|word| word.as_str().expect("a word"))
        .collect();
    let cap = argv
        .iter()
        .position(|word| *word == "--max-tokens")
        .expect("the cap's flag");
    assert_eq!(argv[cap + 1], "N", "{argv:?}");
    assert!(!argv.contains(&"400"), "{argv:?}");
    assert_eq!(argv.last(), Some(&"--retry-stopped"), "{argv:?}");
    // Run as it is, the step stops at its placeholder: nothing launched, nothing written.
    let before = sandbox.state_bytes("plan.md");
    let run = sandbox.run(&argv[1..]);
    run.assert_code(5);
    assert!(run.stderr.contains("--max-tokens"), "{}", run.stderr);
    assert_eq!(sandbox.state_bytes("plan.md"), before);
    // A larger cap continues: one more launch, whose 150 reach 600.
    let run = sandbox.run_plan(
        "plan.md",
        &agent,
        &["--quiet", "--max-tokens", "600", "--retry-stopped"],
    );
    run.assert_code(4);
    assert_eq!(launch_count(&sandbox), 4);
}

/// `status` and `check` show what the plan's recorded attempts spent against the caps — text
/// and `--json` — and nothing of the kind without a cap.
#[test]
fn status_and_check_show_spent_against_the_cap() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(3));
    let agent = reporting_agent(
        &sandbox,
        r#"{"input_tokens": 100, "output_tokens": 50, "cost_usd": 0.25, "final": true}"#,
        "echo '<phase-complete>done</phase-complete>'",
    );
    for _ in 0..2 {
        sandbox
            .run_plan(
                "plan.md",
                &agent,
                &["--quiet", "--max-tokens", "1000", "--max-phases", "1"],
            )
            .assert_code(0);
    }
    let status = sandbox.run(&["status", "--plan", "plan.md"]);
    status.assert_code(0);
    assert_has_line(
        &status.stdout,
        "budget: 300 of 1000 tokens (input + output) spent (--max-tokens), every recorded attempt of the plan counted",
    );
    let status = sandbox.run(&["status", "--plan", "plan.md", "--json"]);
    assert_eq!(
        json_of(&status)["budget"],
        serde_json::json!({
            "spent_tokens": 300,
            "spent_cost_usd": 0.5,
            "max_tokens": 1000,
            "max_cost_usd": null
        })
    );
    let check = |extra: &[&str]| {
        let mut args = vec!["check", "--plan", "plan.md", "--agent-cmd", "true"];
        args.extend_from_slice(extra);
        let run = sandbox.run(&args);
        run.assert_code(0);
        run
    };
    assert_has_line(
        &check(&["--max-cost", "0.4"]).stdout,
        "budget spent: $0.5 of $0.4 spent (--max-cost)",
    );
    let text = check(&["--max-cost", "0.4"]).stdout;
    assert!(
        text.contains("note: the plan's recorded attempts have reached --max-cost"),
        "{text}"
    );
    let report = json_of(&check(&["--max-tokens", "1000", "--json"]));
    assert_eq!(report["budget_spent"]["spent_tokens"], 300, "{report:#}");
    assert_eq!(report["budget_spent"]["max_tokens"], 1000, "{report:#}");
    // Without a cap: no spent line, `budget_spent` null.
    let text = check(&[]).stdout;
    assert!(!text.contains("budget spent"), "{text}");
    assert_eq!(json_of(&check(&["--json"]))["budget_spent"], Value::Null);
}

/// An agent that reported usage for one phase and nothing for the next: one `warning:` line
/// (no log record besides), naming the attempt that reported nothing and the one that did.
#[test]
fn the_unenforceable_warning_is_said_once_and_names_the_attempt() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(3));
    notify_script(&sandbox);
    let agent = sandbox.script(
        "agent",
        "cat >/dev/null\n\
         if [ \"$AISH_PHASE_ID\" = phase-1 ]; then\n\
           \"$(dirname \"$0\")/notify\" 'X_AISH_USAGE={\"input_tokens\": 10, \"final\": true}'\n\
         fi\n\
         echo '<phase-complete>done</phase-complete>'\n",
    );
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet", "--max-tokens", "1000"]);
    run.assert_code(0);
    let state = sandbox.state("plan.md");
    let attempt = |index: usize| {
        state["committed_outcomes"][index]["attempt_id"]
            .as_str()
            .expect("attempt id")
            .to_owned()
    };
    let warning = format!(
        "warning: --max-tokens cannot be enforced: the agent of attempt {} (phase-2) reported no usage (X_AISH_USAGE, docs/worker-protocol.md), though attempt {} of this plan had reported usage; what it spent is not counted",
        attempt(1),
        attempt(0)
    );
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.contains("cannot be enforced"))
        .collect();
    assert_eq!(lines, [warning.as_str()], "{}", run.stderr);
    assert!(!run.stderr.contains("WARN"), "{}", run.stderr);
}

/// A cap crossed mid-attempt: the failure line says "budget exceeded" once (as its status),
/// and `next:` raises the cap rather than repeating it — for a cap from the config too, where
/// the flag that wins over it is added.
#[test]
fn budget_exceeded_says_it_once_and_next_raises_the_cap() {
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    let agent = reporting_agent(
        &sandbox,
        r#"{"input_tokens": 100, "output_tokens": 50}"#,
        "exec sleep 30",
    );
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet", "--max-tokens", "120"]);
    run.assert_code(4);
    let failure = run
        .stderr
        .lines()
        .find(|line| line.starts_with("budget-exceeded: "))
        .unwrap_or_else(|| panic!("no failure line in {}", run.stderr));
    assert_eq!(
        failure,
        "budget-exceeded: 150 tokens (input + output) spent of 120 (--max-tokens) by this plan's attempts; the agent was stopped; to continue, run again with --retry-stopped and --max-tokens above 150"
    );
    let mentions = run.stderr.matches("budget exceeded").count()
        + run.stderr.matches("budget-exceeded").count();
    assert_eq!(mentions, 1, "{}", run.stderr);
    let next = run.stderr.lines().last().unwrap_or_default();
    assert!(
        next.starts_with(
            "next: raise the cap: give --max-tokens N a value above the 150 tokens (input + output) this plan has spent (the cap was 120, --max-tokens), then ai-session-handler run --plan plan.md "
        ) && next.ends_with(" --max-tokens N --quiet --retry-stopped")
            && !next.contains("120 "),
        "{next}"
    );
    sandbox.assert_no_survivors();

    // The same cap from the config: the step adds the flag, which wins over the config.
    let sandbox = Sandbox::new();
    sandbox.write("plan.md", plan_with_phases(1));
    sandbox.write(
        ".ai-session-handler/config.json",
        r#"{"budget": {"max_tokens": 120}}"#,
    );
    let agent = reporting_agent(
        &sandbox,
        r#"{"input_tokens": 100, "output_tokens": 50}"#,
        "exec sleep 30",
    );
    let run = sandbox.run_plan("plan.md", &agent, &["--quiet", "--json"]);
    run.assert_code(4);
    let result = json_of(&run);
    assert_eq!(result["status"], "budget-exceeded", "{result:#}");
    assert_eq!(
        result["next"]["why"],
        "raise the cap: give --max-tokens N a value above the 150 tokens (input + output) this \
         plan has spent (the cap was 120, budget.max_tokens)"
    );
    let argv = result["next"]["argv"].as_array().expect("argv");
    assert_eq!(
        argv[argv.len() - 3..],
        ["--max-tokens", "N", "--retry-stopped"].map(Value::from),
        "{argv:?}"
    );
    assert_eq!(
        result["next"]["flags"],
        serde_json::json!(["--retry-stopped"])
    );
    sandbox.assert_no_survivors();
}
