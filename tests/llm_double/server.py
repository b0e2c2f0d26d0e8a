#!/usr/bin/env python3
"""A loopback OpenAI-compatible chat-completions server for the LLM path's end-to-end runs.

It stands in for a model, so that `kblaster optimize --proposer llm` runs every stage of the LLM
path on a real device (prompt, answer parsing, compile, repair, verification, timing, memory)
without a network: each request is answered with the next scripted answer for the task the
prompt names (its first line, "# Task <id> (...)"), in the order of the answers file, round and
round. The answers are candidate sources of this repository or written inline: some correct,
some that do not compile, some wrong, some that cheat (answers.toml says which is which).

    python3 tests/llm_double/server.py [--answers FILE] [--root DIR] [--port N] [--log FILE]

It prints "listening on http://127.0.0.1:PORT/v1" once it is ready (port 0: any free one), and
appends one JSON line per request to --log (the task, the answer given, the request's size).
Only the standard library is used; any API key is accepted.
"""
import argparse
import itertools
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

TASK_LINE = re.compile(r"^#\s*Task\s+(\S+)", re.MULTILINE)


def load_answers(path, root):
    """{task id: [answer, ...]}, each answer {kind, strategy, text}."""
    if tomllib is None:
        sys.exit("server.py: Python 3.11 or newer is needed (tomllib)")
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    by_task = {}
    for a in doc.get("answer", []):
        if "source" in a:
            with open(os.path.join(root, a["source"]), encoding="utf-8") as f:
                code = f.read()
        else:
            code = a["inline"]
        meta = {"strategy": a["strategy"], "hypothesis": a.get("hypothesis", a["kind"]),
                "predicted_speedup": a.get("predicted_speedup", 1.2),
                "params": a.get("params", {})}
        text = "```json\n" + json.dumps(meta) + "\n```\n```cuda\n" + code.rstrip("\n") + "\n```\n"
        by_task.setdefault(str(a["task"]), []).append({"kind": a["kind"], "strategy": a["strategy"],
                                                       "text": text})
    return by_task


class Double:
    def __init__(self, answers, log_path):
        self.cycles = {task: itertools.cycle(list(enumerate(items))) for task, items in answers.items()}
        self.lock = threading.Lock()
        self.log_path = log_path
        self.requests = 0

    def answer(self, task):
        with self.lock:
            self.requests += 1
            if task not in self.cycles:
                return None, None
            return next(self.cycles[task])

    def log(self, entry):
        if not self.log_path:
            return
        with self.lock, open(self.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def handler_for(double):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet: the log file says what happened
            pass

        def reply(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):  # noqa: N802 (the standard library's name)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self.reply(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            try:
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length) or b"{}")
            except (ValueError, json.JSONDecodeError) as e:
                self.reply(400, {"error": {"message": f"bad request: {e}", "type": "invalid_request"}})
                return
            text = "\n".join(m.get("content", "") if isinstance(m.get("content"), str) else ""
                             for m in request.get("messages", []))
            found = TASK_LINE.search(text)
            task = found.group(1) if found else ""
            n = max(1, int(request.get("n", 1) or 1))
            choices = []
            given = []
            for i in range(n):
                index, a = double.answer(task)
                if a is None:
                    content = "I have no candidate for this task."
                    given.append({"kind": "none"})
                else:
                    content = a["text"]
                    given.append({"kind": a["kind"], "strategy": a["strategy"], "index": index})
                choices.append({"index": i, "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop"})
            prompt_tokens = max(1, len(text) // 4)
            completion_tokens = sum(max(1, len(c["message"]["content"]) // 4) for c in choices)
            # The end of the last message: a repair turn's compiler output or failure says why.
            last = request.get("messages", [{}])[-1].get("content", "")
            double.log({"time": time.time(), "task": task, "n": n, "answers": given,
                        "prompt_chars": len(text), "model": request.get("model", ""),
                        "last_message_tail": last[-3000:] if isinstance(last, str) else ""})
            self.reply(200, {"id": f"double-{double.requests}", "object": "chat.completion",
                             "created": int(time.time()), "model": request.get("model", "double"),
                             "choices": choices,
                             "usage": {"prompt_tokens": prompt_tokens,
                                       "completion_tokens": completion_tokens,
                                       "total_tokens": prompt_tokens + completion_tokens}})

    return Handler


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--answers", default=os.path.join(here, "answers.toml"))
    p.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--log", default="")
    args = p.parse_args(argv)
    double = Double(load_answers(args.answers, args.root), args.log)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler_for(double))
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
