"""Load test of `vllmlint router` against fake P/D engines on 127.0.0.1 (issue 20).

    python bench/router.py                         # this checkout's router + the reference shape
    python bench/router.py --old /tmp/router-main  # also a router from another source tree
    python bench/router.py --quick                 # 1/16/64 clients, 2 s each, 2,000-request soak

Three processes per measured router: the fake engines (P and D on two ports, aiohttp), the router
(`python -m vllmlint router ...`, the CLI path: whatever the CLI does to the garbage collector is
measured too), and this load generator (aiohttp client, one keep-alive connection per client).
Each client runs 4-turn conversations (a ~1,000-token system prompt, 32-token answers, the answer
echoed into the next turn, so a guarded router hits on turns 2-4). At each client count, for each
answer mode (`json`, and `stream`: the client asks to stream and D streams `--events` events
`--event-ms` apart), each router in turn (interleaved: the shared machine's drift hits all alike),
the clients run for `--seconds`; throughput is completed requests / elapsed, latency is per
request, first byte is the time to the first content of the answer (streamed: the first event with
text; JSON: the whole body). Then `--soak` requests at 64 clients with each router's RSS read from
/proc every 2,000. `--smoke` (1 and 4 clients, 1 s, no soak) only checks that the bench runs.

The fake engines speak what both routers need: `/v1/chat/completions/render` (token ids),
prefill's `kv_transfer_params`, `return_token_ids` (in streamed chunks too: prompt ids in the first,
each chunk's own ids), and SSE with `kv_transfer_params` in the last chunk (vLLM 0.33's shape,
which both routers read from D's stream).

"reference" is vLLM's reference multi-turn proxy *shape* (examples/.../disagg_proxy_multiturn.py):
FastAPI + uvicorn, one `httpx.AsyncClient(timeout=None)` per engine, P non-streaming then D
streamed (relayed line by line to a streaming client, re-assembled for the others), an INFO log
line per step - re-implemented here in a few lines (the
upstream file is not vendored), run with an interpreter that has fastapi/uvicorn/httpx
(`--reference-python`, default .vllm-venv/bin/python; skipped when missing). `--reference-file`
runs the upstream file itself instead.

Everything binds 127.0.0.1; every process is killed at the end. Not a test: it takes ~1-2 min
per router on two shared cores. Results: bench/router.md (hand-copied from the printed table).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SYSTEM = ("You are a helpful assistant for a deployment team. " * 20).strip()   # ~1,000 chars/tokens
ANSWER = "Paris is sunny and warm today, yes."[:32]
TURNS = 4
START, END = "\x01", "\x02"


# -- the fake engines ------------------------------------------------------------------------------

def render(messages: list[dict]) -> str:
    return "".join(f"{START}{m['role']}\n{m.get('content') or ''}{END}\n" for m in messages) + f"{START}assistant\n"


def encode(text: str) -> list[int]:
    return list(text.encode())


async def serve_engines(p_port: int, d_port: int, events: int = 22, event_ms: float = 0.0) -> None:
    """P and D on two ports. D streams `events` events (a role chunk, the answer in pieces with
    their token ids, the finish chunk with kv_transfer_params) `event_ms` apart, then [DONE]."""
    from aiohttp import web

    def d_params(prompt: list[int], output: list[int]) -> dict:
        k = len(prompt) + len(output) - 1
        return {"do_remote_prefill": False, "do_remote_decode": True,
                "remote_block_ids": [list(range(100, 100 + (k + 15) // 16))], "remote_engine_id": "d-engine",
                "remote_request_id": uuid.uuid4().hex, "remote_host": "10.0.0.2", "remote_port": 5601,
                "tp_size": 1, "remote_num_tokens": k, "transfer_mode": "pull"}

    def make(role: str):
        async def handle(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            if request.path.endswith("/render"):
                return web.json_response({"request_id": "r", "token_ids": encode(render(body["messages"]))})
            kv = body.get("kv_transfer_params") or {}
            prompt = kv.get("prompt_token_ids") or encode(render(body["messages"]))
            if role == "prefill":
                return web.json_response({
                    "id": "chatcmpl-p", "object": "chat.completion", "model": body.get("model"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "P"},
                                 "finish_reason": "length"}],
                    "kv_transfer_params": {"do_remote_prefill": True, "do_remote_decode": False,
                                           "remote_block_ids": [[1, 2]], "remote_engine_id": "p-engine",
                                           "remote_request_id": "p", "remote_host": "10.0.0.1",
                                           "remote_port": 5600}})
            output = encode(ANSWER) + [ord(END)]
            kvp = d_params(prompt, output)
            if body.get("stream"):
                resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
                await resp.prepare(request)
                ids = bool(body.get("return_token_ids"))
                base = {"id": "chatcmpl-d", "object": "chat.completion.chunk", "created": 1, "model": body.get("model")}
                n = max(1, events - 2)                 # content chunks between the role and the finish chunk
                cuts = [len(ANSWER) * i // n for i in range(n + 1)]
                chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
                           **({"prompt_token_ids": prompt} if ids else {})}]
                for a, b in zip(cuts, cuts[1:]):
                    piece = ANSWER[a:b]
                    chunks.append({"choices": [{"index": 0, "delta": {"content": piece},
                                                **({"token_ids": encode(piece)} if ids else {})}]})
                chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop",
                                            **({"token_ids": [ord(END)]} if ids else {})}],
                               "kv_transfer_params": kvp})
                for i, chunk in enumerate(chunks):
                    if i and event_ms:
                        await asyncio.sleep(event_ms / 1000)
                    await resp.write(b"data: " + json.dumps({**base, **chunk}).encode() + b"\n\n")
                await resp.write(b"data: [DONE]\n\n")
                await resp.write_eof()
                return resp
            choice = {"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}
            out = {"id": "chatcmpl-d", "object": "chat.completion", "created": 1, "model": body.get("model"),
                   "choices": [choice], "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(output)},
                   "kv_transfer_params": kvp}
            if body.get("return_token_ids"):
                out["prompt_token_ids"] = prompt
                choice["token_ids"] = output
            return web.json_response(out)
        return handle

    runners = []
    for role, port in (("prefill", p_port), ("decode", d_port)):
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", make(role))
        app.router.add_post("/v1/chat/completions/render", make(role))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
        runners.append(runner)
    await asyncio.Event().wait()


# -- the reference proxy's shape -------------------------------------------------------------------

REFERENCE_SHAPE = textwrap.dedent('''
    import json, logging, sys, time, uuid
    import httpx, uvicorn
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse
    logging.basicConfig(level=logging.INFO)
    log = logging.getLogger("reference-shape")
    port, p_port, d_port = map(int, sys.argv[1:4])
    P = httpx.AsyncClient(timeout=None, base_url=f"http://127.0.0.1:{p_port}/v1")
    D = httpx.AsyncClient(timeout=None, base_url=f"http://127.0.0.1:{d_port}/v1")
    cache = {}
    app = FastAPI()
    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        req = await request.json()
        rid = str(uuid.uuid4())
        conv = req.pop("conversation_id", "")
        kv = cache.pop(conv, None)
        if kv:
            kv.update(do_remote_decode=True, do_remote_prefill=False)
            log.info("[%s] conv=%s: sending cached blocks", rid, conv)
        else:
            kv = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                  "remote_block_ids": None, "remote_host": None, "remote_port": None}
            log.info("[%s] conv=%s: cache MISS", rid, conv)
        req["kv_transfer_params"] = kv
        pre = dict(req, stream=False, max_tokens=1)
        t0 = time.time()
        r = await P.post("/chat/completions", json=pre, headers={"X-Request-Id": rid})
        r.raise_for_status()
        log.info("[%s] Prefill done in %.0fms", rid, (time.time() - t0) * 1000)
        pkv = r.json().get("kv_transfer_params") or {}
        if pkv:
            pkv["remote_host"] = "127.0.0.1"
            req["kv_transfer_params"] = pkv
        if req.get("stream"):
            async def relay():
                async with D.stream("POST", "/chat/completions", json=req, headers={"X-Request-Id": rid}) as resp:
                    async for line in resp.aiter_lines():
                        if line.startswith("data: ") and line != "data: [DONE]":
                            chunk = json.loads(line[6:])
                            if chunk.get("kv_transfer_params") and conv:
                                cache[conv] = dict(chunk["kv_transfer_params"], remote_host="127.0.0.1")
                        if line:
                            yield line + "\\n\\n"
            return StreamingResponse(relay(), media_type="text/event-stream")
        text, finish, rid_out = "", None, None
        async with D.stream("POST", "/chat/completions", json=dict(req, stream=True),
                            headers={"X-Request-Id": rid}) as resp:
            resp.raise_for_status()
            async for line in resp.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                rid_out = rid_out or chunk.get("id")
                for c in chunk.get("choices", []):
                    text += (c.get("delta") or {}).get("content", "")
                    finish = c.get("finish_reason") or finish
                if chunk.get("kv_transfer_params") and conv:
                    cache[conv] = dict(chunk["kv_transfer_params"], remote_host="127.0.0.1")
                    log.info("conv=%s: cached D blocks", conv)
        return JSONResponse({"id": rid_out, "object": "chat.completion", "created": int(time.time()),
                             "model": req.get("model"), "usage": None, "choices": [
                                 {"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": finish}]})
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
''')


# -- processes -------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} did not open in {timeout:.0f}s")


def start_router(kind: str, src: Path | None, port: int, p_port: int, d_port: int, args) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if kind == "reference":
        if args.reference_file:
            cmd = [args.reference_python, args.reference_file, "--host", "127.0.0.1", "--port", str(port),
                   "--prefiller-host", "127.0.0.1", "--prefiller-port", str(p_port),
                   "--decoder-host", "127.0.0.1", "--decoder-port", str(d_port)]
        else:
            cmd = [args.reference_python, "-c", REFERENCE_SHAPE, str(port), str(p_port), str(d_port)]
    else:
        env["PYTHONPATH"] = str(src)
        cmd = [sys.executable, "-m", "vllmlint", "router", "--host", "127.0.0.1", "--port", str(port),
               "--prefiller-host", "127.0.0.1", "--prefiller-port", str(p_port),
               "--decoder-host", "127.0.0.1", "--decoder-port", str(d_port), "--log-level", "WARNING"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=str(src or ROOT), start_new_session=True)


def stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# -- the load --------------------------------------------------------------------------------------

async def client_loop(session, url: str, stop_at: float, lat: list[float], errors: list[str],
                      budget: list[int] | None = None, stream: bool = False,
                      first: list[float] | None = None) -> None:
    while True:
        cid = uuid.uuid4().hex
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Weather in Paris?"}]
        for turn in range(TURNS):
            if time.monotonic() >= stop_at:
                return
            if budget is not None:
                if budget[0] <= 0:
                    return
                budget[0] -= 1
            body = {"model": "m", "messages": messages, "max_tokens": 32, "conversation_id": cid, "stream": stream}
            t0 = time.monotonic()
            try:
                async with session.post(url, json=body) as r:
                    if r.status != 200 or not stream:
                        data = await r.read()
                        if first is not None:
                            first.append(time.monotonic() - t0)
                        if r.status != 200:
                            errors.append(f"{r.status} {data[:100]!r}")
                            break
                        answer = json.loads(data)["choices"][0]["message"]["content"]
                    else:
                        answer, buf, seen = "", b"", False
                        async for piece in r.content.iter_any():
                            buf += piece
                            while b"\n\n" in buf:
                                event, buf = buf.split(b"\n\n", 1)
                                if not event.startswith(b"data: {"):
                                    continue
                                obj = json.loads(event[6:])
                                if "error" in obj:
                                    raise RuntimeError(f"error event {obj['error']}")
                                for c in obj.get("choices") or []:
                                    text = (c.get("delta") or {}).get("content") or ""
                                    if text and not seen and first is not None:
                                        seen = True           # first content: what a user sees first
                                        first.append(time.monotonic() - t0)
                                    answer += text
            except Exception as err:       # noqa: BLE001 - a bench counts every failure
                errors.append(f"{type(err).__name__}: {err}")
                break
            lat.append(time.monotonic() - t0)
            messages = messages + [{"role": "assistant", "content": answer},
                                   {"role": "user", "content": f"And turn {turn + 2}?"}]


async def level(url: str, clients: int, seconds: float, budget: int | None = None, stream: bool = False) -> dict:
    import aiohttp

    lat: list[float] = []
    first: list[float] = []
    errors: list[str] = []
    conn = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as session:
        t0 = time.monotonic()
        stop_at = t0 + seconds if budget is None else float("inf")
        shared = [budget] if budget is not None else None
        await asyncio.gather(*(client_loop(session, url, stop_at, lat, errors, shared, stream, first)
                               for _ in range(clients)))
        elapsed = time.monotonic() - t0
    lat.sort()
    first.sort()

    def pick(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")
    return {"clients": clients, "stream": stream, "requests": len(lat), "errors": len(errors),
            "first_error": errors[:1], "rps": len(lat) / elapsed, "p50_ms": pick(lat, 0.50),
            "p99_ms": pick(lat, 0.99), "first_p50_ms": pick(first, 0.50), "first_p99_ms": pick(first, 0.99),
            "seconds": elapsed}


async def soak(url: str, pid: int, total: int, clients: int = 64, step: int = 2000) -> dict:
    rss = [round(rss_mb(pid), 1)]
    done, errors = 0, 0
    while done < total:
        r = await level(url, clients, 0, budget=min(step, total - done))
        done += r["requests"] + r["errors"]
        errors += r["errors"]
        rss.append(round(rss_mb(pid), 1))
    return {"requests": done, "errors": errors, "rss_mb": rss}


class Setup:
    """One router under test with its own fake engines (processes), started before any load."""

    def __init__(self, kind: str, src: Path | None, args):
        self.kind = kind
        p_port, d_port, port = free_port(), free_port(), free_port()
        self.engines = subprocess.Popen([sys.executable, __file__, "--serve-engines", str(p_port), str(d_port),
                                         "--events", str(args.events), "--event-ms", str(args.event_ms)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.router: subprocess.Popen | None = None
        try:
            wait_port(p_port, self.engines)
            wait_port(d_port, self.engines)
            self.router = start_router(kind, src, port, p_port, d_port, args)
            wait_port(port, self.router)
            self.url = f"http://127.0.0.1:{port}/v1/chat/completions"
            asyncio.run(level(self.url, 4, 1.0))              # warm up
        except BaseException:
            self.close()
            raise
        self.out: dict = {"router": kind, "levels": []}

    def close(self) -> None:
        stop(self.router)
        stop(self.engines)


def measure_interleaved(setups: list[Setup], args) -> None:
    """Each client count, each mode (JSON, streamed), each router in turn: the load on the shared
    machine drifts alike for all of them."""
    for n in args.clients:
        for stream in args.modes:
            for st in setups:
                r = asyncio.run(level(st.url, n, args.seconds, stream=stream))
                st.out["levels"].append(r)
                print(f"  {st.kind:>10} {'stream' if stream else 'json':>6} {n:>4} clients: {r['rps']:7.1f} req/s  "
                      f"p50 {r['p50_ms']:7.1f} ms  p99 {r['p99_ms']:7.1f} ms  first byte p50 "
                      f"{r['first_p50_ms']:7.1f} p99 {r['first_p99_ms']:7.1f} ms  errors {r['errors']} "
                      f"{r['first_error']}", flush=True)
    if args.soak:
        for st in setups:
            assert st.router is not None
            s = asyncio.run(soak(st.url, st.router.pid, args.soak))
            st.out["soak"] = s
            print(f"  {st.kind:>10} soak {s['requests']} requests, {s['errors']} errors, RSS MB {s['rss_mb']}",
                  flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve-engines", nargs=2, type=int, metavar=("P_PORT", "D_PORT"), help=argparse.SUPPRESS)
    ap.add_argument("--old", type=Path, help="another source tree whose router to measure (e.g. an export of main)")
    ap.add_argument("--no-new", action="store_true", help="skip this checkout's router")
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--reference-python", default=str(ROOT / ".vllm-venv" / "bin" / "python"))
    ap.add_argument("--reference-file", help="the upstream disagg_proxy_multiturn.py, run as is")
    ap.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")], default=[1, 16, 64, 256, 512])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--soak", type=int, default=20_000, help="requests in the RSS soak (0: none)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="1 and 4 clients, 1 s each, no soak: checks the bench runs")
    ap.add_argument("--events", type=int, default=22, help="events in decode's streamed answer (default 22)")
    ap.add_argument("--event-ms", type=float, default=0.0,
                    help="ms between two of decode's events (default 0; 45 makes a ~1 s answer, the issue's case)")
    ap.add_argument("--modes", type=lambda s: [m == "stream" for m in s.split(",")], default=[False, True],
                    help="json,stream (default both)")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    if args.serve_engines:
        asyncio.run(serve_engines(*args.serve_engines, events=args.events, event_ms=args.event_ms))
        return 0
    if args.quick:
        args.clients, args.seconds, args.soak = [1, 16, 64], 2.0, 2000
    if args.smoke:
        args.clients, args.seconds, args.soak = [1, 4], 1.0, 0
    runs = []
    if args.old:
        runs.append(("old", args.old.resolve()))
    if not args.no_new:
        runs.append(("new", ROOT))
    if not args.no_reference:
        if Path(args.reference_python).exists():
            runs.append(("reference", None))
        else:
            print(f"reference: skipped ({args.reference_python} not found)")
    setups: list[Setup] = []
    try:
        for kind, src in runs:
            setups.append(Setup(kind, src, args))
        measure_interleaved(setups, args)
    finally:
        for st in setups:
            st.close()
    results = [st.out for st in setups]
    print()
    print("| router | answer | clients | req/s | p50 ms | p99 ms | first byte p50 ms | first byte p99 ms | errors |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for res in results:
        for r in res["levels"]:
            print(f"| {res['router']} | {'stream' if r['stream'] else 'json'} | {r['clients']} | {r['rps']:.0f} | "
                  f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['first_p50_ms']:.1f} | {r['first_p99_ms']:.1f} | "
                  f"{r['errors']} |")
    for res in results:
        if "soak" in res:
            s = res["soak"]
            print(f"\n{res['router']}: RSS after 0/2k/.../{s['requests']} requests (MB): {s['rss_mb']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
