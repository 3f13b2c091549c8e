"""`vllmlint replay --router URL` / `--prefill URL --decode URL`: step 5 on a deployment that is
already running. The engines are test_replay's FakePD (they corrupt decode's logprobs when
prefill is handed D's blocks for a history that does not continue them, as real vLLM does
silently); the "user's router" is a real `vllmlint router` process in front of them, once with
the reference proxy's unchecked reuse (`--policy unguarded`) and once guarded. The real vLLM
stack for replay is tests/test_replay_vllm.py."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from click.testing import CliRunner

import httpkit
from test_replay import CONVS, FakePD
from vllmlint.cli import main as cli_main
from vllmlint.pd.replay import EXIT_MISMATCH, EXIT_OK, render_markdown, render_text, run_replay_running
from vllmlint.verify.procs import free_port


class ServedFakePD(FakePD):
    """FakePD plus what a running vLLM also answers: /health, /v1/models, /metrics, /version."""

    async def _get(self, req):
        if req.path == "/v1/models":
            return httpkit.Response.json({"data": [{"id": "tiny"}]})
        if req.path == "/version":
            return httpkit.Response.json({"version": "0.30.0"})
        if req.path == "/metrics":
            return httpkit.Response(200, b"vllm:prompt_tokens_total 1\n", {"content-type": "text/plain"})
        return httpkit.Response.json({})

    async def prefill(self, req):
        return await (self._get(req) if req.method == "GET" else super().prefill(req))

    async def decode(self, req):
        return await (self._get(req) if req.method == "GET" else super().decode(req))


@pytest.fixture
def engines():
    """The fake P and D on a loop of their own (replay runs its own asyncio loops)."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    pd = asyncio.run_coroutine_threadsafe(ServedFakePD().start(), loop).result(10)
    yield pd, f"http://127.0.0.1:{pd.p.port}", f"http://127.0.0.1:{pd.d.port}"
    asyncio.run_coroutine_threadsafe(pd.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)


@pytest.fixture
def convs(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in CONVS) + "\n")
    return str(path)


def start_router(p_url: str, d_url: str, policy: str):
    port = free_port()
    argv = [sys.executable, "-m", "vllmlint", "router", "--host", "127.0.0.1", "--port", str(port),
            "--prefiller-hosts", "127.0.0.1", "--prefiller-ports", p_url.rsplit(":", 1)[1],
            "--decoder-hosts", "127.0.0.1", "--decoder-ports", d_url.rsplit(":", 1)[1], "--policy", policy]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(proc.stderr.read().decode())


@pytest.fixture
def user_router(engines, request):
    _, p_url, d_url = engines
    proc, url = start_router(p_url, d_url, request.param)
    yield url
    os.killpg(proc.pid, 15)
    proc.wait(10)


@pytest.mark.parametrize("user_router", ["unguarded"], indirect=True)
def test_router_that_reuses_by_conversation_id_mismatches_on_the_edited_turn(engines, user_router, convs):
    pd, _, _ = engines
    rep = run_replay_running(convs, router=user_router, timeout=30)
    assert rep.error is None, rep.error
    rows = {(r["conversation"], r["turn"]): r for r in rep.rows()}
    assert len(rows) == 6 and set(rep.results) == {"a", "c"}
    # the baseline went through the same router with a fresh id per turn: nothing reused, all clean
    assert not rows[("think", 2)]["c_vs_a"]["match"]                     # stale reuse, 200, no error
    assert rows[("exact", 2)]["c_vs_a"]["match"] and rows[("exact", 3)]["c_vs_a"]["match"]
    assert rep.exit_code == EXIT_MISMATCH and pd.stale_turns == 1
    text = render_text(rep)
    assert "your router" in text and "(b) not run" not in text and "exit 1: the router under test differs" in text
    assert rep.deployment["model"] == "tiny"              # the router's /v1/models (vllmlint router forwards it)


@pytest.mark.parametrize("user_router", ["guarded"], indirect=True)
def test_guarded_router_with_prefill_decode_baseline_matches(engines, user_router, convs):
    _, p_url, d_url = engines
    rep = run_replay_running(convs, router=user_router, prefill=[p_url], decode=[d_url], timeout=30)
    assert rep.error is None, rep.error
    assert rep.labels["a"] == "plain P -> D routing (no reuse)" and rep.deployment["vllm_version"] == "0.30.0"
    assert all(r["c_vs_a"]["match"] for r in rep.rows()), rep.rows()
    hits = [t.guard for t in rep.results["c"] if (t.guard or "").startswith("hit")]
    assert hits and rep.exit_code == EXIT_OK
    md = render_markdown(rep.as_dict())
    assert "* **(c)** your router" in md and "6/6 turns match (a)" in md


def test_prefill_decode_urls_run_all_three_modes(engines, convs):
    pd, p_url, d_url = engines
    r = CliRunner().invoke(cli_main, ["replay", convs, "--prefill", p_url, "--decode", d_url, "--format", "json",
                                      "--timeout", "30"])
    data = json.loads(r.stdout)
    assert r.exit_code == 0, r.output
    rows = {(t["conversation"], t["turn"]): t for t in data["turns"]}
    assert not rows[("think", 2)]["b_vs_a"]["match"] and rows[("think", 2)]["c_vs_a"]["match"]
    assert "edited-history" in rows[("think", 2)]["c"]["guard"]
    assert data["deployment"]["prefill"] == [p_url]


def test_cli_needs_one_kind_of_target(tmp_path):
    r = CliRunner().invoke(cli_main, ["replay", "--prefill", "http://x"])
    assert r.exit_code == 2 and "both --prefill and --decode" in r.output
    r = CliRunner().invoke(cli_main, ["replay"])
    assert r.exit_code == 2 and "--deployment PATH" in r.output
