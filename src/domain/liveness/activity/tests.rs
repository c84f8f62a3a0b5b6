//! Unit tests of the activity rule: which `/proc` and socket counters between two samples are work.

use proptest::prelude::*;

use super::*;
use crate::domain::identity::parse_proc_stat;

const TICK: Duration = Duration::from_millis(10);

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn process(pid: u32, thread_ns: &[(u32, u64)]) -> ProcessCounters {
    ProcessCounters {
        stat: ProcStat {
            pid,
            start_time_ticks: 100,
            ..ProcStat::default()
        },
        thread_cpu_ns: thread_ns.to_vec(),
        ..ProcessCounters::default()
    }
}

fn sample(at: u64, processes: Vec<ProcessCounters>) -> ActivitySample {
    ActivitySample {
        at: ms(at),
        processes,
        sockets: Some(Vec::new()),
        tick: TICK,
    }
}

fn rule() -> ActivityRule {
    ActivityRule::new(THRESHOLDS, ms(500))
}

fn judge(first: ActivitySample, second: ActivitySample) -> ActivityVerdict {
    let mut rule = rule();
    assert_eq!(rule.observe(first), ActivityVerdict::Baseline);
    rule.observe(second)
}

fn working(verdict: ActivityVerdict) -> bool {
    matches!(verdict, ActivityVerdict::Working(_))
}

#[test]
fn the_interval_is_a_quarter_of_the_limit_within_bounds() {
    assert_eq!(sample_interval(Duration::from_secs(2)), ms(500));
    assert_eq!(sample_interval(Duration::from_millis(500)), ms(250));
    assert_eq!(sample_interval(Duration::from_secs(900)), ms(1000));
}

#[test]
fn a_busy_tool_is_working_and_a_sleeping_one_is_not() {
    // 60 ms of CPU in 0.5 s: 120 ms/s.
    let busy = judge(
        sample(0, vec![process(1, &[(1, 0)])]),
        sample(500, vec![process(1, &[(1, 60_000_000)])]),
    );
    assert!(working(busy), "{busy:?}");
    let sleeping = judge(
        sample(0, vec![process(1, &[(1, 5_000_000)])]),
        sample(500, vec![process(1, &[(1, 5_000_000)])]),
    );
    assert_eq!(
        sleeping,
        ActivityVerdict::Quiet(Evidence {
            window: ms(500),
            processes: 1,
            ..Evidence::default()
        })
    );
}

#[test]
fn timers_of_a_waiting_cli_are_not_work() {
    // Claude Code polling a running tool used up to 34 ms/s; Codex's timers up to 9 ms/s.
    let timers = judge(
        sample(0, vec![process(1, &[(1, 0), (2, 0)])]),
        sample(1000, vec![process(1, &[(1, 20_000_000), (2, 14_000_000)])]),
    );
    assert!(!working(timers), "{timers:?}");
}

#[test]
fn bytes_arriving_on_a_socket_are_work() {
    let socket = |bytes, last| SocketCounters {
        inode: 7,
        bytes_received: bytes,
        last_data_received_ms: last,
    };
    let mut first = sample(0, vec![process(1, &[(1, 0)])]);
    first.sockets = Some(vec![socket(1000, 10)]);
    let mut streaming = sample(500, vec![process(1, &[(1, 500_000)])]);
    streaming.sockets = Some(vec![socket(1211, 30)]);
    let verdict = judge(first.clone(), streaming);
    assert!(working(verdict));
    let ActivityVerdict::Working(evidence) = verdict else {
        unreachable!()
    };
    assert_eq!(evidence.received_bytes, 211);
    let mut hung = sample(500, vec![process(1, &[(1, 500_000)])]);
    hung.sockets = Some(vec![socket(1000, 510)]);
    assert!(!working(judge(first.clone(), hung)));
    // A connection opened in the window counts if data came in the window.
    let mut new_socket = sample(500, vec![process(1, &[(1, 0)])]);
    new_socket.sockets = Some(vec![SocketCounters {
        inode: 8,
        bytes_received: 90,
        last_data_received_ms: 100,
    }]);
    assert!(working(judge(first.clone(), new_socket.clone())));
    new_socket.sockets.as_mut().unwrap()[0].last_data_received_ms = 900;
    assert!(!working(judge(first.clone(), new_socket)));
    // Unreadable socket counters judge nothing.
    let mut unknown = sample(500, vec![process(1, &[(1, 0)])]);
    unknown.sockets = None;
    assert!(!working(judge(first, unknown)));
}

#[test]
fn ended_threads_and_reaped_children_still_count() {
    // A thread with 80 ms ended: its time is gone from schedstat but not from utime.
    let mut before = process(1, &[(1, 0), (2, 0)]);
    before.stat.cpu_ticks = 10;
    let mut after = process(1, &[(1, 0)]);
    after.stat.cpu_ticks = 18;
    assert!(working(judge(
        sample(0, vec![before.clone()]),
        sample(500, vec![after])
    )));
    // A build's short compilers: reaped, their time in cutime.
    let mut parent = process(1, &[(1, 0)]);
    parent.stat.reaped_children_ticks = 6;
    assert!(working(judge(
        sample(0, vec![before]),
        sample(500, vec![parent])
    )));
}

