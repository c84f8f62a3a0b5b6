#!/usr/bin/env python3
"""Measures what a worker's processes do while it is silent: the calibration behind the
activity rule of the idle timeout (src/domain/liveness/activity.rs, docs/liveness.md).

Used by `scripts/e2e-real-clis.sh --measure`: it starts COMMAND (a provider wrapper, with the
prompt on its stdin) as the leader of a new session, as the handler does, becomes a child
subreaper so that tools the CLI starts in sessions of their own stay in view, and samples
every process of the tree every --interval seconds until COMMAND exits or --duration is up:

- CPU time: the sum of `/proc/PID/task/TID/schedstat` field 1 (nanoseconds on CPU) over the
  process's threads, and `/proc/PID/stat` utime + stime + cutime + cstime (clock ticks);
- I/O: `/proc/PID/io` rchar, wchar, syscr, syscw, read_bytes, write_bytes;
- wake-ups: voluntary and involuntary context switches of every thread;
- network: for the process's TCP sockets (`ss -tinp`), the bytes received and the time since
  data last arrived (`lastrcv`).

Then it folds the samples into windows of --window seconds, inside the part of the run that
the scenario is about: from --skip seconds after the first model request the mock logged
(the CLI has started, read its config and sent the prompt) until --span seconds later. Per
window it sums the changes over all processes (a process that appeared counts in full, one
that vanished contributes what its parent's cutime/cstime gained). The result is one JSON
object on stdout with every window and a summary (min, median, max per counter), and the
raw samples in --samples.

    measure_activity.py --mock-log LOG --samples OUT.jsonl --duration 40 -- COMMAND ARGS...
"""
import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
TICKS = os.sysconf("SC_CLK_TCK")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mock-log", required=True, help="the mock API's request log")
    parser.add_argument("--samples", required=True, help="raw samples, one JSON line each")
    parser.add_argument("--prompt", default="Do the phase and report.", help="stdin text")
    parser.add_argument("--duration", type=float, default=40, help="seconds before giving up")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between samples")
    parser.add_argument("--window", type=float, default=1.0, help="seconds per window")
    parser.add_argument("--skip", type=float, default=2.0,
                        help="seconds after the first model request before windows start")
    parser.add_argument("--span", type=float, default=15.0, help="seconds of windows")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("missing the command after --")
    return args


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def children(pid):
    found = []
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return found
    for tid in tasks:
        text = read("/proc/%d/task/%s/children" % (pid, tid))
        if text:
            found.extend(int(child) for child in text.split())
    return found


def process(pid):
    stat = read("/proc/%d/stat" % pid)
    if stat is None:
        return None
    close = stat.rfind(")")
    comm = stat[stat.find("(") + 1:close]
    fields = stat[close + 2:].split()
    # fields[0] is field 3 (state)
    state = fields[0]
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    start = int(fields[19])
    sched = {}
    voluntary = involuntary = 0
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        tasks = []
    for tid in tasks:
        text = read("/proc/%d/task/%s/schedstat" % (pid, tid))
        if text:
            sched[tid] = int(text.split()[0])
        status = read("/proc/%d/task/%s/status" % (pid, tid)) or ""
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                voluntary += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                involuntary += int(line.split()[1])
    io = {}
    for line in (read("/proc/%d/io" % pid) or "").splitlines():
        key, _, value = line.partition(":")
        io[key.strip()] = int(value)
    return {
        "pid": pid, "start": start, "comm": comm, "state": state, "threads": len(tasks),
        "sched": sched, "ticks": utime + stime, "child_ticks": cutime + cstime,
        "rchar": io.get("rchar", 0), "wchar": io.get("wchar", 0),
        "syscr": io.get("syscr", 0), "syscw": io.get("syscw", 0),
        "read_bytes": io.get("read_bytes", 0), "write_bytes": io.get("write_bytes", 0),
        "vcsw": voluntary, "ivcsw": involuntary,
    }


SS_USER = re.compile(r"pid=(\d+)")


def tcp_by_pid():
    """pid -> (bytes received, smallest lastrcv in ms) over its TCP sockets, from ss."""
    try:
        text = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True,
                              timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    result = {}
    pids = []
    for line in text.splitlines():
        if not line.startswith((" ", "\t")):
            pids = [int(pid) for pid in SS_USER.findall(line)]
            continue
        received = re.search(r"bytes_received:(\d+)", line)
        lastrcv = re.search(r"lastrcv:(\d+)", line)
        for pid in set(pids):
            rx, last = result.get(pid, (0, None))
            rx += int(received.group(1)) if received else 0
            if lastrcv:
                last = int(lastrcv.group(1)) if last is None else min(last, int(lastrcv.group(1)))
            result[pid] = (rx, last)
    return result


