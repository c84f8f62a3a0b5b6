#!/usr/bin/env python3
"""Records a launcher's raw output as a replay fixture for tests/it/wrapper_replay.rs.

Used as a stand-in launcher: the wrapper runs it in place of `codex-lean` / `claude-lean`, and
it runs the real launcher with the same arguments and stdin, passing every byte through
unchanged while writing down what arrived on which stream, when, and in which read. So a
recording shows exactly what a wrapper sees, chunking and timing included.

    record.py --out FIXTURE.json --cli "codex 0.171.0" --scenario ok -- REAL_LAUNCHER ARGS...

The fixture (JSON, one chunk per line so that diffs stay readable) holds:

- `chunks`: `[delay_ms, "out"|"err", data]`, `delay_ms` since the previous chunk (the first
  since launch). `data` is a string when the read was valid UTF-8 by itself, else
  `{"hex": "..."}`. A read that contained the prompt the launcher was given (Codex echoes it)
  is stored as a list of parts in which `{"prompt": true}` stands for the prompt, so the
  replay echoes whatever prompt it is given and no fixture holds a 7 KB prompt;
- `exit`: the launcher's exit code, or `signal` when a signal killed it;
- `final_message`: for Codex, the file named by `--output-last-message` after the exit
  (`null` when none was written).

SIGINT and SIGTERM are forwarded to the real launcher, so signal cases can be recorded too.
"""
import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="fixture file to write")
    parser.add_argument("--cli", required=True, help='e.g. "codex 0.171.0"')
    parser.add_argument("--scenario", required=True, help="mock scenario that was served")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- launcher and arguments")
    args = parser.parse_args()
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("missing the launcher command after --")
    return args


def final_message_path(argv):
    for flag, value in zip(argv, argv[1:]):
        if flag == "--output-last-message":
            return value
    return None


def data_of(raw):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": raw.hex()}


def chunks_with_prompt_placeholder(chunks, prompt):
    """Replaces the prompt, where a stream echoes it, by a placeholder part.

    The echo may span several reads; they are merged into one chunk (the first one's delay),
    which only coarsens the chunking of the echo itself.
    """
    if len(prompt) < 16:
        return [[delay, stream, data_of(raw)] for delay, stream, raw in chunks]
    result = []
    index = 0
    while index < len(chunks):
        delay, stream, raw = chunks[index]
        joined = bytearray(raw)
        end = index
        # Join following reads of the same stream while they could still complete the echo.
        while prompt not in joined and end + 1 < len(chunks) and len(joined) < 4 * len(prompt):
            candidate = chunks[end + 1]
            if candidate[1] != stream or not _could_hold_prompt(joined, prompt):
                break
            end += 1
            joined.extend(candidate[2])
        found = bytes(joined).find(prompt)
        if found < 0:
            result.append([delay, stream, data_of(raw)])
            index += 1
            continue
        parts = []
        if found:
            parts.append(data_of(bytes(joined[:found])))
        parts.append({"prompt": True})
        rest = bytes(joined[found + len(prompt):])
        if rest:
            parts.append(data_of(rest))
        result.append([delay, stream, parts])
        index = end + 1
    return result


def _could_hold_prompt(joined, prompt):
    """True when the prompt starts in `joined` (possibly cut off at its end)."""
    if bytes(joined).find(prompt[:16]) >= 0:
        return True
    tail = bytes(joined[-15:])
    return any(prompt.startswith(tail[cut:]) for cut in range(len(tail)))


def write_fixture(path, fixture):
    lines = ["{"]
    keys = [key for key in fixture if key != "chunks"]
    for key in keys:
        lines.append("  %s: %s," % (json.dumps(key), json.dumps(fixture[key], ensure_ascii=False)))
    lines.append('  "chunks": [')
    chunk_lines = ["    " + json.dumps(chunk, ensure_ascii=False) for chunk in fixture["chunks"]]
    lines.append(",\n".join(chunk_lines))
    lines.append("  ]")
    lines.append("}")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def main():
    args = parse_args()
    prompt = sys.stdin.buffer.read()
    child = subprocess.Popen(
        args.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )

    def forward(signum, _frame):
        if child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    try:
        child.stdin.write(prompt)
        child.stdin.close()
    except BrokenPipeError:
        pass

    sinks = {child.stdout.fileno(): ("out", sys.stdout.buffer), child.stderr.fileno(): ("err", sys.stderr.buffer)}
    selector = selectors.DefaultSelector()
    for fd in sinks:
        selector.register(fd, selectors.EVENT_READ)
    chunks = []
    last = time.monotonic()
    while selector.get_map():
        for key, _ in selector.select():
            raw = os.read(key.fd, 65536)
            if not raw:
                selector.unregister(key.fd)
                continue
            now = time.monotonic()
            stream, sink = sinks[key.fd]
            chunks.append([round((now - last) * 1000), stream, raw])
            last = now
            sink.write(raw)
            sink.flush()
    status = child.wait()

    fixture = {"cli": args.cli, "scenario": args.scenario}
    fixture["recorded"] = time.strftime("%Y-%m-%d", time.gmtime())
    # The final-message path is a fresh temporary name on every run: not worth recording.
    fixture["args"] = [
        "FINAL_MESSAGE_FILE" if previous == "--output-last-message" else arg
        for previous, arg in zip([None] + args.command[1:], args.command[1:])
    ]
    if status < 0:
        fixture["signal"] = -status
    else:
        fixture["exit"] = status
    final_path = final_message_path(args.command)
    if final_path is not None:
        try:
            with open(final_path, "rb") as f:
                fixture["final_message"] = data_of(f.read())
        except FileNotFoundError:
            fixture["final_message"] = None
    fixture["chunks"] = chunks_with_prompt_placeholder(chunks, prompt)
    write_fixture(args.out, fixture)

    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


if __name__ == "__main__":
    main()
