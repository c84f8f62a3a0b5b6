#!/usr/bin/env python3
"""A local stand-in for the Anthropic and OpenAI model APIs, for scripts/e2e-real-clis.sh.

The real Claude Code and Codex CLIs are pointed at it (ANTHROPIC_BASE_URL, a Codex model
provider in config.toml), so the provider wrappers can be exercised end to end without
network access, accounts or cost. Standard library only; listens on 127.0.0.1 and exits by
itself after --lifetime seconds, so a crashed test run cannot leave it behind for long.

Endpoints:
    POST /v1/messages             Anthropic Messages API (SSE when "stream": true, else JSON)
    POST /v1/messages/count_tokens
    POST /v1/responses            OpenAI Responses API (SSE), as Codex uses it
    GET  /v1/models               one model, for clients that list them

What the next request gets is read from --scenario-file on every request, so one server
serves a whole suite. The file holds a name and optional key=value parameters:

    ok                       a short message ending in a valid result block
    nomarker                 prose without a result block
    quoted_same              a tag quoted in prose, then a valid block
    tool_quoted              first turn: reasoning/thinking, text with quoted tags and a
                             fenced block, a shell tool call whose command holds a tag pair;
                             second turn (after the tool result): a valid block
    tool_sleep secs=N        first turn: a shell tool call `sleep N; echo hello`; then a block
    slow interval=S duration=S
                             one text block streamed as `tick N` lines every S seconds for
                             S seconds, then a valid block
    err401 | err429 | err529 | err500
                             that HTTP error, in the provider's error format
    usage_limit reset_in=N   429 with the provider's "usage limit reached" shape, resetting
                             N seconds from now (default 7200)
    hang secs=N              the stream's headers and first events, then nothing for N
                             seconds (default 60): a hung model stream
    tool_busy secs=N         first turn: a shell tool call that is silent and CPU-busy for N
                             seconds (default 8), then prints hello; then a block

After any scenario, `usage_in=N usage_out=M` sets the token counts each response reports
(default 10 input, 20 output; `usage_cached=K` of the input served from a cache, default 0).
Any other name answers like `ok` (`usage usage_in=…` records an `ok` session under its own
name).

Requests that carry no tools (Claude's side requests such as titles) always get a short
plain answer, so they never consume a scenario meant for the main conversation.

Every request is appended to --log as one JSON line (method, path, scenario, a few headers).
"""
import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OK_TEXT = "Working on it.\n<phase-complete>\nDid the thing.\n</phase-complete>"
NOMARKER_TEXT = "Working on it. I did the thing but forgot the result block."
QUOTED_SAME_TEXT = (
    "As asked I will finish with a `<phase-complete>` block at the end.\n"
    "<phase-complete>\nDid the thing (quoted tag case).\n</phase-complete>"
)
TOOL_INTRO_TEXT = (
    "Let me check the workspace; the protocol says to end with <phase-complete> later.\n"
    "```python\nprint('<phase-blocked>')\n```\n"
)
TOOL_THINKING = "Secret thinking: <phase-blocked>never shown</phase-blocked>"
TOOL_FINAL_TEXT = (
    "The command printed hello.\n<phase-complete>\nRan echo; it printed hello.\n</phase-complete>"
)
QUOTED_COMMAND = "echo   hello\n&& echo <phase-complete>x</phase-complete>"
# Silent and CPU-busy for %s seconds, then prints hello (a build or a test suite).
BUSY_COMMAND = "end=$(( $(date +%%s) + %s )); while [ $(date +%%s) -lt $end ]; do :; done; echo hello"
SLOW_FINAL = "\n<phase-complete>\nSlow stream finished.\n</phase-complete>"

ARGS = None
LOCK = threading.Lock()
COUNTER = [0]


def next_id(kind):
    with LOCK:
        COUNTER[0] += 1
        return "%s_mock_%d" % (kind, COUNTER[0])


def current_scenario():
    try:
        with open(ARGS.scenario_file) as f:
            words = f.read().split()
    except OSError:
        words = []
    name = words[0] if words else "ok"
    params = dict(word.split("=", 1) for word in words[1:] if "=" in word)
    return name, params


def log(entry):
    entry["t"] = round(time.time(), 3)
    with LOCK, open(ARGS.log, "a") as f:
        f.write(json.dumps(entry) + "\n")


