"""`vllmlint replay`: the comparison and report logic (no vLLM), the three modes against fake
engines that corrupt the answer when prefill reuses blocks for an edited history. The real
NixlConnector stack is tests/test_replay_vllm.py."""
from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from guard_sequences import d_params, encode, render, sample
import httpkit
from vllmlint.cli import main as cli_main
from vllmlint.pd.conversations import load
from vllmlint.pd.replay import (EXIT_MISMATCH, EXIT_OK, EXIT_START, Replay, TurnResult, _Capture, compare,
                             parse_answer, render_markdown, render_text, replay_mode, warm_up)
from vllmlint.verify.deployment import counter_delta, parse_counters

ROOT = Path(__file__).resolve().parent.parent


def tr(mode="a", ids=(1, 2, 3), lps=(-0.1, -0.2, -0.3), prompt="h1", turn=1, conv="c", **kw):
    return TurnResult(conv, turn, mode, 200, list(ids) if ids is not None else None,
                      list(lps) if lps is not None else None, prompt_hash=prompt, **kw)


# -- compare ------------------------------------------------------------------------------------
def test_equal_tokens_and_logprobs_match():
    c = compare(tr(), tr("c", lps=(-0.1, -0.2005, -0.3)))
    assert c.match and c.tokens_equal and c.max_logprob_diff == pytest.approx(5e-4) and c.same_prompt


def test_same_tokens_but_moved_logprobs_is_a_mismatch():
    c = compare(tr(), tr("b", lps=(-0.1, -0.25, -0.3)))
    assert not c.match and c.tokens_equal and c.max_logprob_diff == pytest.approx(0.05)
    assert "logprobs differ" in c.why


def test_different_tokens_is_a_mismatch_with_the_position():
    c = compare(tr(), tr("b", ids=(1, 9, 3)))
    assert not c.match and c.first_token_diff == 1 and c.why.startswith("token 1")
    c = compare(tr(), tr("b", ids=(1, 2), lps=(-0.1, -0.2)))
    assert not c.match and c.first_token_diff == 2


def test_history_that_already_differed_is_said():
    c = compare(tr(), tr("b", ids=(7,), lps=(-1,), prompt="other"))
    assert not c.match and not c.same_prompt and "history already differed" in c.why


def test_failed_request_or_missing_logprobs_never_match():
    assert not compare(tr(), tr("c", ids=None, error="502")).match
    assert compare(tr(), tr("c", ids=None, error="502")).why == "request failed"
    assert not compare(tr(error="x"), tr("c")).match
    c = compare(tr(lps=None), tr("c", lps=None))
    assert not c.match and c.why == "no logprobs"


def test_parse_answer_reads_ids_and_logprobs():
    resp = {"choices": [{"message": {"role": "assistant", "content": "hi"}, "token_ids": [5, 6],
                         "logprobs": {"content": [{"token": "h", "logprob": -0.5}, {"token": "i", "logprob": float("-inf")}]}}]}
    msg, ids, lps = parse_answer(resp)
    assert msg["content"] == "hi" and ids == [5, 6] and lps == [-0.5, -1e9]
    assert parse_answer({"choices": [{"message": {}}]})[1:] == (None, None)


# -- the report ---------------------------------------------------------------------------------------
def _replay(c_lps=(-0.1, -0.2, -0.3), b_lps=(-0.1, -0.9, -0.3)) -> Replay:
    rep = Replay()
    rep.results = {"a": [tr("a", turn=1), tr("a", turn=2, prompt="h2")],
                   "b": [tr("b", turn=1), tr("b", turn=2, prompt="h2", lps=b_lps, guard="hit; reason=hit")],
                   "c": [tr("c", turn=1, guard="miss; reason=no-entry"),
                         tr("c", turn=2, prompt="h2", lps=c_lps, guard="miss; reason=edited-history",
                            guard_lines=["guard: miss conversation=c-c reason=edited-history at token 5"])]}
    rep.timings = {"total": 12.0}
    return rep


