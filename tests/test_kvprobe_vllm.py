"""`vllmlint kv-probe` on a real vLLM 0.30.0 P/D pair over NixlConnector (CPU build, nixl 1.5.1):
verify's machinery starts fixtures/verify/pd-nixl, the test warms the pair up (the first NIXL
handshake has a fixed 5 s budget), then runs the command twice as a user would: against the
prefill and decode URLs with decode's log file, and through a router with decode's /metrics.
The tiny model's max_model_len is 512 there, so `--prompt-tokens 8192` is clamped to 507.
About 2 minutes on 2 cores. In CI (CI=true) a missing vLLM or nixl fails rather than skips.
"""
from __future__ import annotations

import json
import time

import pytest

from real_vllm import ROOT, require_nixl, run_json, vllm_or_skip


@pytest.fixture(scope="module")
def pair():
    from vllmlint.verify.deployment import deployment
    from vllmlint.verify.router import BuiltinRouter
    from vllmlint.verify.runner import PD_PROMPT

    vllm = vllm_or_skip()
    require_nixl(vllm)
    with deployment([str(ROOT / "fixtures/verify/pd-nixl")], vllm=str(vllm), connector="nixl", timeout=600) as dep:
        router = BuiltinRouter(dep.prefill_urls, dep.decode_urls, 600)
        url = router.start()
        body = {"model": dep.model, "prompt": PD_PROMPT, "max_tokens": 2, "temperature": 0}
        for _ in range(4):                    # warm-up: first shapes and the first NIXL handshake
            status, _payload = router.route("/v1/completions", body)
            if status == 200:
                break
            time.sleep(2)
        try:
            yield dep, url
        finally:
            router.stop()


def test_prefill_decode_urls_with_decode_log(pair):
    dep, _ = pair
    log = dep.decode[0].proc.log_path
    code, rep, stderr = run_json(["kv-probe", "--prefill", dep.prefill_urls[0], "--decode", dep.decode_urls[0],
                                  "--prompt-tokens", "8192", "--requests", "3", "--decode-log", str(log),
                                  "--log-wait", "30", "--dtype", "float32", "--format", "json"], timeout=900)
    print(json.dumps(rep, indent=1), stderr[-3000:])
    assert rep["errors"] == [] and len(rep["prompt_tokens"]) == 3
    assert rep["clamped"] and rep["target_tokens"] == 507 and all(500 <= n <= 507 for n in rep["prompt_tokens"])
    m = rep["metrics"]
    assert m["transfers"] == 3 and m["avg_ms"] > 0 and m["mb_per_transfer"] > 0
    measured = rep["measured"]                 # /metrics: exactly the probe's window
    assert measured == m and measured["source"] == "/metrics"
    # decode's log: each stats interval's line; the first may also count the warm-up's transfer
    assert 3 <= rep["log"]["transfers"] <= 4 and rep["log"]["avg_ms"] > 0 and rep["log"]["lines"]
    # the tiny model: 2 (K, V) x 2 layers x 1 KV head x head_dim 32 x fp32 = 512 B per token; NIXL moves
    # whole 128-token CPU blocks: 4 blocks = 0.25 MiB for ~507 tokens
    assert 0.2 <= rep["mb_per_request"] <= 0.3
    assert rep["estimate"]["bytes"] == 512 * round(sum(rep["prompt_tokens"]) / 3)
    assert rep["estimate"]["geometry"].startswith("config.json at ")
    assert code == rep["exit_code"] and code in (0, 1)
    assert rep["verdict"].startswith(("ok: 3 transfer(s)", "SLOW: 3 transfer(s)"))


def test_through_a_router_with_decode_metrics(pair):
    dep, url = pair
    code, rep, stderr = run_json(["kv-probe", "--router", url, "--decode", dep.decode_urls[0],
                                  "--tokenize-url", dep.prefill_urls[0], "--prompt-tokens", "300",
                                  "--requests", "2", "--log-wait", "15", "--format", "json"], timeout=900)
    print(json.dumps(rep, indent=1), stderr[-3000:])
    assert rep["errors"] == [] and rep["prompt_tokens"] and all(290 <= n <= 300 for n in rep["prompt_tokens"])
    assert rep["metrics"]["transfers"] == 2 and rep["route"].startswith("router ")
    assert code == rep["exit_code"] and code in (0, 1)