def token_counts(params):
    """The (input, cached input, output) tokens a response reports."""
    return (int(params.get("usage_in", "10")), int(params.get("usage_cached", "0")),
            int(params.get("usage_out", "20")))


def pieces(text, count=4):
    """Splits text into about `count` deltas; the cuts fall inside tags on purpose."""
    step = max(1, len(text) // count)
    return [text[i:i + step] for i in range(0, len(text), step)]


def error_body(flavor, status):
    if flavor == "anthropic":
        kind, message = {
            401: ("authentication_error", "invalid x-api-key (mock)"),
            429: ("rate_limit_error", "Number of requests has exceeded your rate limit (mock)"),
            500: ("api_error", "Internal server error (mock)"),
            529: ("overloaded_error", "Overloaded (mock)"),
        }[status]
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = {401: "invalid_api_key", 429: "rate_limit_exceeded", 500: "server_error",
            529: "server_is_overloaded"}[status]
    return {"error": {"message": "mock %d %s" % (status, kind), "type": kind, "param": None,
                      "code": kind}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock/1"

    def log_message(self, *_args):
        pass  # requests are logged as JSON lines instead

    # ---- transport -------------------------------------------------------------------

    def read_json(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return {}

    def send_json(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def start_sse(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def sse(self, event, body):
        payload = ("event: %s\ndata: %s\n\n" % (event, json.dumps(body))).encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        self.wfile.flush()

    def end_sse(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def send_error_scenario(self, flavor, name, params):
        """Answers an error scenario; returns False for the others."""
        statuses = {"err401": 401, "err429": 429, "err500": 500, "err529": 529}
        if name in statuses:
            self.send_json(statuses[name], error_body(flavor, statuses[name]))
            return True
        if name != "usage_limit":
            return False
        reset_in = int(params.get("reset_in", "7200"))
        reset_at = int(time.time()) + reset_in
        if flavor == "anthropic":
            # The subscription limit shape: unified rate-limit headers on a 429, and a
            # message that names the reset time the way Claude's own limit messages do.
            resets = time.strftime("%I:%M%p", time.localtime(reset_at)).lstrip("0").lower()
            self.send_json(429, {"type": "error", "error": {
                "type": "rate_limit_error",
                "message": "5-hour usage limit reached (mock) \u2219 resets %s" % resets}},
                headers=[("retry-after", str(reset_in)),
                         ("anthropic-ratelimit-unified-status", "rejected"),
                         ("anthropic-ratelimit-unified-reset", str(reset_at)),
                         ("anthropic-ratelimit-unified-representative-claim", "five_hour")])
        else:
            self.send_json(429, {"error": {
                "type": "usage_limit_reached", "message": "The usage limit has been reached",
                "plan_type": "plus", "resets_at": reset_at, "resets_in_seconds": reset_in}})
        return True

    # ---- routing -----------------------------------------------------------------------

    def do_GET(self):
        log({"method": "GET", "path": self.path})
        if self.path.split("?")[0].endswith("/models"):
            self.send_json(200, {"object": "list", "models": [],
                                 "data": [{"id": "mock-model", "object": "model"}]})
        else:
            self.send_json(404, {"error": {"message": "not found (mock)", "type": "not_found"}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        body = self.read_json()
        name, params = current_scenario()
        path = self.path.split("?")[0]
        log({"method": "POST", "path": path, "scenario": name,
             "retry": self.headers.get("x-stainless-retry-count"), "tools": bool(body.get("tools"))})
        try:
            if path.endswith("/messages/count_tokens"):
                self.send_json(200, {"input_tokens": 42})
            elif path.endswith("/messages"):
                self.anthropic(body, name, params)
            elif path.endswith("/responses"):
                self.openai(body, name, params)
            else:
                self.send_json(404, {"error": {"message": "unknown path (mock)"}})
        except (BrokenPipeError, ConnectionResetError):
            log({"event": "client-gone", "path": path})

    # ---- what the model "says" -----------------------------------------------------------

    @staticmethod
    def turn(name, params, after_tool):
        """The output items of one model turn: ("text"|"thinking"|"slow"|"shell", payload)."""
        if name == "nomarker":
            return [("text", NOMARKER_TEXT)]
        if name == "quoted_same":
            return [("text", QUOTED_SAME_TEXT)]
        if name == "slow":
            return [("slow", params)]
        if name in ("tool_quoted", "tool_sleep", "tool_busy"):
            if after_tool:
                return [("text", TOOL_FINAL_TEXT)]
            if name == "tool_quoted":
                return [("thinking", TOOL_THINKING), ("text", TOOL_INTRO_TEXT),
                        ("shell", QUOTED_COMMAND)]
            if name == "tool_busy":
                return [("text", "Running a busy command.\n"),
                        ("shell", BUSY_COMMAND % params.get("secs", "8"))]
            return [("text", "Running a long command.\n"),
                    ("shell", "sleep %s; echo hello" % params.get("secs", "30"))]
        return [("text", OK_TEXT)]

    @staticmethod
    def slow_deltas(params):
        """Yields `tick N` lines for the slow scenario, sleeping between them."""
        interval = float(params.get("interval", "0.5"))
        deadline = time.time() + float(params.get("duration", "5"))
        number = 0
        while time.time() < deadline:
            number += 1
            yield "tick %d\n" % number
            time.sleep(interval)
        yield SLOW_FINAL

    # ---- Anthropic -------------------------------------------------------------------------

    def anthropic(self, body, name, params):
        if not body.get("tools"):
            items = [("text", "ok")]
        else:
            if self.send_error_scenario("anthropic", name, params):
                return
            messages = body.get("messages") or [{}]
            content = messages[-1].get("content")
            after_tool = isinstance(content, list) and any(
                isinstance(part, dict) and part.get("type") == "tool_result" for part in content)
            items = self.turn(name, params, after_tool)
        stop_reason = "tool_use" if any(kind == "shell" for kind, _ in items) else "end_turn"
        usage_in, usage_cached, usage_out = token_counts(params)
        message_id = next_id("msg")
        model = body.get("model", "claude-mock")
        if not body.get("stream"):
            text = "".join(p if kind == "text" else "slow" + SLOW_FINAL
                           for kind, p in items if kind in ("text", "slow"))
            self.send_json(200, {"id": message_id, "type": "message", "role": "assistant",
                                 "model": model, "content": [{"type": "text", "text": text}],
                                 "stop_reason": stop_reason, "stop_sequence": None,
                                 "usage": {"input_tokens": usage_in, "output_tokens": usage_out}})
            return
        self.start_sse()
        self.sse("message_start", {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": usage_in - usage_cached, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": usage_cached, "output_tokens": 1}}})
        if name == "hang" and body.get("tools"):
            self.sse("ping", {"type": "ping"})
            time.sleep(float(params.get("secs", "60")))
            return
        for index, (kind, payload) in enumerate(items):
            self.anthropic_block(index, kind, payload)
        self.sse("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                   "usage": {"output_tokens": usage_out}})
        self.sse("message_stop", {"type": "message_stop"})
        self.end_sse()

    def anthropic_block(self, index, kind, payload):
        def delta(body):
            self.sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                             "delta": body})

        if kind in ("text", "slow"):
            start = {"type": "text", "text": ""}
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
        else:
            start = {"type": "tool_use", "id": next_id("toolu"), "name": "Bash", "input": {}}
        self.sse("content_block_start", {"type": "content_block_start", "index": index,
                                         "content_block": start})
        if kind == "text":
            for piece in pieces(payload):
                delta({"type": "text_delta", "text": piece})
        elif kind == "slow":
            for piece in self.slow_deltas(payload):
                delta({"type": "text_delta", "text": piece})
        elif kind == "thinking":
            delta({"type": "thinking_delta", "thinking": payload})
            delta({"type": "signature_delta", "signature": "c2ln"})
        else:
            arguments = json.dumps({"command": payload, "description": "run a command",
                                    "timeout": 600000})
            for piece in pieces(arguments, 2):
                delta({"type": "input_json_delta", "partial_json": piece})
        self.sse("content_block_stop", {"type": "content_block_stop", "index": index})

    # ---- OpenAI Responses ------------------------------------------------------------------

    def openai(self, body, name, params):
        if self.send_error_scenario("openai", name, params):
            return
        inputs = body.get("input") or []
        after_tool = any(isinstance(item, dict) and item.get("type", "").endswith("call_output")
                         for item in inputs)
        tools = [tool.get("name") or tool.get("type") for tool in body.get("tools") or []]
        response_id = next_id("resp")
        sequence = [0]

        def event(kind, fields):
            fields = dict(fields, type=kind, sequence_number=sequence[0])
            sequence[0] += 1
            self.sse(kind, fields)

        self.start_sse()
        response = {"id": response_id, "object": "response", "created_at": int(time.time()),
                    "model": body.get("model", "mock-model"), "output": [],
                    "status": "in_progress"}
        event("response.created", {"response": response})
        event("response.in_progress", {"response": response})
        if name == "hang":
            time.sleep(float(params.get("secs", "60")))
            return
        done = []
        for index, (kind, payload) in enumerate(self.turn(name, params, after_tool)):
            if kind in ("text", "slow"):
                item = self.openai_message(event, index, kind, payload)
            elif kind == "thinking":
                item = self.openai_reasoning(event, index, payload)
            else:
                item = self.openai_shell_call(event, index, payload, tools)
            done.append(item)
        usage_in, usage_cached, usage_out = token_counts(params)
        usage = {"input_tokens": usage_in, "input_tokens_details": {"cached_tokens": usage_cached},
                 "output_tokens": usage_out, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": usage_in + usage_out}
        event("response.completed", {"response": dict(response, status="completed",
                                                       output=done, usage=usage)})
        self.end_sse()

    @staticmethod
    def openai_message(event, index, kind, payload):
        item_id = next_id("msg")
        event("response.output_item.added", {"output_index": index, "item": {
            "id": item_id, "type": "message", "status": "in_progress", "role": "assistant",
            "content": []}})
        event("response.content_part.added", {
            "item_id": item_id, "output_index": index, "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []}})
        text = ""
        deltas = pieces(payload) if kind == "text" else Handler.slow_deltas(payload)
        for piece in deltas:
            text += piece
            event("response.output_text.delta", {"item_id": item_id, "output_index": index,
                                                 "content_index": 0, "delta": piece})
        part = {"type": "output_text", "text": text, "annotations": []}
        event("response.output_text.done", {"item_id": item_id, "output_index": index,
                                            "content_index": 0, "text": text})
        event("response.content_part.done", {"item_id": item_id, "output_index": index,
                                             "content_index": 0, "part": part})
        item = {"id": item_id, "type": "message", "status": "completed", "role": "assistant",
                "content": [part]}
        event("response.output_item.done", {"output_index": index, "item": item})
        return item

    @staticmethod
    def openai_reasoning(event, index, text):
        item_id = next_id("rs")
        item = {"id": item_id, "type": "reasoning",
                "summary": [{"type": "summary_text", "text": text}],
                "content": [{"type": "reasoning_text", "text": text}]}
        event("response.output_item.added", {"output_index": index,
                                             "item": dict(item, summary=[], content=[])})
        event("response.reasoning_summary_text.delta", {
            "item_id": item_id, "output_index": index, "summary_index": 0, "delta": text})
        event("response.output_item.done", {"output_index": index, "item": item})
        return item

    @staticmethod
    def openai_shell_call(event, index, command, tools):
        # Codex offers one shell tool; its name and argument shape differ between versions.
        if "exec_command" in tools:
            name, arguments = "exec_command", {"cmd": command, "yield_time_ms": 600000}
        elif "shell_command" in tools:
            name, arguments = "shell_command", {"command": command}
        else:
            name, arguments = "shell", {"command": ["bash", "-lc", command]}
        item = {"id": next_id("fc"), "type": "function_call", "status": "completed",
                "call_id": next_id("call"), "name": name, "arguments": json.dumps(arguments)}
        event("response.output_item.added", {
            "output_index": index, "item": dict(item, arguments="", status="in_progress")})
        event("response.function_call_arguments.delta", {
            "item_id": item["id"], "output_index": index, "delta": item["arguments"]})
        event("response.function_call_arguments.done", {
            "item_id": item["id"], "output_index": index, "arguments": item["arguments"]})
        event("response.output_item.done", {"output_index": index, "item": item})
        return item


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", help="written (atomically) with the chosen port")
    parser.add_argument("--log", required=True, help="request log, one JSON line each")
    parser.add_argument("--scenario-file", required=True)
    parser.add_argument("--lifetime", type=float, default=1800, help="seconds until exit")
    ARGS = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if ARGS.port_file:
        with open(ARGS.port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    print("mock API on 127.0.0.1:%d, pid %d" % (port, os.getpid()), flush=True)
    threading.Timer(ARGS.lifetime, lambda: os._exit(0)).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