def test_exit_0_when_guarded_matches_even_if_unguarded_does_not():
    rep = _replay()
    assert rep.exit_code == EXIT_OK
    s = rep.summary()
    assert s["b"] == {"turns": 2, "match": 1, "mismatch": 1, "reused": 1}
    assert s["c"]["match"] == 2 and s["c"]["guard_hits"] == 0
    text = render_text(rep)
    assert "(b) MISMATCH (logprobs differ by 0.7)" in text and "(c) match" in text
    assert "guard: miss conversation=c-c reason=edited-history at token 5" in text
    assert "exit 0" in text
    d = json.loads(json.dumps(rep.as_dict()))
    assert d["exit_code"] == 0 and d["turns"][1]["b_vs_a"]["match"] is False


def test_exit_1_when_guarded_differs_or_is_missing():
    assert _replay(c_lps=(-0.1, -0.2, -0.31)).exit_code == EXIT_MISMATCH
    rep = _replay()
    rep.results["c"].pop()
    assert rep.exit_code == EXIT_MISMATCH
    assert Replay().exit_code == EXIT_MISMATCH          # nothing replayed is not a pass


def test_exit_2_and_vllm_error_line_when_the_stack_did_not_start():
    rep = Replay(error="the deployment did not start (bidirectional on)",
                 error_lines=["decode: RuntimeError: cpu with cuda kv_buffer is not supported. (exit 1)"])
    assert rep.exit_code == EXIT_START
    assert "RuntimeError: cpu with cuda kv_buffer" in render_text(rep)


def test_counters_and_deltas():
    before = parse_counters('vllm:prefix_cache_hits_total{engine="0"} 10\nvllm:prefix_cache_queries_total 100\n'
                            'vllm:nixl_xfer_time_seconds_count 1\nvllm:nixl_xfer_time_seconds_sum 0.04\n'
                            'vllm:nixl_bytes_transferred_sum 1048576\n# HELP x\n')
    after = parse_counters('vllm:prefix_cache_hits_total{engine="0"} 138\nvllm:prefix_cache_queries_total 300\n'
                           'vllm:external_prefix_cache_hits_total 128\n'
                           'vllm:nixl_xfer_time_seconds_count 2\nvllm:nixl_xfer_time_seconds_sum 0.10\n'
                           'vllm:nixl_bytes_transferred_sum 2097152\n')
    d = counter_delta({"prefill": before}, {"prefill": after})["prefill"]
    assert d["prefix_hits"] == 128 and d["prefix_queries"] == 200 and d["external_hits"] == 128
    assert d["transfers"] == 1 and d["avg_transfer_ms"] == pytest.approx(60.0) and d["mb_per_transfer"] == 1.0


def test_kv_extra_is_merged_into_nixl_configs_argv():
    from vllmlint.verify.adapt import ServerPlan
    from vllmlint.verify.deployment import _merge_kv_extra
    kv = {"kv_connector": "NixlConnector", "kv_role": "kv_consumer", "kv_buffer_device": "cpu"}
    plan = ServerPlan(None, "d", "serve", ["vllm", "serve", "/m", "--kv-transfer-config", json.dumps(kv), "--port", "1"],
                      {}, {}, [], 1, None, None, None, kv, "kv_consumer", "NixlConnector")
    _merge_kv_extra(plan, {"bidirectional_kv_xfer": True}, plan.adaptations)
    i = plan.argv.index("--kv-transfer-config")
    assert json.loads(plan.argv[i + 1])["kv_connector_extra_config"] == {"bidirectional_kv_xfer": True}
    assert plan.argv[:3] == ["vllm", "serve", "/m"] and plan.argv[-2:] == ["--port", "1"]
    assert plan.adaptations == ["kv bidirectional_kv_xfer True (replay)"]