def tree(root):
    """The root, its descendants, and orphans adopted by this (subreaper) process."""
    seen, todo = set(), [root] + [child for child in children(os.getpid()) if child != root]
    found = []
    tcp = tcp_by_pid()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        info = process(pid)
        if info is None or info["state"] in ("Z", "X"):
            continue
        info["tcp_rx"], info["tcp_lastrcv_ms"] = tcp.get(pid, (0, None))
        found.append(info)
        todo.extend(children(pid))
    return found


COUNTERS = ("sched_ns", "ticks", "rchar", "wchar", "syscr", "syscw", "read_bytes",
            "write_bytes", "vcsw", "ivcsw", "tcp_rx")


def window_totals(before, after):
    """Sum of changes between two samples (lists of process dicts)."""
    old = {(p["pid"], p["start"]): p for p in before}
    totals = dict.fromkeys(COUNTERS, 0)
    totals["processes"] = len(after)
    lastrcv = [p["tcp_lastrcv_ms"] for p in after if p.get("tcp_lastrcv_ms") is not None]
    totals["tcp_lastrcv_ms"] = min(lastrcv) if lastrcv else None
    for p in after:
        q = old.get((p["pid"], p["start"]))
        # Per thread: a thread that ended takes its time with it, so sum the changes of the
        # threads seen twice and the whole time of new ones.
        before_sched = q["sched"] if q else {}
        totals["sched_ns"] += sum(ns - before_sched.get(tid, 0) for tid, ns in p["sched"].items())
        for key in COUNTERS:
            if key != "sched_ns":
                totals[key] += max(0, p[key] - (q[key] if q else 0)) if key == "tcp_rx" else p[key] - (q[key] if q else 0)
        # Reaped children's CPU moves into the parent's cutime/cstime.
        totals["ticks"] += p["child_ticks"] - (q["child_ticks"] if q else 0)
    return totals


def first_request_after(log, since):
    try:
        with open(log) as f:
            for line in f:
                entry = json.loads(line)
                if entry.get("method") == "POST" and entry.get("t", 0) >= since and (
                        entry.get("tools") or entry.get("path", "").endswith("/responses")):
                    return entry["t"]
    except OSError:
        pass
    return None


def summary(windows):
    result = {}
    for key in COUNTERS + ("processes",):
        values = sorted(w[key] for w in windows)
        if values:
            result[key] = {"min": values[0], "median": statistics.median(values),
                           "max": values[-1]}
    return result


def main():
    args = parse_args()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    started = time.time()
    child = subprocess.Popen(args.command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    child.stdin.write(args.prompt.encode())
    child.stdin.close()
    samples = []
    with open(args.samples, "w") as out:
        while time.time() - started < args.duration:
            now = time.time()
            procs = tree(child.pid)
            samples.append((now, procs))
            out.write(json.dumps({"t": round(now, 3), "procs": procs}) + "\n")
            if child.poll() is not None:
                break
            # Reap adopted orphans that exited.
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                pass
            time.sleep(max(0.0, args.interval - (time.time() - now)))
    if child.poll() is None:
        os.killpg(child.pid, 9)
    for pid in children(os.getpid()):
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    child.wait()
    request = first_request_after(args.mock_log, started)
    begin = (request if request is not None else started) + args.skip
    end = begin + args.span
    windows = []
    index = 0
    while index < len(samples) and samples[index][0] < begin:
        index += 1
    while index < len(samples):
        t0, first = samples[index]
        if t0 + args.window > end:
            break
        last = index
        while last + 1 < len(samples) and samples[last + 1][0] <= t0 + args.window + 1e-3:
            last += 1
        if last == index:
            break
        t1, second = samples[last]
        totals = window_totals(first, second)
        totals["seconds"] = round(t1 - t0, 3)
        totals["at"] = round(t0 - begin + args.skip, 2)
        windows.append(totals)
        index = last
    print(json.dumps({"command": args.command, "exit": child.returncode,
                      "first_request": request and round(request - started, 2),
                      "window_seconds": args.window, "windows": windows,
                      "summary": summary(windows)}))


if __name__ == "__main__":
    sys.exit(main())