#[test]
fn a_new_process_counts_whole_and_a_reused_pid_is_new() {
    let first = sample(0, vec![process(1, &[(1, 0)])]);
    let mut fresh = process(2, &[(2, 60_000_000)]);
    fresh.stat.start_time_ticks = 500;
    assert!(working(judge(
        first.clone(),
        sample(500, vec![process(1, &[(1, 0)]), fresh])
    )));
    let mut reused = process(1, &[(1, 60_000_000)]);
    reused.stat.start_time_ticks = 999;
    let mut before = process(1, &[(1, 59_000_000)]);
    before.stat.start_time_ticks = 100;
    assert!(working(judge(
        sample(0, vec![before]),
        sample(500, vec![reused])
    )));
}

#[test]
fn heavy_io_is_work() {
    let mut before = process(1, &[(1, 0)]);
    before.chars = 1_000;
    let mut after = before.clone();
    after.chars = 1_000 + 600 * 1024;
    assert!(working(judge(
        sample(0, vec![before.clone()]),
        sample(500, vec![after])
    )));
    let mut little = before.clone();
    little.chars = 1_000 + 500;
    assert!(!working(judge(
        sample(0, vec![before]),
        sample(500, vec![little])
    )));
}

#[test]
fn a_reset_or_a_late_sample_is_only_a_baseline() {
    let mut rule = rule();
    assert_eq!(rule.observe(sample(0, vec![])), ActivityVerdict::Baseline);
    assert!(matches!(
        rule.observe(sample(500, vec![])),
        ActivityVerdict::Quiet(_)
    ));
    rule.reset();
    assert_eq!(rule.observe(sample(900, vec![])), ActivityVerdict::Baseline);
    let busy = vec![process(1, &[(1, u64::MAX / 2)])];
    assert_eq!(rule.observe(sample(9_000, busy)), ActivityVerdict::Baseline);
    assert_eq!(
        rule.observe(sample(9_000, vec![])),
        ActivityVerdict::Baseline
    );
}

#[test]
fn evidence_reads_for_logs() {
    let evidence = Evidence {
        window: ms(500),
        cpu: ms(12),
        chars: 0,
        received_bytes: 431,
        processes: 3,
    };
    assert_eq!(
        evidence.describe(),
        "12 ms CPU, 0 B I/O, 431 B received in 0.5 s (3 processes)"
    );
}

#[test]
fn proc_texts_are_read() {
    let stat = "4242 (node (v20) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                17 5 3 4 20 0 11 0 123456 1000000 2000 18446744073709551615";
    let cpu_ticks = |text| parse_proc_stat(text).map(|s| (s.cpu_ticks, s.reaped_children_ticks));
    assert_eq!(cpu_ticks(stat), Some((22, 7)));
    assert_eq!(cpu_ticks("4242 (x) S 1 2"), None);
    assert_eq!(cpu_ticks("garbage"), None);
    assert_eq!(parse_schedstat_ns("123456789 2000 17\n"), Some(123_456_789));
    assert_eq!(parse_schedstat_ns(""), None);
    let io = "rchar: 1000\nwchar: 24\nsyscr: 5\nsyscw: 2\nread_bytes: 0\n";
    assert_eq!(parse_io_chars(io), Some(1024));
    assert_eq!(parse_io_chars("rchar: 5\n"), None);
    assert_eq!(socket_inode(b"socket:[987654]"), Some(987_654));
    assert_eq!(socket_inode(b"pipe:[987654]"), None);
    assert_eq!(socket_inode(b"/dev/null"), None);
    assert_eq!(socket_inode(b"socket:[x]"), None);
}

fn any_process() -> impl Strategy<Value = ProcessCounters> {
    (
        1u32..6,
        proptest::collection::vec((1u32..5, any::<u64>()), 0..4),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(pid, threads, cpu_ticks, reaped, chars)| ProcessCounters {
            stat: ProcStat {
                pid,
                start_time_ticks: 1,
                cpu_ticks,
                reaped_children_ticks: reaped,
                ..ProcStat::default()
            },
            thread_cpu_ns: threads,
            chars,
            socket_inodes: Vec::new(),
        })
}

proptest! {
    #[test]
    fn proc_parsers_never_panic(text in "(?s).{0,300}") {
        let _ = parse_proc_stat(&text);
        let _ = parse_schedstat_ns(&text);
        let _ = parse_io_chars(&text);
        let _ = socket_inode(text.as_bytes());
    }

    #[test]
    fn never_panics_and_more_work_never_turns_working_into_quiet(
        before in proptest::collection::vec(any_process(), 0..4),
        after in proptest::collection::vec(any_process(), 0..4),
        window in 1u64..1500,
        extra in 0u64..1_000_000_000,
    ) {
        let verdict = judge(sample(0, before.clone()), sample(window, after.clone()));
        let mut more = after;
        if let Some(thread) = more
            .first_mut()
            .and_then(|first| first.thread_cpu_ns.first_mut())
        {
            thread.1 = thread.1.saturating_add(extra);
        }
        let more_verdict = judge(sample(0, before), sample(window, more));
        if working(verdict) {
            prop_assert!(working(more_verdict));
        }
    }
}