# -- the three modes against fake engines ------------------------------------------------------------
class FakePD:
    """Prefill and decode that behave like NixlConnector with bidirectional_kv_xfer, except that
    they *check* what real vLLM does not: a prefill handed D's blocks for a history that is not
    their continuation marks the request stale, and decode's logprobs then move."""

    def __init__(self):
        self.stored: dict[str, list[int]] = {}
        self.n = itertools.count(1)
        self.stale_turns = 0
        self.salts: list[str] = []            # cache_salt of every decode request
        self.fail_prefills = 0                # answer this many prefills 500 (a missed NIXL handshake)

    async def start(self):
        self.p = await httpkit.Server(self.prefill).start("127.0.0.1", 0)
        self.d = await httpkit.Server(self.decode).start("127.0.0.1", 0)
        return self

    async def close(self):
        await self.p.close()
        await self.d.close()

    async def prefill(self, req):
        body = req.json()
        if req.path.endswith("/render"):
            return httpkit.Response.json({"token_ids": encode(render(body["messages"]))})
        if self.fail_prefills:
            self.fail_prefills -= 1
            return httpkit.Response.json({"error": "NIXL transfer failure: handshake_setup_failed"}, status=500)
        kv = body.get("kv_transfer_params") or {}
        prompt = encode(render(body["messages"]))
        stale = False
        if kv.get("remote_block_ids"):
            k = kv["remote_num_tokens"]
            stale = self.stored.get(kv["remote_request_id"], [])[:k] != prompt[:k]
        return httpkit.Response.json({"choices": [{"message": {"content": "x"}}],
                                     "kv_transfer_params": {"do_remote_prefill": True, "remote_block_ids": [[1]],
                                                            "remote_engine_id": "p", "remote_host": "h",
                                                            "remote_port": 1, "fake_stale": stale}})

    async def decode(self, req):
        body = req.json()
        self.salts.append(body.get("cache_salt"))
        kv = body.get("kv_transfer_params") or {}
        prompt = kv.get("prompt_token_ids") or encode(render(body["messages"]))
        output = sample(["Hello", " world"])
        shift = 0.5 if kv.get("fake_stale") else 0.0
        self.stale_turns += bool(shift)
        rid = f"d-{next(self.n)}"
        self.stored[rid] = prompt + output
        choice = {"index": 0, "message": {"role": "assistant", "content": "Hello world"},
                  "logprobs": {"content": [{"token": str(t), "logprob": -0.1 * (i + 1) - shift}
                                           for i, t in enumerate(output)]},
                  "finish_reason": "stop"}
        if body.get("return_token_ids"):
            choice["token_ids"] = output
        return httpkit.Response.json({"choices": [choice], "prompt_token_ids": prompt,
                                     "usage": {"prompt_tokens": len(prompt)},
                                     "kv_transfer_params": d_params(prompt, output, remote_request_id=rid)})


class FakeDep:
    def __init__(self, pd: FakePD):
        self.prefill_urls = [f"http://127.0.0.1:{pd.p.port}"]
        self.decode_urls = [f"http://127.0.0.1:{pd.d.port}"]
        self.model, self.api_key = "tiny", None

    def mark(self):
        return {}

    def counters(self):
        return {}

    def logs_since(self, mark):
        return {}

    def alive(self):
        return {"prefill": True, "decode": True}


CONVS = [
    {"id": "exact", "kind": "exact-continuation", "system": "You are a helpful assistant.",
     "sampling": {"max_tokens": 4}, "turns": [{"user": "Hello"}, {"user": "What about Rome?", "previous": {"op": "echo"}},
                                              {"user": "the city", "previous": {"op": "echo"}}]},
    {"id": "think", "kind": "stripped-reasoning", "system": "You are a helpful assistant.",
     "sampling": {"max_tokens": 4}, "turns": [{"user": "Hello"}, {"user": "What about Rome?", "previous": {"op": "strip_think"}},
                                              {"user": "the city", "previous": {"op": "echo"}}]},
]


