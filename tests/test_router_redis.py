"""Two `vllmlint router` processes sharing one guard in a real `redis-server` (`--state redis://`).

The fake prefill/decode engines are tests/test_router.py's FakeEngine, in this process; the
routers are `python -m vllmlint router` subprocesses; redis-server is Debian's package, started
here on a free 127.0.0.1 port with no persistence (`--save '' --appendonly no`). Without
redis-server the tests skip, except in CI (CI=true) where they fail: .ci/run installs it.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import httpkit
from guard_sequences import Q1, Q2, SYSTEM
from real_vllm import missing
from test_router import FakeEngine, SUNNY, _assistant

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_server(tmp_path):
    """A redis-server on 127.0.0.1:<free port>: yields (port, stop) where stop() ends it."""
    exe = shutil.which("redis-server")
    if exe is None:
        missing("redis-server is not installed (Debian: apt-get install redis-server)")
    try:
        import redis  # noqa: F401 - the client the routers use (the `test` extra installs it)
    except ImportError:
        missing("the redis client package is not installed (pip install 'vllmlint[router-redis]')")
    port = _free_port()
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("redis-server did not answer PING within 20 s")

    def stop() -> None:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)

    try:
        yield port, stop
    finally:
        stop()


async def _start_router(p: FakeEngine, d: FakeEngine, redis_port: int, log_path: Path) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", "vllmlint", "router", "--host", "127.0.0.1", "--port", str(port),
                             "--prefiller-host", "127.0.0.1", "--prefiller-port", str(p.server.port),
                             "--decoder-host", "127.0.0.1", "--decoder-port", str(d.server.port),
                             "--state", f"redis://127.0.0.1:{redis_port}/0"],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    log.close()
    for _ in range(300):                          # up to 30 s on a loaded machine
        if proc.poll() is not None:
            raise AssertionError(f"router exited {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            r = await httpkit.request("GET", f"http://127.0.0.1:{port}/health", timeout=2)
            if r.status == 200:
                return proc, port
        except Exception:                         # noqa: BLE001 - not listening yet
            pass
        await asyncio.sleep(0.1)
    proc.kill()
    raise AssertionError("router did not answer /health within 30 s")


async def _chat(port: int, messages: list[dict], stream: bool = True) -> tuple[str, str]:
    """(X-Vllmlint-Guard, the answer's text) of one turn of conversation c1."""
    r = await httpkit.post_json(f"http://127.0.0.1:{port}/v1/chat/completions",
                                {"model": "qwen3", "messages": messages, "conversation_id": "c1",
                                 "stream": stream}, timeout=20)
    assert r.status == 200, r.body[:300]
    if not stream:
        return r.headers["x-vllmlint-guard"], r.json()["choices"][0]["message"]["content"]
    events = [e[6:] for e in r.body.decode().split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]", events[-3:]
    text = "".join(json.loads(e)["choices"][0]["delta"].get("content") or "" for e in events[:-1]
                   if json.loads(e).get("choices"))
    return r.headers["x-vllmlint-guard"], text


def _attached(p: FakeEngine) -> list[str | None]:
    """D's request id P was asked to pull from, per prefill call (None: fresh, P computes all)."""
    return [(c["kv_transfer_params"] or {}).get("remote_request_id") for c in p.calls()]


def _decode_answers(d: FakeEngine) -> list[dict]:
    return d.answers


def test_a_conversation_alternating_between_two_replicas_is_reused_only_when_exact(redis_server, tmp_path):
    redis_port, stop_redis = redis_server

    async def go():
        p = await FakeEngine("prefill").start()
        d = await FakeEngine("decode", [list(SUNNY) for _ in range(12)]).start()
        routers = []
        try:
            for name in ("a", "b"):
                routers.append(await _start_router(p, d, redis_port, tmp_path / f"router-{name}.log"))
            ports = [port for _, port in routers]
            messages = [SYSTEM, Q1]
            guards = []
            for n in range(6):                    # turns alternate a, b, a, ... each an exact continuation
                guard, text = await _chat(ports[n % 2], messages, stream=n % 3 != 2)
                guards.append(guard)
                messages = messages + [_assistant([text]), {"role": "user", "content": f"And {n}?"}]
            assert guards[0].startswith("miss; reason=no-entry")
            assert all(g.startswith("hit") for g in guards[1:]), guards
            # a rewritten history (the first answer removed) on the other replica: refused
            rewritten = messages[:2] + messages[3:]
            guard, _ = await _chat(ports[0], rewritten)
            assert guard.startswith("miss; reason=edited-history"), guard
            # the same exact continuation to both replicas at once: one takes D's blocks, never both
            _, text = await _chat(ports[1], messages)
            messages = messages + [_assistant([text]), Q2]
            both = await asyncio.gather(_chat(ports[0], messages), _chat(ports[1], messages))
            assert sorted(g.split(";")[0] for g, _ in both) == ["hit", "miss"], both
            attached = [a for a in _attached(p) if a is not None]
            decoded = [c["kv_transfer_params"] for c in d.calls()]
            assert len(attached) == len(set(attached)) == 6          # never the same decode blocks twice
            assert set(attached) <= {kv["remote_request_id"] for kv in
                                     (r.get("kv_transfer_params") for r in _decode_answers(d)) if kv}
            assert len(decoded) == 10
            # the store stops mid-run: requests still succeed, by recompute, and say so
            stop_redis()
            for port in ports:
                guard, text = await _chat(port, messages)
                assert guard.startswith("miss; reason=store-unavailable"), guard
                assert text == "It is sunny."
            assert _attached(p)[-2:] == [None, None]
            metrics = (await httpkit.request("GET", f"http://127.0.0.1:{ports[0]}/metrics", timeout=10)).body.decode()
            assert 'vllmlint_router_guard_decisions_total{decision="miss",reason="store-unavailable"} 1' in metrics
            assert 'vllmlint_router_guard_store_errors_total{op="check"}' in metrics
        finally:
            for proc, _ in routers:
                proc.terminate()
            for proc, _ in routers:
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            await p.server.close()
            await d.server.close()
        logs = (tmp_path / "router-a.log").read_text()
        assert "guard: store" in logs and "unavailable" in logs
    asyncio.run(go())
