"""The router of a P/D deployment: the config's own proxy when its script is in the tree, else
vllmlint's built-in one with the reference proxies' flow.

The flow (vLLM's reference proxies: toy_proxy_server, disagg_proxy_demo, ...): send the request
to a prefill server as a non-streaming request with `max_tokens=1` and
`kv_transfer_params = {"do_remote_decode": true, ...}`, then send the original request to a
decode server with the `kv_transfer_params` prefill returned (None for connectors that find the
KV by prompt, like ExampleConnector).
"""
from __future__ import annotations

import itertools
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ..lint.discovery import SKIP_DIRS
from . import client as http

PREFILL_PARAMS = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                  "remote_block_ids": None, "remote_host": None, "remote_port": None}


class BuiltinRouter:
    """A P/D router on 127.0.0.1 that runs in this process (a thread)."""

    def __init__(self, prefill: list[str], decode: list[str], timeout: float,
                 headers: dict[str, str] | None = None):
        self.prefill = itertools.cycle(prefill)
        self.decode = itertools.cycle(decode)
        self.timeout = timeout
        self.headers = headers or {}
        self.records: list[dict] = []
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> str:
        router = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):      # quiet
                pass

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/health":
                    self._send(200, b"{}")
                else:
                    self._send(404, b'{"detail":"Not Found"}')

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._send(400, b'{"error":"bad json"}')
                    return
                if self.path not in ("/v1/completions", "/v1/chat/completions"):
                    self._send(404, b'{"detail":"Not Found"}')
                    return
                status, payload = router.route(self.path, body)
                self._send(status, payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self.url

    def route(self, path: str, body: dict) -> tuple[int, bytes]:
        record: dict = {"path": path}
        self.records.append(record)
        pre = dict(body, stream=False, max_tokens=1, kv_transfer_params=dict(PREFILL_PARAMS))
        if "max_completion_tokens" in pre:
            pre["max_completion_tokens"] = 1
        pre.pop("stream_options", None)
        p_url = next(self.prefill)
        reply = http.post(p_url + path, pre, self.timeout, self.headers)
        record.update(prefill=p_url, prefill_status=reply.status, prefill_s=round(reply.seconds, 3))
        if reply.status != 200:
            record["error"] = f"prefill answered {reply.status or reply.error}"
            return reply.status or 502, reply.body or json.dumps({"error": reply.error}).encode()
        params = (reply.json() or {}).get("kv_transfer_params")
        record["kv_transfer_params"] = params
        dec = dict(body)
        if params:
            dec["kv_transfer_params"] = params
        d_url = next(self.decode)
        reply = http.post(d_url + path, dec, self.timeout, self.headers)
        record.update(decode=d_url, decode_status=reply.status, decode_s=round(reply.seconds, 3))
        return reply.status or 502, reply.body or json.dumps({"error": reply.error}).encode()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def find_script(launch, tree: Path) -> Path | None:
    """The proxy's script inside the tree being verified, if it is there."""
    script = launch.argv[launch.options_start - 1].value if launch.options_start else ""
    if not script.endswith(".py") or "$" in script:
        return None
    cands = []
    p = Path(script)
    if not p.is_absolute():
        cands.append(launch.file.path.parent / p)
        cands.append(tree / p)
    base = p.name
    for cand in cands:
        if cand.is_file() and _inside(cand, tree):
            return cand.resolve()
    root = tree if tree.is_dir() else tree.parent
    for found in sorted(root.rglob(base)):
        if any(part in SKIP_DIRS for part in found.relative_to(root).parts[:-1]):
            continue
        if found.is_file():
            return found.resolve()
    return None


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to((root if root.is_dir() else root.parent).resolve())
        return True
    except ValueError:
        return False


URL_HOST_RE = re.compile(r"(https?://)([A-Za-z0-9_.\-]+)(?::(\d+))?")


def proxy_argv(launch, script: Path, python: str, port: int, prefill: list[int], decode: list[int],
               url_map: dict[tuple[str, int | None], int]) -> tuple[list[str], list[str]]:
    """The proxy's own options with hosts and ports pointed at the servers started here."""
    notes = [f"program: `{' '.join(a.value for a in launch.argv[:launch.options_start])}` -> "
             f"{python} {script}"]
    opts = [a.value for a in launch.options]
    out: list[str] = []
    i = 0
    seen_port = seen_host = False
    while i < len(opts):
        tok = opts[i]
        if tok.startswith("--"):
            name, eq, inline = tok[2:].partition("=")
            values: list[str] = []
            j = i + 1
            if eq:
                values = [inline]
            else:
                while j < len(opts) and not opts[j].startswith("--"):
                    values.append(opts[j])
                    j += 1
            lname = name.lower().replace("_", "-")
            side = prefill if "prefill" in lname else decode if "decode" in lname else None
            comma = len(values) == 1 and "," in values[0]
            if side is not None and ("host" in lname or "port" in lname) and values:
                new = ["127.0.0.1"] * len(side) if "host" in lname else [str(p) for p in side]
                notes.append(f"--{name} {' '.join(values)} -> {' '.join(new)}")
                out += [f"--{name}"] + ([",".join(new)] if comma else new)
                i = j
                continue
            if lname == "port":
                notes.append(f"--port {' '.join(values)} -> {port}")
                out += ["--port", str(port)]
                seen_port = True
                i = j
                continue
            if lname == "host":
                out += ["--host", "127.0.0.1"]
                seen_host = True
                if values != ["127.0.0.1"]:
                    notes.append(f"--host {' '.join(values)} -> 127.0.0.1")
                i = j
                continue
            out.append(tok if eq else f"--{name}")
            out += [_rewrite_urls(v, url_map, notes) for v in values] if not eq else []
            if eq:
                out[-1] = f"--{name}={_rewrite_urls(inline, url_map, notes)}"
            i = j
            continue
        out.append(_rewrite_urls(tok, url_map, notes))
        i += 1
    if not seen_port:
        out += ["--port", str(port)]
        notes.append(f"--port {port} added")
    if not seen_host:
        out += ["--host", "127.0.0.1"]
        notes.append("--host 127.0.0.1 added")
    return [python, str(script)] + out, notes


def _rewrite_urls(value: str, url_map: dict[tuple[str, int | None], int], notes: list[str]) -> str:
    def sub(m: re.Match) -> str:
        host, port = m.group(2).lower(), int(m.group(3)) if m.group(3) else None
        new = url_map.get((host, port)) or url_map.get((host, None))
        if new is None:
            return m.group(0)
        notes.append(f"{m.group(0)} -> http://127.0.0.1:{new}")
        return f"http://127.0.0.1:{new}"
    return URL_HOST_RE.sub(sub, value)


def wait_port(url: str, deadline: float, alive) -> bool:
    while time.monotonic() < deadline:
        if not alive():
            return False
        if http.get(url, timeout=2).status:
            return True
        time.sleep(0.5)
    return False