def test_three_modes_against_engines_that_show_stale_reuse(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in CONVS) + "\n")
    convs = load(path)

    async def go():
        pd = await FakePD().start()
        cap = _Capture()
        import logging
        logging.getLogger("vllmlint.guard").addHandler(cap)
        logging.getLogger("vllmlint.guard").setLevel(logging.INFO)
        try:
            dep = FakeDep(pd)
            rep = Replay()
            for m in ("a", "b", "c"):
                rep.results[m] = await replay_mode(m, convs, dep, 10, cap)
            return rep, pd
        finally:
            logging.getLogger("vllmlint.guard").removeHandler(cap)
            await pd.close()

    rep, pd = asyncio.run(go())
    rows = {(r["conversation"], r["turn"]): r for r in rep.rows()}
    assert len(rows) == 6
    # (b): the edited turn reuses D's blocks unchecked -> stale -> mismatch; exact turns match
    assert not rows[("think", 2)]["b_vs_a"]["match"]
    assert rows[("exact", 2)]["b_vs_a"]["match"] and rows[("exact", 3)]["b_vs_a"]["match"]
    assert rows[("think", 2)]["b"]["guard"].startswith("hit")
    # (c): the guard reuses the exact continuation and refuses the edit -> everything matches
    assert all(r["c_vs_a"]["match"] for r in rows.values())
    assert rows[("exact", 2)]["c"]["guard"].startswith("hit")
    assert "edited-history" in rows[("think", 2)]["c"]["guard"]
    assert any("reason=edited-history" in l for l in rows[("think", 2)]["c"]["guard_lines"])
    assert rows[("think", 2)]["c"]["expected_guard"] == "miss"
    assert rep.exit_code == EXIT_OK and pd.stale_turns == 1
    # each mode its own prefix-cache namespace (stale blocks of (b) must not reach (c))
    per_mode = [set(pd.salts[i:i + 6]) for i in (0, 6, 12)]
    assert all(len(s) == 1 and None not in s for s in per_mode) and len(set.union(*per_mode)) == 3
    md = render_markdown(rep.as_dict())
    assert "| think | 2 | **MISMATCH** (logprobs differ by 0.5) | match | miss; reason=edited-history" in md
    assert md.count("\n| exact |") + md.count("\n| think |") == 6 and "2/3 turns match" not in md
    assert "(c) guarded** (bidirectional on, reuse only on exact token-id continuation): 6/6 turns match" in md


def test_warm_up_retries_a_missed_handshake_then_reuses_once():
    async def go(fail: int):
        pd = await FakePD().start()
        pd.fail_prefills = fail
        try:
            problems = await warm_up(FakeDep(pd), True, 10)
            return problems, pd
        finally:
            await pd.close()

    problems, pd = asyncio.run(go(0))
    assert problems == [] and len(pd.salts) == 2          # turn 1, then turn 2 reusing D's blocks
    problems, pd = asyncio.run(go(1))
    assert len(problems) == 1 and "warm-up turn 1 try 1: 500" in problems[0] and len(pd.salts) == 2
    problems, pd = asyncio.run(go(99))
    assert len(problems) == 4 and pd.salts == []           # gives up after 4 tries, not fatal


def test_cli_replay_without_vllm_is_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLMLINT_VLLM", str(tmp_path / "no-vllm"))
    monkeypatch.setenv("VLLMLINT_VLLM_VENV", str(tmp_path / "no-venv"))
    monkeypatch.setenv("PATH", str(tmp_path))
    res = CliRunner().invoke(cli_main, ["replay", "--deployment", str(ROOT / "fixtures/verify/pd-nixl"),
                                        "--limit", "1", "--format", "json"])
    assert res.exit_code == 2, res.output
    assert json.loads(res.stdout)["error"]
