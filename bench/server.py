"""`vllmlint server` latency as an editor sees it: a copy of a tree (default ../shared/corpus) as
the workspace, one compose file opened and edited, time to each publishDiagnostics.

    python bench/server.py [TREE] [--edits 10]

Measured (wall clock, this machine): first diagnostics after didOpen (cold: every file parsed),
after each didChange (warm: the parse cache re-parses the edited buffer only; includes the
300 ms debounce), a code action request, and the fix-all resolve. Numbers only; nothing asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = (ROOT / "fixtures" / "VL001" / "compose-list" / "input" / "docker-compose.yml").read_text()


class Client:
    def __init__(self, cwd):
        self.proc = subprocess.Popen([sys.executable, "-m", "vllmlint", "server"], cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.inbox, self.n = queue.Queue(), 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            length = None
            while True:
                line = self.proc.stdout.readline()
                if not line:
                    return
                if not line.strip():
                    break
                if line.lower().startswith(b"content-length"):
                    length = int(line.split(b":")[1])
            msg = json.loads(self.proc.stdout.read(length))
            if "id" in msg and "method" in msg:
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            self.inbox.put(msg)

    def send(self, msg):
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def request(self, method, params):
        self.n += 1
        self.send({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        return self.wait(lambda m: m.get("id") == self.n and "method" not in m)["result"]

    def wait(self, match):
        while True:
            msg = self.inbox.get(timeout=300)
            if match(msg):
                return msg


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tree", nargs="?", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--edits", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        shutil.copytree(args.tree, ws)
        files = sum(1 for p in ws.rglob("*") if p.is_file())
        doc_path = ws / "editor-bench-compose.yml"
        doc_path.write_text(COMPOSE)
        doc = doc_path.as_uri()
        c = Client(tmp)
        t0 = time.perf_counter()
        c.request("initialize", {"processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": {},
                                 "workspaceFolders": [{"uri": ws.as_uri(), "name": "ws"}]})
        c.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        t_init = time.perf_counter() - t0

        def published():
            return c.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == doc)

        t0 = time.perf_counter()
        c.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": doc, "languageId": "yaml", "version": 1, "text": COMPOSE}}})
        published()
        cold = time.perf_counter() - t0
        warm = []
        for i in range(args.edits):
            text = COMPOSE.replace("DEBUG", "DEBUG" + "x" * (i + 1))
            t0 = time.perf_counter()
            c.send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": doc, "version": i + 2}, "contentChanges": [{"text": text}]}})
            published()
            warm.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        c.request("textDocument/codeAction", {"textDocument": {"uri": doc}, "context": {"diagnostics": []},
                                              "range": {"start": {"line": 6, "character": 8},
                                                        "end": {"line": 6, "character": 8}}})
        action = time.perf_counter() - t0
        c.request("shutdown", None)
        c.send({"jsonrpc": "2.0", "method": "exit", "params": None})
        c.proc.wait(timeout=30)
    print(f"workspace: {files} files ({args.tree})")
    print(f"initialize: {t_init * 1000:.0f} ms")
    print(f"didOpen -> diagnostics (cold, whole workspace parsed): {cold * 1000:.0f} ms")
    print(f"didChange -> diagnostics (warm, incl. 300 ms debounce): median {statistics.median(warm) * 1000:.0f} ms, "
          f"max {max(warm) * 1000:.0f} ms over {len(warm)} edits")
    print(f"codeAction (quick fixes + eager fix-all, no resolve support): {action * 1000:.0f} ms")


if __name__ == "__main__":
    main()
